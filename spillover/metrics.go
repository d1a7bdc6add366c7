package spillover

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Limiter's per-tenant collectors; the tenant label is
// bounded (see labels).
type metrics struct {
	inFlight *prometheus.GaugeVec
	spilled  *prometheus.CounterVec
	held     *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fairq_worker_tenant_in_flight",
			Help: "Messages of a tenant this worker is running: dispatched and not yet ended.",
		}, []string{"tenant"}),
		spilled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_worker_tenant_spilled_total",
			Help: "Messages of a tenant spilled to the overflow queue by its limits, by reason: rate, concurrency, unavailable.",
		}, []string{"tenant", "reason"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_worker_tenant_held_total",
			Help: "Messages of a tenant held in the worker for a moment, rather than spilled, until its next token or a free slot, by reason: rate, concurrency.",
		}, []string{"tenant", "reason"}),
	}
	if reg == nil {
		return m, nil
	}
	return m, errors.Join(reg.Register(m.inFlight), reg.Register(m.spilled), reg.Register(m.held))
}
