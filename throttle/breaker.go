package throttle

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// breaker is the state the failover components share: a primary (Redis)
// that failed is down, left alone for the cooldown, and up again at its
// next answer. fairq_redis_degraded follows it; the transitions are
// reported to the caller so that it can say, once, what they mean for it.
type breaker struct {
	cooldown time.Duration
	degraded prometheus.Gauge

	mu        sync.Mutex
	down      bool
	downUntil time.Time
}

// resting reports whether the primary failed less than the cooldown
// before now, and is not to be asked.
func (b *breaker) resting(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down && now.Before(b.downUntil)
}

// isDown reports whether the primary failed and has not answered since.
func (b *breaker) isDown() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down
}

// up records an answer; it reports whether the primary was down.
func (b *breaker) up() (recovered bool) {
	b.mu.Lock()
	was := b.down
	b.down = false
	b.mu.Unlock()
	if was {
		b.degraded.Set(0)
	}
	return was
}

// fail records a failure at now; it reports whether the primary was up.
func (b *breaker) fail(now time.Time) (first bool) {
	b.mu.Lock()
	was := b.down
	b.down = true
	b.downUntil = now.Add(b.cooldown)
	b.mu.Unlock()
	if !was {
		b.degraded.Set(1)
	}
	return !was
}
