package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// dependency tracks a Redis-backed collaborator that can fail open (the
// gateway goes on with local state) or closed (503): it says so once in
// the log and in fairq_redis_degraded when the collaborator fails and once
// when it is back, and counts each answer given without it. After a
// failure the collaborator is left alone for dependencyCooldown, so that
// an unreachable Redis does not cost every request a timeout.
type dependency struct {
	component  string
	failClosed bool
	log        *slog.Logger
	now        func() time.Time
	degraded   prometheus.Gauge
	fallback   prometheus.Counter
	down       atomic.Bool
	until      atomic.Int64 // unix ns before which it is not asked
}

// dependencyCooldown is how long a failed collaborator is left alone.
const dependencyCooldown = time.Second

func (s *Server) newDependency(component string) *dependency {
	return &dependency{
		component:  component,
		failClosed: s.cfg.FailClosed,
		log:        s.log,
		now:        s.cfg.Now,
		degraded:   s.m.degraded.WithLabelValues(component),
		fallback:   s.m.fallback.WithLabelValues(component),
	}
}

// failed records a failure; it returns the error to answer with when the
// gateway fails closed, nil when it goes on without.
func (d *dependency) failed(ctx context.Context, err error) error {
	d.until.Store(d.now().Add(dependencyCooldown).UnixNano())
	if !d.down.Swap(true) {
		d.degraded.Set(1)
		if d.failClosed {
			d.log.LogAttrs(ctx, slog.LevelError, "redis unreachable; refusing until it is back (fail closed)",
				slog.String("component", d.component), slog.Any("err", err))
		} else {
			d.log.LogAttrs(ctx, slog.LevelWarn, "redis unreachable; going on with local state until it is back (fail open)",
				slog.String("component", d.component), slog.Any("err", err))
		}
	}
	return d.without(err)
}

// resting reports whether the collaborator failed less than the cooldown
// ago; the caller then goes without it, through without.
func (d *dependency) resting() bool {
	return d.down.Load() && d.now().UnixNano() < d.until.Load()
}

// without returns the error to answer with when failing closed, or counts
// an answer given without the collaborator.
func (d *dependency) without(err error) error {
	if d.failClosed {
		return &Error{Code: CodeUnavailable, Detail: "a service the gateway depends on is unavailable; retry", RetryAfter: time.Second, Err: err}
	}
	d.fallback.Inc()
	return nil
}

var errResting = errors.New("redis failed moments ago; not asked")

// ok records a success.
func (d *dependency) ok(ctx context.Context) {
	if d.down.Load() && d.down.Swap(false) {
		d.degraded.Set(0)
		d.log.LogAttrs(ctx, slog.LevelInfo, "redis is back", slog.String("component", d.component))
	}
}
