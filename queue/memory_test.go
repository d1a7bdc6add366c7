package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	queuetest.RunWith(t, func(*testing.T) queue.Backend {
		return queue.NewMemory(queue.MemoryConfig{})
	}, queuetest.Options{Strict: true})
}

// memSetup returns a Memory holding one queue, "q", created with spec.
func memSetup(t *testing.T, spec queue.Spec) *queue.Memory {
	t.Helper()
	m := queue.NewMemory(queue.MemoryConfig{})
	spec.Name = "q"
	if _, err := m.Create(t.Context(), spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return m
}

func mustSend(t *testing.T, m *queue.Memory, q string, entries ...queue.Entry) []string {
	t.Helper()
	res, err := m.Send(t.Context(), q, entries)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("Send entry %q: %v", r.ID, r.Err)
		}
		ids[i] = r.MessageID
	}
	return ids
}

func mustReceive(t *testing.T, m *queue.Memory, q string, opts queue.ReceiveOptions) []queue.Message {
	t.Helper()
	msgs, err := m.Receive(t.Context(), q, opts)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return msgs
}

func bodies(msgs []queue.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	return out
}

func mustDepth(t *testing.T, m *queue.Memory, q string) queue.Depth {
	t.Helper()
	d, err := m.Depth(t.Context(), q)
	if err != nil {
		t.Fatalf("Depth: %v", err)
	}
	return d
}

// TestMemoryLongPollWakesOnTime checks, on the fake clock of synctest, that
// a long poll returns at the very moment a message becomes visible, however
// it becomes visible: no polling interval delays it.
func TestMemoryLongPollWakesOnTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// act runs while a long poll of 20 s waits on queue "q", and
		// returns when the message should arrive, counted from the start.
		act func(t *testing.T, m *queue.Memory) time.Duration
	}{
		{"send", func(t *testing.T, m *queue.Memory) time.Duration {
			time.Sleep(3 * time.Second)
			mustSend(t, m, "q", queue.Entry{ID: "a", Body: "now"})
			return 3 * time.Second
		}},
		{"delay sent during the wait", func(t *testing.T, m *queue.Memory) time.Duration {
			time.Sleep(time.Second)
			mustSend(t, m, "q", queue.Entry{ID: "a", Body: "later", Delay: 4 * time.Second})
			return 5 * time.Second
		}},
		{"delay shorter than one already pending", func(t *testing.T, m *queue.Memory) time.Duration {
			mustSend(t, m, "q", queue.Entry{ID: "a", Body: "much later", Delay: 15 * time.Minute})
			time.Sleep(time.Second)
			mustSend(t, m, "q", queue.Entry{ID: "b", Body: "sooner", Delay: 2 * time.Second})
			return 3 * time.Second
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := memSetup(t, queue.Spec{})
				start := time.Now()
				type result struct {
					msgs []queue.Message
					at   time.Duration
				}
				done := make(chan result, 1)
				go func() {
					msgs := mustReceive(t, m, "q", queue.ReceiveOptions{Wait: 20 * time.Second})
					done <- result{msgs, time.Since(start)}
				}()
				synctest.Wait() // the poll is waiting
				want := tt.act(t, m)
				r := <-done
				if len(r.msgs) != 1 {
					t.Fatalf("long poll returned %d messages after %v, want 1", len(r.msgs), r.at)
				}
				if r.at != want {
					t.Errorf("long poll returned after %v, want %v", r.at, want)
				}
			})
		})
	}
}

// TestMemoryLongPollWakesOnVisibility checks that waiting polls see messages
// come back when their visibility timeout passes or is set to zero.
func TestMemoryLongPollWakesOnVisibility(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memSetup(t, queue.Spec{VisibilityTimeout: 7 * time.Second})
		mustSend(t, m, "q", queue.Entry{ID: "a", Body: "job"})
		first := mustReceive(t, m, "q", queue.ReceiveOptions{})
		start := time.Now()
		again := mustReceive(t, m, "q", queue.ReceiveOptions{Wait: 20 * time.Second})
		if len(again) != 1 || time.Since(start) != 7*time.Second {
			t.Fatalf("poll returned %d messages after %v, want 1 after the 7s visibility timeout", len(again), time.Since(start))
		}
		if again[0].ReceiveCount != 2 || !again[0].FirstReceivedAt.Equal(first[0].FirstReceivedAt) {
			t.Errorf("redelivery: ReceiveCount %d, FirstReceivedAt %v; want 2, %v", again[0].ReceiveCount, again[0].FirstReceivedAt, first[0].FirstReceivedAt)
		}

		done := make(chan []queue.Message, 1)
		start = time.Now()
		go func() { done <- mustReceive(t, m, "q", queue.ReceiveOptions{Wait: 20 * time.Second}) }()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		errs, err := m.ChangeVisibility(t.Context(), "q", []queue.VisibilityChange{{ReceiptHandle: again[0].ReceiptHandle}})
		if err != nil || errs[0] != nil {
			t.Fatalf("ChangeVisibility: %v %v", err, errs)
		}
		got := <-done
		if len(got) != 1 || time.Since(start) != 2*time.Second {
			t.Fatalf("poll returned %d messages after %v, want 1 after 2s", len(got), time.Since(start))
		}

		// A shorter timeout set while a poll waits brings the wake-up forward.
		go func() { done <- mustReceive(t, m, "q", queue.ReceiveOptions{Wait: 20 * time.Second}) }()
		synctest.Wait()
		start = time.Now()
		errs, err = m.ChangeVisibility(t.Context(), "q", []queue.VisibilityChange{{ReceiptHandle: got[0].ReceiptHandle, Timeout: 3 * time.Second}})
		if err != nil || errs[0] != nil {
			t.Fatalf("ChangeVisibility: %v %v", err, errs)
		}
		if got := <-done; len(got) != 1 || time.Since(start) != 3*time.Second {
			t.Errorf("poll returned %d messages after %v, want 1 after 3s", len(got), time.Since(start))
		}
	})
}

// TestMemoryLongPollWaiters checks that a message due after one waiting
// poll ends still wakes another that waits longer.
func TestMemoryLongPollWaiters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memSetup(t, queue.Spec{})
		start := time.Now()
		type result struct {
			n  int
			at time.Duration
		}
		long, short := make(chan result, 1), make(chan result, 1)
		poll := func(wait time.Duration, out chan<- result) {
			msgs := mustReceive(t, m, "q", queue.ReceiveOptions{Wait: wait})
			out <- result{len(msgs), time.Since(start)}
		}
		go poll(20*time.Second, long)
		synctest.Wait()
		go poll(2*time.Second, short)
		synctest.Wait()
		mustSend(t, m, "q", queue.Entry{ID: "a", Body: "x", Delay: 5 * time.Second})
		if got := <-short; got != (result{0, 2 * time.Second}) {
			t.Errorf("short poll = %+v, want nothing after 2s", got)
		}
		if got := <-long; got != (result{1, 5 * time.Second}) {
			t.Errorf("long poll = %+v, want the message after 5s", got)
		}
	})
}

func TestMemoryLongPollCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memSetup(t, queue.Spec{})
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		msgs, err := m.Receive(ctx, "q", queue.ReceiveOptions{Wait: 20 * time.Second})
		if !errors.Is(err, context.DeadlineExceeded) || msgs != nil || time.Since(start) != 1500*time.Millisecond {
			t.Errorf("Receive = %v, %v after %v; want nil, %v after 1.5s", msgs, err, time.Since(start), context.DeadlineExceeded)
		}
	})
}

// TestMemoryOrder checks that messages are received in the order they became
// visible.
func TestMemoryOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memSetup(t, queue.Spec{})
		mustSend(t, m, "q",
			queue.Entry{ID: "a", Body: "a +3s", Delay: 3 * time.Second},
			queue.Entry{ID: "b", Body: "b +1s", Delay: time.Second},
			queue.Entry{ID: "c", Body: "c now"},
			queue.Entry{ID: "d", Body: "d +1s", Delay: time.Second},
		)
		mustSend(t, m, "q", queue.Entry{ID: "e", Body: "e now"})
		time.Sleep(5 * time.Second)
		got := mustReceive(t, m, "q", queue.ReceiveOptions{Visibility: time.Second})
		want := []string{"c now", "e now", "b +1s", "d +1s", "a +3s"}
		if diff := cmp.Diff(want, bodies(got)); diff != "" {
			t.Fatalf("receive order (-want +got):\n%s", diff)
		}
		time.Sleep(time.Second) // all five come back at once, in the order they were received
		if diff := cmp.Diff(want, bodies(mustReceive(t, m, "q", queue.ReceiveOptions{Max: 5}))); diff != "" {
			t.Errorf("redelivery order (-want +got):\n%s", diff)
		}
	})
}

func TestMemoryRetention(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memSetup(t, queue.Spec{Retention: time.Minute, VisibilityTimeout: 30 * time.Second})
		mustSend(t, m, "q",
			queue.Entry{ID: "visible", Body: "1"},
			queue.Entry{ID: "inflight", Body: "2"},
			queue.Entry{ID: "delayed", Body: "3", Delay: 15 * time.Minute},
		)
		time.Sleep(30 * time.Second)
		mustSend(t, m, "q", queue.Entry{ID: "young", Body: "4"})
		if got := mustReceive(t, m, "q", queue.ReceiveOptions{Max: 1}); len(got) != 1 || got[0].Body != "1" {
			t.Fatalf("received %v, want the oldest", bodies(got))
		}
		time.Sleep(31 * time.Second) // 61 s after the first send
		got := mustReceive(t, m, "q", queue.ReceiveOptions{Max: 10})
		if diff := cmp.Diff([]string{"4"}, bodies(got)); diff != "" {
			t.Errorf("after the retention period (-want +got):\n%s", diff)
		}
		if d := mustDepth(t, m, "q"); d != (queue.Depth{NotVisible: 1, Delayed: 1}) {
			t.Errorf("Depth = %+v: want the delayed message counted until it is due", d)
		}
		time.Sleep(15 * time.Minute)
		if d := mustDepth(t, m, "q"); d != (queue.Depth{}) {
			t.Errorf("Depth = %+v once every message has expired, want zero", d)
		}

		// A longer retention set later applies to messages already sent.
		mustSend(t, m, "q", queue.Entry{ID: "kept", Body: "5"})
		time.Sleep(2 * time.Minute)
		if _, err := m.Create(t.Context(), queue.Spec{Name: "q", Retention: time.Hour, VisibilityTimeout: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
		if got := mustReceive(t, m, "q", queue.ReceiveOptions{}); len(got) != 1 {
			t.Errorf("received %d messages after raising the retention, want 1", len(got))
		}
	})
}

func TestMemoryDeadLetter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := queue.NewMemory(queue.MemoryConfig{})
		for _, spec := range []queue.Spec{
			{Name: "dlq"},
			{Name: "q", DeadLetter: "dlq", MaxReceiveCount: 1, VisibilityTimeout: time.Second},
		} {
			if _, err := m.Create(ctx, spec); err != nil {
				t.Fatal(err)
			}
		}
		sentAt := time.Now()
		ids := mustSend(t, m, "q", queue.Entry{ID: "a", Body: "poison"}, queue.Entry{ID: "b", Body: "fine"})
		time.Sleep(time.Second)
		if got := mustReceive(t, m, "q", queue.ReceiveOptions{}); len(got) != 2 {
			t.Fatalf("first receive got %d messages, want 2", len(got))
		} else {
			mustDelete(t, m, "q", got[1].ReceiptHandle)
		}
		time.Sleep(time.Second)

		// A waiting poll on the dead-letter queue wakes when the move happens.
		done := make(chan []queue.Message, 1)
		go func() { done <- mustReceive(t, m, "dlq", queue.ReceiveOptions{Wait: 20 * time.Second}) }()
		synctest.Wait()
		if got := mustReceive(t, m, "q", queue.ReceiveOptions{}); len(got) != 0 {
			t.Fatalf("message received %d times past MaxReceiveCount 1", got[0].ReceiveCount)
		}
		dead := <-done
		if len(dead) != 1 {
			t.Fatalf("dead-letter queue gave %d messages, want 1", len(dead))
		}
		want := queue.Message{
			ID:              ids[0],
			ReceiptHandle:   dead[0].ReceiptHandle,
			Body:            "poison",
			SentAt:          sentAt,
			FirstReceivedAt: time.Now(),
			ReceiveCount:    1,
		}
		if diff := cmp.Diff(want, dead[0]); diff != "" {
			t.Errorf("dead-lettered message (-want +got):\n%s", diff)
		}
		if d := mustDepth(t, m, "q"); d != (queue.Depth{}) {
			t.Errorf("source Depth = %+v, want zero", d)
		}
	})
}

// TestMemoryDeadLetterCycle checks that two queues naming each other as
// dead-letter queues neither deadlock nor lose messages.
func TestMemoryDeadLetterCycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := queue.NewMemory(queue.MemoryConfig{})
	for _, spec := range []queue.Spec{
		{Name: "a"},
		{Name: "b", DeadLetter: "a", MaxReceiveCount: 1},
		{Name: "a", DeadLetter: "b", MaxReceiveCount: 1},
	} {
		if _, err := m.Create(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	const perQueue = 50
	for _, q := range []string{"a", "b"} {
		for i := range perQueue / 10 {
			entries := make([]queue.Entry, 10)
			for j := range entries {
				entries[j] = queue.Entry{ID: fmt.Sprint("e", j), Body: fmt.Sprint(q, i, j)}
			}
			mustSend(t, m, q, entries...)
		}
	}
	var wg sync.WaitGroup
	for _, q := range []string{"a", "b", "a", "b"} {
		wg.Go(func() {
			for range 200 {
				msgs, err := m.Receive(ctx, q, queue.ReceiveOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				changes := make([]queue.VisibilityChange, len(msgs))
				for i, msg := range msgs {
					changes[i] = queue.VisibilityChange{ReceiptHandle: msg.ReceiptHandle}
				}
				if len(changes) > 0 {
					if _, err := m.ChangeVisibility(ctx, q, changes); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	da, db := mustDepth(t, m, "a"), mustDepth(t, m, "b")
	if total := da.Visible + da.NotVisible + db.Visible + db.NotVisible; total != 2*perQueue {
		t.Errorf("queues hold %d messages (%+v, %+v), want %d", total, da, db, 2*perQueue)
	}
}

func mustDelete(t *testing.T, m *queue.Memory, q string, handles ...string) {
	t.Helper()
	errs, err := m.Delete(t.Context(), q, handles)
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Delete entry %d: %v", i, err)
		}
	}
}

func TestMemoryReceiptHandles(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		m := memSetup(t, queue.Spec{VisibilityTimeout: 10 * time.Second})
		other := memSetup(t, queue.Spec{})
		mustSend(t, m, "q", queue.Entry{ID: "a", Body: "x"})
		mustSend(t, other, "q", queue.Entry{ID: "a", Body: "y"})
		h := mustReceive(t, m, "q", queue.ReceiveOptions{})[0].ReceiptHandle
		foreign := mustReceive(t, other, "q", queue.ReceiveOptions{})[0].ReceiptHandle

		tests := []struct {
			name   string
			change queue.VisibilityChange
			want   error
		}{
			{"made up", queue.VisibilityChange{ReceiptHandle: "nope", Timeout: time.Second}, queue.ErrReceiptHandle},
			{"other Memory", queue.VisibilityChange{ReceiptHandle: foreign, Timeout: time.Second}, queue.ErrReceiptHandle},
			{"negative", queue.VisibilityChange{ReceiptHandle: h, Timeout: -time.Second}, queue.ErrInvalidEntry},
			{"over 12h", queue.VisibilityChange{ReceiptHandle: h, Timeout: queue.MaxVisibility + time.Second}, queue.ErrInvalidEntry},
			{"valid", queue.VisibilityChange{ReceiptHandle: h, Timeout: 11*time.Hour + 30*time.Minute}, nil},
		}
		for _, tt := range tests {
			errs, err := m.ChangeVisibility(ctx, "q", []queue.VisibilityChange{tt.change})
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			if !errors.Is(errs[0], tt.want) || (tt.want == nil) != (errs[0] == nil) {
				t.Errorf("%s: err = %v, want %v", tt.name, errs[0], tt.want)
			}
		}

		// The 12 h bound counts from the receive, so heartbeats cannot pass it.
		time.Sleep(11 * time.Hour)
		for _, tt := range []struct {
			timeout time.Duration
			want    error
		}{{2 * time.Hour, queue.ErrInvalidEntry}, {time.Hour, nil}} {
			errs, _ := m.ChangeVisibility(ctx, "q", []queue.VisibilityChange{{ReceiptHandle: h, Timeout: tt.timeout}})
			if !errors.Is(errs[0], tt.want) || (tt.want == nil) != (errs[0] == nil) {
				t.Errorf("extend by %v 11h after the receive: err = %v, want %v", tt.timeout, errs[0], tt.want)
			}
		}

		// Once the visibility timeout passes the message is no longer in
		// flight, but its latest handle still deletes it, once.
		time.Sleep(time.Hour)
		errs, _ := m.ChangeVisibility(ctx, "q", []queue.VisibilityChange{{ReceiptHandle: h, Timeout: time.Second}})
		if !errors.Is(errs[0], queue.ErrReceiptHandle) {
			t.Errorf("ChangeVisibility of a message no longer in flight: err = %v, want %v", errs[0], queue.ErrReceiptHandle)
		}
		errs, _ = m.Delete(ctx, "q", []string{h, h, "bogus"})
		if diff := cmp.Diff([]error{nil, queue.ErrReceiptHandle, queue.ErrReceiptHandle}, errs, cmp.Comparer(errors.Is)); diff != "" {
			t.Errorf("Delete errors (-want +got):\n%s", diff)
		}
		if d := mustDepth(t, m, "q"); d != (queue.Depth{}) {
			t.Errorf("Depth = %+v after Delete, want zero", d)
		}
	})
}

func TestMemoryNoAliasing(t *testing.T) {
	t.Parallel()
	m := memSetup(t, queue.Spec{})
	attrs := map[string]string{"k": "v"}
	mustSend(t, m, "q", queue.Entry{ID: "a", Body: "x", Attributes: attrs})
	attrs["k"] = "changed by the sender"
	got := mustReceive(t, m, "q", queue.ReceiveOptions{})
	got[0].Attributes["k"] = "changed by the receiver"
	if errs, err := m.ChangeVisibility(t.Context(), "q", []queue.VisibilityChange{{ReceiptHandle: got[0].ReceiptHandle}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	again := mustReceive(t, m, "q", queue.ReceiveOptions{})
	if diff := cmp.Diff(map[string]string{"k": "v"}, again[0].Attributes); diff != "" {
		t.Errorf("attributes (-want +got):\n%s", diff)
	}
}

func TestMemorySendValidation(t *testing.T) {
	t.Parallel()
	tenAttrs := make(map[string]string)
	for i := range 10 {
		tenAttrs[fmt.Sprint("a", i)] = "v"
	}
	elevenAttrs := map[string]string{"extra": "v"}
	for k, v := range tenAttrs {
		elevenAttrs[k] = v
	}
	tests := []struct {
		name  string
		entry queue.Entry
		want  error
	}{
		{"plain", queue.Entry{Body: "x"}, nil},
		{"ten attributes", queue.Entry{Body: "x", Attributes: tenAttrs}, nil},
		{"allowed characters", queue.Entry{Body: "\t\r\n ~\u00e9\ud7ff\ue000\ufffd\U0001F680\U0010FFFF"}, nil},
		{"max delay", queue.Entry{Body: "x", Delay: queue.MaxDelay}, nil},
		{"attribute name with dots", queue.Entry{Body: "x", Attributes: map[string]string{"a.b-c_d": "v"}}, nil},
		{"exactly the size limit", queue.Entry{Body: strings.Repeat("x", 1024-len("kString")-1), Attributes: map[string]string{"k": "v"}}, nil},
		{"over the size limit", queue.Entry{Body: strings.Repeat("x", 1024-len("kString")), Attributes: map[string]string{"k": "v"}}, queue.ErrTooLarge},
		{"empty body", queue.Entry{}, queue.ErrInvalidEntry},
		{"control character", queue.Entry{Body: "a\x00b"}, queue.ErrInvalidEntry},
		{"invalid UTF-8", queue.Entry{Body: "a\xffb"}, queue.ErrInvalidEntry},
		{"U+FFFE", queue.Entry{Body: "a\ufffeb"}, queue.ErrInvalidEntry},
		{"eleven attributes", queue.Entry{Body: "x", Attributes: elevenAttrs}, queue.ErrInvalidEntry},
		{"empty attribute value", queue.Entry{Body: "x", Attributes: map[string]string{"k": ""}}, queue.ErrInvalidEntry},
		{"attribute value with control character", queue.Entry{Body: "x", Attributes: map[string]string{"k": "\x01"}}, queue.ErrInvalidEntry},
		{"empty attribute name", queue.Entry{Body: "x", Attributes: map[string]string{"": "v"}}, queue.ErrInvalidEntry},
		{"reserved attribute name", queue.Entry{Body: "x", Attributes: map[string]string{"AWS.trace": "v"}}, queue.ErrInvalidEntry},
		{"amazon attribute name", queue.Entry{Body: "x", Attributes: map[string]string{"amazon.x": "v"}}, queue.ErrInvalidEntry},
		{"attribute name with ..", queue.Entry{Body: "x", Attributes: map[string]string{"a..b": "v"}}, queue.ErrInvalidEntry},
		{"attribute name ending in .", queue.Entry{Body: "x", Attributes: map[string]string{"a.": "v"}}, queue.ErrInvalidEntry},
		{"attribute name with space", queue.Entry{Body: "x", Attributes: map[string]string{"a b": "v"}}, queue.ErrInvalidEntry},
		{"negative delay", queue.Entry{Body: "x", Delay: -time.Second}, queue.ErrInvalidEntry},
		{"delay over 900s", queue.Entry{Body: "x", Delay: queue.MaxDelay + time.Second}, queue.ErrInvalidEntry},
	}
	m := memSetup(t, queue.Spec{MaxMessageSize: 1024})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each bad entry sits between two good ones that must go through.
			tt.entry.ID = "x"
			res, err := m.Send(t.Context(), "q", []queue.Entry{{ID: "before", Body: "ok"}, tt.entry, {ID: "after", Body: "ok"}})
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if !errors.Is(res[1].Err, tt.want) || (tt.want == nil) != (res[1].Err == nil) {
				t.Errorf("entry error = %v, want %v", res[1].Err, tt.want)
			}
			if (res[1].MessageID == "") != (tt.want != nil) {
				t.Errorf("MessageID = %q with error %v", res[1].MessageID, res[1].Err)
			}
			if res[0].Err != nil || res[2].Err != nil {
				t.Errorf("good entries failed: %v, %v", res[0].Err, res[2].Err)
			}
		})
	}
}

func TestMemorySendBatchValidation(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", queue.MaxMessageSizeCap/2)
	tests := []struct {
		name    string
		entries []queue.Entry
		want    error
	}{
		{"empty id", []queue.Entry{{Body: "x"}}, queue.ErrInvalidEntry},
		{"id with a dot", []queue.Entry{{ID: "a.b", Body: "x"}}, queue.ErrInvalidEntry},
		{"id of 81 characters", []queue.Entry{{ID: strings.Repeat("i", 81), Body: "x"}}, queue.ErrInvalidEntry},
		{"repeated id", []queue.Entry{{ID: "a", Body: "x"}, {ID: "a", Body: "y"}}, queue.ErrInvalidEntry},
		{"batch over 1 MiB", []queue.Entry{{ID: "a", Body: big}, {ID: "b", Body: big}, {ID: "c", Body: "x"}}, queue.ErrTooLarge},
		{"batch of 1 MiB", []queue.Entry{{ID: "a", Body: big}, {ID: "b", Body: big}}, nil},
	}
	m := memSetup(t, queue.Spec{MaxMessageSize: queue.MaxMessageSizeCap})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := m.Send(t.Context(), "q", tt.entries)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Send: err = %v, want %v", err, tt.want)
			}
			if err != nil && res != nil {
				t.Errorf("Send failed but returned results %v", res)
			}
		})
	}
	if d := mustDepth(t, m, "q"); d != (queue.Depth{Visible: 2}) {
		t.Errorf("Depth = %+v, want only the valid batch", d)
	}
}

func TestMemoryReceiveValidation(t *testing.T) {
	t.Parallel()
	m := memSetup(t, queue.Spec{})
	for _, opts := range []queue.ReceiveOptions{
		{Max: 11},
		{Max: -1},
		{Wait: -time.Second},
		{Wait: queue.MaxWait + time.Second},
		{Visibility: -time.Second},
		{Visibility: queue.MaxVisibility + time.Second},
	} {
		if _, err := m.Receive(t.Context(), "q", opts); err == nil {
			t.Errorf("Receive(%+v) succeeded, want an error", opts)
		}
	}
}

func TestMemoryCreate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    queue.Spec
		wantErr bool
	}{
		{"defaults", queue.Spec{Name: "q"}, false},
		{"limits", queue.Spec{Name: "q", VisibilityTimeout: queue.MaxVisibility, Delay: queue.MaxDelay, MaxMessageSize: queue.MaxMessageSizeCap,
			Retention: queue.MaxRetention, DeadLetter: "dlq", MaxReceiveCount: queue.MaxReceiveCountLimit}, false},
		{"80 character name", queue.Spec{Name: strings.Repeat("n", 80)}, false},
		{"empty name", queue.Spec{}, true},
		{"81 character name", queue.Spec{Name: strings.Repeat("n", 81)}, true},
		{"name with a dot", queue.Spec{Name: "q.fifo"}, true},
		{"visibility over 12h", queue.Spec{Name: "q", VisibilityTimeout: queue.MaxVisibility + time.Second}, true},
		{"negative delay", queue.Spec{Name: "q", Delay: -time.Second}, true},
		{"delay over 900s", queue.Spec{Name: "q", Delay: queue.MaxDelay + time.Second}, true},
		{"message size under 1 KiB", queue.Spec{Name: "q", MaxMessageSize: 1023}, true},
		{"message size over 1 MiB", queue.Spec{Name: "q", MaxMessageSize: queue.MaxMessageSizeCap + 1}, true},
		{"retention under 60s", queue.Spec{Name: "q", Retention: 59 * time.Second}, true},
		{"retention over 14d", queue.Spec{Name: "q", Retention: queue.MaxRetention + time.Second}, true},
		{"receive count without dead-letter queue", queue.Spec{Name: "q", MaxReceiveCount: 3}, true},
		{"dead-letter queue without receive count", queue.Spec{Name: "q", DeadLetter: "dlq"}, true},
		{"receive count over 1000", queue.Spec{Name: "q", DeadLetter: "dlq", MaxReceiveCount: 1001}, true},
		{"its own dead-letter queue", queue.Spec{Name: "dlq", DeadLetter: "dlq", MaxReceiveCount: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := queue.NewMemory(queue.MemoryConfig{})
			if _, err := m.Create(t.Context(), queue.Spec{Name: "dlq"}); err != nil {
				t.Fatal(err)
			}
			_, err := m.Create(t.Context(), tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Create(%+v): err = %v, want error %v", tt.spec, err, tt.wantErr)
			}
			if err == nil {
				if got, err := m.Create(t.Context(), tt.spec); err != nil || got != queue.Unchanged {
					t.Errorf("second Create = %v, %v; want %v", got, err, queue.Unchanged)
				}
			}
		})
	}

	// Zero fields mean the defaults, so spelling them out changes nothing.
	m := memSetup(t, queue.Spec{})
	spelled := queue.Spec{Name: "q", VisibilityTimeout: queue.VisibilityTimeoutDefault,
		MaxMessageSize: queue.MaxMessageSizeDefault, Retention: queue.RetentionDefault}
	if got, err := m.Create(t.Context(), spelled); err != nil || got != queue.Unchanged {
		t.Errorf("Create with the defaults spelled out = %v, %v; want %v", got, err, queue.Unchanged)
	}
}

// TestMemoryQueueAttributesApply checks that the attributes Create sets are
// the ones used, also after an update.
func TestMemoryQueueAttributesApply(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memSetup(t, queue.Spec{})
		update := queue.Spec{Name: "q", VisibilityTimeout: 5 * time.Second, Delay: 2 * time.Second, MaxMessageSize: 1024}
		if got, err := m.Create(t.Context(), update); err != nil || got != queue.Updated {
			t.Fatalf("Create = %v, %v; want %v", got, err, queue.Updated)
		}
		res, err := m.Send(t.Context(), "q", []queue.Entry{{ID: "big", Body: strings.Repeat("x", 1025)}, {ID: "ok", Body: "x"}})
		if err != nil || !errors.Is(res[0].Err, queue.ErrTooLarge) || res[1].Err != nil {
			t.Fatalf("Send = %+v, %v: want the new size limit", res, err)
		}
		if d := mustDepth(t, m, "q"); d != (queue.Depth{Delayed: 1}) {
			t.Errorf("Depth = %+v, want the message delayed by the queue", d)
		}
		time.Sleep(2 * time.Second)
		mustReceive(t, m, "q", queue.ReceiveOptions{})
		time.Sleep(5*time.Second - time.Nanosecond)
		if d := mustDepth(t, m, "q"); d != (queue.Depth{NotVisible: 1}) {
			t.Errorf("Depth = %+v just before the visibility timeout, want it in flight", d)
		}
		time.Sleep(time.Nanosecond)
		if d := mustDepth(t, m, "q"); d != (queue.Depth{Visible: 1}) {
			t.Errorf("Depth = %+v at the visibility timeout, want it visible", d)
		}
	})
}

// TestMemoryConcurrent runs senders and consumers at once (under -race) and
// checks that every message is handled exactly once when visibility
// timeouts are longer than the work.
func TestMemoryConcurrent(t *testing.T) {
	t.Parallel()
	const senders, consumers, perSender = 4, 4, 500
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	m := memSetup(t, queue.Spec{VisibilityTimeout: time.Minute})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = make(map[string]int)
	)
	for s := range senders {
		wg.Go(func() {
			for i := 0; i < perSender; i += 10 {
				entries := make([]queue.Entry, 10)
				for j := range entries {
					entries[j] = queue.Entry{ID: fmt.Sprint("e", j), Body: fmt.Sprint(s, "/", i+j)}
				}
				if _, err := m.Send(ctx, "q", entries); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	total := senders * perSender
	for range consumers {
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(seen) >= total
				mu.Unlock()
				if done {
					return
				}
				msgs, err := m.Receive(ctx, "q", queue.ReceiveOptions{Wait: 100 * time.Millisecond})
				if err != nil {
					t.Error(err)
					return
				}
				if len(msgs) == 0 {
					continue
				}
				handles := make([]string, len(msgs))
				mu.Lock()
				for i, msg := range msgs {
					seen[msg.Body]++
					handles[i] = msg.ReceiptHandle
				}
				mu.Unlock()
				if errs, err := m.Delete(ctx, "q", handles); err != nil || errors.Join(errs...) != nil {
					t.Error(err, errs)
					return
				}
			}
		})
	}
	wg.Wait()
	for body, n := range seen {
		if n != 1 {
			t.Errorf("%q handled %d times", body, n)
		}
	}
	if len(seen) != total {
		t.Errorf("handled %d messages, want %d", len(seen), total)
	}
	if d := mustDepth(t, m, "q"); d != (queue.Depth{}) {
		t.Errorf("Depth = %+v, want zero", d)
	}
}
