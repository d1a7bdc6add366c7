package fleet_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/testenv"
)

func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

// onRedis runs test against one Redis node and against a Redis Cluster.
func onRedis(t *testing.T, test func(t *testing.T, c redis.UniversalClient)) {
	t.Helper()
	for _, topo := range testenv.RedisTopologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			test(t, topo.Client(t))
		})
	}
}

// member starts a worker's Fleet; it is stopped when the test ends.
func member(t testing.TB, cfg fleet.Config) *fleet.Fleet {
	t.Helper()
	f, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel() // Start's context only carries values: this ends nothing
	t.Cleanup(func() {
		if err := f.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return f
}

func size(t testing.TB, f *fleet.Fleet) int {
	t.Helper()
	n, err := f.Size(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually checks cond every 10 ms until it holds or d passes, and
// returns how long that took.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
	return time.Since(start)
}

func TestFleetSize(t *testing.T) {
	t.Parallel()
	onRedis(t, testFleetSize)
}

func testFleetSize(t *testing.T, c redis.UniversalClient) {
	const beat = 100 * time.Millisecond
	prefix := testenv.Prefix(t) + ":"
	reg := prometheus.NewRegistry()
	a := member(t, fleet.Config{Redis: c, Prefix: prefix, ID: "a", Heartbeat: beat, Registerer: reg})
	if got := size(t, a); got != 1 {
		t.Fatalf("one worker: Size = %d", got)
	}
	b := member(t, fleet.Config{Redis: c, Prefix: prefix, ID: "b", Heartbeat: beat})
	cw := member(t, fleet.Config{Redis: c, Prefix: prefix, Heartbeat: beat})
	if got := size(t, a); got != 3 {
		t.Fatalf("three workers: Size = %d", got)
	}
	if b.ID() != "b" || cw.ID() == "" || cw.ID() == a.ID() {
		t.Errorf("ids %q, %q, %q: want b and a generated one", a.ID(), b.ID(), cw.ID())
	}
	eventually(t, 2*time.Second, "a learns the size from its heartbeat", func() bool { return a.Last() == 3 })
	if got := gauge(t, reg, "fairq_fleet_workers"); got != 3 {
		t.Errorf("fairq_fleet_workers = %v, want 3", got)
	}

	if err := cw.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := size(t, a); got != 2 {
		t.Errorf("after a graceful stop: Size = %d, want 2 at once", got)
	}

	b.Kill()
	took := eventually(t, 2*time.Second, "a crashed worker leaves the count", func() bool { return size(t, a) == 1 })
	if took > 3*beat+beat {
		t.Errorf("a crashed worker counted for %v after the crash, want within three heartbeats (%v)", took, 3*beat)
	}
	eventually(t, 2*time.Second, "Last follows", func() bool { return a.Last() == 1 })
}

func TestFleetWithoutRedis(t *testing.T) {
	t.Parallel()
	f := member(t, fleet.Config{})
	if got := size(t, f); got != 1 {
		t.Errorf("Size without Redis = %d, want 1", got)
	}
	if got := f.Last(); got != 1 {
		t.Errorf("Last without Redis = %d, want 1", got)
	}
}

// TestFleetRedisDown: a worker that cannot reach Redis keeps the size it
// last knew and says so; it counts again once Redis is back.
func TestFleetRedisDown(t *testing.T) {
	t.Parallel()
	const beat = 50 * time.Millisecond
	c := redisClient(t)
	prefix := testenv.Prefix(t) + ":"
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	pc := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { pc.Close() })
	reg := prometheus.NewRegistry()
	redisMetrics, err := degrade.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	member(t, fleet.Config{Redis: c, Prefix: prefix, ID: "steady", Heartbeat: beat})
	f := member(t, fleet.Config{Redis: pc, Prefix: prefix, ID: "cut", Heartbeat: beat, Registerer: reg, RedisMetrics: redisMetrics})
	eventually(t, 2*time.Second, "both counted", func() bool { return f.Last() == 2 })

	proxy.SetDown(true)
	eventually(t, 2*time.Second, "degraded", func() bool { return gauge(t, reg, "fairq_redis_degraded") == 1 })
	// Its registration goes stale for the others; its own view stays.
	eventually(t, 2*time.Second, "the cut worker leaves the others' count", func() bool {
		n, _ := fleetSize(c, prefix, 3*beat)
		return n == 1
	})
	if got := f.Last(); got != 2 {
		t.Errorf("Last while Redis is unreachable = %d, want the 2 last known", got)
	}

	proxy.SetDown(false)
	eventually(t, 3*time.Second, "back", func() bool { return gauge(t, reg, "fairq_redis_degraded") == 0 })
	eventually(t, 2*time.Second, "counted again", func() bool { n, _ := fleetSize(c, prefix, 3*beat); return n == 2 })
}

// fleetSize counts the workers heard from within stale, as a Fleet of
// that heartbeat would.
func fleetSize(c *redis.Client, prefix string, stale time.Duration) (int, error) {
	f, err := fleet.New(fleet.Config{Redis: c, Prefix: prefix, Heartbeat: stale / 3})
	if err != nil {
		return 0, err
	}
	return f.Size(context.Background())
}

// gauge returns the value of a gauge in reg: its only series, or the one
// with component="fleet".
func gauge(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := len(m.GetLabel()) == 0
			for _, lp := range m.GetLabel() {
				ok = ok || lp.GetName() == "component" && lp.GetValue() == "fleet"
			}
			if ok {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func TestMembers(t *testing.T) {
	t.Parallel()
	onRedis(t, testMembers)
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		down := redis.NewClient(&redis.Options{Addr: testenv.Blackhole(t), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
		defer down.Close()
		if _, err := fleet.Members(t.Context(), down, "fairq:", time.Second); err == nil {
			t.Error("Members with Redis unreachable: no error")
		}
	})
}

func testMembers(t *testing.T, client redis.UniversalClient) {
	prefix := testenv.Prefix(t) + ":"
	before := time.Now().Add(-time.Second)
	member(t, fleet.Config{Redis: client, Prefix: prefix, ID: "w1", Heartbeat: 50 * time.Millisecond})
	member(t, fleet.Config{Redis: client, Prefix: prefix, ID: "w2", Heartbeat: 50 * time.Millisecond})
	// A worker that stopped beating long ago is not a member.
	if err := client.ZAdd(t.Context(), prefix+"fleet:workers", redis.Z{Score: float64(time.Now().Add(-time.Hour).UnixMilli()), Member: "gone"}).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := fleet.Members(t.Context(), client, prefix, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range got {
		ids[m.ID] = true
		if m.LastHeartbeat.Before(before) || m.LastHeartbeat.After(time.Now().Add(time.Second)) {
			t.Errorf("member %s: heartbeat %v, want about now", m.ID, m.LastHeartbeat)
		}
	}
	if len(got) != 2 || !ids["w1"] || !ids["w2"] {
		t.Errorf("members %+v, want w1 and w2", got)
	}
}

// TestWorkers: each heartbeat tells a worker the ids of the fleet and which
// of them are saturated; a worker whose heartbeats fail for three
// intervals is not registered, and keeps the ids it last knew.
func TestWorkers(t *testing.T) {
	t.Parallel()
	const beat = 50 * time.Millisecond
	c := redisClient(t)
	prefix := testenv.Prefix(t) + ":"
	var full atomic.Bool
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	pc := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { pc.Close() })
	a := member(t, fleet.Config{Redis: pc, Prefix: prefix, ID: "a", Heartbeat: beat})
	if ids, saturated, ok := a.Workers(); !ok || !slices.Equal(ids, []string{"a"}) || len(saturated) != 0 {
		t.Fatalf("after Start alone: Workers() = %v, %v, %v; want [a], none, registered", ids, saturated, ok)
	}
	member(t, fleet.Config{Redis: c, Prefix: prefix, ID: "c", Heartbeat: beat, SaturatedFunc: full.Load})
	member(t, fleet.Config{Redis: c, Prefix: prefix, ID: "b", Heartbeat: beat})
	workers := func() string {
		ids, saturated, ok := a.Workers()
		return fmt.Sprint(ids, saturated, ok)
	}
	eventually(t, 2*time.Second, "a sees b and c", func() bool { return workers() == "[a b c] [] true" })
	full.Store(true)
	eventually(t, 2*time.Second, "a sees c saturated", func() bool { return workers() == "[a b c] [c] true" })
	// Readers of the heartbeat's time are not misled by the flag.
	ms, err := fleet.Members(t.Context(), c, prefix, beat)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.LastHeartbeat.Nanosecond()%int(time.Millisecond) != 0 || time.Since(m.LastHeartbeat) > time.Second {
			t.Errorf("member %s: last heartbeat %v, want a whole millisecond about now", m.ID, m.LastHeartbeat)
		}
	}
	full.Store(false)
	eventually(t, 2*time.Second, "c no longer saturated", func() bool { return workers() == "[a b c] [] true" })

	proxy.SetDown(true)
	cut := time.Now()
	eventually(t, 2*time.Second, "a not registered while Redis is unreachable", func() bool { return workers() == "[a b c] [] false" })
	if took := time.Since(cut); took < 2*beat {
		t.Errorf("a was unregistered %v after Redis went away, want no sooner than its registration goes stale (%v)", took, 3*beat)
	}
	proxy.SetDown(false)
	eventually(t, 3*time.Second, "registered again", func() bool { return workers() == "[a b c] [] true" })
}

func TestWorkersWithoutRedis(t *testing.T) {
	t.Parallel()
	f := member(t, fleet.Config{ID: "solo"})
	if ids, saturated, ok := f.Workers(); !ok || !slices.Equal(ids, []string{"solo"}) || len(saturated) != 0 {
		t.Errorf("Workers() without Redis = %v, %v, %v; want [solo], none, registered", ids, saturated, ok)
	}
}

// TestLeave: a worker that leaves is out of the registry at once, for
// good, and the others hear of it at once rather than at their next
// heartbeat, and say so through Changed.
func TestLeave(t *testing.T) {
	t.Parallel()
	onRedis(t, testLeave)
}

func testLeave(t *testing.T, c redis.UniversalClient) {
	prefix := testenv.Prefix(t) + ":"
	// a's heartbeats are a minute apart: what it learns within the test,
	// it learns from the announcement.
	a := member(t, fleet.Config{Redis: c, Prefix: prefix, ID: "a", Heartbeat: time.Minute})
	b := member(t, fleet.Config{Redis: c, Prefix: prefix, ID: "b", Heartbeat: 20 * time.Millisecond})
	member(t, fleet.Config{Redis: c, Prefix: prefix, ID: "c", Heartbeat: time.Minute})
	// a's only heartbeat so far came before b and c joined: b's
	// announcement makes it beat at once, and find c there.
	changed := a.Changed()
	if err := b.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 5*time.Second, "a hears that b left", func() bool {
		ids, _, _ := a.Workers()
		return slices.Equal(ids, []string{"a", "c"})
	})
	t.Logf("a learned that b left %v after", took)
	select {
	case <-changed:
	default:
		t.Error("a's Changed channel not closed after the fleet changed")
	}
	// b beats every 20 ms, but no longer registers.
	<-time.After(10 * 20 * time.Millisecond) // ten of b's heartbeats, to see none register it
	ms, err := fleet.Members(t.Context(), c, prefix, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == "b" {
			t.Errorf("b registered again after it left: %+v", ms)
		}
	}
}
