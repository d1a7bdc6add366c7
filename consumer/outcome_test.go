package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
)

// limiterFunc adapts a function to a consumer.Limiter.
type limiterFunc func(ctx context.Context, m *consumer.Message) (consumer.Verdict, error)

func (f limiterFunc) Admit(ctx context.Context, m *consumer.Message) (consumer.Verdict, error) {
	return f(ctx, m)
}

// counter records Backlog.Done calls.
type counter struct {
	mu    sync.Mutex
	calls []string // "tenant:n"
	done  chan string
}

func newCounter() *counter { return &counter{done: make(chan string, 100)} }

func (c *counter) Done(tenant string, n int64) {
	s := fmt.Sprintf("%s:%d", tenant, n)
	c.mu.Lock()
	c.calls = append(c.calls, s)
	c.mu.Unlock()
	c.done <- s
}

func (c *counter) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

// delivery is what a test handler saw of one delivery.
type delivery struct {
	at    time.Time
	queue string
	count int
	id    string
}

// recorder returns a handler that records each delivery and answers with
// answer(n) for the n-th (from 1).
func recorder(answer func(n int, m *consumer.Message) error) (consumer.Handler, <-chan delivery) {
	ch := make(chan delivery, 100)
	var mu sync.Mutex
	n := 0
	return consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
		ch <- delivery{time.Now(), m.Queue, m.ReceiveCount, m.ID}
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		return answer(k, m)
	}), ch
}

// deadLetters receives every message of the dead-letter queue and returns
// their fairq-meta.
func deadLetters(t testing.TB, b queue.Backend, names queue.Names) []envelope.Meta {
	t.Helper()
	msgs, err := b.Receive(context.Background(), names.DLQ, queue.ReceiveOptions{Max: 10})
	if err != nil {
		t.Fatalf("receive from the dead-letter queue: %v", err)
	}
	var metas []envelope.Meta
	for _, m := range msgs {
		meta, err := envelope.Decode(m.Attributes[envelope.AttrMeta])
		if err != nil {
			t.Fatalf("dead letter: %v", err)
		}
		metas = append(metas, meta)
	}
	return metas
}

// TestBackoffGrows: each failure waits twice as long as the one before,
// up to error_visibility_timeout; after max_retries attempts the message is
// dead-lettered with its last error and its tenant's backlog goes down.
func TestBackoffGrows(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) { testBackoffGrows(t, kind) })
		})
	}
}

func testBackoffGrows(t *testing.T, kind string) {
	b, names := setup(t, kind)
	// In real time (SQS), fewer attempts and a lower cap keep it short.
	retries, limit := 7, 10*time.Second
	if kind != "memory" {
		retries, limit = 5, 5*time.Second
	}
	enqueued := time.Now().Add(-time.Second)
	send(t, b, names.Live[0], msg{tenant: "acme", meta: &envelope.Meta{EnqueuedAt: enqueued.UnixMilli(), RequestID: "r1"}})
	h, seen := recorder(func(int, *consumer.Message) error { return errBoom })
	backlog := newCounter()
	start(t, consumer.Config{
		Backend: b, Names: names, Handler: h, Backlog: backlog,
		MaxRetries:             retries,
		BackoffBase:            time.Second,
		ErrorVisibilityTimeout: limit,
		RandFunc:               func() float64 { return 1 }, // the top of the jitter range
	})
	var gaps []time.Duration
	var counts []int
	prev := recv(t, seen, time.Minute, "delivery")
	counts = append(counts, prev.count)
	for range retries - 1 {
		d := recv(t, seen, time.Minute, "delivery")
		gaps = append(gaps, d.at.Sub(prev.at).Truncate(250*time.Millisecond))
		counts = append(counts, d.count)
		prev = d
	}
	if got := recv(t, backlog.done, time.Minute, "backlog decrement"); got != "acme:1" {
		t.Errorf("backlog Done(%s), want acme:1", got)
	}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	wantCounts := []int{1, 2, 3, 4, 5, 6, 7}
	if kind != "memory" {
		want, wantCounts = []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}, wantCounts[:5]
	}
	// SQS counts whole seconds and the receive takes its time: allow
	// up to a quarter second late there.
	if diff := cmp.Diff(want, gaps); diff != "" {
		t.Errorf("gaps between attempts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantCounts, counts); diff != "" {
		t.Errorf("receive counts (-want +got):\n%s", diff)
	}
	got := deadLetters(t, b, names)
	wantDL := []envelope.Meta{{EnqueuedAt: enqueued.UnixMilli(), Attempts: retries, RequestID: "r1", LastError: "boom"}}
	if diff := cmp.Diff(wantDL, got, ignoreIdentity); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	if n := depth(t, b, names.Live[0]); n != 0 {
		t.Errorf("%s still holds %d messages", names.Live[0], n)
	}
}

// ignoreIdentity leaves out of a comparison of fairq-meta the id and first
// receive a moved message is given (TestIdentityAcrossMoves checks them).
var ignoreIdentity = cmpopts.IgnoreFields(envelope.Meta{}, "ID", "FirstReceivedAt")

// TestDeadLetterAcrossMove: attempts are counted across a move to the
// overflow queue; the move itself is not an attempt.
func TestDeadLetterAcrossMove(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) { testDeadLetterAcrossMove(t, kind) })
		})
	}
}

func testDeadLetterAcrossMove(t *testing.T, kind string) {
	b, names := setup(t, kind)
	send(t, b, names.Live[1], msg{tenant: "acme", meta: &envelope.Meta{EnqueuedAt: time.Now().UnixMilli()}})
	h, seen := recorder(func(int, *consumer.Message) error { return errBoom })
	var admits []string
	var mu sync.Mutex
	limiter := limiterFunc(func(_ context.Context, m *consumer.Message) (consumer.Verdict, error) {
		mu.Lock()
		admits = append(admits, fmt.Sprintf("%s:%d", m.Queue, m.ReceiveCount))
		mu.Unlock()
		if m.Queue == names.Live[1] && m.ReceiveCount == 2 {
			return consumer.Verdict{Action: consumer.Spill, Delay: time.Second, Reason: "rate"}, nil
		}
		return consumer.Verdict{}, nil
	})
	backlog := newCounter()
	start(t, consumer.Config{
		Backend: b, Names: names, Handler: h, Limiter: limiter, Backlog: backlog,
		MaxRetries: 3, BackoffBase: time.Second, RandFunc: func() float64 { return 0.5 },
	})
	var got []string
	for range 3 {
		d := recv(t, seen, time.Minute, "delivery")
		got = append(got, fmt.Sprintf("%s:%d", d.queue, d.count))
	}
	recv(t, backlog.done, time.Minute, "backlog decrement")
	want := []string{names.Live[1] + ":1", names.Overflow + ":2", names.Overflow + ":3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries queue:count (-want +got):\n%s", diff)
	}
	wantAdmits := []string{names.Live[1] + ":1", names.Live[1] + ":2", names.Overflow + ":2", names.Overflow + ":3"}
	mu.Lock()
	if diff := cmp.Diff(wantAdmits, admits); diff != "" {
		t.Errorf("limiter saw queue:count (-want +got):\n%s", diff)
	}
	mu.Unlock()
	dl := deadLetters(t, b, names)
	if len(dl) != 1 || dl[0].Attempts != 3 || dl[0].LastError != "boom" {
		t.Errorf("dead letters %+v, want one with 3 attempts and error boom", dl)
	}
	if diff := cmp.Diff([]string{"acme:1"}, backlog.got()); diff != "" {
		t.Errorf("backlog decrements (-want +got):\n%s", diff)
	}
}

// TestRetryAfter: a Retry-After brings the message back after that delay
// without counting the delivery.
func TestRetryAfter(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) { testRetryAfter(t, kind) })
		})
	}
}

func testRetryAfter(t *testing.T, kind string) {
	b, names := setup(t, kind)
	send(t, b, names.Live[0], msg{tenant: "acme"})
	h, seen := recorder(func(n int, _ *consumer.Message) error {
		if n <= 2 {
			return &consumer.RetryAfterError{After: 2 * time.Second}
		}
		return errBoom
	})
	backlog := newCounter()
	start(t, consumer.Config{Backend: b, Names: names, Handler: h, Backlog: backlog, MaxRetries: 2, BackoffBase: time.Second, RandFunc: func() float64 { return 0 }})
	var counts []int
	var gaps []time.Duration
	first := recv(t, seen, time.Minute, "delivery")
	prev := first
	counts = append(counts, first.count)
	for range 3 {
		d := recv(t, seen, time.Minute, "delivery")
		counts = append(counts, d.count)
		gaps = append(gaps, d.at.Sub(prev.at).Truncate(250*time.Millisecond))
		prev = d
	}
	recv(t, backlog.done, time.Minute, "backlog decrement")
	if diff := cmp.Diff([]int{1, 1, 1, 2}, counts); diff != "" {
		t.Errorf("receive counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{2 * time.Second, 2 * time.Second, 0}, gaps); diff != "" {
		t.Errorf("gaps (-want +got):\n%s", diff)
	}
	if dl := deadLetters(t, b, names); len(dl) != 1 || dl[0].Attempts != 2 {
		t.Errorf("dead letters %+v, want one with 2 attempts", dl)
	}
}

// TestRetryAfterBeyondDelayLimit: a Retry-After longer than SQS's 900 s
// delay brings the message back after that time, not counted as an
// attempt (with max_retries 1, a counted receive would dead-letter it
// unrun), and a message received before its not-before time is put off
// again without running.
func TestRetryAfterBeyondDelayLimit(t *testing.T) {
	tests := []struct {
		name   string
		meta   func(now time.Time) *envelope.Meta // of the message sent
		answer func(n int) error
		// wait is when the handler should see the delivery it accepts,
		// after the first delivery (or, with runsFirst false, after the
		// send).
		wait      time.Duration
		runsFirst bool
	}{
		{
			name: "retry-after two hours",
			answer: func(n int) error {
				if n == 1 {
					return consumer.RetryAfter(2 * time.Hour)
				}
				return nil
			},
			wait:      2 * time.Hour,
			runsFirst: true,
		},
		{
			name: "received before its time",
			meta: func(now time.Time) *envelope.Meta {
				return &envelope.Meta{EnqueuedAt: now.UnixMilli(), NotBefore: now.Add(40 * time.Minute).UnixMilli()}
			},
			answer: func(int) error { return nil },
			wait:   40 * time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, names := setup(t, "memory")
				t0 := time.Now()
				m := msg{tenant: "acme"}
				if tt.meta != nil {
					m.meta = tt.meta(t0)
				}
				send(t, b, names.Live[0], m)
				h, seen := recorder(func(n int, _ *consumer.Message) error { return tt.answer(n) })
				reg := prometheus.NewRegistry()
				start(t, consumer.Config{Backend: b, Names: names, Handler: h, MaxRetries: 1, Registerer: reg})
				from := t0
				if tt.runsFirst {
					first := recv(t, seen, time.Minute, "first delivery")
					from = first.at
				}
				d := recv(t, seen, 3*time.Hour, "delivery after the wait")
				if gap := d.at.Sub(from); gap < tt.wait || gap > tt.wait+2*time.Second {
					t.Errorf("run %v after, want %v", gap, tt.wait)
				}
				if d.count != 1 {
					t.Errorf("receive count %d, want 1: the wait is not an attempt", d.count)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				select {
				case extra := <-seen:
					t.Errorf("run again at %v", extra.at.Sub(t0))
				default:
				}
				for _, q := range names.All() {
					if n := depth(t, b, q); n != 0 {
						t.Errorf("%s holds %d messages, want 0", q, n)
					}
				}
				if got := metric(t, reg, "fairq_worker_processed_total", "outcome", "success"); got != 1 {
					t.Errorf("%v successes counted, want 1", got)
				}
			})
		})
	}
}

// agePolicy returns the per-tenant policy of package spillover with the
// worker's drop and backlog ages, over tenants with the given drop ages.
func agePolicy(t *testing.T, drop, backlog time.Duration, tenantDrop map[string]time.Duration) consumer.Limiter {
	t.Helper()
	var specs []tenant.Spec
	for id, d := range tenantDrop {
		specs = append(specs, tenant.Spec{ID: id, Limits: tenant.Limits{DropAge: new(tenant.Duration(d))}})
	}
	reg, err := tenant.New(tenant.Config{Tenants: specs})
	if err != nil {
		t.Fatal(err)
	}
	l, err := spillover.New(spillover.Config{Tenants: reg, DropAge: drop, BacklogAge: backlog})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestAgeChecks: a message older than drop_age is dropped; one older than
// backlog_age goes to the backlog queue and is worked from there after
// the fresh one, its move not counted as an attempt.
func TestAgeChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		now := time.Now()
		send(t, b, names.Live[0], msg{body: "ancient", tenant: "a", meta: &envelope.Meta{EnqueuedAt: now.Add(-2 * time.Hour).UnixMilli()}})
		send(t, b, names.Live[0], msg{body: "old", tenant: "b", meta: &envelope.Meta{EnqueuedAt: now.Add(-10 * time.Minute).UnixMilli()}})
		send(t, b, names.Live[1], msg{body: "fresh", tenant: "c", meta: &envelope.Meta{EnqueuedAt: now.UnixMilli()}})
		var mu sync.Mutex
		var bodies []string
		h, seen := recorder(func(_ int, m *consumer.Message) error {
			mu.Lock()
			bodies = append(bodies, m.Body+"@"+m.Queue)
			mu.Unlock()
			return nil
		})
		backlog := newCounter()
		start(t, consumer.Config{
			Backend: b, Names: names, Handler: h, Backlog: backlog,
			Limiter: agePolicy(t, time.Hour, 5*time.Minute, nil), Connections: 1,
		})
		recv(t, seen, time.Minute, "delivery")
		d := recv(t, seen, time.Minute, "delivery")
		if d.count != 1 {
			t.Errorf("backlog delivery has receive count %d, want 1", d.count)
		}
		for range 3 {
			recv(t, backlog.done, time.Minute, "backlog decrement")
		}
		synctest.Wait()
		mu.Lock()
		if diff := cmp.Diff([]string{"fresh@" + names.Live[1], "old@" + names.Backlog}, bodies); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
		mu.Unlock()
		for _, q := range names.All() {
			if n := depth(t, b, q); n != 0 {
				t.Errorf("%s holds %d messages, want 0", q, n)
			}
		}
	})
}

// TestTenantDropAge: a tenant's own drop age replaces the worker's for its
// messages, shorter or longer.
func TestTenantDropAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		enqueued := &envelope.Meta{EnqueuedAt: time.Now().Add(-2 * time.Hour).UnixMilli()}
		for _, tenant := range []string{"synced", "kept", "other"} {
			send(t, b, names.Live[0], msg{body: tenant, tenant: tenant, meta: enqueued})
		}
		var mu sync.Mutex
		var bodies []string
		h, _ := recorder(func(_ int, m *consumer.Message) error {
			mu.Lock()
			bodies = append(bodies, m.Body)
			mu.Unlock()
			return nil
		})
		reg := prometheus.NewRegistry()
		start(t, consumer.Config{
			Backend: b, Names: names, Handler: h, Registerer: reg,
			Limiter: agePolicy(t, 3*time.Hour, 0, map[string]time.Duration{"synced": time.Hour, "kept": 24 * time.Hour}),
		})
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		slices.Sort(bodies)
		if diff := cmp.Diff([]string{"kept", "other"}, bodies); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
		mu.Unlock()
		if n := metric(t, reg, "fairq_worker_processed_total", "outcome", "dropped"); n != 1 {
			t.Errorf("%v drops counted, want 1", n)
		}
	})
}

// TestObserveFunc: ObserveFunc gets the processing time of every job,
// whatever its outcome, periodic tasks included; a message spilled by
// its Limiter is not a job.
func TestObserveFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		send(t, b, names.Live[0], msg{body: "ok", tenant: "acme"})
		send(t, b, names.Live[1], msg{body: "fails", tenant: "acme"})
		send(t, b, names.Live[0], msg{attrs: map[string]string{
			envelope.AttrTask: envelope.Task{Name: "nightly", Path: "/nightly", ScheduledAt: time.Now()}.Encode(),
		}})
		h, seen := recorder(func(_ int, m *consumer.Message) error {
			switch {
			case m.Task != nil:
				time.Sleep(5 * time.Second)
				return nil
			case m.Body == "fails":
				time.Sleep(3 * time.Second)
				return errBoom
			}
			time.Sleep(2 * time.Second)
			return nil
		})
		var mu sync.Mutex
		var observed []time.Duration
		start(t, consumer.Config{
			Backend: b, Names: names, Handler: h, MaxRetries: 1,
			Limiter: spillTimes(1, consumer.Spill, time.Second, "rate"),
			ObserveFunc: func(d time.Duration) {
				mu.Lock()
				observed = append(observed, d)
				mu.Unlock()
			},
		})
		for range 3 {
			recv(t, seen, time.Minute, "delivery")
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(observed)
		want := []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second}
		if diff := cmp.Diff(want, observed); diff != "" {
			t.Errorf("observed processing times (-want +got):\n%s", diff)
		}
	})
}
