package consumer

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of fairq_worker_processed_total.
const (
	outcomeSuccess      = "success"       // handler succeeded; deleted
	outcomeRetry        = "retry"         // failed; back after backoff
	outcomeRetryAfter   = "retry_after"   // asked to come back later; not a failure
	outcomeDeadLettered = "dead_lettered" // moved to the dead-letter queue
	outcomeDropped      = "dropped"       // deleted unprocessed (drop_age or Limiter)
	outcomeReleased     = "released"      // given back at shutdown
	outcomeDuplicate    = "duplicate"     // a copy of a message that ran; deleted without a push
	outcomePurged       = "purged"        // enqueued before its tenant's purge instant; deleted unseen
	outcomeParked       = "parked"        // its tenant is paused: held in flight until resumed
)

// metrics are the worker's Prometheus collectors. Labels are bounded: queue
// names of the pool, fixed outcomes and reasons; never a tenant.
type metrics struct {
	receives          *prometheus.CounterVec
	emptyReceives     *prometheus.CounterVec
	receiveErrors     *prometheus.CounterVec
	processed         *prometheus.CounterVec
	spilled           *prometheus.CounterVec
	deadLettered      prometheus.Counter
	inFlight          prometheus.Gauge
	busy              prometheus.Gauge
	pollers           prometheus.Gauge
	watched           prometheus.Gauge
	shareFallback     prometheus.Gauge
	ageFirst          prometheus.Histogram
	ageProcessing     prometheus.Histogram
	duration          prometheus.Histogram
	heartbeats        prometheus.Counter
	heartbeatFailures prometheus.Counter
	batchErrors       *prometheus.CounterVec
}

// ageBuckets run from 10 ms to about 3 hours.
var ageBuckets = prometheus.ExponentialBuckets(0.01, 3, 14)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		receives: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_worker_receives_total",
			Help: "Receive calls made, by queue.",
		}, []string{"queue"}),
		emptyReceives: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_worker_empty_receives_total",
			Help: "Receive calls that returned no message, by queue (SQS bills them).",
		}, []string{"queue"}),
		receiveErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_worker_receive_errors_total",
			Help: "Receive calls that failed, by queue.",
		}, []string{"queue"}),
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_worker_processed_total",
			Help: "Messages whose delivery ended, by outcome: success, retry, retry_after, dead_lettered, dropped, released, duplicate, purged, parked.",
		}, []string{"outcome"}),
		spilled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_worker_spilled_total",
			Help: "Messages moved instead of dispatched, counted once the copy is sent, by reason: rate, concurrency, aged, or a Limiter's own.",
		}, []string{"reason"}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairq_worker_dead_lettered_total",
			Help: "Messages moved to the dead-letter queue.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_worker_in_flight",
			Help: "Messages received and not yet deleted, moved or given back.",
		}),
		busy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_worker_busy_slots",
			Help: "Worker slots reserved or running a job, of worker.connections.",
		}),
		pollers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_worker_pollers",
			Help: "Receive loops running.",
		}),
		watched: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_worker_queues_watched",
			Help: "Live queues this worker receives from: its share of the pool (worker.watchers_per_queue), or all of them.",
		}),
		shareFallback: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_worker_watching_all_queues",
			Help: "1 while the worker receives from every live queue because it is not in the fleet registry (Redis unreachable, or not reached yet); 0 while it watches its share.",
		}),
		ageFirst: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fairq_worker_age_at_first_attempt_seconds",
			Help:    "Time from enqueue to the first dispatch of a message: the early warning of falling behind.",
			Buckets: ageBuckets,
		}),
		ageProcessing: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fairq_worker_age_at_processing_seconds",
			Help:    "Time from enqueue to each dispatch of a message.",
			Buckets: ageBuckets,
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fairq_worker_processing_seconds",
			Help:    "Time the handler took, whatever the outcome.",
			Buckets: ageBuckets,
		}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairq_worker_heartbeats_total",
			Help: "Visibility extensions made for running jobs.",
		}),
		heartbeatFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairq_worker_heartbeat_failures_total",
			Help: "Visibility extensions that failed.",
		}),
		batchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_worker_batch_errors_total",
			Help: "Entries of delete, change-visibility and send batches that failed, by operation.",
		}, []string{"op"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{
		m.receives, m.emptyReceives, m.receiveErrors, m.processed, m.spilled, m.deadLettered,
		m.inFlight, m.busy, m.pollers, m.watched, m.shareFallback, m.ageFirst, m.ageProcessing, m.duration,
		m.heartbeats, m.heartbeatFailures, m.batchErrors,
	} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
