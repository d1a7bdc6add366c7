package chart

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
)

// Ticks are where the ticks of a logarithmic axis of seconds stand.
type Ticks struct {
	At []float64 // seconds
	// Labelled are the ticks that keep a label when the axis spans a
	// factor of 100 or more, so that the labels do not run into each
	// other; nil keeps every label.
	Labelled []float64
}

var (
	// DenseTicks stand at 1, 2 and 5 (and 30 s, 2 and 30 min) from 1 ms
	// to 20 h, labelled on a wide axis at each power of ten below a
	// minute and at 1 and 10 minutes and hours: for latencies that run
	// from milliseconds to hours, as the simulator's do.
	DenseTicks = Ticks{
		At:       []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 18000, 36000, 72000},
		Labelled: []float64{0.001, 0.01, 0.1, 1, 10, 60, 600, 3600, 36000},
	}
	// SparseTicks stand at 1 and 3 (and 1 and 3 min) from 1 ms to 1 h,
	// every one labelled: for the load test charts, whose latencies stay
	// within seconds to minutes.
	SparseTicks = Ticks{
		At: []float64{0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 60, 180, 600, 1800, 3600},
	}
)

// LogSeconds makes a an axis of seconds on a logarithmic scale, with ticks
// at t labelled as durations.
func LogSeconds(a *plot.Axis, t Ticks) {
	a.Scale = plot.LogScale{}
	a.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		var ticks []plot.Tick
		for _, v := range t.At {
			if v < min || v > max {
				continue
			}
			label := ""
			if t.Labelled == nil || max/min < 100 || slices.Contains(t.Labelled, v) {
				label = Seconds(v)
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
		return ticks
	})
}

// Seconds formats a number of seconds as a tick label: "5 ms", "2 s",
// "10 min", "1 h".
func Seconds(s float64) string {
	switch {
	case s < 1:
		return fmt.Sprintf("%g ms", math.Round(s*1000))
	case s < 60:
		return fmt.Sprintf("%g s", s)
	case s < 3600:
		return fmt.Sprintf("%g min", s/60)
	}
	return fmt.Sprintf("%g h", s/3600)
}

// WholeTicks are gonum's default ticks labelled as whole numbers, for
// counts.
type WholeTicks struct{}

var _ plot.Ticker = WholeTicks{}

// Ticks returns the ticks between min and max.
func (WholeTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = fmt.Sprintf("%.0f", ticks[i].Value)
		}
	}
	return ticks
}
