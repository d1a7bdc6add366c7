package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/queue"
)

// heldBody is a request body that sends its first bytes, then holds until
// released, as a slow or hostile client does; it counts what was read.
type heldBody struct {
	first   []byte
	release chan struct{}
	read    atomic.Int64
}

func (b *heldBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		b.read.Add(int64(n))
		return n, nil
	}
	<-b.release
	return 0, io.ErrUnexpectedEOF
}

// hold starts a request whose body declares length bytes, sends one and
// holds; it returns once the handler has read that byte or answered, with
// the recorder and a function that lets the request end.
func hold(t *testing.T, f *fixture, key, path string, length int64) (*httptest.ResponseRecorder, *heldBody, func()) {
	t.Helper()
	body := &heldBody{first: []byte("{"), release: make(chan struct{})}
	req := httptest.NewRequest(http.MethodPost, path, body)
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.srv.ServeHTTP(w, req)
	}()
	for body.read.Load() == 0 {
		select {
		case <-done:
			return w, body, func() {}
		default:
			time.Sleep(time.Millisecond) // the handler reads in its own goroutine
		}
	}
	var once sync.Once
	return w, body, func() {
		once.Do(func() { close(body.release) })
		<-done
	}
}

// TestBodyBudget: declared lengths claim the budget before anything is
// read; past a tenant's share its requests get 429 without a byte read,
// other tenants go on; past the gateway's budget everyone gets 503; the
// budget comes back when the bodies end.
func TestBodyBudget(t *testing.T) {
	t.Parallel()
	const msgMax = 64 << 10
	f := setup(t, func(c *gateway.Config) {
		c.MaxMessageSize = msgMax
		c.MaxBatchBody = 1 << 20
		c.MaxInflightBytes = 3 << 20
		c.MaxTenantInflightBytes = 2 << 20
	})
	const declared = 1<<20 - 10
	var releases []func()
	for range 2 {
		_, _, release := hold(t, f, acmeKey, "/v1/messages/batch", declared)
		releases = append(releases, release)
	}
	// acme holds its share: refused before its body is read.
	w, body, release := hold(t, f, acmeKey, "/v1/messages/batch", declared)
	release()
	if p := decode[problem](t, w); w.Code != http.StatusTooManyRequests || p.Code != "rate_limited" || w.Header().Get("Retry-After") == "" {
		t.Errorf("over the tenant's share: %d %s", w.Code, w.Body)
	}
	if n := body.read.Load(); n != 0 {
		t.Errorf("%d bytes of a refused body read, want 0", n)
	}
	// Another tenant has room, until the gateway's budget is used up.
	_, _, gr := hold(t, f, globexKey, "/v1/messages/batch", declared)
	releases = append(releases, gr)
	w, _, release = hold(t, f, globexKey, "/v1/messages/batch", declared)
	release()
	if p := decode[problem](t, w); w.Code != http.StatusServiceUnavailable || p.Code != "unavailable" {
		t.Errorf("over the gateway's budget: %d %s", w.Code, w.Body)
	}
	if m := f.metrics(t); !contains(m, `fairq_body_budget_refused_total{scope="tenant"} 1`) || !contains(m, `fairq_body_budget_refused_total{scope="gateway"} 1`) {
		t.Errorf("refusals not counted by scope:\n%s", grep(m, "fairq_body"))
	}
	for _, r := range releases {
		r()
	}
	// All given back.
	if m := f.metrics(t); !contains(m, "fairq_body_bytes_in_flight 0") {
		t.Errorf("budget not given back:\n%s", grep(m, "fairq_body"))
	}
	if w := f.do(t, request{key: acmeKey, path: "/v1/messages/batch", body: `{"messages":[{"body":"x"}]}`}); w.Code != http.StatusOK {
		t.Errorf("after the bodies ended: %d %s", w.Code, w.Body)
	}
}

// TestBodyNotAllocatedFromContentLength: a body that declares megabytes and
// sends one byte costs the gateway kilobytes.
func TestBodyNotAllocatedFromContentLength(t *testing.T) {
	f := setup(t)
	var before, after runtimeMem
	before.read()
	var releases []func()
	for range 4 { // 4 × 8 MiB declared: within the default budget's share of one tenant, twice
		_, _, release := hold(t, f, acmeKey, "/v1/messages/batch", gateway.MaxBatchBodyDefault)
		releases = append(releases, release)
	}
	after.read()
	for _, r := range releases {
		r()
	}
	if grew := int64(after.total) - int64(before.total); grew > 4<<20 {
		t.Errorf("4 bodies declaring 8 MiB each, one byte sent: %d MiB allocated, want well under the 32 MiB declared", grew>>20)
	}
}

// TestPrecheckRefusesBeforeReading: a tenant refused for its rate is
// refused again, until a token comes back, without its body being read.
func TestPrecheckRefusesBeforeReading(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for range 2 { // slow's bucket holds 2
		if w := f.do(t, request{key: slowKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
			t.Fatalf("within the burst: %d", w.Code)
		}
	}
	if w := f.do(t, request{key: slowKey, body: `{"body":"x"}`}); w.Code != http.StatusTooManyRequests {
		t.Fatalf("over the rate: %d", w.Code)
	}
	w, body, release := hold(t, f, slowKey, "/v1/messages", 100)
	release()
	if p := decode[problem](t, w); w.Code != http.StatusTooManyRequests || p.Code != "rate_limited" || w.Header().Get("Retry-After") != "1" {
		t.Errorf("refused again: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if n := body.read.Load(); n != 0 {
		t.Errorf("%d bytes of the body read, want 0", n)
	}
	// Another tenant is not concerned.
	if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
		t.Errorf("another tenant: %d", w.Code)
	}
	// Once a token is back, the tenant is admitted.
	f.clock.Advance(time.Second)
	if w := f.do(t, request{key: slowKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
		t.Errorf("a second later: %d %s", w.Code, w.Body)
	}
}

// TestBackendDownAnswersAtOnce: once sends fail for want of the service,
// enqueues are answered 503 at once and /readyz fails; when the service
// answers again, the gateway's probe lets them through.
func TestBackendDownAnswersAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *gateway.Config) { c.SendTimeout = 20 * time.Millisecond })
	f.flaky.FailSends(-1, nil) // stalls: each send waits out SendTimeout
	f.flaky.FailDepth(context.DeadlineExceeded)
	for range 3 {
		if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`}); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("stalled: %d", w.Code)
		}
	}
	calls, _ := f.flaky.Sends()
	start := time.Now()
	w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("known down: %d %v", w.Code, w.Header())
	}
	if took := time.Since(start); took >= 20*time.Millisecond {
		t.Errorf("known down, answered after %v: not at once", took)
	}
	if again, _ := f.flaky.Sends(); again != calls {
		t.Errorf("a send was tried while the backend was known down")
	}
	if r := f.do(t, request{method: http.MethodGet, path: "/readyz"}); r.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while down: %d", r.Code)
	}
	f.flaky.FailSends(0, nil)
	f.flaky.FailDepth(nil)
	deadline := time.Now().Add(5 * time.Second)
	for f.do(t, request{key: acmeKey, body: `{"body":"x"}`}).Code != http.StatusAccepted {
		if time.Now().After(deadline) {
			t.Fatal("not accepting 5 s after the backend came back")
		}
		time.Sleep(10 * time.Millisecond) // the probe runs every second
	}
	if r := f.do(t, request{method: http.MethodGet, path: "/readyz"}); r.Code != http.StatusOK {
		t.Errorf("/readyz once back: %d", r.Code)
	}
}

// TestRetryAfterTimeoutKeepsTheID: a send that timed out may still land;
// the client's retry with the same Idempotency-Key sends the message again
// under the same id, so that the worker can tell the two copies are one
// message, and the retry is answered that id.
func TestRetryAfterTimeoutKeepsTheID(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *gateway.Config) { c.SendTimeout = 20 * time.Millisecond })
	key := map[string]string{"Idempotency-Key": "order-7"}
	f.flaky.FailSends(1, nil)
	if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key}); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("stalled send: %d", w.Code)
	}
	w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key})
	if w.Code != http.StatusAccepted {
		t.Fatalf("retry: %d %s", w.Code, w.Body)
	}
	a := decode[accepted](t, w)
	calls, _ := f.flaky.Sends()
	msg := f.receive(t, a.Queue)
	if got := fairqID(t, msg); got != a.ID {
		t.Errorf("message on the queue has id %s, the answer %s", got, a.ID)
	}
	// The stalled attempt carried the same id: the Flaky backend saw it.
	if first := f.flaky.FirstEntryMeta(); first.ID != a.ID {
		t.Errorf("first attempt carried id %q, the retry %q: want one id across attempts (%d calls)", first.ID, a.ID, calls)
	}
	// The retry's answer is now the key's.
	if again := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key}); again.Code != http.StatusOK || decode[accepted](t, again).ID != a.ID {
		t.Errorf("repeat after the retry: %d %s", again.Code, again.Body)
	}
}

// TestRefusedSendReleasesTheKey: a message the queue refused was not
// sent; its key is free for a corrected request.
func TestRefusedSendReleasesTheKey(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := map[string]string{"Idempotency-Key": "k"}
	f.flaky.FailSends(1, errors.Join(errors.New("api error InvalidParameterValue"), errInvalidEntry))
	if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`, header: key}); w.Code != http.StatusBadRequest {
		t.Fatalf("refused by the queue: %d %s", w.Code, w.Body)
	}
	if w := f.do(t, request{key: acmeKey, body: `{"body":"y"}`, header: key}); w.Code != http.StatusAccepted {
		t.Errorf("a corrected request under the same key: %d %s", w.Code, w.Body)
	}
}

// metrics returns the gateway's /metrics.
func (f *fixture) metrics(t testing.TB) string {
	t.Helper()
	return f.do(t, request{method: http.MethodGet, path: "/metrics"}).Body.String()
}

// runtimeMem is the process's allocations so far.
type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}

var errInvalidEntry = queue.ErrInvalidEntry
