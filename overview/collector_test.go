package overview_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/overview"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
	"github.com/fairq/fairq/sharding"
	"github.com/fairq/fairq/tenant"
)

func ptr[T any](v T) *T { return &v }

// system is what a Collector reads: a memory backend with a pool of four
// live queues, a registry of tenants a (concurrency 5, process_rate 7)
// and b (paused), and their backlog counts.
type system struct {
	backend *queue.Memory
	names   queue.Names
	tenants *tenant.Registry
	backlog *backlog.Tracker
	pool    *sharding.Pool
}

func newSystem(t *testing.T) *system {
	t.Helper()
	s := &system{backend: queue.NewMemory(queue.MemoryConfig{}), names: queue.PoolNames("ov", 4)}
	queuetest.CreatePool(t, s.backend, s.names)
	var err error
	s.tenants, err = tenant.New(tenant.Config{Tenants: []tenant.Spec{
		{ID: "a", Limits: tenant.Limits{Concurrency: ptr(5), ProcessRate: ptr(7.0)}},
		{ID: "b"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.tenants.Pause(context.Background(), "b", true); err != nil {
		t.Fatal(err)
	}
	counter, err := backlog.New(backlog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: counter})
	if err != nil {
		t.Fatal(err)
	}
	s.backlog = testenv.Started(t, tr)
	s.backlog.Add("a", 12)
	if err := s.backlog.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.pool, err = sharding.NewPool(4, 2); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *system) config(local *overview.Recorder, reg prometheus.Registerer) overview.Config {
	return overview.Config{
		Depths: s.backend, Names: s.names, Tenants: s.tenants, Backlog: s.backlog,
		Shard: func(id string) []int {
			sh := s.pool.Shard(id)
			out := make([]int, sh.Len())
			for i := range out {
				out[i] = sh.Queue(i)
			}
			return out
		},
		Local: local, Instance: "dev-1", Role: "dev",
		SampleEvery: 10 * time.Millisecond, History: 50 * time.Millisecond,
		Registerer: reg,
	}
}

func collector(t *testing.T, cfg overview.Config) *overview.Collector {
	t.Helper()
	c, err := overview.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Started(t, c)
}

// document waits for a document that satisfies ok, and returns it.
func document(t *testing.T, c *overview.Collector, ok func(*overview.Document) bool) *overview.Document {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := c.Document(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if ok(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("no document as wanted within 5 s; the last: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCollectorOneProcess(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	for range 3 {
		queuetest.Put(t, s.backend, s.names.Live[1], queuetest.Msg{Body: "x", Tenant: "a"})
	}
	queuetest.Put(t, s.backend, s.names.DLQ, queuetest.Msg{Body: "dead", Tenant: "a"})
	rec := overview.NewRecorder(overview.RecorderConfig{Slots: 50})
	// 40 in flight: a has 30 (75%), b 1, a tenant the registry does not
	// know 9 (22.5%): a and the stranger are noisy, b is not.
	for range 30 {
		rec.Started("a", 3*time.Second, true)
	}
	rec.Started("b", 0, true)
	for range 9 {
		rec.Started("gone", 0, true)
	}
	rec.Accepted("a", 60)
	rec.Refused("a", "rate_limited", 6)
	rec.Spilled("a", "concurrency")
	reg := prometheus.NewRegistry()
	c := collector(t, s.config(rec, reg))

	d := document(t, c, func(d *overview.Document) bool { return len(d.Queues[1].History) >= 3 })
	if d.Partial || len(d.Problems) != 0 {
		t.Errorf("partial %v: %v", d.Partial, d.Problems)
	}
	var roles []string
	for _, q := range d.Queues {
		roles = append(roles, q.Name+":"+q.Role)
	}
	if diff := cmp.Diff([]string{"ov-live-00:live", "ov-live-01:live", "ov-live-02:live", "ov-live-03:live", "ov-overflow:overflow", "ov-backlog:backlog", "ov-dlq:dlq"}, roles); diff != "" {
		t.Errorf("queues (-want +got):\n%s", diff)
	}
	if q := d.Queues[1]; q.Visible != 3 || q.SampledAt == nil || len(q.History) > 5 || q.History[len(q.History)-1].Visible != 3 {
		t.Errorf("live-01: %+v; want 3 visible, at most 5 points of history", q)
	}
	if d.DLQ.Visible != 1 {
		t.Errorf("dlq %+v, want 1 visible", d.DLQ)
	}

	byID := map[string]overview.TenantRow{}
	for _, r := range d.Tenants {
		byID[r.ID] = r
	}
	a, b, gone := byID["a"], byID["b"], byID["gone"]
	if len(d.Tenants) != 3 {
		t.Fatalf("tenants %+v, want a, b and gone", d.Tenants)
	}
	if a.State != "active" || a.Backlog == nil || *a.Backlog != 12 || a.InFlight != 30 || a.Concurrency != 5 || a.ProcessRateLimit != 7 ||
		a.AcceptedPerS <= 0 || a.RefusedPerS["rate_limited"] <= 0 || a.SpilledPerS["concurrency"] <= 0 ||
		a.AgeFirstAttemptP95 == nil || *a.AgeFirstAttemptP95 < 2.5 || *a.AgeFirstAttemptP95 > 5 ||
		a.InFlightShare != 0.75 || !a.Noisy || !strings.Contains(a.NoisyReason, "75% of the messages in flight") || len(a.Shard) != 2 {
		t.Errorf("tenant a: %+v", a)
	}
	if b.State != "paused" || !b.PauseIngest || b.Noisy || b.InFlight != 1 {
		t.Errorf("tenant b: %+v", b)
	}
	if gone.State != "unknown" || !gone.Noisy || gone.InFlight != 9 {
		t.Errorf("tenant gone: %+v", gone)
	}
	if diff := cmp.Diff([]overview.WorkerRow{{ID: "dev-1", Slots: 50, SlotsInUse: 40, LastHeartbeat: d.Workers[0].LastHeartbeat, Reporting: true}}, d.Workers); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}
	if n := testutil.CollectAndCount(reg, "fairq_tenant_noisy"); n != 2 {
		t.Errorf("fairq_tenant_noisy: %d series, want a's and gone's", n)
	}
}

// TestCollectorQuietFleet: below the minimum in flight nobody is noisy,
// and a tenant no longer noisy loses its series.
func TestCollectorQuietFleet(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	rec := overview.NewRecorder(overview.RecorderConfig{})
	var ends []func()
	for range 29 {
		ends = append(ends, rec.Started("a", 0, true))
	}
	reg := prometheus.NewRegistry()
	cfg := s.config(rec, reg)
	c := collector(t, cfg)
	d := document(t, c, func(*overview.Document) bool { return true })
	if d.Tenants[0].InFlightShare != 1 || d.Tenants[0].Noisy {
		t.Errorf("a alone with 29 in flight: %+v; want all the share, not noisy", d.Tenants[0])
	}
	ends = append(ends, rec.Started("a", 0, true))
	document(t, c, func(d *overview.Document) bool { return d.Tenants[0].Noisy })
	if n := testutil.CollectAndCount(reg, "fairq_tenant_noisy"); n != 1 {
		t.Errorf("fairq_tenant_noisy with a noisy: %d series", n)
	}
	for _, end := range ends[:20] {
		end()
	}
	rec.Started("b", 0, true)
	document(t, c, func(d *overview.Document) bool { return !d.Tenants[0].Noisy })
	if n := testutil.CollectAndCount(reg, "fairq_tenant_noisy"); n != 0 {
		t.Errorf("fairq_tenant_noisy once nobody is noisy: %d series", n)
	}
}

// failing fails the depth reads of one queue.
type failing struct {
	overview.DepthReader
	queue string
}

func (f failing) Depth(ctx context.Context, q string) (queue.Depth, error) {
	if q == f.queue {
		return queue.Depth{}, errors.New("access denied")
	}
	return f.DepthReader.Depth(ctx, q)
}

func TestCollectorPartial(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	cfg := s.config(overview.NewRecorder(overview.RecorderConfig{}), nil)
	cfg.Depths = failing{s.backend, s.names.DLQ}
	c := collector(t, cfg)
	d := document(t, c, func(d *overview.Document) bool { return d.Queues[0].SampledAt != nil })
	if !d.Partial || len(d.Problems) != 1 || !strings.Contains(d.Problems[0], "depth of ov-dlq: access denied") {
		t.Errorf("partial %v, problems %q; want the DLQ's depth named", d.Partial, d.Problems)
	}
	if q := d.Queues[len(d.Queues)-1]; q.SampledAt != nil || len(q.History) != 0 {
		t.Errorf("the DLQ's row: %+v, want never sampled", q)
	}
}

// held holds the depth read of one queue until released.
type held struct {
	overview.DepthReader
	queue             string
	reached, released chan struct{}
	once              sync.Once
}

func (h *held) Depth(ctx context.Context, q string) (queue.Depth, error) {
	if q == h.queue {
		h.once.Do(func() { close(h.reached) })
		select {
		case <-h.released:
		case <-ctx.Done():
			return queue.Depth{}, ctx.Err()
		}
	}
	return h.DepthReader.Depth(ctx, q)
}

// TestCollectorWholePasses: a document built while a pass is under way
// shows the pass before it, never some queues read and others not.
func TestCollectorWholePasses(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	cfg := s.config(overview.NewRecorder(overview.RecorderConfig{}), nil)
	h := &held{DepthReader: s.backend, queue: s.names.DLQ, reached: make(chan struct{}), released: make(chan struct{})}
	cfg.Depths = h
	c := collector(t, cfg)
	<-h.reached
	d, err := c.Document(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range d.Queues {
		if q.SampledAt != nil {
			t.Errorf("%s read while the pass that read it is under way", q.Name)
		}
	}
	close(h.released)
	document(t, c, func(d *overview.Document) bool { return !d.Partial })
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	s := newSystem(t)
	for _, change := range []func(*overview.Config){
		func(c *overview.Config) { c.Depths = nil },
		func(c *overview.Config) { c.NoisyShare = 1.5 },
		func(c *overview.Config) { c.NoisyMinInFlight = -1 },
		func(c *overview.Config) { c.SampleEvery = -time.Second },
	} {
		cfg := s.config(nil, nil)
		change(&cfg)
		if _, err := overview.New(cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}

// TestFleet: with Redis, a gateway's document sums the reports of every
// process, lists the workers of the fleet registry, and drops a process
// that stopped.
func TestFleet(t *testing.T) {
	t.Parallel()
	for _, topo := range testenv.RedisTopologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			testFleet(t, topo.Client(t))
		})
	}
}

func testFleet(t *testing.T, client redis.UniversalClient) {
	s := newSystem(t)
	prefix := testenv.Prefix(t) + ":"

	worker := overview.NewRecorder(overview.RecorderConfig{Slots: 4})
	worker.Started("a", time.Second, true)
	otherGateway := overview.NewRecorder(overview.RecorderConfig{})
	otherGateway.Accepted("a", 600)
	board := func(rec *overview.Recorder, id, role string) *overview.Board {
		b, err := overview.NewBoard(overview.BoardConfig{Redis: client, Prefix: prefix, Instance: id, Role: role, Recorder: rec})
		if err != nil {
			t.Fatal(err)
		}
		return testenv.Started(t, b)
	}
	board(worker, "w1", "worker")
	stopping := board(otherGateway, "g1", "gateway")
	for _, id := range []string{"w1", "w2"} { // w2 runs but does not report
		f, err := fleet.New(fleet.Config{Redis: client, Prefix: prefix, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		testenv.Started(t, f)
	}

	self := overview.NewRecorder(overview.RecorderConfig{})
	self.Accepted("a", 60)
	cfg := s.config(self, nil)
	cfg.Instance, cfg.Role, cfg.Redis, cfg.Prefix = "g2", "gateway", client, prefix
	c := collector(t, cfg)
	d := document(t, c, func(d *overview.Document) bool {
		return len(d.Workers) == 2 && d.Tenants[0].InFlight == 1 && !d.Partial
	})
	// This gateway's 60 alone make at most 60/s (a window is at least a
	// second); the other's 600 over the few seconds of the test make more.
	if a := d.Tenants[0]; a.AcceptedPerS <= 100 {
		t.Errorf("tenant a: %+v; want the accepted of both gateways", a)
	}
	want := map[string]overview.WorkerRow{
		"w1": {ID: "w1", Slots: 4, SlotsInUse: 1, Reporting: true},
		"w2": {ID: "w2"},
	}
	for _, w := range d.Workers {
		beat, err := time.Parse(time.RFC3339, w.LastHeartbeat)
		if err != nil || time.Since(beat) > time.Minute {
			t.Errorf("worker %s: heartbeat %q (%v)", w.ID, w.LastHeartbeat, err)
		}
		w.LastHeartbeat = ""
		if diff := cmp.Diff(want[w.ID], w); diff != "" {
			t.Errorf("worker %s (-want +got):\n%s", w.ID, diff)
		}
	}

	if err := stopping.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	reports, err := overview.ReadReports(t.Context(), client, prefix, "", time.Now())
	if err != nil || len(reports) != 1 || reports[0].Instance != "w1" {
		t.Errorf("reports after g1 stopped: %+v %v; want w1's alone", reports, err)
	}
}
