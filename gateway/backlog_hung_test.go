package gateway_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairq/fairq/gateway"
)

// hungBacklog is a backlog counter behind a partitioned Redis: Add waits
// until its context ends.
type hungBacklog struct{ adds atomic.Int64 }

func (h *hungBacklog) Add(ctx context.Context, _ string, _ int64) error {
	h.adds.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

func (h *hungBacklog) Get(context.Context, string) (int64, error) { return 0, nil }

// TestBacklogHungDoesNotHoldAccepts: with the backlog counter hanging, a
// message SQS took is still answered 202 within a short bound, and while
// Redis rests after the failure the counter is not asked again.
func TestBacklogHungDoesNotHoldAccepts(t *testing.T) {
	hb := &hungBacklog{}
	f := setup(t, func(c *gateway.Config) { c.Backlog = hb })
	for i := range 3 {
		start := time.Now()
		w := f.do(t, request{method: http.MethodPost, path: "/v1/messages", key: acmeKey, body: `{"body":"x"}`})
		if w.Code != http.StatusAccepted {
			t.Fatalf("enqueue %d: %d %s", i, w.Code, w.Body)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("enqueue %d took %v with the backlog counter hung", i, took)
		}
	}
	if n := hb.adds.Load(); n != 1 {
		t.Errorf("backlog counter asked %d times, want once: it rests after failing", n)
	}
	if got := f.depth(t); got != 3 {
		t.Errorf("%d messages on the queues, want 3", got)
	}
}
