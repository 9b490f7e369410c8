package web

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// checkPlaced fails the test if two shown labels intersect, a label leaves
// the canvas, or one covers an obstacle.
func checkPlaced(t *testing.T, w, h float64, ps []Placed, obstacles []Circle) {
	t.Helper()
	for i, p := range ps {
		if p.Hidden {
			continue
		}
		b := p.Box
		if b.X < 0 || b.Y < 0 || b.X+b.W > w || b.Y+b.H > h {
			t.Errorf("label %s at %+v leaves the %vx%v canvas", p.ID, b, w, h)
		}
		for _, q := range ps[i+1:] {
			if !q.Hidden && b.Intersects(q.Box) {
				t.Errorf("labels %s %+v and %s %+v intersect", p.ID, b, q.ID, q.Box)
			}
		}
		for _, o := range obstacles {
			if b.Intersects(o.box()) {
				t.Errorf("label %s %+v covers the dot %+v", p.ID, b, o)
			}
		}
	}
}

// Many labels whose anchors crowd a small part of a small canvas: every
// one finds a place, none intersects another or covers a dot, the far ones
// get leader lines, and the same input gives the same layout.
func TestPlaceLabelsCrowded(t *testing.T) {
	const w, h = 400, 300
	rng := rand.New(rand.NewPCG(1, 2))
	var labels []Label
	var dots []Circle
	for i := range 50 {
		a := Circle{X: 150 + rng.Float64()*100, Y: 110 + rng.Float64()*80, R: 4}
		dots = append(dots, a)
		labels = append(labels, Label{ID: fmt.Sprint(i), Text: fmt.Sprintf("…%08x", rng.Uint32()), Anchor: a})
	}
	ps := PlaceLabels(w, h, labels, dots)
	checkPlaced(t, w, h, ps, dots)
	leaders := 0
	for _, p := range ps {
		if p.Hidden {
			t.Errorf("label %s found no place, though the canvas has room for all", p.ID)
		}
		if p.Leader != nil {
			leaders++
		}
	}
	if leaders == 0 {
		t.Error("no label got a leader line, though most cannot sit next to their anchor")
	}
	if again := PlaceLabels(w, h, labels, dots); !reflect.DeepEqual(ps, again) {
		t.Error("the same labels were placed differently")
	}
}

// With more labels than the canvas holds, the ones that do not fit are
// Hidden, never drawn on top of another.
func TestPlaceLabelsOverfull(t *testing.T) {
	const w, h = 200, 100
	var labels []Label
	for i := range 80 {
		labels = append(labels, Label{ID: fmt.Sprint(i), Text: "a long label text", Anchor: Circle{X: 100, Y: 50, R: 3}})
	}
	ps := PlaceLabels(w, h, labels, nil)
	checkPlaced(t, w, h, ps, nil)
	shown := 0
	for _, p := range ps {
		if !p.Hidden {
			shown++
		}
	}
	if shown == 0 || shown == len(ps) {
		t.Errorf("%d of %d labels shown; want some, not all", shown, len(ps))
	}
}

// Place draws every cluster, on coordinates when all have one and on a
// grid otherwise, and its labels follow PlaceLabels' rules.
func TestPlace(t *testing.T) {
	var cs []Cluster
	for i := range 12 {
		c := Cluster{ID: fmt.Sprint("c", i), Label: fmt.Sprintf("%04b …abcdef%02d 8 peers stable", i, i), Superpeer: fmt.Sprint("sp", i), Size: 8}
		for j := range 8 {
			c.Members = append(c.Members, MemberIn{ID: fmt.Sprint("m", i, "-", j), Label: fmt.Sprintf("…member%02d", j)})
		}
		c.Members[0].ID = c.Superpeer
		c.Detail = i == 3
		cs = append(cs, c)
	}
	for _, byCoord := range []bool{false, true} {
		if byCoord {
			for i := range cs {
				// All in one corner but two: the projection spreads them.
				cs[i].Coord = []float64{0.001 * float64(i%3), 0.001 * float64(i/3), 0}
			}
		}
		l := Place(cs)
		if l.ByCoord != byCoord || len(l.Clusters) != len(cs) {
			t.Fatalf("by coordinates %v: %d clusters placed, by coordinates %v", byCoord, len(l.Clusters), l.ByCoord)
		}
		var dots []Circle
		for i, c := range l.Clusters {
			if c.ID != cs[i].ID || len(c.Members) != 7 {
				t.Errorf("cluster %d: %s with %d member dots, want %s with 7", i, c.ID, len(c.Members), cs[i].ID)
			}
			d := c.Disc
			if d.X-d.R < 0 || d.Y-d.R < 0 || d.X+d.R > Width || d.Y+d.R > Height {
				t.Errorf("cluster %s's disc %+v leaves the canvas", c.ID, d)
			}
			dots = append(dots, c.Dot)
			for _, m := range c.Members {
				dots = append(dots, m.Dot)
			}
		}
		checkPlaced(t, Width, Height, l.Labels, dots)
		if want := len(cs) + 7; len(l.Labels) != want {
			t.Errorf("%d labels, want %d (one per cluster, and the detailed cluster's members)", len(l.Labels), want)
		}
		for _, p := range l.Labels {
			if p.Hidden {
				t.Errorf("label %s hidden", p.ID)
			}
		}
	}
}
