package nodesim

import (
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
)

// A node's token reports reach its peers as the live feed publishes them
// (gossip/feed.go): a first report, a new token and a promotion at once;
// a change of load or coordinate within an announce interval of the last
// publication at the next publication (the gap's end, or the feed's
// republication tick if that comes first); an unchanged report not at
// all. Before, every report the machine made was heard a gossip delay
// later, so the simulated peers knew loads and coordinates up to an
// announce interval sooner than live ones.
func TestTokenFeedMinGap(t *testing.T) {
	s := geoSim(t, 2, 1, 1, loadPlanetLab(t))
	s.Run(6 * time.Second) // both started; no token before the warm-up
	g := s.nodes[0].geo
	heard := func() *node.TokenPos {
		for _, tp := range s.geoFeed(1).Tokens {
			if tp.Holder == s.ID(0) {
				return &tp
			}
		}
		return nil
	}
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	r := node.TokenReport{Token: geometric.Token{Num: 0}, Coord: c, Capacity: 8}
	s.publishToken(0, r)
	s.RunFor(s.cfg.GossipDelay)
	if h := heard(); h == nil || h.Load != 0 {
		t.Fatalf("the first report not heard at once: %+v", h)
	}
	first := g.lastPub

	s.RunFor(time.Second)
	r.Load = 3
	s.publishToken(0, r)
	due := min(first+s.cfg.Node.AnnounceInterval, s.nextRepublish(0))
	if g.pending == nil || g.flushAt != due {
		t.Fatalf("a load change a second after the last publication: pending %v, flush at %v; want it held until %v", g.pending, g.flushAt, due)
	}
	s.Run(due - time.Millisecond)
	if h := heard(); h == nil || h.Load != 0 {
		t.Fatalf("the load change heard before %v: %+v", due, h)
	}
	s.Run(due + s.cfg.GossipDelay)
	if h := heard(); h == nil || h.Load != 3 {
		t.Fatalf("the load change not heard after %v: %+v", due, h)
	}

	// An unchanged report publishes nothing; a promotion goes at once,
	// within the gap.
	s.RunFor(time.Second)
	last := g.lastPub
	s.publishToken(0, r)
	if g.lastPub != last || g.pending != nil {
		t.Fatalf("an unchanged report was published (last %v, was %v) or held (%v)", g.lastPub, last, g.pending)
	}
	r.Superpeer = true
	s.publishToken(0, r)
	if g.lastPub != s.now || g.pending != nil {
		t.Fatalf("a promotion a second after the last publication was not published at once")
	}
	s.RunFor(s.cfg.GossipDelay)
	if h := heard(); h == nil || !h.Superpeer {
		t.Fatalf("the promotion not heard: %+v", h)
	}
}
