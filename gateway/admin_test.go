package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

const adminToken = "the-admin-token"

func withAdmin(c *gateway.Config) {
	c.AdminTokenSHA256 = strings.TrimPrefix(tenant.HashKey(adminToken), "sha256:")
}

func (f *fixture) admin(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	w := f.do(t, request{method: method, path: path, key: adminToken, body: body})
	return w.Code, w.Body.String()
}

func TestAdminAuth(t *testing.T) {
	t.Parallel()
	off := setup(t)
	if w := off.do(t, request{method: "GET", path: "/admin/v1/tenants", key: adminToken}); w.Code != http.StatusNotFound {
		t.Errorf("admin without a configured token: %d, want 404", w.Code)
	}
	f := setup(t, withAdmin)
	tests := []struct {
		name     string
		key      string
		wantCode int
		wantErr  string
	}{
		{"no token", "", 401, "unauthorized"},
		{"a tenant's key", acmeKey, 403, "forbidden"},
		{"a wrong token", adminToken + "x", 403, "forbidden"},
		{"the token's hash", strings.TrimPrefix(tenant.HashKey(adminToken), "sha256:"), 403, "forbidden"},
		{"the admin token", adminToken, 200, ""},
	}
	for _, tt := range tests {
		for _, route := range []struct{ method, path string }{
			{"GET", "/admin/v1/tenants"}, {"GET", "/admin/v1/tenants/acme"}, {"PUT", "/admin/v1/tenants/acme"},
			{"DELETE", "/admin/v1/tenants/acme"}, {"POST", "/admin/v1/tenants/acme/keys"},
			{"DELETE", "/admin/v1/tenants/acme/keys/0123456789abcdef"}, {"GET", "/admin/v1/queues"}, {"POST", "/admin/v1/dlq/redrive"},
			{"GET", "/admin/v1/dlq"}, {"DELETE", "/admin/v1/dlq"},
		} {
			if tt.wantCode == 200 && route.method != "GET" {
				continue // would change things
			}
			w := f.do(t, request{method: route.method, path: route.path, key: tt.key, body: `{}`})
			if w.Code != tt.wantCode || tt.wantErr != "" && decode[problem](t, w).Code != tt.wantErr {
				t.Errorf("%s: %s %s: %d %s, want %d", tt.name, route.method, route.path, w.Code, w.Body, tt.wantCode)
			}
		}
	}
	// The admin token is no tenant key.
	if w := f.do(t, request{key: adminToken, body: `{"body":"x"}`}); w.Code != http.StatusUnauthorized {
		t.Errorf("admin token on /v1/messages: %d", w.Code)
	}
}

func TestAdminTenants(t *testing.T) {
	t.Parallel()
	logs := &testenv.LogBuffer{}
	f := setup(t, withAdmin, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})

	code, body := f.admin(t, "PUT", "/admin/v1/tenants/initech", `{"ingest_rate":5,"ingest_burst":3,"max_backlog":null}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	got := decodeString[tenantJSON](t, body)
	want := tenantJSON{ID: "initech", Source: "admin", Keys: []keyJSON{},
		Overrides: map[string]any{"ingest_rate": 5.0, "ingest_burst": 3.0}}
	if got.Limits["ingest_rate"] != 5.0 || got.Limits["max_backlog"] != 10000.0 {
		t.Errorf("resolved limits %v", got.Limits)
	}
	got.Limits = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created tenant (-want +got):\n%s", diff)
	}
	if code, body = f.admin(t, "PUT", "/admin/v1/tenants/initech", `{"ingest_rate":6}`); code != http.StatusOK {
		t.Errorf("update: %d %s", code, body)
	}

	code, body = f.admin(t, "POST", "/admin/v1/tenants/initech/keys", "")
	if code != http.StatusCreated {
		t.Fatalf("issue key: %d %s", code, body)
	}
	issued := decodeString[map[string]string](t, body)
	key, kid := issued["key"], issued["key_id"]
	if w := f.do(t, request{key: key, body: `{"body":"x"}`}); w.Code != http.StatusAccepted || decode[accepted](t, w).Tenant != "initech" {
		t.Fatalf("the new key: %d %s", w.Code, w.Body)
	}
	code, body = f.admin(t, "GET", "/admin/v1/tenants/initech", "")
	if tj := decodeString[tenantJSON](t, body); code != 200 || len(tj.Keys) != 1 || tj.Keys[0].KeyID != kid || tj.Keys[0].CreatedAt == "" {
		t.Errorf("get: %d %s", code, body)
	}
	if strings.Contains(body, key) {
		t.Error("the key is shown again")
	}
	code, body = f.admin(t, "GET", "/admin/v1/tenants", "")
	var ids []string
	for _, tj := range decodeString[map[string][]tenantJSON](t, body)["tenants"] {
		ids = append(ids, tj.ID+":"+tj.Source)
	}
	if diff := cmp.Diff([]string{"acme:config", "bench:config", "globex:config", "initech:admin", "slow:config"}, ids); code != 200 || diff != "" {
		t.Errorf("list: %d (-want +got):\n%s", code, diff)
	}

	if code, body = f.admin(t, "DELETE", "/admin/v1/tenants/initech/keys/"+kid, ""); code != http.StatusNoContent {
		t.Errorf("revoke: %d %s", code, body)
	}
	if w := f.do(t, request{key: key, body: `{"body":"x"}`}); w.Code != http.StatusUnauthorized {
		t.Errorf("revoked key: %d", w.Code)
	}
	if code, _ = f.admin(t, "DELETE", "/admin/v1/tenants/initech/keys/"+kid, ""); code != http.StatusNotFound {
		t.Errorf("revoke again: %d", code)
	}
	if code, _ = f.admin(t, "DELETE", "/admin/v1/tenants/initech", ""); code != http.StatusNoContent {
		t.Errorf("delete: %d", code)
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/admin/v1/tenants/initech"}, {"DELETE", "/admin/v1/tenants/initech"}, {"POST", "/admin/v1/tenants/initech/keys"},
	} {
		if code, body := f.admin(t, r.method, r.path, ""); code != http.StatusNotFound || !strings.Contains(body, "not_found") {
			t.Errorf("%s %s after delete: %d %s", r.method, r.path, code, body)
		}
	}

	for name, body := range map[string]string{
		"unknown field":  `{"ingest_rat":5}`,
		"wrong type":     `{"ingest_burst":"5"}`,
		"fraction":       `{"ingest_burst":1.5}`,
		"negative rate":  `{"ingest_rate":-1}`,
		"soft above max": `{"soft_backlog":10,"max_backlog":5}`,
		"not an object":  `[1]`,
	} {
		if code, resp := f.admin(t, "PUT", "/admin/v1/tenants/x", body); code != http.StatusBadRequest || !strings.Contains(resp, "invalid_request") {
			t.Errorf("%s: %d %s", name, code, resp)
		}
	}
	if code, _ := f.admin(t, "PUT", "/admin/v1/tenants/a%20b", `{}`); code != http.StatusBadRequest {
		t.Errorf("bad id: %d", code)
	}

	// No secret in the logs or the metrics.
	metrics := f.do(t, request{method: "GET", path: "/metrics"}).Body.String()
	for _, secret := range []string{key, adminToken, acmeKey} {
		if strings.Contains(logs.String(), secret) || strings.Contains(metrics, secret) {
			t.Errorf("a secret appears in the logs or the metrics")
		}
	}
	if !strings.Contains(logs.String(), kid) {
		t.Errorf("the key's id is not in the logs:\n%s", logs)
	}
}

func TestAdminQueues(t *testing.T) {
	t.Parallel()
	f := setup(t, withAdmin)
	f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
	code, body := f.admin(t, "GET", "/admin/v1/queues", "")
	if code != 200 {
		t.Fatalf("queues: %d %s", code, body)
	}
	var names []string
	total := 0
	for _, q := range decodeString[map[string][]map[string]any](t, body)["queues"] {
		names = append(names, q["name"].(string)+":"+q["role"].(string))
		total += int(q["visible"].(float64))
	}
	want := []string{"t-live-00:live", "t-live-01:live", "t-live-02:live", "t-live-03:live", "t-overflow:overflow", "t-backlog:backlog", "t-dlq:dlq"}
	if diff := cmp.Diff(want, names); diff != "" || total != 1 {
		t.Errorf("queues (-want +got):\n%s\ntotal %d, want 1", diff, total)
	}
	f.flaky.FailDepth(errors.New("down"))
	if code, body := f.admin(t, "GET", "/admin/v1/queues", ""); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, `"code":"unavailable"`) || !strings.Contains(body, "t-live-00") {
		t.Errorf("queues with the backend down: %d %s; want 503 problem unavailable naming the queues", code, body)
	}
}

func TestTenantSelf(t *testing.T) {
	t.Parallel()
	counter, err := backlog.New(backlog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t, func(c *gateway.Config) { c.Backlog = tracker(t, backlog.TrackerConfig{Counter: counter}) })
	for range 3 {
		f.do(t, request{key: slowKey, body: `{"body":"x"}`}) // 2 admitted, 1 refused
	}
	f.do(t, request{key: slowKey, body: `{"bdy":"x"}`})
	w := f.do(t, request{method: "GET", path: "/v1/tenant", key: slowKey})
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	got := decode[map[string]any](t, w)
	want := map[string]any{
		"id": "slow", "backlog": 2.0, "admitted": 2.0, "rejected": 2.0,
		"limits": map[string]any{"ingest_rate": 1.0, "ingest_burst": 2.0, "process_rate": 100.0, "process_burst": 100.0,
			"concurrency": 10.0, "soft_backlog": 1000.0, "max_backlog": 10000.0, "drop_age": "0s"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /v1/tenant (-want +got):\n%s", diff)
	}
	if w := f.do(t, request{method: "GET", path: "/v1/tenant"}); w.Code != http.StatusUnauthorized {
		t.Errorf("without a key: %d", w.Code)
	}
}

// TestTenantCountsAcrossGateways: with Redis, GET /v1/tenant counts the
// fleet's admissions.
func TestTenantCountsAcrossGateways(t *testing.T) {
	t.Parallel()
	fl := newFleet(t, 2, testTenants())
	for i := range 4 {
		fl.post(i%2, acmeKey, `{"body":"x"}`, nil)
	}
	fl.post(0, acmeKey, `{"bdy":"x"}`, nil)
	// Stopping flushes the gateways' counts, then their backlog counts.
	fl.stop(t)
	req := request{method: "GET", path: "/v1/tenant", key: acmeKey}
	w := (&fixture{srv: fl.gws[1]}).do(t, req)
	got := decode[map[string]any](t, w)
	if got["admitted"] != 4.0 || got["rejected"] != 1.0 {
		t.Errorf("fleet counts %v, want 4 admitted and 1 rejected", got)
	}
	// The backlog counts are shared too (a gateway's own answer may be
	// backlog.MaxStaleDefault old).
	if n, err := fl.backlog.Get(context.Background(), "acme"); err != nil || n != 4 {
		t.Errorf("shared backlog %d, %v; want 4", n, err)
	}
}

type keyJSON struct {
	KeyID     string `json:"key_id"`
	CreatedAt string `json:"created_at"`
}

type tenantJSON struct {
	ID        string         `json:"id"`
	Limits    map[string]any `json:"limits"`
	Overrides map[string]any `json:"overrides"`
	Keys      []keyJSON      `json:"keys"`
	Source    string         `json:"source"`
}
