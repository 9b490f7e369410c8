package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// errNoData reports a chart without a single point to draw.
var errNoData = errors.New("bench: nothing to plot")

// Series is one named line of a chart. A dashed series without a name
// (a theoretical curve) takes the colour of the series before it and has
// no entry in the legend.
type Series struct {
	Name   string
	X, Y   []float64
	Dashed bool
}

// Chart is a line chart with labelled axes (units in the labels).
type Chart struct {
	Title, X, Y string
	LogX, LogY  bool
	Series      []Series
	// Lines draws lines only, without a glyph at every point (for CDFs
	// of thousands of samples); the legend then goes to the bottom right.
	Lines bool
}

// plotSize is the size of every PNG.
const plotWidth, plotHeight = 7 * vg.Inch, 4.5 * vg.Inch

// Save draws c as a PNG file at path.
func (c Chart) Save(path string) error {
	p := newPlot(c.Title, c.X, c.Y)
	if c.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	if c.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	points, colour := 0, -1
	for _, s := range c.Series {
		companion := s.Dashed && s.Name == ""
		if !companion || colour < 0 {
			colour++
		}
		xys := make(plotter.XYs, 0, len(s.X))
		for j := range s.X {
			x, y := s.X[j], s.Y[j]
			if math.IsNaN(x) || math.IsNaN(y) || (c.LogX && x <= 0) || (c.LogY && y <= 0) {
				continue // a log axis cannot show it
			}
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
		if len(xys) == 0 {
			continue
		}
		points += len(xys)
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", c.Title, s.Name, err)
		}
		l.Color, pts.Color = plotutil.Color(colour), plotutil.Color(colour)
		pts.Shape = plotutil.Shape(colour)
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		switch {
		case companion:
			p.Add(l)
		case c.Lines:
			l.Width = vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(s.Name, l)
		default:
			p.Add(l, pts)
			p.Legend.Add(s.Name, l, pts)
		}
	}
	if c.Lines {
		p.Legend.Top, p.Legend.Left = false, false
	}
	if points == 0 {
		return fmt.Errorf("%w: %s", errNoData, c.Title)
	}
	return save(p, path)
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	return p
}

func save(p *plot.Plot, path string) error {
	if err := p.Save(plotWidth, plotHeight, path); err != nil {
		return fmt.Errorf("bench: plot %s: %w", filepath.Base(path), err)
	}
	return nil
}

// CDFChart is a chart of empirical distributions: for each series, the sorted
// samples on x and the fraction of samples at or below on y.
func CDFChart(title, x string, names []string, samples [][]float64) Chart {
	c := Chart{Title: title, X: x, Y: "fraction of peers", Lines: true}
	for i, v := range samples {
		s := Series{Name: names[i]}
		for j, x := range v {
			s.X = append(s.X, x)
			s.Y = append(s.Y, float64(j+1)/float64(len(v)))
		}
		c.Series = append(c.Series, s)
	}
	return c
}

// MapPlot draws peers at 2-D positions: every ordinary peer linked by a
// thin line to its superpeer, the superpeers as large red triangles.
type MapPlot struct {
	Title, X, Y string
	Pos         [][2]float64
	Superpeers  []int
	Attach      []int // Attach[i] is peer i's superpeer; negative: none
}

// Save draws m as a PNG file at path.
func (m MapPlot) Save(path string) error {
	p := newPlot(m.Title, m.X, m.Y)
	links := make([]plot.Plotter, 0, len(m.Pos))
	grey := color.RGBA{R: 150, G: 150, B: 150, A: 255}
	for i, s := range m.Attach {
		if s < 0 || s == i || s >= len(m.Pos) {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: m.Pos[i][0], Y: m.Pos[i][1]}, {X: m.Pos[s][0], Y: m.Pos[s][1]}})
		if err != nil {
			return err
		}
		l.Color, l.Width = grey, vg.Points(0.3)
		links = append(links, l)
	}
	p.Add(links...)
	peers := make(plotter.XYs, len(m.Pos))
	for i, q := range m.Pos {
		peers[i] = plotter.XY{X: q[0], Y: q[1]}
	}
	sc, err := plotter.NewScatter(peers)
	if err != nil {
		return err
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: color.RGBA{B: 200, A: 255}, Radius: vg.Points(1), Shape: draw.CircleGlyph{}}
	sp := make(plotter.XYs, 0, len(m.Superpeers))
	for _, i := range m.Superpeers {
		sp = append(sp, plotter.XY{X: m.Pos[i][0], Y: m.Pos[i][1]})
	}
	ss, err := plotter.NewScatter(sp)
	if err != nil {
		return err
	}
	ss.GlyphStyle = draw.GlyphStyle{Color: color.RGBA{R: 220, A: 255}, Radius: vg.Points(4), Shape: draw.TriangleGlyph{}}
	p.Add(sc, ss)
	p.Legend.Add("peer", sc)
	p.Legend.Add("superpeer", ss)
	return save(p, path)
}

// BarChart is a grouped bar chart: one group of bars per name in Groups
// (on x), one bar per series in each group. A series' X values are group
// indexes.
type BarChart struct {
	Title, Y string
	Groups   []string
	Series   []Series
}

// Save draws b as a PNG file at path.
func (b BarChart) Save(path string) error {
	p := newPlot(b.Title, "", b.Y)
	width := vg.Points(40 / float64(max(len(b.Series), 1)))
	points := 0
	for i, s := range b.Series {
		vals := make(plotter.Values, len(b.Groups))
		for j, x := range s.X {
			if g := int(x); g >= 0 && g < len(vals) && !math.IsNaN(s.Y[j]) && s.Y[j] >= 0 {
				vals[g] = s.Y[j]
				points++
			}
		}
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", b.Title, s.Name, err)
		}
		bars.Color, bars.LineStyle.Width = plotutil.Color(i), 0
		bars.Offset = width * vg.Length(float64(i)-float64(len(b.Series)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.Name, bars)
	}
	if points == 0 {
		return fmt.Errorf("%w: %s", errNoData, b.Title)
	}
	p.NominalX(b.Groups...)
	return save(p, path)
}
