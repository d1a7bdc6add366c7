package sharding

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Reading sources, the values of the source label.
const (
	sourcePoll  = "poll"  // this process read the queues
	sourceRedis = "redis" // another process's reading, shared through Redis
)

type metrics struct {
	depth       *prometheus.GaugeVec   // fairq_queue_depth{queue}
	stale       prometheus.Gauge       // fairq_shard_depth_stale
	randomPicks prometheus.Counter     // fairq_shard_random_picks_total
	polls       *prometheus.CounterVec // fairq_shard_depth_polls_total{result}
	readings    *prometheus.CounterVec // fairq_shard_depth_readings_total{source}
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fairq_queue_depth",
			Help: "Last reading of a live queue's depth: approximate visible plus in-flight messages.",
		}, []string{"queue"}),
		stale: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_shard_depth_stale",
			Help: "1 while queue depth readings are too old to trust and shard picks are random, else 0.",
		}),
		randomPicks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairq_shard_random_picks_total",
			Help: "Queue picks made at random within the shard because depth readings were stale.",
		}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_shard_depth_polls_total",
			Help: "Polls of the live queues' depths made by this process, by result (ok, error).",
		}, []string{"result"}),
		readings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_shard_depth_readings_total",
			Help: "Depth readings adopted, by source: poll (this process) or redis (shared by another).",
		}, []string{"source"}),
	}
	m.stale.Set(1)
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.depth, m.stale, m.randomPicks, m.polls, m.readings} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
