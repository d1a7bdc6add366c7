package harness

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fairq/fairq/internal/chart"
)

// Colours: the quiet tenants take the cool and dark ones of the palette,
// the tenant that misbehaves a pale vermillion.
var (
	quietColors = []color.Color{
		chart.Blue,
		chart.SkyBlue,
		chart.BluishGreen,
		chart.ReddishPurple,
		chart.Orange,
		chart.Black,
		color.RGBA{0x8c, 0x7e, 0x00, 0xff}, // dark yellow
		color.RGBA{0x66, 0x66, 0x66, 0xff}, // grey
	}
	colorOtherPale = color.RGBA{0xf0, 0xa8, 0x80, 0xff} // pale vermillion
	colorGrey      = color.RGBA{0x90, 0x90, 0x90, 0xff}
	colorShade     = color.RGBA{0xee, 0xe0, 0xe0, 0xff}
)

// minLatency is the floor of the log axis: latencies below it are drawn on
// it.
const minLatency = time.Millisecond

// bucketOf returns the chart's bucket of send time for a scenario: a
// second for the short ones, two seconds around an outage, three
// otherwise, so that a quiet tenant's p95 stands on a dozen messages or
// more.
func bucketOf(sc Scenario) time.Duration {
	switch {
	case sc.Duration <= 20*time.Second:
		return time.Second
	case sc.Outage.For > 0:
		return 2 * time.Second
	}
	return 3 * time.Second
}

// WriteChart draws the scenario as a PNG: one panel per mode, side by
// side on the same latency scale, each with every tenant's p95
// enqueue-to-start latency by time of sending, the quiet tenants'
// baseline p95 dashed, and the outage shaded.
func (s *ScenarioResult) WriteChart(w io.Writer) error {
	ms := s.modes()
	if len(ms) == 0 {
		return fmt.Errorf("%w: no runs to draw", ErrInvalidOptions)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	series := make(map[Mode][]tenantSeries, len(ms))
	for _, m := range ms {
		series[m] = s.Runs[m].series(bucketOf(s.Scenario))
		for _, ts := range series[m] {
			for _, p := range ts.points {
				lo, hi = min(lo, p.Y), max(hi, p.Y)
			}
		}
		if b, ok := s.baselineP95(m); ok {
			v := max(b, minLatency).Seconds()
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = minLatency.Seconds(), 1
	}
	lo, hi = lo/1.5, hi*1.5
	// The depth panels span the load and the longest drain after it, so
	// that the modes line up.
	depthMax, xMax := 0, s.Scenario.Duration.Seconds()
	for _, m := range ms {
		for _, d := range s.Runs[m].Depths {
			depthMax = max(depthMax, d.Live, d.Overflow, d.Backlog, d.DLQ)
			xMax = max(xMax, d.At.Seconds())
		}
	}
	const panelW, legendW, latencyH, depthH = 6.5 * vg.Inch, 2.6 * vg.Inch, 6 * vg.Inch, 2.6 * vg.Inch
	height := latencyH
	if depthMax > 0 {
		height += depthH
	}
	width := panelW*vg.Length(len(ms)) + legendW
	f := chart.NewFigure(width, height, 96)
	// Each mode's column: the latencies on top, the depths beneath.
	for i, m := range ms {
		x0, x1 := panelW*vg.Length(i), panelW*vg.Length(i+1)
		p, err := s.panel(m, series[m], lo, hi)
		if err != nil {
			return err
		}
		f.Draw(p, chart.Rect{X0: x0, X1: x1, Y1: latencyH}, chart.Margin{Left: vg.Points(10), Right: vg.Points(6), Bottom: vg.Points(8), Top: vg.Points(8)})
		if depthMax > 0 {
			d, err := s.depthPanel(m, depthMax, xMax)
			if err != nil {
				return err
			}
			f.Draw(d, chart.Rect{X0: x0, Y0: latencyH, X1: x1, Y1: height}, chart.Margin{Left: vg.Points(10), Right: vg.Points(6), Bottom: vg.Points(8), Top: vg.Points(4)})
		}
	}
	last := ms[len(ms)-1]
	leg, err := s.legend(last, series[last], depthMax > 0)
	if err != nil {
		return err
	}
	f.Draw(leg, chart.Rect{X0: panelW * vg.Length(len(ms)), X1: width, Y1: height}, chart.Margin{Left: vg.Points(4), Right: vg.Points(4), Bottom: vg.Points(8), Top: vg.Points(40)})
	return f.WritePNG(w)
}

// panel draws one mode.
func (s *ScenarioResult) panel(m Mode, series []tenantSeries, lo, hi float64) (*plot.Plot, error) {
	r := s.Runs[m]
	sc := s.Scenario
	p := plot.New()
	q := r.Quiet.Latency
	title := fmt.Sprintf("%s\nquiet tenants: p95 %s", m.Title(), fmtDur(q.P95))
	if b, ok := s.baselineP95(m); ok {
		title += fmt.Sprintf(" (%s the baseline)", fmtRatio(float64(q.P95)/float64(max(b, time.Microsecond))))
	}
	chart.Title(p, title, vg.Points(15))
	p.X.Label.Text = "time of sending (s since the load began)"
	// Short: gonum pads the top of the plot by about the part of a long
	// vertical label that would stand above the middle.
	p.Y.Label.Text = "p95 latency (log scale)"
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(12)
	}
	chart.LogSeconds(&p.Y, chart.SparseTicks)
	p.X.Min, p.X.Max = 0, sc.Duration.Seconds()
	p.Y.Min, p.Y.Max = lo, hi
	p.Add(plotter.NewGrid())

	if sc.Outage.For > 0 && !r.OutageStart.IsZero() {
		from, to := r.since(r.OutageStart).Seconds(), r.since(r.OutageEnd).Seconds()
		shade, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: lo}, {X: to, Y: lo}, {X: to, Y: hi}, {X: from, Y: hi}})
		if err != nil {
			return nil, err
		}
		shade.Color, shade.LineStyle.Width = colorShade, 0
		p.Add(shade)
		label, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: (from + to) / 2, Y: lo * 1.3}}, Labels: []string{"workers stopped"}})
		if err != nil {
			return nil, err
		}
		label.TextStyle[0].XAlign = draw.XCenter
		label.TextStyle[0].Font.Size = vg.Points(12)
		p.Add(label)
	}
	if b, ok := s.baselineP95(m); ok {
		y := max(b, minLatency).Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: sc.Duration.Seconds(), Y: y}})
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.Dashes = colorGrey, vg.Points(2), []vg.Length{vg.Points(6), vg.Points(4)}
		p.Add(l)
	}
	// The misbehaving tenant first, wide and pale, so that quiet tenants
	// sharing its latency still show on top of it.
	lines := tenantLines(series)
	for pass := range 2 {
		for i, l := range lines {
			if len(l.XYs) > 0 && (series[i].role == RoleQuiet) == (pass == 1) {
				p.Add(l)
			}
		}
	}
	return p, nil
}

// Colours of the queue depths.
var (
	colorLive     = chart.Blue
	colorOverflow = chart.Orange
	colorBacklog  = chart.ReddishPurple
	colorDLQ      = chart.Black
)

// depthLines returns the lines of the queue depths of r, in the legend's
// order.
func depthLines(r *Result) []*plotter.Line {
	kinds := []struct {
		c   color.Color
		get func(DepthSample) int
	}{
		{colorLive, func(d DepthSample) int { return d.Live }},
		{colorOverflow, func(d DepthSample) int { return d.Overflow }},
		{colorBacklog, func(d DepthSample) int { return d.Backlog }},
		{colorDLQ, func(d DepthSample) int { return d.DLQ }},
	}
	var ls []*plotter.Line
	for _, k := range kinds {
		l := &plotter.Line{LineStyle: draw.LineStyle{Color: k.c, Width: vg.Points(2)}}
		if r != nil {
			for _, d := range r.Depths {
				l.XYs = append(l.XYs, plotter.XY{X: d.At.Seconds(), Y: float64(k.get(d))})
			}
		}
		ls = append(ls, l)
	}
	ls[3].Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	return ls
}

// depthPanel draws the messages in each kind of queue over the run, the
// drain after the load included.
func (s *ScenarioResult) depthPanel(m Mode, depthMax int, xMax float64) (*plot.Plot, error) {
	r := s.Runs[m]
	p := plot.New()
	p.X.Label.Text = "time (s since the load began; the grey line is its end)"
	p.Y.Label.Text = "messages queued"
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(12)
	}
	p.Y.Min, p.Y.Max = 0, float64(depthMax)*1.05
	p.X.Tick.Marker, p.Y.Tick.Marker = chart.WholeTicks{}, chart.WholeTicks{}
	p.X.Min, p.X.Max = 0, xMax
	p.Add(plotter.NewGrid())
	end := s.Scenario.Duration.Seconds()
	l, err := plotter.NewLine(plotter.XYs{{X: end, Y: 0}, {X: end, Y: p.Y.Max}})
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = colorGrey, vg.Points(1.5)
	p.Add(l)
	for _, l := range depthLines(r) {
		if len(l.XYs) > 0 {
			p.Add(l)
		}
	}
	return p, nil
}

// tenantLines returns the line of each tenant, coloured by its order.
func tenantLines(series []tenantSeries) []*plotter.Line {
	var ls []*plotter.Line
	quiet := 0
	for _, ts := range series {
		l := &plotter.Line{XYs: ts.points, LineStyle: plotter.DefaultLineStyle}
		if ts.role == RoleQuiet {
			l.Color, l.Width = quietColors[quiet%len(quietColors)], vg.Points(1.6)
			quiet++
		} else {
			l.Color, l.Width = colorOtherPale, vg.Points(6)
		}
		ls = append(ls, l)
	}
	return ls
}

// legend draws the legend of every panel on its own: the tenants with
// their shards in the first mode, and the baseline.
func (s *ScenarioResult) legend(m Mode, series []tenantSeries, depths bool) (*plot.Plot, error) {
	p := plot.New()
	p.HideAxes()
	chart.LegendTopLeft(p, vg.Points(12))
	p.Legend.Padding = vg.Points(3)
	if _, ok := s.baselineP95(m); ok {
		l := &plotter.Line{LineStyle: draw.LineStyle{Color: colorGrey, Width: vg.Points(2), Dashes: []vg.Length{vg.Points(6), vg.Points(4)}}}
		p.Legend.Add("quiet tenants'\nbaseline p95", l)
	}
	queues, _ := m.pool()
	for i, l := range tenantLines(series) {
		ts := series[i]
		label := fmt.Sprintf("%s (%s)", ts.id, ts.role)
		if queues > 1 {
			label = fmt.Sprintf("%s %s", ts.id, ts.shard)
		}
		p.Legend.Add(label, l)
	}
	if depths {
		p.Legend.Add(" ", &plotter.Line{})
		for i, l := range depthLines(nil) {
			p.Legend.Add([]string{"live queues", "overflow queue", "backlog queue", "dead-letter queue"}[i], l)
		}
	}
	return p, nil
}

// tenantSeries is one tenant's p95 by bucket of send time.
type tenantSeries struct {
	id, shard string
	role      Role
	points    plotter.XYs
}

// series returns each tenant's p95 latency per bucket of send time, in
// seconds, at the middle of the bucket; buckets without a delivered message
// are left out.
func (r *Result) series(bucket time.Duration) []tenantSeries {
	n := int(math.Ceil(float64(r.Scenario.Duration) / float64(bucket)))
	out := make([]tenantSeries, 0, len(r.Tenants))
	for _, st := range r.Tenants {
		buckets := make([][]time.Duration, n)
		for _, m := range r.Messages {
			if m.Tenant != st.ID || m.Latency < 0 || m.Sent < 0 {
				continue
			}
			if i := int(m.Sent / bucket); i < n {
				buckets[i] = append(buckets[i], m.Latency)
			}
		}
		ts := tenantSeries{id: st.ID, shard: st.Shard, role: st.Role}
		for i, b := range buckets {
			if len(b) == 0 {
				continue
			}
			x := (time.Duration(i)*bucket + bucket/2).Seconds()
			ts.points = append(ts.points, plotter.XY{X: x, Y: max(quantiles(b).P95, minLatency).Seconds()})
		}
		out = append(out, ts)
	}
	// Quiet tenants first, so that the misbehaving one draws on top.
	slices.SortStableFunc(out, func(a, b tenantSeries) int {
		return boolInt(a.role != RoleQuiet) - boolInt(b.role != RoleQuiet)
	})
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
