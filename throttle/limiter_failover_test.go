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

// flaky is a primary limiter that fails while down is set.
type flaky struct {
	outage
}

func (f *flaky) Allow(ctx context.Context, key string, l throttle.Limit, n int) (throttle.Decision, error) {
	if err := f.call(); err != nil {
		return throttle.Decision{}, err
	}
	return throttle.Decision{Allowed: n, Limit: l, Remaining: 1000}, nil
}

func TestFailoverLimiter(t *testing.T) {
	t.Parallel()
	failModes(t, func(t *testing.T, closed bool) {
		c := newClock()
		primary := &flaky{}
		reg := prometheus.NewRegistry()
		var logs bytes.Buffer
		f, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{
			Primary:      primary,
			Fallback:     throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now}),
			FailClosed:   closed,
			Cooldown:     time.Second,
			Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
			RedisMetrics: redisMetrics(t, reg),
			Now:          c.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		lim := throttle.Limit{Rate: 1, Burst: 2}

		if d, err := f.Allow(ctx, "k", lim, 1); err != nil || d.Remaining != 1000 {
			t.Fatalf("healthy: %+v, %v; want the primary's answer", d, err)
		}
		primary.set(true)
		for i := range 3 {
			d, err := f.Allow(ctx, "k", lim, 1)
			switch {
			case closed && !errors.Is(err, throttle.ErrUnavailable):
				t.Fatalf("down, call %d: err %v, want ErrUnavailable", i, err)
			case !closed && err != nil:
				t.Fatalf("down, call %d: %v", i, err)
			case !closed && d.Allowed != min(1, 2-i) && i < 2:
				t.Fatalf("down, call %d: allowed %d from the local bucket of 2", i, d.Allowed)
			}
		}
		if primary.calls != 2 {
			t.Errorf("primary asked %d times, want 2: once healthy, once more before the cooldown", primary.calls)
		}
		if got := gauge(t, reg, "fairq_redis_degraded"); got != 1 {
			t.Errorf("fairq_redis_degraded = %v while down, want 1", got)
		}
		primary.set(false)
		c.Advance(time.Second)
		if d, err := f.Allow(ctx, "k", lim, 1); err != nil || d.Remaining != 1000 {
			t.Fatalf("after the cooldown: %+v, %v; want the primary's answer", d, err)
		}
		checkRecovered(t, reg, logs.String(), closed, 3.0)
	})
}

func TestFailoverCallerCancelIsNotAnOutage(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	f, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{Primary: cancelled{}, RedisMetrics: redisMetrics(t, reg)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Allow(ctx, "k", throttle.Limit{Rate: 1, Burst: 1}, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if got := gauge(t, reg, "fairq_redis_degraded"); got != 0 {
		t.Errorf("degraded after a cancelled caller")
	}
}

type cancelled struct{}

func (cancelled) Allow(ctx context.Context, _ string, _ throttle.Limit, _ int) (throttle.Decision, error) {
	return throttle.Decision{}, ctx.Err()
}

// gauge returns the value of the ratelimit component's series of a metric.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "component" && lp.GetValue() == "ratelimit" {
					if g := m.GetGauge(); g != nil {
						return g.GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{component=ratelimit}", name)
	return 0
}
