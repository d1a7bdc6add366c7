package consumer_test

import (
	"context"
	"errors"
	"fmt"
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

// sendLog is a backend that records every message sent (its queue, when,
// and its delay), and can refuse the sends to one queue.
type sendLog struct {
	queue.Backend

	mu     sync.Mutex
	sends  []sent
	refuse string        // sends to this queue fail
	failed chan struct{} // if not nil, told of each refused send
}

// sent is a message sendLog saw sent.
type sent struct {
	Queue string
	At    time.Time
	Delay time.Duration
}

// errRefused is the error of a refused send.
var errRefused = errors.New("send refused")

func (b *sendLog) Send(ctx context.Context, q string, entries []queue.Entry) ([]queue.SendResult, error) {
	b.mu.Lock()
	refused := q == b.refuse
	if !refused {
		for _, e := range entries {
			b.sends = append(b.sends, sent{Queue: q, At: time.Now(), Delay: e.Delay})
		}
	}
	b.mu.Unlock()
	if refused {
		if b.failed != nil {
			b.failed <- struct{}{}
		}
		return nil, errRefused
	}
	return b.Backend.Send(ctx, q, entries)
}

// setRefuse makes the sends to q fail; "" refuses none.
func (b *sendLog) setRefuse(q string) {
	b.mu.Lock()
	b.refuse = q
	b.mu.Unlock()
}

// got returns the queues of the messages sent, in order.
func (b *sendLog) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	qs := make([]string, len(b.sends))
	for i, s := range b.sends {
		qs[i] = s.Queue
	}
	return qs
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
			Limiter: spillTimes(2, consumer.Spill, 3*time.Second, "concurrency"),
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

// TestSpillIsNotAnAttempt: a spill that has no other queue to go to (no
// overflow queue, or ToBacklog of a message already in the backlog queue
// or without one) brings the message back after its delay without
// counting a delivery, so that a message held back more often than
// max_retries is still run, once, rather than dead-lettered.
func TestSpillIsNotAnAttempt(t *testing.T) {
	tests := []struct {
		name   string
		from   func(queue.Names) string
		names  func(queue.Names) queue.Names
		action consumer.Action
	}{{
		name:   "spill without overflow",
		from:   func(n queue.Names) string { return n.Live[0] },
		names:  func(n queue.Names) queue.Names { n.Overflow = ""; return n },
		action: consumer.Spill,
	}, {
		name:   "backlog from backlog",
		from:   func(n queue.Names) string { return n.Backlog },
		names:  func(n queue.Names) queue.Names { return n },
		action: consumer.ToBacklog,
	}, {
		name:   "backlog without backlog",
		from:   func(n queue.Names) string { return n.Live[1] },
		names:  func(n queue.Names) queue.Names { n.Backlog = ""; return n },
		action: consumer.ToBacklog,
	}}
	for _, kind := range backends {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				inBubble(t, kind, func(t *testing.T) {
					b, all := setup(t, kind)
					names := tt.names(all)
					from := tt.from(names)
					send(t, b, from, msg{tenant: "acme", meta: &envelope.Meta{EnqueuedAt: time.Now().UnixMilli()}})
					h, seen := recorder(func(int, *consumer.Message) error { return nil })
					reg := prometheus.NewRegistry()
					backlog := newCounter()
					start(t, consumer.Config{
						Backend: b, Names: names, Handler: h, Backlog: backlog, Registerer: reg,
						MaxRetries: 2, ReceiveWait: time.Second,
						Limiter: spillTimes(3, tt.action, time.Second, "rate"),
					})
					d := recv(t, seen, time.Minute, "delivery")
					if got := recv(t, backlog.done, time.Minute, "backlog decrement"); got != "acme:1" {
						t.Errorf("backlog Done(%s), want acme:1", got)
					}
					if d.queue != from || d.count != 1 {
						t.Errorf("delivered from %s with receive count %d, want from %s with 1", d.queue, d.count, from)
					}
					if n := metric(t, reg, "fairq_worker_dead_lettered_total"); n != 0 {
						t.Errorf("%v messages dead-lettered", n)
					}
					if n := metric(t, reg, "fairq_worker_spilled_total", "reason", "rate"); n != 3 {
						t.Errorf("fairq_worker_spilled_total{reason=rate} = %v, want 3", n)
					}
					if n := metric(t, reg, "fairq_worker_processed_total", "outcome", "success"); n != 1 {
						t.Errorf("fairq_worker_processed_total{outcome=success} = %v, want 1", n)
					}
				})
			})
		}
	}
}

// TestSpillCountedOnceSent: a spill counts in fairq_worker_spilled_total
// only once its copy was sent; a spill whose send failed leaves the
// message where it was, uncounted, to come back after its visibility
// timeout.
func TestSpillCountedOnceSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, names := setup(t, "memory")
		b := &sendLog{Backend: mem, failed: make(chan struct{}, 1)}
		b.setRefuse(names.Overflow)
		send(t, mem, names.Live[0], msg{tenant: "acme"})
		h, seen := recorder(func(int, *consumer.Message) error { return nil })
		reg := prometheus.NewRegistry()
		start(t, consumer.Config{
			Backend: b, Names: names, Handler: h, Registerer: reg,
			VisibilityTimeout: 3 * time.Second,
			Limiter:           spillTimes(2, consumer.Spill, time.Second, "rate"),
		})
		recv(t, b.failed, time.Minute, "refused send")
		synctest.Wait() // the batch's outcome is applied
		if n := metric(t, reg, "fairq_worker_spilled_total"); n != 0 {
			t.Errorf("after a failed send, fairq_worker_spilled_total = %v, want 0", n)
		}
		if n := metric(t, reg, "fairq_worker_batch_errors_total", "op", "send"); n != 1 {
			t.Errorf("fairq_worker_batch_errors_total{op=send} = %v, want 1", n)
		}
		b.setRefuse("")
		d := recv(t, seen, time.Minute, "delivery")
		if d.queue != names.Overflow {
			t.Errorf("delivered from %s, want %s after the second spill", d.queue, names.Overflow)
		}
		if n := metric(t, reg, "fairq_worker_spilled_total", "reason", "rate"); n != 1 {
			t.Errorf("fairq_worker_spilled_total{reason=rate} = %v, want the 1 spill that was sent", n)
		}
	})
}

// TestExactMove: an Exact move is sent once the part of its delay below a
// second has passed, with the whole seconds left, so that the message is
// visible again when its delay is up rather than at the second after.
// Another move is sent at once, its delay as it is (and rounded up).
func TestExactMove(t *testing.T) {
	for _, exact := range []bool{true, false} {
		t.Run(fmt.Sprintf("exact=%v", exact), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem, names := setup(t, "memory")
				b := &sendLog{Backend: mem}
				send(t, mem, names.Live[0], msg{tenant: "acme"})
				h, seen := recorder(func(int, *consumer.Message) error { return nil })
				var (
					mu    sync.Mutex
					asked time.Time // when the move was decided
				)
				lim := limiterFunc(func(_ context.Context, m *consumer.Message) (consumer.Verdict, error) {
					if !m.Backlog {
						mu.Lock()
						asked = time.Now()
						mu.Unlock()
						return consumer.Verdict{Action: consumer.ToBacklog, Delay: 2400 * time.Millisecond, Reason: "aged", Exact: exact}, nil
					}
					return consumer.Verdict{}, nil
				})
				start(t, consumer.Config{Backend: b, Names: names, Handler: h, Limiter: lim})
				moved := recv(t, seen, time.Minute, "start of the moved message")
				if moved.queue != names.Backlog {
					t.Fatalf("started from %s, want %s", moved.queue, names.Backlog)
				}
				// Sent after the wait (the send batch lingers a moment on
				// top), with the whole seconds left; or at once, as is.
				from, to, delay := 400*time.Millisecond, 500*time.Millisecond, 2*time.Second
				if !exact {
					from, to, delay = 0, 100*time.Millisecond, 2400*time.Millisecond
				}
				mu.Lock()
				defer mu.Unlock()
				b.mu.Lock()
				defer b.mu.Unlock()
				if len(b.sends) != 1 {
					t.Fatalf("sends %+v, want one", b.sends)
				}
				if got, after := b.sends[0], b.sends[0].At.Sub(asked); got.Queue != names.Backlog || got.Delay != delay || after < from || after >= to {
					t.Errorf("sent to %s with a delay of %v, %v after the verdict; want to %s with %v, %v to %v after", got.Queue, got.Delay, after, names.Backlog, delay, from, to)
				}
			})
		})
	}
}
