package throttle_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/throttle"
)

// TestLimitsAcrossASentinelFailover runs the rate limiter and the
// semaphore of two processes, each behind its failover as a worker wires
// them, on a primary watched by Sentinels, and kills the primary: the
// limits go local (fail open) or refuse (fail closed) as when a single
// Redis goes away, and are shared again once the Sentinels promoted the
// replica and the clients followed it, with the state written before the
// kill.
func TestLimitsAcrossASentinelFailover(t *testing.T) {
	t.Parallel()
	topo := testenv.NewRedisSentinel(t)
	var killed string
	for _, closed := range []bool{false, true} {
		name := map[bool]string{false: "fail open", true: "fail closed"}[closed]
		if killed != "" {
			topo.Restart(t, killed) // the primary has a replica again
		}
		if !t.Run(name, func(t *testing.T) { killed = runSentinelFailover(t, topo, closed) }) {
			return
		}
	}
}

// sentinelProcess is the limits of one process on Redis behind Sentinels.
type sentinelProcess struct {
	client redis.UniversalClient
	lim    *throttle.FailoverLimiter
	sem    *throttle.FailoverSemaphore
	reg    *prometheus.Registry
	logs   *testenv.LogBuffer
}

// newSentinelProcess builds a process's limits: a client of the Sentinels
// with fairq's short timeouts, and a RedisLimiter and a RedisSemaphore
// behind their failovers, in a fleet of two.
func newSentinelProcess(t *testing.T, topo *testenv.Sentinel, prefix string, closed bool) *sentinelProcess {
	t.Helper()
	client := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs: topo.Addrs(), MasterName: testenv.SentinelMaster,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, PoolTimeout: time.Second, MaxRetries: 1,
	})
	t.Cleanup(func() { client.Close() })
	p := &sentinelProcess{client: client, reg: prometheus.NewRegistry(), logs: &testenv.LogBuffer{}}
	logger := slog.New(slog.NewTextHandler(p.logs, nil))
	metrics := redisMetrics(t, p.reg)
	var err error
	p.lim, err = throttle.NewFailoverLimiter(throttle.FailoverConfig{
		Primary:    redisLimiter(t, client, prefix),
		Fallback:   throttle.NewLocalLimiter(throttle.LocalConfig{}),
		FailClosed: closed, Component: "ratelimit", Logger: logger, RedisMetrics: metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	sem, err := throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: client, Prefix: prefix, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Started(t, sem)
	p.sem, err = throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
		Primary: sem, FailClosed: closed, FleetSizeFunc: func() int { return 2 },
		Component: "semaphore", Logger: logger, RedisMetrics: metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// probe asks both limits of a key of their own, far from its limits.
func (p *sentinelProcess) probe(ctx context.Context) {
	p.lim.Allow(ctx, "probe", throttle.Limit{Rate: 1000, Burst: 1000}, 1)
	if permit, ok, _ := p.sem.TryAcquire(ctx, "probe", 1000); ok {
		permit.Release()
	}
}

// degraded reports whether the limiter or the semaphore says, in
// fairq_redis_degraded, that it goes without Redis.
func (p *sentinelProcess) degraded(t *testing.T) bool {
	t.Helper()
	return metricOf(t, p.reg, "fairq_redis_degraded", "ratelimit") == 1 || metricOf(t, p.reg, "fairq_redis_degraded", "semaphore") == 1
}

// runSentinelFailover kills the primary under two processes' limits and
// returns its address.
func runSentinelFailover(t *testing.T, topo *testenv.Sentinel, closed bool) string {
	prefix := testenv.Prefix(t) + ":"
	a, b := newSentinelProcess(t, topo, prefix, closed), newSentinelProcess(t, topo, prefix, closed)
	ctx := context.Background()
	// A token a minute: no bucket refills while the test runs.
	slow := throttle.Limit{Rate: 1.0 / 60, Burst: 4}
	const concurrency = 3

	// Healthy: one bucket and one set of slots for both processes.
	allowed := func(p *sentinelProcess, key string, n int) int {
		t.Helper()
		d, err := p.lim.Allow(ctx, key, slow, n)
		if err != nil {
			t.Fatalf("Allow(%s, %d): %v", key, n, err)
		}
		return d.Allowed
	}
	if got := allowed(a, "bucket", 3) + allowed(b, "bucket", 3); got != slow.Burst {
		t.Fatalf("healthy: the two processes were allowed %d of a burst of %d", got, slow.Burst)
	}
	var held []throttle.Permit
	for _, p := range []*sentinelProcess{a, a, b, b} {
		permit, ok, err := p.sem.TryAcquire(ctx, "slots", concurrency)
		if err != nil {
			t.Fatalf("healthy: TryAcquire: %v", err)
		}
		if ok {
			held = append(held, permit)
		}
	}
	if len(held) != concurrency {
		t.Fatalf("healthy: the two processes took %d slots of %d", len(held), concurrency)
	}
	if n, err := a.client.Do(ctx, "WAIT", 1, 1000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d, %v", n, err)
	}

	primary := topo.Primary(t)
	topo.Kill(t, primary)
	killed := time.Now()

	// The primary away: local limits (fail open: a bucket of each
	// process's own, ⌈3/2⌉ slots each counting those held) or refusals.
	// Each limit's first call fails, after go-redis has dialled the dead
	// primary a few times (about a second); the calls after it, within
	// the cooldown, do not ask. All four start at once, so that each
	// meets the primary dead: none can be promoted before
	// down-after-milliseconds.
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		local = make([]int, 2)
	)
	for i, p := range []*sentinelProcess{a, b} {
		wg.Go(func() {
			d, err := p.lim.Allow(ctx, "bucket", slow, 3)
			switch {
			case closed && !errors.Is(err, throttle.ErrUnavailable):
				t.Errorf("process %d, down, failing closed: Allow: %+v, %v; want ErrUnavailable", i, d, err)
			case !closed && (err != nil || d.Allowed != 3):
				t.Errorf("process %d, down, failing open: Allow 3: %+v, %v; want 3 from the process's own bucket", i, d, err)
			}
		})
		wg.Go(func() {
			for range concurrency {
				permit, ok, err := p.sem.TryAcquire(ctx, "slots", concurrency)
				if closed && !errors.Is(err, throttle.ErrUnavailable) {
					t.Errorf("process %d, down, failing closed: TryAcquire: %v, %v; want ErrUnavailable", i, ok, err)
				}
				if ok {
					mu.Lock()
					held = append(held, permit)
					local[i]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if want := map[bool][]int{false: {0, 1}, true: {0, 0}}[closed]; !slices.Equal(local, want) {
		t.Errorf("down: slots taken locally by each process %v, want %v (2 and 1 held from Redis, a share of 2)", local, want)
	}
	for i, p := range []*sentinelProcess{a, b} {
		for _, component := range []string{"ratelimit", "semaphore"} {
			if got := metricOf(t, p.reg, "fairq_redis_degraded", component); got != 1 {
				t.Errorf("process %d: fairq_redis_degraded{%s} = %v with the primary killed, want 1", i, component, got)
			}
		}
	}
	if down := time.Since(killed); down >= testenv.SentinelDownAfter {
		t.Logf("the calls with the primary down took %v, down-after-milliseconds or more: a replica may have been promoted meanwhile", down)
	}

	// Back once both processes' limits answer from Redis again, each
	// asking after its cooldown: the client learnt the new primary from
	// its Sentinel.
	deadline := killed.Add(20 * time.Second)
	for a.probe(ctx); a.degraded(t) || b.degraded(t); a.probe(ctx) {
		b.probe(ctx)
		if time.Now().After(deadline) {
			t.Fatalf("the limits still degraded 20 s after the primary was killed")
		}
		time.Sleep(50 * time.Millisecond) // each asks Redis again after its cooldown
	}
	shared := time.Since(killed)
	promoted := topo.WaitPromoted(t, primary, 10*time.Second)
	t.Logf("killed the primary %s: the limits shared again after %v, on %s", primary, shared.Round(time.Millisecond), promoted)

	// Shared again, on the promoted replica with what was written before
	// the kill: the bucket empty, the slots all taken.
	if got := allowed(b, "bucket", 1); got != 0 {
		t.Errorf("recovered: %d allowed from the bucket emptied before the kill, want 0: a Redis without the replica's data", got)
	}
	if _, ok, err := b.sem.TryAcquire(ctx, "slots", concurrency); ok || err != nil {
		t.Errorf("recovered: a slot taken (%v, %v) beside the %d held since before the kill", ok, err, concurrency)
	}
	if got := allowed(a, "fresh", 3) + allowed(b, "fresh", 3); got != slow.Burst {
		t.Errorf("recovered: the two processes were allowed %d of a fresh burst of %d", got, slow.Burst)
	}
	for _, p := range held {
		p.Release()
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		permit, ok, err := b.sem.TryAcquire(ctx, "slots", concurrency)
		if err != nil {
			t.Fatalf("recovered: TryAcquire: %v", err)
		}
		if ok {
			permit.Release()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("recovered: no slot free 5 s after every holder released its own")
		}
		time.Sleep(20 * time.Millisecond) // the releases reach Redis in the background
	}

	for i, p := range []*sentinelProcess{a, b} {
		checkSentinelRecovered(t, i, p, closed)
	}
	return primary
}

// checkSentinelRecovered checks what a process's limits say after the
// failover: degraded back to 0, answers given locally only when failing
// open, and one log line each for the failure and the recovery of each.
func checkSentinelRecovered(t *testing.T, i int, p *sentinelProcess, closed bool) {
	t.Helper()
	for _, component := range []string{"ratelimit", "semaphore"} {
		if got := metricOf(t, p.reg, "fairq_redis_degraded", component); got != 0 {
			t.Errorf("process %d: fairq_redis_degraded{%s} = %v once recovered, want 0", i, component, got)
		}
		fallbacks := metricOf(t, p.reg, "fairq_redis_fallback_total", component)
		if closed && fallbacks != 0 || !closed && fallbacks == 0 {
			t.Errorf("process %d, fail closed %v: fairq_redis_fallback_total{%s} = %v", i, closed, component, fallbacks)
		}
	}
	logs := p.logs.String()
	for _, line := range []string{"redis unreachable", "redis is back"} {
		if n := strings.Count(logs, line); n != 2 {
			t.Errorf("process %d: %d log lines %q, want 2 (limiter and semaphore):\n%s", i, n, line, logs)
		}
	}
}

// metricOf returns the value of a gauge or counter's series of component;
// 0 when there is none.
func metricOf(t *testing.T, reg *prometheus.Registry, name, component string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "component" && lp.GetValue() == component {
					if g := m.GetGauge(); g != nil {
						return g.GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
