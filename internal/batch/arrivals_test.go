package batch

import (
	"math"
	"testing"
	"time"
)

func TestWorthWaiting(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name    string
		recent  float64 // items over the horizon
		horizon time.Duration
		left    time.Duration
		want    bool
	}{
		{"nothing seen", 0, 100 * ms, 10 * ms, false},
		{"1,000 items a second, 5 ms left: five expected", 100, 100 * ms, 5 * ms, true},
		{"125 a second, 2 ms left: a quarter expected", 12.5, 100 * ms, 2 * ms, true},
		{"100 a second, 2 ms left: a fifth expected", 10, 100 * ms, 2 * ms, false},
		{"10 a second, 10 ms left: a tenth expected", 1, 100 * ms, 10 * ms, false},
		{"a busy key at the end of its window", 1000, 100 * ms, 0, false},
		{"past the end of its window", 1000, 100 * ms, -ms, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := worthWaiting(tt.recent, tt.horizon, tt.left); got != tt.want {
				t.Errorf("worthWaiting(%v, %v, %v) = %t, want %t", tt.recent, tt.horizon, tt.left, got, tt.want)
			}
		})
	}
}

// TestArrivals: at a steady rate the count settles at about rate × horizon,
// and it fades by e every horizon without items.
func TestArrivals(t *testing.T) {
	const horizon = 100 * time.Millisecond
	start := time.Unix(0, 0)
	for _, gap := range []time.Duration{time.Millisecond, 8 * time.Millisecond, 50 * time.Millisecond} {
		var a arrivals
		now := start
		for range 2000 {
			a.add(now, horizon)
			now = now.Add(gap)
		}
		// Just before the next item: Σ e^(-k·gap/horizon), k ≥ 1.
		before := a.recent(now, horizon)
		want := 1 / (math.Exp(float64(gap)/float64(horizon)) - 1)
		if math.Abs(before-want) > 1e-6*want {
			t.Errorf("gap %v: count %.4f before an item, want %.4f", gap, before, want)
		}
		// That is about rate × horizon, less half an item.
		if approx := float64(horizon)/float64(gap) - 0.5; math.Abs(before-approx) > 0.05 {
			t.Errorf("gap %v: count %.4f before an item, want about %.4f", gap, before, approx)
		}
		if faded := a.recent(now.Add(horizon), horizon); math.Abs(faded-before/math.E) > 1e-6*before {
			t.Errorf("gap %v: %.4f a horizon later, want %.4f", gap, faded, before/math.E)
		}
	}
	var empty arrivals
	if got := empty.recent(start.Add(time.Hour), horizon); got != 0 {
		t.Errorf("no item seen: %v", got)
	}
}

func TestRateHorizon(t *testing.T) {
	for window, want := range map[time.Duration]time.Duration{
		0:                      minRateHorizon,
		2 * time.Millisecond:   minRateHorizon,
		50 * time.Millisecond:  500 * time.Millisecond,
		200 * time.Millisecond: 2 * time.Second,
	} {
		if got := rateHorizon(window); got != want {
			t.Errorf("rateHorizon(%v) = %v, want %v", window, got, want)
		}
	}
}

func TestQuietAfter(t *testing.T) {
	const horizon = 100 * time.Millisecond
	for _, tt := range []struct {
		recent float64
		want   time.Duration
	}{
		{0, 24 * time.Hour},         // no rate: only the window ends the wait
		{100, 3 * time.Millisecond}, // 1,000 a second: three gaps of 1 ms
		{12.5, 24 * time.Millisecond},
	} {
		if got := quietAfter(tt.recent, horizon); got != tt.want {
			t.Errorf("quietAfter(%v, %v) = %v, want %v", tt.recent, horizon, got, tt.want)
		}
	}
}
