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
	"github.com/fairq/fairq/queue/queuetest"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.VerifyNoLeaks()) }

// backends names the backends a test runs on.
var backends = queuetest.Kinds

// setup returns a backend of the kind with the queues of a small pool.
func setup(t testing.TB, kind string) (queue.Backend, queue.Names) {
	t.Helper()
	return queuetest.Pool(t, kind)
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
	return queuetest.Put(t, b, q, queuetest.Msg{Body: m.body, Tenant: m.tenant, Meta: m.meta, Attrs: m.attrs, Delay: m.delay})
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
