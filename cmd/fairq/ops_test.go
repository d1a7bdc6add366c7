package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

// TestWorkerReadyz: the worker's /readyz fails while the application does
// not accept connections at the push URL, and while the queue backend
// does not answer; it passes when both do.
func TestWorkerReadyz(t *testing.T) {
	// A port nothing listens on, yet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	appAddr := ln.Addr().String()
	ln.Close()
	base, _ := sqsConfig(t, fmt.Sprintf("worker: {push_url: %q}\n", "http://"+appAddr+"/"))
	if code, _, stderr := cli(t, "queues", "create", "--config", base); code != 0 {
		t.Fatalf("queues create: %d %s", code, stderr)
	}
	addr := freeAddr(t)
	startRole(t, "worker", base, addr)
	waitHTTP(t, "http://"+addr+"/healthz", http.StatusOK, 20*time.Second)
	res := get(t, "http://"+addr+"/readyz")
	if res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "application") {
		t.Errorf("application down: /readyz %d %s, want 503 naming the application", res.status, res.body)
	}
	// The application comes up.
	ln, err = net.Listen("tcp", appAddr)
	if err != nil {
		t.Skipf("the application's port was taken meanwhile: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	waitHTTP(t, "http://"+addr+"/readyz", http.StatusOK, 10*time.Second)

	// A worker whose queue backend does not answer is not ready.
	bad := filepath.Join(t.TempDir(), "dead-backend.yaml")
	yaml := fmt.Sprintf("backend: sqs\nsqs: {endpoint: %q, queue_prefix: dead}\nworker: {push_url: %q}\n", "http://"+freeAddr(t), "http://"+appAddr+"/")
	if err := os.WriteFile(bad, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	addr2 := freeAddr(t)
	startRole(t, "worker", bad, addr2)
	waitHTTP(t, "http://"+addr2+"/healthz", http.StatusOK, 20*time.Second)
	if res := get(t, "http://"+addr2+"/readyz"); res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "queue backend") {
		t.Errorf("backend down: /readyz %d %s, want 503 naming the queue backend", res.status, res.body)
	}
}

type answer struct {
	status int
	body   string
}

func get(t *testing.T, url string) answer {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(res.Body).WriteTo(&b)
	return answer{res.StatusCode, b.String()}
}

// TestLogsAreJSON: a gateway and a worker write nothing but JSON records
// to stderr, through a Redis outage and its end (go-redis's own lines
// included), and those records say what happened.
func TestLogsAreJSON(t *testing.T) {
	const key = "fq_json_logs_key"
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	url, pushes := app(t, func(int) int { return http.StatusOK })
	base, _ := sqsConfig(t, fmt.Sprintf(`redis: {addr: %q}
tenants:
  - {id: acme, api_keys: [%q]}
worker: {push_url: %q}
log: {level: info}
`, proxy.Addr(), tenant.HashKey(key), url))
	if code, _, stderr := cli(t, "queues", "create", "--config", base); code != 0 {
		t.Fatalf("queues create: %d %s", code, stderr)
	}
	gwAddr, wkAddr := freeAddr(t), freeAddr(t)
	wkLog := startRole(t, "worker", base, wkAddr)
	gwLog := startRole(t, "gateway", base, gwAddr)
	gw := "http://" + gwAddr
	waitHTTP(t, gw+"/readyz", http.StatusOK, 20*time.Second)
	enqueue(t, gw, key, `{"body": "before"}`)
	next(t, pushes, 30*time.Second)

	proxy.SetDown(true)
	// Enqueue through the outage (fail open) until the gateway says so.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(gwLog.String(), "redis unreachable") {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not log the outage:\n%s", gwLog)
		}
		enqueue(t, gw, key, `{"body": "during"}`)
		time.Sleep(100 * time.Millisecond) // a client's pace
	}
	next(t, pushes, 30*time.Second)
	proxy.SetDown(false)
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(gwLog.String(), "redis is back") {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not log Redis's return:\n%s", gwLog)
		}
		enqueue(t, gw, key, `{"body": "after"}`)
		time.Sleep(100 * time.Millisecond)
	}
	next(t, pushes, 30*time.Second)

	t.Cleanup(func() { // after the roles stopped: cleanups run last-in first-out
		for name, log := range map[string]*testenv.LogBuffer{"gateway": gwLog, "worker": wkLog} {
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			if len(lines) < 3 {
				t.Errorf("%s wrote %d lines; the test saw too little to prove anything", name, len(lines))
			}
			for i, l := range lines {
				var rec map[string]any
				if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["msg"] == nil || rec["level"] == nil || rec["time"] == nil {
					t.Errorf("%s stderr line %d is not a JSON log record (%v): %s", name, i+1, err, l)
				}
			}
		}
		if !strings.Contains(wkLog.String(), `"level":"WARN"`) {
			t.Errorf("the worker logged no warning through the outage:\n%s", wkLog)
		}

	})
}

// TestRedisLogsRouted: the lines go-redis writes on its own (here: it
// cannot dial) come through the process's logger as JSON records, not on
// the side.
func TestRedisLogsRouted(t *testing.T) {
	var out testenv.LogBuffer
	cfg := config.Default()
	newLogger(env{stderr: &out}, cfg, false)
	c := redis.NewClient(&redis.Options{Addr: freeAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	for range 10 {
		_ = c.Ping(context.Background()).Err()
	}
	var found bool
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("not a JSON record: %s", l)
		}
		found = found || rec["component"] == "go-redis"
	}
	if !found {
		t.Errorf("no go-redis record after failed dials; the logger got:\n%s", out.String())
	}
}
