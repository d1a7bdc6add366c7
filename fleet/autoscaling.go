package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/internal/sharedpoll"
	"github.com/fairq/fairq/queue"
)

// Defaults of AutoscalingConfig.
const (
	AcceptableLatencyDefault = 10 * time.Second
	IntervalDefault          = 10 * time.Second
	WindowDefault            = time.Minute
)

// windowBuckets is the number of parts of the window of processing times:
// the mean forgets the oldest part at a time.
const windowBuckets = 6

// readConcurrency is how many queues a reading reads at once: the worker
// that reads for the fleet reads N + 2 queues, and should be done well
// within the half interval its lease lasts.
const readConcurrency = 8

// DepthReader reads a queue's approximate counts; queue.Backend is one.
type DepthReader interface {
	Depth(ctx context.Context, queue string) (queue.Depth, error)
}

// AutoscalingConfig configures an Autoscaling.
type AutoscalingConfig struct {
	// Depths reads the queues; required.
	Depths DepthReader
	// Queues are the queues whose visible messages are the fleet's
	// backlog: the live queues, the overflow and the backlog queue (not
	// the dead-letter queue); at least one.
	Queues []string
	// SizeFunc returns the number of workers running, as Fleet.Last does;
	// nil counts one.
	SizeFunc func() int
	// AcceptableLatency is the longest a message should wait for a worker
	// (worker.acceptable_latency); zero uses AcceptableLatencyDefault.
	AcceptableLatency time.Duration
	// Slots is the number of messages one worker runs at once
	// (worker.connections): a worker's time per message is the mean
	// processing time divided by it. Zero uses 1, the plain formula of
	// the EC2 Auto Scaling guidance, for workers that run one message at
	// a time.
	Slots int
	// Interval is how often the queues are read; zero uses
	// IntervalDefault.
	Interval time.Duration
	// Window is how far back processing times are averaged; zero uses
	// WindowDefault.
	Window time.Duration
	// Redis, when set, shares the readings across the fleet: each
	// Interval one worker reads the queues and the others adopt its
	// reading (package sharedpoll), so that the fleet makes about one
	// GetQueueAttributes call per queue and interval whatever its size.
	// While Redis cannot be reached, each worker reads them itself. Nil:
	// every worker reads them.
	Redis redis.UniversalClient
	// Prefix goes in front of every Redis key ("fairq:"), as the
	// Fleet's.
	Prefix string
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total (degrade.NewMetrics), which the series of
	// component="autoscaling" join: Redis unreachable, and each reading
	// taken alone for want of it. Nil keeps them registered nowhere.
	RedisMetrics *degrade.Metrics
	// Logger receives a line when reading the queues starts failing and
	// when it works again, and when sharing the readings does; nil
	// discards.
	Logger *slog.Logger
	// Registerer receives the gauges; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
}

func (c AutoscalingConfig) withDefaults() AutoscalingConfig {
	c.AcceptableLatency = cmp.Or(c.AcceptableLatency, AcceptableLatencyDefault)
	c.Slots = cmp.Or(c.Slots, 1)
	c.Interval = cmp.Or(c.Interval, IntervalDefault)
	c.Window = cmp.Or(c.Window, WindowDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.SizeFunc == nil {
		c.SizeFunc = func() int { return 1 }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c AutoscalingConfig) validate() error {
	var errs []error
	if c.Depths == nil {
		errs = append(errs, errors.New("a DepthReader (Depths) is required"))
	}
	if len(c.Queues) == 0 {
		errs = append(errs, errors.New("no queues"))
	}
	if c.AcceptableLatency <= 0 || c.Slots < 1 || c.Interval <= 0 || c.Window < windowBuckets*time.Millisecond {
		errs = append(errs, fmt.Errorf("acceptable latency %v, slots %d, interval %v and window %v must be positive",
			c.AcceptableLatency, c.Slots, c.Interval, c.Window))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fleet: AutoscalingConfig: %w", err)
	}
	return nil
}

// Autoscaling computes the signals to scale the fleet of workers on, as
// the EC2 Auto Scaling guidance for SQS describes them:
//
//	fairq_backlog_per_instance        = visible messages ÷ workers running
//	fairq_backlog_target_per_instance = acceptable latency ÷ time per message
//
// A scaling policy that tracks the first at the value of the second keeps
// the time a message waits near the acceptable latency: with 1,500
// visible messages, 10 workers and a target of 100, the fleet grows to 15.
//
// The visible messages are the ApproximateNumberOfMessages of the live
// queues, the overflow and the backlog queue, read every Interval: all of
// them wait for a worker. Messages delayed in overflow or the backlog
// queue are not visible and do not count until their delay ends: they
// wait for their turn at their tenant's limits, which more workers would
// not bring forward. With Redis, one worker of the
// fleet reads them each Interval and the others adopt its reading, under
// two intervals old. The time per message is the mean
// processing time of the jobs that ended within Window (fed through
// Observe), divided by Slots, since a worker runs Slots messages at once.
// The target is exported once a processing time is known, and kept while
// no job ends.
type Autoscaling struct {
	cfg      AutoscalingConfig
	backlog  prometheus.Gauge
	target   *prometheus.GaugeVec // no labels: absent until known
	mean     *prometheus.GaugeVec
	visible  prometheus.Gauge
	readings *prometheus.CounterVec // source
	sharer   *sharedpoll.Poller[visibleReading]

	mu      sync.Mutex
	buckets [windowBuckets]bucket

	readMu   sync.Mutex // serialises refreshes; guards the fields below
	readAt   int64      // unix ms of the reading under the gauges; 0 before the first
	visibleN int        // its visible messages

	failing bool // the latest read failed; the run goroutine's

	loops lifecycle.Loops
}

// bucket holds the processing times of one part of the window.
type bucket struct {
	epoch int64 // which part of time it holds: unix nanoseconds ÷ part
	n     int64
	sum   time.Duration
}

// NewAutoscaling returns an Autoscaling; Start reads the queues
// periodically.
func NewAutoscaling(cfg AutoscalingConfig) (*Autoscaling, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Autoscaling{
		cfg: cfg,
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_backlog_per_instance",
			Help: "Visible messages of the live, overflow and backlog queues divided by the workers running: scale to keep it near fairq_backlog_target_per_instance.",
		}),
		target: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fairq_backlog_target_per_instance",
			Help: "Acceptable latency divided by a worker's time per message (mean processing time ÷ slots): the backlog per instance a worker clears within the acceptable latency.",
		}, nil),
		mean: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fairq_worker_mean_processing_seconds",
			Help: "Mean processing time of the jobs that ended within the autoscaling window.",
		}, nil),
		visible: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fairq_backlog_visible_messages",
			Help: "Visible messages of the live, overflow and backlog queues, as last read.",
		}),
		readings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fairq_backlog_readings_total",
			Help: "Readings of the queues' visible messages taken up by the autoscaling gauges, by source: poll (this worker read the queues) or redis (another worker's reading, shared).",
		}, []string{"source"}),
	}
	for _, src := range []sharedpoll.Source{sharedpoll.Polled, sharedpoll.Shared} {
		a.readings.WithLabelValues(src.String())
	}
	var err error
	a.sharer, err = sharedpoll.New(sharedpoll.Config[visibleReading]{
		Redis:    cfg.Redis,
		Key:      depthsKey(cfg.Prefix, cfg.Queues),
		LockKey:  depthsLockKey(cfg.Prefix, cfg.Queues),
		Interval: cfg.Interval,
		// The worker that read the queues must find its reading old at
		// its next tick, an interval after the previous one began, give
		// or take the scheduler: without the tenth of slack, a worker
		// alone would read every other interval.
		MaxAge:     cfg.Interval - cfg.Interval/10,
		PollFunc:   a.read,
		EncodeFunc: visibleReading.encode,
		DecodeFunc: func(s string) (visibleReading, error) { return decodeVisibleReading(s, cfg.Queues) },
		Dependency: degrade.New(degrade.Config{
			Component: "autoscaling",
			Metrics:   cfg.RedisMetrics,
			Logger:    cfg.Logger,
			Down:      "autoscaling: shared readings of the queues unavailable, this worker reads them itself",
			Up:        "autoscaling: shared readings of the queues available again",
			Cooldown:  -1, // asked once a refresh, at the refresh's pace
		}),
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: autoscaling: %w", err)
	}
	if reg := cfg.Registerer; reg != nil {
		var errs []error
		for _, c := range []prometheus.Collector{a.backlog, a.target, a.mean, a.visible, a.readings} {
			errs = append(errs, reg.Register(c))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Observe records the processing time of one job; the worker calls it
// when a job's handler returns (consumer.Config.ObserveFunc), whatever the
// outcome. It is safe for concurrent use and does not block.
func (a *Autoscaling) Observe(d time.Duration) {
	part := a.cfg.Window / windowBuckets
	epoch := a.cfg.Now().UnixNano() / int64(part)
	a.mu.Lock()
	b := &a.buckets[epoch%windowBuckets]
	if b.epoch != epoch {
		*b = bucket{epoch: epoch}
	}
	b.n++
	b.sum += max(d, 0)
	a.mu.Unlock()
}

// MeanProcessing returns the mean processing time of the jobs that ended
// within the window, and false if none did.
func (a *Autoscaling) MeanProcessing() (time.Duration, bool) {
	part := a.cfg.Window / windowBuckets
	epoch := a.cfg.Now().UnixNano() / int64(part)
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	var sum time.Duration
	for _, b := range a.buckets {
		if b.n > 0 && b.epoch > epoch-windowBuckets && b.epoch <= epoch {
			n += b.n
			sum += b.sum
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / time.Duration(n), true
}

// Refresh takes a reading of the queues, this worker's or, with Redis, the
// one the fleet shares, and sets the gauges once; Start calls it every
// Interval. On a read error the gauges keep their values; while another
// worker's first reading is under way, the backlog keeps the last one.
func (a *Autoscaling) Refresh(ctx context.Context) error {
	a.readMu.Lock()
	defer a.readMu.Unlock()
	r, source, err := a.sharer.Poll(ctx, a.cfg.Now().UnixMilli())
	if err != nil {
		return err
	}
	if source != sharedpoll.None && r.At >= a.readAt {
		a.readAt, a.visibleN = r.At, 0
		for _, v := range r.Visible {
			a.visibleN += int(v)
		}
		a.visible.Set(float64(a.visibleN))
		a.readings.WithLabelValues(source.String()).Inc()
	}
	if a.readAt != 0 {
		a.backlog.Set(float64(a.visibleN) / float64(max(a.cfg.SizeFunc(), 1)))
	}
	if mean, ok := a.MeanProcessing(); ok && mean > 0 {
		perMessage := mean.Seconds() / float64(a.cfg.Slots)
		a.mean.WithLabelValues().Set(mean.Seconds())
		a.target.WithLabelValues().Set(a.cfg.AcceptableLatency.Seconds() / perMessage)
	}
	return nil
}

// read reads the visible messages of every queue: a reading as of at.
func (a *Autoscaling) read(ctx context.Context, at int64) (visibleReading, error) {
	r := visibleReading{At: at, Queues: a.cfg.Queues, Visible: make([]int64, len(a.cfg.Queues))}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(readConcurrency)
	for i, q := range a.cfg.Queues {
		g.Go(func() error {
			d, err := a.cfg.Depths.Depth(ctx, q)
			if err != nil {
				return fmt.Errorf("depth of %s: %w", q, err)
			}
			r.Visible[i] = int64(d.Visible)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return visibleReading{}, err
	}
	return r, nil
}

// visibleReading is one reading of the queues' visible messages: what a
// worker adopts, and the value it shares through Redis.
type visibleReading struct {
	At      int64    `json:"at"` // unix ms when the reading started
	Queues  []string `json:"queues"`
	Visible []int64  `json:"visible"` // ApproximateNumberOfMessages, by queue
}

// TakenAt is when the reading started, in unix milliseconds.
func (r visibleReading) TakenAt() int64 { return r.At }

func (r visibleReading) encode() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // cannot happen: strings and integers
	}
	return string(b)
}

// decodeVisibleReading parses a shared reading and checks that it is of
// these queues.
func decodeVisibleReading(s string, queues []string) (visibleReading, error) {
	var r visibleReading
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return visibleReading{}, fmt.Errorf("decode shared reading: %w", err)
	}
	if !slices.Equal(r.Queues, queues) || len(r.Visible) != len(queues) {
		return visibleReading{}, fmt.Errorf("shared reading is of queues %q, not of these", r.Queues)
	}
	return r, nil
}

// Start reads the queues at once and every Interval until Stop: ctx only
// carries values (see package lifecycle).
func (a *Autoscaling) Start(ctx context.Context) error {
	ctx, err := a.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("fleet: autoscaling: %w", err)
	}
	a.loops.Go(func() { a.run(ctx) })
	return nil
}

// Stop stops reading the queues, ending a read under way. It is
// idempotent; Stop before Start does nothing.
func (a *Autoscaling) Stop(ctx context.Context) error { return a.loops.Stop(ctx) }

func (a *Autoscaling) run(ctx context.Context) {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, a.cfg.Interval)
		err := a.Refresh(cctx)
		cancel()
		a.health(ctx, err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// health logs the first failure of a streak and the first success after.
func (a *Autoscaling) health(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	was := a.failing
	a.failing = err != nil
	switch {
	case err != nil && !was:
		a.cfg.Logger.Warn("autoscaling: cannot read the queues; fairq_backlog_per_instance keeps its last value", "err", err)
	case err == nil && was:
		a.cfg.Logger.Info("autoscaling: reading the queues again")
	}
}
