package spillover_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

type clock struct {
	mu   sync.Mutex
	now  time.Time
	tick time.Duration // how far each reading moves the clock on
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now
	c.now = c.now.Add(c.tick)
	return now
}

// ticking makes each reading of the clock move it on by d: time passes
// between any two readings, as it does while a goroutine waits for a
// core.
func (c *clock) ticking(d time.Duration) {
	c.mu.Lock()
	c.tick = d
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func ptr[T any](v T) *T { return &v }

// limits returns tenant limits with the given processing limits.
func limits(rate float64, burst, concurrency int) tenant.Limits {
	return tenant.Limits{ProcessRate: &rate, ProcessBurst: &burst, Concurrency: &concurrency}
}

// registry returns a tenant registry without Redis holding the tenants.
func registry(t testing.TB, tenants map[string]tenant.Limits) *tenant.Registry {
	t.Helper()
	var ts []tenant.Spec
	for id, l := range tenants {
		ts = append(ts, tenant.Spec{ID: id, Limits: l})
	}
	r, err := tenant.New(tenant.Config{Tenants: ts})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// verdict is what a test compares of a consumer.Verdict; Exact only
// where the test asks for it (admitExactly).
type verdict struct {
	Action consumer.Action
	Delay  time.Duration
	Reason string
	Exact  bool
	Lag    time.Duration
}

func admit(t testing.TB, l *spillover.Limiter, tenantID string) (verdict, func()) {
	t.Helper()
	return admitMessage(t, l, &consumer.Message{ID: "m", Tenant: tenantID})
}

func admitMessage(t testing.TB, l *spillover.Limiter, m *consumer.Message) (verdict, func()) {
	t.Helper()
	v := admitVerdict(t, l, m)
	return verdict{Action: v.Action, Delay: v.Delay, Reason: v.Reason}, v.Done
}

// admitExactly is admitMessage, the verdict's Exact compared too.
func admitExactly(t testing.TB, l *spillover.Limiter, m *consumer.Message) verdict {
	t.Helper()
	v := admitVerdict(t, l, m)
	return verdict{Action: v.Action, Delay: v.Delay, Reason: v.Reason, Exact: v.Exact}
}

// admitVerdict admits m, failing the test on an error or on a Done other
// than exactly on dispatch.
func admitVerdict(t testing.TB, l *spillover.Limiter, m *consumer.Message) consumer.Verdict {
	t.Helper()
	v, err := l.Admit(context.Background(), m)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if (v.Done != nil) != (v.Action == consumer.Dispatch) {
		t.Fatalf("verdict %v has Done %v: want Done exactly on dispatch", v.Action, v.Done != nil)
	}
	return v
}

var (
	dispatch = verdict{Action: consumer.Dispatch}
	ms       = time.Millisecond
)

func spill(reason string, delay time.Duration) verdict {
	return verdict{Action: consumer.Spill, Delay: delay, Reason: reason}
}

// TestLimiterVerdicts: what the limits decide of each message, holds
// aside (TestLimiterHolds): the Limiter here never holds.
func TestLimiterVerdicts(t *testing.T) {
	t.Parallel()
	type step struct {
		advance time.Duration
		tenant  string
		old     bool // a message of the backlog queue
		done    int  // instead of admitting: call the Done of the n-th dispatch, 1-based
		want    verdict
	}
	tests := []struct {
		name     string
		tenants  map[string]tenant.Limits
		defaults tenant.Limits
		fleet    int
		steps    []step
	}{
		{
			name:    "within limits",
			tenants: map[string]tenant.Limits{"acme": limits(10, 2, 5)},
			steps:   []step{{tenant: "acme", want: dispatch}, {tenant: "acme", want: dispatch}},
		},
		{
			name:    "over rate: spilled, each at its own turn",
			tenants: map[string]tenant.Limits{"acme": limits(10, 1, 5)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("rate", 100*ms)},
				{tenant: "acme", want: spill("rate", 200*ms)},
				{tenant: "acme", want: spill("rate", 300*ms)},
				{advance: 100 * ms, tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("rate", 300*ms)},
			},
		},
		{
			name:    "over rate in a fleet of four: turns at this worker's share",
			tenants: map[string]tenant.Limits{"acme": limits(10, 1, 5)},
			fleet:   4,
			steps: []step{
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("rate", 100*ms)},
				{tenant: "acme", want: spill("rate", 500*ms)},
			},
		},
		{
			name:    "over rate for long: the delay stops at 900 s",
			tenants: map[string]tenant.Limits{"acme": limits(0.001, 1, 5)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("rate", 900*time.Second)},
				{tenant: "acme", want: spill("rate", 900*time.Second)},
			},
		},
		{
			name:    "over concurrency: a short jittered delay until a job ends",
			tenants: map[string]tenant.Limits{"acme": limits(1000, 1000, 2)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("concurrency", 2500*ms)}, // 2 s × (0.5 + 0.75)
				{done: 1},
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
			},
		},
		{
			name:    "many waiting for a slot: turns at the rate slots free up",
			tenants: map[string]tenant.Limits{"acme": limits(1000, 1000, 2)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{advance: time.Second, done: 1}, // jobs take 1 s: 2 slots free up 2 a second
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
				{tenant: "acme", want: spill("concurrency", 3000*ms)},
				{tenant: "acme", want: spill("concurrency", 3500*ms)},
			},
		},
		{
			name:    "many waiting for a slot in a fleet of two: this worker's share",
			tenants: map[string]tenant.Limits{"acme": limits(1000, 1000, 1)},
			fleet:   2,
			steps: []step{
				{tenant: "acme", want: dispatch},
				{advance: 500 * ms, done: 1}, // 1 slot, 2 a second, half for this worker
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
				{tenant: "acme", want: spill("concurrency", 3500*ms)},
			},
		},
		{
			name:    "a spill for concurrency takes no token",
			tenants: map[string]tenant.Limits{"acme": limits(1, 1, 1)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
				{done: 1},
				{advance: time.Second, tenant: "acme", want: dispatch},
			},
		},
		{
			name:    "a spill for rate gives its slot back",
			tenants: map[string]tenant.Limits{"acme": limits(1, 1, 1)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{done: 1},
				{tenant: "acme", want: spill("rate", time.Second)},
				{advance: time.Second, tenant: "acme", want: dispatch},
			},
		},
		{
			name:    "while fresh work comes, old work takes at most half of the concurrency",
			tenants: map[string]tenant.Limits{"acme": limits(1000, 1000, 4)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: spill("concurrency", 2500*ms)},
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
				// An old job's end gives back both its slots.
				{done: 2},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: spill("concurrency", 2500*ms)},
			},
		},
		{
			name:    "with no fresh work for 5 s, old work has the whole concurrency",
			tenants: map[string]tenant.Limits{"acme": limits(1000, 1000, 4)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{done: 1},
				{advance: 6 * time.Second, tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: spill("concurrency", 2500*ms)},
			},
		},
		{
			name:    "while fresh work comes, old work has the concurrency it leaves",
			tenants: map[string]tenant.Limits{"acme": limits(1000, 1000, 10)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				// Jobs take 1 s, and fresh messages came at 1 in 5 s: they
				// need 0.2 slots, 0.3 with headroom, so 1; old work has
				// the other 9.
				{advance: time.Second, done: 1},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: spill("concurrency", 2500*ms)},
				{tenant: "acme", want: dispatch},
				// Not behind the old message spilled before it: old work
				// has a line of its own while fresh work comes.
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
				{tenant: "acme", want: spill("concurrency", 2600*ms)},
			},
		},
		{
			name:    "while fresh work comes, old work has the rate it leaves",
			tenants: map[string]tenant.Limits{"acme": limits(10, 4, 100)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				// One fresh message in 5 s: fresh work needs 0.2 a second,
				// 0.24 with headroom; old work has 9.76 of the 10, a bucket
				// of 3.
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", old: true, want: spill("rate", 102459017*time.Nanosecond)}, // the next token of its own bucket, 9.76 a second
				{tenant: "acme", want: spill("rate", 100*ms)},
				{advance: 100 * ms, tenant: "acme", want: dispatch},
			},
		},
		{
			name:    "while fresh work comes fast, old work takes at most half of the rate",
			tenants: map[string]tenant.Limits{"acme": limits(10, 60, 100)},
			steps: slices.Concat(
				slices.Repeat([]step{{tenant: "acme", want: dispatch}}, 21), // 4.2 a second over 5 s
				// Fresh work needs 4.2 a second, 5.04 with headroom: more
				// than half, so old work has half, a bucket of 30, while
				// the tenant's has 39 tokens left.
				slices.Repeat([]step{{tenant: "acme", old: true, want: dispatch}}, 30),
				[]step{
					{tenant: "acme", old: true, want: spill("rate", 200*ms)}, // the next token of its bucket of 5 a second
					// The turns after it come at the tenant's 10 a second,
					// not old work's 5: they may come after the fresh
					// work has stopped, when old work has the whole rate.
					{tenant: "acme", old: true, want: spill("rate", 300*ms)},
					{tenant: "acme", old: true, want: spill("rate", 400*ms)},
				}),
		},
		{
			name:    "spilled for a slot: behind the messages spilled for a token, in one line",
			tenants: map[string]tenant.Limits{"acme": limits(0.5, 1, 1)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{advance: 200 * ms, done: 1}, // jobs of 200 ms: the slot frees 5 a second, the rate is 0.5
				{tenant: "acme", want: spill("rate", 1800*ms)},
				{tenant: "acme", want: spill("rate", 3800*ms)},
				{advance: 1800 * ms, tenant: "acme", want: dispatch},
				// Its short delay would be 2.5 s; the line's next turn is
				// 4 s away (at 0.5 a second, the lower of the two rates).
				{tenant: "acme", want: spill("concurrency", 4000*ms)},
			},
		},
		{
			name:    "a tenant of concurrency 1 still works its old messages",
			tenants: map[string]tenant.Limits{"acme": limits(10, 10, 1)},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{done: 1},
				{tenant: "acme", old: true, want: dispatch},
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
			},
		},
		{
			name: "tenants are apart",
			tenants: map[string]tenant.Limits{
				"acme": limits(1, 1, 1),
				"beta": limits(1, 1, 1),
			},
			steps: []step{
				{tenant: "acme", want: dispatch},
				{tenant: "acme", want: spill("concurrency", 2500*ms)},
				{tenant: "beta", want: dispatch},
			},
		},
		{
			name:     "unknown tenants take the defaults, each its own",
			tenants:  map[string]tenant.Limits{},
			defaults: limits(100, 100, 1),
			steps: []step{
				{tenant: "gone", want: dispatch},
				{tenant: "gone", want: spill("concurrency", 2500*ms)},
				{tenant: "", want: dispatch},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			l, err := spillover.New(spillover.Config{
				Tenants:       registry(t, tt.tenants),
				Defaults:      tt.defaults,
				FleetSizeFunc: func() int { return tt.fleet },
				NowFunc:       c.Now,
				RandFunc:      func() float64 { return 0.75 },
				HoldMax:       -1,
			})
			if err != nil {
				t.Fatal(err)
			}
			var dones []func()
			for i, s := range tt.steps {
				c.Advance(s.advance)
				if s.done > 0 {
					dones[s.done-1]()
					continue
				}
				got, done := admitMessage(t, l, &consumer.Message{ID: "m", Tenant: s.tenant, Backlog: s.old})
				if diff := cmp.Diff(s.want, got, cmpopts.EquateApprox(0, float64(time.Microsecond))); diff != "" {
					t.Fatalf("step %d (-want +got):\n%s", i, diff)
				}
				if done != nil {
					dones = append(dones, done)
				}
			}
		})
	}
}

// TestLimiterFollowsRegistry: a tenant's new limits apply at its next
// message, without a restart.
func TestLimiterFollowsRegistry(t *testing.T) {
	t.Parallel()
	c := newClock()
	reg := registry(t, map[string]tenant.Limits{"acme": limits(1000, 1000, 1)})
	l, err := spillover.New(spillover.Config{Tenants: reg, NowFunc: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := admit(t, l, "acme"); v.Action != consumer.Dispatch {
		t.Fatalf("first: %v", v.Action)
	}
	if v, _ := admit(t, l, "acme"); v.Reason != "concurrency" {
		t.Fatalf("second under concurrency 1: %+v, want a spill for concurrency", v)
	}
	if _, _, err := reg.Put(context.Background(), "acme", limits(1000, 1000, 3)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if v, _ := admit(t, l, "acme"); v.Action != consumer.Dispatch {
			t.Fatalf("under concurrency raised to 3, message %d: %+v", i+2, v)
		}
	}
	if v, _ := admit(t, l, "acme"); v.Reason != "concurrency" {
		t.Errorf("fourth under concurrency 3: %+v, want a spill", v)
	}
	if _, _, err := reg.Put(context.Background(), "acme", limits(1000, 1000, 1)); err != nil {
		t.Fatal(err)
	}
	if v, _ := admit(t, l, "acme"); v.Reason != "concurrency" {
		t.Errorf("under concurrency lowered to 1 with 3 running: %+v, want a spill", v)
	}
}

// unavailable is a semaphore and a rate limiter that fail closed.
type unavailable struct{}

func (unavailable) TryAcquire(context.Context, string, int) (throttle.Permit, bool, error) {
	return throttle.Permit{}, false, throttle.ErrUnavailable
}

func (unavailable) Allow(context.Context, string, throttle.Limit, int) (throttle.Decision, error) {
	return throttle.Decision{}, throttle.ErrUnavailable
}

// broken fails with an error of its own.
type broken struct{}

func (broken) Allow(context.Context, string, throttle.Limit, int) (throttle.Decision, error) {
	return throttle.Decision{}, errors.New("boom")
}

func TestLimiterFailures(t *testing.T) {
	t.Parallel()
	reg := registry(t, map[string]tenant.Limits{"acme": limits(10, 10, 10)})
	tests := []struct {
		name    string
		cfg     spillover.Config
		want    verdict
		wantErr bool
	}{
		{"semaphore failing closed", spillover.Config{Semaphore: unavailable{}}, spill("unavailable", 2500*ms), false},
		{"rate failing closed", spillover.Config{Rate: unavailable{}}, spill("unavailable", 2500*ms), false},
		{"another error goes to the worker", spillover.Config{Rate: broken{}}, verdict{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Tenants = reg
			cfg.RandFunc = func() float64 { return 0.75 }
			l, err := spillover.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			v, err := l.Admit(context.Background(), &consumer.Message{Tenant: "acme"})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want an error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, verdict{Action: v.Action, Delay: v.Delay, Reason: v.Reason}); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLimiterMetrics(t *testing.T) {
	t.Parallel()
	c := newClock()
	promReg := prometheus.NewRegistry()
	l, err := spillover.New(spillover.Config{
		Tenants: registry(t, map[string]tenant.Limits{
			"acme": limits(1000, 1000, 1),
			"beta": limits(1000, 1000, 1),
		}),
		MaxTenantLabels: 1,
		Registerer:      promReg,
		NowFunc:         c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, doneA := admit(t, l, "acme")
	admit(t, l, "acme")             // spilled: concurrency
	_, doneB := admit(t, l, "beta") // beyond one label: other
	admit(t, l, "beta")
	admit(t, l, "stranger") // not in the registry: other
	want := map[string]float64{
		`fairq_worker_tenant_in_flight{tenant="acme"}`:                           1,
		`fairq_worker_tenant_in_flight{tenant="other"}`:                          2,
		`fairq_worker_tenant_spilled_total{reason="concurrency",tenant="acme"}`:  1,
		`fairq_worker_tenant_spilled_total{reason="concurrency",tenant="other"}`: 1,
	}
	if diff := cmp.Diff(want, series(t, promReg)); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	c.Advance(1500 * ms)
	doneA()
	doneB()
	want[`fairq_worker_tenant_in_flight{tenant="acme"}`] = 0
	want[`fairq_worker_tenant_in_flight{tenant="other"}`] = 1
	if diff := cmp.Diff(want, series(t, promReg)); diff != "" {
		t.Errorf("metrics after two jobs ended (-want +got):\n%s", diff)
	}
}

func TestNewInvalid(t *testing.T) {
	t.Parallel()
	reg := registry(t, nil)
	for name, cfg := range map[string]spillover.Config{
		"no tenants":         {},
		"negative delay":     {Tenants: reg, ConcurrencyDelay: -time.Second},
		"delay over 900 s":   {Tenants: reg, ConcurrencyDelay: time.Hour},
		"invalid defaults":   {Tenants: reg, Defaults: tenant.Limits{Concurrency: ptr(0)}},
		"negative label cap": {Tenants: reg, MaxTenantLabels: -1},
	} {
		if _, err := spillover.New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// TestLimiterAges: past its drop age (its tenant's, else the worker's) a
// message is dropped, and past the backlog age moved to the backlog queue
// unless it came from there; such messages take no slot nor token.
func TestLimiterAges(t *testing.T) {
	t.Parallel()
	drop := func(d time.Duration) tenant.Limits {
		l := limits(1000, 1000, 1)
		l.DropAge = ptr(tenant.Duration(d))
		return l
	}
	aged := func(a consumer.Action) verdict { return verdict{Action: a, Reason: spillover.ReasonAged} }
	tests := []struct {
		name    string
		tenant  string
		age     time.Duration
		backlog bool // from the backlog queue
		want    verdict
	}{
		{"fresh", "plain", time.Minute, false, dispatch},
		{"at the backlog age", "plain", 5 * time.Minute, false, dispatch},
		{"past the backlog age", "plain", 6 * time.Minute, false, aged(consumer.ToBacklog)},
		{"past the backlog age, from the backlog", "plain", 6 * time.Minute, true, dispatch},
		{"past the worker's drop age", "plain", 4 * time.Hour, false, aged(consumer.Drop)},
		{"past the drop age, from the backlog", "plain", 4 * time.Hour, true, aged(consumer.Drop)},
		{"a tenant's shorter drop age", "synced", 2 * time.Hour, false, aged(consumer.Drop)},
		{"a tenant's longer drop age", "kept", 4 * time.Hour, true, dispatch},
		{"an unknown tenant: the defaults' drop age", "gone", 31 * time.Minute, true, aged(consumer.Drop)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			l, err := spillover.New(spillover.Config{
				Tenants: registry(t, map[string]tenant.Limits{
					"plain":  limits(1000, 1000, 1),
					"synced": drop(time.Hour),
					"kept":   drop(24 * time.Hour),
				}),
				Defaults:   drop(30 * time.Minute),
				DropAge:    3 * time.Hour,
				BacklogAge: 5 * time.Minute,
				NowFunc:    c.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := admitMessage(t, l, &consumer.Message{ID: "m", Tenant: tt.tenant, Backlog: tt.backlog, EnqueuedAt: c.Now().Add(-tt.age)})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.want.Action != consumer.Dispatch {
				// The tenant's one slot is still free.
				if v, _ := admitMessage(t, l, &consumer.Message{ID: "n", Tenant: tt.tenant, EnqueuedAt: c.Now()}); v.Action != consumer.Dispatch {
					t.Errorf("a fresh message after an aged one: %v, want dispatch", v.Action)
				}
			}
		})
	}
}

// countingSemaphore counts the slots asked of its Semaphore.
type countingSemaphore struct {
	throttle.Semaphore
	asks atomic.Int64
}

func (s *countingSemaphore) TryAcquire(ctx context.Context, key string, limit int) (throttle.Permit, bool, error) {
	s.asks.Add(1)
	return s.Semaphore.TryAcquire(ctx, key, limit)
}

// TestLimiterEmptyBucketTakesNoSlot: once a tenant's bucket has refused a
// token, messages that come before the next one is due are refused
// without taking a concurrency slot (to give back at once); their turns
// are as before. Once the token is due, a message asks again.
func TestLimiterEmptyBucketTakesNoSlot(t *testing.T) {
	t.Parallel()
	c := newClock()
	sem := &countingSemaphore{Semaphore: throttle.NewLocalSemaphore()}
	l, err := spillover.New(spillover.Config{
		Tenants:   registry(t, map[string]tenant.Limits{"acme": limits(10, 1, 5)}),
		Semaphore: sem,
		NowFunc:   c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		advance time.Duration
		want    verdict
		asks    int64 // slots asked so far
	}{
		{0, dispatch, 1},
		{0, spill("rate", 100*ms), 2}, // a slot taken, the token refused
		{0, spill("rate", 200*ms), 2}, // refused without a slot
		{50 * ms, spill("rate", 250*ms), 2},
		{50 * ms, dispatch, 3}, // the token is due: asked again
	}
	for i, st := range steps {
		c.Advance(st.advance)
		got, _ := admit(t, l, "acme")
		if got != st.want {
			t.Errorf("message %d: %+v, want %+v", i+1, got, st.want)
		}
		if n := sem.asks.Load(); n != st.asks {
			t.Errorf("message %d: %d slots asked in all, want %d", i+1, n, st.asks)
		}
	}
}

// TestLimiterDispatchesOnlyWithASlot: a message that comes as its
// tenant's bucket, known to have no token, gets its next one is either
// refused or dispatched with a concurrency slot, never dispatched without
// one (found by the fleet experiment: 11 of a tenant's pushes at once at
// the application, with concurrency 10). The clock moves on at every
// reading, so that the token comes due between any two readings of
// Admit in one of the cases.
func TestLimiterDispatchesOnlyWithASlot(t *testing.T) {
	t.Parallel()
	for early := range 16 {
		c := newClock()
		l, err := spillover.New(spillover.Config{
			Tenants: registry(t, map[string]tenant.Limits{"acme": limits(10, 1, 2)}),
			NowFunc: c.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := admit(t, l, "acme"); v != dispatch { // its slot kept
			t.Fatalf("first message: %+v, want dispatch", v)
		}
		if v, _ := admit(t, l, "acme"); v != spill("rate", 100*ms) { // the bucket known empty for 100 ms
			t.Fatalf("second message: %+v, want a spill for its rate", v)
		}
		c.Advance(100*ms - time.Duration(early)*time.Microsecond)
		c.ticking(time.Microsecond)
		// admit fails the test for a dispatch without a slot to give back.
		v, done := admit(t, l, "acme")
		if v.Action == consumer.Dispatch {
			done()
		}
	}
}

// TestLimiterPacesAgedMoves: messages moved to the backlog for their age
// take turns at their tenant's rate in its old work's line, each delayed
// to its turn exactly (the worker waits out the part below a second
// before it sends the move), so that every tenant's backlog comes back at
// the rate it may run rather than in the order the moves reached the
// queue; a fresh message's turn is not behind them.
func TestLimiterPacesAgedMoves(t *testing.T) {
	t.Parallel()
	c := newClock()
	l, err := spillover.New(spillover.Config{
		Tenants:    registry(t, map[string]tenant.Limits{"acme": limits(2, 1, 5), "other": limits(2, 1, 5)}),
		BacklogAge: 10 * time.Second,
		NowFunc:    c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	aged := func(a consumer.Action, d time.Duration) verdict {
		return verdict{Action: a, Delay: d, Reason: spillover.ReasonAged, Exact: true}
	}
	var got []verdict
	for _, id := range []string{"acme", "acme", "acme", "acme", "acme", "other"} {
		got = append(got, admitExactly(t, l, &consumer.Message{ID: "m", Tenant: id, EnqueuedAt: c.Now().Add(-time.Minute)}))
	}
	// Turns at 0, 0.5, 1, 1.5 and 2 s; another tenant's line is its own.
	want := []verdict{
		aged(consumer.ToBacklog, 0), aged(consumer.ToBacklog, 500*ms), aged(consumer.ToBacklog, time.Second),
		aged(consumer.ToBacklog, 1500*ms), aged(consumer.ToBacklog, 2*time.Second), aged(consumer.ToBacklog, 0),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("moves (-want +got):\n%s", diff)
	}
	if v, _ := admitMessage(t, l, &consumer.Message{ID: "f", Tenant: "acme", EnqueuedAt: c.Now()}); v.Action != consumer.Dispatch {
		t.Fatalf("a fresh message: %v, want dispatch", v.Action)
	}
	if v, _ := admitMessage(t, l, &consumer.Message{ID: "g", Tenant: "acme", EnqueuedAt: c.Now()}); v != spill("rate", 500*time.Millisecond) {
		t.Errorf("a fresh message over the rate: %+v, want its own turn, at the next token", v)
	}
}

// TestLimiterSpillsPastBacklogAgeToBacklog: a message spilled to a turn
// that would bring it back past the backlog age goes to the backlog
// queue at once, with the same delay, rather than to overflow to be moved
// there again on its return; one from the backlog queue stays a Spill
// (the worker sends it back there).
func TestLimiterSpillsPastBacklogAgeToBacklog(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		age     time.Duration // when spilled
		backlog bool
		want    verdict
	}{
		// Sent back to the backlog queue, old work comes back at its turn
		// exactly; a spill to overflow at the whole second after it.
		{"back before the backlog age", 5 * time.Second, false, spill("rate", 4*time.Second)},
		{"back at the backlog age", 6 * time.Second, false, spill("rate", 4*time.Second)},
		{"back past the backlog age", 7 * time.Second, false, verdict{Action: consumer.ToBacklog, Delay: 4 * time.Second, Reason: "rate", Exact: true}},
		{"from the backlog queue", 7 * time.Second, true, verdict{Action: consumer.Spill, Delay: 4 * time.Second, Reason: "rate", Exact: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			l, err := spillover.New(spillover.Config{
				Tenants:    registry(t, map[string]tenant.Limits{"acme": limits(0.25, 1, 5)}),
				BacklogAge: 10 * time.Second,
				NowFunc:    c.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := admitMessage(t, l, &consumer.Message{ID: "first", Tenant: "acme", EnqueuedAt: c.Now()}); v.Action != consumer.Dispatch {
				t.Fatalf("first message: %v, want dispatch", v.Action)
			}
			got := admitExactly(t, l, &consumer.Message{ID: "m", Tenant: "acme", Backlog: tt.backlog, EnqueuedAt: c.Now().Add(-tt.age)})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLimiterCountsFreshOnce: what old work leaves fresh work is measured
// from fresh messages as they arrive, each once: a message asked about
// again after a hold, or back after a spill, is no new arrival.
func TestLimiterCountsFreshOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		again consumer.Message // 20 more fresh messages like this one
		want  int              // old messages dispatched before the first refusal
	}{
		// 21 arrivals in an instant, 4.2 a second over 5 s: fresh work
		// needs more than half the rate, so old work has half, a bucket of
		// 50.
		{"new messages", consumer.Message{}, 50},
		// One arrival: old work has 8.76 a second, a bucket of 87; the
		// tenant's has 79 tokens left.
		// Arrivals that waited 2 s on the queue count as of when they
		// were enqueued, e^-0.4 of one each: 2.88 a second, 3.46 with
		// headroom, so old work has 6.54 a second, a bucket of 65.
		{"new messages that waited on the queue", consumer.Message{EnqueuedAt: newClock().Now().Add(-2 * time.Second)}, 65},
		{"asked again after a hold", consumer.Message{Held: 20 * ms}, 79},
		{"moved copies", consumer.Message{Moved: true}, 79},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			l, err := spillover.New(spillover.Config{
				Tenants: registry(t, map[string]tenant.Limits{"acme": limits(10, 100, 1000)}),
				NowFunc: c.Now,
				HoldMax: -1,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := admitMessage(t, l, &consumer.Message{ID: "m", Tenant: "acme"}); got != dispatch {
				t.Fatalf("first fresh message: %v, want dispatch", got)
			}
			for range 20 {
				m := tt.again
				m.ID, m.Tenant = "m", "acme"
				if got, _ := admitMessage(t, l, &m); got != dispatch {
					t.Fatalf("fresh message: %v, want dispatch", got)
				}
			}
			n := 0
			for ; n < 200; n++ {
				if got, _ := admitMessage(t, l, &consumer.Message{ID: "m", Tenant: "acme", Backlog: true}); got != dispatch {
					break
				}
			}
			if n != tt.want {
				t.Errorf("old messages dispatched: %d, want %d", n, tt.want)
			}
		})
	}
}
