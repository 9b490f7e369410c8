package node

import (
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The search on measured RTTs, walked through: superpeer s sits 30 ms
// from its four members, which sit within 3 ms of one another. Once it
// has held its token for a snapshot period, s names candidates in its
// answers; the members report their RTTs to them (a report counts only
// from a member told the candidates before); with a majority
// reported, s hands its token to the most central member, settled (a
// pass of geometric.Settled passes more). With only one report of four,
// it does not.
func TestGeoSwap(t *testing.T) {
	pos := map[peer.ID]float64{"s": 0, "p1": 30, "p2": 31, "p3": 32, "p4": 33}
	rtt := func(a, b peer.ID) time.Duration {
		d := pos[a] - pos[b]
		return time.Duration(max(d, -d) * float64(ms))
	}
	for _, reporters := range [][]peer.ID{{"p1", "p2", "p3"}, {"p1"}} {
		cfg := geoTestConfig("s", 1)
		cfg.Geo.Tokens.Capacity = 8
		cfg.Geo.Tokens.MinHold = time.Hour // no move for the coordinates' forces
		d := newGeoDriver(t, cfg)
		d.ping = func(p peer.ID) (time.Duration, error) { return rtt("s", p), nil }
		d.pass = func(TokenPass) bool { return true }
		for p, x := range pos {
			d.coords[p] = at(t, x/1000)
		}
		d.handOver("x", geometric.Token{Num: 0, Seq: 1})
		d.run(7 * time.Second) // promoted after the dwell
		ask := func(p peer.ID, rtts []time.Duration) GeoAnswer {
			d.step(GeoFeed{Connected: d.feed.Connected})
			d.step(AttachAsked{From: p, RTTs: rtts, Coord: d.coords[p]})
			return d.m.GeoAnswer()
		}
		for p := range pos {
			if p != "s" && !ask(p, nil).Yes {
				t.Fatalf("%s refused", p)
			}
		}
		if d.m.GeoState().Role != RoleSuperpeer {
			t.Fatal("not a superpeer")
		}
		d.run(SnapshotTicks*time.Second + 2*time.Second) // the warm-up, then a round names candidates
		cands := ask("p4", nil).Candidates               // a member learns them from its answer
		for _, p := range reporters {
			if c := ask(p, nil).Candidates; !slices.Equal(c, cands) {
				t.Fatalf("%s told candidates %v, p4 %v", p, c, cands)
			}
		}
		if len(cands) == 0 || len(cands) > DefaultSwapCandidates || slices.Contains(cands, "s") {
			t.Fatalf("candidates %v", cands)
		}
		for _, p := range reporters {
			rtts := []time.Duration{rtt(p, "s")}
			for _, c := range cands {
				rtts = append(rtts, max(rtt(p, c), time.Nanosecond))
			}
			ask(p, rtts)
		}
		d.passes = nil
		d.run(2 * time.Second)
		swapped := len(d.passes) == 1 && d.passes[0].Token.Passes() > geometric.Settled
		t.Logf("%d reports, candidates %v: passes %+v", len(reporters), cands, d.passes)
		if want := len(reporters) > 2; swapped != want {
			t.Fatalf("%d reports of 4: handed over %v, want %v (passes %+v)", len(reporters), swapped, want, d.passes)
		}
		if swapped && d.passes[0].To != "p2" && d.passes[0].To != "p3" {
			t.Errorf("handed over to %s, want a central member (p2 or p3)", d.passes[0].To)
		}
		if swapped && (d.m.Swaps() != 1 || d.m.GeoState().Role == RoleSuperpeer) {
			t.Errorf("after the hand-over: %d swaps counted, role %v", d.m.Swaps(), d.m.GeoState().Role)
		}
	}
}
