package overview_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/overview"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestRecorderReport(t *testing.T) {
	t.Parallel()
	clk := newClock()
	r := overview.NewRecorder(overview.RecorderConfig{Slots: 8, Now: clk.Now})
	r.Accepted("a", 3)
	r.Refused("a", "rate_limited", 2)
	r.Spilled("a", "concurrency")
	r.Accepted("b", 1)
	end := r.Started("a", 200*time.Millisecond, true)
	r.Started("b", time.Hour, false) // still running; not a first attempt
	clk.Advance(2 * time.Second)
	end()
	end() // ending twice counts once

	got := r.Report("w1", "worker")
	want := overview.Report{
		Instance: "w1", Role: "worker", At: clk.Now(), Window: 2, Slots: 8, SlotsInUse: 1,
		Tenants: map[string]overview.TenantReport{
			"a": {Accepted: 3, Refused: map[string]int64{"rate_limited": 2}, Spilled: map[string]int64{"concurrency": 1},
				Processed: 1, BusySeconds: 2, Age: []int64{0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
			"b": {Accepted: 1, InFlight: 1},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Report (-want +got):\n%s", diff)
	}
}

// TestRecorderWindow: a report counts the last minute, to within the
// marks taken every 10 s, and forgets what came before.
func TestRecorderWindow(t *testing.T) {
	t.Parallel()
	clk := newClock()
	r := overview.NewRecorder(overview.RecorderConfig{Now: clk.Now})
	r.Accepted("a", 100) // at 0 s
	for range 7 {
		clk.Advance(10 * time.Second)
		r.Accepted("a", 1)
		r.Report("g", "gateway") // takes a mark every 10 s
	}
	// At 70 s: the window starts at the mark of 10 s, after the 100 and
	// the first 1, so it holds the 6 accepted since.
	got := r.Report("g", "gateway")
	if a := got.Tenants["a"]; a.Accepted != 6 || got.Window != 60 {
		t.Errorf("at 70 s: %d accepted over %v s, want 6 over 60", a.Accepted, got.Window)
	}
	// Quiet for a while: the tenant leaves the report, then the recorder.
	for range 40 {
		clk.Advance(10 * time.Second)
		r.Report("g", "gateway")
	}
	if got := r.Report("g", "gateway"); len(got.Tenants) != 0 {
		t.Errorf("after minutes without events: %+v, want no tenant", got.Tenants)
	}
	// Seen again after it was dropped: counted from zero.
	r.Accepted("a", 2)
	clk.Advance(time.Second)
	if got := r.Report("g", "gateway"); got.Tenants["a"].Accepted != 2 {
		t.Errorf("seen again: %+v, want 2 accepted", got.Tenants["a"])
	}
}

func TestRecorderNil(t *testing.T) {
	t.Parallel()
	var r *overview.Recorder
	r.Accepted("a", 1)
	r.Refused("a", "x", 1)
	r.Spilled("a", "rate")
	r.Started("a", 0, true)()
}

func TestRecorderConcurrent(t *testing.T) {
	t.Parallel()
	r := overview.NewRecorder(overview.RecorderConfig{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 1000 {
				r.Accepted("a", 1)
				r.Refused("a", []string{"x", "y"}[i%2], 1)
				r.Started("a", time.Millisecond, true)()
				if i == 0 {
					r.Report("p", "dev")
				}
			}
		})
	}
	wg.Wait()
	a := r.Report("p", "dev").Tenants["a"]
	if a.Accepted != 8000 || a.Processed != 8000 || a.Refused["x"]+a.Refused["y"] != 8000 || a.InFlight != 0 {
		t.Errorf("after 8×1000 of each: %+v", a)
	}
}
