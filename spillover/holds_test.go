package spillover_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
)

// TestLimiterHolds: a message over its tenant's rate or concurrency is
// held a moment, rather than spilled, when its token or a slot comes
// within HoldMax and the worker has slots to spare, and spilled as
// before otherwise.
func TestLimiterHolds(t *testing.T) {
	t.Parallel()
	type step struct {
		advance time.Duration
		spare   int           // the worker's other free slots
		held    time.Duration // how long the message was held already
		done    int           // instead of admitting: end the n-th dispatch, or hold, 1-based
		woken   int           // instead of admitting: the n-th hold must have been woken
		asleep  int           // instead of admitting: the n-th hold must not have been woken
		old     bool          // the message comes from the backlog queue
		want    verdict
	}
	hold := func(reason string, d time.Duration) verdict {
		return verdict{Action: consumer.Hold, Delay: d, Reason: reason}
	}
	// Old work held for a slot while fresh work comes asks 5 ms after it
	// is woken: fresh work woken by the same slot asks first.
	behindFresh := func(d time.Duration) verdict {
		return verdict{Action: consumer.Hold, Delay: d, Reason: "concurrency", Lag: 5 * ms}
	}
	tests := []struct {
		name   string
		limits tenant.Limits
		fleet  int
		steps  []step
	}{
		{
			name:   "over rate: held until its turn, one more token per message held",
			limits: limits(10, 1, 100),
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, want: hold("rate", 100*ms)},
				{spare: 8, want: hold("rate", 200*ms)},
				{spare: 8, held: 750 * ms, want: spill("rate", 300*ms)}, // its turn, behind those held, is past its HoldMax
				{done: 2},
				{advance: 100 * ms, spare: 8, held: 100 * ms, want: dispatch},
			},
		},
		{
			name:   "over rate in a fleet of two: turns at the tenant's whole rate",
			limits: limits(4, 1, 100),
			fleet:  2,
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, want: hold("rate", 250*ms)},
				{spare: 8, want: hold("rate", 500*ms)},
				{spare: 8, want: hold("rate", 750*ms)},
				{spare: 8, want: hold("rate", time.Second)},
				{spare: 8, want: spill("rate", time.Second)}, // 1.25 s: back early, to be held
			},
		},
		{
			name:   "spilled for rate with slots to spare: back up to a second early",
			limits: limits(1, 1, 100),
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, want: hold("rate", time.Second)},
				{spare: 8, want: spill("rate", 2*time.Second)}, // its turn: 2 s
				{spare: 0, want: spill("rate", 3*time.Second)},
				{advance: 500 * ms, spare: 8, want: spill("rate", 3*time.Second)}, // 3.5 s
				{spare: 0, want: spill("rate", 4500*ms)},
			},
		},
		{
			name:   "over rate with no slot to spare: spilled",
			limits: limits(10, 1, 100),
			steps: []step{
				{want: dispatch},
				{want: spill("rate", 100*ms)},
			},
		},
		{
			name:   "over rate beyond HoldMax: spilled",
			limits: limits(0.5, 1, 100),
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, want: spill("rate", 2*time.Second)},
				{advance: 500 * ms, spare: 8, want: spill("rate", 3*time.Second)}, // 3.5 s
				{spare: 0, want: spill("rate", 5500*ms)},
			},
		},
		{
			name:   "no more held than the worker has other slots free",
			limits: limits(10, 1, 1000),
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 1, want: hold("rate", 100*ms)},
				{spare: 1, want: spill("rate", 200*ms)},
				{spare: 2, want: hold("rate", 200*ms)},
			},
		},
		{
			name:   "over concurrency: held, woken by a slot given back here",
			limits: limits(1000, 1000, 1),
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, want: hold("concurrency", 100*ms)},
				{spare: 8, want: spill("concurrency", 2500*ms)}, // one held per slot
				{done: 1},
				{woken: 2},
				{done: 2},
				{spare: 8, held: 20 * ms, want: dispatch},
			},
		},
		{
			name:   "over concurrency: a slot given back wakes one held message, the longest held",
			limits: limits(1000, 1000, 2),
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, want: dispatch},
				{spare: 8, want: hold("concurrency", 100*ms)},
				{spare: 8, want: hold("concurrency", 100*ms)},
				{done: 1},
				{woken: 3},
				{asleep: 4}, // one slot, one message woken
				{done: 3},
				{spare: 8, held: 10 * ms, want: dispatch},
				{done: 2},
				{woken: 4},
			},
		},
		{
			name:   "over concurrency in a fleet of two: this worker holds its share",
			limits: limits(1000, 1000, 2),
			fleet:  2,
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, want: dispatch},
				{spare: 8, want: hold("concurrency", 100*ms)},
				{spare: 8, want: spill("concurrency", 2500*ms)},
			},
		},
		{
			name:   "old work while fresh work comes: held for a slot of its own semaphore",
			limits: limits(1000, 1000, 2), // old work: 1 slot until a job time is known
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, old: true, want: dispatch},
				{spare: 8, old: true, want: behindFresh(100 * ms)},
				{spare: 8, old: true, want: spill("concurrency", 2500*ms)}, // one held per slot
				{done: 2},
				{woken: 3},
				{spare: 8, old: true, held: 10 * ms, want: dispatch},
				{spare: 8, want: hold("concurrency", 100*ms)}, // fresh: the tenant's 2 slots taken, a hold of its own
			},
		},
		{
			name:   "old work with most of its tenant's slots: held in a wave, free slots or not, up to its line's whole concurrency",
			limits: limits(1000, 1000, 2),
			fleet:  2,
			steps: []step{
				{old: true, want: dispatch},
				{old: true, want: dispatch},
				// No slot to spare, and a fresh message would be held at
				// this worker's share, one: old work holds both of its
				// line's. No fresh work comes: woken, they ask at once.
				{old: true, want: hold("concurrency", 100*ms)},
				{old: true, want: hold("concurrency", 100*ms)},
				{old: true, want: spill("concurrency", 2500*ms)},
				{want: spill("concurrency", 2500*ms)}, // fresh, no slot to spare: not held
			},
		},
		{
			name:   "old work with half its tenant's slots or fewer: held only with slots to spare",
			limits: limits(1000, 1000, 4), // fresh work comes: old work has 2 slots until a job time is known
			steps: []step{
				{spare: 8, want: dispatch},
				{old: true, want: dispatch},
				{old: true, want: dispatch},
				{old: true, want: spill("concurrency", 2500*ms)},
				{spare: 8, old: true, want: behindFresh(100 * ms)},
			},
		},
		{
			name:   "old work with most of its tenant's slots: held for its token, apart from fresh work",
			limits: limits(10, 1, 100),
			steps: []step{
				{spare: 8, want: dispatch},
				// Jobs take 100 ms and fresh work came at 1 in 5 s (0.196
				// a second 100 ms later): old work has 99 slots, and 9.765
				// of the 10 a second, a bucket of 1.
				{advance: 100 * ms, done: 1},
				{spare: 8, old: true, want: dispatch},
				{spare: 8, old: true, want: hold("rate", 102409152*time.Nanosecond)}, // its own bucket's next token
				{spare: 8, old: true, want: hold("rate", 204818303*time.Nanosecond)},
				// Fresh work waits for the tenant's token, not behind them.
				{spare: 8, want: hold("rate", 100*ms)},
			},
		},
		{
			name:   "old work with half its tenant's slots: not held for a token",
			limits: limits(10, 1, 100), // no job time known: old work has half the slots
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, old: true, want: spill("rate", 100*ms)}, // the tenant's token
			},
		},
		{
			name:   "over concurrency, held up to HoldMax: spilled",
			limits: limits(1000, 1000, 1),
			steps: []step{
				{spare: 8, want: dispatch},
				{spare: 8, held: 950 * ms, want: hold("concurrency", 50*ms)},
				{done: 2},
				{spare: 8, held: time.Second, want: spill("concurrency", 2500*ms)},
				{spare: 0, want: spill("concurrency", 2500*ms)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			l, err := spillover.New(spillover.Config{
				Tenants:       registry(t, map[string]tenant.Limits{"acme": tt.limits}),
				FleetSizeFunc: func() int { return tt.fleet },
				NowFunc:       c.Now,
				RandFunc:      func() float64 { return 0.75 },
			})
			if err != nil {
				t.Fatal(err)
			}
			var (
				dones []func()
				wakes []<-chan struct{}
			)
			for i, s := range tt.steps {
				c.Advance(s.advance)
				switch {
				case s.done > 0:
					dones[s.done-1]()
					continue
				case s.woken > 0:
					select {
					case <-wakes[s.woken-1]:
					default:
						t.Fatalf("step %d: hold %d not woken", i, s.woken)
					}
					continue
				case s.asleep > 0:
					select {
					case <-wakes[s.asleep-1]:
						t.Fatalf("step %d: hold %d woken", i, s.asleep)
					default:
					}
					continue
				}
				v, err := l.Admit(context.Background(), &consumer.Message{ID: "m", Tenant: "acme", Spare: s.spare, Held: s.held, Backlog: s.old})
				if err != nil {
					t.Fatal(err)
				}
				got := verdict{Action: v.Action, Delay: v.Delay, Reason: v.Reason, Lag: v.Lag}
				if diff := cmp.Diff(s.want, got); diff != "" {
					t.Fatalf("step %d (-want +got):\n%s", i, diff)
				}
				if v.Done != nil {
					dones = append(dones, v.Done)
					wakes = append(wakes, v.Wake)
				}
			}
		})
	}
}
