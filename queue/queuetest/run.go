package queuetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairq/fairq/queue"
)

// Options selects the checks a backend is held to.
type Options struct {
	// Strict adds checks where queue.Memory is stricter than the SQS
	// emulator used in tests (fauxqs 1.9): Delete with a receipt handle from
	// before a redelivery, or with a made-up one, fails with
	// queue.ErrReceiptHandle (fauxqs answers success and deletes nothing,
	// as Amazon SQS does for an old handle); and a dead-lettered message
	// starts again at receive count 1 (fauxqs keeps counting from the
	// source queue); and a message's group id comes back in
	// Message.GroupID (fauxqs keeps none on a standard queue, where Amazon
	// SQS returns it).
	Strict bool
}

// Run runs the conformance suite without the Strict checks. open returns the
// backend for one subtest; it is called once per subtest, with that
// subtest's t, so it may register cleanups.
func Run(t *testing.T, open func(t *testing.T) queue.Backend) {
	RunWith(t, open, Options{})
}

// RunWith runs the conformance suite with opts.
func RunWith(t *testing.T, open func(t *testing.T) queue.Backend, opts Options) {
	tests := []struct {
		name string
		fn   func(s *suite)
	}{
		{"CreateIsIdempotent", testCreate},
		{"UnknownQueue", testUnknownQueue},
		{"RoundTrip", testRoundTrip},
		{"ReceiveMax", testReceiveMax},
		{"EmptyReceiveWaits", testEmptyReceiveWaits},
		{"LongPollWakesOnSend", testLongPollWakesOnSend},
		{"LongPollWakesWhenDelayEnds", testLongPollWakesWhenDelayEnds},
		{"VisibilityTimeoutRedelivers", testVisibilityTimeoutRedelivers},
		{"ChangeVisibilityToZero", testChangeVisibilityToZero},
		{"ChangeVisibilityExtends", testChangeVisibilityExtends},
		{"DeleteIsForGood", testDeleteIsForGood},
		{"MessageDelay", testMessageDelay},
		{"QueueDelay", testQueueDelay},
		{"BatchLimits", testBatchLimits},
		{"OversizedEntryFailsAlone", testOversizedEntryFailsAlone},
		{"TooManyAttributesFailsAlone", testTooManyAttributes},
		{"GroupIDs", testGroupIDs},
		{"Depth", testDepth},
		{"Redrive", testRedrive},
		{"CancelEndsLongPoll", testCancelEndsLongPoll},
		{"ConcurrentReceivers", testConcurrentReceivers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(&suite{t: t, b: open(t), ctx: t.Context(), opts: opts})
		})
	}
}

// suite is the state of one subtest.
type suite struct {
	t    *testing.T
	b    queue.Backend
	ctx  context.Context
	opts Options
}

// name returns a queue name unique to this run: "qt", 8 random hex digits,
// and suffix.
func (s *suite) name(suffix string) string {
	var b [4]byte
	rand.Read(b[:])
	return "qt" + hex.EncodeToString(b[:]) + "-" + suffix
}

// create creates a queue that must not exist yet and returns its name.
func (s *suite) create(spec queue.Spec) string {
	s.t.Helper()
	got, err := s.b.Create(s.ctx, spec)
	if err != nil {
		s.t.Fatalf("Create(%+v): %v", spec, err)
	}
	if got != queue.Created {
		s.t.Fatalf("Create(%+v) = %v, want %v", spec, got, queue.Created)
	}
	return spec.Name
}

// newQueue creates a queue with a unique name and the given spec.
func (s *suite) newQueue(suffix string, spec queue.Spec) string {
	s.t.Helper()
	spec.Name = s.name(suffix)
	return s.create(spec)
}

// send sends entries that must all succeed and returns their message ids.
func (s *suite) send(q string, entries ...queue.Entry) []string {
	s.t.Helper()
	res, err := s.b.Send(s.ctx, q, entries)
	if err != nil {
		s.t.Fatalf("Send(%q): %v", q, err)
	}
	if len(res) != len(entries) {
		s.t.Fatalf("Send(%q) returned %d results for %d entries", q, len(res), len(entries))
	}
	ids := make([]string, len(res))
	for i, r := range res {
		if r.Err != nil || r.ID != entries[i].ID || r.MessageID == "" {
			s.t.Fatalf("Send(%q) result %d = %+v, want ID %q, a message id and no error", q, i, r, entries[i].ID)
		}
		ids[i] = r.MessageID
	}
	return ids
}

// receive makes one Receive call that must not fail.
func (s *suite) receive(q string, opts queue.ReceiveOptions) []queue.Message {
	s.t.Helper()
	msgs, err := s.b.Receive(s.ctx, q, opts)
	if err != nil {
		s.t.Fatalf("Receive(%q, %+v): %v", q, opts, err)
	}
	return msgs
}

// receiveN receives exactly n messages within d, by long polls of opts.Wait
// (at least one second).
func (s *suite) receiveN(q string, n int, opts queue.ReceiveOptions, d time.Duration) []queue.Message {
	s.t.Helper()
	opts.Wait = max(opts.Wait, time.Second)
	var got []queue.Message
	for deadline := time.Now().Add(d); len(got) < n && time.Now().Before(deadline); {
		opts.Max = min(n-len(got), queue.MaxBatch)
		got = append(got, s.receive(q, opts)...)
	}
	if len(got) != n {
		s.t.Fatalf("received %d messages from %q within %v, want %d", len(got), q, d, n)
	}
	return got
}

// receiveOne receives the one message the queue should have within d.
func (s *suite) receiveOne(q string, opts queue.ReceiveOptions, d time.Duration) queue.Message {
	s.t.Helper()
	return s.receiveN(q, 1, opts, d)[0]
}

// expectEmpty checks that one Receive with opts returns nothing.
func (s *suite) expectEmpty(q string, opts queue.ReceiveOptions) {
	s.t.Helper()
	if msgs := s.receive(q, opts); len(msgs) != 0 {
		s.t.Fatalf("Receive(%q, %+v) returned %d messages (first %q), want none", q, opts, len(msgs), msgs[0].Body)
	}
}

// deleteAll deletes messages by their handles; every entry must succeed.
func (s *suite) deleteAll(q string, msgs ...queue.Message) {
	s.t.Helper()
	handles := make([]string, len(msgs))
	for i, m := range msgs {
		handles[i] = m.ReceiptHandle
	}
	errs, err := s.b.Delete(s.ctx, q, handles)
	if err != nil {
		s.t.Fatalf("Delete(%q): %v", q, err)
	}
	for i, err := range errs {
		if err != nil {
			s.t.Fatalf("Delete(%q) entry %d: %v", q, i, err)
		}
	}
}

// changeVisibility changes one message's visibility and returns the entry's
// error.
func (s *suite) changeVisibility(q, handle string, timeout time.Duration) error {
	s.t.Helper()
	errs, err := s.b.ChangeVisibility(s.ctx, q, []queue.VisibilityChange{{ReceiptHandle: handle, Timeout: timeout}})
	if err != nil {
		s.t.Fatalf("ChangeVisibility(%q): %v", q, err)
	}
	if len(errs) != 1 {
		s.t.Fatalf("ChangeVisibility(%q) returned %d entry errors for 1 change", q, len(errs))
	}
	return errs[0]
}

// depth returns the queue's Depth.
func (s *suite) depth(q string) queue.Depth {
	s.t.Helper()
	d, err := s.b.Depth(s.ctx, q)
	if err != nil {
		s.t.Fatalf("Depth(%q): %v", q, err)
	}
	return d
}

func (s *suite) expectDepth(q string, want queue.Depth) {
	s.t.Helper()
	if got := s.depth(q); got != want {
		s.t.Errorf("Depth(%q) = %+v, want %+v", q, got, want)
	}
}

func testCreate(s *suite) {
	spec := queue.Spec{Name: s.name("create"), VisibilityTimeout: 5 * time.Second}
	steps := []struct {
		visibility time.Duration
		want       queue.CreateResult
	}{
		{5 * time.Second, queue.Created},
		{5 * time.Second, queue.Unchanged},
		{7 * time.Second, queue.Updated},
		{7 * time.Second, queue.Unchanged},
	}
	for i, st := range steps {
		spec.VisibilityTimeout = st.visibility
		got, err := s.b.Create(s.ctx, spec)
		if err != nil {
			s.t.Fatalf("step %d: Create(%+v): %v", i, spec, err)
		}
		if got != st.want {
			s.t.Errorf("step %d: Create(%+v) = %v, want %v", i, spec, got, st.want)
		}
	}

	dlq := queue.Spec{Name: s.name("create-dlq"), DeadLetter: s.name("missing"), MaxReceiveCount: 3}
	if _, err := s.b.Create(s.ctx, dlq); !errors.Is(err, queue.ErrQueueNotFound) {
		s.t.Errorf("Create with a missing dead-letter queue: err = %v, want %v", err, queue.ErrQueueNotFound)
	}
}

func testUnknownQueue(s *suite) {
	q := s.name("unknown")
	calls := map[string]func() error{
		"Send": func() error {
			_, err := s.b.Send(s.ctx, q, []queue.Entry{{ID: "a", Body: "x"}})
			return err
		},
		"Receive": func() error {
			_, err := s.b.Receive(s.ctx, q, queue.ReceiveOptions{})
			return err
		},
		"Delete": func() error {
			_, err := s.b.Delete(s.ctx, q, []string{"handle"})
			return err
		},
		"ChangeVisibility": func() error {
			_, err := s.b.ChangeVisibility(s.ctx, q, []queue.VisibilityChange{{ReceiptHandle: "handle"}})
			return err
		},
		"Depth": func() error {
			_, err := s.b.Depth(s.ctx, q)
			return err
		},
	}
	for op, call := range calls {
		if err := call(); !errors.Is(err, queue.ErrQueueNotFound) {
			s.t.Errorf("%s on a queue never created: err = %v, want %v", op, err, queue.ErrQueueNotFound)
		}
	}
}

func testRoundTrip(s *suite) {
	q := s.newQueue("roundtrip", queue.Spec{})
	entries := []queue.Entry{
		{ID: "plain", Body: "hello"},
		{ID: "unicode", Body: "héllo wörld ✓ 日本語 🚀\ttab\nnewline", Attributes: map[string]string{
			"fairq-tenant": "acme",
			"note":         "naïve ☃ 🚀",
		}},
		{ID: "json", Body: `{"order":42,"items":["a","b"]}`, Attributes: map[string]string{
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		}},
	}
	before := time.Now()
	ids := s.send(q, entries...)
	after := time.Now()
	if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
		s.t.Errorf("message ids are not distinct: %q", ids)
	}

	got := s.receiveN(q, len(entries), queue.ReceiveOptions{Visibility: 30 * time.Second}, 10*time.Second)
	byID := make(map[string]queue.Message, len(got))
	handles := make(map[string]bool)
	for _, m := range got {
		byID[m.ID] = m
		handles[m.ReceiptHandle] = true
	}
	if len(handles) != len(got) || handles[""] {
		s.t.Errorf("receipt handles are empty or repeated: %d distinct for %d messages", len(handles), len(got))
	}
	const slack = time.Second // SQS timestamps are whole milliseconds, from another clock
	for i, e := range entries {
		m, ok := byID[ids[i]]
		if !ok {
			s.t.Errorf("message %q (id %s) was not received", e.ID, ids[i])
			continue
		}
		if m.Body != e.Body {
			s.t.Errorf("message %q: body = %q, want %q", e.ID, m.Body, e.Body)
		}
		if diff := cmp.Diff(e.Attributes, m.Attributes, cmpopts.EquateEmpty()); diff != "" {
			s.t.Errorf("message %q: attributes (-sent +received):\n%s", e.ID, diff)
		}
		if m.ReceiveCount != 1 {
			s.t.Errorf("message %q: ReceiveCount = %d, want 1", e.ID, m.ReceiveCount)
		}
		if m.SentAt.Before(before.Add(-slack)) || m.SentAt.After(after.Add(slack)) {
			s.t.Errorf("message %q: SentAt = %v, want between %v and %v", e.ID, m.SentAt, before, after)
		}
		if m.FirstReceivedAt.Before(m.SentAt.Add(-slack)) || m.FirstReceivedAt.After(time.Now().Add(slack)) {
			s.t.Errorf("message %q: FirstReceivedAt = %v, want after SentAt %v and before now", e.ID, m.FirstReceivedAt, m.SentAt)
		}
	}
	s.deleteAll(q, got...)
	s.expectDepth(q, queue.Depth{})
}

func testReceiveMax(s *suite) {
	q := s.newQueue("max", queue.Spec{})
	var entries []queue.Entry
	for i := range 5 {
		entries = append(entries, queue.Entry{ID: fmt.Sprint("m", i), Body: fmt.Sprint("body ", i)})
	}
	s.send(q, entries...)
	first := s.receive(q, queue.ReceiveOptions{Max: 2, Wait: 2 * time.Second, Visibility: 30 * time.Second})
	if len(first) < 1 || len(first) > 2 {
		s.t.Fatalf("Receive with Max 2 returned %d messages, want 1 or 2", len(first))
	}
	rest := s.receiveN(q, 5-len(first), queue.ReceiveOptions{Visibility: 30 * time.Second}, 10*time.Second)
	seen := make(map[string]bool)
	for _, m := range append(first, rest...) {
		if seen[m.Body] {
			s.t.Errorf("message %q received twice within its visibility timeout", m.Body)
		}
		seen[m.Body] = true
	}
	s.expectEmpty(q, queue.ReceiveOptions{})
}

func testEmptyReceiveWaits(s *suite) {
	q := s.newQueue("empty", queue.Spec{})
	const wait = time.Second
	start := time.Now()
	s.expectEmpty(q, queue.ReceiveOptions{Wait: wait})
	if took := time.Since(start); took < wait-100*time.Millisecond || took > wait+3*time.Second {
		s.t.Errorf("empty Receive with Wait %v took %v", wait, took)
	}
	start = time.Now()
	s.expectEmpty(q, queue.ReceiveOptions{})
	if took := time.Since(start); took > 2*time.Second {
		s.t.Errorf("empty Receive without Wait took %v, want it to return at once", took)
	}
}

func testLongPollWakesOnSend(s *suite) {
	q := s.newQueue("wake", queue.Spec{})
	const wait = 4 * time.Second
	type result struct {
		msgs []queue.Message
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		msgs, err := s.b.Receive(s.ctx, q, queue.ReceiveOptions{Wait: wait})
		done <- result{msgs, err, time.Since(start)}
	}()
	// The pause only makes it likely that the send lands during the long
	// poll; if it lands before, the receive returns at once and the checks
	// below still hold.
	time.Sleep(300 * time.Millisecond)
	s.send(q, queue.Entry{ID: "a", Body: "wake up"})
	r := <-done
	if r.err != nil {
		s.t.Fatalf("Receive: %v", r.err)
	}
	if len(r.msgs) != 1 || r.msgs[0].Body != "wake up" {
		s.t.Fatalf("Receive returned %d messages, want the one sent during the wait", len(r.msgs))
	}
	if r.took > wait/2 {
		s.t.Errorf("long poll returned %v after it started, want well before its %v wait ends", r.took, wait)
	}
}

func testLongPollWakesWhenDelayEnds(s *suite) {
	q := s.newQueue("wakedelay", queue.Spec{})
	const delay, wait = time.Second, 4 * time.Second
	start := time.Now()
	s.send(q, queue.Entry{ID: "a", Body: "later", Delay: delay})
	msgs := s.receive(q, queue.ReceiveOptions{Wait: wait})
	took := time.Since(start)
	if len(msgs) != 1 {
		s.t.Fatalf("Receive returned %d messages, want the delayed one", len(msgs))
	}
	if took < delay-100*time.Millisecond || took > wait/2+delay/2 {
		s.t.Errorf("long poll returned the message %v after a send with delay %v, want soon after the delay", took, delay)
	}
}

func testVisibilityTimeoutRedelivers(s *suite) {
	q := s.newQueue("visibility", queue.Spec{VisibilityTimeout: time.Second})
	s.send(q, queue.Entry{ID: "a", Body: "again"})
	first := s.receiveOne(q, queue.ReceiveOptions{}, 5*time.Second)
	if first.ReceiveCount != 1 {
		s.t.Errorf("first receive: ReceiveCount = %d, want 1", first.ReceiveCount)
	}
	s.expectEmpty(q, queue.ReceiveOptions{})

	second := s.receiveOne(q, queue.ReceiveOptions{Wait: 4 * time.Second, Visibility: 30 * time.Second}, 5*time.Second)
	if second.ID != first.ID || second.Body != first.Body {
		s.t.Fatalf("redelivered %q (%s), want %q (%s)", second.Body, second.ID, first.Body, first.ID)
	}
	if second.ReceiveCount != 2 {
		s.t.Errorf("second receive: ReceiveCount = %d, want 2", second.ReceiveCount)
	}
	if !second.FirstReceivedAt.Equal(first.FirstReceivedAt) {
		s.t.Errorf("second receive: FirstReceivedAt = %v, want %v as on the first", second.FirstReceivedAt, first.FirstReceivedAt)
	}
	if second.ReceiptHandle == first.ReceiptHandle {
		s.t.Errorf("redelivery reused the receipt handle %q", first.ReceiptHandle)
	}

	// The handle of the first receive no longer refers to the message.
	if err := s.changeVisibility(q, first.ReceiptHandle, 0); !errors.Is(err, queue.ErrReceiptHandle) {
		s.t.Errorf("ChangeVisibility with the handle from before the redelivery: err = %v, want %v", err, queue.ErrReceiptHandle)
	}
	// Delete with it deletes nothing; SQS answers success, Strict backends
	// an error.
	for _, h := range []string{first.ReceiptHandle, "not-a-receipt-handle"} {
		errs, err := s.b.Delete(s.ctx, q, []string{h})
		if err != nil {
			s.t.Fatalf("Delete: %v", err)
		}
		if s.opts.Strict && !errors.Is(errs[0], queue.ErrReceiptHandle) {
			s.t.Errorf("Delete with handle %q that is not the latest: err = %v, want %v", h, errs[0], queue.ErrReceiptHandle)
		}
	}
	s.expectDepth(q, queue.Depth{NotVisible: 1})
	s.deleteAll(q, second)
	s.expectDepth(q, queue.Depth{})
}

func testChangeVisibilityToZero(s *suite) {
	q := s.newQueue("cvzero", queue.Spec{})
	s.send(q, queue.Entry{ID: "a", Body: "back"})
	first := s.receiveOne(q, queue.ReceiveOptions{Visibility: 30 * time.Second}, 5*time.Second)
	if err := s.changeVisibility(q, first.ReceiptHandle, 0); err != nil {
		s.t.Fatalf("ChangeVisibility to 0: %v", err)
	}
	start := time.Now()
	second := s.receiveOne(q, queue.ReceiveOptions{Wait: 4 * time.Second, Visibility: 30 * time.Second}, 5*time.Second)
	if took := time.Since(start); took > 2*time.Second {
		s.t.Errorf("message came back %v after ChangeVisibility to 0, want at once", took)
	}
	if second.ID != first.ID || second.ReceiveCount != 2 {
		s.t.Errorf("received %s with ReceiveCount %d, want %s with 2", second.ID, second.ReceiveCount, first.ID)
	}
	s.deleteAll(q, second)
}

func testChangeVisibilityExtends(s *suite) {
	q := s.newQueue("cvextend", queue.Spec{})
	s.send(q, queue.Entry{ID: "a", Body: "slow job"})
	first := s.receiveOne(q, queue.ReceiveOptions{Visibility: time.Second}, 5*time.Second)
	extended := time.Now()
	if err := s.changeVisibility(q, first.ReceiptHandle, 3*time.Second); err != nil {
		s.t.Fatalf("ChangeVisibility to 3s: %v", err)
	}
	s.expectEmpty(q, queue.ReceiveOptions{Wait: 2 * time.Second})
	second := s.receiveOne(q, queue.ReceiveOptions{Wait: 4 * time.Second, Visibility: 30 * time.Second}, 5*time.Second)
	if took := time.Since(extended); took < 3*time.Second-100*time.Millisecond {
		s.t.Errorf("message came back %v after its visibility was extended to 3s", took)
	}
	if second.ID != first.ID || second.ReceiveCount != 2 {
		s.t.Errorf("received %s with ReceiveCount %d, want %s with 2", second.ID, second.ReceiveCount, first.ID)
	}
	s.deleteAll(q, second)
}

func testDeleteIsForGood(s *suite) {
	q := s.newQueue("delete", queue.Spec{})
	s.send(q, queue.Entry{ID: "a", Body: "done"}, queue.Entry{ID: "b", Body: "kept"})
	got := s.receiveN(q, 2, queue.ReceiveOptions{Visibility: time.Second}, 5*time.Second)
	for _, m := range got {
		if m.Body == "done" {
			s.deleteAll(q, m)
		}
	}
	// Once the visibility timeout has passed, only the undeleted one returns.
	back := s.receiveOne(q, queue.ReceiveOptions{Wait: 3 * time.Second, Visibility: 30 * time.Second}, 5*time.Second)
	if back.Body != "kept" {
		s.t.Errorf("after the visibility timeout received %q, want %q", back.Body, "kept")
	}
	s.expectEmpty(q, queue.ReceiveOptions{Wait: time.Second})
	s.expectDepth(q, queue.Depth{NotVisible: 1})
}

func testMessageDelay(s *suite) {
	q := s.newQueue("delay", queue.Spec{})
	start := time.Now()
	s.send(q, queue.Entry{ID: "a", Body: "delayed", Delay: time.Second}, queue.Entry{ID: "b", Body: "now"})
	now := s.receiveOne(q, queue.ReceiveOptions{Wait: time.Second, Visibility: 30 * time.Second}, 5*time.Second)
	if now.Body != "now" {
		s.t.Fatalf("first receive got %q, want the undelayed message", now.Body)
	}
	if time.Since(start) < 900*time.Millisecond {
		s.expectDepth(q, queue.Depth{NotVisible: 1, Delayed: 1})
	}
	later := s.receiveOne(q, queue.ReceiveOptions{Wait: 3 * time.Second}, 5*time.Second)
	if took := time.Since(start); later.Body != "delayed" || took < 900*time.Millisecond {
		s.t.Errorf("received %q %v after the send, want %q after its 1s delay", later.Body, took, "delayed")
	}
}

func testQueueDelay(s *suite) {
	q := s.newQueue("qdelay", queue.Spec{Delay: time.Second})
	start := time.Now()
	s.send(q, queue.Entry{ID: "a", Body: "delayed by the queue"})
	s.expectEmpty(q, queue.ReceiveOptions{})
	m := s.receiveOne(q, queue.ReceiveOptions{Wait: 3 * time.Second}, 5*time.Second)
	if took := time.Since(start); took < 900*time.Millisecond {
		s.t.Errorf("received %q %v after the send, want after the queue's 1s delay", m.Body, took)
	}
}

func testBatchLimits(s *suite) {
	q := s.newQueue("limits", queue.Spec{})
	eleven := make([]queue.Entry, queue.MaxBatch+1)
	handles := make([]string, queue.MaxBatch+1)
	changes := make([]queue.VisibilityChange, queue.MaxBatch+1)
	for i := range eleven {
		eleven[i] = queue.Entry{ID: fmt.Sprint("e", i), Body: "x"}
		handles[i] = fmt.Sprint("handle-", i)
		changes[i] = queue.VisibilityChange{ReceiptHandle: handles[i]}
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"Send 11", func() error { _, err := s.b.Send(s.ctx, q, eleven); return err }, queue.ErrTooManyEntries},
		{"Send 0", func() error { _, err := s.b.Send(s.ctx, q, nil); return err }, queue.ErrEmptyBatch},
		{"Delete 11", func() error { _, err := s.b.Delete(s.ctx, q, handles); return err }, queue.ErrTooManyEntries},
		{"Delete 0", func() error { _, err := s.b.Delete(s.ctx, q, nil); return err }, queue.ErrEmptyBatch},
		{"ChangeVisibility 11", func() error { _, err := s.b.ChangeVisibility(s.ctx, q, changes); return err }, queue.ErrTooManyEntries},
		{"ChangeVisibility 0", func() error { _, err := s.b.ChangeVisibility(s.ctx, q, nil); return err }, queue.ErrEmptyBatch},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			s.t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := s.b.Receive(s.ctx, q, queue.ReceiveOptions{Max: queue.MaxBatch + 1}); err == nil {
		s.t.Errorf("Receive with Max %d succeeded, want an error", queue.MaxBatch+1)
	}
	s.expectDepth(q, queue.Depth{})
}

func testOversizedEntryFailsAlone(s *suite) {
	const limit = 1024
	q := s.newQueue("size", queue.Spec{MaxMessageSize: limit})
	attrs := map[string]string{"k": strings.Repeat("v", 20)}
	entries := []queue.Entry{
		{ID: "small", Body: "fits"},
		{ID: "body", Body: strings.Repeat("b", limit+1)},
		{ID: "attrs", Body: strings.Repeat("a", limit-20), Attributes: attrs}, // the attribute tips it over
		{ID: "exact", Body: strings.Repeat("x", limit)},
	}
	res, err := s.b.Send(s.ctx, q, entries)
	if err != nil {
		s.t.Fatalf("Send: %v", err)
	}
	if len(res) != len(entries) {
		s.t.Fatalf("Send returned %d results for %d entries", len(res), len(entries))
	}
	for i, wantErr := range []error{nil, queue.ErrTooLarge, queue.ErrTooLarge, nil} {
		r := res[i]
		if r.ID != entries[i].ID {
			s.t.Errorf("result %d: ID = %q, want %q", i, r.ID, entries[i].ID)
		}
		switch {
		case wantErr == nil && (r.Err != nil || r.MessageID == ""):
			s.t.Errorf("entry %q: %+v, want it sent", r.ID, r)
		case wantErr != nil && (!errors.Is(r.Err, wantErr) || r.MessageID != ""):
			s.t.Errorf("entry %q: %+v, want err %v and no message id", r.ID, r, wantErr)
		}
	}
	got := s.receiveN(q, 2, queue.ReceiveOptions{Visibility: 30 * time.Second}, 5*time.Second)
	bodies := map[string]bool{got[0].Body: true, got[1].Body: true}
	if !bodies[entries[0].Body] || !bodies[entries[3].Body] {
		s.t.Errorf("received other messages than the two that fit")
	}
}

func testTooManyAttributes(s *suite) {
	q := s.newQueue("attrs", queue.Spec{})
	many := make(map[string]string)
	for i := range queue.MaxAttributes + 1 {
		many[fmt.Sprint("a", i)] = "v"
	}
	ten := make(map[string]string)
	for i := range queue.MaxAttributes {
		ten[fmt.Sprint("a", i)] = "v"
	}
	res, err := s.b.Send(s.ctx, q, []queue.Entry{
		{ID: "many", Body: "x", Attributes: many},
		{ID: "ten", Body: "y", Attributes: ten},
	})
	if err != nil {
		s.t.Fatalf("Send: %v", err)
	}
	if !errors.Is(res[0].Err, queue.ErrInvalidEntry) {
		s.t.Errorf("entry with %d attributes: err = %v, want %v", len(many), res[0].Err, queue.ErrInvalidEntry)
	}
	if res[1].Err != nil {
		s.t.Errorf("entry with %d attributes: err = %v, want it sent", len(ten), res[1].Err)
	}
	m := s.receiveOne(q, queue.ReceiveOptions{}, 5*time.Second)
	if diff := cmp.Diff(ten, m.Attributes); diff != "" {
		s.t.Errorf("attributes (-sent +received):\n%s", diff)
	}
}

func testDepth(s *suite) {
	q := s.newQueue("depth", queue.Spec{})
	s.expectDepth(q, queue.Depth{})
	s.send(q,
		queue.Entry{ID: "a", Body: "1"},
		queue.Entry{ID: "b", Body: "2"},
		queue.Entry{ID: "c", Body: "3"},
		queue.Entry{ID: "d", Body: "4", Delay: time.Minute},
	)
	s.receiveOne(q, queue.ReceiveOptions{Visibility: time.Minute}, 5*time.Second)
	s.expectDepth(q, queue.Depth{Visible: 2, NotVisible: 1, Delayed: 1})
}

func testRedrive(s *suite) {
	const maxReceives = 2
	dlq := s.newQueue("dlq", queue.Spec{})
	q := s.newQueue("src", queue.Spec{DeadLetter: dlq, MaxReceiveCount: maxReceives})
	attrs := map[string]string{"fairq-tenant": "acme", "fairq-meta": `{"a":1}`}
	id := s.send(q, queue.Entry{ID: "a", Body: "poison", Attributes: attrs})[0]

	for i := 1; i <= maxReceives; i++ {
		m := s.receiveOne(q, queue.ReceiveOptions{Visibility: 30 * time.Second}, 5*time.Second)
		if m.ReceiveCount != i {
			s.t.Errorf("receive %d: ReceiveCount = %d", i, m.ReceiveCount)
		}
		if err := s.changeVisibility(q, m.ReceiptHandle, 0); err != nil {
			s.t.Fatalf("ChangeVisibility to 0: %v", err)
		}
	}
	// The next receive moves it to the dead-letter queue instead.
	s.expectEmpty(q, queue.ReceiveOptions{Wait: time.Second})
	dead := s.receiveOne(dlq, queue.ReceiveOptions{Visibility: 30 * time.Second}, 5*time.Second)
	if dead.ID != id || dead.Body != "poison" {
		s.t.Errorf("dead-letter queue holds %q (%s), want %q (%s)", dead.Body, dead.ID, "poison", id)
	}
	if diff := cmp.Diff(attrs, dead.Attributes); diff != "" {
		s.t.Errorf("dead-lettered attributes (-sent +received):\n%s", diff)
	}
	if s.opts.Strict && dead.ReceiveCount != 1 {
		s.t.Errorf("dead-lettered message: ReceiveCount = %d, want 1 (counting restarts on a move)", dead.ReceiveCount)
	}
	s.expectDepth(q, queue.Depth{})
	s.expectDepth(dlq, queue.Depth{NotVisible: 1})
}

func testCancelEndsLongPoll(s *suite) {
	q := s.newQueue("cancel", queue.Spec{})
	ctx, cancel := context.WithCancel(s.ctx)
	stop := time.AfterFunc(200*time.Millisecond, cancel)
	defer stop.Stop()
	defer cancel()
	start := time.Now()
	msgs, err := s.b.Receive(ctx, q, queue.ReceiveOptions{Wait: 10 * time.Second})
	if took := time.Since(start); took > 3*time.Second {
		s.t.Errorf("long poll returned %v after it started, want soon after the cancel at 200ms", took)
	}
	if !errors.Is(err, context.Canceled) || len(msgs) != 0 {
		s.t.Errorf("cancelled Receive = %d messages, err %v; want none and %v", len(msgs), err, context.Canceled)
	}

	if _, err := s.b.Send(ctx, q, []queue.Entry{{ID: "a", Body: "x"}}); !errors.Is(err, context.Canceled) {
		s.t.Errorf("Send with a cancelled context: err = %v, want %v", err, context.Canceled)
	}
}

func testConcurrentReceivers(s *suite) {
	const receivers, batches = 3, 3
	q := s.newQueue("concurrent", queue.Spec{})
	want := make(map[string]bool)
	for b := range batches {
		entries := make([]queue.Entry, queue.MaxBatch)
		for i := range entries {
			entries[i] = queue.Entry{ID: fmt.Sprint("e", i), Body: fmt.Sprint("batch ", b, " message ", i)}
			want[entries[i].Body] = true
		}
		s.send(q, entries...)
	}

	var (
		mu   sync.Mutex
		seen = make(map[string]int)
		errs []error
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(10 * time.Second)
	for range receivers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				mu.Lock()
				finished := len(seen) == len(want) || len(errs) > 0
				mu.Unlock()
				if finished {
					return
				}
				msgs, err := s.b.Receive(s.ctx, q, queue.ReceiveOptions{Wait: time.Second, Visibility: time.Minute})
				if err == nil && len(msgs) > 0 {
					var handles []string
					for _, m := range msgs {
						handles = append(handles, m.ReceiptHandle)
					}
					_, err = s.b.Delete(s.ctx, q, handles)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, m := range msgs {
					seen[m.Body]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		s.t.Fatalf("receivers failed: %v", errs)
	}
	for body := range want {
		if n := seen[body]; n != 1 {
			s.t.Errorf("%q received %d times, want once", body, n)
		}
	}
	s.expectDepth(q, queue.Depth{})
}

// testGroupIDs: entries in a group and in none are sent and received
// alike, with the group given back where the backend keeps it; a group id
// SQS would refuse fails its entry alone, before any request.
func testGroupIDs(s *suite) {
	q := s.newQueue("groups", queue.Spec{})
	res, err := s.b.Send(s.ctx, q, []queue.Entry{
		{ID: "acme", Body: "a", GroupID: "acme"},
		{ID: "none", Body: "n"},
		{ID: "punct", Body: "p", GroupID: "t.e-n_a:n/t~1"},
		{ID: "space", Body: "s", GroupID: "two words"},
		{ID: "long", Body: "l", GroupID: strings.Repeat("g", queue.MaxGroupID+1)},
	})
	if err != nil {
		s.t.Fatalf("Send: %v", err)
	}
	for i, wantErr := range []error{nil, nil, nil, queue.ErrInvalidEntry, queue.ErrInvalidEntry} {
		if r := res[i]; !errors.Is(r.Err, wantErr) || (wantErr == nil) != (r.MessageID != "") {
			s.t.Errorf("entry %q: %+v, want err %v", r.ID, r, wantErr)
		}
	}
	got := make(map[string]string)
	for _, m := range s.receiveN(q, 3, queue.ReceiveOptions{Visibility: 30 * time.Second}, 5*time.Second) {
		got[m.Body] = m.GroupID
	}
	want := map[string]string{"a": "acme", "n": "", "p": "t.e-n_a:n/t~1"}
	if !s.opts.Strict {
		for body := range want {
			if got[body] == "" {
				want[body] = ""
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		s.t.Errorf("group id by body (-sent +received):\n%s", diff)
	}
}
