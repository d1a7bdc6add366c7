package spillover

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/overview"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// Reasons of a verdict, the reason label of fairq_worker_spilled_total.
const (
	ReasonRate        = "rate"        // over process_rate
	ReasonConcurrency = "concurrency" // concurrency messages of the tenant in progress
	ReasonUnavailable = "unavailable" // the limits could not be checked (Redis down, failing closed)
	ReasonAged        = "aged"        // past the backlog age (moved there) or the drop age (dropped)
	ReasonPaused      = "paused"      // its tenant is paused: parked
)

// Defaults of Config.
const (
	ConcurrencyDelayDefault = 2 * time.Second
	MaxTenantLabelsDefault  = 100
	HoldMaxDefault          = time.Second
)

// slotPoll is how often a message held for a concurrency slot asks
// again unless a slot given back wakes it first, where the Semaphore does
// not tell of the slots given back: one given back by another worker is
// then known only by asking. Where it tells, a held message asks only
// when woken, or at the end of its hold.
const slotPoll = 100 * time.Millisecond

// Tenants looks tenants up; *tenant.Registry is one.
type Tenants interface {
	Limits(id string) (tenant.Resolved, bool)
	// StateOf returns a tenant's pause and purge instant; for a deleted
	// tenant, the purge instant of its deletion.
	StateOf(id string) (tenant.State, bool)
}

var _ Tenants = (*tenant.Registry)(nil)

// Pacer hands out turns of a key at a rate from one line for the whole
// fleet; *throttle.RedisPacer is one.
type Pacer interface {
	Reserve(ctx context.Context, key string, rate float64, earliest, horizon time.Duration) (time.Duration, error)
}

var (
	_ Pacer = (*throttle.RedisPacer)(nil)
	_ Pacer = (*throttle.FailoverPacer)(nil)
)

// Meter measures how fast events of a key come across the fleet;
// *throttle.RedisMeter is one. MarkAt counts one here that happened at a
// given time, as much of one as the moving average leaves of an event that
// old; Rate answers, as of now, events a second and the time since the
// latest, ok false while it does not know.
type Meter interface {
	MarkAt(key string, at time.Time)
	Rate(key string) (perSecond float64, since time.Duration, ok bool)
}

var _ Meter = (*throttle.RedisMeter)(nil)

// Config configures a Limiter.
type Config struct {
	// Tenants gives each tenant's limits, read at every message so that a
	// change applies at once; required.
	Tenants Tenants
	// Defaults are the limits of a message whose tenant the registry does
	// not know (deleted since, or a message without fairq-tenant); unset
	// fields take tenant.LimitsDefault's. The same Config.Defaults the registry
	// was given.
	Defaults tenant.Limits
	// DropAge drops a message older than this (since enqueue) unprocessed
	// (worker.drop_age); a tenant's own drop_age, when above 0, replaces
	// it. Zero never drops but for tenants that set one.
	DropAge time.Duration
	// BacklogAge moves a message older than this to the backlog queue,
	// unless it came from there (worker.backlog_age); zero never does.
	// The worker must have a backlog queue.
	BacklogAge time.Duration
	// Rate decides process_rate: a throttle.FailoverLimiter over Redis
	// for a fleet, nil for a new throttle.LocalLimiter.
	Rate throttle.RateLimiter
	// Semaphore holds concurrency: a throttle.FailoverSemaphore over a
	// RedisSemaphore for a fleet, nil for a new throttle.LocalSemaphore.
	Semaphore throttle.Semaphore
	// Admitter takes a message's slots and tokens together: a
	// throttle.FailoverAdmitter over a throttle.RedisAdmitter for a
	// fleet, one round trip for them all. Nil asks Semaphore, then Rate,
	// one by one (throttle.Separately).
	Admitter throttle.Admitter
	// FleetSizeFunc returns the number of workers sharing the limits, as
	// fleet.Fleet.Last does; without a Pacer, a worker paces the messages
	// it spills at its share of the tenant's rate. Nil counts one.
	FleetSizeFunc func() int
	// Pacer keeps the turns of spilled messages fleet-wide, one line per
	// tenant and limit at the tenant's whole rate, so that they come back
	// at that rate whichever workers spilled them: a throttle.FailoverPacer
	// over a throttle.RedisPacer for a fleet. Nil, and when it fails, each
	// worker keeps its own turns at its share of the rate, which comes
	// back slower than the rate when the workers did not spill alike.
	Pacer Pacer
	// Meter measures each tenant's fresh messages across the fleet, so
	// that old work leaves fresh work what it uses fleet-wide: a
	// throttle.RedisMeter for a fleet. Nil, and while it does not know,
	// each worker goes by the fresh messages it receives itself, times the
	// fleet size (see freshRate).
	Meter Meter
	// ConcurrencyDelay is the mean delay of a message spilled for
	// concurrency; each gets a delay drawn uniformly between half and
	// one and a half times it. Zero uses ConcurrencyDelayDefault.
	ConcurrencyDelay time.Duration
	// HoldMax is how long in all a message over its tenant's rate or
	// concurrency may be held in the worker, unstarted (consumer.Hold),
	// rather than spilled, when its token is due or a slot may free
	// within that time and the worker has other slots free. Zero uses
	// HoldMaxDefault; a negative HoldMax never holds.
	HoldMax time.Duration
	// MaxTenantLabels bounds the tenant label of the metrics: the first
	// tenants of the registry seen get their own, up to this many, and
	// the rest count as "other". Zero uses MaxTenantLabelsDefault.
	MaxTenantLabels int
	// Registerer receives the per-tenant metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Activity counts each tenant's spills and jobs for the overview;
	// nil counts nothing.
	Activity *overview.Recorder
	// NowFunc is the clock; nil uses time.Now.
	NowFunc func() time.Time
	// RandFunc returns a uniform number in [0, 1) for the jitter; nil
	// uses math/rand/v2.Float64.
	RandFunc func() float64
}

func (c Config) withDefaults() Config {
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.RandFunc == nil {
		c.RandFunc = rand.Float64
	}
	if c.FleetSizeFunc == nil {
		c.FleetSizeFunc = func() int { return 1 }
	}
	if c.Rate == nil {
		c.Rate = throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.NowFunc})
	}
	if c.Semaphore == nil {
		c.Semaphore = throttle.NewLocalSemaphore()
	}
	if c.Admitter == nil {
		c.Admitter = throttle.Separately{Semaphore: c.Semaphore, Rate: c.Rate}
	}
	c.ConcurrencyDelay = cmp.Or(c.ConcurrencyDelay, ConcurrencyDelayDefault)
	c.MaxTenantLabels = cmp.Or(c.MaxTenantLabels, MaxTenantLabelsDefault)
	c.HoldMax = cmp.Or(c.HoldMax, HoldMaxDefault)
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Tenants == nil {
		errs = append(errs, errors.New("Tenants is required"))
	}
	if c.ConcurrencyDelay < 0 || c.ConcurrencyDelay > queue.MaxDelay {
		errs = append(errs, fmt.Errorf("concurrency delay %v is outside 0-%v", c.ConcurrencyDelay, queue.MaxDelay))
	}
	if c.DropAge < 0 || c.BacklogAge < 0 {
		errs = append(errs, fmt.Errorf("drop age %v and backlog age %v must not be negative", c.DropAge, c.BacklogAge))
	}
	if c.HoldMax > queue.MaxDelay {
		errs = append(errs, fmt.Errorf("hold max %v is over %v", c.HoldMax, queue.MaxDelay))
	}
	if c.MaxTenantLabels < 0 {
		errs = append(errs, fmt.Errorf("max tenant labels %d is negative", c.MaxTenantLabels))
	}
	if err := tenant.ValidateLimits(tenant.Limits{}, c.Defaults); err != nil {
		errs = append(errs, fmt.Errorf("defaults: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("spillover: %w", err)
	}
	return nil
}

// Limiter is the consumer.Limiter of the per-tenant processing limits: see
// the package documentation.
type Limiter struct {
	cfg      Config
	defaults tenant.Resolved
	pacer    *throttle.Pacer // turns of spilled messages, without a fleet Pacer
	holds    *holds          // held messages, counted against the worker's free slots
	waves    *holds          // old work held in waves, beyond the free slots (holdForSlot)
	told     bool            // the Semaphore tells of the slots given back (throttle.FreedNotifier)
	jobs     durations
	fresh    fresh
	empty    empty // buckets known to have no token yet
	labels   *labels
	metrics  *metrics
}

var _ consumer.Limiter = (*Limiter)(nil)

// New returns a Limiter. It starts no goroutines; the components it is
// given (a RedisSemaphore, a fleet.Fleet) are started by their owner.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("spillover metrics: %w", err)
	}
	l := &Limiter{
		cfg:      cfg,
		defaults: tenant.Resolve(cfg.Defaults, tenant.Limits{}),
		pacer:    throttle.NewPacer(throttle.PacerConfig{Now: cfg.NowFunc}),
		holds:    newHolds(),
		waves:    newHolds(),
		jobs:     newDurations(cfg.NowFunc()),
		fresh:    newFresh(cfg.NowFunc()),
		empty:    newEmpty(cfg.NowFunc()),
		labels:   newLabels(cfg.MaxTenantLabels),
		metrics:  m,
	}
	if n, ok := cfg.Semaphore.(throttle.FreedNotifier); ok {
		// A slot given back, on another worker or this one, wakes a
		// message held here for it as soon as it can be taken, rather
		// than at its next ask.
		l.told = n.OnFreed(l.wake)
	}
	return l, nil
}

// Admit implements consumer.Limiter: it drops a message past its drop
// age and moves one past the backlog age to the backlog queue (aged);
// otherwise it takes a concurrency slot of the message's tenant and a
// token of its process_rate, both or neither (Config.Admitter), and
// dispatches the message with a Done that gives the slot back, or spills
// the message to the overflow queue, delayed (to the backlog queue if it
// would come back old).
func (l *Limiter) Admit(ctx context.Context, m *consumer.Message) (consumer.Verdict, error) {
	id := m.Tenant
	if v, ok := stateVerdict(l.tenantState(id), m.EnqueuedAt); ok {
		return v, nil
	}
	lim, known := l.cfg.Tenants.Limits(id)
	if !known {
		lim = l.defaults
	}
	age := l.cfg.NowFunc().Sub(m.EnqueuedAt)
	if v, ok := ageVerdict(age, m.Backlog, cmp.Or(lim.DropAge, l.cfg.DropAge), l.cfg.BacklogAge); ok {
		if v.Action == consumer.ToBacklog {
			// Its turn in the line of the tenant's old work: every
			// tenant's old work comes back from the one backlog queue
			// at the pace it may run, not in the order it was moved.
			// At its turn exactly (consumer.Verdict.Exact): delays in
			// whole seconds brought each tenant's turns of a second
			// back at one instant, its moves being made in a burst, so
			// that the backlog queue, read in order, held every
			// tenant's old work in clumps of a second's turns. Behind
			// the clumps of others, a tenant received none of its old
			// work for up to 2 s, and after a 60 s outage the slowest
			// tenant drained at 33.4-37.2/s of its 40 in four runs;
			// at its turns, 40.7-44.8/s in eleven.
			v.Delay, v.Exact = l.turn(ctx, lineKey(id, true), l.pace(id, lim), 0), true
		}
		return v, nil
	}
	label := l.labels.of(id, known)

	// Old work yields to fresh work of the same tenant, while there is any.
	var y yielding
	if now := l.cfg.NowFunc(); m.Backlog {
		if fleetRate, recent := l.freshRate(id, now); recent {
			y = l.yieldTo(id, fleetRate, lim)
		}
	} else if m.Held == 0 && !m.Moved {
		// A fresh message counts once: not again when it is asked about
		// after a hold, nor when it comes back spilled. Counted at every
		// ask, a tenant's held messages made its fresh work look many
		// times faster than it came, and old work yield it half its
		// limits while the backlog drained. And it counts as of when it
		// was enqueued: the messages that waited on the live queues
		// through an outage come to the workers in a burst when it ends,
		// and counted as of then they made fresh work look three times
		// as fast as it came, and old work yield it half its limits for
		// the first seconds of the drain.
		l.fresh.mark(id, now, m.EnqueuedAt)
		if l.cfg.Meter != nil {
			l.cfg.Meter.MarkAt(freshKey(id), m.EnqueuedAt)
		}
	}
	hold := l.tokenHolds(y, m, lim.Concurrency)
	buckets, n := rateBuckets(id, y, lim)
	bs := buckets[:n]
	// A bucket known to have no token refuses the message before it takes
	// a slot (see empty).
	now := l.cfg.NowFunc()
	for _, b := range bs {
		if next, ok := l.empty.wait(b.key, now); ok {
			return l.noToken(ctx, label, id, b.key, b.lim, lim.ProcessRate, m, b.old, hold, next), nil
		}
	}
	permit, v, err := l.take(ctx, label, id, lim, y, m, bs, hold)
	if err != nil || v.Action != consumer.Dispatch {
		return v, err
	}

	start := l.cfg.NowFunc()
	inFlight := l.metrics.inFlight.WithLabelValues(label)
	inFlight.Inc()
	ended := l.cfg.Activity.Started(id, age, m.ReceiveCount <= 1)
	return consumer.Verdict{Action: consumer.Dispatch, Done: func() {
		l.release(permit, id)
		inFlight.Dec()
		ended()
		end := l.cfg.NowFunc()
		took := end.Sub(start)
		l.jobs.observe(id, took, end)
	}}, nil
}

// tokenHolds returns the holds a message refused a token waits in, nil
// for none. Fresh work, and old work alone, is held in the holds of fresh
// work. Old work while fresh work comes is held apart, and only in a wave:
// where fresh work needs half the tenant's slots or more, old work held
// for tokens took the worker's free slots its holds needed (a noisy
// tenant's rate fell from 40/s to 32/s).
func (l *Limiter) tokenHolds(y yielding, m *consumer.Message, concurrency int) *holds {
	switch {
	case !y.on:
		return l.holds
	case y.wave(m, concurrency):
		return l.waves
	}
	return nil
}

// rateBucket is a bucket a message takes a token of: its key, its limit,
// and whether it is old work's own (its turns in old work's line).
type rateBucket struct {
	key string
	lim throttle.Limit
	old bool
}

// rateBuckets returns the buckets a message of tenant id takes a token of,
// in the order they are asked: while fresh work comes, old work's own
// (what fresh work leaves it), then the tenant's.
// An array rather than a slice: Admit asks for them at every message, and
// a slice of them escaped to the heap.
func rateBuckets(id string, y yielding, lim tenant.Resolved) (bs [2]rateBucket, n int) {
	if y.on && !y.rate.Unlimited() {
		bs[n] = rateBucket{backlogKey(id), y.rate, true}
		n++
	}
	bs[n] = rateBucket{processKey(id), throttle.Limit{Rate: lim.ProcessRate, Burst: lim.ProcessBurst}, y.on}
	return bs, n + 1
}

// slots are the concurrency permits a dispatched message holds: its
// tenant's, and for old work while fresh work comes, the old work's own.
type slots struct{ tenant, old throttle.Permit }

// Release gives both back; the zero Permit's Release does nothing.
func (s slots) Release() {
	s.tenant.Release()
	s.old.Release()
}

// take takes, through the Admitter, a concurrency slot of tenant id and a
// token of each of its buckets bs, and for old work while fresh work
// comes (y.on) a slot of the old work's own semaphore too: all of them,
// for a Dispatch verdict, or none. Refused a token, the message is held
// for it in h or spilled to its turn (noToken); refused a slot, held for
// one due soon or spilled to wait for one (noSlot).
func (l *Limiter) take(ctx context.Context, label, id string, lim tenant.Resolved, y yielding, m *consumer.Message, bs []rateBucket, h *holds) (slots, consumer.Verdict, error) {
	need := admitNeed(id, lim, y, bs)
	n := len(need.Slots) - 1 // the tenant's slot, after old work's own
	a, err := l.cfg.Admitter.TryAdmit(ctx, need)
	switch {
	case err != nil:
		v, err := l.failed(label, id, err, m)
		return slots{}, v, err
	case a.Admitted:
		s := slots{tenant: a.Permits[n]}
		if y.on {
			s.old = a.Permits[0]
		}
		return s, consumer.Verdict{Action: consumer.Dispatch}, nil
	case a.Token >= 0:
		if !l.told {
			// A slot taken and given back for want of the token may have
			// been refused meanwhile to a message held here for one.
			l.wake(concurrencyKey(id), 1)
			if y.on {
				l.wake(backlogConcurrencyKey(id), 1)
			}
		}
		b := bs[a.Token]
		l.empty.refused(b.key, l.cfg.NowFunc(), a.RetryAfter)
		return slots{}, l.noToken(ctx, label, id, b.key, b.lim, lim.ProcessRate, m, b.old, h, a.RetryAfter), nil
	}
	return slots{}, l.noSlot(ctx, label, id, lim, y, m), nil
}

// needBuf holds the slots and tokens of an admitNeed: at most two of each.
type needBuf struct {
	slots  [2]throttle.Slot
	tokens [2]throttle.Token
}

// admitNeed is what a message of tenant id takes to start (take): for
// old work while fresh work comes (y.on), a slot of the old work's own
// semaphore, then one of the tenant's; and a token of each of bs.
func admitNeed(id string, lim tenant.Resolved, y yielding, bs []rateBucket) throttle.Need {
	buf := new(needBuf) // one allocation for both lists
	need := throttle.Need{Slots: buf.slots[:0], Tokens: buf.tokens[:0]}
	if y.on {
		need.Slots = append(need.Slots, throttle.Slot{Key: backlogConcurrencyKey(id), Limit: y.concurrency})
	}
	need.Slots = append(need.Slots, throttle.Slot{Key: concurrencyKey(id), Limit: lim.Concurrency})
	for _, b := range bs {
		need.Tokens = append(need.Tokens, throttle.Token{Key: b.key, Limit: b.lim})
	}
	return need
}

// noSlot refuses a message of tenant id that found no concurrency slot:
// held for one due soon, or spilled to wait for one.
func (l *Limiter) noSlot(ctx context.Context, label, id string, lim tenant.Resolved, y yielding, m *consumer.Message) consumer.Verdict {
	concurrency := lim.Concurrency
	// While fresh work comes, old work waits for a slot of its own
	// semaphore, in holds of its own: a held old message never takes a
	// hold a fresh one would have had, nor a slot fresh work is left.
	line, most := concurrencyKey(id), concurrency
	if y.on {
		line, most = backlogConcurrencyKey(id), y.concurrency
	}
	if v, ok := l.holdForSlot(label, id, line, most, y.wave(m, concurrency), m); ok {
		if y.on {
			v.Lag = freshFirst
		}
		return v
	}
	return l.spill(label, id, ReasonConcurrency, l.concurrencyWait(ctx, id, lim, y.on), m)
}

// freshFirst is how long old work woken for a slot, while fresh work of
// its tenant comes, waits before it asks for the slot (consumer.Verdict
// Lag): a fresh message held for the same slot, on this worker or
// another, asks first. A slot given back wakes, on every worker, a
// tenant's fresh work held for it and its old work held for a slot of
// its line, and the first to ask took it. After a 60 s outage, old work
// keeps the tenant's slots busy through the drain, and fresh work lost
// such races: the fresh messages sent 5-10 s after the restart waited
// for the workers a p95 of 37-166 ms in three runs on each Redis
// topology; with old work 5 ms behind, 6-68 ms in eight. 5 ms is more
// than a fresh message takes to ask (a round trip to Redis), and old
// work waits it only while fresh work comes, each time it is woken: a
// fortieth of a 200 ms job's time.
const freshFirst = 5 * time.Millisecond

// yielding is what a tenant's old work may use while fresh work of the
// tenant comes: at most concurrency old jobs in flight (a semaphore of
// their own, on top of the tenant's), and tokens of its own bucket at
// rate, on top of the tenant's.
type yielding struct {
	on          bool
	concurrency int
	rate        throttle.Limit
}

// wave reports whether m is old work that has most of its tenant's
// slots (its fresh work needs fewer than half): what the tenant is mostly
// doing. Its spills come back in waves a second apart, held beyond the
// worker's free slots for a slot (holdForSlot), and within them for a
// token of old work (rate).
func (y yielding) wave(m *consumer.Message, concurrency int) bool {
	most := concurrency
	if y.on {
		most = y.concurrency
	}
	return m.Backlog && 2*most > concurrency
}

// freshHeadroom is the margin over fresh work's measured need of slots
// that old work leaves it, rounded up: a burst of fresh messages above
// their average rate still finds a slot. freshRateHeadroom is the margin
// over its measured rate, smaller: the tenant's bucket, which fresh and
// old work share, absorbs a burst up to process_burst, and refills as
// long as the two together stay below the rate. A larger margin leaves
// the slots and tokens idle while a backlog drains: with a slot and a
// token a second more for fresh work, a tenant of 40 a second, 10 slots
// and 200 ms jobs, 5 fresh messages a second coming, left its old work 33
// a second and 7 slots, where it now leaves 34 and 8.
const (
	freshHeadroom     = 1.5
	freshRateHeadroom = 1.2
)

// freshRate returns how fast tenant id's fresh messages come to the
// whole fleet, a second, and whether one came within FreshWindow: as the
// Meter measures them when it knows, otherwise this worker's own rate
// times the fleet size. The latter assumes every worker receives its
// share; but a tenant's messages go to the few live queues of its shard,
// and with queues shared out each is watched by a few workers, so a
// worker may receive twice its share or none. Twice: fresh work at 5 of
// a tenant's 40 a second counts as 10, and old work is left 28 a second
// instead of 34. None: old work yields nothing there.
func (l *Limiter) freshRate(id string, now time.Time) (float64, bool) {
	if l.cfg.Meter != nil {
		if r, since, ok := l.cfg.Meter.Rate(freshKey(id)); ok {
			return r, since <= FreshWindow
		}
	}
	perSecond, recent := l.fresh.recent(id, now)
	return perSecond / throttle.Share(l.cfg.FleetSizeFunc()), recent
}

// yieldTo returns what the old work of a tenant may use while its fresh
// messages come at fleetRate to the fleet: the limits less what the fresh
// ones need (their rate, and that rate times the mean job time in slots,
// with headroom), and never less than half. So
// fresh work is served first, and the limits fresh work leaves unused go
// to the old, where a fixed half left them idle: a tenant whose backlog
// drains while a trickle of new messages comes keeps to its limits, not
// to half of them. Until a job time is known, old work has half the
// slots.
func (l *Limiter) yieldTo(id string, fleetRate float64, lim tenant.Resolved) yielding {
	reserve := lim.Concurrency / 2
	if mean, ok := l.jobs.of(id); ok {
		need := int(math.Ceil(freshHeadroom * fleetRate * mean.Seconds()))
		reserve = min(reserve, need)
	}
	y := yielding{on: true, concurrency: max(1, lim.Concurrency-reserve)}
	if lim.ProcessRate > 0 && !math.IsInf(lim.ProcessRate, 1) {
		left := lim.ProcessRate - min(lim.ProcessRate/2, freshRateHeadroom*fleetRate)
		y.rate = throttle.Limit{Rate: left, Burst: max(1, int(float64(lim.ProcessBurst)*left/lim.ProcessRate))}
	}
	return y
}

// tenantState returns the state of a tenant, none for a message without
// one.
func (l *Limiter) tenantState(id string) tenant.State {
	if id == "" {
		return tenant.State{}
	}
	st, _ := l.cfg.Tenants.StateOf(id)
	return st
}

// stateVerdict decides on a message by what an operator set for its
// tenant: enqueued before the tenant's purge instant, deleted unseen;
// the tenant paused, parked. ok is false when the state decides nothing.
func stateVerdict(st tenant.State, enqueued time.Time) (v consumer.Verdict, ok bool) {
	switch {
	case !st.PurgedBefore.IsZero() && enqueued.Before(st.PurgedBefore):
		return consumer.Verdict{Action: consumer.Drop, Reason: consumer.ReasonPurged}, true
	case st.Paused:
		return consumer.Verdict{Action: consumer.Park, Reason: ReasonPaused}, true
	}
	return consumer.Verdict{}, false
}

// ageVerdict decides on a message by its age alone: past drop (its
// tenant's drop age, or the worker's), dropped; past backlog, and not
// from the backlog queue already, moved there. ok is false when its age
// decides nothing; a zero age limit never applies.
func ageVerdict(age time.Duration, fromBacklog bool, drop, backlog time.Duration) (v consumer.Verdict, ok bool) {
	switch {
	case drop > 0 && age > drop:
		return consumer.Verdict{Action: consumer.Drop, Reason: ReasonAged}, true
	case backlog > 0 && age > backlog && !fromBacklog:
		return consumer.Verdict{Action: consumer.ToBacklog, Reason: ReasonAged}, true
	}
	return consumer.Verdict{}, false
}

// noToken refuses a message of tenant id that key's bucket has no token
// for, the next due after next: the Hold for its token, in h, when it
// comes soon, or the spill to its turn at the rate, behind the messages
// spilled before it, so that spilled messages come back at the rate
// rather than all at the next token. old is old work while fresh work
// comes, which takes its turns in a line of its own. It is never a
// Dispatch, so that a message refused before it took a concurrency slot
// (Admit: the bucket was known to be empty) cannot run without one,
// however long the bucket was thought empty.
//
// The turns come pace a second: the tenant's process_rate, also for old
// work refused by its own bucket (lim, what fresh work leaves it). Old
// work's turns are taken while fresh work comes and last as long as the
// backlog: paced at what old work had then, they kept it at that rate
// after the fresh work stopped, since SQS brings no delayed message
// forward (a noisy tenant's backlog drained at 20-30/s of its 40 for the
// last 25 s). Paced at the tenant's rate, those that come back while
// fresh work still comes and find no token are held or spilled again.
func (l *Limiter) noToken(ctx context.Context, label, id, key string, lim throttle.Limit, pace float64, m *consumer.Message, old bool, h *holds, next time.Duration) consumer.Verdict {
	// Its turn here: the next token, then one more per message held
	// here for one, in h (nil holds none) or the other holds.
	n := l.holds.count(key) + l.waves.count(key)
	wait := next + time.Duration(float64(n)/lim.Rate*float64(time.Second))
	if h != nil {
		if v, ok := l.holdForToken(h, label, key, n, wait, m); ok {
			return v
		}
	}

	delay := l.turn(ctx, lineKey(id, old), pace, wait)
	if m.Spare > 0 && delay > time.Second {
		// SQS rounds a delay up to whole seconds, and a message back
		// after its turn may find its token gone (past the burst). A
		// worker with slots to spare brings it back up to a second
		// early instead, to be held for its token.
		delay = delay.Truncate(time.Second)
	}
	return l.spill(label, id, ReasonRate, delay, m)
}

// release gives the concurrency slots of tenant back and, unless the
// Semaphore tells of them once they can be taken, wakes a message of the
// tenant held here for each.
func (l *Limiter) release(p slots, tenant string) {
	old := p.old != throttle.Permit{}
	p.Release()
	if l.told {
		return
	}
	l.wake(concurrencyKey(tenant), 1)
	if old {
		l.wake(backlogConcurrencyKey(tenant), 1)
	}
}

// wake wakes up to n messages held here for a slot of key, n of which
// were given back on this worker or another: those held in holds first,
// then those in waves. A slot of a tenant's own semaphore that none of
// them takes goes to its old work's line, which needs one too.
func (l *Limiter) wake(key string, n int) {
	n -= l.holds.freed(key, n)
	n -= l.waves.freed(key, n)
	if line, ok := backlogLineOf(key); ok && n > 0 {
		n -= l.holds.freed(line, n)
		l.waves.freed(line, n)
	}
}

// holdForToken returns the Hold of a message refused a token of key, n
// messages held here before it, when its turn, wait, comes within what
// is left of its HoldMax. It then starts at that turn rather than come
// back from overflow whole seconds later. (Other workers' holds take
// tokens too: a message that finds none at its turn is held again, for
// what is left of its HoldMax.) Holding costs a worker slot, so the
// worker holds no more messages than it has other slots free.
func (l *Limiter) holdForToken(h *holds, label, key string, n int, wait time.Duration, m *consumer.Message) (consumer.Verdict, bool) {
	if m.Spare < 1 || wait > l.cfg.HoldMax-m.Held {
		return consumer.Verdict{}, false
	}
	wake, end, ok := h.take(key, n+1, m.Spare)
	if !ok {
		return consumer.Verdict{}, false // another took the turn meanwhile
	}
	return l.hold(label, ReasonRate, wait, wake, end, m), true
}

// holdForSlot returns the Hold of a message refused a slot of key, its
// tenant's semaphore of concurrency slots or its old work's, for as long
// as is left of its HoldMax: a slot given back wakes it, one message per
// slot, the longest held first (wake). A Semaphore that tells of the
// slots given back (throttle.FreedNotifier) tells of those of every
// worker, once they can be taken; otherwise a slot given back here wakes
// it, and it asks again every slotPoll.
// Rather than spill to come back whole seconds after the slot frees, it
// waits for it while a slot is likely to free soon; this worker holds at
// most its share of the tenant's concurrency, one waiting message per
// slot, and no more messages in all than it has other slots free.
//
// A wave, old work with most of its tenant's slots, is held instead up
// to the whole concurrency of its line, on the slot its receive reserved
// whether or not others are free. Spilled old work comes back from its
// line in waves, SQS delays being whole seconds: the turns of a second
// (about concurrency ÷ mean job time messages) land together on
// whichever workers receive them. Held for their slots, a wave keeps the
// slots busy through its second; at one worker's share, most of it was
// spilled again and the slots stood idle until the next (a tenant's
// backlog drained at 19-25/s of its 36). Only a wave: where fresh work
// needs half the tenant's slots or more, its own holds need the worker's
// free slots, and old work held beyond them crowded them out (a noisy
// tenant's rate fell from 39-40/s to 30-32/s).
func (l *Limiter) holdForSlot(label, id, key string, concurrency int, wave bool, m *consumer.Message) (consumer.Verdict, bool) {
	left := l.cfg.HoldMax - m.Held
	if left <= 0 || concurrency <= 0 {
		return consumer.Verdict{}, false
	}
	h, most, spare := l.holds, int(math.Ceil(float64(concurrency)*throttle.Share(l.cfg.FleetSizeFunc()))), m.Spare
	if wave {
		h, most, spare = l.waves, concurrency, math.MaxInt
	}
	if spare < 1 {
		return consumer.Verdict{}, false
	}
	wake, end, ok := h.take(key, max(1, most), spare)
	if !ok {
		return consumer.Verdict{}, false
	}
	poll := slotPoll
	if l.told {
		// Every slot given back is told: asking meanwhile only finds
		// the slots full again. A tenant's messages held for a slot
		// asked ten times a second each, about ten asks for each of
		// them that ran.
		poll = left
	}
	return l.hold(label, ReasonConcurrency, min(poll, left), wake, end, m), true
}

// hold returns a Hold verdict, counted once per message.
func (l *Limiter) hold(label, reason string, d time.Duration, wake <-chan struct{}, end func(), m *consumer.Message) consumer.Verdict {
	if m.Held == 0 {
		l.metrics.held.WithLabelValues(label, reason).Inc()
	}
	return consumer.Verdict{Action: consumer.Hold, Delay: d, Wake: wake, Reason: reason, Done: end}
}

// concurrencyWait is the delay of a message spilled for concurrency: a
// short jittered delay, or, when more of the tenant's messages wait than
// its slots free up in that time, its turn at the rate they free up (its
// concurrency ÷ its mean job time) or its process_rate, whichever is
// lower, so that the messages waiting come back about as fast as they
// can run rather than all of them every few seconds.
//
// The turn is in the same line as the rate's (see rate): the tenant's,
// or, for old work while fresh work comes (old), one of old work's own:
// behind the old messages spilled before it, a fresh message would wait
// past the backlog age and come back old itself. One line for both
// reasons brings the tenant's messages back at the rate it may run them.
// In lines of their own, paced each at its own rate, a noisy tenant's
// messages came back about 100 a second for the 40 it could run, and
// were spilled again: in the fleet's noisy-neighbour run, one line cut
// its moves by 40% and the run's SQS requests by 23%.
func (l *Limiter) concurrencyWait(ctx context.Context, id string, lim tenant.Resolved, old bool) time.Duration {
	short := l.concurrencyDelay()
	if _, ok := l.jobs.of(id); !ok || lim.Concurrency <= 0 {
		return short
	}
	return l.turn(ctx, lineKey(id, old), l.pace(id, lim), short)
}

// pace is how fast tenant id may run messages: its process_rate, or the
// rate its slots free up (concurrency ÷ mean job time), whichever is
// lower; unlimited when neither bounds it.
func (l *Limiter) pace(id string, lim tenant.Resolved) float64 {
	rate := lim.ProcessRate
	if mean, ok := l.jobs.of(id); ok && lim.Concurrency > 0 {
		free := float64(lim.Concurrency) / mean.Seconds()
		if (throttle.Limit{Rate: rate}).Unlimited() {
			return free
		}
		rate = min(rate, free)
	}
	return rate
}

// turn takes the next turn of key, turns coming rate a second, none
// sooner than earliest: from the fleet's line when there is a Pacer
// that answers, otherwise from this worker's own at its share of rate.
func (l *Limiter) turn(ctx context.Context, key string, rate float64, earliest time.Duration) time.Duration {
	if l.cfg.Pacer != nil {
		if d, err := l.cfg.Pacer.Reserve(ctx, key, rate, earliest, queue.MaxDelay); err == nil {
			return d
		}
	}
	return l.pacer.Reserve(key, rate*throttle.Share(l.cfg.FleetSizeFunc()), earliest, queue.MaxDelay)
}

// spill returns the verdict that moves m to overflow, delayed, or, when
// it would come back from there past the backlog age, to the backlog
// queue at once: from overflow the age check would move it there anyway,
// a second move for the same wait. In the fleet's noisy-neighbour run,
// 1,989 of 11,612 moves were such second moves. A move to the backlog
// queue, and old work's (which the worker sends back there), is Exact:
// old work comes back at its turn, as when it was moved for its age.
func (l *Limiter) spill(label, id, reason string, delay time.Duration, m *consumer.Message) consumer.Verdict {
	l.metrics.spilled.WithLabelValues(label, reason).Inc()
	l.cfg.Activity.Spilled(id, reason)
	delay = min(max(delay, 0), queue.MaxDelay)
	action := consumer.Spill
	if back := l.cfg.NowFunc().Add(delay); l.cfg.BacklogAge > 0 && !m.Backlog && back.Sub(m.EnqueuedAt) > l.cfg.BacklogAge {
		action = consumer.ToBacklog
	}
	return consumer.Verdict{Action: action, Delay: delay, Reason: reason, Exact: m.Backlog || action == consumer.ToBacklog}
}

// failed answers when a limit could not be checked. A limiter failing
// closed (ErrUnavailable) puts the message off like a concurrency spill;
// any other error goes to the worker, which logs it and dispatches.
func (l *Limiter) failed(label, tenant string, err error, m *consumer.Message) (consumer.Verdict, error) {
	if errors.Is(err, throttle.ErrUnavailable) {
		return l.spill(label, tenant, ReasonUnavailable, l.concurrencyDelay(), m), nil
	}
	return consumer.Verdict{}, fmt.Errorf("limits of tenant %q: %w", tenant, err)
}

// concurrencyDelay is a short delay with jitter: uniform between half and
// one and a half ConcurrencyDelay.
func (l *Limiter) concurrencyDelay() time.Duration {
	d := l.cfg.ConcurrencyDelay
	return d/2 + time.Duration(l.cfg.RandFunc()*float64(d))
}
