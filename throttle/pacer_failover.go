package throttle

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fairq/fairq/internal/degrade"
)

// SharedPacer hands out turns of a key from a line the fleet shares;
// *RedisPacer is one.
type SharedPacer interface {
	Reserve(ctx context.Context, key string, rate float64, earliest, horizon time.Duration) (time.Duration, error)
}

var _ SharedPacer = (*RedisPacer)(nil)

// FailoverPacerConfig configures a FailoverPacer.
type FailoverPacerConfig struct {
	// Primary is the fleet's line, a RedisPacer; required.
	Primary SharedPacer
	// FleetSizeFunc returns the number of processes that share the
	// lines, as last known; while Primary fails each process hands out
	// turns at its share of the rate, rate/n. Nil counts one process.
	FleetSizeFunc func() int
	// Cooldown is how long Primary is left alone after it failed before
	// it is asked again; zero uses CooldownDefault.
	Cooldown time.Duration
	// Component labels the metrics and log lines; empty uses "pacer".
	Component string
	// Logger receives one line when Primary fails and one when it is back;
	// nil discards.
	Logger *slog.Logger
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total, which the pacer's series join with
	// component=Component; nil keeps them registered nowhere.
	RedisMetrics *degrade.Metrics
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

func (c FailoverPacerConfig) withDefaults() FailoverPacerConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.FleetSizeFunc == nil {
		c.FleetSizeFunc = func() int { return 1 }
	}
	c.Cooldown = cmp.Or(c.Cooldown, CooldownDefault)
	c.Component = cmp.Or(c.Component, "pacer")
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

// FailoverPacer asks Primary and, while Primary fails, hands out turns
// from a line of this process at its share of the rate, until Primary
// answers again; after a failure Primary is left alone for Cooldown. A
// turn only says when put-off work comes back, never whether it may
// run, so there is nothing to fail closed: it always answers. It says so
// once in the log and in fairq_redis_degraded;
// fairq_redis_fallback_total counts the turns handed out locally.
type FailoverPacer struct {
	cfg   FailoverPacerConfig
	local *Pacer
	dep   *degrade.Dependency
}

var _ SharedPacer = (*FailoverPacer)(nil)

// NewFailoverPacer returns a FailoverPacer.
func NewFailoverPacer(cfg FailoverPacerConfig) (*FailoverPacer, error) {
	if cfg.Primary == nil {
		return nil, errors.New("throttle: FailoverPacerConfig.Primary is required")
	}
	cfg = cfg.withDefaults()
	dep := degrade.New(degrade.Config{Component: cfg.Component, Metrics: cfg.RedisMetrics, Logger: cfg.Logger, Cooldown: cfg.Cooldown, Now: cfg.Now,
		Down: "redis unreachable; turns of spilled messages are this process's, at its share of the rate, until it is back",
		Up:   "redis is back; turns of spilled messages are the fleet's again",
	})
	return &FailoverPacer{cfg: cfg, local: NewPacer(PacerConfig{Now: cfg.Now}), dep: dep}, nil
}

// Reserve takes the next turn of key, from the fleet's line while
// Primary answers; see Pacer.Reserve. Its error is only the caller's
// own: ctx ended.
func (f *FailoverPacer) Reserve(ctx context.Context, key string, rate float64, earliest, horizon time.Duration) (time.Duration, error) {
	if !f.dep.Resting() {
		d, err := f.cfg.Primary.Reserve(ctx, key, rate, earliest, horizon)
		if err == nil {
			f.dep.OK(ctx)
			return d, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err() // the caller gave up; Redis is not to blame
		}
		f.dep.Failed(ctx, err, slog.Int("fleet_size", max(f.cfg.FleetSizeFunc(), 1)))
	}
	f.dep.Fallback()
	return f.local.Reserve(key, rate*Share(f.cfg.FleetSizeFunc()), earliest, horizon), nil
}

// Degraded reports whether Primary failed and has not answered since.
func (f *FailoverPacer) Degraded() bool { return f.dep.Down() }
