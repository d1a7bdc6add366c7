package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
)

// adminGateway is a `fairq gateway` on Redis and the SQS emulator with its
// admin API on, for the admin commands to talk to.
type adminGateway struct {
	url    string
	token  string
	key    string // an API key of tenant acme
	names  queue.Names
	config string // the gateway's configuration file
}

const adminTestToken = "fq_admin_token_for_tests"

// startAdminGateway starts a gateway with two tenants from its
// configuration, acme (ingest_rate 500) and globex, and a pool of four
// live queues. With admin false its admin API is off.
func startAdminGateway(t *testing.T, admin bool) *adminGateway {
	t.Helper()
	const key = "fq_admin_cli_acme_key"
	adminYAML := ""
	if admin {
		sum := sha256.Sum256([]byte(adminTestToken))
		adminYAML = fmt.Sprintf("admin: {token_sha256: %q}\n", hex.EncodeToString(sum[:]))
	}
	base, prefix := sqsConfig(t, fmt.Sprintf(`redis: {addr: %q}
pool: {queues: 4, shard_size: 2}
%stenants:
  - {id: acme, api_keys: [%q], ingest_rate: 500}
  - {id: globex}
`, testenv.RedisAddr(t), adminYAML, tenant.HashKey(key)))
	if code, _, stderr := cli(t, "queues", "create", "--config", base); code != 0 {
		t.Fatalf("queues create: %d %s", code, stderr)
	}
	addr := freeAddr(t)
	startRole(t, "gateway", base, addr)
	g := &adminGateway{url: "http://" + addr, token: adminTestToken, key: key, names: queue.PoolNames(prefix, 4), config: base}
	waitHTTP(t, g.url+"/healthz", http.StatusOK, 20*time.Second)
	return g
}

// run runs a fairq command with FAIRQ_ADMIN_URL and FAIRQ_ADMIN_TOKEN set
// for the gateway.
func (g *adminGateway) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return cliEnv(t, map[string]string{"FAIRQ_ADMIN_URL": g.url, "FAIRQ_ADMIN_TOKEN": g.token}, args...)
}

// cliEnv runs the fairq command line with the environment vars.
func cliEnv(t *testing.T, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), append([]string{"fairq"}, args...),
		func(k string) string { return vars[k] }, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustRun runs a command that must succeed and returns its stdout.
func (g *adminGateway) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := g.run(t, args...)
	if code != 0 {
		t.Fatalf("fairq %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// wantFailure checks a command's exit code and that its stderr is the one
// line "fairq: " + a text matching pattern.
func wantFailure(t *testing.T, code int, stderr string, wantCode int, pattern string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, wantCode, stderr)
	}
	line, ok := strings.CutSuffix(stderr, "\n")
	if !ok || strings.Contains(line, "\n") || !regexp.MustCompile(`^fairq: `+pattern).MatchString(line) {
		t.Errorf("stderr = %q, want one line matching %q", stderr, "fairq: "+pattern)
	}
}

// decodeJSON decodes a command's --json output.
func decodeJSON[T any](t *testing.T, stdout string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("stdout is not the JSON expected: %v\n%s", err, stdout)
	}
	return v
}

// enqueueStatus sends one message with an API key and returns the status.
func enqueueStatus(t *testing.T, gw, key string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", gw+"/v1/messages", strings.NewReader(`{"body":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// seedDLQ puts dead letters on the gateway's dead-letter queue, one per
// tenant named, as the worker leaves them, and returns their fairq ids.
func seedDLQ(t *testing.T, names queue.Names, tenants ...string) []string {
	t.Helper()
	b := testenv.SQSBackend(t)
	var ids []string
	for chunk := range slices.Chunk(tenants, queue.MaxBatch) {
		var entries []queue.Entry
		for _, tn := range chunk {
			id := fmt.Sprintf("0197a4f2-0000-7000-8000-%012d", len(ids))
			ids = append(ids, id)
			meta := envelope.Meta{EnqueuedAt: time.Now().Add(-time.Hour).UnixMilli(), ID: id, Attempts: 10, LastError: "status 500", Origin: names.Live[0]}
			entries = append(entries, queue.Entry{
				ID:         fmt.Sprint(len(entries)),
				Body:       "job of " + tn,
				Attributes: map[string]string{envelope.AttrTenant: tn, envelope.AttrMeta: meta.Encode()},
			})
		}
		res, err := b.Send(t.Context(), names.DLQ, entries)
		if err != nil {
			t.Fatalf("seed the dead-letter queue: %v", err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("seed the dead-letter queue: %v", r.Err)
			}
		}
	}
	return ids
}

// depth returns the messages on a queue, visible or not.
func depth(t *testing.T, name string) int {
	t.Helper()
	d, err := testenv.SQSBackend(t).Depth(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return d.Visible + d.NotVisible + d.Delayed
}

func liveDepth(t *testing.T, names queue.Names) int {
	t.Helper()
	n := 0
	for _, q := range names.Live {
		n += depth(t, q)
	}
	return n
}

// TestAdminCLITenants lists, shows and sets tenants on a real gateway.
func TestAdminCLITenants(t *testing.T) {
	g := startAdminGateway(t, true)

	t.Run("list", func(t *testing.T) {
		out := g.mustRun(t, "tenants", "list")
		if !regexp.MustCompile(`(?m)^TENANT\s+STATE\s+SOURCE`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^acme\s+active\s+config\s+500\s`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^globex\s+active\s+config\s`).MatchString(out) {
			t.Errorf("tenants list:\n%s\nwant a header and rows for acme (ingest 500) and globex", out)
		}
		list := decodeJSON[struct {
			Tenants []struct {
				ID     string         `json:"id"`
				Source string         `json:"source"`
				Limits map[string]any `json:"limits"`
			} `json:"tenants"`
		}](t, g.mustRun(t, "tenants", "list", "--json"))
		var ids []string
		for _, tn := range list.Tenants {
			ids = append(ids, tn.ID+"/"+tn.Source)
		}
		if diff := cmp.Diff([]string{"acme/config", "globex/config"}, ids); diff != "" {
			t.Errorf("tenants list --json: tenants (-want +got):\n%s", diff)
		}
		if got := list.Tenants[0].Limits["ingest_rate"]; got != 500.0 {
			t.Errorf("acme's ingest_rate = %v, want 500", got)
		}
	})

	t.Run("show", func(t *testing.T) {
		out := g.mustRun(t, "tenants", "show", "acme")
		for _, pattern := range []string{`(?m)^tenant\s+acme$`, `(?m)^state\s+active$`, `(?m)^keys\s+[0-9a-f]{16}$`,
			`(?m)^ingest_rate\s+500\s+tenant$`, `(?m)^ingest_burst\s+\d+\s+defaults$`, `(?m)^drop_age\s+0s\s+defaults$`} {
			if !regexp.MustCompile(pattern).MatchString(out) {
				t.Errorf("tenants show acme: no line matches %s in\n%s", pattern, out)
			}
		}
		// A flag after the tenant id.
		shown := decodeJSON[apiTenant](t, g.mustRun(t, "tenants", "show", "acme", "--json"))
		if shown.ID != "acme" || string(shown.Overrides["ingest_rate"]) != "500" || len(shown.Keys) != 1 {
			t.Errorf("tenants show acme --json = %+v, want acme with its ingest_rate override and one key", shown)
		}
	})

	t.Run("set keeps the limits it does not name", func(t *testing.T) {
		code, _, stderr := g.run(t, "tenants", "set", "initech", "ingest_rate=50", "concurrency=3")
		if code != 0 || !strings.Contains(stderr, "created tenant initech") {
			t.Fatalf("tenants set a new tenant: exit %d, stderr %q", code, stderr)
		}
		out := g.mustRun(t, "tenants", "set", "initech", "ingest_rate=75.5")
		if !regexp.MustCompile(`(?m)^ingest_rate\s+75.5\s+tenant$`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^concurrency\s+3\s+tenant$`).MatchString(out) {
			t.Errorf("after setting ingest_rate alone:\n%s\nwant ingest_rate 75.5 and concurrency still 3", out)
		}
		g.mustRun(t, "tenants", "set", "initech", "concurrency=default", "max_backlog=40", "soft_backlog=20")
		got := decodeJSON[apiTenant](t, g.mustRun(t, "tenants", "show", "--json", "initech"))
		want := map[string]string{"ingest_rate": "75.5", "max_backlog": "40", "soft_backlog": "20"}
		gotOverrides := map[string]string{}
		for k, v := range got.Overrides {
			gotOverrides[k] = string(v)
		}
		if diff := cmp.Diff(want, gotOverrides); diff != "" {
			t.Errorf("initech's overrides (-want +got):\n%s", diff)
		}
		if got.Source != "admin" {
			t.Errorf("initech's source = %q, want admin", got.Source)
		}
	})

	t.Run("set refused", func(t *testing.T) {
		// The gateway checks the values: soft_backlog above max_backlog.
		code, _, stderr := g.run(t, "tenants", "set", "acme", "soft_backlog=900", "max_backlog=100")
		wantFailure(t, code, stderr, exitFailed, `invalid_request: .*backlog`)
		code, _, stderr = g.run(t, "tenants", "set", "acme", "ingest_rate=-1")
		wantFailure(t, code, stderr, exitFailed, `invalid_request: .*ingest_rate`)
		// The command line is checked before any request.
		for _, args := range [][]string{
			{"tenants", "set", "acme", "ingest_rate=fast"},
			{"tenants", "set", "acme", "concurrency=1.5"},
			{"tenants", "set", "acme", "bogus=1"},
			{"tenants", "set", "acme", "ingest_rate"},
			{"tenants", "set", "acme"},
			{"tenants", "set", "not a tenant", "ingest_rate=1"},
		} {
			if code, _, stderr := g.run(t, args...); code != exitUsage || !strings.Contains(stderr, "usage") {
				t.Errorf("fairq %s: exit %d, stderr %q; want 2 and a usage error", strings.Join(args, " "), code, stderr)
			}
		}
		got := decodeJSON[apiTenant](t, g.mustRun(t, "tenants", "show", "acme", "--json"))
		if len(got.Overrides) != 1 || string(got.Overrides["ingest_rate"]) != "500" {
			t.Errorf("acme's overrides after refused changes = %s, want ingest_rate 500 alone", got.Overrides)
		}
	})

	t.Run("unknown tenant", func(t *testing.T) {
		code, stdout, stderr := g.run(t, "tenants", "show", "nosuch")
		wantFailure(t, code, stderr, exitNotFound, `not_found: .*nosuch`)
		if stdout != "" {
			t.Errorf("stdout = %q, want nothing", stdout)
		}
		code, _, stderr = g.run(t, "keys", "issue", "nosuch")
		wantFailure(t, code, stderr, exitNotFound, `not_found: `)
	})

	t.Run("keys", func(t *testing.T) {
		g.mustRun(t, "tenants", "set", "hooli", "ingest_rate=10")
		code, stdout, stderr := g.run(t, "keys", "issue", "hooli")
		if code != 0 {
			t.Fatalf("keys issue: exit %d, stderr %q", code, stderr)
		}
		key := strings.TrimSuffix(stdout, "\n")
		m := regexp.MustCompile(`^key ([0-9a-f]{16}) of tenant hooli: shown this once`).FindStringSubmatch(stderr)
		if !strings.HasPrefix(key, "fq_") || strings.Contains(key, "\n") || m == nil {
			t.Fatalf("keys issue: stdout %q, stderr %q; want the key alone on stdout and its id on stderr", stdout, stderr)
		}
		kid := m[1]
		if st := enqueueStatus(t, g.url, key); st != http.StatusAccepted {
			t.Errorf("enqueue with the issued key: %d, want 202", st)
		}
		shown := decodeJSON[apiTenant](t, g.mustRun(t, "tenants", "show", "hooli", "--json"))
		if len(shown.Keys) != 1 || shown.Keys[0].KeyID != kid {
			t.Errorf("hooli's keys = %+v, want %s", shown.Keys, kid)
		}
		if out := g.mustRun(t, "keys", "revoke", "hooli", kid); !strings.Contains(out, "revoked key "+kid) {
			t.Errorf("keys revoke: %q", out)
		}
		if st := enqueueStatus(t, g.url, key); st != http.StatusUnauthorized {
			t.Errorf("enqueue with the revoked key: %d, want 401", st)
		}
		code, _, stderr = g.run(t, "keys", "revoke", "hooli", kid)
		wantFailure(t, code, stderr, exitNotFound, `not_found: `)
		// --json prints the API's answer.
		issued := decodeJSON[map[string]string](t, g.mustRun(t, "keys", "issue", "hooli", "--json"))
		if !strings.HasPrefix(issued["key"], "fq_") || len(issued["key_id"]) != 16 {
			t.Errorf("keys issue --json = %v", issued)
		}
	})
}

// TestAdminCLIQueuesStats prints the depth of the gateway's queues.
func TestAdminCLIQueuesStats(t *testing.T) {
	g := startAdminGateway(t, true)
	seedDLQ(t, g.names, "acme", "acme", "globex")

	out := g.mustRun(t, "queues", "stats")
	for _, q := range g.names.Live {
		if !regexp.MustCompile(`(?m)^` + q + `\s+live\s+0\s+0\s+0$`).MatchString(out) {
			t.Errorf("queues stats: no empty row for %s in\n%s", q, out)
		}
	}
	if !regexp.MustCompile(`(?m)^`+g.names.DLQ+`\s+dlq\s+3\s+0\s+0$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^total\s+3\s+0\s+0$`).MatchString(out) {
		t.Errorf("queues stats:\n%s\nwant the dead-letter queue with 3 visible, and a total", out)
	}
	got := decodeJSON[struct {
		Queues []apiQueue `json:"queues"`
	}](t, g.mustRun(t, "queues", "stats", "--json"))
	roles := map[string]int{}
	for _, q := range got.Queues {
		roles[q.Role]++
		if q.Role == "dlq" && (q.Name != g.names.DLQ || q.Visible != 3) {
			t.Errorf("dead-letter queue in --json = %+v, want %s with 3 visible", q, g.names.DLQ)
		}
	}
	if diff := cmp.Diff(map[string]int{"live": 4, "overflow": 1, "backlog": 1, "dlq": 1}, roles); diff != "" {
		t.Errorf("queues by role (-want +got):\n%s", diff)
	}
}

// TestAdminCLIRedrive moves dead letters back through the gateway, in
// calls of --batch, with progress on stderr and counts on stdout.
func TestAdminCLIRedrive(t *testing.T) {
	g := startAdminGateway(t, true)
	var tenants []string
	for i := range 25 {
		tenants = append(tenants, map[bool]string{true: "acme", false: "globex"}[i < 15])
	}
	seedDLQ(t, g.names, tenants...)

	code, stdout, stderr := g.run(t, "dlq", "redrive", "--tenant", "acme", "--batch", "4")
	if code != 0 || !strings.HasPrefix(stdout, "moved 15, ") {
		t.Fatalf("dlq redrive --tenant acme: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// Four calls: 4, 4, 4, then 3, fewer than asked: none left.
	progress := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	want := []string{"moved 4 of tenant acme's (~25 dead letters in all)…", "moved 8 of tenant acme's (~25 dead letters in all)…",
		"moved 12 of tenant acme's (~25 dead letters in all)…", "moved 15 of tenant acme's (~25 dead letters in all)…"}
	if diff := cmp.Diff(want, progress); diff != "" {
		t.Errorf("progress on stderr (-want +got):\n%s", diff)
	}
	if live, dead := liveDepth(t, g.names), depth(t, g.names.DLQ); live != 15 || dead != 10 {
		t.Errorf("after the redrive: %d on the live queues, %d dead letters; want 15 and 10", live, dead)
	}

	// At most 6, in calls of 4 and 2, as JSON.
	code, stdout, stderr = g.run(t, "dlq", "redrive", "--max", "6", "--batch", "4", "--json")
	if code != 0 {
		t.Fatalf("dlq redrive --max 6: exit %d, stderr %q", code, stderr)
	}
	if res := decodeJSON[redriveResult](t, stdout); res.Moved != 6 || res.Failed != 0 {
		t.Errorf("dlq redrive --max 6 --json = %+v, want 6 moved", res)
	}
	if !strings.HasSuffix(stderr, "moved 6 of ~6…\n") || strings.Count(stderr, "\n") != 2 {
		t.Errorf("progress of --max 6 --batch 4: %q, want two lines ending at 6 of ~6", stderr)
	}
	if dead := depth(t, g.names.DLQ); dead != 4 {
		t.Errorf("%d dead letters left, want 4", dead)
	}

	// The rest, then nothing.
	if out := g.mustRun(t, "dlq", "redrive"); !strings.HasPrefix(out, "moved 4, ") {
		t.Errorf("dlq redrive of the rest: %q, want 4 moved", out)
	}
	if out := g.mustRun(t, "dlq", "redrive"); !strings.HasPrefix(out, "moved 0, ") {
		t.Errorf("dlq redrive of an empty queue: %q, want 0 moved", out)
	}
	if live := liveDepth(t, g.names); live != 25 {
		t.Errorf("%d messages on the live queues, want all 25", live)
	}

	// --config still reads the queues itself, without the gateway.
	seedDLQ(t, g.names, "globex")
	code, stdout, stderr = cliEnv(t, nil, "dlq", "redrive", "--config", g.config)
	if code != 0 || !strings.HasPrefix(stdout, "moved 1, skipped 0, failed 0") {
		t.Errorf("dlq redrive --config: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestAdminCLIFailures: what a script sees when the token is wrong, the
// gateway is down or slow, its admin API is off, or the command is
// interrupted.
func TestAdminCLIFailures(t *testing.T) {
	g := startAdminGateway(t, true)

	t.Run("bad token", func(t *testing.T) {
		code, stdout, stderr := cliEnv(t, map[string]string{"FAIRQ_ADMIN_URL": g.url, "FAIRQ_ADMIN_TOKEN": "not-the-token"}, "tenants", "list")
		wantFailure(t, code, stderr, exitFailed, `forbidden: `)
		if stdout != "" {
			t.Errorf("stdout = %q, want nothing", stdout)
		}
		// A tenant's API key is no admin token either.
		code, _, stderr = cliEnv(t, map[string]string{"FAIRQ_ADMIN_URL": g.url, "FAIRQ_ADMIN_TOKEN": g.key}, "queues", "stats")
		wantFailure(t, code, stderr, exitFailed, `forbidden: `)
	})

	t.Run("no token", func(t *testing.T) {
		code, _, stderr := cliEnv(t, map[string]string{"FAIRQ_ADMIN_URL": g.url}, "tenants", "list")
		if code != exitUsage || !strings.Contains(stderr, "FAIRQ_ADMIN_TOKEN") {
			t.Errorf("exit %d, stderr %q; want 2 naming FAIRQ_ADMIN_TOKEN", code, stderr)
		}
	})

	t.Run("token file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(path, []byte(adminTestToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The file wins over the environment.
		code, stdout, stderr := cliEnv(t, map[string]string{"FAIRQ_ADMIN_TOKEN": "not-the-token"},
			"tenants", "list", "--url", g.url, "--token-file", path)
		if code != 0 || !strings.Contains(stdout, "acme") {
			t.Errorf("with --token-file: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		code, _, stderr = g.run(t, "tenants", "list", "--token-file", filepath.Join(t.TempDir(), "missing"))
		if code != exitUsage || !strings.Contains(stderr, "--token-file") {
			t.Errorf("a missing token file: exit %d, stderr %q; want 2", code, stderr)
		}
	})

	t.Run("gateway down", func(t *testing.T) {
		down := "http://" + freeAddr(t)
		for _, args := range [][]string{{"tenants", "list"}, {"dlq", "redrive"}, {"dlq", "purge"}} {
			code, stdout, stderr := cliEnv(t, map[string]string{"FAIRQ_ADMIN_URL": down, "FAIRQ_ADMIN_TOKEN": adminTestToken}, args...)
			wantFailure(t, code, stderr, exitUnreachable, regexp.QuoteMeta("cannot reach the gateway at "+down+": ")+`.*connection refused$`)
			if stdout != "" {
				t.Errorf("fairq %s: stdout = %q, want nothing", strings.Join(args, " "), stdout)
			}
		}
	})

	t.Run("gateway silent", func(t *testing.T) {
		// A listener whose connections are never accepted: the handshake
		// completes in the kernel, no answer ever comes.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		silent := "http://" + ln.Addr().String()
		start := time.Now()
		code, _, stderr := g.run(t, "queues", "stats", "--url", silent, "--timeout", "300ms")
		wantFailure(t, code, stderr, exitUnreachable, regexp.QuoteMeta("cannot reach the gateway at "+silent+": no answer within 300ms"))
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("gave up after %v, want about 300ms", d)
		}
	})

	t.Run("not fairq", func(t *testing.T) {
		// The SQS emulator is an HTTP server, not a gateway.
		code, _, stderr := g.run(t, "tenants", "list", "--url", testenv.SQSEndpoint(t))
		wantFailure(t, code, stderr, exitFailed, `GET /admin/v1/tenants: answer \d{3} .* that is not fairq's`)
	})

	t.Run("admin API off", func(t *testing.T) {
		off := startAdminGateway(t, false)
		code, _, stderr := off.run(t, "tenants", "show", "acme")
		wantFailure(t, code, stderr, exitFailed, `not_found: the gateway does not serve GET /admin/v1/tenants/acme: its admin API is off`)
	})

	t.Run("interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"fairq", "tenants", "list"}, func(k string) string {
			return map[string]string{"FAIRQ_ADMIN_URL": g.url, "FAIRQ_ADMIN_TOKEN": g.token}[k]
		}, strings.NewReader(""), &out, &errOut)
		wantFailure(t, code, errOut.String(), exitFailed, `interrupted$`)
	})
}

// TestAdminCLIUsage: command lines that cannot be understood exit 2 before
// any request (the gateway named is down: a request would exit 3), and
// every command's --help shows an example.
func TestAdminCLIUsage(t *testing.T) {
	vars := map[string]string{"FAIRQ_ADMIN_URL": "http://" + freeAddr(t), "FAIRQ_ADMIN_TOKEN": adminTestToken}
	for _, args := range [][]string{
		{"tenants"},
		{"tenants", "frobnicate"},
		{"tenants", "list", "extra"},
		{"tenants", "show"},
		{"tenants", "show", "a", "b"},
		{"tenants", "show", "a/b"},
		{"tenants", "pause"},
		{"tenants", "pause", "acme", "--ingest=maybe"},
		{"tenants", "purge", ""},
		{"keys", "revoke", "acme"},
		{"keys", "hash", "extra"},
		{"queues", "stats", "--timeout", "0s"},
		{"queues", "stats", "--url", "ftp://gateway"},
		{"queues", "stats", "--url", "http://user:secret@gateway"},
		{"dlq", "peek", "--max", "0"},
		{"dlq", "peek", "--ids", "a"},
		{"dlq", "redrive", "--ids", "a,,b"},
		{"dlq", "redrive", "--ids", "a", "--max", "3"},
		{"dlq", "redrive", "--batch", "0"},
		{"dlq", "redrive", "--tenant", "no such"},
		{"dlq", "purge", "--max", "-1"},
	} {
		code, stdout, stderr := cliEnv(t, vars, args...)
		if code != exitUsage || stdout != "" {
			t.Errorf("fairq %s: exit %d, stdout %q, stderr %q; want 2", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	for _, sub := range [][]string{
		{"tenants", "list"}, {"tenants", "show"}, {"tenants", "set"}, {"tenants", "pause"}, {"tenants", "resume"}, {"tenants", "purge"},
		{"keys", "issue"}, {"keys", "revoke"}, {"queues", "stats"}, {"dlq", "peek"}, {"dlq", "redrive"}, {"dlq", "purge"},
	} {
		code, stdout, _ := cliEnv(t, nil, append(sub, "--help")...)
		name := strings.Join(sub, " ")
		if code != 0 || !strings.Contains(stdout, "Usage: fairq "+name) || !regexp.MustCompile(`Example:\n  .*fairq `).MatchString(stdout) {
			t.Errorf("fairq %s --help: exit %d, stdout:\n%s\nwant 0, its usage and an example", name, code, stdout)
		}
	}
	if code, stdout, _ := cliEnv(t, nil, "dlq", "--help"); code != 0 || !strings.Contains(stdout, "peek|purge|redrive") {
		t.Errorf("fairq dlq --help: exit %d, stdout %q", code, stdout)
	}
}

func TestHasFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--config", "f.yaml"}, true},
		{[]string{"-config", "f.yaml"}, true},
		{[]string{"--tenant", "acme", "--config=f.yaml"}, true},
		{[]string{"-config=f.yaml"}, true},
		{[]string{"--tenant", "config"}, false},
		{[]string{"--configs", "x"}, false},
		{[]string{"--", "--config", "f.yaml"}, false},
		{nil, false},
	} {
		if got := hasFlag(tt.args, "config"); got != tt.want {
			t.Errorf("hasFlag(%q, config) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

func TestPrintable(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"status 500", "status 500"},
		{`{"a": "é"}`, `{"a": "é"}`},
		{"line\nnext\ttab", `line\nnext\ttab`},
		{"\x1b]0;owned\x07", `\x1b]0;owned\a`},
		{"bad \xff byte", `bad \xff byte`},
		{"c1 \u009b", `c1 \u009b`},
	} {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
