package gateway_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/gateway"
)

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := map[string]string{"Idempotency-Key": "order-42"}
	first := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key})
	if first.Code != http.StatusAccepted || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	want := decode[accepted](t, first)
	// A repeat answers the first message.
	again := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key})
	if again.Code != http.StatusOK || again.Header().Get("Idempotent-Replayed") != "true" || decode[accepted](t, again) != want {
		t.Errorf("repeat: %d %v %s, want 200 with %+v", again.Code, again.Header(), again.Body, want)
	}
	// The same key for another message is refused: 422.
	reused := f.do(t, request{key: acmeKey, body: `{"body":"y"}`, header: key})
	if p := decode[problem](t, reused); reused.Code != http.StatusUnprocessableEntity || p.Code != "idempotency_key_reused" {
		t.Errorf("key reused for another body: %d %s, want 422 idempotency_key_reused", reused.Code, reused.Body)
	}
	if n := f.depth(t); n != 1 {
		t.Errorf("%d messages after a repeat, want 1", n)
	}
	// Keys are per tenant.
	other := f.do(t, request{key: globexKey, body: `{"body":"x"}`, header: key})
	if other.Code != http.StatusAccepted || decode[accepted](t, other).ID == want.ID {
		t.Errorf("another tenant's same key: %d %s", other.Code, other.Body)
	}
	// After the window the key is forgotten.
	f.clock.Advance(gateway.IdempotencyWindowDefault)
	if late := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key}); late.Code != http.StatusAccepted {
		t.Errorf("after the window: %d %s", late.Code, late.Body)
	}
	if n := f.depth(t); n != 3 {
		t.Errorf("%d messages, want 3", n)
	}
}

// TestIdempotencyKeyAfterFailures: a key whose request was refused or
// failed is free for the retry.
func TestIdempotencyKeyAfterFailures(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := map[string]string{"Idempotency-Key": "k"}
	f.flaky.FailSends(-1, errors.New("ServiceUnavailable"))
	if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key}); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("during the outage: %d", w.Code)
	}
	f.flaky.FailSends(0, nil)
	if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key}); w.Code != http.StatusAccepted {
		t.Fatalf("retry after the outage: %d %s", w.Code, w.Body)
	}
	// Rate limited, then admitted.
	slow := map[string]string{"Idempotency-Key": "s"}
	f.do(t, request{key: slowKey, body: `{"body":"x"}`})
	f.do(t, request{key: slowKey, body: `{"body":"x"}`})
	if w := f.do(t, request{key: slowKey, body: `{"body":"x"}`, header: slow}); w.Code != http.StatusTooManyRequests {
		t.Fatalf("over the rate: %d", w.Code)
	}
	f.clock.Advance(time.Second)
	if w := f.do(t, request{key: slowKey, body: `{"body":"x"}`, header: slow}); w.Code != http.StatusAccepted {
		t.Fatalf("retry once admitted: %d %s", w.Code, w.Body)
	}
	if n := f.depth(t); n != 4 {
		t.Errorf("%d messages, want 4", n)
	}
}

// concurrentRepeats sends n requests with one key at once through post,
// checks that exactly one was accepted, that the others were answered its
// id (200) or told the first is still in progress (409 with a
// Retry-After), and returns the id.
func concurrentRepeats(t *testing.T, n int, post func(i int) (int, accepted)) string {
	t.Helper()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		created  int
		ids      = map[string]int{}
		statuses = map[int]int{}
	)
	for i := range n {
		wg.Go(func() {
			status, a := post(i)
			mu.Lock()
			defer mu.Unlock()
			statuses[status]++
			if status == http.StatusAccepted {
				created++
			}
			if status != http.StatusConflict {
				ids[a.ID]++
			}
		})
	}
	wg.Wait()
	if created != 1 || statuses[http.StatusOK]+statuses[http.StatusConflict] != n-1 || len(ids) != 1 {
		t.Errorf("statuses %v, ids %v: want one 202, and 200s with its id or 409s for the other %d", statuses, ids, n-1)
	}
	for id := range ids {
		return id
	}
	return ""
}

func TestConcurrentRepeats(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *gateway.Config) { c.SendWindow = 20 * time.Millisecond })
	concurrentRepeats(t, 20, func(int) (int, accepted) {
		w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: map[string]string{"Idempotency-Key": "same"}})
		if w.Code == http.StatusConflict && (w.Header().Get("Retry-After") == "" || decode[problem](t, w).Code != "idempotency_key_in_progress") {
			t.Errorf("409 without Retry-After or its code: %v %s", w.Header(), w.Body)
		}
		if w.Code >= 300 {
			return w.Code, accepted{}
		}
		return w.Code, decode[accepted](t, w)
	})
	if n := f.depth(t); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
}

// TestConcurrentRepeatsAcrossGateways: repeats spread over two gateways
// sharing Redis make one message.
func TestConcurrentRepeatsAcrossGateways(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 2, testTenants())
	id := concurrentRepeats(t, 20, func(i int) (int, accepted) {
		w := fl.post(i%2, acmeKey, `{"body":"x"}`, map[string]string{"Idempotency-Key": "fleet-same"})
		if w.Code >= 300 {
			return w.Code, accepted{}
		}
		return w.Code, decode[accepted](t, w)
	})
	if got := fl.drain(t, map[string]bool{id: true}); len(got) != 1 {
		t.Errorf("%d messages on the queues, want 1", len(got))
	}
}

// TestIdempotencyRedisUnreachable: without Redis the keys are kept in
// process (fail open) or the request is refused (fail closed).
func TestIdempotencyRedisUnreachable(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	for _, closed := range []bool{false, true} {
		f := setup(t, func(c *gateway.Config) { c.Redis = dead; c.FailClosed = closed })
		key := map[string]string{"Idempotency-Key": "k"}
		w1 := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key})
		w2 := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key})
		if closed {
			if w1.Code != http.StatusServiceUnavailable || f.depth(t) != 0 {
				t.Errorf("fail closed: %d, %d messages", w1.Code, f.depth(t))
			}
			continue
		}
		if w1.Code != http.StatusAccepted || w2.Code != http.StatusOK || f.depth(t) != 1 {
			t.Errorf("fail open: %d then %d, %d messages; want 202, 200 and one message", w1.Code, w2.Code, f.depth(t))
		}
		m := f.do(t, request{method: "GET", path: "/metrics"}).Body.String()
		if !contains(m, `fairq_redis_fallback_total{component="idempotency"} 2`) {
			t.Errorf("fallbacks not counted:\n%s", grep(m, "fairq_redis"))
		}
	}
}
