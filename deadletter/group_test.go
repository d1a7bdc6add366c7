package deadletter_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// TestRedriveInTheTenantsGroup: over a backend that groups messages by
// tenant (sqs.message_group_id: tenant), a redrive sends each dead letter
// back in its tenant's group, one of no tenant in none; without it, in
// none.
func TestRedriveInTheTenantsGroup(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		grouped bool
		want    map[string]string // tenant → group
	}{
		{"tenant", true, map[string]string{"a": "a", "b": "b", "": ""}},
		{"off", false, map[string]string{"a": "", "b": "", "": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem, names := setup(t, "memory")
			b := mem
			if tt.grouped {
				b = queue.NewGrouped(mem, envelope.AttrTenant)
			}
			for _, tenant := range []string{"a", "b", ""} {
				// Dead-lettered by hand, in no group, as before the option
				// was turned on.
				send(t, mem, names.DLQ, msg{tenant: tenant, meta: &envelope.Meta{EnqueuedAt: 1700000000000, Attempts: 10}})
			}
			r, err := deadletter.New(deadletter.Config{Backend: b, Names: names, Picker: picker{}, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := r.Redrive(context.Background(), deadletter.Selection{}); err != nil || res.Moved != 3 {
				t.Fatalf("Redrive = %+v, %v; want 3 moved", res, err)
			}
			got := make(map[string]string)
			for _, q := range names.Live {
				msgs, err := mem.Receive(t.Context(), q, queue.ReceiveOptions{Max: 10})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range msgs {
					got[m.Attributes[envelope.AttrTenant]] = m.GroupID
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("group by tenant after the redrive (-want +got):\n%s", diff)
			}
		})
	}
}
