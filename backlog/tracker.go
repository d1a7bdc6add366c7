package backlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/queue"
)

// Defaults of TrackerConfig.
const (
	ReconcileEveryDefault = time.Minute
	CallTimeoutDefault    = 2 * time.Second
	KeepFreshDefault      = 2 * time.Second
)

// depthTimeout bounds the reading of one queue's depth for reconciliation.
const depthTimeout = 5 * time.Second

// DepthReader reads a queue's approximate counts; queue.Backend is one.
type DepthReader interface {
	Depth(ctx context.Context, queue string) (queue.Depth, error)
}

// TrackerConfig configures a Tracker.
type TrackerConfig struct {
	// Counter holds the counts; required.
	Counter *Counter
	// FailClosed makes Get answer ErrUnavailable while Redis, behind
	// Counter, is unreachable (redis.fail_open: false); by default Get
	// answers that the count is unknown, and admission goes on without
	// backpressure.
	FailClosed bool
	// Depths reads the queues for reconciliation; nil never reconciles (a
	// worker's tracker: the gateways reconcile).
	Depths DepthReader
	// Queues are the queues whose messages are the tenants' backlogs: the
	// live queues, the overflow and the backlog queue.
	Queues []string
	// ReconcileEvery is how often the counts are capped at the queues'
	// total (see Counter.Reconcile); zero uses ReconcileEveryDefault,
	// negative never.
	ReconcileEvery time.Duration
	// CallTimeout bounds one call to Counter from the goroutine; zero uses
	// CallTimeoutDefault.
	CallTimeout time.Duration
	// KeepFresh is how long after a Get (or Fresh) of a tenant its count
	// is read again in the background, all such tenants together in one
	// call every half of the Counter's MaxStale, so that a Get within it
	// answers from the cache instead of waiting on Redis; zero uses
	// KeepFreshDefault, negative never. Without Redis, or with a
	// negative MaxStale, there is no cache to keep.
	KeepFresh time.Duration
	// Logger receives the failures of the calls; nil discards.
	Logger *slog.Logger
	// Registerer receives fairq_worker_backlog_decrements_dropped_total;
	// nil registers nothing.
	Registerer prometheus.Registerer
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total (degrade.NewMetrics), which the series of
	// component="backlog" join; nil keeps them registered nowhere.
	RedisMetrics *degrade.Metrics
}

func (c TrackerConfig) withDefaults() TrackerConfig {
	c.ReconcileEvery = cmp.Or(c.ReconcileEvery, ReconcileEveryDefault)
	c.CallTimeout = cmp.Or(c.CallTimeout, CallTimeoutDefault)
	c.KeepFresh = cmp.Or(c.KeepFresh, KeepFreshDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

func (c TrackerConfig) validate() error {
	if c.Counter == nil {
		return errors.New("backlog: TrackerConfig.Counter is required")
	}
	if c.CallTimeout < 0 {
		return fmt.Errorf("backlog: call timeout %v is negative", c.CallTimeout)
	}
	return nil
}

// Tracker is a process's view of the tenants' backlogs, over a Counter:
// the gateway adds what SQS took, the worker takes away what ended, and
// admission reads the counts. Add and Done never block. With a Counter in
// process they apply at once; with Redis they are gathered per tenant
// and a goroutine of the Tracker applies them, one call per tenant for
// all that came since its last round, so that a Redis that does not
// answer never holds up a 202 or a delete batch. Between Start and Stop
// a second goroutine reconciles the counts with the queues' depths
// (given Depths), and with Redis a third keeps the counts of the tenants
// asked for lately fresh in the Counter's cache (KeepFresh), so that Get
// answers them without a call of its own.
//
// While Redis is unreachable the rounds' counts are dropped (the counts
// are estimates that reconciliation corrects) and the ended messages
// among them counted in fairq_worker_backlog_decrements_dropped_total;
// Get answers that the count is unknown, or ErrUnavailable when failing
// closed. The outage is said once in the log and in
// fairq_redis_degraded{component="backlog"} (package degrade), and Redis
// is left alone for a second after each failure.
type Tracker struct {
	cfg     TrackerConfig
	local   bool // Counter in process: Add and Done apply at once
	redis   *degrade.Dependency
	dropped prometheus.Counter

	mu       sync.RWMutex
	pending  map[string]delta // gathered since the last round
	inflight map[string]delta // the round being applied
	wake     chan struct{}    // size 1: something is pending

	// asked holds when each tenant's count was last asked for, while
	// within KeepFresh; nil when no count is kept fresh.
	askedMu sync.Mutex
	asked   map[string]time.Time

	round sync.Mutex // one round at a time; guards droppedSince
	// droppedSince counts the ended messages dropped since the counter
	// last answered.
	droppedSince int64

	loops lifecycle.Loops
}

// delta is what a tenant's count is owed: messages accepted and ended.
type delta struct{ add, done int64 }

// NewTracker returns a Tracker; Start it so that the gathered counts are
// applied.
func NewTracker(cfg TrackerConfig) (*Tracker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	_, local := cfg.Counter.store.(*memStore)
	t := &Tracker{
		cfg:   cfg,
		local: local,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fairq_worker_backlog_decrements_dropped_total",
			Help: "Ended messages whose tenant's backlog counter could not be decremented (the counter is reconciled).",
		}),
		pending: make(map[string]delta),
		wake:    make(chan struct{}, 1),
	}
	if !local && cfg.KeepFresh > 0 && cfg.Counter.cfg.MaxStale > 0 {
		t.asked = make(map[string]time.Time)
	}
	// The gateway's lines, since it is the one admission waits on.
	t.redis = degrade.New(degrade.Config{Component: "backlog", Metrics: cfg.RedisMetrics, Logger: cfg.Logger, FailClosed: cfg.FailClosed,
		Down: "redis unreachable; going on with local state until it is back (fail open)"})
	if reg := cfg.Registerer; reg != nil {
		if err := reg.Register(t.dropped); err != nil {
			return nil, fmt.Errorf("backlog metrics: %w", err)
		}
	}
	return t, nil
}

// Add counts n messages of a tenant accepted now. It does not block.
func (t *Tracker) Add(tenant string, n int64) { t.owe(tenant, delta{add: n}) }

// Done takes n ended messages off a tenant's count. It does not block.
func (t *Tracker) Done(tenant string, n int64) { t.owe(tenant, delta{done: n}) }

func (t *Tracker) owe(tenant string, d delta) {
	if d.add <= 0 && d.done <= 0 {
		return
	}
	if t.local {
		// In process: a map under a lock, as quick as gathering it.
		ctx := context.Background()
		_ = t.cfg.Counter.Add(ctx, tenant, d.add)   // cannot fail in process
		_ = t.cfg.Counter.Done(ctx, tenant, d.done) // cannot fail in process
		return
	}
	t.mu.Lock()
	p := t.pending[tenant]
	p.add += d.add
	p.done += d.done
	t.pending[tenant] = p
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default: // a round is already due
	}
}

// Get returns a tenant's count, with what this process gathered and has
// not applied yet; known is false when there is none to go by: Redis is
// unreachable, or did not answer within CallTimeout, and the tracker
// fails open (the answer is counted in fairq_redis_fallback_total).
// Failing closed, that is ErrUnavailable.
func (t *Tracker) Get(ctx context.Context, tenant string) (n int64, known bool, err error) {
	return t.get(ctx, tenant, t.cfg.Counter.cfg.MaxStale)
}

// Fresh is Get with a count from Redis at most FreshStale old, whatever
// the cache holds: for a refusal at max_backlog. The cache's count steps
// down every MaxStale (100 ms), and a gateway that refused on it until
// then took the room it showed at once, a burst of the tenant's messages
// on the queues of its shard (see gateway).
func (t *Tracker) Fresh(ctx context.Context, tenant string) (n int64, known bool, err error) {
	return t.get(ctx, tenant, FreshStale)
}

// get is Get from a cache at most maxStale old.
func (t *Tracker) get(ctx context.Context, tenant string, maxStale time.Duration) (n int64, known bool, err error) {
	if t.asked != nil {
		t.askedMu.Lock()
		t.asked[tenant] = time.Now()
		t.askedMu.Unlock()
	}
	if t.redis.Resting() {
		return t.without(ctx, errResting)
	}
	// Bounded, so that a Redis that does not answer costs an admission
	// CallTimeout at most, once a cooldown.
	n, err = t.cfg.Counter.get(ctx, tenant, t.cfg.CallTimeout, maxStale)
	switch {
	case err == nil:
		t.redis.OK(ctx)
	case ctx.Err() != nil:
		return 0, false, ctx.Err() // the caller gave up; Redis is not to blame
	default:
		t.redis.Failed(ctx, err)
		return t.without(ctx, err)
	}
	if t.local {
		return n, true, nil // nothing is ever pending
	}
	t.mu.RLock()
	p, f := t.pending[tenant], t.inflight[tenant]
	t.mu.RUnlock()
	return max(0, n+p.add+f.add-p.done-f.done), true, nil
}

var errResting = errors.New("redis failed moments ago; not asked")

// without answers Get without Redis.
func (t *Tracker) without(_ context.Context, err error) (int64, bool, error) {
	if t.cfg.FailClosed {
		return 0, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	t.redis.Fallback()
	return 0, false, nil
}

// Start starts applying the gathered counts and, given Depths, the
// reconciliation, until Stop: ctx only carries values (see package
// lifecycle).
func (t *Tracker) Start(ctx context.Context) error {
	ctx, err := t.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("backlog: tracker: %w", err)
	}
	if !t.local {
		t.loops.Go(func() { t.run(ctx) })
	}
	if t.asked != nil {
		t.loops.Go(func() { t.keepFresh(ctx) })
	}
	if t.cfg.Depths != nil && len(t.cfg.Queues) > 0 && t.cfg.ReconcileEvery > 0 {
		t.loops.Go(func() { t.reconcileLoop(ctx) })
	}
	return nil
}

// Stop applies what is pending, each call bounded by CallTimeout, and
// stops; if Redis is down it drops what is pending instead, so that Stop
// waits for at most the call under way. It is idempotent.
func (t *Tracker) Stop(ctx context.Context) error { return t.loops.Stop(ctx) }

// Flush applies what is pending now, on the caller's goroutine: for a
// process that is about to end without having started the tracker (a
// redrive from the command line). It returns the first failure.
func (t *Tracker) Flush(ctx context.Context) error { return t.flush(ctx) }

func (t *Tracker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			t.finish(context.WithoutCancel(ctx))
			return
		case <-t.wake:
			// Not cut short by Stop: each call has its own timeout, and
			// Stop makes the last round.
			_ = t.flush(context.WithoutCancel(ctx)) // a failure is logged once per outage
		}
	}
}

// finish makes the last round, unless Redis is down: then it drops what
// is pending rather than make Stop wait for another timeout.
func (t *Tracker) finish(ctx context.Context) {
	if !t.redis.Down() {
		_ = t.flush(ctx)
		return
	}
	t.mu.Lock()
	round := t.pending
	t.pending = make(map[string]delta)
	t.mu.Unlock()
	var lost int64
	for _, d := range round {
		lost += d.done
	}
	if lost > 0 {
		t.dropped.Add(float64(lost))
		t.cfg.Logger.Warn("backlog counter not decremented at stop: it does not answer", "messages", lost)
	}
}

// flush makes one round: one call per tenant (two with both adds and
// dones) for what came since the last round. After a failure, the rest of
// the round is dropped, as are the rounds while Redis rests.
func (t *Tracker) flush(ctx context.Context) error {
	t.round.Lock()
	defer t.round.Unlock()
	t.mu.Lock()
	round := t.pending
	if len(round) == 0 {
		t.mu.Unlock()
		return nil
	}
	t.pending = make(map[string]delta, len(round))
	t.inflight = round
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.inflight = nil
		t.mu.Unlock()
	}()
	var err error
	if t.redis.Resting() {
		err = errResting
	}
	var lost int64 // ended messages not taken off
	for tenant, d := range round {
		if err == nil {
			err = t.apply(ctx, tenant, d)
			if err == nil {
				t.mu.Lock()
				delete(t.inflight, tenant) // the Counter has it
				t.mu.Unlock()
				continue
			}
		}
		lost += d.done
	}
	if err == nil {
		t.redis.OK(ctx)
		if t.droppedSince > 0 {
			t.cfg.Logger.Info("backlog counter decremented again", "dropped", t.droppedSince)
			t.droppedSince = 0
		}
		return nil
	}
	if !errors.Is(err, errResting) && ctx.Err() == nil { // else the caller of Flush gave up; Redis is not to blame
		t.redis.Failed(ctx, err)
	}
	if lost > 0 {
		t.dropped.Add(float64(lost))
		t.droppedSince += lost
		if t.droppedSince == lost {
			t.cfg.Logger.Warn("backlog counter not decremented: counts dropped until it answers (it is reconciled)", "messages", lost, "err", err)
		} else {
			t.cfg.Logger.Debug("backlog counter not decremented", "messages", lost, "err", err)
		}
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// apply makes the calls of one tenant's share of a round. A failed Add
// leaves the Done of the same tenant unmade: after a failure nothing more
// is asked of Redis in the round.
func (t *Tracker) apply(ctx context.Context, tenant string, d delta) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.CallTimeout)
	defer cancel()
	if err := t.cfg.Counter.Add(ctx, tenant, d.add); err != nil {
		return err
	}
	return t.cfg.Counter.Done(ctx, tenant, d.done)
}

// keepFresh reads the counts of the tenants asked for within KeepFresh
// into the Counter's cache every half of its MaxStale, all in one call,
// so that Get answers them without waiting on Redis. A failure counts
// as Redis's, as a Get's would, and leaves the cache to age: Get then
// asks Redis itself, as without keepFresh.
func (t *Tracker) keepFresh(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Counter.cfg.MaxStale / 2)
	defer tick.Stop()
	var tenants []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		tenants = t.askedSince(time.Now().Add(-t.cfg.KeepFresh), tenants[:0])
		if len(tenants) == 0 || t.redis.Resting() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, t.cfg.CallTimeout)
		err := t.cfg.Counter.Refresh(cctx, tenants)
		cancel()
		switch {
		case err == nil:
			t.redis.OK(ctx)
		case ctx.Err() != nil:
			return
		default:
			t.redis.Failed(ctx, err)
		}
	}
}

// askedSince appends to buf the tenants asked for since then and forgets
// the others.
func (t *Tracker) askedSince(then time.Time, buf []string) []string {
	t.askedMu.Lock()
	defer t.askedMu.Unlock()
	for tenant, at := range t.asked {
		if at.Before(then) {
			delete(t.asked, tenant)
			continue
		}
		buf = append(buf, tenant)
	}
	return buf
}

// reconcileLoop caps every tenant's count at the number of messages on
// the queues every ReconcileEvery: the larger of the last two readings,
// since SQS's approximate counts lag behind sends.
func (t *Tracker) reconcileLoop(ctx context.Context) {
	tick := time.NewTicker(t.cfg.ReconcileEvery)
	defer tick.Stop()
	prev := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		total, err := t.queuedTotal(ctx)
		if err != nil {
			if ctx.Err() == nil {
				t.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "backlog reconciliation skipped: queue depths unreadable", slog.Any("err", err))
			}
			continue
		}
		if prev >= 0 {
			if err := t.cfg.Counter.Reconcile(ctx, max(prev, total)); err != nil && ctx.Err() == nil {
				t.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "backlog reconciliation failed", slog.Any("err", err))
			}
		}
		prev = total
	}
}

// queuedTotal returns the number of messages on the queues: visible, in
// flight and delayed.
func (t *Tracker) queuedTotal(ctx context.Context) (int64, error) {
	var total int64
	for _, q := range t.cfg.Queues {
		dctx, cancel := context.WithTimeout(ctx, depthTimeout)
		d, err := t.cfg.Depths.Depth(dctx, q)
		cancel()
		if err != nil {
			return 0, err
		}
		total += int64(d.Visible + d.NotVisible + d.Delayed)
	}
	return total, nil
}

// Off keeps no counts: the backlog of a gateway and a worker that run
// apart without Redis, which could not share them. Add and Done do
// nothing, and Get answers that no count is known, so that admission goes
// on without backpressure.
type Off struct{}

// Add does nothing.
func (Off) Add(string, int64) {}

// Done does nothing.
func (Off) Done(string, int64) {}

// Get answers that no count is known.
func (Off) Get(context.Context, string) (int64, bool, error) { return 0, false, nil }

// Flush does nothing.
func (Off) Flush(context.Context) error { return nil }

// Start does nothing.
func (Off) Start(context.Context) error { return nil }

// Stop does nothing.
func (Off) Stop(context.Context) error { return nil }
