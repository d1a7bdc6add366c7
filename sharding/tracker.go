package sharding

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/bits"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/lifecycle"
	"github.com/fairq/fairq/internal/sharedpoll"
)

// ErrStarted is returned by Start on a Tracker that was already started.
var ErrStarted = lifecycle.ErrStarted

// markRing is how many past refreshes a tracker remembers its send counts
// at, to correct a shared reading by what it sent after the reading was
// taken. Shared readings are at most about two intervals old when adopted.
const markRing = 8

// Tracker estimates the depth of each queue of the pool and picks, for a
// tenant, the shallowest queue of its shard. Pick and Sent are safe for
// concurrent use and do not allocate.
type Tracker struct {
	cfg    Config
	pool   *Pool
	keys   keys
	token  string // owner of the refresh lock
	m      *metrics
	gauges []prometheus.Gauge // m.depth by queue
	est    []estimate
	stale  atomic.Bool

	mu       sync.Mutex // serialises refreshes; guards the fields below
	marks    [markRing]mark
	nextMark int
	readAt   int64 // unix ms of the adopted reading; 0 before the first
	shared   *degrade.Dependency
	sharer   *sharedpoll.Poller[reading]

	loops lifecycle.Loops
}

// estimate is one queue's depth estimate: adj + sent. It fills a cache
// line so that picks on different queues do not contend.
type estimate struct {
	adj  atomic.Int64 // the reading, minus sent as it was when the reading was taken
	sent atomic.Int64 // messages this process counted on the queue, ever
	_    [48]byte
}

// mark is the send count of every queue at the start of a refresh.
type mark struct {
	at   int64 // unix ms; 0 for an unused slot
	sent []int64
}

// NewTracker returns a stopped Tracker; Start begins the readings. Until
// the first reading arrives, picks are random within the shard.
func NewTracker(cfg Config) (*Tracker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pool, err := NewPool(len(cfg.Queues), cfg.ShardSize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("register sharding metrics: %w", err)
	}
	t := &Tracker{
		cfg:    cfg,
		pool:   pool,
		keys:   newKeys(cfg.KeyPrefix, cfg.Queues),
		token:  rand.Text(),
		m:      m,
		gauges: make([]prometheus.Gauge, len(cfg.Queues)),
		est:    make([]estimate, len(cfg.Queues)),
		shared: degrade.New(degrade.Config{
			Component: "queue_depths",
			Metrics:   cfg.RedisMetrics,
			Logger:    cfg.Logger,
			Down:      "shared queue depth readings unavailable, reading the queues directly",
			Up:        "shared queue depth readings available again",
			Cooldown:  -1, // asked once a refresh, at the refresh's pace
		}),
	}
	t.sharer, err = sharedpoll.New(sharedpoll.Config[reading]{
		Redis:        cfg.Redis,
		Key:          t.keys.depths,
		LockKey:      t.keys.lock,
		Token:        t.token,
		Interval:     cfg.Interval,
		Keep:         cfg.StaleAfter,
		RedisTimeout: cfg.PollTimeout / 4,
		PollFunc:     t.poll,
		EncodeFunc:   reading.encode,
		DecodeFunc:   func(s string) (reading, error) { return decodeReading(s, cfg.Queues) },
		Dependency:   t.shared,
		Logger:       cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	for i, q := range cfg.Queues {
		t.gauges[i] = m.depth.WithLabelValues(q)
	}
	for i := range t.marks {
		t.marks[i].sent = make([]int64, len(cfg.Queues))
	}
	t.stale.Store(true)
	return t, nil
}

// Pool returns the pool the tracker picks from.
func (t *Tracker) Pool() *Pool { return t.pool }

// Pick returns the index, in Config.Queues, of the queue of the tenant's
// shard with the smallest estimated depth, ties broken at random, and
// counts one message towards that queue's estimate. When the readings are
// stale it picks at random within the shard.
func (t *Tracker) Pick(tenant string) int {
	s := t.pool.Shard(tenant)
	var q int
	if t.stale.Load() {
		q = s.Queue(int(mrand.Uint64N(uint64(s.Len()))))
		t.m.randomPicks.Inc()
	} else {
		q = t.shallowest(s)
	}
	t.est[q].sent.Add(1)
	return q
}

func (t *Tracker) shallowest(s Shard) int {
	best, ties := -1, uint64(0)
	var bestDepth int64
	var r uint64 // random bits for tie-breaks, drawn at the first tie
	for i := range s.Len() {
		q := s.Queue(i)
		d := t.est[q].adj.Load() + t.est[q].sent.Load()
		switch {
		case best < 0 || d < bestDepth:
			best, bestDepth, ties = q, d, 1
		case d == bestDepth:
			// Reservoir sampling: each of the tied queues is kept with
			// probability 1/ties. By Lemire's multiply method hi is
			// uniform in [0, ties), but for a bias under 2^-60, and lo
			// keeps enough random high bits for the next tie of the
			// k ≤ MaxShardSize; one draw serves the whole pick.
			if ties == 1 {
				r = mrand.Uint64()
			}
			ties++
			var hi uint64
			hi, r = bits.Mul64(r, ties)
			if hi == 0 {
				best = q
			}
		}
	}
	return best
}

// Sent adds n messages to queue index q's estimate: messages sent to a live
// queue other than through Pick, or, with n < 0, messages Pick counted that
// were never sent.
func (t *Tracker) Sent(q, n int) {
	t.est[q].sent.Add(int64(n))
}

// Estimate returns queue index q's estimated depth and whether the reading
// under it is fresh.
func (t *Tracker) Estimate(q int) (depth int64, fresh bool) {
	return max(0, t.est[q].adj.Load()+t.est[q].sent.Load()), !t.stale.Load()
}

// Start begins reading depths every Config.Interval, the first at once,
// until Stop: ctx only carries values (see package lifecycle).
func (t *Tracker) Start(ctx context.Context) error {
	ctx, err := t.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("sharding: tracker: %w", err)
	}
	t.loops.Go(func() { t.run(ctx) })
	return nil
}

// Stop ends the readings and waits for the loop to return, or for ctx.
// It is idempotent.
func (t *Tracker) Stop(ctx context.Context) error { return t.loops.Stop(ctx) }

func (t *Tracker) run(ctx context.Context) {
	tick := time.NewTicker(t.cfg.Interval)
	defer tick.Stop()
	failing := false
	for {
		err := t.Refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			t.cfg.Logger.Warn("queue depth readings failing", "err", err)
			failing = true
		case err == nil && failing:
			t.cfg.Logger.Info("queue depth readings recovered")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Refresh brings the readings up to date now, as one tick of the loop
// does: from Redis when another tracker's reading there is fresh, else by
// reading the queues (and sharing the result). It returns the error of a
// failed poll; the previous reading stays until it goes stale.
func (t *Tracker) Refresh(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, t.cfg.PollTimeout)
	defer cancel()
	at := t.mark(time.Now())
	err := t.refreshShared(ctx, at)
	t.updateStale(time.Now())
	return err
}

// refreshShared adopts the reading shared in Redis if it is younger than
// an interval; otherwise it polls and shares the result if it takes the
// refresh lock, or adopts the shared reading, older but the newest there
// is, if another tracker holds it (package sharedpoll). Without Redis it
// polls.
func (t *Tracker) refreshShared(ctx context.Context, at int64) error {
	r, source, err := t.sharer.Poll(ctx, at)
	if err != nil {
		return err
	}
	switch source {
	case sharedpoll.Polled:
		t.adopt(r, sourcePoll)
	case sharedpoll.Shared:
		t.adopt(r, sourceRedis)
	}
	return nil
}

// poll reads the depth of every queue of the pool.
func (t *Tracker) poll(ctx context.Context, at int64) (reading, error) {
	r := reading{At: at, Queues: t.cfg.Queues, Depths: make([]int64, len(t.cfg.Queues))}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(t.cfg.PollConcurrency)
	for i, q := range t.cfg.Queues {
		g.Go(func() error {
			d, err := t.cfg.Reader.Depth(ctx, q)
			if err != nil {
				return fmt.Errorf("depth of %s: %w", q, err)
			}
			r.Depths[i] = int64(d.Visible + d.NotVisible)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.m.polls.WithLabelValues("error").Inc()
		return reading{}, err
	}
	t.m.polls.WithLabelValues("ok").Inc()
	return r, nil
}

// mark records every queue's send count now and returns its time in unix
// ms.
func (t *Tracker) mark(now time.Time) int64 {
	m := &t.marks[t.nextMark%markRing]
	t.nextMark++
	m.at = now.UnixMilli()
	for i := range t.est {
		m.sent[i] = t.est[i].sent.Load()
	}
	return m.at
}

// base returns the send counts as they were when a reading taken at `at`
// was taken: those of the latest mark not after it, or of the oldest mark
// if the reading is older than all, which undercounts rather than forgets.
func (t *Tracker) base(at int64) []int64 {
	var best, oldest *mark
	for i := range t.marks {
		m := &t.marks[i]
		if m.at == 0 {
			continue
		}
		if m.at <= at && (best == nil || m.at > best.at) {
			best = m
		}
		if oldest == nil || m.at < oldest.at {
			oldest = m
		}
	}
	if best == nil {
		best = oldest
	}
	return best.sent
}

// adopt makes r the reading under the estimates, unless a newer one
// already is.
func (t *Tracker) adopt(r reading, source string) {
	if r.At < t.readAt {
		return
	}
	base := t.base(r.At)
	for i, d := range r.Depths {
		t.est[i].adj.Store(d - base[i])
		t.gauges[i].Set(float64(d))
	}
	t.readAt = r.At
	t.m.readings.WithLabelValues(source).Inc()
}

func (t *Tracker) updateStale(now time.Time) {
	stale := t.readAt == 0 || now.UnixMilli()-t.readAt > t.cfg.StaleAfter.Milliseconds()
	if t.stale.Swap(stale) == stale {
		return
	}
	if stale {
		t.m.stale.Set(1)
		t.cfg.Logger.Warn("queue depth readings stale, picking at random within shards", "stale_after", t.cfg.StaleAfter)
	} else {
		t.m.stale.Set(0)
		t.cfg.Logger.Info("queue depth readings fresh, picking the shallowest queue of each shard")
	}
}
