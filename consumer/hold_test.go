package consumer_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/consumer"
)

// asked is what a Limiter was given at one Admit.
type asked struct {
	Spare int
	Held  time.Duration
}

// TestHoldAsksAgain: a message its Limiter holds stays in its slot,
// unstarted and not moved, until the hold's Wake or Delay, and is then
// admitted again, told how long it was held and how many slots the
// worker has free; each hold's Done is called when it ends. A hold ended
// by its Wake waits its Lag first, still held; without one it asks at
// once.
func TestHoldAsksAgain(t *testing.T) {
	for _, lag := range []time.Duration{0, 5 * time.Millisecond} {
		t.Run("lag="+lag.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem, names := setup(t, "memory")
				b := &sendLog{Backend: mem}
				send(t, mem, names.Live[0], msg{tenant: "acme"})
				h, seen := recorder(func(int, *consumer.Message) error { return nil })
				wake := make(chan struct{})
				var (
					mu    sync.Mutex
					calls []asked
					ended []time.Time // when each hold ended
				)
				lim := limiterFunc(func(_ context.Context, m *consumer.Message) (consumer.Verdict, error) {
					mu.Lock()
					defer mu.Unlock()
					calls = append(calls, asked{m.Spare, m.Held})
					end := func() { mu.Lock(); ended = append(ended, time.Now()); mu.Unlock() }
					switch len(calls) {
					case 1: // woken early
						return consumer.Verdict{Action: consumer.Hold, Delay: time.Hour, Wake: wake, Lag: lag, Reason: "concurrency", Done: end}, nil
					case 2: // its delay passes
						return consumer.Verdict{Action: consumer.Hold, Delay: 300 * time.Millisecond, Reason: "rate", Done: end}, nil
					}
					return consumer.Verdict{}, nil
				})
				t0 := time.Now()
				start(t, consumer.Config{Backend: b, Names: names, Handler: h, Limiter: lim, Connections: 4})
				synctest.Wait()
				time.Sleep(200 * time.Millisecond)
				close(wake)
				woken := 200*time.Millisecond + lag // the first hold's end
				d := recv(t, seen, time.Minute, "delivery")
				if took, want := d.at.Sub(t0), woken+300*time.Millisecond; took != want {
					t.Errorf("started %v after its receive, want %v: woken at 200 ms, its lag, then 300 ms", took, want)
				}
				mu.Lock()
				defer mu.Unlock()
				// Four slots: the message's own, and the receive loops of the
				// live queues, overflow and backlog hold the others or not.
				for i := range calls {
					if calls[i].Spare < 0 || calls[i].Spare > 3 {
						t.Errorf("admit %d: %d slots spare of 4, one held by the message", i, calls[i].Spare)
					}
					calls[i].Spare = 0
				}
				want := []asked{{Held: 0}, {Held: woken}, {Held: woken + 300*time.Millisecond}}
				if diff := cmp.Diff(want, calls); diff != "" {
					t.Errorf("admits (-want +got):\n%s", diff)
				}
				if len(ended) != 2 || ended[0].Sub(t0) != woken {
					t.Errorf("holds ended at %v, want both, the first %v after the receive", ended, woken)
				}
				if got := b.got(); len(got) != 0 {
					t.Errorf("a held message was moved: %v", got)
				}
			})
		})
	}
}

// TestHoldGivenBackAtStop: a message held when the grace period of a
// stop ends is given back at once, not left to its visibility timeout,
// and the receive that held it is not counted: it was never started.
func TestHoldGivenBackAtStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, names := setup(t, "memory")
		send(t, mem, names.Live[0], msg{tenant: "acme"})
		h, seen := recorder(func(int, *consumer.Message) error { return nil })
		held := make(chan struct{}, 1)
		lim := limiterFunc(func(context.Context, *consumer.Message) (consumer.Verdict, error) {
			select {
			case held <- struct{}{}:
			default:
			}
			return consumer.Verdict{Action: consumer.Hold, Delay: time.Hour, Reason: "concurrency"}, nil
		})
		w, err := consumer.New(consumer.Config{Backend: mem, Names: names, Handler: h, Limiter: lim, ReceiveWait: time.Second, Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		recv(t, held, time.Minute, "hold")
		grace, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := w.Stop(grace); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		select {
		case d := <-seen:
			t.Fatalf("a held message was started: %+v", d)
		default:
		}
		d, err := mem.Depth(context.Background(), names.Live[0])
		if err != nil {
			t.Fatal(err)
		}
		if d.Visible != 1 {
			t.Errorf("after the stop the queue has %+v, want the held message visible again", d)
		}
		h2, seen2 := recorder(func(int, *consumer.Message) error { return nil })
		start(t, consumer.Config{Backend: mem, Names: names, Handler: h2, ReceiveWait: time.Second})
		if got := recv(t, seen2, time.Minute, "delivery after the stop"); got.count != 1 {
			t.Errorf("delivered with receive count %d after the stop, want 1: the held receive counted", got.count)
		}
	})
}
