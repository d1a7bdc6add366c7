package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
)

// Kinds names the backends the tests of the worker and its tools run on:
// the in-memory backend and the SQS emulator.
var Kinds = []string{"memory", "sqs"}

// Pool returns a backend of the kind with the queues of a small pool (two
// live queues) created, each work queue redriving to the dead-letter queue
// far above any worker's max_retries. The SQS kind is the fauxqs emulator
// (skipped when it is not installed, unless FAIRQ_REQUIRE_SERVICES=1),
// with a fresh queue prefix.
func Pool(t testing.TB, kind string) (queue.Backend, queue.Names) {
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
	CreatePool(t, b, names)
	return b, names
}

// CreatePool creates the queues of names on b, the dead-letter queue
// first, each work queue redriving to it far above any worker's
// max_retries.
func CreatePool(t testing.TB, b queue.Backend, names queue.Names) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names.All() {
		spec := queue.Spec{Name: name, VisibilityTimeout: 30 * time.Second}
		if name != names.DLQ {
			spec.DeadLetter, spec.MaxReceiveCount = names.DLQ, 100
		}
		if _, err := b.Create(ctx, spec); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
}

// Msg is a message for Put.
type Msg struct {
	Body   string // "{}" when empty
	Tenant string
	Meta   *envelope.Meta
	Attrs  map[string]string
	Delay  time.Duration
}

// Sender sends messages; queue.Backend is one.
type Sender interface {
	Send(ctx context.Context, queue string, entries []queue.Entry) ([]queue.SendResult, error)
}

// Put sends one message to queue q as the gateway would (its tenant and
// fairq-meta as attributes) and returns its SQS message id.
func Put(t testing.TB, b Sender, q string, m Msg) string {
	t.Helper()
	attrs := make(map[string]string, len(m.Attrs)+2)
	for k, v := range m.Attrs {
		attrs[k] = v
	}
	if m.Tenant != "" {
		attrs[envelope.AttrTenant] = m.Tenant
	}
	if m.Meta != nil {
		attrs[envelope.AttrMeta] = m.Meta.Encode()
	}
	body := m.Body
	if body == "" {
		body = "{}"
	}
	res, err := b.Send(context.Background(), q, []queue.Entry{{ID: "1", Body: body, Attributes: attrs, Delay: m.Delay}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("send to %s: %v", q, err)
	}
	return res[0].MessageID
}
