package harness

import (
	"context"
	"testing"
	"time"
)

// TestBurn checks that Burn burns about the CPU it is asked for, and never
// much more, and nothing when asked for nothing (the negative control: a
// burner that spins regardless fails the bound above).
func TestBurn(t *testing.T) {
	const span = 1500 * time.Millisecond
	for _, tt := range []struct {
		cores    float64
		min, max time.Duration
	}{
		// Asked for 0.5 cores over 1.5 s, 750 ms of CPU: at most that
		// and a burst per thread, with room for a slow clock read; at
		// least a third of it on a machine busy with other tests.
		{0.5, 250 * time.Millisecond, 850 * time.Millisecond},
		{0, 0, 10 * time.Millisecond},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), span)
		got := Burn(ctx, tt.cores)
		cancel()
		if got < tt.min || got > tt.max {
			t.Errorf("Burn(%g cores) over %v burnt %v, want %v to %v", tt.cores, span, got, tt.min, tt.max)
		}
	}
}
