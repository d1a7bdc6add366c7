package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/overview"
)

// withOverview serves the overview from a real Collector over the
// gateway's own backend and tenants, counting what the gateway accepts.
func withOverview(t *testing.T) func(*gateway.Config) {
	return func(c *gateway.Config) {
		c.Activity = overview.NewRecorder(overview.RecorderConfig{})
		col, err := overview.New(overview.Config{Depths: c.Backend, Names: c.Names, Tenants: c.Tenants, Local: c.Activity,
			Instance: "g", Role: "gateway", SampleEvery: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c.Overview = testenv.Started(t, col)
	}
}

func TestAdminOverview(t *testing.T) {
	t.Parallel()
	if code, body := setup(t, withAdmin).admin(t, "GET", "/admin/v1/overview", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "not configured") {
		t.Errorf("overview unconfigured: %d %s", code, body)
	}
	f := setup(t, withAdmin, withOverview(t))
	f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	f.do(t, request{key: acmeKey, body: `{"body":`})

	// A document answers for a second: the one built at the start may
	// not have the messages, or the queues' depths, yet.
	var d overview.Document
	var acme overview.TenantRow
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := f.admin(t, "GET", "/admin/v1/overview", "")
		if code != 200 {
			t.Fatalf("overview: %d %s", code, body)
		}
		d = decodeString[overview.Document](t, body)
		for _, r := range d.Tenants {
			if r.ID == "acme" {
				acme = r
			}
		}
		if acme.AcceptedPerS > 0 && acme.RefusedPerS["invalid_request"] > 0 && len(d.Queues) > 0 && d.Queues[0].SampledAt != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme: %+v, want an accepted and a refused message counted", acme)
		}
	}
	if len(d.Queues) != 7 || len(d.Queues[0].History) == 0 || d.Partial {
		t.Errorf("queues %+v (partial %v %v): want 7 with a history", d.Queues, d.Partial, d.Problems)
	}

	code, body := f.admin(t, "GET", "/admin/v1/overview?history=false", "")
	if code != 200 || strings.Contains(body, `"history"`) || !strings.Contains(body, `"sampled_at"`) {
		t.Errorf("overview without history: %d %.300s", code, body)
	}
	if code, body := f.admin(t, "GET", "/admin/v1/overview?history=maybe", ""); code != 400 || !strings.Contains(body, "invalid_request") {
		t.Errorf("history=maybe: %d %s, want 400", code, body)
	}
}
