package schedule_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/schedule"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.VerifyNoLeaks()) }

var discard = slog.New(slog.DiscardHandler)

func tasks(t testing.TB, yaml string) []schedule.Task {
	t.Helper()
	ts, err := schedule.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

const everySecond = "version: 1\ncron:\n - name: tick\n   url: /scheduled/tick\n   schedule: '@every 1s'\n"

func newQueue(t testing.TB) *queue.Memory {
	t.Helper()
	b := queue.NewMemory(queue.MemoryConfig{})
	if _, err := b.Create(context.Background(), queue.Spec{Name: "cron"}); err != nil {
		t.Fatal(err)
	}
	return b
}

// firings drains the queue and returns the scheduled times (unix seconds)
// of the firings on it, sorted.
func firings(t testing.TB, b *queue.Memory) []int64 {
	t.Helper()
	var out []int64
	for {
		msgs, err := b.Receive(context.Background(), "cron", queue.ReceiveOptions{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			task, err := envelope.DecodeTask(m.Attributes[envelope.AttrTask])
			if err != nil {
				t.Fatalf("firing without a task: %v", err)
			}
			if task.Name != "tick" || task.Path != "/scheduled/tick" {
				t.Errorf("firing of %+v", task)
			}
			out = append(out, task.ScheduledAt.Unix())
		}
	}
	slices.Sort(out)
	return out
}

// TestAlone: without Redis the process is its own leader and fires every
// scheduled time.
func TestAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newQueue(t)
		s, err := schedule.New(schedule.Config{Tasks: tasks(t, everySecond), Backend: b, Queue: "cron", Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		start := time.Now().Unix()
		time.Sleep(5*time.Second + 500*time.Millisecond)
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := []int64{start + 1, start + 2, start + 3, start + 4, start + 5}
		if got := firings(t, b); !slices.Equal(got, want) {
			t.Errorf("fired at %v, want %v", got, want)
		}
		if s.Leader() {
			t.Error("still leading after Stop")
		}
	})
}

// TestFleet: three schedulers sharing Redis fire each scheduled time once;
// when the leader stops, and then when the next one crashes, another takes
// over and the firings missed meanwhile are caught up.
func TestFleet(t *testing.T) {
	t.Parallel()
	for _, topo := range testenv.RedisTopologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			testFleet(t, topo.Client)
		})
	}
}

// testFleet runs TestFleet with a client of its own for each scheduler.
func testFleet(t *testing.T, newClient func(testing.TB) redis.UniversalClient) {
	prefix := testenv.Prefix(t) + ":"
	b := newQueue(t)
	const ttl = time.Second
	type member struct {
		s   *schedule.Scheduler
		reg *prometheus.Registry
	}
	var fleet []*member
	for i := range 3 {
		rdb := newClient(t)
		reg := prometheus.NewRegistry()
		s, err := schedule.New(schedule.Config{
			Tasks: tasks(t, everySecond), Backend: b, Queue: "cron",
			Redis: rdb, KeyPrefix: prefix, LeaseTTL: ttl, Identity: string(rune('a' + i)),
			Logger: discard, Registerer: reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		m := &member{s, reg}
		fleet = append(fleet, m)
		t.Cleanup(func() { m.s.Stop(context.Background()) })
	}
	leader := func() *member {
		t.Helper()
		deadline := time.Now().Add(5 * ttl)
		for time.Now().Before(deadline) {
			var leaders []*member
			for _, m := range fleet {
				if m.s.Leader() {
					leaders = append(leaders, m)
				}
			}
			if len(leaders) == 1 {
				return leaders[0]
			}
			time.Sleep(50 * time.Millisecond) // polling the state of other processes' leases
		}
		t.Fatal("no single leader")
		return nil
	}
	fired := func(m *member) float64 {
		mfs, err := m.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "fairq_cron_fired_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}

	first := leader()
	time.Sleep(3 * time.Second)
	if err := first.s.Stop(context.Background()); err != nil { // graceful: gives up its lease
		t.Fatal(err)
	}
	fleet = slices.DeleteFunc(fleet, func(m *member) bool { return m == first })
	second := leader()
	time.Sleep(3 * time.Second)
	second.s.Kill() // crash: its lease runs out
	second.s.Stop(context.Background())
	if taken := time.Now(); leader() == nil || time.Since(taken) < ttl/2 {
		t.Errorf("took over %v after the crash, want about the lease TTL %v", time.Since(taken), ttl)
	}
	fleet = slices.DeleteFunc(fleet, func(m *member) bool { return m == second })
	third := leader()
	time.Sleep(3 * time.Second)
	end := time.Now().Unix()
	third.s.Stop(context.Background())

	got := firings(t, b)
	if len(got) == 0 {
		t.Fatal("nothing fired")
	}
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Errorf("fired twice for %d", got[i])
		}
		if got[i] > got[i-1]+1 {
			t.Errorf("no firing between %d and %d", got[i-1], got[i])
		}
	}
	if last := got[len(got)-1]; last < end-1 {
		t.Errorf("last firing at %d, want up to %d", last, end-1)
	}
	for i, m := range []*member{first, second, third} {
		if fired(m) == 0 {
			t.Errorf("leader %d fired nothing", i+1)
		}
	}
}

// failingSender refuses every send.
type failingSender struct{}

func (failingSender) Send(context.Context, string, []queue.Entry) ([]queue.SendResult, error) {
	return nil, errors.New("sqs is down")
}

// TestFailedFiringReleasesClaim: a firing whose send failed gives its
// claim back, so that a later leader catching up can fire it.
func TestFailedFiringReleasesClaim(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.Prefix(t) + ":"
	reg := prometheus.NewRegistry()
	s, err := schedule.New(schedule.Config{
		Tasks: tasks(t, everySecond), Backend: failingSender{}, Queue: "cron",
		Redis: rdb, KeyPrefix: prefix, LeaseTTL: time.Second, Logger: discard, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for missedCount(t, reg) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no firing was missed")
		}
		time.Sleep(50 * time.Millisecond) // polling a metric
	}
	// Stop waits for a firing in progress, which fails as well.
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(t.Context(), schedule.FiredKey(prefix, "tick", 0)[:len(prefix)]+"cron:fired:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("claims left after failed sends: %v", keys)
	}
}

func missedCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() == "fairq_cron_missed_total" {
			for _, m := range f.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
