package spillover_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// TestLimitsFailOpenWhileRedisDown: while Redis is unreachable a worker
// enforces its share of each tenant's limits locally (the limit divided
// by the fleet size), says so in a log line and a metric, and goes back to
// the shared limits when Redis returns.
func TestLimitsFailOpenWhileRedisDown(t *testing.T) {
	t.Parallel()
	const fleetSize = 2
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { client.Close() })
	prefix := testenv.Prefix(t) + ":"
	var logs testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	redisMetrics := redisMetricsOn(t, reg)
	share := func() int { return fleetSize }

	primary, err := throttle.NewRedisLimiter(throttle.RedisConfig{Client: client, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	rate, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{
		Primary:   primary,
		Fallback:  &throttle.ScaledLimiter{Limiter: throttle.NewLocalLimiter(throttle.LocalConfig{}), FactorFunc: func() float64 { return throttle.Share(share()) }},
		Cooldown:  50 * time.Millisecond,
		Component: "worker_ratelimit", Logger: log, RedisMetrics: redisMetrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	redisSem, err := throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: client, Prefix: prefix, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := redisSem.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		redisSem.Stop(ctx)
	})
	sem, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
		Primary: redisSem, FleetSizeFunc: share, Cooldown: 50 * time.Millisecond,
		Component: "worker_semaphore", Logger: log, RedisMetrics: redisMetrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := spillover.New(spillover.Config{
		Tenants: registry(t, map[string]tenant.Limits{
			"slots":  limits(100000, 100000, 6), // a share of 3
			"tokens": limits(1, 10, 1000),       // a share of 5 tokens, refilled at 0.5/s
		}),
		Rate: rate, Semaphore: sem, FleetSizeFunc: share,
		Admitter: admitter(t, redisSem, prefix, sem, rate),
	})
	if err != nil {
		t.Fatal(err)
	}

	// run admits n messages of a tenant and returns how many were
	// dispatched, and the Dones of those.
	run := func(tenantID string, n int) (int, []func()) {
		var dones []func()
		for range n {
			v, err := l.Admit(context.Background(), &consumer.Message{Tenant: tenantID})
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if v.Action == consumer.Dispatch {
				dones = append(dones, v.Done)
			}
		}
		return len(dones), dones
	}
	end := func(dones []func()) {
		for _, d := range dones {
			d()
		}
	}

	// Shared: the whole limits, counted in Redis.
	n, dones := run("slots", 10)
	if n != 6 {
		t.Fatalf("healthy: %d of 10 dispatched under concurrency 6", n)
	}
	end(dones)

	proxy.SetDown(true)
	n, dones = run("slots", 10)
	if n != 3 {
		t.Errorf("Redis down: %d of 10 dispatched, want the share of 3 of concurrency 6 in a fleet of 2", n)
	}
	end(dones)
	if n, _ := run("tokens", 10); n != 5 {
		t.Errorf("Redis down: %d of 10 dispatched, want the share of 5 of a burst of 10 in a fleet of 2", n)
	}
	got := series(t, reg)
	for _, c := range []string{"worker_ratelimit", "worker_semaphore"} {
		if v := got[`fairq_redis_degraded{component="`+c+`"}`]; v != 1 {
			t.Errorf("fairq_redis_degraded{component=%q} = %v while Redis is down, want 1", c, v)
		}
	}
	if n := strings.Count(logs.String(), "redis unreachable"); n != 2 {
		t.Errorf("%d log lines say Redis is unreachable, want one per component:\n%s", n, logs.String())
	}

	proxy.SetDown(false)
	// Redis is asked again after the failovers' cooldown, on a new
	// connection.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for shared := false; !shared; {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("Redis back: the shared concurrency of 6 not applied within 5 s")
		}
		n, dones = run("slots", 10)
		end(dones)
		// Each failover goes back on its own, after its own cooldown.
		shared = n == 6 && !sem.Degraded() &&
			series(t, reg)[`fairq_redis_degraded{component="worker_ratelimit"}`] == 0
	}
	got = series(t, reg)
	for _, c := range []string{"worker_ratelimit", "worker_semaphore"} {
		if v := got[`fairq_redis_degraded{component="`+c+`"}`]; v != 0 {
			t.Errorf("fairq_redis_degraded{component=%q} = %v once Redis is back, want 0", c, v)
		}
	}
	if n := strings.Count(logs.String(), "redis is back"); n < 1 {
		t.Errorf("no log line says Redis is back:\n%s", logs.String())
	}
}
