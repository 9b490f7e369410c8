package overlay

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/hashicorp/serf/coordinate"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
)

// The coordinates on the attach protocol (a member's in its request, some
// members' in the answer) round-trip; a coordinate that geometric.Valid
// refuses, one of another dimension, a truncated one, more than
// maxAttachCoords in an answer, and trailing bytes are refused.
func TestAttachCoords(t *testing.T) {
	c := geometric.DefaultCoordConfig()
	client, err := geometric.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	co := client.Coordinate()
	co.Vec[0], co.Vec[7], co.Error, co.Adjustment, co.Height = 0.012, -0.003, 0.4, -0.0001, 0.002
	got, err := decodeAll(appendCoord(nil, co), readCoord)
	if err != nil || !sameCoordinate(got, onWire(co)) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, onWire(co))
	}
	if d := geometric.Distance(got, co) - geometric.Distance(co, co); math.Abs(d) > 1e-9 {
		t.Errorf("the round trip moved the coordinate by %v s", d)
	}
	// A height at Vivaldi's floor (a fresh coordinate's) stays at it or
	// above: the node refuses a peer's coordinate below it (the nearest
	// float32 to 10 µs is below it, and every ping's coordinate was
	// refused, unnoticed but by the coordinates' error, 1.000 live).
	fresh := client.Coordinate()
	floor := coordinate.DefaultConfig().HeightMin
	if fresh.Height != floor {
		t.Fatalf("a fresh coordinate's height %v, want Vivaldi's floor %v", fresh.Height, floor)
	}
	for _, h := range []float64{floor, 0.002, 0.1, geometric.MaxComponent} {
		x := fresh.Clone()
		x.Height = h
		got, err := decodeAll(appendCoord(nil, x), readCoord)
		if err != nil || got.Height < h || got.Height > h*(1+1e-6) {
			t.Errorf("a height of %v reads as %+v, %v; want at least %v, and within a float32's step", h, got, err, h)
		}
	}
	// Components at the bound stay within it on the wire: the nearest
	// float32 to 9.9999999999 is 10.0, and to one just below the bound a
	// float32 above it.
	for _, x := range []float64{geometric.MaxComponent, math.Nextafter(geometric.MaxComponent, 0), -math.Nextafter(geometric.MaxComponent, 0), 9.9999999999} {
		edge := co.Clone()
		edge.Vec[1] = x
		if _, err := decodeAll(appendCoord(nil, edge), readCoord); err != nil {
			t.Errorf("a component of %v: %v", x, err)
		}
	}
	ids := testIDs(t, 2)
	in := []node.PeerCoord{{ID: ids[0], Coord: co}, {ID: ids[1], Coord: co}}
	out, err := decodeAll(appendCoords(nil, in), readCoords)
	if err != nil || len(out) != 2 || out[0].ID != ids[0] || out[1].ID != ids[1] || !sameCoordinate(out[1].Coord, onWire(co)) {
		t.Fatalf("round trip of a list: %+v, %v", out, err)
	}

	bad := func(f func(*coordinate.Coordinate)) []byte {
		x := co.Clone()
		f(x)
		return appendCoord(nil, x)
	}
	many := binary.AppendUvarint(nil, maxAttachCoords+1)
	for range maxAttachCoords + 1 {
		many = binary.AppendUvarint(many, uint64(len(ids[0])))
		many = appendCoord(append(many, ids[0]...), co)
	}
	for name, c := range map[string]struct {
		b    []byte
		list bool
	}{
		"NaN":                {b: bad(func(x *coordinate.Coordinate) { x.Vec[2] = math.NaN() })},
		"huge component":     {b: bad(func(x *coordinate.Coordinate) { x.Vec[0] = 1e300 })},
		"negative height":    {b: bad(func(x *coordinate.Coordinate) { x.Height = -1 })},
		"three dimensions":   {b: bad(func(x *coordinate.Coordinate) { x.Vec = x.Vec[:3] })},
		"truncated":          {b: appendCoord(nil, co)[:20]},
		"trailing":           {b: append(appendCoord(nil, co), 0)},
		"empty":              {b: nil},
		"too many in a list": {b: many, list: true},
	} {
		var err error
		if c.list {
			_, err = decodeAll(c.b, readCoords)
		} else {
			_, err = decodeAll(c.b, readCoord)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// appendCoords sends no more than a reader takes.
	long := make([]node.PeerCoord, maxAttachCoords+3)
	for i := range long {
		long[i] = in[0]
	}
	if out, err := decodeAll(appendCoords(nil, long), readCoords); err != nil || len(out) != maxAttachCoords {
		t.Errorf("a long list: %d read, %v; want %d", len(out), err, maxAttachCoords)
	}
}

// onWire is c as appendCoord sends it: each component a float32.
func onWire(c *coordinate.Coordinate) *coordinate.Coordinate {
	w := c.Clone()
	for i, x := range w.Vec {
		w.Vec[i] = float64(float32(x))
	}
	w.Error, w.Adjustment, w.Height = float64(float32(w.Error)), float64(float32(w.Adjustment)), float64(math.Float32frombits(heightBits(w.Height)))
	return w
}

func sameCoordinate(a, b *coordinate.Coordinate) bool {
	if a == nil || b == nil || len(a.Vec) != len(b.Vec) {
		return false
	}
	for i := range a.Vec {
		if a.Vec[i] != b.Vec[i] {
			return false
		}
	}
	return a.Error == b.Error && a.Adjustment == b.Adjustment && a.Height == b.Height
}
