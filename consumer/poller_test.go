package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/queue/queuetest"
)

// held returns the messages in flight on every queue of names.
func held(t testing.TB, b queue.Backend, names queue.Names) int {
	t.Helper()
	n := 0
	for _, q := range names.All() {
		d, err := b.Depth(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		n += d.NotVisible
	}
	return n
}

// TestPullOnlyWithCapacity: the worker never holds more messages than it
// has slots.
func TestPullOnlyWithCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		for i := range 20 {
			send(t, b, names.Live[i%2], msg{tenant: "acme"})
		}
		gate := make(chan struct{})
		var running, most, handled atomic.Int32
		start(t, consumer.Config{
			Backend: b, Names: names, Connections: 3,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				n := running.Add(1)
				for {
					if m := most.Load(); n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				<-gate
				running.Add(-1)
				handled.Add(1)
				return nil
			}),
		})
		time.Sleep(5 * time.Second) // an empty queue's loop may hold a slot for a short poll
		synctest.Wait()
		if r, h := running.Load(), held(t, b, names); r != 3 || h != 3 {
			t.Errorf("with 3 slots: %d jobs running, %d messages held; want 3 and 3", r, h)
		}
		close(gate)
		synctest.Wait() // the jobs end and the slots free up
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := handled.Load(); n != 20 {
			t.Errorf("%d messages handled, want 20", n)
		}
		if m := most.Load(); m != 3 {
			t.Errorf("at most %d jobs at once, want 3", m)
		}
	})
}

// TestNoLiveQueueStarves: a message on a quiet live queue is not stuck
// behind a deep one.
func TestNoLiveQueueStarves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		for range 40 {
			send(t, b, names.Live[0], msg{body: "deep"})
		}
		t0 := time.Now()
		send(t, b, names.Live[1], msg{body: "quiet"})
		quiet := make(chan time.Duration, 1)
		start(t, consumer.Config{
			Backend: b, Names: names, Connections: 2,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				if m.Body == "quiet" {
					quiet <- time.Since(t0)
				}
				time.Sleep(time.Second)
				return nil
			}),
		})
		if d := recv(t, quiet, time.Minute, "the quiet queue's message"); d > 3*time.Second {
			t.Errorf("the quiet queue's message waited %v behind 40 messages at 2 slots", d)
		}
	})
}

// TestQueuePriority: with messages on every queue, the backlog is worked
// only once the live queues are empty, and overflow before it.
func TestQueuePriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		send(t, b, names.Backlog, msg{body: "backlog"})
		send(t, b, names.Overflow, msg{body: "overflow"})
		for i := range 6 {
			send(t, b, names.Live[i%2], msg{body: fmt.Sprint("live", i)})
		}
		var mu sync.Mutex
		var order []string
		h, seen := recorder(func(_ int, m *consumer.Message) error {
			mu.Lock()
			order = append(order, m.Body)
			mu.Unlock()
			time.Sleep(time.Second)
			return nil
		})
		start(t, consumer.Config{Backend: b, Names: names, Handler: h, Connections: 2})
		for range 8 {
			recv(t, seen, time.Minute, "delivery")
		}
		mu.Lock()
		defer mu.Unlock()
		if order[len(order)-1] != "backlog" {
			t.Errorf("order %v: the backlog message is not last", order)
		}
	})
}

// TestIdleReceives: an idle worker long-polls: about one empty receive per
// queue per 20 s.
func TestIdleReceives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		reg := prometheus.NewRegistry()
		w := start(t, consumer.Config{Backend: b, Names: names, Registerer: reg, ReceiveWait: consumer.ReceiveWaitDefault,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })})
		time.Sleep(time.Minute)
		stop(t, w)
		queues := float64(len(names.All()) - 1) // all but the dead-letter queue
		empty := metric(t, reg, "fairq_worker_empty_receives_total")
		if max := queues * (60/20 + 1); empty > max {
			t.Errorf("%v empty receives in a minute idle, want at most %v", empty, max)
		}
		if empty < queues*2 {
			t.Errorf("%v empty receives in a minute idle: the queues were not all polled", empty)
		}
	})
}

// TestIdleReceivesManyQueues: an idle worker watching more queues than
// half its slots still long-polls each of them, as long as a batch of
// slots is left free: it does not shorten its polls to a second for want
// of slots no queue needs.
func TestIdleReceivesManyQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := queue.NewMemory(queue.MemoryConfig{})
		names := queue.PoolNames("t", 38) // and overflow, backlog: 40 loops
		queuetest.CreatePool(t, b, names)
		reg := prometheus.NewRegistry()
		w := start(t, consumer.Config{Backend: b, Names: names, Registerer: reg, ReceiveWait: consumer.ReceiveWaitDefault, Connections: 50,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })})
		time.Sleep(time.Minute)
		stop(t, w)
		empty := metric(t, reg, "fairq_worker_empty_receives_total")
		if max := 40.0 * (60/20 + 1); empty > max {
			t.Errorf("%v empty receives in a minute idle on 40 loops and 50 slots, want at most %v (a long poll each per 20 s)", empty, max)
		}
		if empty < 40*2 {
			t.Errorf("%v empty receives in a minute idle: the queues were not all polled", empty)
		}
	})
}

// TestPollersGrow: a deep queue gets extra receive loops so that the slots
// stay busy; they end when it is drained.
func TestPollersGrow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		const n = 500
		entries := make([]queue.Entry, 0, 10)
		for i := range n {
			entries = append(entries, queue.Entry{ID: fmt.Sprint(i % 10), Body: "x"})
			if len(entries) == 10 {
				if _, err := b.Send(context.Background(), names.Live[0], entries); err != nil {
					t.Fatal(err)
				}
				entries = entries[:0]
			}
		}
		reg := prometheus.NewRegistry()
		var handled atomic.Int32
		var mostPollers atomic.Int64
		t0 := time.Now()
		start(t, consumer.Config{
			Backend: b, Names: names, Registerer: reg, Connections: 50,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				time.Sleep(100 * time.Millisecond)
				if handled.Add(1)%25 == 0 {
					p := int64(metric(t, reg, "fairq_worker_pollers"))
					if p > mostPollers.Load() {
						mostPollers.Store(p)
					}
				}
				return nil
			}),
		})
		for handled.Load() < n {
			time.Sleep(10 * time.Millisecond) // fake time: measures how long the work took
		}
		elapsed := time.Since(t0)
		// 500 jobs of 100 ms on 50 slots: 1 s if the slots are kept busy.
		if elapsed > 2*time.Second {
			t.Errorf("500 jobs of 100 ms on 50 slots took %v, want under 2 s", elapsed)
		}
		base := int64(len(names.Live) + 2)
		if p := mostPollers.Load(); p <= base {
			t.Errorf("at most %d receive loops, want more than the %d base ones", p, base)
		}
		time.Sleep(time.Minute)
		if p := int64(metric(t, reg, "fairq_worker_pollers")); p != base {
			t.Errorf("%d receive loops once drained, want %d", p, base)
		}
	})
}

// TestOverflowShareUnderLiveLoad: while the live queues are flooded, the
// overflow queue is served behind them for at most its patience (2 s), then
// takes its turn among them until it is drained, rather than only what
// slots happen to be left over.
func TestOverflowShareUnderLiveLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		const perLive, overflow = 300, 30
		for i := range 2 * perLive {
			send(t, b, names.Live[i%2], msg{body: "live"})
		}
		for range overflow {
			send(t, b, names.Overflow, msg{body: "overflow"})
		}
		var live, over atomic.Int32
		liveAtLast := make(chan int32, 1)
		t0 := time.Now()
		start(t, consumer.Config{
			Backend: b, Names: names, Connections: 4,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				time.Sleep(100 * time.Millisecond) // the work
				if m.Body == "live" {
					live.Add(1)
				} else if over.Add(1) == overflow {
					liveAtLast <- live.Load()
				}
				return nil
			}),
		})
		n := recv(t, liveAtLast, 5*time.Minute, "the last overflow message")
		took := time.Since(t0)
		// 4 slots, 100 ms jobs: 40 messages a second, 15 s of live work.
		// The overflow queue waits at most 2 s, then gets about one
		// reservation in three: its 30 messages are done at about 4 s,
		// 160 live messages in. Served only with the slots left over,
		// they took 9 s to 18 s, most of the live work done first.
		if took > 6*time.Second || n > 2*perLive/3 {
			t.Errorf("the overflow queue was drained after %v and %d of %d live messages, want within 6 s and a third of them",
				took, n, 2*perLive)
		}
		t.Logf("overflow drained after %v and %d live messages", took, n)
	})
}

// TestBacklogDrainsUnderLiveLoad: under a steady live load that leaves
// slots free, the backlog drains behind the fresh messages, which keep
// starting at once, rather than only once the load stops; a live queue
// without traffic does not hold it up.
func TestBacklogDrainsUnderLiveLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := queue.NewMemory(queue.MemoryConfig{})
		names := queue.PoolNames("t", 3) // the third gets no message
		queuetest.CreatePool(t, b, names)
		const old = 40
		for range old {
			send(t, b, names.Backlog, msg{body: "old"})
		}
		var mu sync.Mutex
		var oldDone int
		var drainedAt time.Time
		var worstFresh time.Duration
		t0 := time.Now()
		start(t, consumer.Config{
			Backend: b, Names: names, Connections: 30,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				mu.Lock()
				if m.Body != "old" {
					worstFresh = max(worstFresh, time.Since(m.EnqueuedAt))
				}
				mu.Unlock()
				time.Sleep(200 * time.Millisecond) // the work
				mu.Lock()
				defer mu.Unlock()
				if m.Body == "old" {
					if oldDone++; oldDone == old {
						drainedAt = time.Now()
					}
				}
				return nil
			}),
		})
		// 10 fresh messages a second for 20 s: two slots busy of thirty.
		for i := range 200 {
			send(t, b, names.Live[i%2], msg{body: "fresh"})
			time.Sleep(100 * time.Millisecond)
		}
		loadEnd := time.Now()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if oldDone != old {
			t.Fatalf("%d of %d backlog messages processed", oldDone, old)
		}
		// Spare capacity: all but a tenth of the slots the live loops leave,
		// so a few seconds for the 40.
		if drainedAt.After(loadEnd) || drainedAt.Sub(t0) > 10*time.Second {
			t.Errorf("the backlog drained %v after the start of a 20 s load, want within 10 s", drainedAt.Sub(t0))
		}
		if worstFresh > 300*time.Millisecond {
			t.Errorf("a fresh message waited %v to start while the backlog drained, want at most 300ms", worstFresh)
		}
		t.Logf("backlog drained after %v; fresh messages waited at most %v", drainedAt.Sub(t0), worstFresh)
	})
}

// TestFewSlotsManyQueues: with hardly more slots than queues, the loops
// watching empty queues do not hold the slots the busy queues need. (Each
// watching loop used to hold a slot for a second's long poll in turn, and
// 4 slots over 10 queues ran 2 messages a second of 400.)
func TestFewSlotsManyQueues(t *testing.T) {
	for _, conns := range []int{4, 10} {
		t.Run(fmt.Sprint(conns, " slots"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := queue.NewMemory(queue.MemoryConfig{})
				names := queue.PoolNames("t", 8)
				queuetest.CreatePool(t, b, names)
				const total = 2000
				for i := range total {
					send(t, b, names.Live[i%2], msg{body: "x"})
				}
				var n atomic.Int64
				done := make(chan time.Duration, 1)
				t0 := time.Now()
				start(t, consumer.Config{
					Backend: b, Names: names, Connections: conns,
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						time.Sleep(10 * time.Millisecond) // the work
						if n.Add(1) == total {
							done <- time.Since(t0)
						}
						return nil
					}),
				})
				took := recv(t, done, 10*time.Minute, "the last message")
				ideal := time.Duration(total/conns) * 10 * time.Millisecond
				if took > 2*ideal {
					t.Errorf("%d messages of 10 ms took %v on %d slots, want at most twice the %v of slots never idle", total, took, conns, ideal)
				}
				t.Logf("%d messages in %v (%v with every slot busy)", total, took, ideal)
			})
		})
	}
}

// TestReceiveWindowOnBusyQueuesOnly: a queue fast enough for the receive
// window to gather two messages or more is received in batches, fewer
// receives than messages; a slower one is received at once, so that its
// messages do not wait out the window.
func TestReceiveWindowOnBusyQueuesOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		reg := prometheus.NewRegistry()
		var mu sync.Mutex
		worst := map[string]time.Duration{}
		start(t, consumer.Config{
			Backend: b, Names: names, Registerer: reg, Connections: 50, ReceiveWindow: 50 * time.Millisecond,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				mu.Lock()
				worst[m.Body] = max(worst[m.Body], time.Since(m.EnqueuedAt))
				mu.Unlock()
				return nil
			}),
		})
		// 10 s: 25 a second on the slow queue, 200 on the busy one.
		for tick := range 2000 {
			send(t, b, names.Live[1], msg{body: "busy"})
			if tick%8 == 0 {
				send(t, b, names.Live[0], msg{body: "slow"})
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		slow := metric(t, reg, "fairq_worker_receives_total", "queue", names.Live[0])
		busy := metric(t, reg, "fairq_worker_receives_total", "queue", names.Live[1])
		mu.Lock()
		defer mu.Unlock()
		if worst["slow"] > 5*time.Millisecond {
			t.Errorf("a message of the slow queue waited %v, want it received at once", worst["slow"])
		}
		if busy > 2000/4 {
			t.Errorf("%v receives for the busy queue's 2000 messages, want batches of four or more", busy)
		}
		t.Logf("slow queue: %v receives for 250 messages, worst wait %v; busy queue: %v receives for 2000, worst wait %v",
			slow, worst["slow"], busy, worst["busy"])
	})
}
