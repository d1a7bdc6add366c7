package gateway

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// dependency tracks a Redis-backed collaborator that can fail open (the
// gateway goes on with local state) or closed (503): it says so once in
// the log and in fairq_redis_degraded when the collaborator fails and once
// when it is back, and counts each answer given without it.
type dependency struct {
	component  string
	failClosed bool
	log        *slog.Logger
	degraded   prometheus.Gauge
	fallback   prometheus.Counter
	down       atomic.Bool
}

func (s *Server) newDependency(component string) *dependency {
	return &dependency{
		component:  component,
		failClosed: s.cfg.FailClosed,
		log:        s.log,
		degraded:   s.m.degraded.WithLabelValues(component),
		fallback:   s.m.fallback.WithLabelValues(component),
	}
}

// failed records a failure; it returns the error to answer with when the
// gateway fails closed, nil when it goes on without.
func (d *dependency) failed(ctx context.Context, err error) error {
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
	if d.failClosed {
		return &Error{Code: CodeUnavailable, Detail: "a service the gateway depends on is unavailable; retry", RetryAfter: 1e9, Err: err}
	}
	d.fallback.Inc()
	return nil
}

// ok records a success.
func (d *dependency) ok(ctx context.Context) {
	if d.down.Load() && d.down.Swap(false) {
		d.degraded.Set(0)
		d.log.LogAttrs(ctx, slog.LevelInfo, "redis is back", slog.String("component", d.component))
	}
}
