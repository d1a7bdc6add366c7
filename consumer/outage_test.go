package consumer_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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
