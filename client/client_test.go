package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairq/fairq/client"
)

// counting is a transport that counts the requests it carries to the
// real server.
type counting struct {
	base http.RoundTripper
	n    atomic.Int32
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// losesAnswers delivers the first n requests to the real server and then
// loses their answers, as a connection reset after the request was sent
// would: the client cannot know whether the message was enqueued.
type losesAnswers struct {
	counting
	n    int32
	lost atomic.Int32
}

var errLostAnswer = errors.New("connection reset after the request was sent")

func (l *losesAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := l.counting.RoundTrip(r)
	if err != nil || l.lost.Add(1) > l.n {
		return res, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return nil, errLostAnswer
}

func newClient(t testing.TB, base, key string, opts ...client.Option) *client.Client {
	t.Helper()
	// Every answer is held to the OpenAPI document; a test that brings
	// its own transport builds it on checkedTransport.
	opts = append([]client.Option{client.WithHTTPClient(&http.Client{Transport: checkedTransport(t)})}, opts...)
	c, err := client.New(base, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	d := demo(t)
	c := newClient(t, d.base, d.key)
	for _, tt := range []struct {
		name string
		body any
	}{
		{name: "string", body: "hello"},
		{name: "bytes", body: []byte("hello")},
		{name: "JSON value", body: map[string]any{"order": 42}},
		{name: "raw JSON", body: json.RawMessage(`[1,2,3]`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now().Add(-time.Second)
			acc, err := c.Enqueue(t.Context(), client.Message{Body: tt.body, Attributes: map[string]string{"kind": "test"}})
			if err != nil {
				t.Fatal(err)
			}
			if acc.ID == "" || acc.Tenant != "demo" || !strings.HasPrefix(acc.Queue, "fairq-live-") || acc.RequestID == "" || acc.Replayed {
				t.Errorf("Enqueue = %+v", acc)
			}
			if acc.EnqueuedAt.Before(before) || acc.EnqueuedAt.After(time.Now().Add(time.Second)) {
				t.Errorf("EnqueuedAt %v, want about now", acc.EnqueuedAt)
			}
		})
	}
}

func TestEnqueueBatch(t *testing.T) {
	t.Parallel()
	d := demo(t)
	c := newClient(t, d.base, d.key)
	results, err := c.EnqueueBatch(t.Context(), []client.Message{
		{Body: "one"},
		{Body: "", Attributes: map[string]string{"kind": "empty"}},
		{Body: map[string]int{"n": 3}, DelaySeconds: 1},
		{Body: "four", Attributes: map[string]string{"fairq-tenant": "someone-else"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 {
		t.Fatalf("%d results, want 4", len(results))
	}
	for _, i := range []int{0, 2} {
		if r := results[i]; r.Err != nil || r.ID == "" || r.Tenant != "demo" {
			t.Errorf("result %d: %+v, want accepted", i, r)
		}
	}
	if results[0].ID == results[2].ID {
		t.Errorf("two messages, one id %s", results[0].ID)
	}
	for _, i := range []int{1, 3} {
		var e *client.Error
		if !errors.As(results[i].Err, &e) || !errors.Is(results[i].Err, client.ErrInvalidRequest) || e.Status != http.StatusBadRequest || e.Detail == "" {
			t.Errorf("result %d: %+v, want a 400 invalid_request", i, results[i])
		}
	}
}

func TestBadKey(t *testing.T) {
	t.Parallel()
	d := demo(t)
	tr := &counting{base: checkedTransport(t)}
	c := newClient(t, d.base, "fq_not_a_key", client.WithHTTPClient(&http.Client{Transport: tr}))
	_, err := c.Enqueue(t.Context(), client.Message{Body: "x"})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrUnauthorized) || e.Status != http.StatusUnauthorized || e.RequestID == "" {
		t.Fatalf("Enqueue with a bad key: %v, want a 401 unauthorized with a request id", err)
	}
	if errors.Is(err, client.ErrForbidden) {
		t.Errorf("%v matches ErrForbidden too", err)
	}
	if _, err := c.EnqueueBatch(t.Context(), []client.Message{{Body: "x"}}); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("EnqueueBatch with a bad key: %v", err)
	}
	if _, err := c.Tenant(t.Context()); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("Tenant with a bad key: %v", err)
	}
	if n := tr.n.Load(); n != 3 {
		t.Errorf("%d requests for 3 calls: a 401 is not retried", n)
	}
}

// TestRateLimited runs against a tenant admitted once a second with no
// burst. Each subtest first spends the token, so they run in turn.
func TestRateLimited(t *testing.T) {
	d := trickle(t)
	spend := func(t *testing.T) {
		t.Helper()
		c := newClient(t, d.base, d.key, client.WithRetries(10, 50*time.Millisecond, time.Second))
		if _, err := c.Enqueue(t.Context(), client.Message{Body: "spend"}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("refused without retries", func(t *testing.T) {
		spend(t)
		c := newClient(t, d.base, d.key, client.WithRetries(1, time.Millisecond, time.Millisecond))
		_, err := c.Enqueue(t.Context(), client.Message{Body: "x"})
		var e *client.Error
		if !errors.As(err, &e) || !errors.Is(err, client.ErrRateLimited) || e.Status != http.StatusTooManyRequests {
			t.Fatalf("Enqueue over the rate: %v, want 429 rate_limited", err)
		}
		if e.RetryAfter < time.Second {
			t.Errorf("RetryAfter %v, want at least 1s", e.RetryAfter)
		}
	})
	t.Run("Retry-After honoured", func(t *testing.T) {
		spend(t)
		tr := &counting{base: checkedTransport(t)}
		c := newClient(t, d.base, d.key, client.WithHTTPClient(&http.Client{Transport: tr}),
			client.WithRetries(3, time.Millisecond, 2*time.Millisecond))
		start := time.Now()
		acc, err := c.Enqueue(t.Context(), client.Message{Body: "x"})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("Enqueue with retries: %v (after %v, %d requests)", err, took, tr.n.Load())
		}
		// The backoff of 1-2 ms alone would have spent every attempt long
		// before the token came back: the wait was the Retry-After.
		if n := tr.n.Load(); n != 2 {
			t.Errorf("%d requests, want 2: refused, then admitted after Retry-After", n)
		}
		if took < 900*time.Millisecond {
			t.Errorf("admitted after %v, before the Retry-After of 1s", took)
		}
		if acc.ID == "" {
			t.Errorf("Enqueue = %+v", acc)
		}
	})
	t.Run("batch entries retried", func(t *testing.T) {
		spend(t)
		tr := &counting{base: checkedTransport(t)}
		c := newClient(t, d.base, d.key, client.WithHTTPClient(&http.Client{Transport: tr}))
		results, err := c.EnqueueBatch(t.Context(), []client.Message{{Body: "a"}, {Body: "b"}})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range results {
			if r.Err != nil || r.ID == "" {
				t.Errorf("result %d: %+v, want accepted after retries", i, r)
			}
		}
		if n := tr.n.Load(); n < 3 {
			t.Errorf("%d requests for two messages admitted a second apart, want at least 3", n)
		}
	})
	t.Run("deadline before the Retry-After", func(t *testing.T) {
		spend(t)
		c := newClient(t, d.base, d.key, client.WithRetries(5, time.Millisecond, time.Millisecond))
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.Enqueue(ctx, client.Message{Body: "x"})
		took := time.Since(start)
		if !errors.Is(err, client.ErrRateLimited) {
			t.Errorf("Enqueue with a deadline before the Retry-After: %v, want rate_limited", err)
		}
		if took > 250*time.Millisecond {
			t.Errorf("returned after %v: it slept towards a retry that could not start before the deadline", took)
		}
	})
}

func TestValidation(t *testing.T) {
	t.Parallel()
	d := demo(t)
	c := newClient(t, d.base, d.key)
	tests := []struct {
		name       string
		msg        client.Message
		want       error
		status     int
		wantDetail string
	}{
		{name: "delay", msg: client.Message{Body: "x", DelaySeconds: 901}, want: client.ErrInvalidRequest, status: 400, wantDetail: "delay_seconds"},
		{name: "reserved attribute", msg: client.Message{Body: "x", Attributes: map[string]string{"fairq-tenant": "x"}}, want: client.ErrInvalidRequest, status: 400, wantDetail: "fairq-tenant"},
		{name: "empty body", msg: client.Message{Body: ""}, want: client.ErrInvalidRequest, status: 400, wantDetail: "body"},
		{name: "no body", msg: client.Message{}, want: client.ErrInvalidRequest, status: 400, wantDetail: "body"},
		{name: "too large", msg: client.Message{Body: strings.Repeat("x", 300<<10)}, want: client.ErrTooLarge, status: 413},
		{name: "key too long", msg: client.Message{Body: "x", IdempotencyKey: strings.Repeat("k", 129)}, want: client.ErrInvalidRequest, status: 400, wantDetail: "Idempotency-Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Enqueue(t.Context(), tt.msg)
			var e *client.Error
			if !errors.As(err, &e) || !errors.Is(err, tt.want) || e.Status != tt.status || !strings.Contains(e.Detail, tt.wantDetail) {
				t.Errorf("Enqueue: %v, want %v (%d) saying %q", err, tt.want, tt.status, tt.wantDetail)
			}
		})
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	d := demo(t)
	t.Run("repeat", func(t *testing.T) {
		c := newClient(t, d.base, d.key)
		m := client.Message{Body: "once", IdempotencyKey: "order-" + randomHex(8)}
		first, err := c.Enqueue(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.Enqueue(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		if first.Replayed || !again.Replayed || again.ID != first.ID {
			t.Errorf("first %+v, repeat %+v: want the first id, replayed", first, again)
		}
	})
	t.Run("generated key reused by the retry of a lost answer", func(t *testing.T) {
		tr := &losesAnswers{counting: counting{base: checkedTransport(t)}, n: 1}
		c := newClient(t, d.base, d.key, client.WithIdempotencyKeys(), client.WithHTTPClient(&http.Client{Transport: tr}))
		acc, err := c.Enqueue(t.Context(), client.Message{Body: "sent once"})
		if err != nil {
			t.Fatal(err)
		}
		if n := tr.counting.n.Load(); n != 2 || !acc.Replayed {
			t.Errorf("%d requests, answer %+v: want the retry answered with the first message", n, acc)
		}
		other, err := c.Enqueue(t.Context(), client.Message{Body: "sent once"})
		if err != nil {
			t.Fatal(err)
		}
		if other.ID == acc.ID || other.Replayed {
			t.Errorf("a second Enqueue got %+v, the first's message: each call needs its own key", other)
		}
	})
	t.Run("no key, no retry after a lost answer", func(t *testing.T) {
		tr := &losesAnswers{counting: counting{base: checkedTransport(t)}, n: 1}
		c := newClient(t, d.base, d.key, client.WithHTTPClient(&http.Client{Transport: tr}))
		_, err := c.Enqueue(t.Context(), client.Message{Body: "maybe sent"})
		if !errors.Is(err, errLostAnswer) {
			t.Errorf("Enqueue = %v, want the lost answer's error", err)
		}
		if n := tr.counting.n.Load(); n != 1 {
			t.Errorf("%d requests: a POST without a key was replayed after it may have been received", n)
		}
	})
	t.Run("batch retried only when every message has a key", func(t *testing.T) {
		tr := &losesAnswers{counting: counting{base: checkedTransport(t)}, n: 1}
		c := newClient(t, d.base, d.key, client.WithHTTPClient(&http.Client{Transport: tr}))
		key := "batch-" + randomHex(8)
		_, err := c.EnqueueBatch(t.Context(), []client.Message{{Body: "a", IdempotencyKey: key}, {Body: "b"}})
		if !errors.Is(err, errLostAnswer) || tr.counting.n.Load() != 1 {
			t.Errorf("batch with a message without key: %v after %d requests, want no retry", err, tr.counting.n.Load())
		}
		tr = &losesAnswers{counting: counting{base: checkedTransport(t)}, n: 1}
		c = newClient(t, d.base, d.key, client.WithIdempotencyKeys(), client.WithHTTPClient(&http.Client{Transport: tr}))
		results, err := c.EnqueueBatch(t.Context(), []client.Message{{Body: "a"}, {Body: "b"}})
		if err != nil || tr.counting.n.Load() != 2 {
			t.Fatalf("batch with generated keys: %v after %d requests, want one retry", err, tr.counting.n.Load())
		}
		for i, r := range results {
			if r.Err != nil || !r.Replayed {
				t.Errorf("result %d: %+v, want the first attempt's message, replayed", i, r)
			}
		}
	})
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	tr := &counting{base: checkedTransport(t)}
	c := newClient(t, "http://"+addr, "fq_key", client.WithHTTPClient(&http.Client{Transport: tr}),
		client.WithRetries(3, time.Millisecond, 2*time.Millisecond))
	_, err = c.Enqueue(t.Context(), client.Message{Body: "x"})
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Errorf("Enqueue to a closed port: %v, want a dial error", err)
	}
	if n := tr.n.Load(); n != 3 {
		t.Errorf("%d attempts, want 3: a request never sent is safe to retry, even without a key", n)
	}
}

func TestContextDeadline(t *testing.T) {
	t.Parallel()
	d := demo(t)
	c := newClient(t, d.base, d.key)
	ctx, cancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := c.Enqueue(ctx, client.Message{Body: "x"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Enqueue after the deadline: %v, want context.DeadlineExceeded", err)
	}
	if _, err := c.Tenant(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Tenant after the deadline: %v, want context.DeadlineExceeded", err)
	}
}

func TestTenant(t *testing.T) {
	t.Parallel()
	d := demo(t)
	c := newClient(t, d.base, d.key)
	if _, err := c.Enqueue(t.Context(), client.Message{Body: "counted"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Tenant(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := client.Limits{IngestRate: 100, IngestBurst: 200, ProcessRate: 100, ProcessBurst: 100, Concurrency: 10, SoftBacklog: 1000, MaxBacklog: 10000}
	if got.ID != "demo" || got.Limits != want || got.Admitted < 1 || got.Backlog == nil {
		t.Errorf("Tenant = %+v (backlog %v), want demo with the default limits %+v, an admitted message and a backlog count", got, got.Backlog, want)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, base, key string
		opts            []client.Option
	}{
		{name: "no scheme", base: "fairq.example.com", key: "k"},
		{name: "other scheme", base: "ftp://fairq.example.com", key: "k"},
		{name: "query", base: "http://fairq.example.com/?a=b", key: "k"},
		{name: "empty key", base: "http://fairq.example.com", key: ""},
		{name: "key with a newline", base: "http://fairq.example.com", key: "k\nX-Evil: 1"},
		{name: "nil HTTP client", base: "http://h", key: "k", opts: []client.Option{client.WithHTTPClient(nil)}},
		{name: "no attempt", base: "http://h", key: "k", opts: []client.Option{client.WithRetries(0, time.Second, time.Second)}},
		{name: "cap below base", base: "http://h", key: "k", opts: []client.Option{client.WithRetries(3, time.Second, time.Millisecond)}},
	} {
		if _, err := client.New(tt.base, tt.key, tt.opts...); err == nil {
			t.Errorf("%s: New(%q, %q) accepted", tt.name, tt.base, tt.key)
		}
	}
	if _, err := client.New("https://fairq.example.com/api/", "k", client.WithRetries(1, time.Second, time.Second)); err != nil {
		t.Errorf("New with a path: %v", err)
	}
}
