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
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// sendLog is a backend that records the queue of every message sent.
type sendLog struct {
	queue.Backend

	mu    sync.Mutex
	sends []string
}

func (b *sendLog) Send(ctx context.Context, q string, entries []queue.Entry) ([]queue.SendResult, error) {
	b.mu.Lock()
	for range entries {
		b.sends = append(b.sends, q)
	}
	b.mu.Unlock()
	return b.Backend.Send(ctx, q, entries)
}

func (b *sendLog) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.sends...)
}

// spillTimes returns a Limiter that spills every message n times, with
// delay and reason, then dispatches it.
func spillTimes(n int, action consumer.Action, delay time.Duration, reason string) consumer.Limiter {
	var mu sync.Mutex
	seen := 0
	return limiterFunc(func(context.Context, *consumer.Message) (consumer.Verdict, error) {
		mu.Lock()
		defer mu.Unlock()
		if seen++; seen <= n {
			return consumer.Verdict{Action: action, Delay: delay, Reason: reason}, nil
		}
		return consumer.Verdict{}, nil
	})
}

// TestBacklogSpillStaysInBacklog: a message of the backlog queue that its
// Limiter spills is sent to the backlog queue again, delayed, rather than
// to overflow, from where the age check would move it straight back (two
// moves for each spill, each counted as aged).
func TestBacklogSpillStaysInBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, names := setup(t, "memory")
		b := &sendLog{Backend: mem}
		enqueued := time.Now().Add(-10 * time.Minute)
		send(t, mem, names.Backlog, msg{tenant: "acme", meta: &envelope.Meta{EnqueuedAt: enqueued.UnixMilli()}})
		h, seen := recorder(func(int, *consumer.Message) error { return nil })
		reg := prometheus.NewRegistry()
		backlog := newCounter()
		t0 := time.Now()
		start(t, consumer.Config{
			Backend: b, Names: names, Handler: h, Backlog: backlog, Registerer: reg,
			BacklogAge: 5 * time.Minute,
			Limiter:    spillTimes(2, consumer.Spill, 3*time.Second, "concurrency"),
		})
		d := recv(t, seen, time.Minute, "delivery")
		recv(t, backlog.done, time.Minute, "backlog decrement")
		if d.queue != names.Backlog || d.count != 1 {
			t.Errorf("delivered from %s with receive count %d, want from %s with 1", d.queue, d.count, names.Backlog)
		}
		if took := d.at.Sub(t0); took < 6*time.Second {
			t.Errorf("delivered after %v, want after its two delays of 3 s", took)
		}
		if diff := cmp.Diff([]string{names.Backlog, names.Backlog}, b.got()); diff != "" {
			t.Errorf("moves, by destination (-want +got):\n%s", diff)
		}
		for reason, want := range map[string]float64{"concurrency": 2, "aged": 0} {
			if got := metric(t, reg, "fairq_worker_spilled_total", "reason", reason); got != want {
				t.Errorf("fairq_worker_spilled_total{reason=%q} = %v, want %v", reason, got, want)
			}
		}
	})
}
