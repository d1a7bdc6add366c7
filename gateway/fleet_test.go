package gateway_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/gateway/gatewaytest"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// fleet is a set of gateways sharing one Redis and one fauxqs, as a
// deployment of several gateway processes does.
type fleet struct {
	prefix  string
	redis   *redis.Client
	sqs     queue.Backend
	flaky   *gatewaytest.Flaky
	names   queue.Names
	backlog *backlog.Counter // a worker's view of the backlogs
	gws     []*gateway.Server
	counts  []*backlog.Tracker // of each gateway
}

// stop stops the gateways, then their backlog counts, which the gateways
// added to until then: their counts are applied.
func (fl *fleet) stop(t *testing.T) {
	t.Helper()
	for _, gw := range fl.gws {
		if err := gw.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range fl.counts {
		if err := tr.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// flushCounts applies the backlog counts the gateways gathered so far.
func (fl *fleet) flushCounts(t *testing.T) {
	t.Helper()
	for _, tr := range fl.counts {
		if err := tr.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// newFleet starts n gateways on real Redis and fauxqs.
func newFleet(t *testing.T, n int, tenants []tenant.Spec, change ...func(*gateway.Config)) *fleet {
	t.Helper()
	ctx := context.Background()
	fl := &fleet{prefix: testenv.Prefix(t)}
	fl.redis = redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { fl.redis.Close() })
	fl.sqs = testenv.SQSBackend(t)
	fl.flaky = gatewaytest.NewFlaky(fl.sqs)
	fl.names = queue.PoolNames(fl.prefix, 2)
	for _, name := range fl.names.All() {
		if _, err := fl.sqs.Create(ctx, queue.Spec{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	keyPrefix := fl.prefix + ":"
	var err error
	if fl.backlog, err = backlog.New(backlog.Config{Redis: fl.redis, Prefix: keyPrefix}); err != nil {
		t.Fatal(err)
	}
	for range n {
		reg, err := tenant.New(tenant.Config{Tenants: tenants, Redis: fl.redis, Prefix: keyPrefix})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Stop(context.Background()) })
		rl, err := throttle.NewRedisLimiter(throttle.RedisConfig{Client: fl.redis, Prefix: keyPrefix})
		if err != nil {
			t.Fatal(err)
		}
		lim, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{Primary: rl})
		if err != nil {
			t.Fatal(err)
		}
		counter, err := backlog.New(backlog.Config{Redis: fl.redis, Prefix: keyPrefix})
		if err != nil {
			t.Fatal(err)
		}
		promReg := prometheus.NewRegistry()
		redisMetrics, err := degrade.NewMetrics(promReg)
		if err != nil {
			t.Fatal(err)
		}
		bl := tracker(t, backlog.TrackerConfig{Counter: counter, RedisMetrics: redisMetrics})
		fl.counts = append(fl.counts, bl)
		cfg := gateway.Config{
			RedisMetrics: redisMetrics,
			Backend:      fl.flaky,
			Names:        fl.names,
			Picker:       gatewaytest.NewRoundRobin(len(fl.names.Live)),
			Tenants:      reg,
			Limiter:      lim,
			Backlog:      bl,
			Redis:        fl.redis,
			RedisPrefix:  keyPrefix,
			Registerer:   promReg,
			Gatherer:     promReg,
		}
		for _, c := range change {
			c(&cfg)
		}
		gw, err := gateway.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := gw.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gw.Stop(context.Background()) })
		fl.gws = append(fl.gws, gw)
	}
	return fl
}

// post sends one message through gateway i.
func (fl *fleet) post(i int, key, body string, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	fl.gws[i].ServeHTTP(w, req)
	return w
}

// drain receives and deletes the messages of the live queues, by id: it
// long-polls until it has every id of want (or 15 s passed), then once
// more on each queue for any others. Messages are received with a short
// visibility timeout: a receive whose answer is lost on the way (the SDK
// then retries) leaves its messages invisible only that long.
func (fl *fleet) drain(t *testing.T, want map[string]bool) map[string]queue.Message {
	t.Helper()
	ctx := context.Background()
	all := map[string]queue.Message{}
	receive := func(q string, wait time.Duration) int {
		msgs, err := fl.sqs.Receive(ctx, q, queue.ReceiveOptions{Max: 10, Wait: wait, Visibility: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return 0
		}
		handles := make([]string, len(msgs))
		for i, m := range msgs {
			all[fairqID(t, m)] = m
			handles[i] = m.ReceiptHandle
		}
		if _, err := fl.sqs.Delete(ctx, q, handles); err != nil {
			t.Fatal(err)
		}
		return len(msgs)
	}
	missing := func() int {
		n := 0
		for id := range want {
			if _, ok := all[id]; !ok {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(15 * time.Second)
	for missing() > 0 && time.Now().Before(deadline) {
		for _, q := range fl.names.Live {
			receive(q, 100*time.Millisecond)
		}
	}
	for _, q := range fl.names.Live {
		for receive(q, 200*time.Millisecond) > 0 {
		}
	}
	return all
}

// missingFrom returns the ids of want not in got.
func missingFrom(want map[string]bool, got map[string]queue.Message) []string {
	var out []string
	for id := range want {
		if _, ok := got[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// TestFleetWideLimit: two gateways sharing Redis hold one limit for a
// tenant, within 10 %, and a tenant over its rate does not slow another.
func TestFleetWideLimit(t *testing.T) {
	// Not parallel: it measures a rate over real time.
	const rate, burst = 40.0, 10
	tenants := append(testTenants(), tenant.Spec{ID: "fleet", APIKeys: []string{tenant.HashKey("fleet-key")},
		Limits: tenant.Limits{IngestRate: ptr(rate), IngestBurst: ptr(burst)}})
	fl := newFleet(t, 2, tenants)

	const clients = 8 // per gateway: enough that some poll while others send
	const period = 2 * time.Second
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
		refused  int
		bad      []string
		ids      = map[string]bool{}
	)
	start := time.Now()
	deadline := start.Add(period)
	var last time.Time // the start of the last request
	for g := range fl.gws {
		for range clients {
			wg.Go(func() {
				tick := time.NewTicker(10 * time.Millisecond) // paces the client
				defer tick.Stop()
				for {
					sent := time.Now()
					if !sent.Before(deadline) {
						return
					}
					w := fl.post(g, "fleet-key", `{"body":"x"}`, nil)
					mu.Lock()
					if sent.After(last) {
						last = sent
					}
					switch w.Code {
					case http.StatusAccepted:
						admitted++
						ids[decode[accepted](t, w).ID] = true
					case http.StatusTooManyRequests:
						refused++
						if ra := w.Header().Get("Retry-After"); ra != "1" {
							bad = append(bad, "Retry-After "+ra)
						}
					default:
						bad = append(bad, w.Body.String())
					}
					mu.Unlock()
					<-tick.C
				}
			})
		}
	}
	// Meanwhile another tenant is not limited by the first's traffic.
	for range 5 {
		w := fl.post(1, globexKey, `{"body":"x"}`, nil)
		if w.Code != http.StatusAccepted {
			t.Errorf("globex during fleet's flood: %d %s", w.Code, w.Body)
			continue
		}
		mu.Lock()
		ids[decode[accepted](t, w).ID] = true
		mu.Unlock()
	}
	wg.Wait()
	elapsed := last.Sub(start)
	if len(bad) > 0 {
		t.Fatalf("unexpected answers: %.5q", bad)
	}
	want := float64(burst) + rate*elapsed.Seconds()
	t.Logf("admitted %d of %d in %v across 2 gateways; one limit allows %.0f", admitted, admitted+refused, elapsed, want)
	if math.Abs(float64(admitted)-want) > 0.1*want {
		t.Errorf("admitted %d, want %.0f ± 10%%: the limit is not fleet-wide", admitted, want)
	}
	if missing := missingFrom(ids, fl.drain(t, ids)); len(missing) > 0 {
		t.Errorf("%d accepted messages are not on the queues", len(missing))
	}
}

// TestRetryAfterOnRedis: a refused client that waits Retry-After is
// admitted.
func TestRetryAfterOnRedis(t *testing.T) {
	// Not parallel: it waits real time.
	tenants := append(testTenants(), tenant.Spec{ID: "trickle", APIKeys: []string{tenant.HashKey("trickle-key")},
		Limits: tenant.Limits{IngestRate: ptr(0.5), IngestBurst: ptr(1)}})
	fl := newFleet(t, 1, tenants)
	if w := fl.post(0, "trickle-key", `{"body":"x"}`, nil); w.Code != http.StatusAccepted {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	w := fl.post(0, "trickle-key", `{"body":"x"}`, nil)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("second: %d Retry-After %q, want 429 and 2", w.Code, w.Header().Get("Retry-After"))
	}
	if h := w.Header(); h.Get("RateLimit-Limit") != "1" || h.Get("RateLimit-Remaining") != "0" || h.Get("RateLimit-Reset") != "2" {
		t.Errorf("RateLimit headers %v", h)
	}
	time.Sleep(2 * time.Second) // the subject under test: what waiting Retry-After yields
	if w := fl.post(0, "trickle-key", `{"body":"x"}`, nil); w.Code != http.StatusAccepted {
		t.Fatalf("after waiting Retry-After: %d %s", w.Code, w.Body)
	}
}

// TestBackpressureOnRedis: the backlog in Redis, added to by the gateways
// and taken from by workers, shrinks admission and stops it at
// max_backlog.
func TestBackpressureOnRedis(t *testing.T) {
	t.Parallel()
	tenants := append(testTenants(), bpTenant)
	fl := newFleet(t, 2, tenants)
	ctx := context.Background()
	if err := fl.backlog.Add(ctx, "bp", 1500); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	start := time.Now()
	for i := range 200 {
		w := fl.post(i%2, "bp-key", `{"body":"x"}`, nil)
		if w.Code != http.StatusAccepted {
			break
		}
		admitted++
	}
	// Halfway from soft to max: a bucket of 50, refilling at no more than
	// 50/s while the requests take.
	if most := 50 + int(50*time.Since(start).Seconds()); admitted < 50 || admitted > most {
		t.Errorf("admitted %d at once at a backlog of 1500, want 50 to %d", admitted, most)
	}
	fl.flushCounts(t)
	if n, _ := fl.backlog.Get(ctx, "bp"); n != int64(1500+admitted) {
		t.Errorf("backlog %d, want 1500 + the %d admitted", n, admitted)
	}
	if err := fl.backlog.Add(ctx, "bp", 500); err != nil {
		t.Fatal(err)
	}
	time.Sleep(backlog.MaxStaleDefault) // the gateways' cached counts age out
	w := fl.post(0, "bp-key", `{"body":"x"}`, nil)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "backlog_full") {
		t.Fatalf("at max_backlog: %d %s", w.Code, w.Body)
	}
	// Workers finish messages: admission resumes.
	if err := fl.backlog.Done(ctx, "bp", 1200); err != nil {
		t.Fatal(err)
	}
	time.Sleep(backlog.MaxStaleDefault)
	if w := fl.post(1, "bp-key", `{"body":"x"}`, nil); w.Code != http.StatusAccepted {
		t.Fatalf("below soft again: %d %s", w.Code, w.Body)
	}
}
