package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/testenv"
)

// TestBacklogHungDoesNotHoldAccepts: with the backlog counts behind a
// Redis that does not answer, a message SQS took is still answered 202
// within a short bound.
func TestBacklogHungDoesNotHoldAccepts(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: testenv.Blackhole(t), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	counter, err := backlog.New(backlog.Config{Redis: client, Prefix: "hung:"})
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t, func(c *gateway.Config) {
		c.Backlog = tracker(t, backlog.TrackerConfig{Counter: counter, CallTimeout: 500 * time.Millisecond})
	})
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
	if got := f.depth(t); got != 3 {
		t.Errorf("%d messages on the queues, want 3", got)
	}
}
