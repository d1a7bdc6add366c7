package throttle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// FailoverSemaphoreConfig configures a FailoverSemaphore.
type FailoverSemaphoreConfig struct {
	// Primary is the shared semaphore, a RedisSemaphore; required.
	Primary Semaphore
	// FailClosed refuses with ErrUnavailable while Primary fails, instead
	// of falling back to local slots (redis.fail_open: false).
	FailClosed bool
	// FleetSizeFunc returns the number of processes that share the
	// limits, as last known; while Primary fails each process allows
	// itself ⌈limit/n⌉ slots of a key. Nil counts one process.
	FleetSizeFunc func() int
	// Cooldown is how long Primary is left alone after it failed before
	// it is asked again; zero uses CooldownDefault.
	Cooldown time.Duration
	// Component labels the metrics and log lines; empty uses
	// "semaphore".
	Component string
	// Logger receives one line when Primary fails and one when it is back;
	// nil discards.
	Logger *slog.Logger
	// Registerer receives fairq_redis_degraded and
	// fairq_redis_fallback_total with component=Component; nil registers
	// nothing.
	Registerer prometheus.Registerer
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

func (c FailoverSemaphoreConfig) withDefaults() FailoverSemaphoreConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FleetSizeFunc == nil {
		c.FleetSizeFunc = func() int { return 1 }
	}
	c.Cooldown = cmp.Or(c.Cooldown, CooldownDefault)
	c.Component = cmp.Or(c.Component, "semaphore")
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

func (c FailoverSemaphoreConfig) validate() error {
	if c.Primary == nil {
		return errors.New("throttle: FailoverSemaphoreConfig.Primary is required")
	}
	return nil
}

// FailoverSemaphore asks Primary and, while Primary fails, answers from
// slots counted in this process (fail open) or with ErrUnavailable (fail
// closed) until Primary answers again; after a failure Primary is left
// alone for Cooldown. Failing open, a process allows itself ⌈limit/n⌉
// slots of a key for a fleet of n, counting the slots it took from
// Primary before the failure and still holds, so that the fleet stays
// near the shared limit. It says so once in the log and in
// fairq_redis_degraded; fairq_redis_fallback_total counts the answers
// given locally.
type FailoverSemaphore struct {
	cfg      FailoverSemaphoreConfig
	local    *LocalSemaphore // every slot this process holds, from Primary or not
	breaker  breaker
	fallback prometheus.Counter
}

var _ Semaphore = (*FailoverSemaphore)(nil)

// NewFailoverSemaphore returns a FailoverSemaphore.
func NewFailoverSemaphore(cfg FailoverSemaphoreConfig) (*FailoverSemaphore, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	f := &FailoverSemaphore{cfg: cfg, local: NewLocalSemaphore()}
	degraded, fallback, err := redisMetrics(cfg.Registerer, cfg.Component)
	if err != nil {
		return nil, err
	}
	f.breaker = breaker{cooldown: cfg.Cooldown, degraded: degraded}
	f.fallback = fallback
	return f, nil
}

// TryAcquire implements Semaphore.
func (f *FailoverSemaphore) TryAcquire(ctx context.Context, key string, limit int) (Permit, bool, error) {
	now := f.cfg.Now()
	if !f.breaker.resting(now) {
		p, ok, err := f.cfg.Primary.TryAcquire(ctx, key, limit)
		if err == nil {
			f.up()
			if !ok {
				return Permit{}, false, nil
			}
			f.local.take(key, 0) // counted, never refused
			return newPermit(func() {
				p.Release()
				f.local.give(key)
			}), true, nil
		}
		if ctx.Err() != nil {
			return Permit{}, false, ctx.Err() // the caller gave up; Redis is not to blame
		}
		f.fail(now, err)
	}
	if f.cfg.FailClosed {
		return Permit{}, false, fmt.Errorf("semaphore %q: %w", key, ErrUnavailable)
	}
	f.fallback.Inc()
	return f.local.TryAcquire(ctx, key, shareOf(limit, f.cfg.FleetSizeFunc()))
}

// shareOf returns ⌈limit/n⌉, at least one; a limit of zero or less stays
// no limit.
func shareOf(limit, n int) int {
	if limit <= 0 {
		return limit
	}
	n = max(n, 1)
	return max(1, (limit+n-1)/n)
}

// Degraded reports whether Primary failed and has not answered since.
func (f *FailoverSemaphore) Degraded() bool { return f.breaker.isDown() }

func (f *FailoverSemaphore) up() {
	if f.breaker.up() {
		f.cfg.Logger.Info("redis is back; concurrency limits are shared again", "component", f.cfg.Component)
	}
}

func (f *FailoverSemaphore) fail(now time.Time, err error) {
	if !f.breaker.fail(now) {
		return
	}
	if f.cfg.FailClosed {
		f.cfg.Logger.Error("redis unreachable; refusing slots until it is back (fail closed)", "component", f.cfg.Component, "err", err)
		return
	}
	f.cfg.Logger.Warn("redis unreachable; concurrency limits are local, limit divided by the fleet size, until it is back (fail open)",
		"component", f.cfg.Component, "fleet_size", max(f.cfg.FleetSizeFunc(), 1), "err", err)
}
