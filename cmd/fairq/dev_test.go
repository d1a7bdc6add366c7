package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

// push is one request the test application received.
type push struct {
	header http.Header
	body   string
}

// app is an application behind the worker: it records each push and
// answers with the status statusFunc returns for it.
func app(t *testing.T, statusFunc func(n int) int) (url string, pushes <-chan push) {
	t.Helper()
	ch := make(chan push, 16)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n++
		status := statusFunc(n)
		mu.Unlock()
		ch <- push{header: r.Header.Clone(), body: string(body)}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/work", ch
}

// startDev runs `fairq dev` with the given YAML until the test ends and
// returns the system and the base URL of its API.
func startDev(t *testing.T, yaml string, o devOptions, getenv func(string) string) (*system, string, *testenv.LogBuffer) {
	t.Helper()
	if yaml != "" {
		o.config = filepath.Join(t.TempDir(), "fairq.yaml")
		if err := os.WriteFile(o.config, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	stderr := &testenv.LogBuffer{}
	e := env{getenv: getenv, stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr}
	ctx, cancel := context.WithCancel(context.Background())
	type up struct {
		s    *system
		addr net.Addr
	}
	upc := make(chan up, 1)
	done := make(chan error, 1)
	go func() { done <- dev(ctx, e, o, func(s *system, a net.Addr) { upc <- up{s, a} }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev returned %v; stderr:\n%s", err, stderr)
		}
	})
	select {
	case u := <-upc:
		return u.s, "http://" + u.addr.String(), stderr
	case err := <-done:
		t.Fatalf("dev exited early: %v; stderr:\n%s", err, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("dev did not come up; stderr:\n%s", stderr)
	}
	return nil, "", nil
}

// enqueue posts one message and returns the decoded 202 answer.
func enqueue(t *testing.T, base, key, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/messages: status %d, body %s", res.StatusCode, raw)
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("decode 202 body %s: %v", raw, err)
	}
	return got
}

func next(t *testing.T, pushes <-chan push, within time.Duration) push {
	t.Helper()
	select {
	case p := <-pushes:
		return p
	case <-time.After(within):
		t.Fatalf("no push within %v", within)
		return push{}
	}
}

// TestDevEndToEnd sends a message through the wiring of `fairq dev` on each
// backend: enqueue over HTTP, pushed to the application with the aws-sqsd
// headers, redelivered with receive count 2 after a 500, deleted after a
// 200.
func TestDevEndToEnd(t *testing.T) {
	const key = "fq_end_to_end_test_key"
	backends := map[string]func(t *testing.T) (string, func(string) string){
		"memory": func(t *testing.T) (string, func(string) string) { return "backend: memory\n", nil },
		// The same on a fleet's shared state: registry, limits, backlog
		// counters, idempotency keys and fleet registration in Redis.
		"memory+redis": func(t *testing.T) (string, func(string) string) {
			return fmt.Sprintf("backend: memory\nredis: {addr: %q}\nsqs: {queue_prefix: %s}\n", testenv.RedisAddr(t), testenv.Prefix(t)), nil
		},
		"sqs": func(t *testing.T) (string, func(string) string) {
			endpoint := testenv.SQSEndpoint(t)
			yaml := fmt.Sprintf("backend: sqs\nsqs: {endpoint: %q, queue_prefix: %s, region: us-east-1}\n", endpoint, testenv.Prefix(t))
			// The SDK's default credential chain reads the environment;
			// the emulator accepts any key.
			t.Setenv("AWS_ACCESS_KEY_ID", "test")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
			return yaml, nil
		},
	}
	for name, setup := range backends {
		t.Run(name, func(t *testing.T) {
			url, pushes := app(t, func(n int) int {
				if n == 1 {
					return http.StatusInternalServerError
				}
				return http.StatusOK
			})
			backendYAML, getenv := setup(t)
			yaml := backendYAML + fmt.Sprintf(`listen: 127.0.0.1:0
tenants:
  - id: acme
    api_keys: [%q]
worker:
  push_url: %q
  visibility_timeout: 2s
  error_visibility_timeout: 1s
`, tenant.HashKey(key), url)
			s, base, _ := startDev(t, yaml, devOptions{pushURL: url}, getenv)
			if name == "sqs" {
				// dev creates the queues on the memory backend only.
				if _, err := createQueues(t.Context(), s.backend, s.cfg); err != nil {
					t.Fatal(err)
				}
			}

			before := time.Now().UTC().Truncate(time.Second)
			got := enqueue(t, base, key, `{"body": {"hello": "world"}, "attributes": {"color": "blue"}}`)
			id, _ := got["id"].(string)
			q, _ := got["queue"].(string)
			if id == "" || got["tenant"] != "acme" || !strings.HasPrefix(q, s.cfg.SQS.QueuePrefix+"-live-") {
				t.Fatalf("202 body = %v; want an id, tenant acme and a live queue", got)
			}

			first := next(t, pushes, 20*time.Second)
			second := next(t, pushes, 20*time.Second)
			for i, p := range []push{first, second} {
				h := p.header
				checks := map[string]string{
					"Content-Type":             "application/json",
					"X-Aws-Sqsd-Msgid":         id,
					"X-Aws-Sqsd-Queue":         q,
					"X-Aws-Sqsd-Receive-Count": fmt.Sprint(i + 1),
					"X-Aws-Sqsd-Attr-Color":    "blue",
					"X-Fairq-Tenant":           "acme",
				}
				for k, want := range checks {
					if got := h.Get(k); got != want {
						t.Errorf("push %d: %s = %q, want %q", i+1, k, got, want)
					}
				}
				if ua := h.Get("User-Agent"); !regexp.MustCompile(`^aws-sqsd/1\.11 \(fairq/.+\)$`).MatchString(ua) {
					t.Errorf("push %d: User-Agent = %q", i+1, ua)
				}
				for _, k := range []string{"X-Aws-Sqsd-First-Received-At", "X-Fairq-Enqueued-At"} {
					at, err := time.Parse(time.RFC3339, h.Get(k))
					if err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
						t.Errorf("push %d: %s = %q (%v), want a time since %v", i+1, k, h.Get(k), err, before)
					}
				}
				if p.body != `{"hello":"world"}` && p.body != `{"hello": "world"}` {
					t.Errorf("push %d: body = %q", i+1, p.body)
				}
			}
			if first.header.Get("X-Aws-Sqsd-First-Received-At") != second.header.Get("X-Aws-Sqsd-First-Received-At") {
				t.Errorf("first-received-at changed between deliveries: %q, %q",
					first.header.Get("X-Aws-Sqsd-First-Received-At"), second.header.Get("X-Aws-Sqsd-First-Received-At"))
			}

			// After the 200 the message is deleted: every queue drains.
			deadline := time.Now().Add(15 * time.Second)
			for {
				d, err := s.backend.Depth(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				if d.Visible+d.NotVisible+d.Delayed == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("queue %s still holds %+v after a 200", q, d)
				}
				select {
				case p := <-pushes:
					t.Fatalf("delivered again after a 200: %v", p.header)
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
}

// TestDevDemoTenant runs `fairq dev` as a new user does: no configuration,
// the demo key printed once on stderr, a message enqueued with it logged by
// the built-in handler.
func TestDevDemoTenant(t *testing.T) {
	_, base, stderr := startDev(t, "", devOptions{listen: "127.0.0.1:0"}, nil)
	m := regexp.MustCompile(`(?m)^api key for tenant demo: (\S+)$`).FindAllStringSubmatch(stderr.String(), -1)
	if len(m) != 1 {
		t.Fatalf("want one line 'api key for tenant demo: <key>' on stderr, got %d; stderr:\n%s", len(m), stderr)
	}
	key := m[0][1]
	got := enqueue(t, base, key, `{"body": "hello from the README"}`)
	id := got["id"].(string)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), id) {
		if time.Now().After(deadline) {
			t.Fatalf("message %s was not logged by the built-in handler; stderr:\n%s", id, stderr)
		}
		time.Sleep(20 * time.Millisecond) // polling a log, not synchronising goroutines
	}
	if strings.Contains(stderr.String(), "hello from the README") {
		t.Errorf("the built-in handler logged a message body; stderr:\n%s", stderr)
	}
	if strings.Count(stderr.String(), key) != 1 {
		t.Errorf("the API key appears more than once on stderr")
	}
}
