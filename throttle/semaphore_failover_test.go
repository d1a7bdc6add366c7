package throttle_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/throttle"
)

// flakySemaphore is a primary semaphore, a LocalSemaphore underneath,
// that fails while down is set.
type flakySemaphore struct {
	s *throttle.LocalSemaphore
	outage
}

func (f *flakySemaphore) TryAcquire(ctx context.Context, key string, limit int) (throttle.Permit, bool, error) {
	if err := f.call(); err != nil {
		return throttle.Permit{}, false, err
	}
	return f.s.TryAcquire(ctx, key, limit)
}

func TestFailoverSemaphore(t *testing.T) {
	t.Parallel()
	failModes(t, func(t *testing.T, closed bool) {
		c := newClock()
		primary := &flakySemaphore{s: throttle.NewLocalSemaphore()}
		reg := prometheus.NewRegistry()
		var logs bytes.Buffer
		f, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
			Primary:       primary,
			FailClosed:    closed,
			FleetSizeFunc: func() int { return 2 },
			Cooldown:      time.Second,
			Component:     "ratelimit", // the label gauge() reads
			Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
			RedisMetrics:  redisMetrics(t, reg),
			Now:           c.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		const limit = 5 // a fleet of 2: a local share of 3

		held, ok, err := f.TryAcquire(ctx, "k", limit)
		if err != nil || !ok {
			t.Fatalf("healthy: %v, %v", ok, err)
		}
		if got := primary.s.InUse("k"); got != 1 {
			t.Fatalf("primary holds %d slots, want 1", got)
		}
		primary.set(true)
		var granted []throttle.Permit
		for i := range 4 {
			p, ok, err := f.TryAcquire(ctx, "k", limit)
			switch {
			case closed:
				if !errors.Is(err, throttle.ErrUnavailable) {
					t.Fatalf("down, call %d: err %v, want ErrUnavailable", i, err)
				}
			case err != nil:
				t.Fatalf("down, call %d: %v", i, err)
			case ok:
				granted = append(granted, p)
			}
		}
		wantGranted := 2 // the share of 3, one already held from the primary
		if closed {
			wantGranted = 0
		}
		if len(granted) != wantGranted {
			t.Errorf("granted %d slots while down, want %d", len(granted), wantGranted)
		}
		if primary.calls != 2 {
			t.Errorf("primary asked %d times, want 2: once healthy, once more before the cooldown", primary.calls)
		}
		if !f.Degraded() {
			t.Error("not Degraded while down")
		}
		if got := gauge(t, reg, "fairq_redis_degraded"); got != 1 {
			t.Errorf("fairq_redis_degraded = %v while down, want 1", got)
		}
		held.Release()
		if got := primary.s.InUse("k"); got != 0 {
			t.Errorf("the primary's slot not released: %d in use", got)
		}
		for _, p := range granted {
			p.Release()
		}

		primary.set(false)
		c.Advance(time.Second)
		if _, ok, err := f.TryAcquire(ctx, "k", limit); err != nil || !ok {
			t.Fatalf("after the cooldown: %v, %v", ok, err)
		}
		if got := primary.s.InUse("k"); got != 1 {
			t.Errorf("after the cooldown the primary holds %d slots, want 1", got)
		}
		checkRecovered(t, reg, logs.String(), closed, 4.0)
	})
}

func TestFailoverSemaphoreShare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit, fleet, want int
	}{
		{10, 1, 10}, {10, 3, 4}, {10, 10, 1}, {2, 5, 1}, {10, 0, 10},
	}
	for _, tt := range tests {
		primary := &flakySemaphore{s: throttle.NewLocalSemaphore(), outage: outage{down: true}}
		f, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
			Primary: primary, FleetSizeFunc: func() int { return tt.fleet },
		})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for range tt.limit + 1 {
			if _, ok, _ := f.TryAcquire(context.Background(), "k", tt.limit); ok {
				got++
			}
		}
		if got != tt.want {
			t.Errorf("limit %d, fleet of %d: %d local slots, want %d", tt.limit, tt.fleet, got, tt.want)
		}
	}
}
