package throttle_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/throttle"
)

func TestPacer(t *testing.T) {
	t.Parallel()
	type step struct {
		advance  time.Duration
		key      string
		rate     float64
		earliest time.Duration
		want     time.Duration
	}
	const horizon = 5 * time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{"turns at the rate", []step{
			{rate: 2, want: 0}, {rate: 2, want: 500 * time.Millisecond}, {rate: 2, want: time.Second},
		}},
		{"not before earliest", []step{
			{rate: 10, earliest: time.Second, want: time.Second},
			{rate: 10, want: 1100 * time.Millisecond},
			{rate: 10, earliest: 3 * time.Second, want: 3 * time.Second},
		}},
		{"time passing frees turns", []step{
			{rate: 1, want: 0}, {rate: 1, want: time.Second},
			{advance: 10 * time.Second, rate: 1, want: 0},
		}},
		{"keys are apart", []step{
			{key: "a", rate: 1, want: 0}, {key: "a", rate: 1, want: time.Second}, {key: "b", rate: 1, want: 0},
		}},
		{"capped at the horizon without pushing later turns", []step{
			{rate: 0.5, want: 0}, {rate: 0.5, want: 2 * time.Second}, {rate: 0.5, want: 4 * time.Second},
			{rate: 0.5, want: horizon}, {rate: 0.5, want: horizon},
			{advance: time.Second, rate: 0.5, want: 5 * time.Second},
		}},
		{"no rate, no wait", []step{{rate: 0, want: 0}, {rate: 0, earliest: time.Second, want: time.Second}}},
		{"a changed rate spaces the next turns", []step{
			{rate: 1, want: 0}, {rate: 10, want: time.Second}, {rate: 10, want: 1100 * time.Millisecond},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClock()
			p := throttle.NewPacer(throttle.PacerConfig{Now: c.Now})
			var got, want []time.Duration
			for _, s := range tt.steps {
				c.Advance(s.advance)
				got = append(got, p.Reserve(s.key, s.rate, s.earliest, horizon))
				want = append(want, s.want)
			}
			if diff := cmp.Diff(want, got, approxDuration); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func ExamplePacer() {
	p := throttle.NewPacer(throttle.PacerConfig{})
	for range 4 {
		// Work refused by a limit of 2 a second, put off until its turn.
		fmt.Println(p.Reserve("acme", 2, 0, time.Minute).Round(100 * time.Millisecond))
	}
	// Output:
	// 0s
	// 500ms
	// 1s
	// 1.5s
}
