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

// FailoverConfig configures a FailoverLimiter.
type FailoverConfig struct {
	// Primary is the shared limiter, a RedisLimiter; required.
	Primary RateLimiter
	// Fallback answers while Primary fails and FailClosed is false; nil
	// uses a new LocalLimiter with Now.
	Fallback RateLimiter
	// FailClosed refuses with ErrUnavailable while Primary fails, instead
	// of falling back (redis.fail_open: false).
	FailClosed bool
	// Cooldown is how long Primary is left alone after it failed before it
	// is asked again; zero uses CooldownDefault.
	Cooldown time.Duration
	// Logger receives one line when Primary fails and one when it is back;
	// nil discards.
	Logger *slog.Logger
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total, which the limiter's series join with
	// the label component=Component; nil keeps them registered nowhere.
	RedisMetrics *degrade.Metrics
	// Component is the value of the component label of the metrics and
	// log lines, so that two limiters of one process (the gateway's
	// admission and the worker's processing limits) are told apart; empty
	// uses ComponentDefault.
	Component string
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// CooldownDefault is FailoverConfig.Cooldown's default.
const CooldownDefault = degrade.CooldownDefault

// ComponentDefault is FailoverConfig.Component's default.
const ComponentDefault = "ratelimit"

func (c FailoverConfig) withDefaults() FailoverConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Fallback == nil {
		c.Fallback = NewLocalLimiter(LocalConfig{Now: c.Now})
	}
	c.Cooldown = cmp.Or(c.Cooldown, CooldownDefault)
	c.Component = cmp.Or(c.Component, ComponentDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

func (c FailoverConfig) validate() error {
	if c.Primary == nil {
		return errors.New("throttle: FailoverConfig.Primary is required")
	}
	return nil
}

// FailoverLimiter asks Primary and, when Primary fails, answers from
// Fallback (fail open) or with ErrUnavailable (fail closed) until Primary
// answers again. After a failure Primary is left alone for Cooldown, so
// that an unreachable Redis does not cost every request a timeout.
type FailoverLimiter struct {
	cfg FailoverConfig
	dep *degrade.Dependency
}

var _ RateLimiter = (*FailoverLimiter)(nil)

// NewFailoverLimiter returns a FailoverLimiter.
func NewFailoverLimiter(cfg FailoverConfig) (*FailoverLimiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dep := degrade.New(degrade.Config{Component: cfg.Component, Metrics: cfg.RedisMetrics, Logger: cfg.Logger, Cooldown: cfg.Cooldown, Now: cfg.Now,
		Down:       "redis unreachable; rate limits are local to this process until it is back (fail open)",
		FailClosed: cfg.FailClosed, Closed: "redis unreachable; refusing admission until it is back (fail closed)",
		Up: "redis is back; rate limits are shared again",
	})
	return &FailoverLimiter{cfg: cfg, dep: dep}, nil
}

// Allow implements RateLimiter.
func (f *FailoverLimiter) Allow(ctx context.Context, key string, lim Limit, n int) (Decision, error) {
	if !f.dep.Resting() {
		d, err := f.cfg.Primary.Allow(ctx, key, lim, n)
		if err == nil {
			f.dep.OK(ctx)
			return d, nil
		}
		if ctx.Err() != nil {
			return Decision{}, ctx.Err() // the caller gave up; Redis is not to blame
		}
		f.failed(ctx, err)
	}
	if f.cfg.FailClosed {
		return Decision{}, fmt.Errorf("rate limit %q: %w", key, ErrUnavailable)
	}
	f.dep.Fallback()
	return f.cfg.Fallback.Allow(ctx, key, lim, n)
}

// failed records a failure of Primary.
func (f *FailoverLimiter) failed(ctx context.Context, err error) { f.dep.Failed(ctx, err) }
