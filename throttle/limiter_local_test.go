package throttle_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/throttle"
)

// clock is a manual clock for the local limiter.
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

func TestLocalLimiter(t *testing.T) {
	t.Parallel()
	lim := throttle.Limit{Rate: 10, Burst: 3}
	type step struct {
		advance time.Duration
		n       int
		want    throttle.Decision
	}
	tests := []struct {
		name  string
		limit throttle.Limit
		steps []step
	}{
		{
			name:  "burst then refusal with the time to the next token",
			limit: lim,
			steps: []step{
				{n: 1, want: throttle.Decision{Allowed: 1, Limit: lim, Remaining: 2, ResetAfter: 100 * time.Millisecond}},
				{n: 1, want: throttle.Decision{Allowed: 1, Limit: lim, Remaining: 1, ResetAfter: 200 * time.Millisecond}},
				{n: 1, want: throttle.Decision{Allowed: 1, Limit: lim, Remaining: 0, ResetAfter: 300 * time.Millisecond}},
				{n: 1, want: throttle.Decision{Allowed: 0, Limit: lim, Remaining: 0, RetryAfter: 100 * time.Millisecond, ResetAfter: 300 * time.Millisecond}},
				{advance: 40 * time.Millisecond, n: 1, want: throttle.Decision{Allowed: 0, Limit: lim, RetryAfter: 60 * time.Millisecond, ResetAfter: 260 * time.Millisecond}},
				{advance: 60 * time.Millisecond, n: 1, want: throttle.Decision{Allowed: 1, Limit: lim, ResetAfter: 300 * time.Millisecond}},
			},
		},
		{
			name:  "a batch takes what is there",
			limit: lim,
			steps: []step{
				{n: 5, want: throttle.Decision{Allowed: 3, Limit: lim, RetryAfter: 100 * time.Millisecond, ResetAfter: 300 * time.Millisecond}},
				{advance: time.Second, n: 2, want: throttle.Decision{Allowed: 2, Limit: lim, Remaining: 1, ResetAfter: 200 * time.Millisecond}},
			},
		},
		{
			name:  "refills no further than the burst",
			limit: lim,
			steps: []step{
				{n: 3, want: throttle.Decision{Allowed: 3, Limit: lim, ResetAfter: 300 * time.Millisecond}},
				{advance: time.Hour, n: 4, want: throttle.Decision{Allowed: 3, Limit: lim, RetryAfter: 100 * time.Millisecond, ResetAfter: 300 * time.Millisecond}},
			},
		},
		{
			name:  "unlimited",
			limit: throttle.Limit{Rate: 0, Burst: 5},
			steps: []step{
				{n: 50, want: throttle.Decision{Allowed: 50, Limit: throttle.Limit{Rate: 0, Burst: 5}, Remaining: 50}},
			},
		},
		{
			name:  "fractional rate",
			limit: throttle.Limit{Rate: 0.5, Burst: 1},
			steps: []step{
				{n: 1, want: throttle.Decision{Allowed: 1, Limit: throttle.Limit{Rate: 0.5, Burst: 1}, ResetAfter: 2 * time.Second}},
				{advance: time.Second, n: 1, want: throttle.Decision{Limit: throttle.Limit{Rate: 0.5, Burst: 1}, RetryAfter: time.Second, ResetAfter: time.Second}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			l := throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now})
			for i, s := range tt.steps {
				c.Advance(s.advance)
				got, err := l.Allow(context.Background(), "k", tt.limit, s.n)
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if diff := cmp.Diff(s.want, got, approxDuration); diff != "" {
					t.Errorf("step %d: decision (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// approxDuration compares durations to the microsecond: token arithmetic is
// in floating point.
var approxDuration = cmp.Comparer(func(a, b time.Duration) bool {
	d := a - b
	return d > -time.Microsecond && d < time.Microsecond
})

// TestLocalRetryAfterIsTruthful checks the promise behind Retry-After: a
// caller that waits RetryAfter is admitted, and one that waits less is not.
func TestLocalRetryAfterIsTruthful(t *testing.T) {
	t.Parallel()
	for _, lim := range []throttle.Limit{{Rate: 1, Burst: 1}, {Rate: 7, Burst: 2}, {Rate: 0.3, Burst: 4}, {Rate: 1000, Burst: 10}} {
		t.Run(fmt.Sprint(lim), func(t *testing.T) {
			t.Parallel()
			c := newClock()
			l := throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now})
			ctx := context.Background()
			for range 20 {
				d, err := l.Allow(ctx, "k", lim, 1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed == 1 {
					continue
				}
				if d.RetryAfter <= 0 {
					t.Fatalf("refused with RetryAfter %v", d.RetryAfter)
				}
				c.Advance(d.RetryAfter - time.Millisecond)
				if early, _ := l.Allow(ctx, "k", lim, 1); early.Allowed != 0 {
					t.Fatalf("admitted a millisecond before RetryAfter %v", d.RetryAfter)
				}
				c.Advance(time.Millisecond)
				if on, _ := l.Allow(ctx, "k", lim, 1); on.Allowed != 1 {
					t.Fatalf("refused after waiting RetryAfter %v: %+v", d.RetryAfter, on)
				}
			}
		})
	}
}

func TestLocalLimitChangesApplyAtOnce(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now})
	ctx := context.Background()
	full := throttle.Limit{Rate: 100, Burst: 10}
	if d, _ := l.Allow(ctx, "k", full, 10); d.Allowed != 10 {
		t.Fatalf("allowed %d of a full bucket of 10", d.Allowed)
	}
	c.Advance(time.Second) // refills to 10
	half := full.Scale(0.5)
	if diff := cmp.Diff(throttle.Limit{Rate: 50, Burst: 5}, half); diff != "" {
		t.Fatalf("Scale(0.5) (-want +got):\n%s", diff)
	}
	if d, _ := l.Allow(ctx, "k", half, 10); d.Allowed != 5 {
		t.Errorf("allowed %d under a halved bucket of 5", d.Allowed)
	}
	c.Advance(100 * time.Millisecond)
	if d, _ := l.Allow(ctx, "k", half, 10); d.Allowed != 5 {
		t.Errorf("allowed %d after 100ms at 50/s, want 5", d.Allowed)
	}
}

func TestScale(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   throttle.Limit
		f    float64
		want throttle.Limit
	}{
		{"identity", throttle.Limit{Rate: 10, Burst: 20}, 1, throttle.Limit{Rate: 10, Burst: 20}},
		{"above one", throttle.Limit{Rate: 10, Burst: 20}, 3, throttle.Limit{Rate: 10, Burst: 20}},
		{"quarter", throttle.Limit{Rate: 10, Burst: 20}, 0.25, throttle.Limit{Rate: 2.5, Burst: 5}},
		{"keeps one token", throttle.Limit{Rate: 10, Burst: 20}, 0.01, throttle.Limit{Rate: 0.1, Burst: 1}},
		{"unlimited stays", throttle.Limit{Rate: 0, Burst: 20}, 0.5, throttle.Limit{Rate: 0, Burst: 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Scale(tt.f); got != tt.want {
				t.Errorf("%+v.Scale(%v) = %+v, want %+v", tt.in, tt.f, got, tt.want)
			}
		})
	}
}

func TestLocalSweepDropsFullBuckets(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now, SweepEvery: time.Minute})
	ctx := context.Background()
	lim := throttle.Limit{Rate: 1, Burst: 1}
	for i := range 5 {
		l.Allow(ctx, fmt.Sprint("k", i), lim, 1)
	}
	if got := l.Len(); got != 5 {
		t.Fatalf("Len = %d, want 5", got)
	}
	c.Advance(time.Minute)
	if d, _ := l.Allow(ctx, "k0", lim, 1); d.Allowed != 1 {
		t.Fatalf("k0 not refilled after a minute")
	}
	if got := l.Len(); got != 1 {
		t.Errorf("Len after sweep = %d, want 1 (only the bucket just used)", got)
	}
}

func TestLocalConcurrentAllowGrantsExactlyTheBurst(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
	)
	for range 50 {
		wg.Go(func() {
			d, err := l.Allow(context.Background(), "k", throttle.Limit{Rate: 1, Burst: 20}, 1)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			granted += d.Allowed
			mu.Unlock()
		})
	}
	wg.Wait()
	if granted != 20 {
		t.Errorf("granted %d, want the burst of 20", granted)
	}
}

func BenchmarkLocalLimiter(b *testing.B) {
	l := throttle.NewLocalLimiter(throttle.LocalConfig{})
	ctx := context.Background()
	lim := throttle.Limit{Rate: 1e9, Burst: 1 << 30}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Allow(ctx, "tenant-a", lim, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func ExampleLocalLimiter() {
	l := throttle.NewLocalLimiter(throttle.LocalConfig{})
	lim := throttle.Limit{Rate: 1, Burst: 2}
	for range 3 {
		d, _ := l.Allow(context.Background(), "acme", lim, 1)
		fmt.Println(d.Allowed, d.RetryAfter.Round(100*time.Millisecond))
	}
	// Output:
	// 1 0s
	// 1 0s
	// 0 1s
}
