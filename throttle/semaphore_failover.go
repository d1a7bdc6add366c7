package throttle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fairq/fairq/internal/degrade"
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
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total, which the semaphore's series join with
	// component=Component; nil keeps them registered nowhere.
	RedisMetrics *degrade.Metrics
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
	cfg   FailoverSemaphoreConfig
	local *LocalSemaphore // every slot this process holds, from Primary or not
	dep   *degrade.Dependency
	// onFreed are told of the local slots given back (OnFreed); set
	// before the semaphore is used.
	onFreed []func(key string, n int)
}

var _ Semaphore = (*FailoverSemaphore)(nil)

// NewFailoverSemaphore returns a FailoverSemaphore.
func NewFailoverSemaphore(cfg FailoverSemaphoreConfig) (*FailoverSemaphore, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dep := degrade.New(degrade.Config{Component: cfg.Component, Metrics: cfg.RedisMetrics, Logger: cfg.Logger, Cooldown: cfg.Cooldown, Now: cfg.Now,
		Down:       "redis unreachable; concurrency limits are local, limit divided by the fleet size, until it is back (fail open)",
		FailClosed: cfg.FailClosed, Closed: "redis unreachable; refusing slots until it is back (fail closed)",
		Up: "redis is back; concurrency limits are shared again",
	})
	return &FailoverSemaphore{cfg: cfg, local: NewLocalSemaphore(), dep: dep}, nil
}

// TryAcquire implements Semaphore.
func (f *FailoverSemaphore) TryAcquire(ctx context.Context, key string, limit int) (Permit, bool, error) {
	if !f.dep.Resting() {
		p, ok, err := f.cfg.Primary.TryAcquire(ctx, key, limit)
		if err == nil {
			f.dep.OK(ctx)
			if !ok {
				return Permit{}, false, nil
			}
			return f.adopt(key, p), true, nil
		}
		if ctx.Err() != nil {
			return Permit{}, false, ctx.Err() // the caller gave up; Redis is not to blame
		}
		f.failed(ctx, err)
	}
	if f.cfg.FailClosed {
		return Permit{}, false, fmt.Errorf("semaphore %q: %w", key, ErrUnavailable)
	}
	f.dep.Fallback()
	p, ok, err := f.local.TryAcquire(ctx, key, shareOf(limit, f.cfg.FleetSizeFunc()))
	if !ok || len(f.onFreed) == 0 {
		return p, ok, err
	}
	return newPermit(func() {
		p.Release()
		f.tell(key)
	}), true, nil
}

// adopt counts here a slot of key that Primary gave, and returns the
// Permit that gives it back to both.
func (f *FailoverSemaphore) adopt(key string, p Permit) Permit {
	f.local.take(key, 0) // counted, never refused
	return newPermit(func() {
		p.Release()
		f.local.give(key)
		if f.dep.Down() {
			// Primary tells of it once it can, not now: the local
			// slots it frees are told at once.
			f.tell(key)
		}
	})
}

// failed records a failure of Primary.
func (f *FailoverSemaphore) failed(ctx context.Context, err error) {
	if f.cfg.FailClosed {
		f.dep.Failed(ctx, err)
		return
	}
	f.dep.Failed(ctx, err, slog.Int("fleet_size", max(f.cfg.FleetSizeFunc(), 1)))
}

// tell tells the OnFreed functions of one slot of key given back.
func (f *FailoverSemaphore) tell(key string) {
	for _, fn := range f.onFreed {
		fn(key, 1)
	}
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

// OnFreed implements FreedNotifier when Primary does, and otherwise
// tells of nothing. While Primary fails, the slots given back here are
// told at once, and no slot freed elsewhere is.
func (f *FailoverSemaphore) OnFreed(fn func(key string, n int)) bool {
	if n, ok := f.cfg.Primary.(FreedNotifier); ok && n.OnFreed(fn) {
		f.onFreed = append(f.onFreed, fn)
		return true
	}
	return false
}

// Degraded reports whether Primary failed and has not answered since.
func (f *FailoverSemaphore) Degraded() bool { return f.dep.Down() }
