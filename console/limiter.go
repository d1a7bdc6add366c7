package console

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// loginLimiter bounds login attempts per client, so that the login form
// answers a guesser a few times a minute rather than as fast as it asks.
// A 256-bit token is out of reach of guessing at any speed; the bound is
// for tokens people chose.
type loginLimiter struct {
	every rate.Limit
	burst int
	max   int // clients remembered; past it, the idle are forgotten
	now   func() time.Time

	mu      sync.Mutex
	clients map[string]*rate.Limiter
}

// overflowClient is the one bucket shared by new clients while the map
// is full of clients that are not idle: a flood from many addresses is
// slowed as one.
const overflowClient = "*"

func newLoginLimiter(every rate.Limit, burst, max int, now func() time.Time) *loginLimiter {
	return &loginLimiter{every: every, burst: burst, max: max, now: now, clients: make(map[string]*rate.Limiter)}
}

// allow takes a token of the client's bucket; when there is none it
// returns false and how long until there is.
func (l *loginLimiter) allow(client string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.clients[client]
	if !ok {
		if len(l.clients) >= l.max {
			l.forgetIdle(now)
		}
		if len(l.clients) >= l.max {
			client = overflowClient
			lim = l.clients[client]
		}
		if lim == nil {
			lim = rate.NewLimiter(l.every, l.burst)
			l.clients[client] = lim
		}
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// forgetIdle drops the clients whose bucket is full again: forgetting
// them changes nothing, a new bucket starts full.
func (l *loginLimiter) forgetIdle(now time.Time) {
	for c, lim := range l.clients {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.clients, c)
		}
	}
}

// clientOf returns the client a login attempt is counted against: the
// peer's address, or its /64 for IPv6, which one subscriber usually has
// whole. Behind a load balancer every client is the balancer, and the
// bound holds for all of them together; X-Forwarded-For is not read,
// since a guesser would write a new one with each guess.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64) // cannot fail: 64 bits of an IPv6 address
		return p.String()
	}
	return a.String()
}
