package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// groupLog is a backend that records the group of every message sent to
// it: it sits below queue.Grouped, where queue.SQS would turn the group
// into the request's MessageGroupId.
type groupLog struct {
	queue.Backend

	mu    sync.Mutex
	sends []string // "queue body group"
}

func (b *groupLog) Send(ctx context.Context, q string, entries []queue.Entry) ([]queue.SendResult, error) {
	b.mu.Lock()
	for _, e := range entries {
		b.sends = append(b.sends, fmt.Sprintf("%s %s %q", q, e.Body, e.GroupID))
	}
	b.mu.Unlock()
	return b.Backend.Send(ctx, q, entries)
}

func (b *groupLog) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(slices.Values(b.sends))
}

// TestMovesKeepTheTenantsGroup: with messages sent in their tenant's group
// (sqs.message_group_id: tenant), a message of acme enqueued, spilled to
// overflow and then dead-lettered is sent in group acme on each move, and
// a message of no tenant (a periodic task, or one fairq did not enqueue)
// in none; with the option off, no send carries a group.
func TestMovesKeepTheTenantsGroup(t *testing.T) {
	for _, tt := range []struct {
		name    string
		grouped bool
		acme    string
	}{
		{"tenant", true, "acme"},
		{"off", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem, names := setup(t, "memory")
			log := &groupLog{Backend: mem}
			var b queue.Backend = log
			if tt.grouped {
				b = queue.NewGrouped(log, envelope.AttrTenant)
			}
			// Enqueued as the gateway sends: through the same backend.
			send(t, b, names.Live[0], msg{body: "of-acme", tenant: "acme"})
			send(t, b, names.Live[0], msg{body: "of-nobody"})
			// Every message is spilled once from the live queue, as a
			// tenant over its concurrency would be; acme's then fails
			// and, at one retry, is dead-lettered.
			lim := limiterFunc(func(_ context.Context, m *consumer.Message) (consumer.Verdict, error) {
				if m.Queue == names.Live[0] {
					return consumer.Verdict{Action: consumer.Spill, Reason: "concurrency"}, nil
				}
				return consumer.Verdict{}, nil
			})
			h, seen := recorder(func(_ int, m *consumer.Message) error {
				if m.Tenant == "acme" {
					return errBoom
				}
				return nil
			})
			start(t, consumer.Config{Backend: b, Names: names, Handler: h, Limiter: lim, MaxRetries: 1})
			for range 2 {
				if d := recv(t, seen, 20*time.Second, "delivery"); d.queue != names.Overflow {
					t.Errorf("delivered from %s, want from %s after the spill", d.queue, names.Overflow)
				}
			}
			waitFor(t, 20*time.Second, "acme's message dead-lettered", func() bool { return depth(t, mem, names.DLQ) == 1 })

			want := []string{
				fmt.Sprintf("%s of-acme %q", names.Live[0], tt.acme),
				fmt.Sprintf("%s of-nobody %q", names.Live[0], ""),
				fmt.Sprintf("%s of-acme %q", names.Overflow, tt.acme),
				fmt.Sprintf("%s of-nobody %q", names.Overflow, ""),
				fmt.Sprintf("%s of-acme %q", names.DLQ, tt.acme),
			}
			if diff := cmp.Diff(slices.Sorted(slices.Values(want)), log.got()); diff != "" {
				t.Errorf("sends, as queue body group (-want +got):\n%s", diff)
			}
			// The memory backend kept the group of the dead letter.
			dead, err := mem.Receive(t.Context(), names.DLQ, queue.ReceiveOptions{})
			if err != nil || len(dead) != 1 {
				t.Fatalf("dead letters = %d, %v; want 1", len(dead), err)
			}
			if dead[0].GroupID != tt.acme {
				t.Errorf("dead letter's group = %q, want %q", dead[0].GroupID, tt.acme)
			}
		})
	}
}
