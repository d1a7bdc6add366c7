package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/console"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/tenant"
)

// consoleLogin logs in to the gateway's console with tok and returns the
// answer.
func (f *fixture) consoleLogin(tok string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "http://fairq.example/console/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, r)
	return w
}

// consoleSession logs in with the admin token and returns the cookie.
func (f *fixture) consoleSession(t testing.TB) *http.Cookie {
	t.Helper()
	w := f.consoleLogin(adminToken)
	for _, c := range w.Result().Cookies() {
		if c.Name == console.CookieName {
			return c
		}
	}
	t.Fatalf("console login: %d, no session cookie", w.Code)
	return nil
}

// consoleRequest is a request of the console's script: method and path,
// the session cookie (if any), the X-Fairq-Console header (unless
// header is false) and an Origin (if any).
type consoleRequest struct {
	method, path string
	cookie       *http.Cookie
	noHeader     bool
	origin       string
	bearer       string
	body         string
}

func (f *fixture) consoleDo(r consoleRequest) *httptest.ResponseRecorder {
	req := httptest.NewRequest(r.method, "http://fairq.example"+r.path, strings.NewReader(r.body))
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.cookie != nil {
		req.AddCookie(r.cookie)
	}
	if !r.noHeader {
		req.Header.Set(console.HeaderConsole, "1")
	}
	if r.origin != "" {
		req.Header.Set("Origin", r.origin)
	}
	if r.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+r.bearer)
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, req)
	return w
}

// TestConsoleMounted: the console is served with the admin API, and only
// with it.
func TestConsoleMounted(t *testing.T) {
	t.Parallel()
	off := setup(t)
	w := httptest.NewRecorder()
	off.srv.ServeHTTP(w, httptest.NewRequest("GET", "/console/", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("GET /console/ without an admin token: %d, want 404", w.Code)
	}
	if w := off.consoleLogin(adminToken); w.Code != http.StatusNotFound || len(w.Result().Cookies()) != 0 {
		t.Errorf("POST /console/login without an admin token: %d, want 404", w.Code)
	}

	f := setup(t, withAdmin)
	w = httptest.NewRecorder()
	f.srv.ServeHTTP(w, httptest.NewRequest("GET", "/console/", nil))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `name="token"`) || w.Header().Get(gateway.HeaderRequestID) == "" {
		t.Errorf("GET /console/: %d %v, want the login form with a request id", w.Code, w.Header())
	}
	if w := f.consoleLogin(acmeKey); w.Code != http.StatusUnauthorized {
		t.Errorf("login with a tenant's key: %d, want 401", w.Code)
	}
}

// TestConsoleSessionOnAdmin: each rule by which /admin/v1 takes or refuses
// a console session.
func TestConsoleSessionOnAdmin(t *testing.T) {
	t.Parallel()
	f := setup(t, withAdmin)
	good := f.consoleSession(t)
	forged := &http.Cookie{Name: console.CookieName, Value: strings.Repeat("A", len(good.Value))}
	altered := &http.Cookie{Name: console.CookieName, Value: good.Value[:20] + flip(good.Value[20]) + good.Value[21:]}
	rotated := setup(t, func(c *gateway.Config) {
		c.AdminTokenSHA256 = strings.TrimPrefix(tenant.HashKey("a new admin token"), "sha256:")
	})
	w := rotated.consoleLogin("a new admin token")
	other := w.Result().Cookies()[0]

	cases := []struct {
		name     string
		req      consoleRequest
		wantCode int
		wantErr  string
	}{
		{"the console's request", consoleRequest{cookie: good}, 200, ""},
		{"same origin", consoleRequest{cookie: good, origin: "http://fairq.example"}, 200, ""},
		{"cookie without the header", consoleRequest{cookie: good, noHeader: true}, 401, "unauthorized"},
		{"foreign origin", consoleRequest{cookie: good, origin: "https://evil.example"}, 403, "forbidden"},
		{"foreign origin, no cookie", consoleRequest{origin: "https://evil.example"}, 403, "forbidden"},
		{"header without a cookie", consoleRequest{}, 401, "unauthorized"},
		{"forged cookie", consoleRequest{cookie: forged}, 401, "unauthorized"},
		{"altered cookie", consoleRequest{cookie: altered}, 401, "unauthorized"},
		{"cookie of another admin token", consoleRequest{cookie: other}, 401, "unauthorized"},
		{"a wrong bearer token beside the cookie", consoleRequest{cookie: good, bearer: "wrong"}, 403, "forbidden"},
		{"the bearer token, as ever", consoleRequest{bearer: adminToken, noHeader: true}, 200, ""},
	}
	for _, tc := range cases {
		for _, route := range []string{"/admin/v1/tenants", "/admin/v1/queues", "/admin/v1/dlq"} {
			tc.req.method, tc.req.path = "GET", route
			w := f.consoleDo(tc.req)
			if w.Code != tc.wantCode || tc.wantErr != "" && decode[problem](t, w).Code != tc.wantErr {
				t.Errorf("%s: GET %s: %d %s, want %d %s", tc.name, route, w.Code, w.Body, tc.wantCode, tc.wantErr)
			}
		}
	}

	// The session acts, not only reads.
	w = f.consoleDo(consoleRequest{method: "POST", path: "/admin/v1/tenants/acme/pause", cookie: good, origin: "http://fairq.example", body: "{}"})
	if w.Code != 200 || decode[tenantView](t, w).State != "paused" {
		t.Errorf("pause through the console: %d %s", w.Code, w.Body)
	}
	// A cross-site form would be text/plain without the header: refused
	// before it reaches the handler.
	w = f.consoleDo(consoleRequest{method: "POST", path: "/admin/v1/tenants/acme/resume", cookie: good, noHeader: true, origin: "https://evil.example"})
	if w.Code != 401 {
		t.Errorf("a cross-site form's resume: %d, want 401", w.Code)
	}
	if tn, _ := f.tenants.Get("acme"); !tn.Paused {
		t.Error("acme resumed by a refused request")
	}

	// Expired, on the gateway's clock.
	f.clock.Advance(12 * time.Hour)
	if w := f.consoleDo(consoleRequest{method: "GET", path: "/admin/v1/tenants", cookie: good}); w.Code != 401 {
		t.Errorf("expired session: %d, want 401", w.Code)
	}
}

// tenantView is the part of an admin Tenant the tests read.
type tenantView struct {
	State string `json:"state"`
}

// flip returns another base64url character than c.
func flip(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}
