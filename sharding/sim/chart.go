package sim

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fairq/fairq/internal/chart"
)

// Colours of the chart: a quiet tenant's by how much of its shard it
// shares with the noisy tenants, a strategy's line by how much it shares.
var (
	colorNone    = chart.Blue
	colorPartial = chart.Orange
	colorWhole   = chart.Vermillion
	colorGrey    = color.RGBA{0x60, 0x60, 0x60, 0xff}

	chartLabels = [...]string{"one shared\nqueue", "hash to\none queue", "shuffle shard,\nrandom queue", "shuffle shard,\nshallowest queue"}

	strategyColors = [...]color.Color{
		colorWhole,          // shared
		chart.ReddishPurple, // hash
		colorPartial,        // shard-random
		colorNone,           // shard-shallowest
	}
)

// WritePNG draws the result as a PNG: on the left, every quiet tenant's p99
// under each strategy, coloured by how much of its shard it shares with the
// noisy tenants, against the baseline; on the right, the median quiet
// tenant's p99 by time of sending, which climbs without end where the
// noisy tenants' backlog is in the way.
func (r *Result) WritePNG(w io.Writer) error {
	left, err := r.tenantPlot()
	if err != nil {
		return err
	}
	right, err := r.timePlot()
	if err != nil {
		return err
	}
	const width, height = 15 * vg.Inch, 6.5 * vg.Inch
	f := chart.NewFigure(width, height, 110)
	// The left panel takes three fifths of the width.
	const split = width * 3 / 5
	f.Draw(left, chart.Rect{X1: split, Y1: height}, chart.Margin{Left: vg.Points(8), Right: vg.Points(12), Bottom: vg.Points(8), Top: vg.Points(8)})
	f.Draw(right, chart.Rect{X0: split, X1: width, Y1: height}, chart.Margin{Left: vg.Points(12), Right: vg.Points(12), Bottom: vg.Points(8), Top: vg.Points(8)})
	return f.WritePNG(w)
}

func (r *Result) tenantPlot() (*plot.Plot, error) {
	c := r.Config
	p := plot.New()
	noisy := "one tenant"
	if c.Noisy > 1 {
		noisy = fmt.Sprintf("%d tenants", c.Noisy)
	}
	theNoisy, _ := c.theNoisy()
	chart.Title(p, fmt.Sprintf("p99 latency of each quiet tenant, with %s at %s× a quiet one's rate\nN = %d queues, shards of k = %d, %d quiet tenants, consumers at %s× the quiet load",
		noisy, num(c.NoisyFactor), c.Queues, c.ShardSize, c.Quiet, num(c.Capacity)), vg.Points(13))
	axisFonts(p)
	p.Y.Label.Text = "p99 latency, send to end of service (log scale)"
	chart.LogSeconds(&p.Y, chart.DenseTicks)
	var names []string
	for _, run := range r.Runs {
		names = append(names, chartLabels[run.Strategy])
	}
	p.NominalX(names...)
	p.X.Tick.Label.Font.Size = vg.Points(12)
	p.X.Min, p.X.Max = -0.6, float64(len(r.Runs))-0.4
	p.Add(plotter.NewGrid())

	classes := []struct {
		name  string
		label string
		color color.Color
		glyph draw.GlyphDrawer
	}{
		{classNone, "no queue in common with " + theNoisy, colorNone, draw.CircleGlyph{}},
		{classPartial, "some queues in common", colorPartial, draw.TriangleGlyph{}},
		{classWhole, "whole shard (or queue) in common", colorWhole, draw.SquareGlyph{}},
	}
	quiet := c.Quiet
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, cl := range classes {
		var pts plotter.XYs
		for x, run := range r.Runs {
			for i, l := range run.quiet() {
				if l.class() != cl.name {
					continue
				}
				// Spread the tenants across the strategy's column.
				dx := -0.32 + 0.64*(float64(i)+0.5)/float64(quiet)
				pts = append(pts, plotter.XY{X: float64(x) + dx, Y: l.P99})
				lo, hi = min(lo, l.P99, l.BaselineP99), max(hi, l.P99)
			}
		}
		if len(pts) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: cl.color, Radius: vg.Points(4), Shape: cl.glyph}
		if quiet > 100 {
			s.GlyphStyle.Radius = vg.Points(2)
		}
		p.Add(s)
		p.Legend.Add(cl.label, s)
	}
	// Each strategy's baseline and the hurt threshold over it.
	for x, run := range r.Runs {
		base := median(field(run.quiet(), func(l Latency) float64 { return l.BaselineP99 }))
		for _, ln := range []struct {
			y      float64
			dashed bool
		}{{base, false}, {base * c.Hurt, true}} {
			l, err := plotter.NewLine(plotter.XYs{{X: float64(x) - 0.42, Y: ln.y}, {X: float64(x) + 0.42, Y: ln.y}})
			if err != nil {
				return nil, err
			}
			l.Color = colorGrey
			l.Width = vg.Points(1.5)
			if ln.dashed {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
				l.Width = vg.Points(1)
			}
			p.Add(l)
			if x == 0 {
				label := "p99 without " + theNoisy + " (median)"
				if ln.dashed {
					label = fmt.Sprintf("hurt above %s× that", num(c.Hurt))
				}
				p.Legend.Add(label, l)
			}
		}
	}
	// Over each column, how many quiet tenants were hurt, and how many the
	// combinatorics expects.
	var xys plotter.XYs
	var labels []string
	for x, run := range r.Runs {
		exp, _ := run.ExpectedHurt.Float64()
		xys = append(xys, plotter.XY{X: float64(x), Y: hi * 2.2})
		labels = append(labels, fmt.Sprintf("hurt: %d of %d\n(expected %s)", run.QuietHurt, quiet, expected(exp*float64(quiet))))
	}
	text, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range text.TextStyle {
		text.TextStyle[i].Font.Size = vg.Points(11.5)
		text.TextStyle[i].XAlign = draw.XCenter
	}
	p.Add(text)
	p.Y.Min, p.Y.Max = lo/1.5, hi*80 // room for the counts and the legend
	styleLegend(p)
	return p, nil
}

func (r *Result) timePlot() (*plot.Plot, error) {
	c := r.Config
	p := plot.New()
	theNoisy, _ := c.theNoisy()
	chart.Title(p, "p99 of the median quiet tenant, by time of sending\n(every message is served: the queues drain after the run)", vg.Points(13))
	axisFonts(p)
	p.X.Label.Text = "minute of the run in which the message was sent"
	p.Y.Label.Text = "p99 latency (log scale)"
	chart.LogSeconds(&p.Y, chart.DenseTicks)
	p.Add(plotter.NewGrid())
	step := c.Duration.Minutes() / float64(c.Windows)
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, run := range r.Runs {
		var pts plotter.XYs
		for w, v := range run.WindowP99 {
			pts = append(pts, plotter.XY{X: (float64(w) + 0.5) * step, Y: v})
			lo, hi = min(lo, v), max(hi, v)
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		col := strategyColors[int(run.Strategy)%len(strategyColors)]
		l.Color, l.Width = col, vg.Points(2)
		s.Color, s.Radius = col, vg.Points(3)
		// Later strategies draw thinner so that overlapping lines show.
		l.Width = vg.Points(3.5 - 0.6*float64(i))
		p.Add(l, s)
		p.Legend.Add(run.Strategy.Title(), l, s)
	}
	if len(r.Runs) > 0 {
		var pts plotter.XYs
		for w, v := range r.Runs[0].BaselineWindowP99 {
			pts = append(pts, plotter.XY{X: (float64(w) + 0.5) * step, Y: v})
			lo = min(lo, v)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = colorGrey, vg.Points(1.5), []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("any strategy, without "+theNoisy, l)
	}
	p.X.Min, p.X.Max = 0, c.Duration.Minutes()
	p.Y.Min, p.Y.Max = lo/1.5, hi*15
	styleLegend(p)
	return p, nil
}

func styleLegend(p *plot.Plot) {
	chart.LegendTopLeft(p, vg.Points(11.5))
	p.Legend.XOffs = vg.Points(8)
	p.Legend.YOffs = -vg.Points(4)
	p.Legend.Padding = vg.Points(2)
}

// axisFonts sets the sizes of the axis labels and of the latency axis's
// ticks.
func axisFonts(p *plot.Plot) {
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Tick.Label.Font.Size = vg.Points(11)
}
