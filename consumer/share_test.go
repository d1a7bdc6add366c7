package consumer_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
)

// Timing of the fleets of these tests: a heartbeat a tenth of a second,
// the fleet looked at every 20 ms, long polls of 2 s.
const (
	shareBeat    = 100 * time.Millisecond
	shareWait    = 2 * time.Second
	shareSlack   = 3 * time.Second // a loaded machine's delay on top of a long poll
	shareCatchUp = 10 * time.Second
)

// sharedPool is a pool of live queues and the fleet registry its workers
// share it through: Redis, under a prefix of the test's own.
type sharedPool struct {
	kind   string
	b      queue.Backend
	names  queue.Names
	redis  *redis.Client
	prefix string

	mu        sync.Mutex
	delivered map[string][]string // body → ids of the workers it was pushed to
	seen      chan delivered
}

// delivered is one push of a message.
type delivered struct {
	worker, queue, body string
	at                  time.Time
}

// newSharedPool makes n live queues (with overflow, backlog and DLQ) on a
// backend of the kind, and a Redis client for the fleet.
func newSharedPool(t *testing.T, kind string, n int) *sharedPool {
	t.Helper()
	p := &sharedPool{kind: kind, delivered: map[string][]string{}, seen: make(chan delivered, 1000)}
	p.redis = redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { p.redis.Close() })
	p.prefix = testenv.Prefix(t)
	switch kind {
	case "memory":
		p.b = queue.NewMemory(queue.MemoryConfig{})
	case "sqs":
		p.b = testenv.SQSBackend(t)
	}
	p.names = queue.PoolNames(p.prefix, n)
	queuetest.CreatePool(t, p.b, p.names)
	return p
}

// member is a worker of the pool with its fleet registration.
type member struct {
	id      string
	fleet   *fleet.Fleet
	w       *consumer.Worker
	reg     *prometheus.Registry
	crashed bool // its registration cannot be taken out at the end
}

// memberOpts are what a test changes of a member.
type memberOpts struct {
	k           int
	connections int
	redis       redis.UniversalClient // default: the pool's
	handler     func(m *consumer.Message) error
	// registryOnly gives the worker its fleet as a registry only: it
	// neither leaves it as it stops nor hears of changes between
	// heartbeats, as before workers announced their departure.
	registryOnly bool
}

// registryOnly is a fleet as the consumer.Fleet interface has it, without
// Leave and Changed.
type registryOnly struct{ f *fleet.Fleet }

func (r registryOnly) ID() string { return r.f.ID() }

func (r registryOnly) Workers() (ids, saturated []string, registered bool) { return r.f.Workers() }

// join starts a worker named id in the fleet; it is stopped (worker, then
// registration) when the test ends, unless the test stopped it.
func (p *sharedPool) join(t *testing.T, id string, o memberOpts) *member {
	t.Helper()
	m := &member{id: id, reg: prometheus.NewRegistry()}
	rc := o.redis
	if rc == nil {
		rc = p.redis
	}
	var err error
	m.fleet, err = fleet.New(fleet.Config{
		Redis: rc, Prefix: p.prefix + ":", ID: id, Heartbeat: shareBeat,
		SaturatedFunc: func() bool { return m.w != nil && m.w.Saturated() },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := consumer.HandlerFunc(func(_ context.Context, msg *consumer.Message) error {
		p.mu.Lock()
		p.delivered[msg.Body] = append(p.delivered[msg.Body], id)
		p.mu.Unlock()
		p.seen <- delivered{id, msg.Queue, msg.Body, time.Now()}
		if o.handler != nil {
			return o.handler(msg)
		}
		return nil
	})
	var f consumer.Fleet = m.fleet
	if o.registryOnly {
		f = registryOnly{m.fleet}
	}
	w, err := consumer.New(consumer.Config{
		Backend: p.b, Names: p.names, Handler: h, Logger: discard, Registerer: m.reg,
		Connections: o.connections, ReceiveWait: shareWait,
		Fleet: f, WatchersPerQueue: o.k, ShareInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	m.w = w
	if err := m.fleet.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.fleet.Stop(context.Background()); err != nil && !m.crashed {
			t.Errorf("fleet Stop of %s: %v", id, err)
		}
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, w) })
	return m
}

// leave stops the member gracefully: its worker, then its registration.
func (m *member) leave(t *testing.T) {
	t.Helper()
	stop(t, m.w)
	if err := m.fleet.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// want returns the queues each of members should watch, k per queue.
func (p *sharedPool) want(k int, members ...*member) map[string][]string {
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.id
	}
	out := map[string][]string{}
	for _, id := range ids {
		for _, i := range consumer.Assign(p.names.Live, ids, id, k) {
			out[id] = append(out[id], p.names.Live[i])
		}
	}
	return out
}

// pickID returns the first of base-0, base-1, … that ok accepts: the
// queue names are fresh for each test, and with them the assignment. An
// id that must outrank a worker on one queue and not on another is rare
// when that worker's hash on the first is near the top: a few in a
// hundred names of queues leave no such id among the first hundred, so
// the search goes on far longer (each try is two hashes).
func pickID(t *testing.T, base string, ok func(id string) bool) string {
	t.Helper()
	for i := range 100_000 {
		if id := fmt.Sprintf("%s-%d", base, i); ok(id) {
			return id
		}
	}
	t.Fatalf("no id for %s", base)
	return ""
}

// watching returns the queues each member watches now.
func watching(members ...*member) map[string][]string {
	out := map[string][]string{}
	for _, m := range members {
		if w := m.w.Watched(); len(w) > 0 {
			out[m.id] = w
		}
	}
	return out
}

// settle waits until the members watch what want says.
func settle(t *testing.T, what string, want map[string][]string, members ...*member) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(shareCatchUp)
	defer deadline.Stop()
	for {
		got := watching(members...)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: the workers watch %v, want %v", what, got, want)
		}
	}
}

// sendAll sends one message with a body named after round to each live
// queue, and returns when each was sent.
func (p *sharedPool) sendAll(t *testing.T, round string) map[string]time.Time {
	t.Helper()
	sent := map[string]time.Time{}
	for _, q := range p.names.Live {
		body := round + "@" + q
		sent[body] = time.Now()
		queuetest.Put(t, p.b, q, queuetest.Msg{Body: body, Tenant: "acme"})
	}
	return sent
}

// await waits for every message of sent to be pushed, each within limit of
// its send, and returns which worker took each queue's.
func (p *sharedPool) await(t *testing.T, sent map[string]time.Time, limit time.Duration) map[string]string {
	t.Helper()
	took := map[string]string{}
	left := len(sent)
	deadline := time.NewTimer(limit + shareCatchUp)
	defer deadline.Stop()
	for left > 0 {
		select {
		case d := <-p.seen:
			at, ok := sent[d.body]
			if !ok {
				continue
			}
			if _, again := took[d.queue]; again {
				continue
			}
			took[d.queue] = d.worker
			left--
			if wait := d.at.Sub(at); wait > limit {
				t.Errorf("the message on %s was pushed %v after its send (by %s), want within %v", d.queue, wait.Round(time.Millisecond), d.worker, limit)
			}
		case <-deadline.C:
			t.Fatalf("%d of %d messages not pushed within %v; pushed: %v", left, len(sent), limit+shareCatchUp, took)
		}
	}
	return took
}

// TestShareQueues: three workers with two watchers per queue watch each
// live queue twice between them, exactly as the assignment says, and a
// message on any queue is pushed within one long poll.
func TestShareQueues(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := newSharedPool(t, kind, 6)
			a := p.join(t, "worker-a", memberOpts{k: 2})
			b := p.join(t, "worker-b", memberOpts{k: 2})
			c := p.join(t, "worker-c", memberOpts{k: 2})
			want := p.want(2, a, b, c)
			settle(t, "three workers", want, a, b, c)
			for _, q := range p.names.Live {
				n := 0
				for _, qs := range want {
					if slices.Contains(qs, q) {
						n++
					}
				}
				if n != 2 {
					t.Errorf("%s is watched by %d workers, want 2", q, n)
				}
			}
			for _, m := range []*member{a, b, c} {
				if got := metric(t, m.reg, "fairq_worker_queues_watched"); got != float64(len(want[m.id])) {
					t.Errorf("%s: fairq_worker_queues_watched = %v, want %d", m.id, got, len(want[m.id]))
				}
				if got := metric(t, m.reg, "fairq_worker_watching_all_queues"); got != 0 {
					t.Errorf("%s: fairq_worker_watching_all_queues = %v, want 0", m.id, got)
				}
			}
			took := p.await(t, p.sendAll(t, "first"), shareWait+shareSlack)
			for q, id := range took {
				if !slices.Contains(want[id], q) {
					t.Errorf("the message on %s was pushed by %s, which does not watch it", q, id)
				}
			}
		})
	}
}

// TestShareWorkerLeaves: with one watcher per queue, the queues of a
// worker that stops are taken over within a few heartbeats, and of
// messages sent to every queue before and after, none is lost.
func TestShareWorkerLeaves(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := newSharedPool(t, kind, 6)
			a := p.join(t, "worker-a", memberOpts{k: 1})
			b := p.join(t, "worker-b", memberOpts{k: 1})
			c := p.join(t, "worker-c", memberOpts{k: 1})
			settle(t, "three workers", p.want(1, a, b, c), a, b, c)
			p.await(t, p.sendAll(t, "before"), shareWait+shareSlack)

			before := p.sendAll(t, "while") // some on c's queues, sent as it stops
			c.leave(t)
			settle(t, "c left", p.want(1, a, b), a, b)
			p.await(t, before, shareCatchUp+shareWait+shareSlack)
			p.await(t, p.sendAll(t, "after"), shareWait+shareSlack)
		})
	}
}

// TestShareWorkerCrashes: the queues of a worker that dies are taken over
// once its registration goes stale, three heartbeats.
func TestShareWorkerCrashes(t *testing.T) {
	t.Parallel()
	p := newSharedPool(t, "memory", 6)
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { cut.Close() })
	a := p.join(t, "worker-a", memberOpts{k: 1})
	b := p.join(t, "worker-b", memberOpts{k: 1})
	c := p.join(t, "worker-c", memberOpts{k: 1, redis: cut})
	settle(t, "three workers", p.want(1, a, b, c), a, b, c)

	// A crash: no more heartbeats, no leaving, no receiving.
	c.crashed = true
	proxy.SetDown(true)
	c.w.Kill()
	start := time.Now()
	settle(t, "c died", p.want(1, a, b), a, b)
	if took := time.Since(start); took > 3*shareBeat+2*shareBeat+time.Second {
		t.Errorf("the queues of a dead worker were taken over after %v, want within about three heartbeats (%v)", took, 3*shareBeat)
	}
	p.await(t, p.sendAll(t, "after"), shareWait+shareSlack)
}

// TestShareWorkerJoins: a worker that joins takes its share, and the
// others give it up.
func TestShareWorkerJoins(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := newSharedPool(t, kind, 6)
			a := p.join(t, "worker-a", memberOpts{k: 1})
			b := p.join(t, "worker-b", memberOpts{k: 1})
			settle(t, "two workers", p.want(1, a, b), a, b)
			// A newcomer the assignment gives a queue or more.
			id := pickID(t, "worker-c", func(id string) bool {
				return len(consumer.Assign(p.names.Live, []string{"worker-a", "worker-b", id}, id, 1)) > 0
			})
			c := p.join(t, id, memberOpts{k: 1})
			want := p.want(1, a, b, c)
			settle(t, "c joined", want, a, b, c)
			took := p.await(t, p.sendAll(t, "after"), shareWait+shareSlack)
			for _, q := range want[id] {
				if took[q] != id {
					t.Errorf("the message on %s, c's queue, was pushed by %s", q, took[q])
				}
			}
		})
	}
}

// TestShareRedisDown: a worker that cannot reach the fleet registry
// watches every live queue and says so; when Redis is back it watches its
// share again.
func TestShareRedisDown(t *testing.T) {
	t.Parallel()
	p := newSharedPool(t, "memory", 6)
	proxy := testenv.NewProxy(t, testenv.RedisAddr(t))
	cut := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { cut.Close() })
	a := p.join(t, "worker-a", memberOpts{k: 1})
	b := p.join(t, "worker-b", memberOpts{k: 1, redis: cut})
	settle(t, "two workers", p.want(1, a, b), a, b)

	proxy.SetDown(true)
	all := map[string][]string{"worker-a": p.names.Live, "worker-b": p.names.Live}
	// a sees b go stale and takes every queue; b, unregistered, watches
	// every queue too.
	settle(t, "b cut off", all, a, b)
	if got := metric(t, b.reg, "fairq_worker_watching_all_queues"); got != 1 {
		t.Errorf("fairq_worker_watching_all_queues of the cut-off worker = %v, want 1", got)
	}
	if got := metric(t, a.reg, "fairq_worker_watching_all_queues"); got != 0 {
		t.Errorf("fairq_worker_watching_all_queues of a worker alone in the registry = %v, want 0", got)
	}
	p.await(t, p.sendAll(t, "cut"), shareWait+shareSlack)

	proxy.SetDown(false)
	settle(t, "b back", p.want(1, a, b), a, b)
	if got := metric(t, b.reg, "fairq_worker_watching_all_queues"); got != 0 {
		t.Errorf("fairq_worker_watching_all_queues once back = %v, want 0", got)
	}
}

// TestShareSaturatedHelped: when every slot of a queue's watcher holds a
// message, a free worker starts watching its queues, and a message there
// is pushed by it rather than waiting for the busy one.
func TestShareSaturatedHelped(t *testing.T) {
	t.Parallel()
	p := newSharedPool(t, "memory", 6)
	release := make(chan struct{})
	block := func(m *consumer.Message) error {
		if m.Body == "slow" {
			<-release
		}
		return nil
	}
	// An a with two queues or more, to fill with one and watch the other.
	idA := pickID(t, "worker-a", func(id string) bool {
		return len(consumer.Assign(p.names.Live, []string{id, "worker-b"}, id, 1)) >= 2
	})
	a := p.join(t, idA, memberOpts{k: 1, connections: 1, handler: block})
	// b has slots to spare for the queues it takes on.
	b := p.join(t, "worker-b", memberOpts{k: 1, connections: 10, handler: block})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // before the workers stop, should the test end early
	want := p.want(1, a, b)
	settle(t, "two workers", want, a, b)
	first, second := want[idA][0], want[idA][1]

	queuetest.Put(t, p.b, first, queuetest.Msg{Body: "slow", Tenant: "acme"})
	if d := recv(t, p.seen, shareWait+shareSlack, "the slow message"); d.worker != idA {
		t.Fatalf("the slow message went to %s, want %s, its queue's watcher", d.worker, idA)
	}
	// a's one slot is held: b helps on a's queues.
	settle(t, "a saturated", map[string][]string{idA: want[idA], "worker-b": p.names.Live}, a, b)
	sent := time.Now()
	queuetest.Put(t, p.b, second, queuetest.Msg{Body: "quick", Tenant: "acme"})
	d := recv(t, p.seen, shareWait+shareSlack, "the message behind the saturated worker")
	if d.worker != "worker-b" || d.body != "quick" {
		t.Errorf("got %s from %s, want the quick message from worker-b", d.body, d.worker)
	}
	if wait := d.at.Sub(sent); wait > shareWait+shareSlack {
		t.Errorf("the message behind the saturated worker waited %v", wait)
	}
	free()
	settle(t, "a free again", want, a, b)
}

// TestShareLostQueueGivesBack: the loop of a queue a worker no longer
// watches lets its long poll finish, and gives back at once what it
// brings, unstarted, as a stopping worker does.
func TestShareLostQueueGivesBack(t *testing.T) {
	t.Parallel()
	p := newSharedPool(t, "memory", 2)
	a := p.join(t, "worker-a", memberOpts{k: 1})
	settle(t, "alone", map[string][]string{"worker-a": p.names.Live}, a)
	q := p.names.Live[0]
	// The loop on q is in its long poll once its first, short, receive
	// has come back.
	deadline := time.Now().Add(shareCatchUp)
	for metric(t, a.reg, "fairq_worker_receives_total", "queue", q) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no receive on %s", q)
		}
		time.Sleep(10 * time.Millisecond) // polling a counter
	}
	// A registration that ranks first for q, and not for the other
	// queue, with no worker behind it: nobody else receives from q.
	other := pickID(t, "registered-only", func(id string) bool {
		return slices.Equal(consumer.Assign(p.names.Live, []string{"worker-a", id}, "worker-a", 1), []int{1})
	})
	f, err := fleet.New(fleet.Config{Redis: p.redis, Prefix: p.prefix + ":", ID: other, Heartbeat: shareBeat})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Stop(context.Background()) })
	settle(t, "q lost", map[string][]string{"worker-a": p.names.Live[1:]}, a)

	queuetest.Put(t, p.b, q, queuetest.Msg{Body: "given back", Tenant: "acme"})
	deadline = time.Now().Add(shareWait + shareSlack)
	for metric(t, a.reg, "fairq_worker_processed_total", "outcome", "released") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the message the lost loop's poll brought was not given back within %v", shareWait+shareSlack)
		}
		time.Sleep(10 * time.Millisecond) // polling a counter
	}
	d, err := p.b.Depth(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if d.Visible != 1 {
		t.Errorf("%s: %d visible after the give-back, want the message (depth %+v)", q, d.Visible, d)
	}
	select {
	case got := <-p.seen:
		t.Errorf("%s pushed %q from a queue it no longer watches", got.worker, got.body)
	default:
	}
}

// TestShareHandover: with one watcher per queue, a message sent to a
// queue of a worker as it stops waits for another to take the queue. The
// stopping worker leaves the fleet registry as it stops receiving and the
// others hear of it at once, so the message waits about a receive; before
// (registryOnly), the worker left only once its last job had finished,
// and the others saw it at their next heartbeat: the message waited for
// both.
func TestShareHandover(t *testing.T) {
	const hold = 3 * time.Second // the stopping worker's last job
	gaps := map[bool]time.Duration{}
	for _, announced := range []bool{true, false} {
		t.Run(fmt.Sprintf("announced=%v", announced), func(t *testing.T) {
			p := newSharedPool(t, "sqs", 6)
			o := memberOpts{k: 1, registryOnly: !announced}
			a := p.join(t, "worker-a", o)
			b := p.join(t, "worker-b", o)
			idC := pickID(t, "worker-c", func(id string) bool {
				return len(consumer.Assign(p.names.Live, []string{"worker-a", "worker-b", id}, id, 1)) > 0
			})
			oc := o
			oc.handler = func(m *consumer.Message) error {
				if m.Body == "last job" {
					time.Sleep(hold) // the job's work
				}
				return nil
			}
			c := p.join(t, idC, oc)
			want := p.want(1, a, b, c)
			settle(t, "three workers", want, a, b, c)
			q := want[idC][0]

			queuetest.Put(t, p.b, q, queuetest.Msg{Body: "last job", Tenant: "acme"})
			if d := recv(t, p.seen, shareWait+shareSlack, "the last job"); d.worker != idC {
				t.Fatalf("the last job went to %s, want %s, its queue's watcher", d.worker, idC)
			}
			left := make(chan struct{})
			go func() {
				defer close(left)
				stop(t, c.w)
				if err := c.fleet.Stop(context.Background()); err != nil {
					t.Error(err)
				}
			}()
			// The send takes a round trip to the emulator: the stop has
			// begun when the message is on the queue.
			sent := time.Now()
			queuetest.Put(t, p.b, q, queuetest.Msg{Body: "sent during the stop", Tenant: "acme"})
			var d delivered
			for d.body != "sent during the stop" {
				d = recv(t, p.seen, hold+shareCatchUp, "the message sent during the stop")
			}
			if d.worker == idC {
				t.Fatalf("%s pushed a message received after its stop began", idC)
			}
			gaps[announced] = d.at.Sub(sent)
			t.Logf("a message sent to %s as %s stopped was pushed by %s after %v", q, idC, d.worker, gaps[announced].Round(time.Millisecond))
			<-left
		})
	}
	if t.Failed() {
		return
	}
	// The stopping worker's last job takes hold: announced, the message
	// does not wait for it; otherwise it does, and for a heartbeat more.
	if gaps[true] > hold/2 {
		t.Errorf("announced departure: the message waited %v, want well under the last job's %v", gaps[true], hold)
	}
	if gaps[false] < hold/2 {
		t.Errorf("without the announcement the message waited only %v: the test no longer shows the gap it closes", gaps[false])
	}
}
