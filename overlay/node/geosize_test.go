package node

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// A superpeer's estimate of the network's size is its own cluster and the
// clusters of the superpeers it hears of, each load at most Capacity; a
// holder in transit and the superpeer's own report are not counted again.
// Its yes carries the estimate, and a member takes it within its cluster's
// size and what the tokens can hold, while it is attached to the superpeer
// that said it.
func TestGeoSize(t *testing.T) {
	cfg := geoTestConfig("s", 5) // Capacity 2
	d := newGeoDriver(t, cfg)
	if st := d.m.GeoState(); st.Size != (dhtselect.Estimate{}) {
		t.Fatalf("an unattached node's estimate %+v, want none", st.Size)
	}
	d.promote(geometric.Token{Num: 0, Seq: 1})
	d.feed = GeoFeed{Tokens: []TokenPos{
		{Holder: "s", Token: geometric.Token{Num: 0, Seq: 1}, Coord: at(t, 0), Superpeer: true, Load: 2}, // its own, as gossip gives it
		{Holder: "s1", Token: geometric.Token{Num: 1}, Coord: at(t, 0.01), Superpeer: true, Load: 1},
		{Holder: "s2", Token: geometric.Token{Num: 2}, Coord: at(t, 0.02), Superpeer: true, Load: 1000}, // claims more than Capacity
		{Holder: "h3", Token: geometric.Token{Num: 3, Seq: 1}, Coord: at(t, 0.03)},                      // in transit
	}}
	d.step(d.feed)
	d.step(AttachAsked{From: "m", Coord: at(t, 0)})
	// s and m, s1 and its one, s2 and Capacity.
	want := 2 + 2 + 1 + cfg.Geo.Tokens.Capacity
	if a := d.m.GeoAnswer(); !a.Yes || a.Size != want {
		t.Fatalf("yes %v with size %d, want %d", a.Yes, a.Size, want)
	}
	if st := d.m.GeoState(); st.Size != (dhtselect.Estimate{N: want, Source: dhtselect.SourceBackbone}) {
		t.Errorf("superpeer's estimate %+v, want %d from the backbone", st.Size, want)
	}

	m := newGeoDriver(t, geoTestConfig("o", 5)).m.geo
	m.attached = "s"
	most := 5 * (1 + 2)
	for _, c := range []struct {
		heard, want int
	}{{7, 7}, {1, 3}, {1 << 20, most}} {
		m.sizeHeard("s", c.heard, []peer.ID{"s", "o", "p"})
		if got := m.size(); got != (dhtselect.Estimate{N: c.want, Source: SourceDigest}) {
			t.Errorf("heard %d in a cluster of 3: %+v, want %d", c.heard, got, c.want)
		}
	}
	m.attached = "s1"
	if got := m.size(); got != (dhtselect.Estimate{}) {
		t.Errorf("attached to another superpeer: %+v, want none", got)
	}
}
