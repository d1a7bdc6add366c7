package console

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// The names the console and the admin API agree on.
const (
	// CookieName is the session cookie.
	CookieName = "fairq_console"
	// HeaderConsole, set to "1", marks a request of the console's script:
	// only such a request may use the session cookie on /admin/v1. A
	// cross-site form cannot set a header, and a cross-site script that
	// sets one needs a CORS preflight, which the gateway never grants.
	HeaderConsole = "X-Fairq-Console"
	// Path is where the gateway mounts Handler.
	Path = "/console/"
)

// Config defaults.
const (
	// LifetimeDefault is how long a session lasts: a night's shift.
	LifetimeDefault = 12 * time.Hour
	// LoginEveryDefault and LoginBurstDefault bound login attempts per
	// client: 5 at once, then one per 6 seconds.
	LoginEveryDefault = 6 * time.Second
	LoginBurstDefault = 5
	// LoginClientsDefault bounds the clients whose attempts are counted
	// apart.
	LoginClientsDefault = 10_000
)

// maxLoginBody caps a login form: a token and little else.
const maxLoginBody = 4 << 10

// Config configures a Console.
type Config struct {
	// TokenSHA256 is the sha256 of the admin token (admin.token_sha256):
	// what a login is checked against and what the session key derives
	// from. Required.
	TokenSHA256 [32]byte
	// Lifetime is how long a session lasts; zero uses LifetimeDefault.
	Lifetime time.Duration
	// LoginEvery and LoginBurst bound the login attempts of one client
	// (a token bucket); zero uses LoginEveryDefault and
	// LoginBurstDefault.
	LoginEvery time.Duration
	LoginBurst int
	// LoginClients bounds the clients counted apart; zero uses
	// LoginClientsDefault.
	LoginClients int
	// Logger receives logins, refused logins and logouts; nil discards.
	Logger *slog.Logger
	// Now is the clock of sessions and login bounds; nil uses time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	c.Lifetime = cmp.Or(c.Lifetime, LifetimeDefault)
	c.LoginEvery = cmp.Or(c.LoginEvery, LoginEveryDefault)
	c.LoginBurst = cmp.Or(c.LoginBurst, LoginBurstDefault)
	c.LoginClients = cmp.Or(c.LoginClients, LoginClientsDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.TokenSHA256 == [32]byte{} {
		errs = append(errs, errors.New("console: TokenSHA256 is required"))
	}
	if c.Lifetime < time.Minute {
		errs = append(errs, fmt.Errorf("console: Lifetime %v must be at least a minute", c.Lifetime))
	}
	if c.LoginEvery < 0 || c.LoginBurst < 1 || c.LoginClients < 1 {
		errs = append(errs, fmt.Errorf("console: LoginEvery %v, LoginBurst %d and LoginClients %d must be positive", c.LoginEvery, c.LoginBurst, c.LoginClients))
	}
	return errors.Join(errs...)
}

// Console serves the console's page, its login and logout, and tells
// the admin API which requests carry a session.
type Console struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	logins   *loginLimiter
	assets   map[string]*asset
	handler  http.Handler
}

// New returns a Console.
func New(cfg Config) (*Console, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Console{
		cfg:      cfg,
		log:      cfg.Logger,
		sessions: newSessions(cfg.TokenSHA256, cfg.Lifetime, cfg.Now),
		logins:   newLoginLimiter(rate.Every(cfg.LoginEvery), cfg.LoginBurst, cfg.LoginClients, cfg.Now),
		assets:   staticAssets,
	}
	// Logging in and out change state: refused when a browser says the
	// form came from another site (Sec-Fetch-Site, or Origin against
	// Host).
	csrf := http.NewCrossOriginProtection()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Path, http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET "+Path+"{$}", c.servePage)
	mux.Handle("POST "+Path+"login", csrf.Handler(http.HandlerFunc(c.serveLogin)))
	mux.Handle("POST "+Path+"logout", csrf.Handler(http.HandlerFunc(c.serveLogout)))
	for name := range c.assets {
		mux.HandleFunc("GET "+Path+name, c.serveAsset)
	}
	c.handler = mux
	return c, nil
}

// Handler serves everything under /console/; mount it there.
func (c *Console) Handler() http.Handler { return c.handler }

// Why Authorize refuses a request.
var (
	// ErrNotConsole: the request does not carry X-Fairq-Console: 1, so
	// a session cookie, if any, does not count; it needs the bearer
	// token.
	ErrNotConsole = errors.New("console: not a request of the console (no " + HeaderConsole + ": 1)")
	// ErrCrossOrigin: the request's Origin is not the origin it was sent
	// to: another site's page sent it.
	ErrCrossOrigin = errors.New("console: the request comes from another origin")
)

// Authorize reports whether r, a request to the admin API without a
// bearer token, may act with the session it carries: nil when it has the
// header X-Fairq-Console: 1, no Origin or its own, and a valid session
// cookie. Otherwise ErrNotConsole, ErrCrossOrigin or ErrNoSession, in
// that order of checking.
func (c *Console) Authorize(r *http.Request) error {
	if r.Header.Get(HeaderConsole) != "1" {
		return ErrNotConsole
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r) {
		return ErrCrossOrigin
	}
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return ErrNoSession
	}
	return c.sessions.verify(ck.Value)
}

// sameOrigin reports whether origin names the host the request was sent
// to. As net/http's CrossOriginProtection, it compares hosts, not
// schemes: behind a load balancer that ends TLS the gateway cannot tell
// the scheme the browser used, and a page of another scheme on the same
// host is the same operator's.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// overTLS reports whether the browser reached the gateway over TLS:
// directly, or through a load balancer that says so.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// pageData is what the page template shows.
type pageData struct {
	LoggedIn bool
	Error    string // why the login form is shown again
}

// servePage shows the console to a browser with a session, the login
// form to any other.
func (c *Console) servePage(w http.ResponseWriter, r *http.Request) {
	d := pageData{LoggedIn: c.hasSession(r)}
	c.render(w, http.StatusOK, d)
}

func (c *Console) hasSession(r *http.Request) bool {
	ck, err := r.Cookie(CookieName)
	return err == nil && c.sessions.verify(ck.Value) == nil
}

// serveLogin checks the token of the login form. Right: a session cookie
// and 303 to the console. Wrong: the form again, 401, nothing else.
func (c *Console) serveLogin(w http.ResponseWriter, r *http.Request) {
	client := clientOf(r)
	if ok, wait := c.logins.allow(client); !ok {
		secs := int64((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		c.log.WarnContext(r.Context(), "console login refused: too many attempts", "client", client)
		c.render(w, http.StatusTooManyRequests, pageData{Error: fmt.Sprintf("Too many attempts from your address: try again in %d s.", secs)})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		c.render(w, http.StatusBadRequest, pageData{Error: "The form could not be read."})
		return
	}
	// PostForm, not Form: a token in the URL's query is not read, so
	// that none is ever put there to work.
	sum := sha256.Sum256([]byte(r.PostForm.Get("token")))
	if subtle.ConstantTimeCompare(sum[:], c.cfg.TokenSHA256[:]) != 1 {
		c.log.WarnContext(r.Context(), "console login refused: wrong token", "client", client)
		c.render(w, http.StatusUnauthorized, pageData{Error: "Wrong token."})
		return
	}
	value, expires := c.sessions.issue()
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: value, Path: "/", Expires: expires, MaxAge: int(c.cfg.Lifetime / time.Second),
		HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode,
	})
	c.log.InfoContext(r.Context(), "console login", "client", client, "expires", expires)
	http.Redirect(w, r, Path, http.StatusSeeOther)
}

// serveLogout clears the browser's session cookie. The session itself
// stays valid until it expires (it is stateless): rotating the admin
// token is what revokes every session.
func (c *Console) serveLogout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode,
	})
	c.log.InfoContext(r.Context(), "console logout", "client", clientOf(r))
	http.Redirect(w, r, Path, http.StatusSeeOther)
}

// contentSecurityPolicy lets the page run its own script and style and
// nothing else: no inline script, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func pageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// render writes the console page, or the login page with d's error.
// Two fixed pages and one escaped string, rather than html/template: a
// template package reachable from the binary calls methods by name
// through reflection, which keeps every exported method of every type
// the server uses in its interfaces and made the binary half again as
// large.
func (c *Console) render(w http.ResponseWriter, status int, d pageData) {
	page := consolePage
	if !d.LoggedIn {
		problem := ""
		if d.Error != "" {
			problem = `<p class="problem" id="login-error" role="alert">` + html.EscapeString(d.Error) + `</p>`
		}
		page = strings.Replace(loginPage, errorMark, problem, 1)
	}
	h := w.Header()
	pageHeaders(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, page) // the client went away: nothing to do
}

//go:embed assets
var assetFS embed.FS

var (
	// The two pages share the start of their head; the console's goes on
	// with its script.
	consolePage  = mustAsset("assets/head.html") + mustAsset("assets/console.html")
	loginPage    = mustAsset("assets/head.html") + mustAsset("assets/login.html")
	staticAssets = map[string]*asset{
		"console.js":  newAsset("assets/console.js", "text/javascript; charset=utf-8"),
		"console.css": newAsset("assets/console.css", "text/css; charset=utf-8"),
	}
)

// asset is a static file of the page, with its gzip made once.
type asset struct {
	contentType    string
	etag, etagGzip string
	raw, gz        []byte
}

// errorMark is where the login page says why it is shown again.
const errorMark = "<!--error-->"

// mustAsset is an embedded page's text.
func mustAsset(name string) string {
	raw, err := assetFS.ReadFile(name)
	if err != nil || (name == "assets/login.html" && !strings.Contains(string(raw), errorMark)) {
		panic(fmt.Sprintf("console: page %s: %v", name, err)) // embedded: a wiring mistake
	}
	return string(raw)
}

func newAsset(name, contentType string) *asset {
	raw, err := assetFS.ReadFile(name)
	if err != nil {
		panic(err) // embedded: a wiring mistake
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // cannot fail: a valid level
	// Into a bytes.Buffer: neither can fail.
	_, _ = zw.Write(raw)
	_ = zw.Close()
	sum := sha256.Sum256(raw)
	tag := hex.EncodeToString(sum[:8])
	return &asset{contentType: contentType, etag: `"` + tag + `"`, etagGzip: `"` + tag + `-gz"`, raw: raw, gz: gz.Bytes()}
}

// serveAsset serves the script or the style sheet: gzipped when the
// browser takes it, revalidated by ETag on every load so that a new
// release is seen at once.
func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request) {
	a := c.assets[strings.TrimPrefix(r.URL.Path, Path)]
	h := w.Header()
	pageHeaders(h)
	h.Set("Content-Type", a.contentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("Vary", "Accept-Encoding")
	// Each encoding is its own representation, with its own tag.
	body, etag := a.raw, a.etag
	if acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body, etag = a.gz, a.etagGzip
	}
	h.Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}
