package throttle_test

import (
	"context"
	"testing"

	"github.com/fairq/fairq/throttle"
)

func TestScaledLimiter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		factor    func() float64
		wantBurst int
	}{
		{"half of a fleet of two", func() float64 { return throttle.Share(2) }, 5},
		{"a fleet of one", func() float64 { return throttle.Share(1) }, 10},
		{"no fleet size yet", func() float64 { return throttle.Share(0) }, 10},
		{"no factor", nil, 10},
		{"nonsense factor", func() float64 { return -3 }, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			l := &throttle.ScaledLimiter{Limiter: throttle.NewLocalLimiter(throttle.LocalConfig{Now: c.Now}), FactorFunc: tt.factor}
			d, err := l.Allow(context.Background(), "k", throttle.Limit{Rate: 100, Burst: 10}, 100)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tt.wantBurst || d.Limit.Burst != tt.wantBurst {
				t.Errorf("allowed %d of a burst of %d, want %d of %d", d.Allowed, d.Limit.Burst, tt.wantBurst, tt.wantBurst)
			}
		})
	}
}
