// Package degrade is how a fairq component that keeps shared state in
// Redis behaves while Redis is unreachable. Each such component (the
// gateway's admission, backlog counts and idempotency keys, the worker's
// limits and de-duplication, the tenant registry, the fleet registry)
// holds a Dependency: it says so once in the log when Redis fails and
// once when it is back, exports fairq_redis_degraded{component} (1 while
// down), counts every answer given without Redis in
// fairq_redis_fallback_total{component}, and, after a failure, leaves
// Redis alone for a cooldown so that an unreachable Redis does not cost
// every call a timeout. Whether the component goes on with local state
// (redis.fail_open: true) or refuses is its own decision, which the
// Dependency's messages state.
//
// The two metrics are registered once per registry, by NewMetrics, and
// shared by every Dependency of the process.
package degrade

import (
	"cmp"
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the metrics every Dependency of a process shares.
type Metrics struct {
	degraded *prometheus.GaugeVec   // component
	fallback *prometheus.CounterVec // component
}

// NewMetrics returns the metrics of a process's Dependencies, registered
// with reg; nil registers nothing.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		degraded: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fairq_redis_degraded",
			Help: "1 while a component cannot reach Redis and runs on local state or refuses, by component.",
		}, []string{"component"}),
		fallback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_redis_fallback_total",
			Help: "Operations answered from local state because Redis was unreachable, by component.",
		}, []string{"component"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.degraded, m.fallback} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// CooldownDefault is how long Redis is left alone after a failure.
const CooldownDefault = time.Second

// Config configures a Dependency.
type Config struct {
	// Component names the component in the metrics and the log lines:
	// "gateway_backlog", "worker_ratelimit"…; required.
	Component string
	// Metrics are the process's; nil uses metrics of its own, registered
	// nowhere.
	Metrics *Metrics
	// Logger receives the transitions; nil discards.
	Logger *slog.Logger
	// Down is logged, at Warn, when Redis fails and the component goes on
	// without it: what it does until it is back, e.g. "rate limits are
	// local to this process until it is back (fail open)". Up is logged
	// when it is back.
	Down, Up string
	// FailClosed says the component refuses while Redis is down
	// (redis.fail_open: false): then Closed is logged, at Error, instead
	// of Down.
	FailClosed bool
	Closed     string
	// Cooldown is how long Redis is left alone after a failure; zero
	// uses CooldownDefault, negative asks it every time.
	Cooldown time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

// Dependency is a component's view of Redis: up, or down since a failure
// and resting for the cooldown after each one. It is safe for concurrent
// use, and takes no lock while Redis is up: Resting and OK are on the
// path of every request.
type Dependency struct {
	cfg      Config
	degraded prometheus.Gauge
	fallback prometheus.Counter

	down  atomic.Bool
	until atomic.Int64 // unix ns; while down, Redis is not asked before then
}

// New returns a Dependency, up.
func New(cfg Config) *Dependency {
	if cfg.Metrics == nil {
		cfg.Metrics, _ = NewMetrics(nil) // cannot fail without a registry
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	cfg.Down = cmp.Or(cfg.Down, "redis unreachable; going on without it until it is back")
	cfg.Up = cmp.Or(cfg.Up, "redis is back")
	cfg.Closed = cmp.Or(cfg.Closed, "redis unreachable; refusing until it is back (fail closed)")
	if cfg.Cooldown == 0 {
		cfg.Cooldown = CooldownDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Dependency{
		cfg:      cfg,
		degraded: cfg.Metrics.degraded.WithLabelValues(cfg.Component),
		fallback: cfg.Metrics.fallback.WithLabelValues(cfg.Component),
	}
}

// Resting reports whether Redis failed less than the cooldown ago: the
// caller goes without it (and calls Fallback) rather than ask it.
func (d *Dependency) Resting() bool {
	return d.down.Load() && d.cfg.Now().UnixNano() < d.until.Load()
}

// Down reports whether Redis failed and has not answered since.
func (d *Dependency) Down() bool { return d.down.Load() }

// Failed records a failure of Redis; the first after an answer is logged,
// with attrs after the component and the error, and sets
// fairq_redis_degraded. It reports whether it was the first.
func (d *Dependency) Failed(ctx context.Context, err error, attrs ...slog.Attr) bool {
	d.until.Store(d.cfg.Now().Add(d.cfg.Cooldown).UnixNano())
	if d.down.Swap(true) {
		return false
	}
	d.degraded.Set(1)
	level, line := slog.LevelWarn, d.cfg.Down
	if d.cfg.FailClosed {
		level, line = slog.LevelError, d.cfg.Closed
	}
	d.cfg.Logger.LogAttrs(ctx, level, line, append([]slog.Attr{slog.String("component", d.cfg.Component), slog.Any("err", err)}, attrs...)...)
	return true
}

// OK records an answer of Redis; the first after a failure is logged,
// with attrs after the component, and clears fairq_redis_degraded. It
// reports whether Redis was down.
func (d *Dependency) OK(ctx context.Context, attrs ...slog.Attr) bool {
	if !d.down.Load() || !d.down.Swap(false) {
		return false
	}
	d.degraded.Set(0)
	d.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, d.cfg.Up, append([]slog.Attr{slog.String("component", d.cfg.Component)}, attrs...)...)
	return true
}

// Fallback counts an answer given without Redis.
func (d *Dependency) Fallback() { d.fallback.Inc() }

// FallbackFor returns the fallback counter of a component (tests).
func (m *Metrics) FallbackFor(component string) prometheus.Counter {
	return m.fallback.WithLabelValues(component)
}
