package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

// TestDevConsole: `fairq dev` without an admin token makes one, prints it
// and the console's address once, and both work.
func TestDevConsole(t *testing.T) {
	_, base, stderr := startDev(t, "", devOptions{listen: "127.0.0.1:0"}, nil)
	tok := regexp.MustCompile(`(?m)^admin token: (\S+)$`).FindAllStringSubmatch(stderr.String(), -1)
	url := regexp.MustCompile(`(?m)^console: (http://\S+/console/)$`).FindAllStringSubmatch(stderr.String(), -1)
	if len(tok) != 1 || len(url) != 1 || url[0][1] != base+"/console/" {
		t.Fatalf("want one 'admin token: …' line and one 'console: %s/console/' line on stderr:\n%s", base, stderr)
	}
	res, err := http.Get(url[0][1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(page), `name="token"`) {
		t.Errorf("GET %s: %d, want the login form", url[0][1], res.StatusCode)
	}
	req, _ := http.NewRequest("GET", base+"/admin/v1/tenants/demo", nil)
	req.Header.Set("Authorization", "Bearer "+tok[0][1])
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("GET /admin/v1/tenants/demo with the printed token: %d, want 200", res.StatusCode)
	}
	if strings.Count(stderr.String(), tok[0][1]) != 1 {
		t.Error("the admin token appears more than once on stderr")
	}
}

// TestDevConsoleConfiguredToken: with admin.token_sha256 set, dev makes no
// token of its own and still says where the console is.
func TestDevConsoleConfiguredToken(t *testing.T) {
	sum := sha256.Sum256([]byte("a configured token"))
	_, base, stderr := startDev(t, fmt.Sprintf("admin: {token_sha256: %s}\nlisten: 127.0.0.1:0\n", hex.EncodeToString(sum[:])), devOptions{}, nil)
	if strings.Contains(stderr.String(), "admin token:") || !strings.Contains(stderr.String(), "console: "+base+"/console/\n") {
		t.Errorf("stderr:\n%s\nwant the console's address and no token", stderr)
	}
}

// consoleApp is the application behind the worker in the browser test.
// Per tenant it can hold pushes until released (a slow application) and
// fail them with 500 (a broken one); it records each push it answers 200.
type consoleApp struct {
	url string

	mu        sync.Mutex
	held      map[string]chan struct{} // closed at release
	failing   map[string]bool
	delay     map[string]time.Duration // how long a push takes
	delivered map[string][]string      // tenant → fairq ids answered 200
}

func newConsoleApp(t *testing.T) *consoleApp {
	t.Helper()
	a := &consoleApp{held: map[string]chan struct{}{}, failing: map[string]bool{}, delay: map[string]time.Duration{}, delivered: map[string][]string{}}
	srv := newHTTPServer(t, http.HandlerFunc(a.serve))
	a.url = srv + "/work"
	return a
}

func (a *consoleApp) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	who, id := r.Header.Get("X-Fairq-Tenant"), r.Header.Get("X-Aws-Sqsd-Msgid")
	a.mu.Lock()
	gate, delay := a.held[who], a.delay[who]
	a.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failing[who] {
		http.Error(w, "the application failed on purpose", http.StatusInternalServerError)
		return
	}
	a.delivered[who] = append(a.delivered[who], id)
	w.WriteHeader(http.StatusOK)
}

func (a *consoleApp) hold(who string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held[who] == nil {
		a.held[who] = make(chan struct{})
	}
}

func (a *consoleApp) release(who string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.held[who]; g != nil {
		close(g)
		delete(a.held, who)
	}
}

func (a *consoleApp) releaseAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for who, g := range a.held {
		close(g)
		delete(a.held, who)
	}
}

func (a *consoleApp) fail(who string, on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failing[who] = on
}

func (a *consoleApp) count(who string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.delivered[who])
}

func (a *consoleApp) got(who, id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range a.delivered[who] {
		if d == id {
			return true
		}
	}
	return false
}

// newHTTPServer serves h on a loopback port until the test ends and
// returns its base URL.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	addr := freeAddr(t)
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	waitHTTP(t, "http://"+addr+"/", http.StatusOK, 10*time.Second)
	return "http://" + addr
}

// browser is a headless Chromium tab driven over the DevTools protocol.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	messages []string // what the page wrote on its console, exceptions included
}

// newBrowser starts Debian's chromium, headless, until the test ends: the
// test skips when it is missing, and fails under FAIRQ_REQUIRE_SERVICES=1.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := testenv.Tool(t, "chromium", "install Debian's chromium package (make deps does)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1440, 1200),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root in its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancelTab()
		cancelAlloc()
		t.Fatalf("start chromium (%s): %v", path, err)
	}
	console := chromedp.Console(ctx)
	read := make(chan struct{})
	go func() {
		defer close(read)
		for m, err := range console {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.messages = append(b.messages, fmt.Sprintf("%s (%s) %s:%d %s", m.Type, m.Source, m.URL, m.Line+1, m.Text))
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		<-read
	})
	return b
}

// text returns what the page shows, for failure messages.
func (b *browser) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : "(no body)"`))
	if err != nil {
		return fmt.Sprintf("(cannot read the page: %v)", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.messages) > 0 {
		s += "\n--- the page's console:\n" + strings.Join(b.messages, "\n")
	}
	return s
}

// do runs the actions within d, or fails the test with what the page
// showed.
func (b *browser) do(what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\n--- the page showed:\n%s", what, err, b.text())
	}
}

// eval returns the value of a JavaScript expression.
func eval[T any](b *browser, what, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %v\n--- the page showed:\n%s", what, err, b.text())
	}
	return v
}

// waitFor waits up to d for a JavaScript expression to be true.
func (b *browser) waitFor(what, js string, d time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(d))); err != nil {
		b.t.Fatalf("%s: not within %v (%v)\n--- the page showed:\n%s", what, d, err, b.text())
	}
}

// cell is the JavaScript of a tenant's cell text in the tenants table,
// by column index.
func cell(tenantID string, col int) string {
	return fmt.Sprintf(`((document.querySelector('#tenants tbody tr[data-key=%q]') || {cells: []}).cells[%d] || {}).textContent`, tenantID, col)
}

// Columns of the tenants table.
const (
	colState    = 1
	colBacklog  = 5
	colInFlight = 6
)

// waitApp waits up to d for cond, which looks at the application.
func waitApp(t *testing.T, b *browser, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v\n--- the page showed:\n%s", what, d, b.text())
		}
		time.Sleep(50 * time.Millisecond) // polling an outside application, not synchronising goroutines
	}
}

// artifactDir is where the test leaves its screenshots: $FAIRQ_ARTIFACTS,
// or the test's own artifact directory (kept with go test -artifacts).
func artifactDir(t *testing.T) string {
	if d := os.Getenv("FAIRQ_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

const consoleTestToken = "fq_console_browser_test_token"

// TestConsoleInBrowser drives the console in headless Chromium as an
// operator would, against a real fairq dev on Redis and the SQS emulator
// and a real application: a wrong token shows nothing; then a dead
// letter is peeked at; a tenant's backlog rises while the application is
// slow, a pause stops its deliveries at the application and a resume
// starts them again; an error of the API is shown as its detail; and the
// dead letter is redriven and delivered.
func TestConsoleInBrowser(t *testing.T) {
	b := newBrowser(t)
	app := newConsoleApp(t)
	keys := map[string]string{"acme": "fq_console_acme", "globex": "fq_console_globex", "poison": "fq_console_poison"}
	sum := sha256.Sum256([]byte(consoleTestToken))
	path, _ := sqsConfig(t, fmt.Sprintf(`redis: {addr: %q}
pool: {queues: 4, shard_size: 2}
admin: {token_sha256: %s}
tenants:
  - {id: acme, api_keys: [%q], concurrency: 2}
  - {id: globex, api_keys: [%q]}
  - {id: poison, api_keys: [%q]}
worker:
  push_url: %q
  max_retries: 2
  visibility_timeout: 5s
  error_visibility_timeout: 1s
listen: 127.0.0.1:0
`, testenv.RedisAddr(t), hex.EncodeToString(sum[:]), tenant.HashKey(keys["acme"]), tenant.HashKey(keys["globex"]), tenant.HashKey(keys["poison"]), app.url))
	if code, _, stderr := cli(t, "queues", "create", "--config", path); code != 0 {
		t.Fatalf("queues create: %d %s", code, stderr)
	}
	yaml, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, gw, _ := startDev(t, string(yaml), devOptions{pushURL: app.url}, nil)
	t.Cleanup(app.releaseAll) // before dev stops: held pushes would hold its shutdown
	console := gw + "/console/"

	// A wrong token: the form again, and no data for the page to read.
	b.do("open the console", 20*time.Second, chromedp.Navigate(console), chromedp.WaitVisible(chromedp.ID("token")))
	b.do("log in with a wrong token", 20*time.Second,
		chromedp.SendKeys(chromedp.ID("token"), "not-the-token"),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("login-error")))
	if got := eval[string](b, "the refused page", `document.querySelector('#login-error').textContent + '|' + !!document.querySelector('#tenants')`); got != "Wrong token.|false" {
		t.Errorf("after a wrong token the page shows %q, want the error and no panel", got)
	}
	if st := eval[int](b, "the API after a wrong token", `fetch('/admin/v1/tenants', {headers: {'X-Fairq-Console': '1'}}).then(r => r.status)`); st != 401 {
		t.Errorf("GET /admin/v1/tenants from the page after a wrong token: %d, want 401", st)
	}
	if strings.Contains(b.text(), "acme") {
		t.Errorf("the refused page names a tenant:\n%s", b.text())
	}

	// The right token: the console, with the tenants.
	b.do("log in", 20*time.Second,
		chromedp.SendKeys(chromedp.ID("token"), consoleTestToken), // a new form: the field is empty
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tenants tbody tr[data-key="acme"]`)))
	if c := eval[string](b, "the cookie", `document.cookie`); c != "" {
		t.Errorf("the page's script can read cookies %q: the session must be HttpOnly", c)
	}
	fcp := eval[float64](b, "first paint", `(performance.getEntriesByName('first-contentful-paint')[0] || {startTime: -1}).startTime`)
	t.Logf("first contentful paint of the console: %.0f ms after navigation", fcp)
	if fcp < 0 || fcp > 1000 {
		t.Errorf("first contentful paint %.0f ms, want under 1000 ms", fcp)
	}

	// A dead letter: poison's message fails twice and is peeked at. The
	// peek hides it for a minute; it is redriven at the end.
	app.fail("poison", true)
	dead := enqueue(t, gw, keys["poison"], `{"body": "fails until mended"}`)["id"].(string)
	b.waitFor("the dead letter counted", `/· 1 dead letters/.test(document.querySelector('#dlq-total').textContent)`, 60*time.Second)
	b.do("peek at poison's dead letters", 20*time.Second,
		chromedp.SendKeys(chromedp.ID("dlq-tenant"), "poison"),
		chromedp.Click(chromedp.ID("dlq-peek-button")),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#dlq tbody tr[data-key=%q]`, dead))))
	row := eval[string](b, "the dead letter's row", fmt.Sprintf(`document.querySelector('#dlq tbody tr[data-key=%q]').innerText`, dead))
	if !strings.Contains(row, "poison") || !strings.Contains(row, "push: 500") {
		t.Errorf("the dead letter's row %q: want its tenant and the application's 500", row)
	}
	shot := b.screenshot(t, "console-dlq.png")

	// A slow application: acme's backlog rises on the page.
	app.hold("acme")
	for i := range 20 {
		enqueue(t, gw, keys["acme"], fmt.Sprintf(`{"body": {"n": %d}}`, i))
	}
	b.waitFor("acme's backlog shows 20", fmt.Sprintf(`%s === "20"`, cell("acme", colBacklog)), 20*time.Second)
	b.waitFor("acme's 2 slots in flight", fmt.Sprintf(`%s === "2 / 2"`, cell("acme", colInFlight)), 20*time.Second)

	// Pause: once the two pushes in flight end, the application gets no
	// more of acme's messages, while globex's still arrive.
	b.do("pause acme", 10*time.Second, chromedp.Click(chromedp.CSS(`#tenants tr[data-key="acme"] button[data-action="pause"]`)))
	b.waitFor("acme shown paused", fmt.Sprintf(`%s === "paused"`, cell("acme", colState)), 10*time.Second)
	app.release("acme")
	quiet := 3 * time.Second // no delivery for this long: the deliveries stopped
	last, since := app.count("acme"), time.Now()
	waitApp(t, b, "acme's deliveries stop", 30*time.Second, func() bool {
		if n := app.count("acme"); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet
	})
	stopped := app.count("acme")
	if stopped >= 20 {
		t.Fatalf("all 20 of acme's messages were delivered although it was paused")
	}
	t.Logf("acme paused: %d delivered (those in flight at the pause), then none for %v", stopped, quiet)
	ctl := enqueue(t, gw, keys["globex"], `{"body": "control"}`)["id"].(string)
	waitApp(t, b, "globex's message delivered while acme is paused", 20*time.Second, func() bool { return app.got("globex", ctl) })
	if n := app.count("acme"); n != stopped {
		t.Fatalf("acme got %d deliveries while paused, after %d", n, stopped)
	}

	// Resume: the rest of acme's messages arrive.
	b.do("resume acme", 10*time.Second, chromedp.Click(chromedp.CSS(`#tenants tr[data-key="acme"] button[data-action="resume"]`)))
	b.waitFor("acme shown active", fmt.Sprintf(`%s === "active"`, cell("acme", colState)), 10*time.Second)
	waitApp(t, b, "all 20 of acme's messages delivered after the resume", 60*time.Second, func() bool { return app.count("acme") >= 20 })

	// An error of the API is shown as its problem's detail.
	b.do("open globex's limits", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#tenants tr[data-key="globex"] button[data-action="limits"]`)),
		chromedp.WaitVisible(chromedp.ID("limits-form")),
		chromedp.SetValue(chromedp.CSS(`#limits-form input[name="concurrency"]`), "lots"),
		chromedp.Click(chromedp.ID("limits-save")),
		chromedp.WaitVisible(chromedp.ID("limits-problem")))
	if p := eval[string](b, "the limits problem", `document.querySelector('#limits-problem').textContent`); !strings.HasPrefix(p, "400 invalid_request: concurrency must be a whole number or null") {
		t.Errorf("an invalid limit shows %q, want the API's 400 and its detail", p)
	}
	b.do("set globex's concurrency", 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#limits-form input[name="concurrency"]`), "7"),
		chromedp.Click(chromedp.ID("limits-save")))
	b.waitFor("globex's concurrency shown as 7", fmt.Sprintf(`/ 7$/.test(%s)`, cell("globex", colInFlight)), 10*time.Second)

	// Purge asks first, naming the tenant, and acts only once its id is
	// typed.
	b.do("open globex's purge", 10*time.Second,
		chromedp.Click(chromedp.CSS(`#tenants tr[data-key="globex"] button[data-action="purge"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-typed")))
	if got := eval[string](b, "the purge dialog", `document.querySelector('#confirm-title').textContent + '|' + document.querySelector('#confirm-ok').disabled`); got != "Purge tenant globex?|true" {
		t.Errorf("the purge dialog shows %q, want it to name globex with its button off", got)
	}
	b.do("confirm globex's purge", 10*time.Second,
		chromedp.SendKeys(chromedp.ID("confirm-typed"), "globex"),
		chromedp.Click(chromedp.ID("confirm-ok")))
	b.waitFor("the purge said done", `/^globex purged: messages enqueued before /.test(document.querySelector('#note').textContent)`, 10*time.Second)

	// Sorting: by tenant id, then the other way.
	b.do("sort by tenant", 10*time.Second, chromedp.Click(chromedp.CSS(`#tenants th[data-sort="id"]`)))
	b.waitFor("sorted by id", `Array.from(document.querySelectorAll('#tenants tbody tr')).map(r => r.dataset.key).join() === "acme,globex,poison"`, 5*time.Second)
	b.do("sort by tenant, descending", 10*time.Second, chromedp.Click(chromedp.CSS(`#tenants th[data-sort="id"]`)))
	b.waitFor("sorted by id, descending", `Array.from(document.querySelectorAll('#tenants tbody tr')).map(r => r.dataset.key).join() === "poison,globex,acme"`, 5*time.Second)

	// The dead letter, once the application is mended, redriven from the
	// page and delivered. The peek hid it for a minute; the gateway that
	// peeked redrives it at once, without waiting that minute out.
	app.fail("poison", false)
	b.do("redrive it", 10*time.Second,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#dlq tbody input[data-id=%q]`, dead))),
		chromedp.Click(chromedp.ID("dlq-redrive-selected")))
	b.waitFor("the redrive done", `/^redrive: moved 1 of 1/.test(document.querySelector('#dlq-progress').textContent)`, 15*time.Second)
	waitApp(t, b, "the redriven message delivered", 30*time.Second, func() bool { return app.got("poison", dead) })
	b.screenshot(t, "console.png")
	t.Logf("screenshots in %s", filepath.Dir(shot))

	// Logging out: the form again, and the page's requests refused.
	b.do("log out", 20*time.Second, chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("token")))
	if st := eval[int](b, "the API after logging out", `fetch('/admin/v1/tenants', {headers: {'X-Fairq-Console': '1'}}).then(r => r.status)`); st != 401 {
		t.Errorf("GET /admin/v1/tenants from the page after logging out: %d, want 401", st)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.messages {
		// Network errors are the answers the test asked for (the 401
		// after a wrong token); anything else is the script's.
		if strings.HasPrefix(m, "exception") || strings.HasPrefix(m, "error") && !strings.HasPrefix(m, "error (network)") {
			t.Errorf("the page's console: %s", m)
		}
	}
}

// png returns a PNG of the whole page, scrolled to its top first so
// that the sticky header is where it belongs.
func (b *browser) png(t *testing.T) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0); document.activeElement && document.activeElement.blur()`)); err != nil {
		t.Fatalf("scroll to the top: %v", err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return png
}

// screenshot saves the page as a PNG in the artifact directory and
// returns its path.
func (b *browser) screenshot(t *testing.T, name string) string {
	t.Helper()
	png := b.png(t)
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	screenshotPath   = flag.String("console.screenshot", "", "TestConsoleScreenshot writes the console in a realistic state to this PNG file")
	screenshotWarmup = flag.Duration("console.screenshot.warmup", 2*time.Minute, "how long TestConsoleScreenshot runs traffic before the screenshot")
)

// TestConsoleScreenshot makes the README's screenshot of the console
// (docs/console.png), only when asked:
//
//	go test ./cmd/fairq -run TestConsoleScreenshot -console.screenshot=$PWD/docs/console.png
//
// It runs fairq dev with six tenants and traffic for a couple of minutes:
// acme busy on a slow application (noisy), initech paused with a growing
// backlog, umbrella refused past its ingest rate, hooli slow, globex fast,
// and poison whose messages all fail into the dead-letter queue.
func TestConsoleScreenshot(t *testing.T) {
	if *screenshotPath == "" {
		t.Skip("writes docs/console.png only when asked: go test ./cmd/fairq -run TestConsoleScreenshot -console.screenshot=$PWD/docs/console.png")
	}
	b := newBrowser(t)
	app := newConsoleApp(t)
	ids := []string{"acme", "globex", "hooli", "initech", "poison", "umbrella"}
	var specs strings.Builder
	for _, id := range ids {
		limits := ""
		switch id {
		case "acme":
			limits = ", concurrency: 40"
		case "umbrella":
			limits = ", ingest_rate: 5, ingest_burst: 5"
		}
		fmt.Fprintf(&specs, "  - {id: %s, api_keys: [%q]%s}\n", id, tenant.HashKey("fq_shot_"+id), limits)
	}
	sum := sha256.Sum256([]byte(consoleTestToken))
	_, gw, _ := startDev(t, fmt.Sprintf("listen: 127.0.0.1:0\nadmin: {token_sha256: %s}\nworker: {max_retries: 2, error_visibility_timeout: 2s}\ntenants:\n%s",
		hex.EncodeToString(sum[:]), specs.String()), devOptions{pushURL: app.url}, nil)
	t.Cleanup(app.releaseAll)
	app.mu.Lock()
	app.delay["acme"], app.delay["hooli"], app.delay["globex"] = 2*time.Second, 400*time.Millisecond, 20*time.Millisecond
	app.failing["poison"] = true
	app.mu.Unlock()

	req, _ := http.NewRequest("POST", gw+"/admin/v1/tenants/initech/pause", nil)
	req.Header.Set("Authorization", "Bearer "+consoleTestToken)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("pause initech: %v %v", res, err)
	} else {
		res.Body.Close()
	}

	// Traffic every 200 ms until the screenshot: messages per tick.
	perTick := map[string]int{"acme": 10, "globex": 4, "hooli": 1, "initech": 1, "umbrella": 3}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for id, k := range perTick {
				for range k {
					send(gw, "fq_shot_"+id, fmt.Sprintf(`{"body": {"n": %d}}`, n))
				}
			}
			if n%10 == 0 {
				send(gw, "fq_shot_poison", `{"body": "always fails"}`)
			}
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()

	b.do("log in", 20*time.Second, chromedp.Navigate(gw+"/console/"),
		chromedp.SendKeys(chromedp.ID("token"), consoleTestToken),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tenants tbody tr[data-key="acme"]`)))
	t.Logf("traffic for %v before the screenshot", *screenshotWarmup)
	time.Sleep(*screenshotWarmup) // the picture needs minutes of history, not a condition
	b.waitFor("acme noisy", fmt.Sprintf(`/noisy/.test(%s)`, cell("acme", 9)), time.Minute)
	b.do("peek at the dead letters", 20*time.Second,
		chromedp.SetValue(chromedp.CSS(`#dlq-peek input[name="limit"]`), "5"),
		chromedp.Click(chromedp.ID("dlq-peek-button")),
		chromedp.WaitVisible(chromedp.CSS(`#dlq tbody tr`)))
	png := b.png(t)
	if err := os.WriteFile(*screenshotPath, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s, %d bytes", *screenshotPath, len(png))
}

// send enqueues one message, whatever the answer: the traffic of the
// screenshot is refused in part on purpose.
func send(gw, key, body string) {
	req, _ := http.NewRequest("POST", gw+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}
