package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPauseResumePurge: the admin API pauses a tenant (with its ingest:
// 423 tenant_paused at the front door, before the body is read), resumes
// it, purges it and deletes it with a purge; bad input is refused.
func TestPauseResumePurge(t *testing.T) {
	t.Parallel()
	f := setup(t, withAdmin)
	code, body := f.admin(t, "POST", "/admin/v1/tenants/acme/pause", `{"pause_ingest":true}`)
	if code != http.StatusOK || !strings.Contains(body, `"state":"paused"`) || !strings.Contains(body, `"pause_ingest":true`) {
		t.Fatalf("pause: %d %s", code, body)
	}
	w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	if p := decode[problem](t, w); w.Code != http.StatusLocked || p.Code != "tenant_paused" {
		t.Errorf("enqueue while paused with ingest: %d %s, want 423 tenant_paused", w.Code, w.Body)
	}
	w = f.do(t, request{key: acmeKey, path: "/v1/messages/batch", body: `{"messages":[{"body":"x"}]}`})
	if w.Code != http.StatusLocked {
		t.Errorf("batch while paused with ingest: %d %s, want 423", w.Code, w.Body)
	}
	if w := f.do(t, request{key: globexKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
		t.Errorf("another tenant: %d", w.Code)
	}
	// Paused without its ingest: accepted, held by the workers.
	if code, body := f.admin(t, "POST", "/admin/v1/tenants/acme/pause", ""); code != http.StatusOK || !strings.Contains(body, `"pause_ingest":false`) {
		t.Errorf("pause without ingest: %d %s", code, body)
	}
	if w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`}); w.Code != http.StatusAccepted {
		t.Errorf("enqueue while paused, ingest open: %d %s", w.Code, w.Body)
	}
	if code, body := f.admin(t, "POST", "/admin/v1/tenants/acme/resume", "{}"); code != http.StatusOK || !strings.Contains(body, `"state":"active"`) {
		t.Errorf("resume: %d %s", code, body)
	}
	code, body = f.admin(t, "POST", "/admin/v1/tenants/acme/purge", "")
	purged := decodeString[struct {
		Tenant       string `json:"tenant"`
		PurgedBefore string `json:"purged_before"`
	}](t, body)
	if code != http.StatusOK || purged.Tenant != "acme" || purged.PurgedBefore == "" {
		t.Fatalf("purge: %d %s", code, body)
	}
	if code, body := f.admin(t, "GET", "/admin/v1/tenants/acme", ""); !strings.Contains(body, `"purged_before":"`+purged.PurgedBefore+`"`) {
		t.Errorf("tenant after purge: %d %s, want purged_before %s", code, body, purged.PurgedBefore)
	}
	if code, body := f.admin(t, "DELETE", "/admin/v1/tenants/globex?purge=true", ""); code != http.StatusOK || !strings.Contains(body, `"tenant":"globex"`) {
		t.Errorf("delete with purge: %d %s", code, body)
	}
	for _, tt := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/admin/v1/tenants/acme/pause", `{"pause_ingest":"yes"}`, 400},
		{"POST", "/admin/v1/tenants/acme/pause", `{"paused":true}`, 400},
		{"POST", "/admin/v1/tenants/nobody/pause", "", 404},
		{"POST", "/admin/v1/tenants/nobody/resume", "", 404},
		{"POST", "/admin/v1/tenants/nobody/purge", "", 404},
		{"DELETE", "/admin/v1/tenants/acme?purge=maybe", "", 400},
	} {
		if code, body := f.admin(t, tt.method, tt.path, tt.body); code != tt.want {
			t.Errorf("%s %s %s: %d %s, want %d", tt.method, tt.path, tt.body, code, body, tt.want)
		}
	}
}
