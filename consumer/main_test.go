package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.VerifyNoLeaks()) }

// backends names the backends a test runs on.
var backends = []string{"memory", "sqs"}

// setup returns a backend of the kind with the queues of a small pool
// (two live queues) created, dead-letter queue first. The SQS kind is the
// fauxqs emulator (skipped when it is not installed, unless
// FAIRQ_REQUIRE_SERVICES=1).
func setup(t testing.TB, kind string) (queue.Backend, queue.Names) {
	t.Helper()
	var b queue.Backend
	prefix := "t"
	switch kind {
	case "memory":
		b = queue.NewMemory(queue.MemoryConfig{})
	case "sqs":
		b = testenv.SQSBackend(t)
		prefix = testenv.Prefix(t)
	default:
		t.Fatalf("unknown backend %q", kind)
	}
	names := queue.PoolNames(prefix, 2)
	createQueues(t, b, names)
	return b, names
}

func createQueues(t testing.TB, b queue.Backend, names queue.Names) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names.All() {
		spec := queue.Spec{Name: name, VisibilityTimeout: 30 * time.Second}
		if name != names.DLQ {
			// Far above MaxRetries: the worker dead-letters first.
			spec.DeadLetter, spec.MaxReceiveCount = names.DLQ, 100
		}
		if _, err := b.Create(ctx, spec); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
}

// msg is a message to send.
type msg struct {
	body   string
	tenant string
	meta   *envelope.Meta
	attrs  map[string]string
	delay  time.Duration
}

// send sends one message and returns its id.
func send(t testing.TB, b consumer.Backend, q string, m msg) string {
	t.Helper()
	attrs := make(map[string]string, len(m.attrs)+2)
	for k, v := range m.attrs {
		attrs[k] = v
	}
	if m.tenant != "" {
		attrs[envelope.AttrTenant] = m.tenant
	}
	if m.meta != nil {
		attrs[envelope.AttrMeta] = m.meta.Encode()
	}
	body := m.body
	if body == "" {
		body = "{}"
	}
	res, err := b.Send(context.Background(), q, []queue.Entry{{ID: "1", Body: body, Attributes: attrs, Delay: m.delay}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("send to %s: %v", q, err)
	}
	return res[0].MessageID
}

// start starts a worker and stops it (gracefully, 10 s) when the test ends.
func start(t testing.TB, cfg consumer.Config) *consumer.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = discard
	}
	if cfg.ReceiveWait == 0 {
		// A stopping worker lets its receives finish: short long polls
		// keep the tests' stops short.
		cfg.ReceiveWait = time.Second
	}
	w, err := consumer.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stop(t, w) })
	return w
}

func stop(t testing.TB, w *consumer.Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

var discard = slog.New(slog.DiscardHandler)

// depth returns the visible plus in-flight plus delayed messages of q.
func depth(t testing.TB, b queue.Backend, q string) int {
	t.Helper()
	d, err := b.Depth(context.Background(), q)
	if err != nil {
		t.Fatalf("depth of %s: %v", q, err)
	}
	return d.Visible + d.NotVisible + d.Delayed
}

// recv waits for a value on ch for up to d (real time; in a synctest
// bubble, fake time).
func recv[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("no %s within %v", what, d)
		panic("unreachable")
	}
}

// errBoom is a handler failure.
var errBoom = errors.New("boom")

// drainReader reads a body fully.
func drainReader(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}
