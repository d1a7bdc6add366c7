package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/queue"
)

// wire records the body of every SendMessageBatch request the SDK
// serialised, as it goes on the wire.
type wire struct {
	mu     sync.Mutex
	bodies [][]byte
}

// middleware is a Build step, after the operation's serializer: it reads
// the request's body and rewinds it for the transport.
func (w *wire) middleware(stack *middleware.Stack) error {
	return stack.Build.Add(middleware.BuildMiddlewareFunc("recordSendMessageBatch",
		func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
			req, ok := in.Request.(*smithyhttp.Request)
			if ok && middleware.GetOperationName(ctx) == "SendMessageBatch" {
				body, err := io.ReadAll(req.GetStream())
				if err != nil {
					return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("record request: %w", err)
				}
				if err := req.RewindStream(); err != nil {
					return middleware.BuildOutput{}, middleware.Metadata{}, fmt.Errorf("rewind request: %w", err)
				}
				w.mu.Lock()
				w.bodies = append(w.bodies, bytes.Clone(body))
				w.mu.Unlock()
			}
			return next.HandleBuild(ctx, in)
		}), middleware.After)
}

// groups returns the MessageGroupId of each entry of each request, by
// entry id; an entry sent without one maps to "-".
func (w *wire) groups(t *testing.T) []map[string]string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]string
	for _, b := range w.bodies {
		var req struct {
			Entries []struct {
				Id             string
				MessageGroupId *string
			}
		}
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("request body %s: %v", b, err)
		}
		got := make(map[string]string)
		for _, e := range req.Entries {
			got[e.Id] = "-"
			if e.MessageGroupId != nil {
				got[e.Id] = *e.MessageGroupId
			}
		}
		out = append(out, got)
	}
	return out
}

// tenantEntries are three messages of two tenants and one of none.
func tenantEntries() []queue.Entry {
	return []queue.Entry{
		{ID: "a1", Body: "1", Attributes: map[string]string{"fairq-tenant": "acme"}},
		{ID: "g1", Body: "2", Attributes: map[string]string{"fairq-tenant": "globex"}},
		{ID: "a2", Body: "3", Attributes: map[string]string{"fairq-tenant": "acme", "kind": "x"}},
		{ID: "none", Body: "4", Attributes: map[string]string{"kind": "cron"}},
	}
}

// TestSQSSendsMessageGroupId: through Grouped, each entry of the
// SendMessageBatch request the SDK puts on the wire carries its tenant as
// MessageGroupId, and one without a tenant carries none; without Grouped
// (the option off) no entry carries one. The emulator accepts the groups
// on a standard queue without keeping them, so the request is where they
// are seen.
func TestSQSSendsMessageGroupId(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		grouped bool
		want    map[string]string
	}{
		{"tenant", true, map[string]string{"a1": "acme", "g1": "globex", "a2": "acme", "none": "-"}},
		{"off", false, map[string]string{"a1": "-", "g1": "-", "a2": "-", "none": "-"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _, prefix := sqsSetup(t)
			w := &wire{}
			queue.AddSQSMiddleware(s, w.middleware)
			var b queue.Backend = s
			if tt.grouped {
				b = queue.NewGrouped(s, "fairq-tenant")
			}
			q := prefix + "-live-00"
			if _, err := b.Create(t.Context(), queue.Spec{Name: q}); err != nil {
				t.Fatal(err)
			}
			entries := tenantEntries()
			res, err := b.Send(t.Context(), q, entries)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			for _, r := range res {
				if r.Err != nil {
					t.Errorf("entry %s: %v", r.ID, r.Err)
				}
			}
			if diff := cmp.Diff([]map[string]string{tt.want}, w.groups(t)); diff != "" {
				t.Errorf("MessageGroupId by entry, per request (-want +got):\n%s", diff)
			}
			for _, e := range entries {
				if e.GroupID != "" {
					t.Errorf("Send changed the caller's entry %s: GroupID %q", e.ID, e.GroupID)
				}
			}
			msgs, err := s.Receive(t.Context(), q, queue.ReceiveOptions{Max: 10, Wait: time.Second})
			if err != nil || len(msgs) == 0 {
				t.Fatalf("Receive = %d messages, %v; want the messages sent", len(msgs), err)
			}
		})
	}
}

// TestMemoryKeepsGroupId: the memory backend keeps the group Grouped gave
// each message and gives it back on receive, after a redrive to the
// dead-letter queue too; without Grouped, messages have none.
func TestMemoryKeepsGroupId(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		grouped bool
		want    map[string]string
	}{
		{"tenant", true, map[string]string{"1": "acme", "2": "globex", "3": "acme", "4": ""}},
		{"off", false, map[string]string{"1": "", "2": "", "3": "", "4": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := queue.NewMemory(queue.MemoryConfig{})
			ctx := t.Context()
			if _, err := m.Create(ctx, queue.Spec{Name: "dlq"}); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Create(ctx, queue.Spec{Name: "q", DeadLetter: "dlq", MaxReceiveCount: 1}); err != nil {
				t.Fatal(err)
			}
			var b queue.Backend = m
			if tt.grouped {
				b = queue.NewGrouped(m, "fairq-tenant")
			}
			if _, err := b.Send(ctx, "q", tenantEntries()); err != nil {
				t.Fatal(err)
			}
			byBody := func(msgs []queue.Message) map[string]string {
				got := make(map[string]string)
				for _, msg := range msgs {
					got[msg.Body] = msg.GroupID
				}
				return got
			}
			// Received once and given back: the next receive moves them
			// to the dead-letter queue.
			msgs := mustReceive(t, m, "q", queue.ReceiveOptions{Max: 10})
			if diff := cmp.Diff(tt.want, byBody(msgs)); diff != "" {
				t.Errorf("group id by body (-want +got):\n%s", diff)
			}
			var back []queue.VisibilityChange
			for _, msg := range msgs {
				back = append(back, queue.VisibilityChange{ReceiptHandle: msg.ReceiptHandle})
			}
			if errs, err := m.ChangeVisibility(ctx, "q", back); err != nil || errors.Join(errs...) != nil {
				t.Fatalf("ChangeVisibility = %v, %v", errs, err)
			}
			if again := mustReceive(t, m, "q", queue.ReceiveOptions{Max: 10}); len(again) != 0 {
				t.Fatalf("received %d messages again, want them dead-lettered", len(again))
			}
			dead := mustReceive(t, m, "dlq", queue.ReceiveOptions{Max: 10})
			if diff := cmp.Diff(tt.want, byBody(dead)); diff != "" {
				t.Errorf("group id by body in the dead-letter queue (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGroupedKeepsAnEntrysOwnGroup: an entry that has a GroupID keeps it,
// and a tenant attribute that is no valid group id sends no group rather
// than failing the entry.
func TestGroupedKeepsAnEntrysOwnGroup(t *testing.T) {
	t.Parallel()
	m := memSetup(t, queue.Spec{})
	b := queue.NewGrouped(m, "fairq-tenant")
	res, err := b.Send(t.Context(), "q", []queue.Entry{
		{ID: "own", Body: "own", GroupID: "g", Attributes: map[string]string{"fairq-tenant": "acme"}},
		{ID: "odd", Body: "odd", Attributes: map[string]string{"fairq-tenant": "two words"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Errorf("entry %s: %v", r.ID, r.Err)
		}
	}
	got := make(map[string]string)
	for _, msg := range mustReceive(t, m, "q", queue.ReceiveOptions{Max: 10}) {
		got[msg.Body] = msg.GroupID
	}
	if diff := cmp.Diff(map[string]string{"own": "g", "odd": ""}, got); diff != "" {
		t.Errorf("group id by body (-want +got):\n%s", diff)
	}
}
