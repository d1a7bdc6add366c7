package sharding

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fairq/fairq/queue"
)

// reader is a DepthReader whose depths a test sets; it counts its calls and
// fails while err is set.
type reader struct {
	mu     sync.Mutex
	depths map[string]int
	err    error
	calls  atomic.Int64
}

func newReader(names []string, depths ...int) *reader {
	r := &reader{depths: make(map[string]int)}
	for i, q := range names {
		r.depths[q] = 0
		if i < len(depths) {
			r.depths[q] = depths[i]
		}
	}
	return r
}

func (r *reader) Depth(_ context.Context, q string) (queue.Depth, error) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return queue.Depth{}, r.err
	}
	d, ok := r.depths[q]
	if !ok {
		return queue.Depth{}, queue.ErrQueueNotFound
	}
	// Split across visible and in flight: the tracker must add both.
	return queue.Depth{Visible: d - d/3, NotVisible: d / 3, Delayed: 1000}, nil
}

func (r *reader) set(q string, d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.depths[q] = d
}

func (r *reader) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// setup returns a tracker over n queues of a fresh pool with shards of k,
// the reader under it and its metrics registry.
func setup(t *testing.T, n, k int, cfg Config) (*Tracker, *reader, *prometheus.Registry) {
	t.Helper()
	names := queue.PoolNames("test", n).Live
	r := newReader(names)
	reg := prometheus.NewRegistry()
	if cfg.Reader == nil {
		cfg.Reader = r
	}
	cfg.Queues = names
	cfg.ShardSize = k
	cfg.Registerer = reg
	cfg.Logger = slog.New(slog.DiscardHandler)
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, r, reg
}

// tenantWithShard returns a tenant id whose shard in p is exactly qs.
func tenantWithShard(t *testing.T, p *Pool, qs ...int) string {
	t.Helper()
	want := shardOf(qs...)
	for i := range 1_000_000 {
		tenant := fmt.Sprintf("tenant-%d", i)
		if p.Shard(tenant) == want {
			return tenant
		}
	}
	t.Fatalf("no tenant with shard %v", want)
	return ""
}

func TestNewTrackerValidates(t *testing.T) {
	t.Parallel()
	names := queue.PoolNames("v", 4).Live
	r := newReader(names)
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no reader", Config{Queues: names}},
		{"no queues", Config{Reader: r}},
		{"repeated queue", Config{Reader: r, Queues: []string{"a", "a"}}},
		{"empty queue name", Config{Reader: r, Queues: []string{"a", ""}}},
		{"shard larger than pool", Config{Reader: r, Queues: names, ShardSize: 5}},
		{"negative interval", Config{Reader: r, Queues: names, Interval: -time.Second}},
		{"stale before interval", Config{Reader: r, Queues: names, Interval: time.Second, StaleAfter: time.Millisecond}},
		{"negative concurrency", Config{Reader: r, Queues: names, PollConcurrency: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTracker(tt.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("NewTracker: err = %v, want %v", err, ErrInvalidConfig)
			}
		})
	}
	if _, err := NewTracker(Config{Reader: r, Queues: names}); err != nil {
		t.Errorf("NewTracker with defaults: %v", err)
	}
}

func TestNewTrackerRegistersOnce(t *testing.T) {
	t.Parallel()
	names := queue.PoolNames("v", 4).Live
	reg := prometheus.NewRegistry()
	cfg := Config{Reader: newReader(names), Queues: names, Registerer: reg}
	if _, err := NewTracker(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTracker(cfg); err == nil {
		t.Error("second tracker on one registry: want a registration error")
	}
}

// TestPickRoutesAroundDeepQueue: with one queue of the shard 50 deeper, the
// first 50 picks go to the other, then the two alternate, since Pick counts
// each message on its queue at once.
func TestPickRoutesAroundDeepQueue(t *testing.T) {
	t.Parallel()
	tr, r, reg := setup(t, 8, 2, Config{})
	tenant := tenantWithShard(t, tr.Pool(), 2, 5)
	r.set("test-live-02", 50)
	r.set("test-live-06", 7) // not in the shard
	if err := tr.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d, fresh := tr.Estimate(2); d != 50 || !fresh {
		t.Fatalf("Estimate(2) = %d, %v; want 50, true", d, fresh)
	}
	got := map[int]int{}
	for i := range 100 {
		q := tr.Pick(tenant)
		got[q]++
		if i < 50 && q != 5 {
			t.Fatalf("pick %d went to queue %d, want 5 while it is shallower", i, q)
		}
	}
	if diff := cmp.Diff(map[int]int{2: 25, 5: 75}, got); diff != "" {
		t.Errorf("picks by queue (-want +got):\n%s", diff)
	}
	if got := value(tr.m.depth.WithLabelValues("test-live-02")); got != 50 {
		t.Errorf("fairq_queue_depth{queue=test-live-02} = %v, want 50", got)
	}
	if got := value(tr.m.stale); got != 0 {
		t.Errorf("fairq_shard_depth_stale = %v, want 0", got)
	}
	if n, err := series(reg, "fairq_queue_depth"); err != nil || n != 8 {
		t.Errorf("fairq_queue_depth series = %d, %v; want 8", n, err)
	}
}

// TestPickTiesUniform: among queues of equal depth, each is picked with
// the same probability (chi-square over many picks).
func TestPickTiesUniform(t *testing.T) {
	t.Parallel()
	for _, k := range []int{2, 4, 8} {
		t.Run(fmt.Sprintf("k%d", k), func(t *testing.T) {
			tr, _, _ := setup(t, 64, k, Config{})
			if err := tr.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			s := tr.Pool().Shard("acme")
			counts := make([]int, k)
			const picks = 20_000
			for range picks {
				q := tr.shallowest(s) // shallowest, unlike Pick, counts nothing
				for i := range k {
					if s.Queue(i) == q {
						counts[i]++
					}
				}
			}
			stat, bound := chiSquare(counts, float64(picks)/float64(k))
			if stat > bound {
				t.Errorf("tie-break chi-square = %.1f over %v, want ≤ %.1f", stat, counts, bound)
			}
		})
	}
}

// TestPickRandomBeforeFirstReading: with no reading, picks spread over the
// whole shard and the metrics say why.
func TestPickRandomBeforeFirstReading(t *testing.T) {
	t.Parallel()
	tr, _, _ := setup(t, 8, 2, Config{})
	tenant := tenantWithShard(t, tr.Pool(), 1, 6)
	counts := map[int]int{}
	const picks = 2000
	for range picks {
		counts[tr.Pick(tenant)]++
	}
	// Binomial(2000, 1/2): sd ≈ 22; 850–1150 is ±6.7 sd.
	if len(counts) != 2 || counts[1] < 850 || counts[6] < 850 {
		t.Errorf("random picks by queue = %v, want about 1000 on each of 1 and 6", counts)
	}
	if got := value(tr.m.randomPicks); got != picks {
		t.Errorf("fairq_shard_random_picks_total = %v, want %d", got, picks)
	}
	if got := value(tr.m.stale); got != 1 {
		t.Errorf("fairq_shard_depth_stale = %v, want 1", got)
	}
	if _, fresh := tr.Estimate(1); fresh {
		t.Error("Estimate before any reading: fresh = true")
	}
}

// TestStaleWhenPollsFail runs the loop in a bubble: while polls succeed
// every pick avoids the deep queue; once they have failed for StaleAfter,
// picks are random within the shard, and they return to the shallowest
// queue when polls do.
func TestStaleWhenPollsFail(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr, r, _ := setup(t, 8, 2, Config{Interval: time.Second, StaleAfter: 3 * time.Second})
		tenant := tenantWithShard(t, tr.Pool(), 0, 4)
		r.set("test-live-04", 1_000_000)
		if err := tr.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer tr.Stop(context.Background())
		synctest.Wait()
		picks := func() map[int]int {
			counts := map[int]int{}
			for range 400 {
				q := tr.Pick(tenant)
				counts[q]++
				tr.Sent(q, -1) // keep the estimates where the reading put them
			}
			return counts
		}
		if got := picks(); got[4] != 0 {
			t.Fatalf("fresh readings: picks by queue = %v, want none on the deep queue 4", got)
		}

		r.fail(errors.New("sqs is down"))
		time.Sleep(3 * time.Second) // readings are now 3 s old: not yet stale
		synctest.Wait()
		if got := picks(); got[4] != 0 {
			t.Fatalf("after 3 s of failures: picks by queue = %v, want none on queue 4", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := value(tr.m.stale); got != 1 {
			t.Fatalf("fairq_shard_depth_stale = %v after 4 s of failures, want 1", got)
		}
		if got := picks(); got[0] < 100 || got[4] < 100 {
			t.Errorf("stale readings: picks by queue = %v, want both queues of the shard", got)
		}
		if got := value(tr.m.polls.WithLabelValues("error")); got != 4 {
			t.Errorf("failed polls = %v, want 4", got)
		}

		r.fail(nil)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := picks(); got[4] != 0 {
			t.Errorf("recovered: picks by queue = %v, want none on queue 4", got)
		}
	})
}

// TestLoopPollsEveryInterval: the loop reads at once, then once an
// interval, every queue each time, and stops when asked.
func TestLoopPollsEveryInterval(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		tr, r, _ := setup(t, 8, 2, Config{Interval: 500 * time.Millisecond})
		if err := tr.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := tr.Start(t.Context()); !errors.Is(err, ErrStarted) {
			t.Errorf("second Start: err = %v, want %v", err, ErrStarted)
		}
		synctest.Wait()
		if got := r.calls.Load(); got != 8 {
			t.Errorf("calls after start = %d, want 8", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := r.calls.Load(); got != 5*8 {
			t.Errorf("calls after 2 s = %d, want 40", got)
		}
		if err := tr.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := tr.Stop(t.Context()); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		time.Sleep(2 * time.Second)
		if got := r.calls.Load(); got != 5*8 {
			t.Errorf("calls after Stop = %d, want still 40", got)
		}
	})
}

// TestLocalCorrection: an estimate is the reading plus what this process
// counted after the reading was taken, whenever the reading arrives.
func TestLocalCorrection(t *testing.T) {
	t.Parallel()
	tr, _, _ := setup(t, 4, 2, Config{})
	depths := func(d ...int64) reading {
		return reading{Queues: tr.cfg.Queues, Depths: d}
	}
	tr.mark(time.UnixMilli(1000))
	tr.Sent(0, 5) // after the 1000 mark
	tr.mark(time.UnixMilli(2000))
	tr.Sent(0, 3) // after the 2000 mark
	tr.Sent(1, 2)
	tr.mark(time.UnixMilli(3000))
	tr.Sent(0, 1)

	tests := []struct {
		name string
		at   int64
		want int64 // estimate of queue 0 for a reading of 100
	}{
		{"reading older than every mark", 500, 100 + 9},
		{"reading between first and second mark", 1500, 100 + 9},
		{"reading at the second mark", 2000, 100 + 4},
		{"reading after the last mark", 3500, 100 + 1},
	}
	for _, tt := range tests {
		r := depths(100, 10, 0, 0)
		r.At = tt.at
		tr.readAt = 0
		tr.adopt(r, sourceRedis)
		if got, _ := tr.Estimate(0); got != tt.want {
			t.Errorf("%s: Estimate(0) = %d, want %d", tt.name, got, tt.want)
		}
	}
	// An older reading never replaces a newer one.
	old := depths(0, 0, 0, 0)
	old.At = 100
	tr.adopt(old, sourceRedis)
	if got, _ := tr.Estimate(0); got != 101 {
		t.Errorf("after an older reading: Estimate(0) = %d, want 101", got)
	}
	// Sent may take back what Pick counted; an estimate is never negative.
	tr.Sent(2, -3)
	if got, _ := tr.Estimate(2); got != 0 {
		t.Errorf("Estimate(2) after Sent(2, -3) = %d, want 0", got)
	}
}

// TestSendsDuringPollCount: messages picked while a poll is under way are
// counted on top of its reading, whether or not it saw them: a burst is
// spread, never piled up.
func TestSendsDuringPollCount(t *testing.T) {
	t.Parallel()
	inside := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	rd := readerFunc(func(ctx context.Context, q string) (queue.Depth, error) {
		once.Do(func() { close(inside); <-release })
		return queue.Depth{}, nil
	})
	tr, _, _ := setup(t, 2, 2, Config{Reader: rd, PollConcurrency: 1, PollTimeout: time.Minute})
	done := make(chan error)
	go func() { done <- tr.Refresh(context.Background()) }()
	<-inside
	tr.Sent(0, 7)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := tr.Estimate(0); got != 7 {
		t.Errorf("Estimate(0) = %d, want 7", got)
	}
}

type readerFunc func(ctx context.Context, q string) (queue.Depth, error)

func (f readerFunc) Depth(ctx context.Context, q string) (queue.Depth, error) { return f(ctx, q) }

func TestPickAllocs(t *testing.T) {
	tr, _, _ := setup(t, 64, 4, Config{})
	if err := tr.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { tr.Sent(tr.Pick("acme"), 1) }); n != 0 {
		t.Errorf("Pick allocates %v times, want 0", n)
	}
}

// value reads a gauge or counter.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// series counts the series of a metric family in reg.
func series(reg *prometheus.Registry, name string) (int, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.Metric), nil
		}
	}
	return 0, nil
}
