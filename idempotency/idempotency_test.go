package idempotency_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairq/fairq/idempotency"
	"github.com/fairq/fairq/internal/testenv"
)

// store is what both stores offer.
type store interface {
	Claim(ctx context.Context, r idempotency.Request) (idempotency.Claim, error)
	Complete(ctx context.Context, key, token string, answer []byte) error
	Release(ctx context.Context, key, token string) error
	Abandon(ctx context.Context, key, token string) error
}

var (
	_ store = (*idempotency.Memory)(nil)
	_ store = (*idempotency.Redis)(nil)
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

const (
	window = time.Hour
	lease  = 5 * time.Second
)

// stores runs test against a Memory store and a Redis store, on one node
// and on a cluster, each with its own clock.
func stores(t *testing.T, test func(t *testing.T, s store, clk *clock)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		clk := &clock{now: time.Unix(1_800_000_000, 0)}
		test(t, idempotency.NewMemory(idempotency.MemoryConfig{Window: window, Lease: lease, Now: clk.Now}), clk)
	})
	for _, topo := range testenv.RedisTopologies() {
		t.Run("redis "+topo.Name, func(t *testing.T) {
			t.Parallel()
			// Redis expires keys on its own clock: the window is long
			// enough that the test's clock never reaches it there.
			clk := &clock{now: time.Now()}
			s, err := idempotency.NewRedis(idempotency.RedisConfig{Client: topo.Client(t), Prefix: testenv.Prefix(t) + ":", Window: window, Lease: lease, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			test(t, s, clk)
		})
	}
}

var ignoreToken = cmpopts.IgnoreFields(idempotency.Claim{}, "Token")

func claim(t *testing.T, s store, key, fp, id string) idempotency.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), idempotency.Request{Key: key, Fingerprint: fp, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, clk *clock) {
		ctx := context.Background()
		first := claim(t, s, "acme:k", "fp", "id-1")
		if first.Outcome != idempotency.Owned || first.ID != "id-1" || first.Token == "" {
			t.Fatalf("first claim = %+v; want owned with id-1 and a token", first)
		}
		// A repeat while the owner sends: in progress, until the lease ends.
		clk.Advance(2 * time.Second)
		busy := claim(t, s, "acme:k", "fp", "id-2")
		if busy.Outcome != idempotency.InProgress || busy.RetryAfter <= 0 || busy.RetryAfter > lease-2*time.Second {
			t.Errorf("repeat while owned = %+v; want in progress with the lease's rest (≤ 3s)", busy)
		}
		// Another request under the same key: reused, whatever the state.
		if got := claim(t, s, "acme:k", "other", "id-3"); got.Outcome != idempotency.Reused {
			t.Errorf("claim with another fingerprint = %v; want reused", got.Outcome)
		}
		if err := s.Complete(ctx, "acme:k", first.Token, []byte(`{"id":"id-1"}`)); err != nil {
			t.Fatal(err)
		}
		want := idempotency.Claim{Outcome: idempotency.Done, Answer: []byte(`{"id":"id-1"}`)}
		if diff := cmp.Diff(want, claim(t, s, "acme:k", "fp", "id-4"), ignoreToken); diff != "" {
			t.Errorf("repeat after complete (-want +got):\n%s", diff)
		}
		if got := claim(t, s, "acme:k", "other", "id-5"); got.Outcome != idempotency.Reused {
			t.Errorf("done key with another fingerprint = %v; want reused", got.Outcome)
		}
		// Other tenants' keys are apart.
		if got := claim(t, s, "other:k", "fp", "id-6"); got.Outcome != idempotency.Owned || got.ID != "id-6" {
			t.Errorf("same key of another tenant = %+v; want owned with its own id", got)
		}
	})
}

func TestReleaseForgets(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, clk *clock) {
		c := claim(t, s, "acme:r", "fp", "id-1")
		if err := s.Release(context.Background(), "acme:r", c.Token); err != nil {
			t.Fatal(err)
		}
		// Nothing was sent: a repeat, even a different request, starts anew.
		if got := claim(t, s, "acme:r", "other", "id-2"); got.Outcome != idempotency.Owned || got.ID != "id-2" {
			t.Errorf("claim after release = %+v; want owned with the new id", got)
		}
	})
}

func TestAbandonKeepsTheID(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, clk *clock) {
		ctx := context.Background()
		c := claim(t, s, "acme:a", "fp", "id-1")
		if err := s.Abandon(ctx, "acme:a", c.Token); err != nil {
			t.Fatal(err)
		}
		// The send may have landed: the retry sends again under id-1.
		retry := claim(t, s, "acme:a", "fp", "id-2")
		if retry.Outcome != idempotency.Owned || retry.ID != "id-1" {
			t.Fatalf("claim after abandon = %+v; want owned with the first id id-1", retry)
		}
		// The first owner's token no longer acts.
		if err := s.Complete(ctx, "acme:a", c.Token, []byte("stale")); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, "acme:a", retry.Token, []byte(`{"id":"id-1"}`)); err != nil {
			t.Fatal(err)
		}
		if got := claim(t, s, "acme:a", "fp", "id-3"); got.Outcome != idempotency.Done || string(got.Answer) != `{"id":"id-1"}` {
			t.Errorf("after the retry completed: %+v; want done with the retry's answer", got)
		}
	})
}

func TestLeaseRunsOut(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, clk *clock) {
		crashed := claim(t, s, "acme:l", "fp", "id-1")
		clk.Advance(lease + time.Millisecond)
		// An owner that never resolved (a crash) is abandoned after its
		// lease: the next claim takes over its id.
		got := claim(t, s, "acme:l", "fp", "id-2")
		if got.Outcome != idempotency.Owned || got.ID != "id-1" || got.Token == crashed.Token {
			t.Errorf("claim after the lease = %+v; want owned with id-1 and a new token", got)
		}
		if err := s.Release(context.Background(), "acme:l", crashed.Token); err != nil {
			t.Fatal(err)
		}
		if again := claim(t, s, "acme:l", "fp", "id-3"); again.Outcome != idempotency.InProgress {
			t.Errorf("the crashed owner's release acted on the new owner's claim: %v", again.Outcome)
		}
	})
}

// TestConcurrentClaims: of many simultaneous claims of one key, one owns it.
func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, s store, clk *clock) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[idempotency.Outcome]int{}
		for i := range 20 {
			wg.Go(func() {
				c, err := s.Claim(context.Background(), idempotency.Request{Key: "acme:c", Fingerprint: "fp", ID: fmt.Sprint("id-", i)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				counts[c.Outcome]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if counts[idempotency.Owned] != 1 || counts[idempotency.InProgress] != 19 {
			t.Errorf("outcomes %v; want 1 owned and 19 in progress", counts)
		}
	})
}

// TestMemoryReleasedClaimsDoNotPileUp: keys claimed and released leave no
// trace behind a live key, and the store never holds more than its bound.
func TestMemoryReleasedClaimsDoNotPileUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := idempotency.NewMemory(idempotency.MemoryConfig{Max: 100})
	live := claim(t, m, "live", "fp", "id")
	if err := m.Complete(ctx, "live", live.Token, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		key := fmt.Sprint("refused-", i)
		c := claim(t, m, key, "fp", "id")
		if err := m.Release(ctx, key, c.Token); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Len(); got != 1 {
		t.Errorf("after 10,000 released claims: %d keys; want 1", got)
	}
	for i := range 1_000 {
		key := fmt.Sprint("done-", i)
		c := claim(t, m, key, "fp", "id")
		_ = m.Complete(ctx, key, c.Token, []byte(`{}`))
	}
	if got := m.Len(); got > 101 {
		t.Errorf("after 1,000 completed keys: %d keys; want at most the bound 100 (+1 being claimed)", got)
	}
	if c := claim(t, m, "done-999", "fp", "id"); c.Outcome != idempotency.Done {
		t.Errorf("the newest key was forgotten (%v); the oldest should go first", c.Outcome)
	}
}

func TestMemoryWindow(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	m := idempotency.NewMemory(idempotency.MemoryConfig{Window: window, Now: clk.Now})
	c := claim(t, m, "k", "fp", "id-1")
	_ = m.Complete(context.Background(), "k", c.Token, []byte(`{}`))
	clk.Advance(window)
	if got := claim(t, m, "k", "fp", "id-2"); got.Outcome != idempotency.Owned || got.ID != "id-2" {
		t.Errorf("claim after the window = %+v; want a new owner with the new id", got)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := idempotency.Fingerprint("body", map[string]string{"a": "1", "b": "2"}, 0)
	for _, tt := range []struct {
		name string
		fp   string
		same bool
	}{
		{"same content, map order aside", idempotency.Fingerprint("body", map[string]string{"b": "2", "a": "1"}, 0), true},
		{"other body", idempotency.Fingerprint("body2", map[string]string{"a": "1", "b": "2"}, 0), false},
		{"other attribute value", idempotency.Fingerprint("body", map[string]string{"a": "1", "b": "3"}, 0), false},
		{"attribute moved into the body", idempotency.Fingerprint("body1:a", map[string]string{"b": "2"}, 0), false},
		{"other delay", idempotency.Fingerprint("body", map[string]string{"a": "1", "b": "2"}, time.Second), false},
	} {
		if got := tt.fp == base; got != tt.same {
			t.Errorf("%s: equal = %v, want %v", tt.name, got, tt.same)
		}
	}
}
