package main

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

// TestWorkerLimitsAcrossASentinelFailover is TestWorkerLimitsAcrossAFailover
// on a primary with one replica watched by three Sentinels, configured as
// an operator would (redis.mode sentinel, the Sentinels in redis.addrs,
// redis.master_name): the primary, which holds every key, is killed under
// two workers' load; the limits go local or refuse until the Sentinels
// have promoted the replica and the workers' clients follow it; no
// message is lost and no limit exceeded by more than that allows.
func TestWorkerLimitsAcrossASentinelFailover(t *testing.T) {
	topo := testenv.NewRedisSentinel(t)
	var killed string
	for _, open := range []bool{true, false} {
		name := map[bool]string{true: "fail open", false: "fail closed"}[open]
		if killed != "" {
			topo.Restart(t, killed) // the primary has a replica again
		}
		if !t.Run(name, func(t *testing.T) { killed = runSentinelFailover(t, topo, open) }) {
			return
		}
	}
}

// runSentinelFailover runs the failover test's load on topo, kills its
// primary, and returns the primary's address.
func runSentinelFailover(t *testing.T, topo *testenv.Sentinel, open bool) string {
	prefix := testenv.Prefix(t)
	cfg := config.Default()
	cfg.SQS.QueuePrefix = prefix
	cfg.Redis = config.Redis{Mode: config.RedisSentinel, Addrs: topo.Addrs(), MasterName: testenv.SentinelMaster, FailOpen: open}
	ids := map[string]string{}
	onVictim := map[string]bool{}
	limits := map[string]tenant.Resolved{}
	for _, ft := range failoverTenants {
		ids[ft.role] = ft.role
		onVictim[ft.role] = true // one primary holds every key
		cfg.Tenants = append(cfg.Tenants, config.Tenant{ID: ft.role, Limits: ft.limits})
		limits[ft.role] = tenant.Resolve(cfg.Defaults, ft.limits)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	run := &failoverRun{t: t, started: time.Now(), ids: ids, job: map[string]time.Duration{}, inFlight: map[string]*atomic.Int64{}, redisLogs: &testenv.LogBuffer{},
		onVictim: onVictim, takeover: testenv.SentinelDownAfter}
	prev := redisLog.Load()
	routeLibraryLogs(slog.New(slog.NewTextHandler(run.redisLogs, nil)))
	t.Cleanup(func() { redisLog.Store(prev) })
	for _, ft := range failoverTenants {
		run.job[ft.role] = ft.job
		run.inFlight[ft.role] = new(atomic.Int64)
	}
	for i := range failoverWorkers {
		run.workers = append(run.workers, failoverWorker(t, cfg, i))
	}
	registerFleet(t, cfg.Redis, prefix, run.workers) // see runFailover
	for i, w := range run.workers {
		w.start(t, i)
	}
	for _, w := range run.workers {
		waitFor(t, 10*time.Second, "the workers registered in the fleet", func() bool { return w.s.fleet.Last() == failoverWorkers })
	}
	defer func() {
		if t.Failed() {
			run.report()
		}
	}()
	run.start()

	time.Sleep(failoverPhase) // the load with the primary up
	run.setPhase(phaseOutage)
	primary := topo.Primary(t)
	topo.Kill(t, primary)
	run.killedAt = time.Now()
	// The first call to meet the dead primary fails only after go-redis
	// has dialled it a few times, about a second: until then the gauges
	// say nothing.
	waitFor(t, 10*time.Second, "a worker's limits degraded", run.anyDegraded)
	// Back once every worker's limits answer from Redis: their degraded
	// gauges at 0 and staying there for longer than the cooldown after a
	// failure, while the tenants' messages keep asking.
	var back time.Time
	waitFor(t, 20*time.Second, "the limits shared again", func() bool {
		if run.anyDegraded() {
			return false
		}
		if back.IsZero() {
			back = time.Now()
		}
		time.Sleep(1200 * time.Millisecond) // longer than degrade.CooldownDefault
		if run.anyDegraded() {
			back = time.Time{}
			return false
		}
		return true
	})
	promoted := topo.WaitPromoted(t, primary, 10*time.Second)
	run.healthyAt = time.Now()
	run.setPhase(phaseRecovered)
	time.Sleep(failoverPhase) // the load once recovered
	run.stop()
	t.Logf("killed the primary %s at +%v; the limits shared again %v later, on %s",
		primary, run.killedAt.Sub(run.started).Round(time.Millisecond), back.Sub(run.killedAt).Round(time.Millisecond), promoted)

	run.checkNothingLost(t.Errorf)
	run.checkDegradedSeen(t.Errorf, open)
	run.checkLimits(t.Errorf, limits, open)
	if !t.Failed() {
		run.report()
	}
	return primary
}
