// Package web is the overlay's page: the self-contained HTML page
// (index.html, no external scripts) that a node's status server and
// `peer testnet --http` serve on /, and the layout it draws, computed here
// so that it is deterministic and tested without a browser.
//
// Layout places the clusters of an overview on a canvas (on their
// superpeers' network coordinates when every cluster has one, else on a
// grid in the order given), their members around them, and the labels
// (PlaceLabels) so that no two labels overlap and no label covers a dot.
// The page draws what Layout returns and exposes it, with the boxes the
// browser measured, as window.overlayLayout.
package web

import (
	"embed"
	"math"
)

// Page is the page, web/index.html.
//
//go:embed index.html
var Page embed.FS

// Canvas size of the page's map, in SVG user units.
const (
	Width  = 1000
	Height = 620
)

// Label metrics: the page draws labels in an 11 px monospace font with
// each text forced to CharWidth per character (SVG textLength), on a box
// LabelHeight high with LabelPad on either side of the text, so that the
// boxes computed here are the boxes drawn.
const (
	FontSize    = 11
	CharWidth   = 6.6
	LabelHeight = 16
	LabelPad    = 3
	// gap is the least space between two labels, or a label and a dot.
	gap = 2
)

// Box is an axis-aligned rectangle: its top-left corner and its size.
type Box struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	W float64 `json:"w"`
	H float64 `json:"h"`
}

// Intersects reports whether b and c overlap by more than touching.
func (b Box) Intersects(c Box) bool {
	return b.X < c.X+c.W && c.X < b.X+b.W && b.Y < c.Y+c.H && c.Y < b.Y+b.H
}

// grow returns b with d added on every side.
func (b Box) grow(d float64) Box { return Box{b.X - d, b.Y - d, b.W + 2*d, b.H + 2*d} }

// Circle is something drawn round: a dot or a cluster's disc.
type Circle struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	R float64 `json:"r"`
}

func (c Circle) box() Box { return Box{c.X - c.R, c.Y - c.R, 2 * c.R, 2 * c.R} }

// Label is a text to place next to its Anchor.
type Label struct {
	ID     string
	Text   string
	Anchor Circle
}

// TextWidth is the width the page draws text in (see CharWidth).
func TextWidth(s string) float64 { return float64(len([]rune(s))) * CharWidth }

// Placed is a label as placed: its box (Hidden when there was no room
// anywhere on the canvas), and a leader line from its anchor when the box
// is not next to it.
type Placed struct {
	ID     string      `json:"id"`
	Text   string      `json:"text"`
	Box    Box         `json:"box"`
	Leader *[4]float64 `json:"leader,omitempty"`
	Hidden bool        `json:"hidden,omitempty"`
}

// directions are the placements tried at each distance, in order of
// preference: right, left, below, above, then the diagonals and between.
var directions = func() [][2]float64 {
	var out [][2]float64
	for _, deg := range []float64{0, 180, 90, 270, 45, 135, 315, 225, 22.5, 157.5, 337.5, 202.5, 67.5, 112.5, 292.5, 247.5} {
		a := deg * math.Pi / 180
		out = append(out, [2]float64{math.Cos(a), math.Sin(a)})
	}
	return out
}()

// PlaceLabels places labels, in the order given (the first get the places
// nearest their anchors), on a w × h canvas: each at the first of
// positions at growing distances from its anchor, in 16 directions, where
// its box lies inside the canvas and clear (by gap) of every label placed
// before and of every obstacle. A box further from its anchor than the
// first two rings gets a leader line. A label with no such place is
// Hidden. It is deterministic, and no two boxes it returns that are not
// Hidden intersect.
func PlaceLabels(w, h float64, labels []Label, obstacles []Circle) []Placed {
	obs := make([]Box, len(obstacles))
	for i, o := range obstacles {
		obs[i] = o.box().grow(gap)
	}
	var placed []Box
	free := func(b Box) bool {
		if b.X < 0 || b.Y < 0 || b.X+b.W > w || b.Y+b.H > h {
			return false
		}
		g := b.grow(gap)
		for _, o := range obs {
			if g.Intersects(o) {
				return false
			}
		}
		for _, p := range placed {
			if g.Intersects(p) {
				return false
			}
		}
		return true
	}
	const step = 6
	maxD := math.Hypot(w, h)
	out := make([]Placed, len(labels))
	for i, l := range labels {
		bw, bh := TextWidth(l.Text)+2*LabelPad, float64(LabelHeight)
		out[i] = Placed{ID: l.ID, Text: l.Text, Hidden: true}
		a := l.Anchor
	search:
		for ring := 0; ; ring++ {
			d := a.R + gap + float64(ring)*step
			if d > maxD {
				break
			}
			for _, dir := range directions {
				// The box's centre, so that the box's edge facing the
				// anchor is d away from the anchor's centre along dir.
				cx := a.X + dir[0]*(d+bw/2)
				cy := a.Y + dir[1]*(d+bh/2)
				b := Box{X: round(cx - bw/2), Y: round(cy - bh/2), W: bw, H: bh}
				if !free(b) {
					continue
				}
				placed = append(placed, b)
				out[i].Box, out[i].Hidden = b, false
				if ring > 1 {
					out[i].Leader = leader(a, b)
				}
				break search
			}
		}
	}
	return out
}

// round keeps coordinates to a tenth, so that the JSON stays short.
func round(v float64) float64 { return math.Round(v*10) / 10 }

// leader is the line from the edge of the anchor to the nearest point of b.
func leader(a Circle, b Box) *[4]float64 {
	px := math.Max(b.X, math.Min(a.X, b.X+b.W))
	py := math.Max(b.Y, math.Min(a.Y, b.Y+b.H))
	dx, dy := px-a.X, py-a.Y
	d := math.Hypot(dx, dy)
	if d == 0 {
		return nil
	}
	return &[4]float64{round(a.X + dx/d*a.R), round(a.Y + dy/d*a.R), round(px), round(py)}
}

// Cluster is a cluster to lay out: its ID, its member count (Size), the
// IDs of its members when known (nil when known only by its size; the
// superpeer among them is drawn at the centre, not as a member), its
// superpeer's network coordinate when known (the first two dimensions are
// used), and whether it is drawn in detail (members labelled).
type Cluster struct {
	ID        string
	Label     string
	Superpeer string
	Size      int
	Members   []MemberIn
	Coord     []float64
	Detail    bool
}

// MemberIn is a member of a Cluster to draw: its ID and its label (drawn
// only in a Detail cluster).
type MemberIn struct {
	ID    string
	Label string
}

// Layout is what the page draws: every cluster's disc, every member's dot
// and every label.
type Layout struct {
	W        float64         `json:"w"`
	H        float64         `json:"h"`
	Clusters []ClusterPlaced `json:"clusters"`
	Labels   []Placed        `json:"labels"`
	// ByCoord says the clusters are on their superpeers' coordinates;
	// otherwise on a grid.
	ByCoord bool `json:"by_coord"`
}

// ClusterPlaced is a cluster's disc, its superpeer's dot at the centre,
// and its members' dots.
type ClusterPlaced struct {
	ID      string        `json:"id"`
	Disc    Circle        `json:"disc"`
	Dot     Circle        `json:"dot"`
	Members []MemberPlace `json:"members,omitempty"`
}

// MemberPlace is a member's dot.
type MemberPlace struct {
	ID  string `json:"id"`
	Dot Circle `json:"dot"`
}

// Dot radii: a superpeer's and a member's.
const (
	superDot  = 7
	memberDot = 4
)

// maxMemberDots bounds the member dots drawn in all; above it clusters are
// drawn as discs only, so that the page and the label search stay quick
// on large testnets.
const maxMemberDots = 600

// Place lays out clusters on a Width × Height canvas (see the package
// comment). It is deterministic: the same clusters in the same order give
// the same layout.
func Place(clusters []Cluster) Layout {
	out := Layout{W: Width, H: Height}
	n := len(clusters)
	if n == 0 {
		return out
	}
	centres := make([][2]float64, n)
	var rmax float64
	byCoord := n > 1
	for _, c := range clusters {
		byCoord = byCoord && len(c.Coord) >= 2
	}
	if byCoord {
		x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
		for _, c := range clusters {
			x0, x1 = math.Min(x0, c.Coord[0]), math.Max(x1, c.Coord[0])
			y0, y1 = math.Min(y0, c.Coord[1]), math.Max(y1, c.Coord[1])
		}
		span := math.Max(x1-x0, y1-y0)
		byCoord = span > 1e-9 && !math.IsNaN(span) && !math.IsInf(span, 0)
		if byCoord {
			mx, my := 130.0, 90.0
			scale := math.Min((Width-2*mx)/math.Max(x1-x0, 1e-12), (Height-2*my)/math.Max(y1-y0, 1e-12))
			for i, c := range clusters {
				centres[i] = [2]float64{round(Width/2 + (c.Coord[0]-(x0+x1)/2)*scale), round(Height/2 + (c.Coord[1]-(y0+y1)/2)*scale)}
			}
			rmax = math.Max(14, math.Min(60, math.Min(Width, Height)/(2.5*math.Sqrt(float64(n)))))
		}
	}
	if !byCoord {
		cols := int(math.Ceil(math.Sqrt(float64(n) * Width / Height)))
		rows := (n + cols - 1) / cols
		cols = (n + rows - 1) / rows // as few empty cells as the rows allow
		cw, ch := float64(Width)/float64(cols), float64(Height)/float64(rows)
		for i := range clusters {
			r, c := i/cols, i%cols
			// Odd rows shift by a quarter cell, so that labels to the
			// right of one disc do not line up with the next row's.
			off := 0.0
			if r%2 == 1 && cols > 1 {
				off = cw / 4
			}
			centres[i] = [2]float64{round(cw*(float64(c)+0.4) + off), round(ch * (float64(r) + 0.5))}
		}
		rmax = math.Max(12, math.Min(cw, ch)*0.3)
	}
	out.ByCoord = byCoord
	dots := 0
	for _, c := range clusters {
		dots += len(c.Members)
	}
	var obstacles []Circle
	var labels, memberLabels []Label
	biggest := 1
	for _, c := range clusters {
		biggest = max(biggest, c.Size)
	}
	for i, c := range clusters {
		// The area follows the member count, the largest cluster filling
		// its room.
		r := math.Max(math.Min(12, rmax), rmax*math.Sqrt(float64(max(c.Size, 1))/float64(biggest)))
		if c.Detail {
			r = math.Max(r, math.Min(rmax*1.5, 30+6*math.Sqrt(float64(len(c.Members)))))
		}
		cp := ClusterPlaced{ID: c.ID, Disc: Circle{centres[i][0], centres[i][1], round(r)}, Dot: Circle{centres[i][0], centres[i][1], superDot}}
		if c.Superpeer == "" {
			cp.Dot.R = 0
		} else {
			obstacles = append(obstacles, cp.Dot)
		}
		if dots <= maxMemberDots {
			var ms []MemberIn
			for _, m := range c.Members {
				if m.ID != c.Superpeer {
					ms = append(ms, m)
				}
			}
			for j, m := range ms {
				a := 2*math.Pi*float64(j)/float64(len(ms)) - math.Pi/2
				rr := r * 0.72
				if c.Superpeer == "" && len(ms) == 1 {
					rr = 0
				}
				d := Circle{round(centres[i][0] + rr*math.Cos(a)), round(centres[i][1] + rr*math.Sin(a)), memberDot}
				cp.Members = append(cp.Members, MemberPlace{ID: m.ID, Dot: d})
				obstacles = append(obstacles, d)
				if c.Detail {
					memberLabels = append(memberLabels, Label{ID: m.ID, Text: m.Label, Anchor: d})
				}
			}
		}
		labels = append(labels, Label{ID: c.ID, Text: c.Label, Anchor: cp.Disc})
		out.Clusters = append(out.Clusters, cp)
	}
	// Cluster labels first, then the detailed cluster's members.
	out.Labels = PlaceLabels(Width, Height, append(labels, memberLabels...), obstacles)
	return out
}
