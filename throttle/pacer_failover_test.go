package throttle_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/throttle"
)

// flakyPacer is a primary pacer that fails while down is set, and
// otherwise answers a wait of an hour, which no local turn is.
type flakyPacer struct {
	outage
}

func (f *flakyPacer) Reserve(context.Context, string, float64, time.Duration, time.Duration) (time.Duration, error) {
	if err := f.call(); err != nil {
		return 0, err
	}
	return time.Hour, nil
}

// TestFailoverPacer: while the fleet's line fails, turns come from this
// process's own at its share of the rate, the primary left alone for
// the cooldown; once it answers, turns are the fleet's again.
func TestFailoverPacer(t *testing.T) {
	t.Parallel()
	c := newClock()
	primary := &flakyPacer{}
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	p, err := throttle.NewFailoverPacer(throttle.FailoverPacerConfig{
		Primary:       primary,
		FleetSizeFunc: func() int { return 2 },
		Component:     "ratelimit", // the label gauge() reads
		Cooldown:      time.Second,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		RedisMetrics:  redisMetrics(t, reg),
		Now:           c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := p.Reserve(ctx, "k", 10, 0, time.Minute); err != nil || d != time.Hour {
		t.Fatalf("healthy: %v, %v; want the primary's turn", d, err)
	}
	primary.set(true)
	// Rate 10 in a fleet of two: this process's turns 200 ms apart.
	for i, want := range []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond} {
		d, err := p.Reserve(ctx, "k", 10, 0, time.Minute)
		if err != nil || d != want {
			t.Fatalf("down, turn %d: %v, %v; want %v from the local line", i, d, err, want)
		}
	}
	if primary.calls != 2 {
		t.Errorf("the primary was asked %d times, want twice: not again during the cooldown", primary.calls)
	}
	if got := gauge(t, reg, "fairq_redis_degraded"); got != 1 {
		t.Errorf("fairq_redis_degraded = %v while down, want 1", got)
	}
	primary.set(false)
	c.Advance(time.Second)
	if d, err := p.Reserve(ctx, "k", 10, 0, time.Minute); err != nil || d != time.Hour {
		t.Fatalf("back: %v, %v; want the primary's turn", d, err)
	}
	if p.Degraded() {
		t.Error("still degraded once the primary answers")
	}
	checkRecovered(t, reg, logs.String(), false, 3)

	if _, err := throttle.NewFailoverPacer(throttle.FailoverPacerConfig{}); err == nil {
		t.Error("NewFailoverPacer without a primary: no error")
	}
}
