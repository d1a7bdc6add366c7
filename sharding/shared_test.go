package sharding

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
)

// fleet builds trackers of one pool that share readings through Redis, each
// with its own reader over the same depths so that calls count per tracker.
type fleet struct {
	t      *testing.T
	rdb    redis.UniversalClient
	names  []string
	depths []int
	prefix string
}

// onRedis runs test against one Redis node and against a Redis Cluster.
func onRedis(t *testing.T, test func(t *testing.T, rdb redis.UniversalClient)) {
	t.Helper()
	for _, topo := range testenv.RedisTopologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			test(t, topo.Client(t))
		})
	}
}

// newFleet returns trackers of a pool of n queues of the given depths
// sharing rdb, or one Redis node when rdb is nil.
func newFleet(t *testing.T, rdb redis.UniversalClient, n int, depths ...int) *fleet {
	t.Helper()
	if rdb == nil {
		rdb = redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		t.Cleanup(func() { rdb.Close() })
	}
	prefix := testenv.Prefix(t)
	return &fleet{t: t, rdb: rdb, names: queue.PoolNames(prefix, n).Live, depths: depths, prefix: prefix}
}

func (f *fleet) tracker(interval time.Duration) (*Tracker, *reader) {
	f.t.Helper()
	tr, r, _ := f.trackerMetrics(interval)
	return tr, r
}

// trackerMetrics is tracker, with the tracker's Redis metrics.
func (f *fleet) trackerMetrics(interval time.Duration) (*Tracker, *reader, *degrade.Metrics) {
	f.t.Helper()
	r := newReader(f.names, f.depths...)
	rm, err := degrade.NewMetrics(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	tr, err := NewTracker(Config{
		Reader:       r,
		Queues:       f.names,
		Interval:     interval,
		Redis:        f.rdb,
		KeyPrefix:    f.prefix,
		Registerer:   prometheus.NewRegistry(),
		RedisMetrics: rm,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return tr, r, rm
}

// TestSharedReadingsPollOnce: the first tracker polls and shares; the
// others adopt its reading without a call to the queues.
func TestSharedReadingsPollOnce(t *testing.T) {
	t.Parallel()
	onRedis(t, testSharedReadingsPollOnce)
}

func testSharedReadingsPollOnce(t *testing.T, rdb redis.UniversalClient) {
	f := newFleet(t, rdb, 8, 0, 40, 0, 0, 0, 3)
	a, ra := f.tracker(time.Minute)
	b, rb := f.tracker(time.Minute)
	c, rc := f.tracker(time.Minute)
	for _, tr := range []*Tracker{a, b, c} {
		if err := tr.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := []int64{ra.calls.Load(), rb.calls.Load(), rc.calls.Load()}; got[0] != 8 || got[1] != 0 || got[2] != 0 {
		t.Errorf("calls by tracker = %v, want [8 0 0]", got)
	}
	for _, tr := range []*Tracker{b, c} {
		if d, fresh := tr.Estimate(1); d != 40 || !fresh {
			t.Errorf("shared Estimate(1) = %d, %v; want 40, true", d, fresh)
		}
		if got := value(tr.m.readings.WithLabelValues(sourceRedis)); got != 1 {
			t.Errorf("readings from redis = %v, want 1", got)
		}
	}
	tenant := tenantWithShard(t, b.Pool(), 1, 5)
	if q := b.Pick(tenant); q != 5 {
		t.Errorf("Pick from a shared reading = %d, want 5", q)
	}
}

// TestSharedRefreshLock: a tracker that finds the shared reading old polls
// only if it wins the refresh lock; otherwise it adopts the old reading.
func TestSharedRefreshLock(t *testing.T) {
	t.Parallel()
	onRedis(t, testSharedRefreshLock)
}

func testSharedRefreshLock(t *testing.T, rdb redis.UniversalClient) {
	f := newFleet(t, rdb, 4, 9)
	tr, r := f.tracker(time.Minute)
	ctx := t.Context()
	old := reading{At: time.Now().Add(-10 * time.Minute).UnixMilli(), Queues: f.names, Depths: []int64{5, 0, 0, 0}}
	if err := f.rdb.Set(ctx, tr.keys.depths, old.encode(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.Set(ctx, tr.keys.lock, "another tracker", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.calls.Load(); got != 0 {
		t.Errorf("calls while another tracker holds the lock = %d, want 0", got)
	}
	if d, fresh := tr.Estimate(0); d != 5 || fresh {
		t.Errorf("Estimate(0) from a 10-minute-old reading = %d, %v; want 5, false", d, fresh)
	}

	if err := f.rdb.Del(ctx, tr.keys.lock).Err(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := r.calls.Load(); got != 4 {
		t.Errorf("calls with the lock free = %d, want 4", got)
	}
	if d, fresh := tr.Estimate(0); d != 9 || !fresh {
		t.Errorf("Estimate(0) after polling = %d, %v; want 9, true", d, fresh)
	}
	s, err := f.rdb.Get(ctx, tr.keys.depths).Result()
	if err != nil {
		t.Fatal(err)
	}
	shared, err := decodeReading(s, f.names)
	if err != nil {
		t.Fatal(err)
	}
	if shared.At <= old.At || shared.Depths[0] != 9 {
		t.Errorf("shared reading = %+v, want the new poll", shared)
	}
	if owner, _ := f.rdb.Get(ctx, tr.keys.lock).Result(); owner != tr.token {
		t.Errorf("lock owner = %q, want the polling tracker", owner)
	}
}

// TestSharedPollFailureReleasesLock: a tracker whose poll fails lets the
// next tracker poll at once instead of waiting out the lock.
func TestSharedPollFailureReleasesLock(t *testing.T) {
	t.Parallel()
	onRedis(t, testSharedPollFailureReleasesLock)
}

func testSharedPollFailureReleasesLock(t *testing.T, rdb redis.UniversalClient) {
	f := newFleet(t, rdb, 4, 2)
	a, ra := f.tracker(time.Minute)
	b, rb := f.tracker(time.Minute)
	ra.fail(errors.New("no route to sqs"))
	if err := a.Refresh(t.Context()); err == nil {
		t.Fatal("Refresh with a failing reader: want an error")
	}
	if n, err := f.rdb.Exists(t.Context(), a.keys.lock).Result(); err != nil || n != 0 {
		t.Errorf("lock exists after a failed poll: %d, %v", n, err)
	}
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d, fresh := b.Estimate(0); rb.calls.Load() != 4 || d != 2 || !fresh {
		t.Errorf("second tracker: calls %d, Estimate(0) = %d, %v; want 4 calls, 2, true", rb.calls.Load(), d, fresh)
	}
}

// TestSharedRedisDown: without Redis, each tracker reads the queues itself
// and picks stay shallowest.
func TestSharedRedisDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	f := newFleet(t, rdb, 4, 0, 6)
	tr, r := f.tracker(time.Minute)
	if err := tr.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh with Redis down: %v", err)
	}
	if d, fresh := tr.Estimate(1); r.calls.Load() != 4 || d != 6 || !fresh {
		t.Errorf("calls %d, Estimate(1) = %d, %v; want 4, 6, true", r.calls.Load(), d, fresh)
	}
	if !tr.shared.Down() {
		t.Error("shared readings not down with Redis unreachable")
	}
}

// TestSharedFleetPollsOncePerInterval runs three trackers for ten
// intervals of real time (Redis expires the lock in real time) and counts
// their polls: about one per interval for the fleet, not three.
func TestSharedFleetPollsOncePerInterval(t *testing.T) {
	t.Parallel()
	const interval, intervals = 200 * time.Millisecond, 10
	f := newFleet(t, nil, 8, 1)
	var trackers []*Tracker
	var readers []*reader
	var metrics []*degrade.Metrics
	for range 3 {
		tr, r, rm := f.trackerMetrics(interval)
		trackers = append(trackers, tr)
		readers = append(readers, r)
		metrics = append(metrics, rm)
	}
	for _, tr := range trackers {
		if err := tr.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The measurement window: counting calls over a span of real time is
	// the point here, not synchronisation.
	<-time.After(intervals * interval)
	for _, tr := range trackers {
		if err := tr.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	var calls int64
	for _, r := range readers {
		calls += r.calls.Load()
	}
	polls := calls / 8
	// A tracker whose Redis call outlasts its timeout (a quarter of the
	// interval; a busy machine) reads the queues itself, and counts it:
	// those polls are the degraded path's, not the shared one's.
	var fallbacks int64
	for _, rm := range metrics {
		fallbacks += int64(value(rm.FallbackFor("queue_depths")))
	}
	t.Logf("3 trackers, %d intervals: %d polls of 8 queues, %d of them for want of Redis", intervals, polls, fallbacks)
	// Shared polls are at least an interval apart, plus the first; a slow
	// machine only makes fewer.
	if shared := polls - fallbacks; shared > intervals+2 || polls < intervals/3 {
		t.Errorf("fleet polls = %d over %d intervals, want about one per interval", polls, intervals)
	}
	for i, tr := range trackers {
		if _, fresh := tr.Estimate(0); !fresh {
			t.Errorf("tracker %d: readings not fresh", i)
		}
	}
}

// readerCounter counts the calls of the DepthReader it wraps.
type readerCounter struct {
	DepthReader
	calls int
}

func (c *readerCounter) Depth(ctx context.Context, q string) (queue.Depth, error) {
	c.calls++
	return c.DepthReader.Depth(ctx, q)
}
