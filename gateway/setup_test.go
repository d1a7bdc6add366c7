package gateway_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/deadletter"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/gateway/gatewaytest"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

func ptr[T any](v T) *T { return &v }

// Keys of the test tenants.
const (
	acmeKey   = "acme-secret-key"
	globexKey = "globex-secret-key"
	slowKey   = "slow-secret-key"
	benchKey  = "bench-secret-key"
)

// testTenants: acme and globex with room to spare, slow at 1 message/s
// with a bucket of 2.
func testTenants() []tenant.Spec {
	return []tenant.Spec{
		{ID: "acme", APIKeys: []string{tenant.HashKey(acmeKey)}, Limits: tenant.Limits{IngestRate: ptr(10000.0), IngestBurst: ptr(10000)}},
		{ID: "globex", APIKeys: []string{tenant.HashKey(globexKey)}, Limits: tenant.Limits{IngestRate: ptr(10000.0), IngestBurst: ptr(10000)}},
		{ID: "slow", APIKeys: []string{tenant.HashKey(slowKey)}, Limits: tenant.Limits{IngestRate: ptr(1.0), IngestBurst: ptr(2)}},
		{ID: "bench", APIKeys: []string{tenant.HashKey(benchKey)}, Limits: tenant.Limits{IngestRate: ptr(1e12), IngestBurst: ptr(1 << 40)}},
	}
}

// clock is a manual clock.
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

// fixture is a started gateway over a Memory backend.
type fixture struct {
	srv     *gateway.Server
	mem     *queue.Memory
	flaky   *gatewaytest.Flaky
	names   queue.Names
	picker  *gatewaytest.RoundRobin
	tenants *tenant.Registry
	reg     *prometheus.Registry
	clock   *clock
}

// setup starts a gateway over a fresh Memory backend with the test tenants;
// change adjusts the config before New.
func setup(t testing.TB, change ...func(*gateway.Config)) *fixture {
	t.Helper()
	prepareContract(t) // f.do holds every answer to it
	ctx := context.Background()
	f := &fixture{
		mem:   queue.NewMemory(queue.MemoryConfig{}),
		names: queue.PoolNames("t", 4),
		reg:   prometheus.NewRegistry(),
		clock: &clock{now: time.Date(2030, 5, 6, 7, 8, 9, 123_000_000, time.UTC)},
	}
	for _, n := range f.names.All() {
		if _, err := f.mem.Create(ctx, queue.Spec{Name: n, MaxMessageSize: queue.MaxMessageSizeCap}); err != nil {
			t.Fatal(err)
		}
	}
	f.flaky = gatewaytest.NewFlaky(f.mem)
	f.picker = gatewaytest.NewRoundRobin(len(f.names.Live))
	dead, err := deadletter.New(deadletter.Config{Backend: f.mem, Names: f.names, Picker: f.picker})
	if err != nil {
		t.Fatal(err)
	}
	f.tenants, err = tenant.New(tenant.Config{Tenants: testTenants()})
	if err != nil {
		t.Fatal(err)
	}
	redisMetrics, err := degrade.NewMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Config{
		Backend:      f.flaky,
		Names:        f.names,
		Picker:       f.picker,
		Tenants:      f.tenants,
		Limiter:      throttle.NewLocalLimiter(throttle.LocalConfig{Now: f.clock.Now}),
		RedisMetrics: redisMetrics,
		Registerer:   f.reg,
		Gatherer:     f.reg,
		Now:          f.clock.Now,
		DeadLetters:  dead,
	}
	for _, c := range change {
		c(&cfg)
	}
	f.srv, err = gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.srv.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return f
}

// withoutDeadLetters leaves the dead-letter tools out of the gateway.
func withoutDeadLetters(c *gateway.Config) { c.DeadLetters = nil }

// request is one HTTP request to the gateway.
type request struct {
	method, path string
	key          string // API key; "" sends no Authorization
	body         string
	header       map[string]string
	contentType  *string // nil: application/json
}

func (f *fixture) do(t testing.TB, r request) *httptest.ResponseRecorder {
	t.Helper()
	method := r.method
	if method == "" {
		method = http.MethodPost
	}
	path := r.path
	if path == "" {
		path = "/v1/messages"
	}
	req := httptest.NewRequest(method, path, strings.NewReader(r.body))
	ct := "application/json"
	if r.contentType != nil {
		ct = *r.contentType
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, req)
	keepsContract(t, req, w.Result())
	return w
}

// depth returns the number of messages on the queues named, all live
// queues if none, delayed and in-flight ones included.
func (f *fixture) depth(t testing.TB, queues ...string) int {
	t.Helper()
	if len(queues) == 0 {
		queues = f.names.Live
	}
	n := 0
	for _, q := range queues {
		d, err := f.mem.Depth(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		n += d.Visible + d.NotVisible + d.Delayed
	}
	return n
}

// receive takes the one visible message of a queue.
func (f *fixture) receive(t testing.TB, q string) queue.Message {
	t.Helper()
	msgs, err := f.mem.Receive(context.Background(), q, queue.ReceiveOptions{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("received %d messages from %s, want 1", len(msgs), q)
	}
	return msgs[0]
}

// problem is an RFC 9457 answer.
type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Code      string `json:"code"`
	RequestID string `json:"request_id"`
}

func decode[T any](t testing.TB, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	body, _ := io.ReadAll(w.Result().Body)
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("answer %d is not the JSON expected: %v\n%s", w.Code, err, body)
	}
	return v
}

// accepted is a 202 answer.
type accepted struct {
	ID         string `json:"id"`
	Tenant     string `json:"tenant"`
	Queue      string `json:"queue"`
	EnqueuedAt string `json:"enqueued_at"`
}

func decodeResponse[T any](t testing.TB, r *http.Response) T {
	t.Helper()
	var v T
	if r == nil {
		t.Fatal("no response")
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("answer %d is not the JSON expected: %v\n%s", r.StatusCode, err, body)
	}
	return v
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// receiveAll receives up to a batch of visible messages.
var receiveAll = queue.ReceiveOptions{Max: 10}

func decodeString[T any](t testing.TB, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not the JSON expected: %v\n%s", err, s)
	}
	return v
}

// fairqID returns the id a message was enqueued under: the id of the
// gateway's answer, in fairq-meta.
func fairqID(t testing.TB, m queue.Message) string {
	t.Helper()
	meta, err := envelope.Decode(m.Attributes[envelope.AttrMeta])
	if err != nil || meta.ID == "" {
		t.Fatalf("message %s has no fairq id in %s (%v)", m.ID, envelope.AttrMeta, err)
	}
	return meta.ID
}
