package chart

import (
	"bytes"
	"image/color"
	"image/png"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    float64
		want string
	}{
		{0.001, "1 ms"},
		{0.0025, "3 ms"},
		{0.5, "500 ms"},
		{1, "1 s"},
		{30, "30 s"},
		{60, "1 min"},
		{1800, "30 min"},
		{3600, "1 h"},
		{72000, "20 h"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			if got := Seconds(tt.s); got != tt.want {
				t.Errorf("Seconds(%v) = %q, want %q", tt.s, got, tt.want)
			}
		})
	}
}

func TestLogSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ticks    Ticks
		min, max float64
		want     map[float64]string // every tick, with its label
	}{
		{"dense, narrow axis: every tick labelled", DenseTicks, 0.15, 3,
			map[float64]string{0.2: "200 ms", 0.5: "500 ms", 1: "1 s", 2: "2 s"}},
		{"dense, wide axis: powers of ten, minutes and hours labelled", DenseTicks, 0.05, 700,
			map[float64]string{0.05: "", 0.1: "100 ms", 0.2: "", 0.5: "", 1: "1 s", 2: "", 5: "", 10: "10 s", 20: "", 30: "", 60: "1 min", 120: "", 300: "", 600: "10 min"}},
		{"sparse, wide axis: every tick labelled", SparseTicks, 0.002, 40,
			map[float64]string{0.003: "3 ms", 0.01: "10 ms", 0.03: "30 ms", 0.1: "100 ms", 0.3: "300 ms", 1: "1 s", 3: "3 s", 10: "10 s", 30: "30 s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := plot.New()
			LogSeconds(&p.Y, tt.ticks)
			if _, ok := p.Y.Scale.(plot.LogScale); !ok {
				t.Errorf("scale %T, want plot.LogScale", p.Y.Scale)
			}
			got := map[float64]string{}
			for _, tk := range p.Y.Tick.Marker.Ticks(tt.min, tt.max) {
				got[tk.Value] = tk.Label
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ticks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWholeTicks(t *testing.T) {
	t.Parallel()
	ticks := WholeTicks{}.Ticks(0, 2.5)
	labelled := 0
	for _, tk := range ticks {
		if tk.Label == "" {
			continue
		}
		labelled++
		n, err := strconv.Atoi(tk.Label)
		if err != nil || float64(n) != tk.Value {
			t.Errorf("tick at %v labelled %q, want the whole number", tk.Value, tk.Label)
		}
	}
	if labelled < 2 {
		t.Errorf("%d labelled ticks in %v, want at least 2", labelled, ticks)
	}
}

// TestFigure: a plot drawn in a Rect lands there, measured from the
// top-left corner, and the rest of the figure stays white.
func TestFigure(t *testing.T) {
	t.Parallel()
	const dpi = 100
	f := NewFigure(2*vg.Inch, vg.Inch, dpi)
	if w, h := f.Size(); w != 2*vg.Inch || h != vg.Inch {
		t.Errorf("Size() = %v, %v, want 2in, 1in", w, h)
	}
	// A plot that is all black: a square filling its axes, no axes drawn.
	p := plot.New()
	p.HideAxes()
	sq, err := plotter.NewPolygon(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}, {X: 1, Y: 1}, {X: 0, Y: 1}})
	if err != nil {
		t.Fatal(err)
	}
	sq.Color, sq.LineStyle.Width = color.Black, 0
	p.Add(sq)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	// The bottom half of the right half.
	f.Draw(p, Rect{X0: vg.Inch, Y0: vg.Inch / 2, X1: 2 * vg.Inch, Y1: vg.Inch}, Margin{})

	var buf bytes.Buffer
	if err := f.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 2*dpi || b.Dy() != dpi {
		t.Fatalf("image %v, want %d×%d", b, 2*dpi, dpi)
	}
	tests := []struct {
		name  string
		x, y  int
		black bool
	}{
		{"top left", 50, 25, false},
		{"bottom left", 50, 75, false},
		{"top right", 150, 25, false},
		{"bottom right", 150, 75, true},
	}
	for _, tt := range tests {
		r, g, b, a := img.At(tt.x, tt.y).RGBA()
		black := r == 0 && g == 0 && b == 0 && a == 0xffff
		white := r == 0xffff && g == 0xffff && b == 0xffff && a == 0xffff
		if tt.black && !black || !tt.black && !white {
			t.Errorf("%s (%d, %d): colour %v, want black %v (white otherwise)", tt.name, tt.x, tt.y, img.At(tt.x, tt.y), tt.black)
		}
	}
}
