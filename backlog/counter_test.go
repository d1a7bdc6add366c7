package backlog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/internal/testenv"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// stores runs a test against the memory store and against Redis, one
// node and a cluster; the counters newCounter makes share their counts.
func stores(t *testing.T, test func(t *testing.T, newCounter func(now func() time.Time) *backlog.Counter)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		// One process: every caller shares the one Counter.
		var c *backlog.Counter
		test(t, func(now func() time.Time) *backlog.Counter {
			if c == nil {
				var err error
				if c, err = backlog.New(backlog.Config{Now: now}); err != nil {
					t.Fatal(err)
				}
			}
			return c
		})
	})
	for _, topo := range testenv.RedisTopologies() {
		t.Run("redis "+topo.Name, func(t *testing.T) {
			t.Parallel()
			client := topo.Client(t)
			prefix := testenv.Prefix(t) + ":"
			test(t, func(now func() time.Time) *backlog.Counter {
				c, err := backlog.New(backlog.Config{Redis: client, Prefix: prefix, Now: now, MaxStale: -1})
				if err != nil {
					t.Fatal(err)
				}
				return c
			})
		})
	}
}

func get(t *testing.T, c *backlog.Counter, tenant string) int64 {
	t.Helper()
	n, err := c.Get(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCounter(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newCounter func(func() time.Time) *backlog.Counter) {
		ctx := context.Background()
		clk := &clock{now: time.Date(2030, 1, 1, 10, 30, 0, 0, time.UTC)}
		c := newCounter(clk.Now)
		type step struct {
			name    string
			do      func() error
			advance time.Duration
			want    map[string]int64
		}
		steps := []step{
			{"empty", nil, 0, map[string]int64{"a": 0, "b": 0}},
			{"add", func() error { return c.Add(ctx, "a", 3) }, 0, map[string]int64{"a": 3, "b": 0}},
			{"add an hour later", func() error { return c.Add(ctx, "a", 2) }, time.Hour, map[string]int64{"a": 5}},
			{"other tenant", func() error { return c.Add(ctx, "b", 7) }, 0, map[string]int64{"a": 5, "b": 7}},
			{"done takes from the oldest", func() error { return c.Done(ctx, "a", 4) }, 0, map[string]int64{"a": 1, "b": 7}},
			{"not below zero", func() error { return c.Done(ctx, "a", 10) }, 0, map[string]int64{"a": 0, "b": 7}},
			{"add after zero", func() error { return c.Add(ctx, "a", 1) }, 0, map[string]int64{"a": 1}},
			{"done of an unknown tenant", func() error { return c.Done(ctx, "zzz", 1) }, 0, map[string]int64{"zzz": 0}},
			{"reconcile caps at the queues' total", func() error { return c.Reconcile(ctx, 4) }, 0, map[string]int64{"a": 1, "b": 4}},
			{"reconcile to empty queues", func() error { return c.Reconcile(ctx, 0) }, 0, map[string]int64{"a": 0, "b": 0}},
		}
		for _, s := range steps {
			clk.Advance(s.advance)
			if s.do != nil {
				if err := s.do(); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
			}
			for tenant, want := range s.want {
				if got := get(t, c, tenant); got != want {
					t.Errorf("%s: %s = %d, want %d", s.name, tenant, got, want)
				}
			}
		}
	})
}

// TestExpiry: a count no Done came for is forgotten after the horizon, and
// the buckets expire one by one.
func TestExpiry(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newCounter func(func() time.Time) *backlog.Counter) {
		ctx := context.Background()
		clk := &clock{now: time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)}
		c := newCounter(clk.Now)
		c.Add(ctx, "a", 5) // bucket 10:00
		clk.Advance(2 * time.Hour)
		c.Add(ctx, "a", 1)  // bucket 12:00
		c.Done(ctx, "a", 2) // from 10:00: 3 left there
		clk.Advance(backlog.HorizonDefault - 2*time.Hour)
		if got := get(t, c, "a"); got != 4 {
			t.Errorf("at the horizon of the first bucket: %d, want 4", got)
		}
		clk.Advance(time.Hour)
		if got := get(t, c, "a"); got != 1 {
			t.Errorf("past the horizon of the first bucket: %d, want 1", got)
		}
		clk.Advance(2 * time.Hour)
		if got := get(t, c, "a"); got != 0 {
			t.Errorf("past every horizon: %d, want 0", got)
		}
	})
}

func TestConcurrentAddsAndDones(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, newCounter func(func() time.Time) *backlog.Counter) {
		ctx := context.Background()
		gw, worker := newCounter(time.Now), newCounter(time.Now)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if err := gw.Add(ctx, "a", 2); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for range 50 {
			wg.Go(func() {
				if err := worker.Done(ctx, "a", 1); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := get(t, gw, "a"); got != 50 {
			t.Errorf("100 added, 50 done: %d", got)
		}
	})
}

// sharedCounters returns a maker of Counters on one Redis key space and
// clk, each with its MaxStale, as the processes of a fleet would have.
func sharedCounters(t *testing.T, clk *clock) func(maxStale time.Duration) *backlog.Counter {
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { client.Close() })
	prefix := testenv.Prefix(t) + ":"
	return func(maxStale time.Duration) *backlog.Counter {
		c, err := backlog.New(backlog.Config{Redis: client, Prefix: prefix, Now: clk.Now, MaxStale: maxStale})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// TestRedisCache: Get answers from a short cache that this process's Adds
// update and Dones refresh.
func TestRedisCache(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	newCounter := sharedCounters(t, clk)
	ctx := context.Background()
	gw, other := newCounter(100*time.Millisecond), newCounter(100*time.Millisecond)
	get(t, gw, "a") // caches 0
	gw.Add(ctx, "a", 3)
	other.Add(ctx, "a", 10)
	if got := get(t, gw, "a"); got != 3 {
		t.Errorf("within MaxStale: %d, want the cached 0 plus this process's 3", got)
	}
	clk.Advance(100 * time.Millisecond)
	if got := get(t, gw, "a"); got != 13 {
		t.Errorf("after MaxStale: %d, want 13", got)
	}
}

// TestTrackerFresh: Fresh reads past the cache that Get answers from, at
// most FreshStale old.
func TestTrackerFresh(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	newCounter := sharedCounters(t, clk)
	gw, other := newCounter(100*time.Millisecond), newCounter(-1)
	tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: gw})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func(f func(context.Context, string) (int64, bool, error)) int64 {
		t.Helper()
		n, known, err := f(ctx, "a")
		if err != nil || !known {
			t.Fatalf("%d, known %t, %v", n, known, err)
		}
		return n
	}
	read(tr.Get) // caches 0
	other.Add(ctx, "a", 10)
	clk.Advance(backlog.FreshStale)
	if got := read(tr.Get); got != 0 {
		t.Errorf("Get within MaxStale: %d, want the cached 0", got)
	}
	if got := read(tr.Fresh); got != 10 {
		t.Errorf("Fresh, the cache %v old: %d, want 10 from Redis", backlog.FreshStale, got)
	}
	other.Add(ctx, "a", 5)
	clk.Advance(backlog.FreshStale / 2)
	if got := read(tr.Fresh); got != 10 {
		t.Errorf("Fresh, the cache %v old: %d, want the cached 10", backlog.FreshStale/2, got)
	}
}

func BenchmarkCounter(b *testing.B) {
	ctx := context.Background()
	mem, _ := backlog.New(backlog.Config{})
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b)})
	b.Cleanup(func() { client.Close() })
	red, _ := backlog.New(backlog.Config{Redis: client, Prefix: testenv.Prefix(b) + ":", MaxStale: -1})
	for name, c := range map[string]*backlog.Counter{"memory": mem, "redis": red} {
		b.Run(name+"/add", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Add(ctx, "a", 1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/get", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Get(ctx, "a"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func ExampleCounter() {
	ctx := context.Background()
	c, _ := backlog.New(backlog.Config{})
	c.Add(ctx, "acme", 3)  // the gateway, once SQS took three messages
	c.Done(ctx, "acme", 1) // a worker, when one of them ended
	n, _ := c.Get(ctx, "acme")
	fmt.Println(n)
	// Output: 2
}

// addAfterRead is a hook that, once armed, lets the next command that
// succeeds run and then, before its answer comes back, has add run: armed before a
// Refresh, an Add made while its reading was on its way.
type addAfterRead struct {
	scriptCalls // for its DialHook and ProcessPipelineHook, which pass through
	add         func()
}

func (h *addAfterRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if add := h.add; add != nil && err == nil { // not a NOSCRIPT before the script is sent
			h.add = nil
			add()
		}
		return err
	}
}

// TestRefreshKeepsLaterAdds: a count read before this process's Add, and
// answered after it, does not replace the cached count that holds the
// Add; Refresh's readings otherwise replace the cache.
func TestRefreshKeepsLaterAdds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { client.Close() })
	hook := &addAfterRead{}
	client.AddHook(hook)
	prefix := testenv.Prefix(t) + ":"
	gw, err := backlog.New(backlog.Config{Redis: client, Prefix: prefix, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	get(t, gw, "a") // caches 0
	hook.add = func() {
		clk.Advance(time.Millisecond)
		if err := gw.Add(ctx, "a", 2); err != nil {
			t.Error(err)
		}
	}
	if err := gw.Refresh(ctx, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if hook.add != nil {
		t.Fatal("the hook did not add")
	}
	if got := get(t, gw, "a"); got != 2 {
		t.Errorf("after a reading that missed this process's Add: %d, want the cached 2", got)
	}
	other, err := backlog.New(backlog.Config{Redis: client, Prefix: prefix, Now: clk.Now, MaxStale: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Add(ctx, "a", 5); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Millisecond)
	if err := gw.Refresh(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, gw, "a"); got != 7 {
		t.Errorf("after a later reading: %d, want its 7", got)
	}
}
