package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// otherTenant is the label of tenants beyond the labelled ones.
const otherTenant = "other"

// metrics are the gateway's Prometheus metrics.
type metrics struct {
	requests   *prometheus.CounterVec   // route, status
	duration   *prometheus.HistogramVec // route
	admitted   *prometheus.CounterVec   // tenant
	rejected   *prometheus.CounterVec   // tenant, reason
	replayed   *prometheus.CounterVec   // tenant
	batchSize  prometheus.Histogram
	sends      *prometheus.CounterVec // result: ok, error
	sendErrors *prometheus.CounterVec // reason
	retries    prometheus.Counter
	// bodyBytes and bodyRefused watch the body budget; prechecked counts
	// requests refused before their body was read, by code.
	bodyBytes   prometheus.Gauge
	bodyRefused *prometheus.CounterVec // scope
	prechecked  *prometheus.CounterVec // reason

	labels tenantLabels
}

func newMetrics(reg prometheus.Registerer, maxTenants int) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_http_requests_total",
			Help: "HTTP requests answered by the gateway, by route pattern and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fairq_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_admitted_total",
			Help: "Messages accepted onto a queue, by tenant (configured tenants up to a bound; the rest are \"other\").",
		}, []string{"tenant"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_rejected_total",
			Help: "Messages refused at the front door, by tenant and reason (the error code).",
		}, []string{"tenant", "reason"}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_idempotent_replays_total",
			Help: "Requests answered with the message of an earlier request with the same Idempotency-Key, by tenant.",
		}, []string{"tenant"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fairq_send_batch_size",
			Help:    "Messages per SendMessageBatch call of the gateway.",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
		}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_send_calls_total",
			Help: "SendMessageBatch calls of the gateway, retries included, by result.",
		}, []string{"result"}),
		sendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_send_failures_total",
			Help: "Messages the gateway could not send after its retries (answered 5xx), by reason.",
		}, []string{"reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairq_send_retries_total",
			Help: "Send attempts repeated for the entries a batch call reported failed by a fault of the queue service.",
		}),
		bodyBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_body_bytes_in_flight",
			Help: "Request body bytes reserved by requests being read (gateway.max_inflight_bytes bounds it).",
		}),
		bodyRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_body_budget_refused_total",
			Help: "Requests refused before their body was read because it would pass the body budget, by scope: gateway (503) or tenant (429).",
		}, []string{"scope"}),
		prechecked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_prechecked_total",
			Help: "Enqueue requests refused before their body was read, by reason: the tenant was refused moments ago, or the queue backend is known to be down.",
		}, []string{"reason"}),
		labels: tenantLabels{max: maxTenants, known: make(map[string]struct{})},
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.admitted, m.rejected, m.replayed, m.batchSize, m.sends, m.sendErrors, m.retries, m.bodyBytes, m.bodyRefused, m.prechecked} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// tenantLabels bounds the tenant label: the first max tenants seen get
// their own, every later one is "other", so that the number of series
// cannot grow with the number of tenants.
type tenantLabels struct {
	max   int
	mu    sync.RWMutex
	known map[string]struct{}
}

func (l *tenantLabels) of(tenant string) string {
	l.mu.RLock()
	_, ok := l.known[tenant]
	full := len(l.known) >= l.max
	l.mu.RUnlock()
	if ok {
		return tenant
	}
	if full {
		return otherTenant
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.known) >= l.max {
		return otherTenant
	}
	l.known[tenant] = struct{}{}
	return tenant
}
