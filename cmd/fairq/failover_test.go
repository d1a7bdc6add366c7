package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/internal/keyslot"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
)

// TestWorkerLimitsAcrossAFailover runs two workers' limits, wired as
// `fairq worker` wires them, under load on a Redis Cluster of three
// masters with a replica each, and kills the master that holds two
// tenants' keys: the limits go local (fail open: each worker its share)
// or refuse (fail closed) as when a single Redis goes away, say so in
// fairq_redis_degraded, and are shared again once the replica took over
// and the clients learnt it; no message is lost and no limit is exceeded
// by more than that degraded behaviour allows.
func TestWorkerLimitsAcrossAFailover(t *testing.T) {
	cluster := testenv.NewRedisCluster(t, 3, 1)
	for _, open := range []bool{true, false} {
		name := map[bool]string{true: "fail open", false: "fail closed"}[open]
		// One after the other, each killing a master that still has
		// its replica.
		if !t.Run(name, func(t *testing.T) { runFailover(t, cluster, open) }) {
			return
		}
	}
}

// The failover test's tenants: conc is held by its concurrency, rate and
// calm by their rate (each one's other limit is far away). conc and rate
// keep their keys on the master that is killed, calm on the others.
var failoverTenants = []struct {
	role     string
	onVictim bool
	job      time.Duration // each message's
	limits   tenant.Limits
}{
	{"conc", true, 150 * time.Millisecond, tenant.Limits{Concurrency: ptr(3), ProcessRate: ptr(1000.0), ProcessBurst: ptr(1000)}},
	{"rate", true, 5 * time.Millisecond, tenant.Limits{Concurrency: ptr(100), ProcessRate: ptr(20.0), ProcessBurst: ptr(4)}},
	{"calm", false, 5 * time.Millisecond, tenant.Limits{Concurrency: ptr(100), ProcessRate: ptr(20.0), ProcessBurst: ptr(4)}},
}

func ptr[T any](v T) *T { return &v }

const (
	failoverWorkers     = 2
	failoverSlots       = 8  // per worker
	failoverOutstanding = 10 // messages of each tenant queued or running at once
	// failoverSpillCap caps the delay of a spilled message before it
	// comes back: the worker's overflow queue would hold it longer.
	failoverSpillCap = 300 * time.Millisecond
	// failoverPhase is how long the load runs before the kill and after
	// the recovery.
	failoverPhase = time.Second
)

// The phases of a failover run.
const (
	phaseHealthy   = iota // the cluster whole
	phaseOutage           // from the kill until the workers' limits are shared again
	phaseRecovered        // then
	phases
)

var phaseNames = [phases]string{"healthy", "outage", "recovered"}

func runFailover(t *testing.T, cluster *testenv.Cluster, open bool) {
	prefix, victim, ids := failoverPlacement(t, cluster)
	t.Logf("prefix %s: killing %s, which holds the keys of %s and %s; %s's are elsewhere", prefix, victim, ids["conc"], ids["rate"], ids["calm"])

	cfg := config.Default()
	cfg.SQS.QueuePrefix = prefix
	cfg.Redis = config.Redis{Mode: config.RedisCluster, Addrs: cluster.Addrs(), FailOpen: open}
	limits := map[string]tenant.Resolved{}
	for _, ft := range failoverTenants {
		cfg.Tenants = append(cfg.Tenants, config.Tenant{ID: ids[ft.role], Limits: ft.limits})
		limits[ids[ft.role]] = tenant.Resolve(cfg.Defaults, ft.limits)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	run := &failoverRun{t: t, started: time.Now(), ids: ids, job: map[string]time.Duration{}, inFlight: map[string]*atomic.Int64{}, redisLogs: &testenv.LogBuffer{},
		onVictim: map[string]bool{ids["conc"]: true, ids["rate"]: true}, takeover: testenv.ClusterNodeTimeout}
	// go-redis's own lines (a pool that cannot dial the dead master) go
	// where `fairq` sends them, here to the run's report.
	prev := redisLog.Load()
	routeLibraryLogs(slog.New(slog.NewTextHandler(run.redisLogs, nil)))
	t.Cleanup(func() { redisLog.Store(prev) })
	for _, ft := range failoverTenants {
		run.job[ids[ft.role]] = ft.job
		run.inFlight[ids[ft.role]] = new(atomic.Int64)
	}
	for i := range failoverWorkers {
		run.workers = append(run.workers, failoverWorker(t, cfg, i))
	}
	// Each worker learns the fleet's size from its heartbeat, every 5 s;
	// the first to start would count only itself until its second. So
	// the test writes every worker's first beat before they start, as if
	// they had been running a while.
	registerFleet(t, cfg.Redis, prefix, run.workers)
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

	time.Sleep(failoverPhase) // the load under the healthy cluster
	run.setPhase(phaseOutage)
	cluster.Kill(t, victim)
	run.killedAt = time.Now()
	cluster.WaitHealthy(t, 30*time.Second)
	run.healthyAt = time.Now()
	// Shared again once every worker's limits answer from Redis: their
	// degraded gauges back at 0 and staying there for longer than the
	// cooldown after a failure, while the tenants' messages keep asking.
	waitFor(t, 20*time.Second, "the limits shared again", func() bool {
		if run.anyDegraded() {
			return false
		}
		time.Sleep(1200 * time.Millisecond) // longer than degrade.CooldownDefault
		return !run.anyDegraded()
	})
	run.setPhase(phaseRecovered)
	time.Sleep(failoverPhase) // the load once recovered
	run.stop()
	t.Logf("killed at +%v, cluster healthy at +%v, limits shared at +%v",
		run.killedAt.Sub(run.started).Round(time.Millisecond), run.healthyAt.Sub(run.started).Round(time.Millisecond), run.phaseAt[phaseRecovered].Sub(run.started).Round(time.Millisecond))

	run.checkNothingLost(t.Errorf)
	run.checkDegradedSeen(t.Errorf, open)
	run.checkLimits(t.Errorf, limits, open)
	if !t.Failed() {
		run.report()
	}
}

// failoverPlacement picks a key prefix, a master to kill and the ids of
// the tenants: the master has a replica and holds neither the tenant
// registry's keys nor the fleet's; conc's and rate's keys (their
// process_rate buckets and concurrency semaphores, spillover.RedisKeys)
// are all on it, calm's on the others. A tenant's keys share its id as a
// hash tag, so each id has one master; ids are sought over several
// lengths, and prefixes until one leaves a master to kill.
func failoverPlacement(t *testing.T, cluster *testenv.Cluster) (prefix, victim string, ids map[string]string) {
	t.Helper()
	shards := agreedShards(t, cluster)
	master := func(key string) string {
		s := int64(keyslot.Slot(key))
		for _, sh := range shards {
			for _, r := range sh.slots {
				if r.Start <= s && s <= r.End {
					return sh.master
				}
			}
		}
		t.Fatalf("no master serves slot %d of %q: %+v", s, key, shards)
		return ""
	}
	for range 20 {
		prefix, victim = testenv.Prefix(t), ""
		// The registry's keys share the slot of its records hash.
		busy := map[string]bool{master(prefix + ":tenants"): true, master(prefix + ":fleet:workers"): true}
		for _, sh := range shards {
			if len(sh.replicas) > 0 && !busy[sh.master] {
				victim = sh.master
			}
		}
		if victim == "" {
			continue
		}
		ids = map[string]string{}
		for _, ft := range failoverTenants {
			for i := 0; i < 1000 && ids[ft.role] == ""; i++ {
				// 1 to 20 digits: twenty lengths.
				id := fmt.Sprintf("%s%0*d", ft.role, 1+i%20, i)
				on := 0
				keys := spillover.RedisKeys(prefix+":", id)
				for _, k := range keys {
					if master(k) == victim {
						on++
					}
				}
				if ft.onVictim && on == len(keys) || !ft.onVictim && on == 0 {
					ids[ft.role] = id
				}
			}
		}
		if len(ids) == len(failoverTenants) {
			return prefix, victim, ids
		}
	}
	t.Fatalf("no prefix among 20 with a master to kill (a replica, free of the registry's and the fleet's keys) and tenants on it and off it; shards %+v", shards)
	return "", "", nil
}

// shard is a master of a cluster, the slots it serves and its replicas,
// addresses sorted.
type shard struct {
	slots    []redis.SlotRange
	master   string
	replicas []string
}

// agreedShards waits until every running node of the cluster answers the
// same CLUSTER SHARDS, every slot served by a master and every node in it
// online, and returns it: a node learns of the others' roles by gossip,
// a moment after the cluster says it is ok.
func agreedShards(t *testing.T, cluster *testenv.Cluster) []shard {
	t.Helper()
	var last []shard
	var lastErr error
	agree := func() bool {
		var first []shard
		for i, addr := range cluster.Addrs() {
			got, err := onlineShards(addr)
			if err != nil {
				lastErr = err
				return false
			}
			if i == 0 {
				first = got
			} else if !slices.EqualFunc(first, got, shardEqual) {
				last = got
				return false
			}
		}
		var covered int64
		nodes := 0
		for _, sh := range first {
			for _, r := range sh.slots {
				covered += r.End - r.Start + 1
			}
			nodes += 1 + len(sh.replicas)
		}
		last = first
		return covered == keyslot.Slots && nodes == len(cluster.Addrs())
	}
	deadline := time.Now().Add(20 * time.Second)
	for !agree() {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster's nodes do not agree on its shards within 20 s (%v); the last seen: %+v", lastErr, last)
		}
		time.Sleep(100 * time.Millisecond) // polling other processes' gossip
	}
	return last
}

// onlineShards asks the node at addr for the shards that serve slots,
// with their online nodes, sorted by their first slot.
func onlineShards(addr string) ([]shard, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	got, err := c.ClusterShards(context.Background()).Result()
	if err != nil {
		return nil, err
	}
	var out []shard
	for _, cs := range got {
		if len(cs.Slots) == 0 {
			continue
		}
		sh := shard{slots: cs.Slots}
		slices.SortFunc(sh.slots, func(a, b redis.SlotRange) int { return cmp.Compare(a.Start, b.Start) })
		for _, n := range cs.Nodes {
			if n.Health != "online" {
				continue // failed, or a replica not yet in sync
			}
			a := net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			if n.Role == "master" {
				sh.master = a
			} else {
				sh.replicas = append(sh.replicas, a)
			}
		}
		if sh.master == "" {
			return nil, fmt.Errorf("%s: no master online for slots %v", addr, cs.Slots)
		}
		slices.Sort(sh.replicas)
		out = append(out, sh)
	}
	slices.SortFunc(out, func(a, b shard) int { return cmp.Compare(a.slots[0].Start, b.slots[0].Start) })
	return out, nil
}

func shardEqual(a, b shard) bool {
	return a.master == b.master && slices.Equal(a.slots, b.slots) && slices.Equal(a.replicas, b.replicas)
}

// worker is one worker process of the run: its system and the limiter
// its consumer would ask.
type worker struct {
	s    *system
	lim  consumer.Limiter
	logs *testenv.LogBuffer
}

// failoverWorker builds the limits of a worker as `fairq worker` does
// (workerLimiter); start starts what they depend on.
func failoverWorker(t *testing.T, cfg config.Config, i int) *worker {
	t.Helper()
	logs := &testenv.LogBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("worker", i)
	// The dev role runs the memory backend; the limits are the worker's.
	s, err := newSystem(context.Background(), roleDev, cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Logf("worker %d: stop: %v", i, err)
		}
	})
	lim, err := s.workerLimiter()
	if err != nil {
		t.Fatal(err)
	}
	return &worker{s: s, lim: lim, logs: logs}
}

// start starts the tenant registry, the fleet registration and the
// semaphore's lease renewer.
func (w *worker) start(t *testing.T, i int) {
	t.Helper()
	for _, p := range []component{w.s.tenants, w.s.fleet, w.s.semaphore} {
		if err := p.Start(context.Background()); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		w.s.started = append(w.s.started, p)
	}
}

// registerFleet writes a heartbeat of each worker in the fleet's sorted
// set (id → unix ms), as the fleet's own heartbeat does, through a client
// of the workers' Redis.
func registerFleet(t *testing.T, r config.Redis, prefix string, workers []*worker) {
	t.Helper()
	c := newRedisClient(r)
	defer c.Close()
	now := float64(time.Now().UnixMilli())
	for _, w := range workers {
		if err := c.ZAdd(context.Background(), prefix+":fleet:workers", redis.Z{Score: now, Member: w.s.instance}).Err(); err != nil {
			t.Fatalf("registering worker %s in the fleet: %v", w.s.instance, err)
		}
	}
}

// failoverRun is the load of a run: each tenant's messages, failoverOutstanding
// at a time, taken by the workers' slots from one queue, as the workers of
// a fleet take them from SQS; a message is Admitted by the worker's
// limiter, runs its job if dispatched and comes back later if spilled.
type failoverRun struct {
	t       *testing.T
	started time.Time
	ids     map[string]string // by role
	job     map[string]time.Duration
	workers []*worker
	// redisLogs has go-redis's lines, of every worker.
	redisLogs *testenv.LogBuffer
	inFlight  map[string]*atomic.Int64 // by tenant, fleet-wide

	// onVictim are the tenants whose keys are on the node killed; no
	// replica can have taken over from it before takeover after the kill.
	onVictim map[string]bool
	takeover time.Duration

	killedAt, healthyAt, ended time.Time

	queue      chan failoverMsg
	done       chan struct{}
	slots      sync.WaitGroup
	generating atomic.Bool
	generated  atomic.Int64
	completed  atomic.Int64

	mu       sync.Mutex
	phase    int
	phaseAt  [phases]time.Time
	events   []dispatchEvent
	spills   map[string]int // tenant/reason
	errs     []string
	ran      map[int64]int // message → times its job ran
	degraded []degradedSample
}

type failoverMsg struct {
	id     int64
	tenant string
}

// dispatchEvent is a message dispatched: when its worker asked the
// limiter, when it started and ended, and how many of its tenant's
// messages were in flight across the fleet with it.
type dispatchEvent struct {
	asked, at, end time.Time
	phase          int
	tenant         string
	inFlight       int64
}

// degradedSample is fairq_redis_degraded of each worker's rate limiter
// and semaphore at a moment.
type degradedSample struct {
	at     time.Time
	phase  int
	values []float64 // worker 0 rate, worker 0 semaphore, worker 1 rate, …
}

func (r *failoverRun) start() {
	r.queue = make(chan failoverMsg, 4*len(failoverTenants)*failoverOutstanding)
	r.done = make(chan struct{})
	r.spills = map[string]int{}
	r.ran = map[int64]int{}
	r.phaseAt[phaseHealthy] = time.Now()
	r.generating.Store(true)
	for _, id := range r.ids {
		for range failoverOutstanding {
			r.generate(id)
		}
	}
	for _, w := range r.workers {
		for range failoverSlots {
			r.slots.Go(func() { r.slot(w) })
		}
	}
	r.slots.Go(r.sample)
}

func (r *failoverRun) generate(tenant string) {
	r.queue <- failoverMsg{id: r.generated.Add(1), tenant: tenant}
}

func (r *failoverRun) setPhase(p int) {
	r.mu.Lock()
	r.phase, r.phaseAt[p] = p, time.Now()
	r.mu.Unlock()
}

// slot is one of a worker's slots: it takes a message, asks the limiter,
// and runs the message's job or puts it back after the spill's delay.
func (r *failoverRun) slot(w *worker) {
	for {
		var m failoverMsg
		select {
		case <-r.done:
			return
		case m = <-r.queue:
		}
		asked := time.Now()
		v, err := w.lim.Admit(context.Background(), &consumer.Message{
			ID: fmt.Sprint(m.id), Tenant: m.tenant, EnqueuedAt: time.Now(), ReceiveCount: 1,
		})
		if err != nil {
			// The worker logs it and dispatches (consumer.Limiter).
			r.mu.Lock()
			r.errs = append(r.errs, err.Error())
			r.mu.Unlock()
			v = consumer.Verdict{Action: consumer.Dispatch}
		}
		switch v.Action {
		case consumer.Dispatch:
			n := r.inFlight[m.tenant].Add(1)
			r.mu.Lock()
			i := len(r.events)
			r.events = append(r.events, dispatchEvent{asked: asked, at: time.Now(), phase: r.phase, tenant: m.tenant, inFlight: n})
			r.ran[m.id]++
			r.mu.Unlock()
			time.Sleep(r.job[m.tenant]) // the job
			r.inFlight[m.tenant].Add(-1)
			r.mu.Lock()
			r.events[i].end = time.Now()
			r.mu.Unlock()
			if v.Done != nil {
				v.Done()
			}
			r.completed.Add(1)
			if r.generating.Load() {
				r.generate(m.tenant)
			}
		case consumer.Spill:
			r.mu.Lock()
			r.spills[m.tenant+"/"+v.Reason]++
			r.mu.Unlock()
			time.AfterFunc(min(v.Delay, failoverSpillCap), func() { r.queue <- m })
		default:
			r.mu.Lock()
			r.errs = append(r.errs, fmt.Sprintf("message %d of %s: verdict %v (%s)", m.id, m.tenant, v.Action, v.Reason))
			r.mu.Unlock()
			r.completed.Add(1) // not lost: decided, wrongly
		}
	}
}

// sample records the workers' fairq_redis_degraded every 50 ms.
func (r *failoverRun) sample() {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-tick.C:
		}
		var values []float64
		for _, w := range r.workers {
			values = append(values, degradedOf(r.t, w.s, "worker_ratelimit"), degradedOf(r.t, w.s, "worker_semaphore"))
		}
		r.mu.Lock()
		r.degraded = append(r.degraded, degradedSample{at: time.Now(), phase: r.phase, values: values})
		r.mu.Unlock()
	}
}

func (r *failoverRun) anyDegraded() bool {
	for _, w := range r.workers {
		if degradedOf(r.t, w.s, "worker_ratelimit") != 0 || degradedOf(r.t, w.s, "worker_semaphore") != 0 {
			return true
		}
	}
	return false
}

// stop stops making messages, waits for those made to complete, then
// stops the slots.
func (r *failoverRun) stop() {
	r.generating.Store(false)
	waitFor(r.t, 30*time.Second, "every message made completed", func() bool { return r.completed.Load() == r.generated.Load() })
	close(r.done)
	r.slots.Wait()
	r.ended = time.Now()
}

// degradedOf returns fairq_redis_degraded{component} of a worker.
func degradedOf(t *testing.T, s *system, component string) float64 {
	mfs, err := s.registry.Gather()
	if err != nil {
		t.Error(err)
		return math.NaN()
	}
	for _, mf := range mfs {
		if mf.GetName() != "fairq_redis_degraded" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "component" && l.GetValue() == component {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0 // no series yet: never degraded
}

func (r *failoverRun) checkNothingLost(errorf func(string, ...any)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		errorf("limiter: %s", e)
	}
	if n := int64(len(r.ran)); n != r.generated.Load() {
		errorf("%d messages ran of %d made", n, r.generated.Load())
	}
	for id, n := range r.ran {
		if n != 1 {
			errorf("message %d ran %d times", id, n)
		}
	}
}

// checkDegradedSeen: each worker's semaphore said it was degraded during
// the outage, and so did its rate limiter when failing open (failing
// closed, a message refused a slot never asks for a token); none is at
// the end.
func (r *failoverRun) checkDegradedSeen(errorf func(string, ...any), open bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make([]bool, 2*len(r.workers))
	for _, s := range r.degraded {
		for i, v := range s.values {
			if s.phase == phaseOutage && v == 1 {
				seen[i] = true
			}
		}
	}
	for i, ok := range seen {
		component := []string{"worker_ratelimit", "worker_semaphore"}[i%2]
		if !ok && (open || component == "worker_semaphore") {
			errorf("worker %d: fairq_redis_degraded{component=%q} never 1 during the outage", i/2, component)
		}
	}
	if last := r.degraded[len(r.degraded)-1]; slices.ContainsFunc(last.values, func(v float64) bool { return v != 0 }) {
		errorf("fairq_redis_degraded at the end: %v, want all 0", last.values)
	}
}

// checkLimits holds each tenant's dispatches to its limits. In flight,
// for a concurrency c over n workers, each allowed s = ⌈c/n⌉ of it while
// Redis is unreachable:
//   - healthy, and recovered once the jobs asked for in the outage ended:
//     c;
//   - failing open, from the end of the jobs asked for before the kill
//     (they may hold leases in Redis) until the replica can have taken
//     over (r.takeover: the cluster's node timeout, or the Sentinels'
//     down-after-milliseconds): every worker on its share, n×s;
//   - failing open, otherwise from the kill until the jobs of the outage
//     ended: c + n×s. A worker back on Redis takes up to c there while
//     the slots taken locally, its own or another worker's still cut off,
//     run on unknown to Redis;
//   - failing closed: c throughout, and nothing asked for after the kill
//     starts for the tenants on the dead master until r.takeover.
//
// Started, for a rate r and burst b over a phase of t seconds: b + r×t.
// Failing open, during the outage:
//   - a tenant on the masters still up is asked of Redis when the
//     cooldown after a failure has passed and of the worker's share in
//     between (the component's state, not the key's, decides), so up to
//     twice that;
//   - a tenant on the dead master gets two bursts more: the workers'
//     shares start full (n × b/n), and its bucket in Redis refilled while
//     nobody could ask it, so it answers with b again once the replica
//     took over.
func (r *failoverRun) checkLimits(errorf func(string, ...any), limits map[string]tenant.Resolved, open bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(len(r.workers))
	victim := r.onVictim
	span := func(p int) (time.Time, time.Time) {
		if p+1 < phases {
			return r.phaseAt[p], r.phaseAt[p+1]
		}
		return r.phaseAt[p], r.ended
	}
	takeover := r.killedAt.Add(r.takeover)
	for id, lim := range limits {
		c := int64(lim.Concurrency)
		share := (c + n - 1) / n
		// When the jobs asked for before the kill, and before the
		// recovery, had all ended.
		var preKillDone, outageDone time.Time
		for _, e := range r.events {
			if e.tenant != id {
				continue
			}
			if e.asked.Before(r.killedAt) && e.end.After(preKillDone) {
				preKillDone = e.end
			}
			if e.asked.Before(r.phaseAt[phaseRecovered]) && e.end.After(outageDone) {
				outageDone = e.end
			}
		}
		bound := func(e dispatchEvent) int64 {
			switch {
			case !open:
				return c
			case e.asked.After(r.killedAt) && e.at.After(preKillDone) && e.at.Before(takeover):
				return n * share
			case e.phase == phaseOutage, e.phase == phaseRecovered && !e.at.After(outageDone):
				return c + n*share
			}
			return c
		}
		started := [phases]int{}
		for _, e := range r.events {
			if e.tenant != id {
				continue
			}
			started[e.phase]++
			if limit := bound(e); e.inFlight > limit {
				errorf("%s, %s phase, +%v: %d in flight, want at most %d (concurrency %d)",
					id, phaseNames[e.phase], e.at.Sub(r.started).Round(time.Millisecond), e.inFlight, limit, c)
			}
			if !open && victim[id] && e.asked.After(r.killedAt) && e.at.Before(takeover) {
				errorf("%s, failing closed, started a message asked for %v after its master was killed", id, e.asked.Sub(r.killedAt).Round(time.Millisecond))
			}
		}
		if lim.ProcessRate >= 1000 {
			continue // held by its concurrency
		}
		for p := range phases {
			from, to := span(p)
			allowed := float64(lim.ProcessBurst) + lim.ProcessRate*to.Sub(from).Seconds()
			if p == phaseOutage && open {
				if victim[id] {
					allowed += 2 * float64(lim.ProcessBurst)
				} else {
					allowed *= 2
				}
			}
			if float64(started[p]) > allowed+1 {
				errorf("%s, %s phase (%v): %d started, want at most %.0f (rate %v/s, burst %d)",
					id, phaseNames[p], to.Sub(from).Round(time.Millisecond), started[p], allowed, lim.ProcessRate, lim.ProcessBurst)
			}
		}
	}
}

// report logs, by phase and tenant, what started and the most in flight,
// the spills, and the degraded gauges' changes; and the workers' logs.
func (r *failoverRun) report() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for p := range phases {
		fmt.Fprintf(&b, "%s from +%v:", phaseNames[p], r.phaseAt[p].Sub(r.started).Round(time.Millisecond))
		for _, ft := range failoverTenants {
			id := r.ids[ft.role]
			var started int
			var most int64
			for _, e := range r.events {
				if e.tenant == id && e.phase == p {
					started++
					most = max(most, e.inFlight)
				}
			}
			fmt.Fprintf(&b, " %s %d started, at most %d in flight;", id, started, most)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "spills: %v\n", r.spills)
	var last []float64
	for _, s := range r.degraded {
		if !slices.Equal(s.values, last) {
			fmt.Fprintf(&b, "+%v degraded (rate, semaphore of each worker): %v\n", s.at.Sub(r.started).Round(time.Millisecond), s.values)
			last = s.values
		}
	}
	r.t.Log(b.String())
	if r.t.Failed() {
		for i, w := range r.workers {
			r.t.Logf("worker %d's log:\n%s", i, w.logs)
		}
		r.t.Logf("go-redis's log:\n%s", r.redisLogs)
	}
}

// waitFor polls cond every 50 ms until it holds, and fails t after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond) // polling other processes' state
	}
}

// TestFailoverChecks holds the failover test's checks to what they must
// report: a run within the limits passes, and each excess, loss or double
// run is reported.
func TestFailoverChecks(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	limits := map[string]tenant.Resolved{}
	for _, ft := range failoverTenants {
		limits[ft.role] = tenant.Resolve(config.Default().Defaults, ft.limits)
	}
	newRun := func(events ...dispatchEvent) *failoverRun {
		r := &failoverRun{
			t: t, ids: map[string]string{"conc": "conc", "rate": "rate", "calm": "calm"},
			workers: make([]*worker, failoverWorkers), started: t0,
			onVictim: map[string]bool{"conc": true, "rate": true}, takeover: testenv.ClusterNodeTimeout,
			killedAt: t0.Add(time.Second), ended: t0.Add(5 * time.Second),
			phaseAt: [phases]time.Time{t0, t0.Add(time.Second), t0.Add(4 * time.Second)},
			events:  events, ran: map[int64]int{1: 1, 2: 1}, degraded: []degradedSample{{values: []float64{0, 0}}},
		}
		r.generated.Store(2)
		return r
	}
	// A message asked for and started at t0+d, its job 100 ms long.
	at := func(d time.Duration, phase int, tenant string, inFlight int64) dispatchEvent {
		return dispatchEvent{asked: t0.Add(d), at: t0.Add(d), end: t0.Add(d + 100*time.Millisecond), phase: phase, tenant: tenant, inFlight: inFlight}
	}
	// A job asked for on Redis just before the kill, running 600 ms into
	// the outage.
	long := dispatchEvent{asked: t0.Add(900 * time.Millisecond), at: t0.Add(900 * time.Millisecond), end: t0.Add(1600 * time.Millisecond), phase: phaseHealthy, tenant: "conc", inFlight: 1}
	many := func(n int, d time.Duration, phase int, tenant string) []dispatchEvent {
		var out []dispatchEvent
		for range n {
			out = append(out, at(d, phase, tenant, 1))
		}
		return out
	}
	within := append([]dispatchEvent{
		at(500*time.Millisecond, phaseHealthy, "conc", 3),
		at(4500*time.Millisecond, phaseRecovered, "conc", 3),
	}, many(20, 500*time.Millisecond, phaseHealthy, "calm")...)
	tests := []struct {
		name   string
		open   bool
		run    *failoverRun
		report []string // what the checks must say; none: they pass
	}{
		{"within the limits, open", true, newRun(within...), nil},
		{"within the limits, closed", false, newRun(within...), nil},
		{"local shares, open", true, newRun(at(2*time.Second-time.Millisecond, phaseOutage, "conc", 4)), nil},
		{"over the concurrency", true, newRun(at(500*time.Millisecond, phaseHealthy, "conc", 4)), []string{"conc, healthy phase, +500ms: 4 in flight, want at most 3 (concurrency 3)"}},
		{"over the local shares", true, newRun(at(1500*time.Millisecond, phaseOutage, "conc", 5)), []string{"conc, outage phase, +1.5s: 5 in flight, want at most 4 (concurrency 3)"}},
		{"beside leases from before the kill, open", true, newRun(long, at(1500*time.Millisecond, phaseOutage, "conc", 7)), nil},
		{"over the local shares once those ended", true, newRun(long, at(1700*time.Millisecond, phaseOutage, "conc", 5)), []string{"conc, outage phase, +1.7s: 5 in flight, want at most 4 (concurrency 3)"}},
		{"over the concurrency and the local shares", true, newRun(long, at(1500*time.Millisecond, phaseOutage, "conc", 8)), []string{"conc, outage phase, +1.5s: 8 in flight, want at most 7 (concurrency 3)"}},
		{"over the concurrency once the outage's jobs ended", true, newRun(at(3950*time.Millisecond, phaseOutage, "conc", 1), at(4050*time.Millisecond, phaseRecovered, "conc", 7), at(4100*time.Millisecond, phaseRecovered, "conc", 4)), []string{"conc, recovered phase, +4.1s: 4 in flight, want at most 3 (concurrency 3)"}},
		{"over the concurrency, closed", false, newRun(at(3*time.Second, phaseOutage, "conc", 4)), []string{"conc, outage phase, +3s: 4 in flight, want at most 3 (concurrency 3)"}},
		{"started on a dead master, closed", false, newRun(at(1500*time.Millisecond, phaseOutage, "rate", 1)), []string{"rate, failing closed, started a message asked for 500ms after its master was killed"}},
		{"over the rate", true, newRun(many(30, 500*time.Millisecond, phaseHealthy, "calm")...), []string{"calm, healthy phase (1s): 30 started, want at most 24 (rate 20/s, burst 4)"}},
	}
	for _, tt := range tests {
		var got []string
		errorf := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
		tt.run.checkNothingLost(errorf)
		tt.run.checkDegradedSeen(func(string, ...any) {}, tt.open) // no samples in the outage here
		tt.run.checkLimits(errorf, limits, tt.open)
		if !slices.Equal(got, tt.report) {
			t.Errorf("%s: the checks said %q, want %q", tt.name, got, tt.report)
		}
	}

	// Two workers' gauges (rate, semaphore each): failing open both must
	// have said degraded in the outage, failing closed the semaphores, and
	// none at the end.
	gauges := newRun()
	gauges.degraded = []degradedSample{
		{phase: phaseOutage, values: []float64{0, 1, 0, 0}},
		{phase: phaseRecovered, values: []float64{0, 0, 1, 0}},
	}
	for _, tt := range []struct {
		open bool
		want []string
	}{
		{true, []string{
			`worker 0: fairq_redis_degraded{component="worker_ratelimit"} never 1 during the outage`,
			`worker 1: fairq_redis_degraded{component="worker_ratelimit"} never 1 during the outage`,
			`worker 1: fairq_redis_degraded{component="worker_semaphore"} never 1 during the outage`,
			"fairq_redis_degraded at the end: [0 0 1 0], want all 0",
		}},
		{false, []string{
			`worker 1: fairq_redis_degraded{component="worker_semaphore"} never 1 during the outage`,
			"fairq_redis_degraded at the end: [0 0 1 0], want all 0",
		}},
	} {
		var got []string
		gauges.checkDegradedSeen(func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }, tt.open)
		if !slices.Equal(got, tt.want) {
			t.Errorf("degraded gauges, open %v: the check said %q, want %q", tt.open, got, tt.want)
		}
	}

	lost := newRun()
	lost.generated.Store(3)
	lost.ran[2] = 2
	var got []string
	lost.checkNothingLost(func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) })
	slices.Sort(got)
	if want := []string{"2 messages ran of 3 made", "message 2 ran 2 times"}; !slices.Equal(got, want) {
		t.Errorf("a lost message and one run twice: the check said %q, want %q", got, want)
	}
}
