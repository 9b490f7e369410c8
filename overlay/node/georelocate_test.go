package node

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// Relocation (georelocate.go): superpeer s serves nobody; it measures
// 40 ms to superpeer b, its next superpeer, so giving its role up costs
// 40 ms. b's summary says a second superpeer at its member c would save
// its members 100 ms: s hands its token to c, a pass of
// geometric.Settled passes more, once its members have had an attach TTL
// to come. It keeps its token when the gain is below the loss, when b's
// claimed gain exceeds b's whole cost (clamped to it), when c holds
// a token already, and when b is not the holder of its token that s
// believes. A claim of more members than b's load counts as the load (in
// the margin, which grows with the members).
func TestGeoRelocate(t *testing.T) {
	good := geometric.ClusterSummary{Members: 5, Cost: 200 * ms, Remove: 150 * ms, Candidate: "c", Gain: 100 * ms}
	for _, c := range []struct {
		name   string
		sum    geometric.ClusterSummary
		load   int
		holder peer.ID // of token 1 believed, when not b
		cHolds bool
		off    bool // GeoConfig.Relocate not set
		want   bool
	}{
		{name: "relocation off", sum: good, load: 5, off: true},
		{name: "gain above the loss", sum: good, load: 5, want: true},
		{name: "gain below the loss", sum: with(good, func(s *geometric.ClusterSummary) { s.Gain = 30 * ms }), load: 5},
		{name: "gain above the cost", sum: with(good, func(s *geometric.ClusterSummary) { s.Cost, s.Gain = 20*ms, time.Second }), load: 5},
		{name: "members above the load", sum: with(good, func(s *geometric.ClusterSummary) { s.Members, s.Gain = 5000, 50*ms }), load: 5, want: true},
		{name: "candidate holds a token", sum: good, load: 5, cHolds: true},
		{name: "not the believed holder", sum: good, load: 5, holder: "b2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := geoTestConfig("s", 3)
			cfg.Geo.Tokens.Capacity = 8
			cfg.Geo.Tokens.MinHold = time.Hour // no move for the coordinates' forces
			cfg.Geo.Relocate = !c.off
			d := newGeoDriver(t, cfg)
			rtt := map[peer.ID]time.Duration{"b": 40 * ms, "c": 50 * ms, "b2": 60 * ms}
			d.ping = func(p peer.ID) (time.Duration, error) { return max(rtt[p], 10*ms), nil }
			d.pass = func(TokenPass) bool { return true }
			d.handOver("x", geometric.Token{Num: 0, Seq: 1})
			sum := c.sum
			b := TokenPos{Holder: "b", Token: geometric.Token{Num: 1}, Coord: at(t, 0.04), Superpeer: true, Load: c.load, Summary: &sum}
			d.feed = GeoFeed{Tokens: []TokenPos{b}, Connected: []peer.ID{"b", "c"}}
			if c.holder != "" {
				// b claims token 1, which s believes b2 holds at a
				// later pass: b's report is not believed.
				d.feed.Tokens = append(d.feed.Tokens, TokenPos{Holder: c.holder, Token: geometric.Token{Num: 1, Seq: 2}, Coord: at(t, 0.05),
					Superpeer: true, Load: 5, Giver: "b"})
			}
			if c.cHolds {
				d.feed.Tokens = append(d.feed.Tokens, TokenPos{Holder: "c", Token: geometric.Token{Num: 2}, Coord: at(t, 0.05)})
			}
			d.run(7 * time.Second)
			if d.m.GeoState().Role != RoleSuperpeer {
				t.Fatal("not a superpeer")
			}
			d.passes = nil
			d.run(SnapshotTicks*time.Second + 3*d.m.cfg.AnnounceInterval - 7*time.Second - time.Second)
			if len(d.passes) != 0 {
				t.Fatalf("passed %+v before its members had an attach TTL to come", d.passes)
			}
			d.run(3 * time.Second)
			relocated := len(d.passes) == 1 && d.passes[0].To == "c" && d.passes[0].Token.Passes() > geometric.Settled
			t.Logf("passes %+v, summary %+v", d.passes, d.m.geo.summary)
			if relocated != c.want {
				t.Fatalf("relocated %v, want %v (passes %+v)", relocated, c.want, d.passes)
			}
			if relocated && (d.m.Relocations() != 1 || d.m.GeoState().Role == RoleSuperpeer) {
				t.Errorf("after the relocation: %d counted, role %v", d.m.Relocations(), d.m.GeoState().Role)
			}
			if c.off {
				for _, r := range d.reports {
					if r.Summary != nil {
						t.Fatalf("published a summary with relocation off: %+v", r)
					}
				}
				return
			}
			if !relocated {
				if s := d.m.geo.summary; s == nil || s.Members != 0 || s.Remove != 40*ms && c.holder == "" || s.Remove <= 0 {
					t.Errorf("summary %+v, want no member and a loss of its own RTT to its next superpeer (b, 40 ms)", s)
				}
			}
		})
	}
}

func with(s geometric.ClusterSummary, f func(*geometric.ClusterSummary)) geometric.ClusterSummary {
	f(&s)
	return s
}
