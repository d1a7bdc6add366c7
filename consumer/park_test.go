package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/parking"
)

// pauser is a Limiter that parks every message while paused.
type pauser struct{ paused atomic.Bool }

func (p *pauser) Admit(context.Context, *consumer.Message) (consumer.Verdict, error) {
	if p.paused.Load() {
		return consumer.Verdict{Action: consumer.Park, Reason: "paused"}, nil
	}
	return consumer.Verdict{}, nil
}

// TestParkUntilResumed: a paused tenant's messages are not pushed; they
// are parked (moved to overflow as parked copies, then held in flight),
// and a resume wakes them: they are pushed within seconds, with a receive
// count of 1, since neither the park nor the move was a delivery.
func TestParkUntilResumed(t *testing.T) {
	for _, kind := range backends {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b, names := setup(t, kind)
			for range 3 {
				send(t, b, names.Live[0], msg{tenant: "acme", meta: &envelope.Meta{EnqueuedAt: time.Now().UnixMilli(), ID: "id"}})
			}
			lim := &pauser{}
			lim.paused.Store(true)
			lot := parking.NewMemory(nil)
			h, seen := recorder(func(int, *consumer.Message) error { return nil })
			reg := prometheus.NewRegistry()
			w := start(t, consumer.Config{Backend: b, Names: names, Handler: h, Limiter: lim, Parking: lot, Registerer: reg})
			waitFor(t, 30*time.Second, "three messages parked", func() bool {
				return metric(t, reg, "fairq_worker_processed_total", "outcome", "parked") == 3
			})
			select {
			case d := <-seen:
				t.Fatalf("a paused tenant's message was pushed: %+v", d)
			default:
			}
			if tenants, _ := lot.Tenants(context.Background()); len(tenants) != 1 {
				t.Fatalf("lot holds tenants %v, want acme's spots", tenants)
			}
			// Resume: the Waker makes them visible again.
			lim.paused.Store(false)
			waker, err := parking.NewWaker(parking.WakerConfig{Lot: lot, Backend: b, PausedFunc: func(string) bool { return lim.paused.Load() }})
			if err != nil {
				t.Fatal(err)
			}
			resumed := time.Now()
			if n, err := waker.Wake(context.Background()); err != nil || n != 3 {
				t.Fatalf("Wake = %d, %v; want 3", n, err)
			}
			for range 3 {
				d := recv(t, seen, 30*time.Second, "push after the resume")
				if took := d.at.Sub(resumed); took > 5*time.Second {
					t.Errorf("pushed %v after the resume, want within seconds", took)
				}
				if d.count != 1 || d.queue != names.Overflow {
					t.Errorf("push from %s with receive count %d; want the overflow queue and 1: parking is no delivery", d.queue, d.count)
				}
			}
			stop(t, w)
			for _, q := range names.All() {
				if n := depth(t, b, q); n != 0 {
					t.Errorf("%s holds %d messages after the pushes, want 0", q, n)
				}
			}
		})
	}
}

// TestResumedBeforeParked: a parked copy whose tenant is resumed before the
// copy was held is sent on as an ordinary copy and pushed with a receive
// count of 1.
func TestResumedBeforeParked(t *testing.T) {
	b, names := setup(t, "memory")
	meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli(), ID: "id", Parked: true}
	send(t, b, names.Overflow, msg{tenant: "acme", meta: &meta})
	h, seen := recorder(func(int, *consumer.Message) error { return nil })
	start(t, consumer.Config{Backend: b, Names: names, Handler: h, Limiter: &pauser{}, Parking: parking.NewMemory(nil)})
	d := recv(t, seen, 30*time.Second, "push")
	if d.count != 1 {
		t.Errorf("receive count %d, want 1: the parked copy's first receive is no delivery", d.count)
	}
}
