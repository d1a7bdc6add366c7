package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/queue"
)

// metric returns the value of a counter or gauge of reg, summed over the
// series whose labels include the given ones.
func metric(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

// inBubble runs f in a synctest bubble for the memory backend, directly
// for the others (real time).
func inBubble(t *testing.T, kind string, f func(t *testing.T)) {
	if kind == "memory" {
		synctest.Test(t, f)
		return
	}
	f(t)
}

// TestHeartbeat: a 10 s job with a 2 s visibility timeout is delivered
// once: the heartbeat keeps extending its visibility.
func TestHeartbeat(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) {
				b, names := setup(t, kind)
				send(t, b, names.Live[0], msg{tenant: "acme"})
				var deliveries atomic.Int32
				done := make(chan struct{})
				reg := prometheus.NewRegistry()
				w := start(t, consumer.Config{
					Backend: b, Names: names, Registerer: reg,
					VisibilityTimeout: 2 * time.Second,
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						if deliveries.Add(1) == 1 {
							time.Sleep(10 * time.Second) // the work
							close(done)
						}
						return nil
					}),
				})
				recv(t, done, 30*time.Second, "end of the job")
				stop(t, w)
				if n := deliveries.Load(); n != 1 {
					t.Errorf("delivered %d times, want once", n)
				}
				if n := depth(t, b, names.Live[0]); n != 0 {
					t.Errorf("%s holds %d messages after the job, want 0", names.Live[0], n)
				}
				if n := metric(t, reg, "fairq_worker_heartbeats_total"); n < 4 {
					t.Errorf("%v heartbeats in 10 s at a 2 s visibility timeout, want at least 4", n)
				}
			})
		})
	}
}

// TestHeartbeatStopsAtInactivityTimeout: a handler that ignores its
// deadline does not keep its message for ever: the heartbeat stops at the
// inactivity timeout and the message is delivered again.
func TestHeartbeatStopsAtInactivityTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		send(t, b, names.Live[0], msg{tenant: "acme"})
		h, seen := recorder(func(n int, _ *consumer.Message) error {
			if n == 1 {
				time.Sleep(20 * time.Second) // ignores its context
			}
			return nil
		})
		start(t, consumer.Config{
			Backend: b, Names: names, Handler: h,
			VisibilityTimeout: 2 * time.Second, InactivityTimeout: 5 * time.Second,
		})
		first := recv(t, seen, time.Minute, "delivery")
		second := recv(t, seen, time.Minute, "second delivery")
		if gap := second.at.Sub(first.at); gap < 5*time.Second || gap > 7*time.Second {
			t.Errorf("delivered again %v after the first, want after the 5 s inactivity timeout and within the 2 s visibility", gap)
		}
		if second.count != 2 {
			t.Errorf("second delivery has receive count %d, want 2", second.count)
		}
	})
}

// TestKilledMidJob: a worker that dies mid-job leaves its message to come
// back after the visibility timeout, to another worker.
func TestKilledMidJob(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) {
				b, names := setup(t, kind)
				id := send(t, b, names.Live[1], msg{tenant: "acme"})
				const vt = 2 * time.Second
				started := make(chan time.Time, 1)
				a, err := consumer.New(consumer.Config{
					Backend: b, Names: names, Logger: discard, VisibilityTimeout: vt,
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						started <- time.Now()
						<-ctx.Done() // works until killed
						return ctx.Err()
					}),
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := a.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t0 := recv(t, started, 10*time.Second, "job on worker A")
				a.Kill()
				<-a.Done()
				stop(t, a)

				h, seen := recorder(func(int, *consumer.Message) error { return nil })
				start(t, consumer.Config{Backend: b, Names: names, Handler: h, VisibilityTimeout: vt})
				d := recv(t, seen, 20*time.Second, "delivery to worker B")
				if d.id != id || d.count != 2 {
					t.Errorf("worker B got %s with receive count %d, want %s with 2", d.id, d.count, id)
				}
				// Whole seconds on SQS: allow the rounding of its clock.
				if gap := d.at.Sub(t0); gap < vt-time.Second {
					t.Errorf("redelivered %v after the receive, before the visibility timeout %v", gap, vt)
				}
			})
		})
	}
}

// TestStartContext: the context given to Start only carries values:
// cancelling it (a signal context on SIGTERM) does not cut jobs short;
// Stop does the shutdown.
func TestStartContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		send(t, b, names.Live[0], msg{tenant: "acme"})
		started, finished := make(chan struct{}), make(chan error, 1)
		w, err := consumer.New(consumer.Config{
			Backend: b, Names: names, Logger: discard,
			Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
				close(started)
				time.Sleep(3 * time.Second)
				finished <- ctx.Err()
				return ctx.Err()
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		<-started
		cancel()
		stop(t, w)
		if err := <-finished; err != nil {
			t.Errorf("the job's context ended (%v) when Start's did", err)
		}
		if n := depth(t, b, names.Live[0]); n != 0 {
			t.Errorf("%s holds %d messages, want 0", names.Live[0], n)
		}
	})
}

// TestStopCutsMemoryLongPolls: on the in-memory backend a stop does not
// wait out the long polls under way (20 s each by default): nothing is
// lost by cutting them short there, and `fairq dev` stops at once.
func TestStopCutsMemoryLongPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, names := setup(t, "memory")
		w := start(t, consumer.Config{
			Backend: b, Names: names, ReceiveWait: 20 * time.Second,
			Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
		})
		time.Sleep(5 * time.Second) // every loop in a long poll of the idle queues
		synctest.Wait()
		began := time.Now()
		stop(t, w)
		if took := time.Since(began); took >= time.Second {
			t.Errorf("Stop took %v: it waited for the long polls", took)
		}
		// A message sent after the stop is still there for the next worker.
		send(t, b, names.Live[0], msg{tenant: "acme"})
		if n := depth(t, b, names.Live[0]); n != 1 {
			t.Errorf("%s holds %d messages, want 1", names.Live[0], n)
		}
	})
}

// TestStopMidJob: a graceful stop loses nothing. A job that ends within the
// grace period is deleted; one that does not is cancelled and its message
// given back at once, well before its visibility timeout.
func TestStopMidJob(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind+"/finishes", func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) {
				b, names := setup(t, kind)
				send(t, b, names.Live[0], msg{tenant: "acme"})
				started := make(chan struct{})
				var deliveries atomic.Int32
				w := start(t, consumer.Config{
					Backend: b, Names: names,
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						deliveries.Add(1)
						close(started)
						time.Sleep(2 * time.Second)
						return ctx.Err()
					}),
				})
				recv(t, started, 10*time.Second, "job")
				stop(t, w) // grace 10 s
				if n := deliveries.Load(); n != 1 {
					t.Errorf("delivered %d times, want once", n)
				}
				for _, q := range names.All() {
					if n := depth(t, b, q); n != 0 {
						t.Errorf("%s holds %d messages, want 0", q, n)
					}
				}
			})
		})
		t.Run(kind+"/released", func(t *testing.T) {
			t.Parallel()
			inBubble(t, kind, func(t *testing.T) {
				b, names := setup(t, kind)
				id := send(t, b, names.Live[0], msg{tenant: "acme"})
				started := make(chan struct{})
				w, err := consumer.New(consumer.Config{
					Backend: b, Names: names, Logger: discard,
					VisibilityTimeout: 60 * time.Second,
					Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
						close(started)
						<-ctx.Done()
						return ctx.Err()
					}),
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				recv(t, started, 10*time.Second, "job")
				grace, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				t0 := time.Now()
				if err := w.Stop(grace); err != nil {
					t.Errorf("Stop = %v", err)
				}

				h, seen := recorder(func(int, *consumer.Message) error { return nil })
				start(t, consumer.Config{Backend: b, Names: names, Handler: h})
				d := recv(t, seen, 20*time.Second, "delivery after the release")
				if d.id != id {
					t.Errorf("got %s, want %s", d.id, id)
				}
				if gap := d.at.Sub(t0); gap > 10*time.Second {
					t.Errorf("released message came back after %v, not at once", gap)
				}
			})
		})
	}
}

// stopWhilePolling starts an idle worker with 3 s long polls, waits until
// its loops long-poll, and starts stopping it; the channel gets Stop's
// result.
func stopWhilePolling(t *testing.T, b queue.Backend, names queue.Names) <-chan error {
	t.Helper()
	idle := consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil })
	w, err := consumer.New(consumer.Config{Backend: b, Names: names, Handler: idle, Logger: discard,
		ReceiveWait: 3 * time.Second, VisibilityTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past the first short receives: its loops long-poll
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	return stopped
}

// TestStopGivesBackUncounted: a message that a stopping worker's long
// poll brings is given back without counting that receive, so that a
// fleet stopping at once does not spend a message's attempts on receives
// that never pushed it. (The in-memory backend cuts a stopping worker's
// long polls short: there the message is not received before the next
// worker.)
func TestStopGivesBackUncounted(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			stopped := stopWhilePolling(t, b, names)
			time.Sleep(200 * time.Millisecond) // its polls still wait
			send(t, b, names.Live[0], msg{tenant: "acme"})
			if err := <-stopped; err != nil {
				t.Errorf("Stop = %v", err)
			}
			h, seen := recorder(func(int, *consumer.Message) error { return nil })
			start(t, consumer.Config{Backend: b, Names: names, Handler: h, VisibilityTimeout: time.Minute})
			if d := recv(t, seen, 30*time.Second, "delivery"); d.count != 1 {
				t.Errorf("delivered with receive count %d, want 1: the stopping worker's receive counted", d.count)
			}
		})
	}
}

// TestRestartThenSend: a worker stopped while its long polls wait lets
// them finish rather than abandon them (SQS may hand an abandoned long
// poll a message, which would then stay hidden for a visibility timeout),
// and gives back at once what they bring: a message sent while it stops
// reaches the worker started in its place within moments.
func TestRestartThenSend(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			stopped := stopWhilePolling(t, b, names)
			h, seen := recorder(func(int, *consumer.Message) error { return nil })
			start(t, consumer.Config{Backend: b, Names: names, Handler: h, VisibilityTimeout: time.Minute})
			time.Sleep(200 * time.Millisecond) // the old worker's polls still wait
			sent := time.Now()
			send(t, b, names.Live[0], msg{tenant: "acme"})
			d := recv(t, seen, 30*time.Second, "delivery")
			if took := d.at.Sub(sent); took > 2*time.Second {
				t.Errorf("delivered %v after its send, want within 2 s (not after the visibility timeout)", took)
			}
			if err := <-stopped; err != nil {
				t.Errorf("Stop = %v", err)
			}
		})
	}
}
