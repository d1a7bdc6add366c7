package console_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairq/fairq/console"
)

const token = "the-admin-token"

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	c     *console.Console
	clock *clock
	token string
}

func setup(t *testing.T, change ...func(*console.Config)) *fixture {
	t.Helper()
	return setupToken(t, token, change...)
}

// setupToken is setup with another admin token.
func setupToken(t *testing.T, tok string, change ...func(*console.Config)) *fixture {
	t.Helper()
	f := &fixture{clock: &clock{now: time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)}, token: tok}
	cfg := console.Config{TokenSHA256: sha256.Sum256([]byte(tok)), Now: f.clock.Now}
	for _, c := range change {
		c(&cfg)
	}
	var err error
	if f.c, err = console.New(cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) do(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	f.c.Handler().ServeHTTP(w, r)
	return w
}

// login posts the form from remote with the token and returns the answer.
func (f *fixture) login(tok, remote string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/console/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = remote
	return f.do(r)
}

// session logs in and returns the session cookie.
func (f *fixture) session(t *testing.T) *http.Cookie {
	t.Helper()
	w := f.login(f.token, "192.0.2.1:1234")
	for _, c := range w.Result().Cookies() {
		if c.Name == console.CookieName {
			return c
		}
	}
	t.Fatalf("login: %d, no session cookie; body:\n%s", w.Code, w.Body)
	return nil
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]console.Config{
		"no token hash":  {},
		"short lifetime": {TokenSHA256: sha256.Sum256([]byte(token)), Lifetime: time.Second},
		"negative burst": {TokenSHA256: sha256.Sum256([]byte(token)), LoginBurst: -1},
	} {
		if _, err := console.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestLoginForm: without a session the page is the login form, and says
// nothing else.
func TestLoginForm(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := f.do(httptest.NewRequest("GET", "/console/", nil))
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, `type="password" id="token" name="token"`) {
		t.Fatalf("GET /console/: %d\n%s\nwant the login form", w.Code, body)
	}
	if strings.Contains(body, "console.js") || strings.Contains(body, `id="tenants"`) {
		t.Errorf("the login form carries the console's script or panels:\n%s", body)
	}
	h := w.Header()
	for k, want := range map[string]string{
		"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store", "X-Frame-Options": "DENY",
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if w := f.do(httptest.NewRequest("GET", "/console", nil)); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/console/" {
		t.Errorf("GET /console: %d to %q, want 301 to /console/", w.Code, w.Header().Get("Location"))
	}
	if w := f.do(httptest.NewRequest("GET", "/console/nothing", nil)); w.Code != http.StatusNotFound {
		t.Errorf("GET /console/nothing: %d, want 404", w.Code)
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	f := setup(t)

	wrong := f.login("not-the-token", "192.0.2.1:1")
	if wrong.Code != http.StatusUnauthorized || len(wrong.Result().Cookies()) != 0 ||
		!strings.Contains(wrong.Body.String(), `id="login-error"`) || strings.Contains(wrong.Body.String(), "console.js") {
		t.Errorf("wrong token: %d, cookies %v\n%s\nwant 401, the form again with an error, no cookie", wrong.Code, wrong.Result().Cookies(), wrong.Body)
	}

	// A token in the URL's query is not read.
	r := httptest.NewRequest("POST", "/console/login?token="+token, strings.NewReader(""))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if w := f.do(r); w.Code != http.StatusUnauthorized {
		t.Errorf("token in the query: %d, want 401", w.Code)
	}

	right := f.login(token, "192.0.2.1:1")
	if right.Code != http.StatusSeeOther || right.Header().Get("Location") != "/console/" {
		t.Fatalf("right token: %d to %q, want 303 to /console/", right.Code, right.Header().Get("Location"))
	}
	ck := right.Result().Cookies()
	if len(ck) != 1 {
		t.Fatalf("cookies %v, want one", ck)
	}
	c := ck[0]
	if c.Name != console.CookieName || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure ||
		c.MaxAge != 12*3600 || !c.Expires.Equal(f.clock.Now().Add(12*time.Hour)) {
		t.Errorf("cookie %+v: want fairq_console, HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP, 12 h", c)
	}
	if strings.Contains(c.Value, token) {
		t.Error("the cookie carries the token")
	}

	page := httptest.NewRequest("GET", "/console/", nil)
	page.AddCookie(c)
	if w := f.do(page); w.Code != 200 || !strings.Contains(w.Body.String(), `<script src="/console/console.js" defer></script>`) ||
		!strings.Contains(w.Body.String(), `id="tenants"`) || strings.Contains(w.Body.String(), `name="token"`) {
		t.Errorf("GET /console/ with the session: %d\n%s\nwant the console", w.Code, w.Body)
	}
	// Expired: the login form again.
	f.clock.Advance(12 * time.Hour)
	if w := f.do(page); !strings.Contains(w.Body.String(), `name="token"`) {
		t.Errorf("GET /console/ with an expired session: %d, want the login form", w.Code)
	}
}

// TestLoginSecure: the cookie is Secure when the browser came over TLS,
// directly or through a load balancer that ended it.
func TestLoginSecure(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for name, change := range map[string]func(*http.Request){
		"tls":               func(r *http.Request) { r.TLS = &tls.ConnectionState{} },
		"X-Forwarded-Proto": func(r *http.Request) { r.Header.Set("X-Forwarded-Proto", "https") },
	} {
		r := httptest.NewRequest("POST", "/console/login", strings.NewReader("token="+token))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		change(r)
		if ck := f.do(r).Result().Cookies(); len(ck) != 1 || !ck[0].Secure {
			t.Errorf("%s: cookies %v, want one Secure", name, ck)
		}
	}
}

// TestLoginCrossSite: a login or logout form posted from another site is
// refused.
func TestLoginCrossSite(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, path := range []string{"/console/login", "/console/logout"} {
		for name, h := range map[string][2]string{
			"Sec-Fetch-Site": {"Sec-Fetch-Site", "cross-site"},
			"Origin":         {"Origin", "https://evil.example"},
		} {
			r := httptest.NewRequest("POST", path, strings.NewReader("token="+token))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set(h[0], h[1])
			if w := f.do(r); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
				t.Errorf("POST %s with %s: %d, cookies %v; want 403 and none", path, name, w.Code, w.Result().Cookies())
			}
		}
	}
}

// TestLoginLimit: past a few attempts, a client is refused, the right
// token too, until its bucket refills; other clients are not.
func TestLoginLimit(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *console.Config) { c.LoginBurst, c.LoginEvery = 3, 10*time.Second })
	for i := range 3 {
		if w := f.login("guess", "198.51.100.9:1"); w.Code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i+1, w.Code)
		}
	}
	w := f.login(token, "198.51.100.9:2")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "10" || len(w.Result().Cookies()) != 0 {
		t.Errorf("4th attempt, the right token: %d, Retry-After %q, cookies %v; want 429, 10, none", w.Code, w.Header().Get("Retry-After"), w.Result().Cookies())
	}
	if w := f.login(token, "198.51.100.10:1"); w.Code != http.StatusSeeOther {
		t.Errorf("another client: %d, want 303", w.Code)
	}
	f.clock.Advance(10 * time.Second)
	if w := f.login(token, "198.51.100.9:3"); w.Code != http.StatusSeeOther {
		t.Errorf("after the wait: %d, want 303", w.Code)
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := httptest.NewRequest("POST", "/console/logout", nil)
	r.AddCookie(f.session(t))
	w := f.do(r)
	ck := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(ck) != 1 || ck[0].Name != console.CookieName || ck[0].MaxAge >= 0 || ck[0].Value != "" || ck[0].Path != "/" {
		t.Errorf("logout: %d, cookies %+v; want 303 and the cookie cleared", w.Code, ck)
	}
}

// TestAuthorize: the rules by which the admin API accepts a session.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	f := setup(t)
	good := f.session(t)
	rotated := setupToken(t, "another token").session(t)
	altered := *good
	altered.Value = good.Value[:10] + string('A'+(good.Value[10]-'A'+1)%26) + good.Value[11:]

	cases := []struct {
		name    string
		header  string // X-Fairq-Console
		origin  string
		host    string
		cookie  *http.Cookie
		advance time.Duration
		want    error
	}{
		{name: "the console's request", header: "1", cookie: good},
		{name: "same origin", header: "1", origin: "http://fairq.example:8080", cookie: good},
		{name: "same origin over https", header: "1", origin: "https://fairq.example:8080", cookie: good},
		{name: "no header", cookie: good, want: console.ErrNotConsole},
		{name: "header not 1", header: "true", cookie: good, want: console.ErrNotConsole},
		{name: "another origin", header: "1", origin: "https://evil.example", cookie: good, want: console.ErrCrossOrigin},
		{name: "another port", header: "1", origin: "http://fairq.example:9090", cookie: good, want: console.ErrCrossOrigin},
		{name: "opaque origin", header: "1", origin: "null", cookie: good, want: console.ErrCrossOrigin},
		{name: "another scheme than web", header: "1", origin: "file://fairq.example:8080", cookie: good, want: console.ErrCrossOrigin},
		{name: "no cookie", header: "1", want: console.ErrNoSession},
		{name: "forged", header: "1", cookie: &http.Cookie{Name: console.CookieName, Value: strings.Repeat("A", 75)}, want: console.ErrNoSession},
		{name: "altered", header: "1", cookie: &altered, want: console.ErrNoSession},
		{name: "rotated token", header: "1", cookie: rotated, want: console.ErrNoSession},
		{name: "expired", header: "1", cookie: good, advance: 12 * time.Hour, want: console.ErrNoSession},
	}
	for _, tc := range cases {
		f.clock.Advance(tc.advance)
		r := httptest.NewRequest("GET", "http://fairq.example:8080/admin/v1/tenants", nil)
		if tc.header != "" {
			r.Header.Set(console.HeaderConsole, tc.header)
		}
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.cookie != nil {
			r.AddCookie(tc.cookie)
		}
		if err := f.c.Authorize(r); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: Authorize = %v, want %v", tc.name, err, tc.want)
		}
		f.clock.Advance(-tc.advance)
	}
}

// TestAssets: the script and style sheet, gzipped when asked, revalidated
// by ETag.
func TestAssets(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ path, ctype string }{
		{"/console/console.js", "text/javascript; charset=utf-8"},
		{"/console/console.css", "text/css; charset=utf-8"},
	} {
		plain := f.do(httptest.NewRequest("GET", tc.path, nil))
		if plain.Code != 200 || plain.Header().Get("Content-Type") != tc.ctype || plain.Header().Get("Content-Encoding") != "" || plain.Body.Len() < 1000 {
			t.Fatalf("GET %s: %d %v, %d bytes", tc.path, plain.Code, plain.Header(), plain.Body.Len())
		}
		r := httptest.NewRequest("GET", tc.path, nil)
		r.Header.Set("Accept-Encoding", "br, gzip")
		gz := f.do(r)
		if gz.Header().Get("Content-Encoding") != "gzip" || gz.Header().Get("ETag") == plain.Header().Get("ETag") {
			t.Fatalf("GET %s, gzip: %v; want gzip with its own ETag", tc.path, gz.Header())
		}
		zr, err := gzip.NewReader(gz.Body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, plain.Body.Bytes()) {
			t.Errorf("GET %s: the gzip does not decompress to the file (%v)", tc.path, err)
		}
		r = httptest.NewRequest("GET", tc.path, nil)
		r.Header.Set("If-None-Match", plain.Header().Get("ETag"))
		if w := f.do(r); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
			t.Errorf("GET %s, If-None-Match: %d, %d bytes; want 304", tc.path, w.Code, w.Body.Len())
		}
	}
}

// pageWeightBudget bounds what a browser downloads to show the console,
// gzipped: the page, its script and its style sheet.
const pageWeightBudget = 16 << 10

// TestPageWeight measures the page (logged: go test -v -run PageWeight)
// and holds it to the budget.
func TestPageWeight(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ck := f.session(t)
	var raw, gz int
	for _, path := range []string{"/console/", "/console/console.js", "/console/console.css"} {
		r := httptest.NewRequest("GET", path, nil)
		r.AddCookie(ck)
		w := f.do(r)
		if w.Code != 200 {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(w.Body.Bytes())
		zw.Close()
		t.Logf("%-22s %6d bytes, %5d gzipped", path, w.Body.Len(), buf.Len())
		raw += w.Body.Len()
		gz += buf.Len()
	}
	t.Logf("%-22s %6d bytes, %5d gzipped", "total", raw, gz)
	if gz > pageWeightBudget {
		t.Errorf("the page weighs %d bytes gzipped, over the budget of %d", gz, pageWeightBudget)
	}
}
