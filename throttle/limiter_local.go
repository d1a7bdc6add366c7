package throttle

import (
	"cmp"
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// LocalConfig configures a LocalLimiter.
type LocalConfig struct {
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// SweepEvery is how often, at most, buckets that have refilled
	// completely are dropped (a full bucket is the same as no bucket).
	// Zero uses SweepEveryDefault.
	SweepEvery time.Duration
}

// SweepEveryDefault is LocalConfig.SweepEvery's default.
const SweepEveryDefault = time.Minute

func (c LocalConfig) withDefaults() LocalConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	c.SweepEvery = cmp.Or(c.SweepEvery, SweepEveryDefault)
	return c
}

// LocalLimiter is a RateLimiter whose buckets live in this process, one
// golang.org/x/time/rate.Limiter per key. It is safe for concurrent use and
// starts no goroutines.
type LocalLimiter struct {
	cfg LocalConfig

	mu        sync.Mutex
	buckets   map[string]*localBucket
	lastSweep time.Time
}

type localBucket struct {
	mu   sync.Mutex // makes TokensAt and AllowN one step
	lim  *rate.Limiter
	dead bool // dropped by a sweep; take the key's new bucket
}

var _ RateLimiter = (*LocalLimiter)(nil)

// NewLocalLimiter returns a LocalLimiter with no buckets.
func NewLocalLimiter(cfg LocalConfig) *LocalLimiter {
	cfg = cfg.withDefaults()
	return &LocalLimiter{cfg: cfg, buckets: make(map[string]*localBucket), lastSweep: cfg.Now()}
}

// Allow implements RateLimiter. A key's bucket starts full.
func (l *LocalLimiter) Allow(ctx context.Context, key string, lim Limit, n int) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	if lim.Unlimited() || n <= 0 {
		return unlimited(lim, max(n, 0)), nil
	}
	lim.Burst = max(lim.Burst, 1)
	now := l.cfg.Now()
	b := l.bucket(key, lim, now)
	b.mu.Lock()
	for b.dead {
		b.mu.Unlock()
		b = l.bucket(key, lim, now)
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	if b.lim.Limit() != rate.Limit(lim.Rate) {
		b.lim.SetLimitAt(now, rate.Limit(lim.Rate))
	}
	if b.lim.Burst() != lim.Burst {
		b.lim.SetBurstAt(now, lim.Burst)
	}
	tokens := min(b.lim.TokensAt(now), float64(lim.Burst))
	granted := min(n, int(math.Floor(tokens)))
	if granted > 0 && !b.lim.AllowN(now, granted) {
		granted = 0 // cannot happen: the bucket held these tokens
	}
	left := tokens - float64(granted)
	d := Decision{
		Allowed:    granted,
		Limit:      lim,
		Remaining:  int(math.Floor(left)),
		ResetAfter: seconds((float64(lim.Burst) - left) / lim.Rate),
	}
	if granted < n {
		d.RetryAfter = seconds((1 - left) / lim.Rate)
	}
	return d, nil
}

// bucket returns the bucket of key, creating it full, and now and then drops
// buckets that are full again.
func (l *LocalLimiter) bucket(key string, lim Limit, now time.Time) *localBucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= l.cfg.SweepEvery {
		l.lastSweep = now
		for k, b := range l.buckets {
			if b.mu.TryLock() {
				if b.lim.TokensAt(now) >= float64(b.lim.Burst()) {
					b.dead = true
					delete(l.buckets, k)
				}
				b.mu.Unlock()
			}
		}
	}
	b := l.buckets[key]
	if b == nil {
		b = &localBucket{lim: rate.NewLimiter(rate.Limit(lim.Rate), lim.Burst)}
		b.lim.SetLimitAt(now, rate.Limit(lim.Rate)) // sets the bucket's clock to now
		l.buckets[key] = b
	}
	return b
}

// Len returns the number of buckets held, for tests and metrics.
func (l *LocalLimiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
