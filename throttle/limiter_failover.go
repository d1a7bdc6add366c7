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
	// Registerer receives fairq_redis_degraded and
	// fairq_redis_fallback_total with the label component=Component; nil
	// registers nothing.
	Registerer prometheus.Registerer
	// Component is the value of the component label of the metrics and
	// log lines, so that two limiters of one process (the gateway's
	// admission and the worker's processing limits) are told apart; empty
	// uses ComponentDefault.
	Component string
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// CooldownDefault is FailoverConfig.Cooldown's default.
const CooldownDefault = time.Second

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
	cfg      FailoverConfig
	breaker  breaker
	fallback prometheus.Counter
}

var _ RateLimiter = (*FailoverLimiter)(nil)

// NewFailoverLimiter returns a FailoverLimiter.
func NewFailoverLimiter(cfg FailoverConfig) (*FailoverLimiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	f := &FailoverLimiter{cfg: cfg}
	degraded, fallback, err := redisMetrics(cfg.Registerer, cfg.Component)
	if err != nil {
		return nil, err
	}
	f.breaker = breaker{cooldown: cfg.Cooldown, degraded: degraded}
	f.fallback = fallback
	return f, nil
}

// Allow implements RateLimiter.
func (f *FailoverLimiter) Allow(ctx context.Context, key string, lim Limit, n int) (Decision, error) {
	now := f.cfg.Now()
	if !f.breaker.resting(now) {
		d, err := f.cfg.Primary.Allow(ctx, key, lim, n)
		if err == nil {
			f.up()
			return d, nil
		}
		if ctx.Err() != nil {
			return Decision{}, ctx.Err() // the caller gave up; Redis is not to blame
		}
		f.fail(now, err)
	}
	if f.cfg.FailClosed {
		return Decision{}, fmt.Errorf("rate limit %q: %w", key, ErrUnavailable)
	}
	f.fallback.Inc()
	return f.cfg.Fallback.Allow(ctx, key, lim, n)
}

func (f *FailoverLimiter) up() {
	if f.breaker.up() {
		f.cfg.Logger.Info("redis is back; rate limits are shared again", "component", f.cfg.Component)
	}
}

func (f *FailoverLimiter) fail(now time.Time, err error) {
	if f.breaker.fail(now) {
		if f.cfg.FailClosed {
			f.cfg.Logger.Error("redis unreachable; refusing admission until it is back (fail closed)", "component", f.cfg.Component, "err", err)
		} else {
			f.cfg.Logger.Warn("redis unreachable; rate limits are local to this process until it is back (fail open)", "component", f.cfg.Component, "err", err)
		}
	}
}

// redisMetrics registers, or finds already registered by another
// component, the two metrics every Redis user of fairq exports.
func redisMetrics(reg prometheus.Registerer, component string) (prometheus.Gauge, prometheus.Counter, error) {
	degraded := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fairq_redis_degraded",
		Help: "1 while a component cannot reach Redis and runs on local state or refuses, by component.",
	}, []string{"component"})
	fallback := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fairq_redis_fallback_total",
		Help: "Operations answered from local state because Redis was unreachable, by component.",
	}, []string{"component"})
	if reg != nil {
		var err error
		if degraded, err = registerVec(reg, degraded); err != nil {
			return nil, nil, err
		}
		if fallback, err = registerVec(reg, fallback); err != nil {
			return nil, nil, err
		}
	}
	return degraded.WithLabelValues(component), fallback.WithLabelValues(component), nil
}

// registerVec registers c, or returns the equal collector registered before.
func registerVec[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
