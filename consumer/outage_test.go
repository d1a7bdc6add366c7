package consumer_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/queue"
)

// hungVisibility is a backend whose ChangeVisibility calls never answer:
// they return only when their context ends. It records when each delete
// call is made.
type hungVisibility struct {
	queue.Backend
	mu      sync.Mutex
	deletes []time.Time
}

func (h *hungVisibility) ChangeVisibility(ctx context.Context, _ string, _ []queue.VisibilityChange) ([]error, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (h *hungVisibility) Delete(ctx context.Context, q string, handles []string) ([]error, error) {
	h.mu.Lock()
	h.deletes = append(h.deletes, time.Now())
	h.mu.Unlock()
	return h.Backend.Delete(ctx, q, handles)
}

// TestHeartbeatHung: a heartbeat call that never answers gives up after
// the heartbeat interval, and a job that ends meanwhile waits for no more
// than that one call, not for the rest of the beat: its message is deleted
// at most one call timeout after its handler returned, and Stop ends in
// time.
func TestHeartbeatHung(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, names := setup(t, "memory")
		b := &hungVisibility{Backend: mem}
		const n = 25 // three heartbeat calls: 10, 10 and 5 messages
		for range n {
			send(t, b, names.Live[0], msg{tenant: "acme"})
		}
		const interval = 2 * time.Second // also the timeout of a heartbeat call
		var mu sync.Mutex
		var returned []time.Time
		reg := prometheus.NewRegistry()
		w := start(t, consumer.Config{
			Backend: b, Names: names, Connections: 30, Registerer: reg,
			// Due at the first beat (2 s), never expired during the test.
			VisibilityTimeout: 30 * time.Second, HeartbeatInterval: interval,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				// Ends while the beat's second call hangs (4–6 s).
				time.Sleep(5 * time.Second)
				mu.Lock()
				returned = append(returned, time.Now())
				mu.Unlock()
				return nil
			}),
		})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		stop(t, w)

		mu.Lock()
		defer mu.Unlock()
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(returned) != n || len(b.deletes) == 0 {
			t.Fatalf("%d jobs ended and %d delete calls made, want %d jobs and their deletes", len(returned), len(b.deletes), n)
		}
		lastReturn, lastDelete := returned[len(returned)-1], b.deletes[len(b.deletes)-1]
		if late := lastDelete.Sub(lastReturn); late > interval+consumer.BatchWindowDefault {
			t.Errorf("last delete %v after the last job ended, want at most one heartbeat call (%v) and a batch window", late, interval)
		}
		if n := depth(t, mem, names.Live[0]); n != 0 {
			t.Errorf("%s holds %d messages, want 0", names.Live[0], n)
		}
		if got := metric(t, reg, "fairq_worker_heartbeat_failures_total"); got < 1 {
			t.Errorf("%v heartbeat failures counted, want the calls that timed out", got)
		}
	})
}

// hungCounter is a BacklogCounter that does not answer, as over a
// partitioned Redis: each Done returns only when its context ends. After
// heal, it answers and records the decrements.
type hungCounter struct {
	mu     sync.Mutex
	healed bool
	calls  int
	got    map[string]int64
}

func (c *hungCounter) Done(ctx context.Context, tenant string, n int64) error {
	c.mu.Lock()
	c.calls++
	healed := c.healed
	if healed {
		if c.got == nil {
			c.got = map[string]int64{}
		}
		c.got[tenant] += n
	}
	c.mu.Unlock()
	if healed {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (c *hungCounter) heal() {
	c.mu.Lock()
	c.healed = true
	c.mu.Unlock()
}

// TestBacklogCounterHung: a backlog counter that does not answer delays
// no delete: every message is run once, none is delivered again for
// want of its delete, and Stop ends in time. Once the counter answers,
// the messages that end are counted, aggregated per tenant.
func TestBacklogCounterHung(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		tenants := []string{"a", "b", "c", "d"}
		const n = 400
		for i := range n {
			send(t, b, names.Live[i%2], msg{tenant: tenants[i%len(tenants)]})
		}
		var mu sync.Mutex
		runs := map[string]int{}
		backlog := &hungCounter{}
		reg := prometheus.NewRegistry()
		w := start(t, consumer.Config{
			Backend: b, Names: names, Backlog: backlog, Registerer: reg,
			Connections: 50, VisibilityTimeout: 10 * time.Second,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				mu.Lock()
				runs[m.ID]++
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				return nil
			}),
		})
		time.Sleep(time.Minute) // past the visibility of any delete held up
		synctest.Wait()

		mu.Lock()
		again := 0
		for _, k := range runs {
			again += k - 1
		}
		if len(runs) != n || again != 0 {
			t.Errorf("%d messages run, %d of them more than once; want each of %d once", len(runs), again, n)
		}
		mu.Unlock()
		for _, q := range names.All() {
			if d := depth(t, b, q); d != 0 {
				t.Errorf("%s holds %d messages, want 0", q, d)
			}
		}
		if got := metric(t, reg, "fairq_worker_backlog_decrements_dropped_total"); got != n {
			t.Errorf("%v decrements dropped, want %d", got, n)
		}

		backlog.heal()
		for i := range 20 {
			send(t, b, names.Live[i%2], msg{tenant: tenants[i%len(tenants)]})
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		stop(t, w)
		backlog.mu.Lock()
		defer backlog.mu.Unlock()
		if diff := cmp.Diff(map[string]int64{"a": 5, "b": 5, "c": 5, "d": 5}, backlog.got); diff != "" {
			t.Errorf("decrements once the counter answers (-want +got):\n%s", diff)
		}
	})
}

// TestStopBacklogCounterHung: Stop gives a backlog counter that does not
// answer one call's timeout for the decrements pending, not one per
// message.
func TestStopBacklogCounterHung(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		const n = 30
		for i := range n {
			send(t, b, names.Live[i%2], msg{tenant: "acme"})
		}
		h, seen := recorder(func(int, *consumer.Message) error { return nil })
		backlog := &hungCounter{}
		w := start(t, consumer.Config{Backend: b, Names: names, Handler: h, Backlog: backlog})
		for range n {
			recv(t, seen, time.Minute, "delivery")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		t0 := time.Now()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("Stop = %v, want nil", err)
		}
		if took := time.Since(t0); took > 2500*time.Millisecond {
			t.Errorf("Stop took %v, want at most the 2 s of one call to the counter", took)
		}
		if d := depth(t, b, names.Live[0]) + depth(t, b, names.Live[1]); d != 0 {
			t.Errorf("%d messages left, want 0", d)
		}
	})
}
