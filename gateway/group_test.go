package gateway_test

import (
	"net/http"
	"testing"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/queue"
)

// TestSendsInTheTenantsGroup: over a backend that groups messages by
// tenant (sqs.message_group_id: tenant), every message the gateway sends,
// alone or in a batch, is in its tenant's group; without it, in none.
func TestSendsInTheTenantsGroup(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		grouped bool
		acme    string
		globex  string
	}{
		{"tenant", true, "acme", "globex"},
		{"off", false, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, func(c *gateway.Config) {
				if tt.grouped {
					c.Backend = queue.NewGrouped(c.Backend.(queue.Backend), envelope.AttrTenant)
				}
			})
			if w := f.do(t, request{key: acmeKey, body: `{"body": "one"}`}); w.Code != http.StatusAccepted {
				t.Fatalf("enqueue: %d %s", w.Code, w.Body)
			}
			if w := f.do(t, request{key: globexKey, path: "/v1/messages/batch", body: `{"messages": [{"body": "two"}, {"body": "three"}]}`}); w.Code != http.StatusOK {
				t.Fatalf("batch: %d %s", w.Code, w.Body)
			}
			want := map[string]string{"one": tt.acme, "two": tt.globex, "three": tt.globex}
			got := make(map[string]string)
			for _, q := range f.names.Live {
				msgs, err := f.mem.Receive(t.Context(), q, queue.ReceiveOptions{Max: 10})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range msgs {
					got[m.Body] = m.GroupID
				}
			}
			for body, group := range want {
				if g, ok := got[body]; !ok || g != group {
					t.Errorf("message %q: group %q (received: %v), want %q", body, g, ok, group)
				}
			}
		})
	}
}
