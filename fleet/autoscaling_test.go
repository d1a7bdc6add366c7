package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/queue"
)

// depths is a DepthReader of fixed visible counts.
type depths struct {
	mu      sync.Mutex
	visible map[string]int
	err     error
	calls   int
}

func (d *depths) Depth(_ context.Context, q string) (queue.Depth, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.err != nil {
		return queue.Depth{}, d.err
	}
	return queue.Depth{Visible: d.visible[q], NotVisible: 1000, Delayed: 1000}, nil
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

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

func TestAutoscaling(t *testing.T) {
	t.Parallel()
	type observation struct {
		advance time.Duration
		took    time.Duration
	}
	tests := []struct {
		name        string
		visible     map[string]int
		workers     int
		slots       int
		latency     time.Duration
		observed    []observation
		advance     time.Duration // before the refresh
		wantBacklog float64
		wantTarget  float64 // 0: not exported
		wantMean    float64
	}{
		{
			// The guidance's own example: 1,500 visible, 10 instances,
			// 10 s acceptable ÷ 0.1 s per message.
			name:    "the guidance's example",
			visible: map[string]int{"live-00": 1000, "live-01": 400, "overflow": 60, "backlog": 40, "dlq": 999},
			workers: 10, latency: 10 * time.Second,
			observed:    []observation{{took: 50 * time.Millisecond}, {took: 150 * time.Millisecond}},
			wantBacklog: 150, wantTarget: 100, wantMean: 0.1,
		},
		{
			name:    "slots run at once",
			visible: map[string]int{"live-00": 300},
			workers: 3, slots: 50, latency: 10 * time.Second,
			observed:    []observation{{took: 100 * time.Millisecond}},
			wantBacklog: 100, wantTarget: 5000, wantMean: 0.1,
		},
		{
			name:        "no job yet: no target",
			visible:     map[string]int{"live-00": 7},
			workers:     0, // counts one
			wantBacklog: 7,
		},
		{
			name:    "old jobs leave the window",
			visible: map[string]int{"live-00": 10},
			workers: 1, latency: 10 * time.Second,
			observed: []observation{
				{took: 10 * time.Second},
				{advance: 61 * time.Second, took: time.Second},
			},
			wantBacklog: 10, wantTarget: 10, wantMean: 1,
		},
		{
			name:    "only jobs older than the window: no target yet",
			visible: map[string]int{"live-00": 10},
			workers: 1, latency: 10 * time.Second,
			observed:    []observation{{took: time.Second}},
			advance:     2 * time.Minute,
			wantBacklog: 10, wantTarget: 0, wantMean: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
			reg := prometheus.NewRegistry()
			a, err := fleet.NewAutoscaling(fleet.AutoscalingConfig{
				Depths:            &depths{visible: tt.visible},
				Queues:            []string{"live-00", "live-01", "overflow", "backlog"},
				SizeFunc:          func() int { return tt.workers },
				AcceptableLatency: tt.latency,
				Slots:             tt.slots,
				Registerer:        reg,
				Now:               c.Now,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tt.observed {
				c.Advance(o.advance)
				a.Observe(o.took)
			}
			c.Advance(tt.advance)
			if err := a.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := gauge(t, reg, "fairq_backlog_per_instance"); got != tt.wantBacklog {
				t.Errorf("fairq_backlog_per_instance = %v, want %v", got, tt.wantBacklog)
			}
			if got, ok := optionalGauge(t, reg, "fairq_backlog_target_per_instance"); ok != (tt.wantTarget != 0) || !near(got, tt.wantTarget) {
				t.Errorf("fairq_backlog_target_per_instance = %v (exported %v), want %v", got, ok, tt.wantTarget)
			}
			if got, _ := optionalGauge(t, reg, "fairq_worker_mean_processing_seconds"); !near(got, tt.wantMean) {
				t.Errorf("fairq_worker_mean_processing_seconds = %v, want %v", got, tt.wantMean)
			}
		})
	}
}

// TestAutoscalingKeepsValues: a window without jobs keeps the target of
// the last one; a failed read keeps the backlog.
func TestAutoscalingKeepsValues(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	d := &depths{visible: map[string]int{"q": 40}}
	a, err := fleet.NewAutoscaling(fleet.AutoscalingConfig{Depths: d, Queues: []string{"q"}, Registerer: reg, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	a.Observe(200 * time.Millisecond)
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Advance(10 * time.Minute)
	d.mu.Lock()
	d.err = errors.New("throttled")
	d.mu.Unlock()
	if err := a.Refresh(context.Background()); err == nil {
		t.Error("Refresh hid a read error")
	}
	if got := gauge(t, reg, "fairq_backlog_per_instance"); got != 40 {
		t.Errorf("backlog after a failed read = %v, want the 40 read before", got)
	}
	d.mu.Lock()
	d.err = nil
	d.mu.Unlock()
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, reg, "fairq_backlog_target_per_instance"); !near(got, 50) {
		t.Errorf("target after a quiet window = %v, want the 50 of 10 s ÷ 0.2 s", got)
	}
}

func TestAutoscalingStartStop(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := queue.NewMemory(queue.MemoryConfig{})
	ctx := context.Background()
	if _, err := b.Create(ctx, queue.Spec{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := b.Send(ctx, "q", []queue.Entry{{ID: fmt.Sprint(i), Body: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := fleet.NewAutoscaling(fleet.AutoscalingConfig{Depths: b, Queues: []string{"q"}, Registerer: reg, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the backlog read", func() bool { return gauge(t, reg, "fairq_backlog_per_instance") == 3 })
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestNewAutoscalingInvalid(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]fleet.AutoscalingConfig{
		"no reader":        {Queues: []string{"q"}},
		"no queues":        {Depths: &depths{}},
		"negative latency": {Depths: &depths{}, Queues: []string{"q"}, AcceptableLatency: -time.Second},
	} {
		if _, err := fleet.NewAutoscaling(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func near(a, b float64) bool { d := a - b; return d > -1e-9 && d < 1e-9 }

// optionalGauge returns the value of a gauge without labels and whether
// it is exported.
func optionalGauge(t testing.TB, reg *prometheus.Registry, name string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func ExampleAutoscaling() {
	b := queue.NewMemory(queue.MemoryConfig{})
	ctx := context.Background()
	b.Create(ctx, queue.Spec{Name: "fairq-live-00"})
	for i := range 30 {
		b.Send(ctx, "fairq-live-00", []queue.Entry{{ID: fmt.Sprint(i), Body: "job"}})
	}
	reg := prometheus.NewRegistry()
	a, _ := fleet.NewAutoscaling(fleet.AutoscalingConfig{
		Depths:            b,
		Queues:            []string{"fairq-live-00"},
		SizeFunc:          func() int { return 3 }, // Fleet.Last
		AcceptableLatency: 10 * time.Second,        // worker.acceptable_latency
		Registerer:        reg,
	})
	a.Observe(100 * time.Millisecond) // a job's processing time
	a.Refresh(ctx)
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "fairq_backlog_per_instance" || mf.GetName() == "fairq_backlog_target_per_instance" {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// fairq_backlog_per_instance 10
	// fairq_backlog_target_per_instance 100
}
