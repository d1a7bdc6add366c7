package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

// deliveries is an application that records each delivery's tenant and
// body, and answers 200.
type deliveries struct {
	mu  sync.Mutex
	got map[string][]string // tenant → bodies, in order of arrival
}

func (d *deliveries) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.got[r.Header.Get("X-Fairq-Tenant")] = append(d.got[r.Header.Get("X-Fairq-Tenant")], string(body))
	d.mu.Unlock()
}

// of returns the bodies delivered of tenant, sorted.
func (d *deliveries) of(tenant string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(slices.Values(d.got[tenant]))
}

// waitFor waits until tenant's deliveries are want, or fails.
func (d *deliveries) waitFor(t *testing.T, tenant string, want []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !slices.Equal(d.of(tenant), want) {
		if time.Now().After(deadline) {
			t.Fatalf("tenant %s: delivered %q within %v, want %q", tenant, d.of(tenant), within, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return slices.Sorted(slices.Values(out))
}

// adminPost calls the admin API and fails the test unless it answers 200.
func adminPost(t *testing.T, gw, path, body string) {
	t.Helper()
	req, err := http.NewRequest("POST", gw+"/admin/v1"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+operateAdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, res.StatusCode, raw)
	}
}

const operateAdminToken = "operate-admin-token"

// TestPauseResumePurge holds the tenant controls to their promise on the
// production shape: a gateway and two workers apart, on Redis and the SQS
// emulator. No message of a paused tenant reaches the application; after
// the resume all of them do, once; after a purge none enqueued before it
// does and every later one does; the other tenant is never touched.
func TestPauseResumePurge(t *testing.T) {
	const keyA, keyB = "fq_operate_key_a", "fq_operate_key_b"
	app := &deliveries{got: map[string][]string{}}
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	base, _ := sqsConfig(t, fmt.Sprintf(`redis: {addr: %q}
admin: {token_sha256: %s}
tenants:
  - {id: a, api_keys: [%q]}
  - {id: b, api_keys: [%q]}
worker: {push_url: %q, connections: 4}
`, testenv.RedisAddr(t), strings.TrimPrefix(tenant.HashKey(operateAdminToken), "sha256:"), tenant.HashKey(keyA), tenant.HashKey(keyB), srv.URL))
	if code, _, stderr := cli(t, "queues", "create", "--config", base); code != 0 {
		t.Fatalf("queues create: %d %s", code, stderr)
	}
	gwAddr := freeAddr(t)
	startRole(t, "worker", base, freeAddr(t))
	startRole(t, "worker", base, freeAddr(t))
	startRole(t, "gateway", base, gwAddr)
	gw := "http://" + gwAddr
	waitHTTP(t, gw+"/healthz", http.StatusOK, 20*time.Second)
	send := func(key string, names []string) {
		for _, n := range names {
			enqueue(t, gw, key, fmt.Sprintf(`{"body": %q}`, n))
		}
	}

	// A change of state reaches every worker within a second (the
	// registry polls Redis every 500 ms).
	const propagation = 1500 * time.Millisecond

	// Paused: a's messages are accepted and wait; b's run.
	adminPost(t, gw, "/tenants/a/pause", "")
	time.Sleep(propagation)
	send(keyA, bodies("paused", 5))
	send(keyB, bodies("b1", 5))
	app.waitFor(t, "b", bodies("b1", 5), 30*time.Second)
	time.Sleep(3 * time.Second) // a's messages have had time to be received, and parked
	if got := app.of("a"); len(got) != 0 {
		t.Fatalf("a paused: %q delivered", got)
	}

	// Resumed: every one of a's messages runs, once.
	adminPost(t, gw, "/tenants/a/resume", "")
	app.waitFor(t, "a", bodies("paused", 5), 30*time.Second)

	// Purged: a's messages enqueued before the purge instant are deleted
	// unseen (paused first, so that none runs before it); those after it
	// run; b's are untouched throughout.
	adminPost(t, gw, "/tenants/a/pause", "")
	time.Sleep(propagation)
	send(keyA, bodies("old", 5))
	send(keyB, bodies("b2", 3))
	time.Sleep(10 * time.Millisecond) // the purge instant is after the last old message's
	adminPost(t, gw, "/tenants/a/purge", "")
	send(keyA, bodies("new", 4))
	adminPost(t, gw, "/tenants/a/resume", "")
	want := append(bodies("new", 4), bodies("paused", 5)...)
	slices.Sort(want)
	app.waitFor(t, "a", want, 30*time.Second)
	app.waitFor(t, "b", append(bodies("b1", 5), bodies("b2", 3)...), 30*time.Second)
	time.Sleep(3 * time.Second) // an old message delivered late would show now
	if got := app.of("a"); !slices.Equal(got, want) {
		t.Errorf("a after the purge: %q, want %q", got, want)
	}

	// Paused with its ingest: refused at the door.
	adminPost(t, gw, "/tenants/a/pause", `{"pause_ingest": true}`)
	if code, problem := enqueueProblem(t, gw, keyA); code != http.StatusLocked || problem != "tenant_paused" {
		t.Errorf("enqueue while a's ingest is paused: %d %s, want 423 tenant_paused", code, problem)
	}
}
