package spillover_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// world is a pool of queues, optionally a Redis, a tenant registry and an
// application written to the aws-sqsd contract that counts what it is
// given, for workers to run against.
type world struct {
	t       testing.TB
	b       queue.Backend
	names   queue.Names
	redis   *redis.Client // nil: limits local to each worker
	prefix  string        // of the Redis keys
	tenants *tenant.Registry
	app     *app
}

// newWorld makes a world on the backend kind ("memory" or "sqs", the
// emulator), with Redis or without, with two live queues.
func newWorld(t testing.TB, kind string, withRedis bool, tenants map[string]tenant.Limits) *world {
	t.Helper()
	w := &world{t: t, prefix: testenv.Prefix(t) + ":"}
	qprefix := "t"
	switch kind {
	case "memory":
		w.b = queue.NewMemory(queue.MemoryConfig{})
	case "sqs":
		w.b = testenv.SQSBackend(t)
		qprefix = testenv.Prefix(t)
	default:
		t.Fatalf("unknown backend %q", kind)
	}
	w.names = queue.PoolNames(qprefix, 2)
	for _, name := range w.names.All() {
		spec := queue.Spec{Name: name, VisibilityTimeout: 30 * time.Second}
		if name != w.names.DLQ {
			spec.DeadLetter, spec.MaxReceiveCount = w.names.DLQ, 100 // the worker dead-letters first
		}
		if _, err := w.b.Create(context.Background(), spec); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	if withRedis {
		w.redis = redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		t.Cleanup(func() { w.redis.Close() })
	}
	w.tenants = registry(t, tenants)
	w.app = newApp(t)
	return w
}

// send puts messages on q, in batches of ten: body is the message's id
// (ids are unique across the test), enqueued at the given time.
func (w *world) send(q, tenantID string, enqueued time.Time, ids ...string) {
	w.t.Helper()
	for chunk := range slices.Chunk(ids, queue.MaxBatch) {
		entries := make([]queue.Entry, len(chunk))
		for i, id := range chunk {
			meta := envelope.Meta{EnqueuedAt: enqueued.UnixMilli(), RequestID: id, Origin: q}
			entries[i] = queue.Entry{ID: fmt.Sprint(i), Body: id, Attributes: map[string]string{
				envelope.AttrTenant: tenantID,
				envelope.AttrMeta:   meta.Encode(),
			}}
		}
		res, err := w.b.Send(context.Background(), q, entries)
		if err != nil {
			w.t.Fatalf("send to %s: %v", q, err)
		}
		for _, r := range res {
			if r.Err != nil {
				w.t.Fatalf("send to %s: %v", q, r.Err)
			}
		}
	}
}

// ids returns n ids "<name>-<i>".
func ids(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", name, i)
	}
	return out
}

// workerOptions are what tests vary of a worker.
type workerOptions struct {
	connections      int
	visibility       time.Duration
	lease            time.Duration // of the Redis semaphore; 0 uses 30 s
	concurrencyDelay time.Duration
	backlogAge       time.Duration
	dropAge          time.Duration
	redis            *redis.Client // the worker's own connection to the world's Redis; nil shares the world's
}

// redisMetricsOn registers, once, the metrics of the Redis fallbacks on
// reg, as a process does.
func redisMetricsOn(t testing.TB, reg *prometheus.Registry) *degrade.Metrics {
	t.Helper()
	m, err := degrade.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// worker is a consumer.Worker with the limits of package spillover, wired
// as cmd wires it: with Redis, a fleet membership, a Redis semaphore and
// rate limiter behind failover; without, local limits.
type worker struct {
	w       *consumer.Worker
	fleet   *fleet.Fleet
	sem     *throttle.RedisSemaphore // nil without Redis
	scaling *fleet.Autoscaling
	reg     *prometheus.Registry
	redis   *degrade.Metrics // fairq_redis_degraded and fairq_redis_fallback_total, on reg
	stopped bool
}

// startWorker starts a worker; it is stopped gracefully when the test ends.
func (w *world) startWorker(o workerOptions) *worker {
	t := w.t
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	wk := &worker{reg: prometheus.NewRegistry()}
	var err error
	wk.redis = redisMetricsOn(t, wk.reg)
	client := cmp.Or(o.redis, w.redis)
	var shared redis.UniversalClient // nil, not a typed nil, without Redis
	if client != nil {
		shared = client
	}
	wk.fleet, err = fleet.New(fleet.Config{Redis: shared, Prefix: w.prefix, Heartbeat: 200 * time.Millisecond, Logger: log, Registerer: wk.reg, RedisMetrics: wk.redis})
	if err != nil {
		t.Fatal(err)
	}
	wk.scaling, err = fleet.NewAutoscaling(fleet.AutoscalingConfig{
		Depths:     w.b,
		Queues:     slices.Concat(w.names.Live, []string{w.names.Overflow, w.names.Backlog}),
		SizeFunc:   wk.fleet.Last,
		Slots:      cmp.Or(o.connections, consumer.ConnectionsDefault),
		Logger:     log,
		Registerer: wk.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := spillover.Config{
		Tenants:          w.tenants,
		FleetSizeFunc:    wk.fleet.Last,
		ConcurrencyDelay: o.concurrencyDelay,
		DropAge:          o.dropAge,
		BacklogAge:       o.backlogAge,
		Registerer:       wk.reg,
	}
	if client != nil {
		primary, err := throttle.NewRedisLimiter(throttle.RedisConfig{Client: client, Prefix: w.prefix})
		if err != nil {
			t.Fatal(err)
		}
		rate, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{
			Primary: primary,
			Fallback: &throttle.ScaledLimiter{
				Limiter:    throttle.NewLocalLimiter(throttle.LocalConfig{}),
				FactorFunc: func() float64 { return throttle.Share(wk.fleet.Last()) },
			},
			Component: "worker_ratelimit", Cooldown: 100 * time.Millisecond, Logger: log, RedisMetrics: wk.redis,
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Rate = rate
		pacer, err := throttle.NewRedisPacer(throttle.RedisConfig{Client: client, Prefix: w.prefix})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Pacer, err = throttle.NewFailoverPacer(throttle.FailoverPacerConfig{
			Primary: pacer, FleetSizeFunc: wk.fleet.Last,
			Component: "worker_pacer", Cooldown: 100 * time.Millisecond, Logger: log, RedisMetrics: wk.redis,
		})
		if err != nil {
			t.Fatal(err)
		}
		wk.sem, err = throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: client, Prefix: w.prefix, Lease: o.lease, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		sem, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
			Primary: wk.sem, FleetSizeFunc: wk.fleet.Last,
			Component: "worker_semaphore", Cooldown: 100 * time.Millisecond, Logger: log, RedisMetrics: wk.redis,
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Semaphore = sem
		cfg.Admitter = admitter(t, wk.sem, w.prefix, sem, rate)
	}
	lim, err := spillover.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	push, err := consumer.NewPush(consumer.PushConfig{URL: w.app.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(push.Close)
	wk.w, err = consumer.New(consumer.Config{
		Backend:           w.b,
		Names:             w.names,
		Handler:           push,
		Connections:       o.connections,
		VisibilityTimeout: o.visibility,
		Limiter:           lim,
		ObserveFunc:       wk.scaling.Observe,
		ReceiveWait:       time.Second,
		Logger:            log,
		Registerer:        wk.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Start in dependency order; stop in reverse (see stop).
	if err := wk.fleet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if wk.sem != nil {
		if err := wk.sem.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := wk.scaling.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := wk.w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wk.stop(t) })
	return wk
}

// stop stops the worker gracefully: the worker first (its jobs end and
// release their slots), then the semaphore, then the fleet membership.
func (wk *worker) stop(t testing.TB) {
	t.Helper()
	if wk.stopped {
		return
	}
	wk.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wk.w.Stop(ctx); err != nil {
		t.Errorf("worker Stop: %v", err)
	}
	if err := wk.scaling.Stop(ctx); err != nil {
		t.Errorf("autoscaling Stop: %v", err)
	}
	if wk.sem != nil {
		if err := wk.sem.Stop(ctx); err != nil {
			t.Errorf("semaphore Stop: %v", err)
		}
	}
	if err := wk.fleet.Stop(ctx); err != nil {
		t.Errorf("fleet Stop: %v", err)
	}
}

// halt stops the worker without a grace period, its running jobs given
// back to their queues, and ignores the errors of a worker cut off from
// Redis.
func (wk *worker) halt(t testing.TB) {
	t.Helper()
	wk.stopped = true
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := wk.w.Stop(expired); err != nil {
		t.Errorf("worker Stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wk.scaling.Stop(ctx)
	if wk.sem != nil {
		wk.sem.Stop(ctx)
	}
	wk.fleet.Stop(ctx)
}

// metric returns the sum of the series of a metric of the worker whose
// labels include the given ones.
func (wk *worker) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := wk.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}
				if !found {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// delivery is one request the application received.
type delivery struct {
	id     string
	tenant string
	queue  string
	start  time.Time
	end    time.Time
	ok     bool // answered 200
}

// app is the application behind the workers: it answers each push after
// hold (or when its request ends), and counts the requests each tenant has
// in progress at once.
type app struct {
	srv *httptest.Server

	mu         sync.Mutex
	hold       map[string]time.Duration // by tenant
	block      map[string]chan struct{} // by tenant: requests wait until closed
	inFlight   map[string]int
	peak       map[string]int
	deliveries []delivery
	changed    chan struct{} // closed and replaced at every change
}

func newApp(t testing.TB) *app {
	a := &app{
		hold:     make(map[string]time.Duration),
		block:    make(map[string]chan struct{}),
		inFlight: make(map[string]int),
		peak:     make(map[string]int),
		changed:  make(chan struct{}),
	}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *app) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := delivery{
		id:     string(body),
		tenant: r.Header.Get(consumer.HeaderTenant),
		queue:  r.Header.Get(consumer.HeaderQueue),
		start:  time.Now(),
	}
	a.mu.Lock()
	a.inFlight[d.tenant]++
	a.peak[d.tenant] = max(a.peak[d.tenant], a.inFlight[d.tenant])
	hold, block := a.hold[d.tenant], a.block[d.tenant]
	a.notify()
	a.mu.Unlock()

	d.ok = true
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
			d.ok = false
		}
	}
	if hold > 0 && d.ok {
		// The work the application does: it takes this long.
		timer := time.NewTimer(hold)
		select {
		case <-timer.C:
		case <-r.Context().Done():
			d.ok = false
		}
		timer.Stop()
	}
	d.end = time.Now()
	a.mu.Lock()
	a.inFlight[d.tenant]--
	a.deliveries = append(a.deliveries, d)
	a.notify()
	a.mu.Unlock()
	if d.ok {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// notify wakes those waiting for a change. Call with mu held.
func (a *app) notify() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// setHold makes the application take d for each message of a tenant.
func (a *app) setHold(tenantID string, d time.Duration) {
	a.mu.Lock()
	a.hold[tenantID] = d
	a.mu.Unlock()
}

// setBlock makes the application hold the messages of a tenant until its
// request ends, or until the returned func is called.
func (a *app) setBlock(tenantID string) (unblock func()) {
	ch := make(chan struct{})
	a.mu.Lock()
	a.block[tenantID] = ch
	a.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// waitFor waits until cond, called with the application's state locked,
// holds, or fails the test after d.
func (a *app) waitFor(t testing.TB, d time.Duration, what string, cond func(a *app) bool) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		ok := cond(a)
		changed := a.changed
		a.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// done returns the first successful delivery of each id.
func (a *app) done() map[string]delivery {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.doneLocked()
}

func (a *app) doneLocked() map[string]delivery {
	out := make(map[string]delivery)
	for _, d := range a.deliveries {
		if _, seen := out[d.id]; d.ok && !seen {
			out[d.id] = d
		}
	}
	return out
}

// allDone reports whether every id was processed successfully. Call
// through waitFor.
func allDone(ids ...[]string) func(a *app) bool {
	return func(a *app) bool {
		done := a.doneLocked()
		for _, list := range ids {
			for _, id := range list {
				if _, ok := done[id]; !ok {
					return false
				}
			}
		}
		return true
	}
}

// account checks that nothing was lost: every accepted id was processed
// (or is in wantDropped), nothing unknown was processed, and once the
// workers stopped no queue holds a message. It logs the duplicates, which
// at-least-once delivery allows.
func (w *world) account(t testing.TB, accepted []string, dropped int, workers ...*worker) {
	t.Helper()
	for _, wk := range workers {
		wk.stop(t)
	}
	done := w.app.done()
	processed := 0
	for _, id := range accepted {
		if _, ok := done[id]; ok {
			processed++
		}
	}
	if processed+dropped != len(accepted) || len(done) != processed {
		t.Errorf("accepted %d: %d processed, %d dropped, %d ids processed in all", len(accepted), processed, dropped, len(done))
	}
	for _, q := range w.names.All() {
		d, err := w.b.Depth(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if n := d.Visible + d.NotVisible + d.Delayed; n != 0 {
			t.Errorf("%s holds %d messages after all were processed: %+v", q, n, d)
		}
	}
	w.app.mu.Lock()
	duplicates := 0
	for _, d := range w.app.deliveries {
		if d.ok {
			duplicates++
		}
	}
	w.app.mu.Unlock()
	t.Logf("accepted %d, processed %d, dropped %d, duplicate deliveries %d", len(accepted), processed, dropped, duplicates-processed)
}
