package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startRole runs `fairq role --config` with the configuration at base
// plus a listen address, until the test ends; then it cancels its context
// (as SIGTERM does) and checks that it exits 0. It returns the command's
// stderr.
func startRole(t *testing.T, role, base, listen string) *testenv.LogBuffer {
	t.Helper()
	path := filepath.Join(t.TempDir(), role+".yaml")
	raw, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(raw, []byte("listen: "+listen+"\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	stderr := &testenv.LogBuffer{}
	go func() {
		done <- run(ctx, []string{"fairq", role, "--config", path}, func(string) string { return "" },
			strings.NewReader(""), io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("fairq %s exited %d after its context ended, want 0; stderr:\n%s", role, code, stderr)
			}
		case <-time.After(40 * time.Second):
			t.Errorf("fairq %s did not stop", role)
		}
	})
	return stderr
}

// waitHTTP polls url until it answers want, or fails the test after d.
func waitHTTP(t *testing.T, url string, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %d within %v (last: %v %v)", url, want, d, res, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a port, not synchronising goroutines
	}
}

// TestGatewayAndWorkerApart runs the production shape: `fairq gateway` and
// `fairq worker` as separate commands sharing SQS (the emulator) and Redis.
// A message enqueued at the gateway reaches the application through the
// worker, and both commands exit 0 when their context ends (SIGTERM).
func TestGatewayAndWorkerApart(t *testing.T) {
	const key = "fq_apart_test_key"
	url, pushes := app(t, func(int) int { return http.StatusOK })
	base, _ := sqsConfig(t, fmt.Sprintf(`redis: {addr: %q}
tenants:
  - {id: acme, api_keys: [%q]}
worker: {push_url: %q}
`, testenv.RedisAddr(t), tenant.HashKey(key), url))
	if code, _, stderr := cli(t, "queues", "create", "--config", base); code != 0 {
		t.Fatalf("queues create: %d %s", code, stderr)
	}
	gwAddr, wkAddr := freeAddr(t), freeAddr(t)
	startRole(t, "worker", base, wkAddr)
	startRole(t, "gateway", base, gwAddr)
	gw := "http://" + gwAddr
	waitHTTP(t, gw+"/healthz", http.StatusOK, 20*time.Second)
	got := enqueue(t, gw, key, `{"body": "apart"}`)
	p := next(t, pushes, 30*time.Second)
	if p.header.Get("X-Aws-Sqsd-Msgid") != got["id"] || p.body != "apart" {
		t.Errorf("push = %q %v, want the message %v", p.body, p.header, got["id"])
	}
	res, err := http.Get("http://" + wkAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "fairq_worker_in_flight") {
		t.Errorf("worker /metrics lacks fairq_worker_in_flight")
	}
	if strings.Contains(string(body), "fairq_shard_depth_stale") {
		t.Errorf("worker /metrics reports the gateway's shard tracker, which a worker does not run")
	}
}
