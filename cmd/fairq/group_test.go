package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
)

// TestOpenBackendGroups: sqs.message_group_id: tenant gives every role a
// backend that sends each message in its tenant's group; unset, none.
func TestOpenBackendGroups(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		value, want string
	}{
		{config.MessageGroupTenant, "acme"},
		{config.MessageGroupNone, ""},
	} {
		t.Run(fmt.Sprintf("%q", tt.value), func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.SQS.MessageGroupID = tt.value
			b, err := openBackend(t.Context(), cfg, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Create(t.Context(), queue.Spec{Name: "q"}); err != nil {
				t.Fatal(err)
			}
			entry := queue.Entry{ID: "1", Body: "x", Attributes: map[string]string{envelope.AttrTenant: "acme"}}
			if res, err := b.Send(t.Context(), "q", []queue.Entry{entry}); err != nil || res[0].Err != nil {
				t.Fatalf("Send = %+v, %v", res, err)
			}
			msgs, err := b.Receive(t.Context(), "q", queue.ReceiveOptions{})
			if err != nil || len(msgs) != 1 {
				t.Fatalf("Receive = %d messages, %v", len(msgs), err)
			}
			if msgs[0].GroupID != tt.want {
				t.Errorf("group = %q, want %q", msgs[0].GroupID, tt.want)
			}
		})
	}
}

// TestDevGroupsByTenant runs `fairq dev` with sqs.message_group_id: tenant:
// a message enqueued over HTTP for acme, failed by the application and
// dead-lettered by the worker, lies in the dead-letter queue in group acme.
func TestDevGroupsByTenant(t *testing.T) {
	const key = "fq_group_test_key"
	url, pushes := app(t, func(int) int { return http.StatusInternalServerError })
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
sqs: {message_group_id: tenant}
tenants:
  - id: acme
    api_keys: [%q]
worker:
  push_url: %q
  max_retries: 1
`, tenant.HashKey(key), url)
	s, base, _ := startDev(t, yaml, devOptions{pushURL: url}, nil)
	enqueue(t, base, key, `{"body": "fails"}`)
	next(t, pushes, 20*time.Second)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		msgs, err := s.backend.Receive(ctx, s.names.DLQ, queue.ReceiveOptions{Wait: time.Second})
		if err != nil {
			t.Fatalf("no dead letter: %v", err)
		}
		if len(msgs) == 0 {
			continue
		}
		if got := msgs[0].GroupID; got != "acme" {
			t.Errorf("dead letter's group = %q, want acme", got)
		}
		return
	}
}
