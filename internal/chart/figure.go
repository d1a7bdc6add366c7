package chart

import (
	"image/color"
	"io"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Figure is a PNG image on which plots are laid out side by side. Its
// background is white: PNG viewers in dark mode show transparency as
// black.
type Figure struct {
	img *vgimg.Canvas
	dc  draw.Canvas
}

// NewFigure returns a white figure of the given size and resolution.
func NewFigure(width, height vg.Length, dpi int) *Figure {
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	return &Figure{img: img, dc: draw.New(img)}
}

// Rect is a part of a figure: from X0 to X1 across and from Y0 to Y1 down,
// measured from the figure's top-left corner.
type Rect struct {
	X0, Y0, X1, Y1 vg.Length
}

// Margin is the room left between a plot and the edges of its Rect.
type Margin struct {
	Left, Right, Bottom, Top vg.Length
}

// Size returns the figure's width and height.
func (f *Figure) Size() (width, height vg.Length) {
	return f.dc.Max.X - f.dc.Min.X, f.dc.Max.Y - f.dc.Min.Y
}

// Draw draws p in r, inside the margin m.
func (f *Figure) Draw(p *plot.Plot, r Rect, m Margin) {
	c := f.dc
	c.Rectangle = vg.Rectangle{
		Min: vg.Point{X: f.dc.Min.X + r.X0, Y: f.dc.Max.Y - r.Y1},
		Max: vg.Point{X: f.dc.Min.X + r.X1, Y: f.dc.Max.Y - r.Y0},
	}
	p.Draw(draw.Crop(c, m.Left, -m.Right, m.Bottom, -m.Top))
}

// WritePNG writes the figure as a PNG.
func (f *Figure) WritePNG(w io.Writer) error {
	_, err := vgimg.PngCanvas{Canvas: f.img}.WriteTo(w)
	return err
}

// Title sets p's title: bold, of the given size, with room beneath it.
func Title(p *plot.Plot, text string, size vg.Length) {
	p.Title.Text = text
	p.Title.TextStyle.Font.Size = size
	p.Title.TextStyle.Font.Weight = xfont.WeightBold
	p.Title.Padding = vg.Points(8)
}

// LegendTopLeft puts p's legend in its top-left corner, with text of the
// given size and samples wide enough to tell a dashed line from a solid
// one.
func LegendTopLeft(p *plot.Plot, size vg.Length) {
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.ThumbnailWidth = vg.Points(28)
	p.Legend.TextStyle.Font.Size = size
}
