package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

// fixedBacklog is a Backlog whose counts the test sets; it records Adds.
type fixedBacklog struct {
	mu    sync.Mutex
	n     map[string]int64
	added map[string]int64
}

func (b *fixedBacklog) set(tenant string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[string]int64{}
	}
	b.n[tenant] = n
}

func (b *fixedBacklog) Add(tenant string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.added == nil {
		b.added = map[string]int64{}
	}
	b.added[tenant] += n
}

func (b *fixedBacklog) Get(_ context.Context, tenant string) (int64, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n[tenant], true, nil
}

// tracker returns a started backlog tracker, stopped when the test ends.
func tracker(t testing.TB, cfg backlog.TrackerConfig) *backlog.Tracker {
	t.Helper()
	tr, err := backlog.NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Started(t, tr)
}

// bpTenant admits 100/s with a bucket of 100, shrinking from a backlog of
// 1000 to none at 2000.
var bpTenant = tenant.Spec{ID: "bp", APIKeys: []string{tenant.HashKey("bp-key")},
	Limits: tenant.Limits{IngestRate: ptr(100.0), IngestBurst: ptr(100), ProcessRate: ptr(50.0), SoftBacklog: ptr(1000), MaxBacklog: ptr(2000)}}

func withTenants(extra ...tenant.Spec) func(*gateway.Config) {
	return func(c *gateway.Config) {
		reg, err := tenant.New(tenant.Config{Tenants: append(testTenants(), extra...)})
		if err != nil {
			panic(err)
		}
		c.Tenants = reg
	}
}

// burst sends requests at one instant until one is refused and returns the
// number admitted and the refusal.
func burst(t *testing.T, f *fixture, key string, most int) (int, *http.Response) {
	t.Helper()
	for i := range most {
		w := f.do(t, request{key: key, body: `{"body":"x"}`})
		if w.Code != http.StatusAccepted {
			return i, w.Result()
		}
	}
	return most, nil
}

// TestBackpressure: between soft_backlog and max_backlog the admitted rate
// and bucket shrink linearly toward zero; at max_backlog the answer is
// backlog_full.
func TestBackpressure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		backlog   int64
		wantBurst int // admitted at once from a full bucket
		wantRate  int // admitted over the next 5 s, a second at a time
	}{
		{0, 100, 500},
		{1000, 100, 500}, // at soft: full rate
		{1500, 50, 250},  // halfway: half
		{1900, 10, 50},   // 90 %: a tenth
		{1990, 1, 5},     // 99 %: rate 1/s, bucket of 1
		{2000, 0, 0},     // at max: nothing
		{5000, 0, 0},     // above: nothing
	}
	for _, tt := range tests {
		t.Run(strconv.FormatInt(tt.backlog, 10), func(t *testing.T) {
			t.Parallel()
			bl := &fixedBacklog{}
			bl.set("bp", tt.backlog)
			f := setup(t, withTenants(bpTenant), func(c *gateway.Config) { c.Backlog = bl })
			got, refusal := burst(t, f, "bp-key", 1000)
			if got != tt.wantBurst {
				t.Errorf("admitted %d at once, want %d", got, tt.wantBurst)
			}
			rate := 0
			for range 5 {
				f.clock.Advance(time.Second)
				n, _ := burst(t, f, "bp-key", 1000)
				rate += n
			}
			if rate != tt.wantRate {
				t.Errorf("admitted %d over 5 s, want %d", rate, tt.wantRate)
			}
			if tt.backlog >= 2000 {
				p := decodeResponse[problem](t, refusal)
				// (backlog - max + 1) / process_rate, at least a second.
				wantRetry := strconv.FormatInt(max(1, (tt.backlog-2000+1+49)/50), 10)
				if refusal.StatusCode != 429 || p.Code != "backlog_full" || refusal.Header.Get("Retry-After") != wantRetry {
					t.Errorf("refusal %d %s Retry-After %q, want 429 backlog_full %s", refusal.StatusCode, p.Code, refusal.Header.Get("Retry-After"), wantRetry)
				}
			} else if p := decodeResponse[problem](t, refusal); p.Code != "rate_limited" {
				t.Errorf("refusal %s, want rate_limited", p.Code)
			}
			if n := f.depth(t); n != tt.wantBurst+tt.wantRate {
				t.Errorf("%d messages on the queues, want %d", n, tt.wantBurst+tt.wantRate)
			}
		})
	}
}

// TestBacklogFullHeldForOneMessage: the gateway remembers a backlog_full
// refusal, to refuse the tenant's next requests before their bodies, only
// for as long as one message takes at the tenant's process_rate, although
// Retry-After says a whole second. A tenant held at its max_backlog is so
// admitted at the pace its messages end, not in one burst a second.
func TestBacklogFullHeldForOneMessage(t *testing.T) {
	t.Parallel()
	full := tenant.Spec{ID: "full", APIKeys: []string{tenant.HashKey("full-key")},
		Limits: tenant.Limits{ProcessRate: ptr(50.0), SoftBacklog: ptr(10), MaxBacklog: ptr(10)}}
	bl := &fixedBacklog{}
	bl.set("full", 10)
	f := setup(t, withTenants(full), func(c *gateway.Config) { c.Backlog = bl })
	send := func() *http.Response {
		return f.do(t, request{key: "full-key", body: `{"body":"x"}`}).Result()
	}
	if r := send(); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("at max_backlog: %d, Retry-After %q; want 429, 1", r.StatusCode, r.Header.Get("Retry-After"))
	}
	bl.set("full", 9) // a message ended
	f.clock.Advance(19 * time.Millisecond)
	if r := send(); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("19 ms after backlog_full: %d, want 429 (remembered)", r.StatusCode)
	}
	f.clock.Advance(time.Millisecond) // a message's time at 50/s
	if r := send(); r.StatusCode != http.StatusAccepted {
		t.Fatalf("20 ms after backlog_full, with room for one: %d, want 202", r.StatusCode)
	}
}

// staleBacklog answers Get from a count that lags (a cache), Fresh from
// the current one.
type staleBacklog struct {
	fixedBacklog
	fresh fixedBacklog
}

func (b *staleBacklog) Fresh(ctx context.Context, tenant string) (int64, bool, error) {
	return b.fresh.Get(ctx, tenant)
}

// TestBacklogFullOnAFreshCount: a tenant that a cached count has at its
// max_backlog is refused only if a fresh count says so too, so that the
// room made as its messages end is taken as it comes, not all at once
// when the cache catches up.
func TestBacklogFullOnAFreshCount(t *testing.T) {
	t.Parallel()
	full := tenant.Spec{ID: "full", APIKeys: []string{tenant.HashKey("full-key")},
		Limits: tenant.Limits{ProcessRate: ptr(50.0), SoftBacklog: ptr(10), MaxBacklog: ptr(10)}}
	bl := &staleBacklog{}
	bl.set("full", 10)
	bl.fresh.set("full", 9) // a message ended since the cache was read
	f := setup(t, withTenants(full), func(c *gateway.Config) { c.Backlog = bl })
	if r := f.do(t, request{key: "full-key", body: `{"body":"x"}`}).Result(); r.StatusCode != http.StatusAccepted {
		t.Fatalf("at max_backlog by the cache, with room by the fresh count: %d, want 202", r.StatusCode)
	}
	bl.fresh.set("full", 10)
	if r := f.do(t, request{key: "full-key", body: `{"body":"x"}`}).Result(); r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("at max_backlog by both counts: %d, want 429", r.StatusCode)
	}
}

// TestBacklogCounted: accepted messages are added to their tenant's
// backlog, refused ones are not.
func TestBacklogCounted(t *testing.T) {
	t.Parallel()
	counter, err := backlog.New(backlog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t, func(c *gateway.Config) { c.Backlog = tracker(t, backlog.TrackerConfig{Counter: counter}) })
	for range 3 {
		f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	}
	f.do(t, request{key: acmeKey, body: `{"bdy":"x"}`})
	f.flaky.FailSends(-1, errors.New("InternalError"))
	f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	if n, _ := counter.Get(context.Background(), "acme"); n != 3 {
		t.Errorf("backlog of acme %d, want 3", n)
	}
}

// TestBacklogUnreachable: without its backlog counts the gateway goes on
// without backpressure (fail open) or answers 503 (fail closed).
func TestBacklogUnreachable(t *testing.T) {
	t.Parallel()
	for _, closed := range []bool{false, true} {
		t.Run("fail closed "+strconv.FormatBool(closed), func(t *testing.T) {
			t.Parallel()
			// A Redis that refuses connections.
			client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
			t.Cleanup(func() { client.Close() })
			counter, err := backlog.New(backlog.Config{Redis: client, Prefix: "unreachable:"})
			if err != nil {
				t.Fatal(err)
			}
			f := setup(t, withTenants(bpTenant), func(c *gateway.Config) {
				c.Backlog = tracker(t, backlog.TrackerConfig{Counter: counter, FailClosed: closed, RedisMetrics: c.RedisMetrics})
			})
			w := f.do(t, request{key: "bp-key", body: `{"body":"x"}`})
			want := http.StatusAccepted
			if closed {
				want = http.StatusServiceUnavailable
			}
			if w.Code != want {
				t.Fatalf("status %d, want %d: %s", w.Code, want, w.Body)
			}
			m := f.do(t, request{method: "GET", path: "/metrics"}).Body.String()
			if !contains(m, `fairq_redis_degraded{component="backlog"} 1`) {
				t.Errorf("degraded gauge not set:\n%s", grep(m, "fairq_redis"))
			}
		})
	}
}
