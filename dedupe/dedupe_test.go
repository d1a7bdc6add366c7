package dedupe_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/dedupe"
	"github.com/fairq/fairq/internal/testenv"
)

type store interface {
	Claim(ctx context.Context, id string) (dedupe.Claim, error)
	Complete(ctx context.Context, id, token string) error
	Release(ctx context.Context, id, token string) error
	Renew(ctx context.Context, leases []dedupe.Lease) error
}

var (
	_ store = (*dedupe.Memory)(nil)
	_ store = (*dedupe.Redis)(nil)
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

// stores runs test against a Memory store and a Redis store, on one node
// and on a cluster. Redis keeps time itself: its lease is short and the
// test waits for it where it must.
func stores(t *testing.T, test func(t *testing.T, s store, lease time.Duration, wait func(time.Duration))) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		clk := &clock{now: time.Unix(1_800_000_000, 0)}
		lease := 30 * time.Second
		test(t, dedupe.NewMemory(dedupe.MemoryConfig{Lease: lease, Now: clk.Now}), lease, clk.Advance)
	})
	for _, topo := range testenv.RedisTopologies() {
		t.Run("redis "+topo.Name, func(t *testing.T) {
			t.Parallel()
			lease := 600 * time.Millisecond
			s, err := dedupe.NewRedis(dedupe.RedisConfig{Client: topo.Client(t), Prefix: testenv.Prefix(t) + ":", Lease: lease})
			if err != nil {
				t.Fatal(err)
			}
			test(t, s, lease, time.Sleep) // Redis expires keys on its own clock
		})
	}
}

func claim(t *testing.T, s store, id string) dedupe.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRunThenDuplicate(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, lease time.Duration, wait func(time.Duration)) {
		first := claim(t, s, "m1")
		if first.Outcome != dedupe.Run || first.Token == "" {
			t.Fatalf("first claim %+v, want run with a token", first)
		}
		if c := claim(t, s, "m1"); c.Outcome != dedupe.Running || c.RetryAfter <= 0 || c.RetryAfter > lease {
			t.Errorf("second copy while the first runs: %+v, want running with the lease's rest", c)
		}
		if err := s.Complete(context.Background(), "m1", first.Token); err != nil {
			t.Fatal(err)
		}
		if c := claim(t, s, "m1"); c.Outcome != dedupe.Duplicate {
			t.Errorf("copy after completion: %v, want duplicate", c.Outcome)
		}
		wait(lease + 50*time.Millisecond)
		if c := claim(t, s, "m1"); c.Outcome != dedupe.Duplicate {
			t.Errorf("copy after the lease, within the window: %v, want duplicate", c.Outcome)
		}
		if c := claim(t, s, "m2"); c.Outcome != dedupe.Run {
			t.Errorf("another id: %v, want run", c.Outcome)
		}
	})
}

func TestReleaseRunsAgain(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, lease time.Duration, wait func(time.Duration)) {
		c := claim(t, s, "m")
		if err := s.Release(context.Background(), "m", c.Token); err != nil {
			t.Fatal(err)
		}
		if again := claim(t, s, "m"); again.Outcome != dedupe.Run {
			t.Errorf("after release: %v, want run", again.Outcome)
		}
	})
}

func TestLeaseLapsesUnlessRenewed(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, lease time.Duration, wait func(time.Duration)) {
		ctx := context.Background()
		kept := claim(t, s, "kept")
		crashed := claim(t, s, "crashed")
		for range 3 {
			wait(lease / 2)
			if err := s.Renew(ctx, []dedupe.Lease{{ID: "kept", Token: kept.Token}}); err != nil {
				t.Fatal(err)
			}
		}
		if c := claim(t, s, "kept"); c.Outcome != dedupe.Running {
			t.Errorf("renewed claim after 1.5 leases: %v, want running", c.Outcome)
		}
		c := claim(t, s, "crashed")
		if c.Outcome != dedupe.Run {
			t.Fatalf("claim of a crashed worker after its lease: %v, want run", c.Outcome)
		}
		// The crashed worker's token no longer acts.
		if err := s.Complete(ctx, "crashed", crashed.Token); err != nil {
			t.Fatal(err)
		}
		if again := claim(t, s, "crashed"); again.Outcome != dedupe.Running {
			t.Errorf("a stale token completed the new claim: %v", again.Outcome)
		}
	})
}

func TestConcurrentCopies(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, lease time.Duration, wait func(time.Duration)) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		runs := 0
		for range 16 {
			wg.Go(func() {
				c, err := s.Claim(context.Background(), "same")
				if err != nil {
					t.Error(err)
					return
				}
				if c.Outcome == dedupe.Run {
					mu.Lock()
					runs++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if runs != 1 {
			t.Errorf("%d of 16 simultaneous copies run, want 1", runs)
		}
	})
}

func TestMemoryBound(t *testing.T) {
	t.Parallel()
	m := dedupe.NewMemory(dedupe.MemoryConfig{Max: 100})
	ctx := context.Background()
	for i := range 1000 {
		id := fmt.Sprint("m", i)
		c := claim(t, m, id)
		_ = m.Complete(ctx, id, c.Token)
	}
	if n := m.Len(); n > 101 {
		t.Errorf("%d ids kept, want at most the bound", n)
	}
	if c := claim(t, m, "m999"); c.Outcome != dedupe.Duplicate {
		t.Errorf("the newest id was forgotten: %v", c.Outcome)
	}
}

// TestMemoryIDForms: the Memory store keeps ids in UUID form as their 16
// bytes and others by a digest; every id stays itself: one that differs
// from another by the case of a digit, by a dash or by a digit is another
// id.
func TestMemoryIDForms(t *testing.T) {
	t.Parallel()
	ids := []string{
		"0198c0de-5e3b-7c1a-9f00-1234567890ab", // fairq's (version 7)
		"0198C0DE-5E3B-7C1A-9F00-1234567890AB", // the same in capitals: another id
		"0198c0de-5e3b-7c1a-9f00-1234567890ac",
		"0198c0de5e3b-7c1a-9f00-1234567890ab-",
		"0198c0de-5e3b-7c1a-9f00-1234567890ag", // not hexadecimal
		"0198c0de-5e3b-7c1a-9f00-1234567890a",
		"a", "",
	}
	m := dedupe.NewMemory(dedupe.MemoryConfig{})
	ctx := context.Background()
	for _, id := range ids {
		c := claim(t, m, id)
		if c.Outcome != dedupe.Run {
			t.Fatalf("first claim of %q: %v, want run", id, c.Outcome)
		}
		if err := m.Complete(ctx, id, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		if c := claim(t, m, id); c.Outcome != dedupe.Duplicate {
			t.Errorf("claim of %q after its completion: %v, want duplicate", id, c.Outcome)
		}
	}
	if n := m.Len(); n != len(ids) {
		t.Errorf("%d ids kept, want %d", n, len(ids))
	}
}

// TestMemoryTrimsReplacedRecords: the records of an id released, or
// claimed anew after its lease lapsed, are trimmed without taking the id's
// current record with them, and expired ids are forgotten behind them.
func TestMemoryTrimsReplacedRecords(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	m := dedupe.NewMemory(dedupe.MemoryConfig{Lease: time.Second, Window: time.Minute, Now: clk.Now})
	ctx := context.Background()
	complete := func(id string) {
		t.Helper()
		c := claim(t, m, id)
		if c.Outcome != dedupe.Run {
			t.Fatalf("claim of %s: %v, want run", id, c.Outcome)
		}
		if err := m.Complete(ctx, id, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	complete("x") // the oldest record, until it expires
	clk.Advance(30 * time.Second)
	c := claim(t, m, "a")
	if err := m.Release(ctx, "a", c.Token); err != nil {
		t.Fatal(err)
	}
	complete("a")
	claim(t, m, "b") // its lease lapses
	clk.Advance(2 * time.Second)
	complete("b")
	clk.Advance(40 * time.Second)
	claim(t, m, "c") // forgets x, then the replaced records of a and b
	for _, id := range []string{"a", "b"} {
		if c := claim(t, m, id); c.Outcome != dedupe.Duplicate {
			t.Errorf("claim of completed %s after a trim: %v, want duplicate", id, c.Outcome)
		}
	}
	if n := m.Len(); n != 3 {
		t.Errorf("%d ids kept, want 3 (a, b, c)", n)
	}
	clk.Advance(2 * time.Minute)
	claim(t, m, "d")
	if n := m.Len(); n != 1 {
		t.Errorf("%d ids kept after the window, want 1 (d)", n)
	}
}

// TestMemoryTokens: every claim has a token of its own, across the
// batches in which they are made, and only its own completes it.
func TestMemoryTokens(t *testing.T) {
	t.Parallel()
	m := dedupe.NewMemory(dedupe.MemoryConfig{})
	ctx := context.Background()
	seen := map[string]string{}   // id by token
	tokens := map[string]string{} // token by id
	for i := range 1000 {
		id := fmt.Sprint("m", i)
		c := claim(t, m, id)
		if prev, dup := seen[c.Token]; dup || c.Token == "" {
			t.Fatalf("claim of %s: token %q, already %s's", id, c.Token, prev)
		}
		seen[c.Token], tokens[id] = id, c.Token
	}
	// Another claim's token does not complete m999's.
	if err := m.Complete(ctx, "m999", tokens["m998"]); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, m, "m999"); c.Outcome != dedupe.Running {
		t.Errorf("m999 after a completion with another's token: %v, want running", c.Outcome)
	}
	if err := m.Complete(ctx, "m999", tokens["m999"]); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, m, "m999"); c.Outcome != dedupe.Duplicate {
		t.Errorf("m999 after its completion: %v, want duplicate", c.Outcome)
	}
}

func BenchmarkRedisClaimComplete(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b)})
	defer client.Close()
	s, err := dedupe.NewRedis(dedupe.RedisConfig{Client: client, Prefix: testenv.Prefix(b) + ":"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := fmt.Sprint("bench-", i)
		i++
		c, err := s.Claim(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, id, c.Token); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryClaimComplete: a worker's claim and completion of each
// message it runs, with the store full (its bound of ids), so that each
// claim also forgets the oldest. The ids are in fairq's form, a UUID.
func BenchmarkMemoryClaimComplete(b *testing.B) {
	m := dedupe.NewMemory(dedupe.MemoryConfig{})
	ctx := context.Background()
	ids := make([]string, 4*dedupe.MaxLocalDefault)
	for i := range ids {
		ids[i] = fmt.Sprintf("0198c0de-5e3b-7c1a-9f00-%012x", i) // fairq's id form
	}
	run := func(id string) {
		c, err := m.Claim(ctx, id)
		if err != nil || c.Outcome != dedupe.Run {
			b.Fatalf("claim %s: %+v, %v", id, c, err)
		}
		if err := m.Complete(ctx, id, c.Token); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids[:dedupe.MaxLocalDefault] {
		run(id)
	}
	b.ReportAllocs()
	i := dedupe.MaxLocalDefault
	for b.Loop() {
		run(ids[i%len(ids)])
		i++
	}
}

// BenchmarkMemoryFullGC: a garbage collection with a full Memory store
// live, which a worker's process pays at every cycle.
func BenchmarkMemoryFullGC(b *testing.B) {
	m := dedupe.NewMemory(dedupe.MemoryConfig{})
	ctx := context.Background()
	for i := range dedupe.MaxLocalDefault {
		id := fmt.Sprintf("0198c0de-5e3b-7c1a-9f00-%012x", i)
		c, _ := m.Claim(ctx, id)
		_ = m.Complete(ctx, id, c.Token)
	}
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(m)
}
