package consumer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/envelope"
)

// seenMessage is what a handler saw of a delivery.
type seenMessage struct {
	id, queue, key string
	first          time.Time
	count          int
}

// TestIdentityAcrossMoves: a message spilled to overflow, moved to the
// backlog, sent back after a Retry-After and redriven from the
// dead-letter queue reaches the handler with the id the gateway answered,
// the time it was first received and the caller's Idempotency-Key, every
// time; a message fairq did not enqueue keeps its queue's id across a
// move.
func TestIdentityAcrossMoves(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) { testIdentityAcrossMoves(t, kind) })
		})
	}
}

func testIdentityAcrossMoves(t *testing.T, kind string) {
	b, names := setup(t, kind)
	now := time.Now()
	meta := envelope.Meta{EnqueuedAt: now.UnixMilli(), ID: "0190b3c4-7a1e-7c3d-9f00-5a6b7c8d9e0f", IdempotencyKey: "order-42"}
	send(t, b, names.Live[0], msg{tenant: "acme", meta: &meta})
	foreign := send(t, b, names.Live[1], msg{body: "from elsewhere"})

	// The limiter spills each message once, to overflow, then to the
	// backlog; the handler asks the fairq message to come back later,
	// then fails it for good (one retry: the dead-letter queue).
	limiter := spillTwice(t)
	seen := make(chan seenMessage, 100)
	h := retryThenFail(meta.ID, seen)
	w := start(t, consumer.Config{Backend: b, Names: names, Handler: h, Limiter: limiter, MaxRetries: 1})
	var fairq []seenMessage
	for foreignSeen := false; len(fairq) < 2 || !foreignSeen; {
		m := recv(t, seen, time.Minute, "delivery")
		if m.id == meta.ID {
			fairq = append(fairq, m)
			continue
		}
		foreignSeen = true
		if m.id != foreign || m.key != "" || m.queue != names.Backlog {
			t.Errorf("a message fairq did not enqueue, after two moves: %+v, want id %s from %s", m, foreign, names.Backlog)
		}
	}
	stop(t, w) // the dead letter is sent before it returns

	// Redrive it, then deliver it once more.
	dq, err := deadletter.New(deadletter.Config{Backend: b, Names: names, Picker: firstQueue{}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := dq.Redrive(context.Background(), deadletter.Selection{}); err != nil || res.Moved != 1 {
		t.Fatalf("Redrive = %+v, %v; want the one dead letter moved", res, err)
	}
	w = start(t, consumer.Config{Backend: b, Names: names, Handler: h})
	fairq = append(fairq, recv(t, seen, time.Minute, "redriven delivery"))
	stop(t, w)

	for i, m := range fairq {
		if m.id != meta.ID || m.key != "order-42" {
			t.Errorf("delivery %d: id %q, Idempotency-Key %q; want %q, order-42", i+1, m.id, m.key, meta.ID)
		}
		if !m.first.Equal(fairq[0].first) || m.first.IsZero() {
			t.Errorf("delivery %d: first received %v, want the first delivery's %v", i+1, m.first, fairq[0].first)
		}
	}
	if fairq[0].queue != names.Backlog || fairq[1].queue != names.Backlog {
		t.Errorf("first deliveries from %s and %s, want both from the backlog queue", fairq[0].queue, fairq[1].queue)
	}
}

// spillTwice is a limiter that spills each message to overflow, then to
// the backlog, then lets it run. A message's first copy must not be
// Moved, and the copies moved since must be.
func spillTwice(t *testing.T) limiterFunc {
	var mu sync.Mutex
	verdicts := map[string]int{}
	return limiterFunc(func(_ context.Context, m *consumer.Message) (consumer.Verdict, error) {
		mu.Lock()
		defer mu.Unlock()
		verdicts[m.ID]++
		if first := verdicts[m.ID] == 1; m.Moved == first {
			t.Errorf("message %s, verdict %d: Moved %v, want %v", m.ID, verdicts[m.ID], m.Moved, !first)
		}
		switch verdicts[m.ID] {
		case 1:
			return consumer.Verdict{Action: consumer.Spill, Reason: "rate"}, nil
		case 2:
			return consumer.Verdict{Action: consumer.ToBacklog, Reason: "aged"}, nil
		}
		return consumer.Verdict{}, nil
	})
}

// retryThenFail is a handler that tells seen of every delivery and asks
// message id to come back later, then fails it, then succeeds.
func retryThenFail(id string, seen chan<- seenMessage) consumer.Handler {
	var mu sync.Mutex
	deliveries := 0
	return consumer.HandlerFunc(func(_ context.Context, m *consumer.Message) error {
		seen <- seenMessage{m.ID, m.Queue, m.IdempotencyKey, m.FirstReceivedAt, m.ReceiveCount}
		if m.ID != id {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		switch deliveries++; deliveries {
		case 1:
			return &consumer.RetryAfterError{After: time.Second}
		case 2:
			return errBoom
		}
		return nil
	})
}

// firstQueue picks the first live queue for every tenant.
type firstQueue struct{}

func (firstQueue) Pick(string) int { return 0 }
