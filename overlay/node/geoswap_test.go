package node

import (
	"fmt"
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
// it does not, and does not pin its token either (no majority judged it).
func TestGeoSwap(t *testing.T) {
	pos := map[peer.ID]float64{"s": 0, "p1": 30, "p2": 31, "p3": 32, "p4": 33}
	for _, reporters := range [][]peer.ID{{"p1", "p2", "p3"}, {"p1"}} {
		d, ask, rtt := swapScene(t, pos, 0)
		if d.m.GeoState().Role != RoleSuperpeer {
			t.Fatal("not a superpeer")
		}
		cands := ask("p4", nil, PeerRTT{}).Candidates // a member learns them from its answer
		for _, p := range reporters {
			if c := ask(p, nil, PeerRTT{}).Candidates; !slices.Equal(c, cands) {
				t.Fatalf("%s told candidates %v, p4 %v", p, c, cands)
			}
		}
		if len(cands) == 0 || len(cands) > DefaultSwapCandidates || slices.Contains(cands, "s") {
			t.Fatalf("candidates %v", cands)
		}
		report(ask, rtt, reporters, cands)
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
		if !swapped && d.m.geo.holder.Pinned() {
			t.Error("pinned on one report of four")
		}
		if swapped && (d.m.Swaps() != 1 || d.m.GeoState().Role == RoleSuperpeer) {
			t.Errorf("after the hand-over: %d swaps counted, role %v", d.m.Swaps(), d.m.GeoState().Role)
		}
	}
}

// report has each of reporters send superpeer s its report on cands, by
// the line's RTTs (swapScene's ask and rtt).
func report(ask func(peer.ID, []time.Duration, PeerRTT) GeoAnswer, rtt func(a, b peer.ID) time.Duration, reporters, cands []peer.ID) {
	for _, p := range reporters {
		rtts := []time.Duration{rtt(p, "s")}
		for _, c := range cands {
			rtts = append(rtts, max(rtt(p, c), time.Nanosecond))
		}
		ask(p, rtts, PeerRTT{})
	}
}

// swapScene makes superpeer s of a cluster of members on a line at pos
// (milliseconds; s among them), with its token held and promoted, every
// member attached, and its search's warm-up over: the next request names
// the candidates. ask steps an attach request of a member, with its
// report and its next superpeer, and returns the answer; rtt is the
// line's RTT.
func swapScene(t *testing.T, pos map[peer.ID]float64, handovers uint64) (*geoDriver, func(peer.ID, []time.Duration, PeerRTT) GeoAnswer, func(a, b peer.ID) time.Duration) {
	t.Helper()
	return swapSceneLeft(t, pos, handovers, nil)
}

// swapSceneLeft is swapScene where the members named in left, once
// attached, say they left for another superpeer before the warm-up ends.
func swapSceneLeft(t *testing.T, pos map[peer.ID]float64, handovers uint64, left []peer.ID) (*geoDriver, func(peer.ID, []time.Duration, PeerRTT) GeoAnswer, func(a, b peer.ID) time.Duration) {
	t.Helper()
	rtt := func(a, b peer.ID) time.Duration {
		d := pos[a] - pos[b]
		return time.Duration(max(d, -d) * float64(ms))
	}
	cfg := geoTestConfig("s", 1)
	cfg.Geo.Tokens.Capacity = 8
	cfg.Geo.Tokens.MinHold = time.Hour // no move for the coordinates' forces
	d := newGeoDriver(t, cfg)
	d.ping = func(p peer.ID) (time.Duration, error) { return rtt("s", p), nil }
	d.pass = func(TokenPass) bool { return true }
	for p, x := range pos {
		d.coords[p] = at(t, x/1000)
	}
	d.handOver("x", geometric.Token{Num: 0, Seq: 1 + handovers*(geometric.Settled+1)})
	d.run(7 * time.Second) // promoted after the dwell, or at once when handed over
	ask := func(p peer.ID, rtts []time.Duration, second PeerRTT) GeoAnswer {
		d.step(GeoFeed{Connected: d.feed.Connected})
		d.step(AttachAsked{From: p, RTTs: rtts, Second: second, Coord: d.coords[p]})
		return d.m.GeoAnswer()
	}
	for p := range pos {
		if p != "s" && !ask(p, nil, PeerRTT{}).Yes {
			t.Fatalf("%s refused", p)
		}
	}
	if d.m.GeoState().Role != RoleSuperpeer {
		t.Fatal("not a superpeer")
	}
	for _, p := range left {
		d.step(AttachAsked{From: p, Coord: d.coords[p], Leaving: true})
	}
	d.run(SnapshotTicks*time.Second + 2*time.Second) // the warm-up, then a round names candidates
	return d, ask, rtt
}

// Members that said they left (AttachAsked.Leaving) stay in the roster
// until they expire but are served no longer: the search names none of
// them, and its round waits for a majority of the members that stay.
// Superpeer s at 0 ms on a line, members p1 and p4 at 30 and 33 ms; p2
// and p3, the most central at 31 and 32 ms, left before the round. The
// reports of p1 and p4 are a majority of two, and s hands its token to
// p1 (the cluster's mean RTT from 31.5 to 16.5 ms).
func TestGeoSwapWithoutLeftMembers(t *testing.T) {
	pos := map[peer.ID]float64{"s": 0, "p1": 30, "p2": 31, "p3": 32, "p4": 33}
	d, ask, rtt := swapSceneLeft(t, pos, 0, []peer.ID{"p2", "p3"})
	if st := d.m.GeoState(); len(st.Members) != 5 {
		t.Fatalf("roster %v, want all five until p2 and p3 expire", st.Members)
	}
	cands := ask("p4", nil, PeerRTT{}).Candidates
	if c := ask("p1", nil, PeerRTT{}).Candidates; !slices.Equal(c, cands) {
		t.Fatalf("p1 told candidates %v, p4 %v", c, cands)
	}
	if len(cands) == 0 || slices.Contains(cands, "p2") || slices.Contains(cands, "p3") {
		t.Fatalf("candidates %v: want some, none of the members that left", cands)
	}
	report(ask, rtt, []peer.ID{"p1", "p4"}, cands)
	d.passes = nil
	d.run(2 * time.Second)
	if len(d.passes) != 1 || d.passes[0].To != "p1" || d.passes[0].Token.Passes() <= geometric.Settled {
		t.Fatalf("passes %+v, want a hand-over to p1 on the reports of the two members that stay", d.passes)
	}
}

// The margin grows with the token's hand-overs (swapConfig): superpeer s
// at 0 ms on a line, members at -50, -30, -10 and 10. The member at -10
// would lower the cluster's mean RTT by about a tenth; s hands its token
// over when the token has had no hand-over, not when it has had three
// (a margin of 16 % of the mean), nor when the survey of a new network
// placed it (surveyMargin, the same 16 %).
func TestGeoSwapMarginGrows(t *testing.T) {
	pos := map[peer.ID]float64{"s": 0, "p1": -50, "p2": -30, "p3": -10, "p4": 10}
	for _, c := range []struct {
		handovers uint64
		surveyed  bool
		want      bool
	}{{0, false, true}, {3, false, false}, {0, true, false}} {
		d, ask, rtt := swapScene(t, pos, c.handovers)
		if c.surveyed {
			d.m.geo.surveyPlaced, d.m.geo.surveyHeld = d.m.geo.holder.Holding()
		}
		var cands []peer.ID
		for _, p := range []peer.ID{"p1", "p2", "p3", "p4"} {
			cands = ask(p, nil, PeerRTT{}).Candidates
		}
		if !slices.Contains(cands, "p3") {
			t.Fatalf("candidates %v, want p3 among them", cands)
		}
		d.passes = nil
		for _, p := range []peer.ID{"p1", "p2", "p3", "p4"} {
			rtts := []time.Duration{rtt(p, "s")}
			for _, x := range cands {
				rtts = append(rtts, max(rtt(p, x), time.Nanosecond))
			}
			ask(p, rtts, PeerRTT{})
		}
		d.run(2 * time.Second)
		swapped := len(d.passes) == 1 && d.passes[0].To == "p3"
		t.Logf("%d hand-overs, placed by the survey %v: passes %+v", c.handovers, c.surveyed, d.passes)
		if swapped != c.want {
			t.Errorf("token handed over %d times before, placed by the survey %v: handed to p3 %v, want %v", c.handovers, c.surveyed, swapped, c.want)
		}
	}
}

// A member's next superpeer in its report (AttachAsked.Second): members
// a1 and a2 sit 20 ms on one side of superpeer s, b and c 20 and 22 ms
// on the other. Judged on the cluster alone no candidate gains (a move
// towards b and c costs a1 and a2 what b and c gain); when a1 and a2
// report a next superpeer 5 ms from them, which they would go to, s
// hands its role to the central member on the far side, b or c. Kept
// by a round that every member reported on, s's token is pinned against
// the coordinates' forces.
func TestGeoSwapSecond(t *testing.T) {
	pos := map[peer.ID]float64{"s": 0, "a1": -20, "a2": -20.5, "b": 20, "c": 22}
	for _, withSecond := range []bool{false, true} {
		d, ask, rtt := swapScene(t, pos, 0)
		cands := ask("b", nil, PeerRTT{}).Candidates
		if len(cands) == 0 {
			t.Fatal("no candidates")
		}
		for _, p := range []peer.ID{"a1", "a2", "b", "c"} {
			ask(p, nil, PeerRTT{}) // told the candidates
		}
		for _, p := range []peer.ID{"a1", "a2", "b", "c"} {
			rtts := []time.Duration{rtt(p, "s")}
			for _, c := range cands {
				rtts = append(rtts, max(rtt(p, c), time.Nanosecond))
			}
			var second PeerRTT
			if withSecond && p[0] == 'a' {
				second = PeerRTT{Peer: "q", RTT: 5 * ms}
			}
			ask(p, rtts, second)
		}
		d.passes = nil
		d.run(2 * time.Second)
		swapped := len(d.passes) == 1 && d.passes[0].Token.Passes() > geometric.Settled
		t.Logf("next superpeers %v, candidates %v: passes %+v", withSecond, cands, d.passes)
		if swapped != withSecond {
			t.Fatalf("next superpeers reported %v: handed over %v (passes %+v)", withSecond, swapped, d.passes)
		}
		if swapped && d.passes[0].To != "b" && d.passes[0].To != "c" {
			t.Errorf("handed over to %s, want b or c", d.passes[0].To)
		}
		if !swapped && !d.m.geo.holder.Pinned() {
			t.Error("every member reported and s kept its role: its token is not pinned against the forces")
		}
	}
}

// What a member reports as its next superpeer: of the believed
// superpeers other than its own, with room, the one it measures nearest;
// none when it measured none.
func TestGeoNextSuperpeer(t *testing.T) {
	cfg := geoTestConfig("m", 1)
	cfg.Geo.Tokens.Capacity = 4
	d := newGeoDriver(t, cfg)
	g := d.m.geo
	g.feed.Tokens = []TokenPos{
		{Holder: "own", Superpeer: true, Load: 1},
		{Holder: "full", Superpeer: true, Load: 4},
		{Holder: "far", Superpeer: true, Load: 1},
		{Holder: "near", Superpeer: true, Load: 3},
		{Holder: "hot", Superpeer: false},
		{Holder: "unmeasured", Superpeer: true, Load: 1},
	}
	if got := g.nextSuperpeer("own"); got != (PeerRTT{}) {
		t.Errorf("nothing measured: %+v, want none", got)
	}
	g.rtt = map[peer.ID]time.Duration{"own": 1 * ms, "full": 2 * ms, "far": 30 * ms, "near": 10 * ms, "hot": 3 * ms}
	if got, want := g.nextSuperpeer("own"), (PeerRTT{Peer: "near", RTT: 10 * ms}); got != want {
		t.Errorf("next superpeer %+v, want %+v", got, want)
	}
	if got, want := g.nextSuperpeer("near"), (PeerRTT{Peer: "own", RTT: 1 * ms}); got != want {
		t.Errorf("for a member of near: %+v, want %+v", got, want)
	}
}

// A member sends its report as soon as it has measured the candidates
// its superpeer named, in an attach request of its own, not with its
// next renewal an announce interval later (a round of the search took
// two announce intervals so; nodesim, 100 PlanetLab hosts, S = 10,
// seeds 1-16: settled at 106 s on average against 86 s with the early
// report). It sends one report per list of candidates, and renews once
// per announce interval otherwise.
//
// The candidates need not be among the mates the answer names (a roster
// moves): the member keeps their RTTs until it reported. It dropped them
// at its next token round before, as it drops those of peers it no longer
// samples, and never reported on such a list.
func TestGeoReportEarly(t *testing.T) {
	t.Run("mates name the candidates", func(t *testing.T) { reportEarly(t, []peer.ID{"s", "a", "c1", "c2"}) })
	t.Run("mates do not", func(t *testing.T) { reportEarly(t, []peer.ID{"s", "a"}) })
}

func reportEarly(t *testing.T, mates []peer.ID) {
	d := newGeoDriver(t, geoTestConfig("a", 1))
	rtt := map[peer.ID]time.Duration{"s": 10 * ms, "c1": 12 * ms, "c2": 15 * ms}
	d.ping = func(p peer.ID) (time.Duration, error) { return rtt[p], nil }
	d.feed = GeoFeed{Tokens: []TokenPos{{Holder: "s", Token: geometric.Token{Num: 0}, Coord: at(t, 0.01), Superpeer: true, Load: 1}}}
	var cands []peer.ID
	d.attach = func(p peer.ID) AttachDone {
		return AttachDone{To: p, OK: true, Mates: mates, Candidates: cands}
	}
	d.run(30 * time.Second)
	if d.m.GeoState().Superpeer != "s" {
		t.Fatalf("not attached to s: %+v", d.m.GeoState())
	}
	d.requests = nil
	cands = []peer.ID{"c1", "c2"}
	d.run(20 * time.Second)
	var told, report time.Time
	reports := 0
	for i, r := range d.requests {
		if r.to != "s" {
			t.Fatalf("asked %s", r.to)
		}
		if i > 0 && r.rtts == nil && r.at.Sub(d.requests[i-1].at) < 5*time.Second {
			t.Errorf("renewed %v after the last request, within an announce interval", r.at.Sub(d.requests[i-1].at))
		}
		if told.IsZero() {
			told = r.at // the first answer names the candidates
		}
		if r.rtts != nil {
			reports++
			report = r.at
			if want := []time.Duration{10 * ms, 12 * ms, 15 * ms}; !slices.Equal(r.rtts, want) {
				t.Errorf("report %v, want %v", r.rtts, want)
			}
		}
	}
	t.Logf("requests %+v", d.requests)
	if reports != 1 {
		t.Fatalf("%d reports in 20 s, want 1", reports)
	}
	if wait := report.Sub(told); wait > 2500*time.Millisecond {
		t.Errorf("reported %v after the candidates were named, want within a few token intervals", wait)
	}
}

// A member that took its token by a hand-over (geometric.Settled passes
// more) names candidates one announce interval after it took it, the time
// its new members take to attach; one whose token the forces placed,
// swapWarm (a snapshot period) after it took it, when the forces may have
// moved it (MinHold), not swapWarm after its promotion a dwell later.
func TestGeoSwapWarm(t *testing.T) {
	for _, c := range []struct {
		name string
		seq  uint64
		want time.Duration
	}{
		{"handed over", geometric.Settled + 2, 5 * time.Second},
		{"placed by the forces", 2, SnapshotTicks * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := geoTestConfig("s", 1)
			cfg.Geo.Tokens.Capacity = 8
			cfg.Geo.Tokens.MinHold = time.Hour
			d := newGeoDriver(t, cfg)
			d.ping = func(p peer.ID) (time.Duration, error) { return 10 * ms, nil }
			for i, p := range []peer.ID{"s", "p1", "p2", "p3"} {
				d.coords[p] = at(t, float64(i)/1000)
			}
			took := d.now
			d.handOver("x", geometric.Token{Num: 0, Seq: c.seq})
			for i := 0; i < 100 && d.m.GeoState().Role != RoleSuperpeer; i++ {
				d.run(100 * time.Millisecond) // a token the forces placed: promoted after the dwell
			}
			if d.m.GeoState().Role != RoleSuperpeer {
				t.Fatal("not a superpeer")
			}
			named := time.Duration(-1)
			for d.now.Sub(took) < 20*time.Second && named < 0 {
				for _, p := range []peer.ID{"p1", "p2", "p3"} {
					d.step(AttachAsked{From: p, Coord: d.coords[p]})
					if a := d.m.GeoAnswer(); len(a.Candidates) > 0 && named < 0 {
						named = d.now.Sub(took)
					}
				}
				d.run(500 * time.Millisecond)
			}
			if named < c.want || named > c.want+2*time.Second {
				t.Errorf("candidates named %v after it took the token, want from %v to %v", named, c.want, c.want+2*time.Second)
			}
		})
	}
}

// A superpeer that names a new list of candidates in every answer (a
// hostile one, or one whose rounds roll fast) gets at most one early
// report per announce interval from a member, besides its renewals: the
// member does not ask, and ping fresh candidates, at every attachment
// round.
func TestGeoReportEarlyBounded(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("a", 1))
	d.ping = func(p peer.ID) (time.Duration, error) { return 10 * ms, nil }
	d.feed = GeoFeed{Tokens: []TokenPos{{Holder: "s", Token: geometric.Token{Num: 0}, Coord: at(t, 0.01), Superpeer: true, Load: 1}}}
	lists := 0
	d.attach = func(p peer.ID) AttachDone {
		lists++
		c := peer.ID(fmt.Sprintf("c%d", lists))
		return AttachDone{To: p, OK: true, Mates: []peer.ID{p, "a", c}, Candidates: []peer.ID{c}}
	}
	d.run(30 * time.Second)
	d.requests = nil
	d.run(60 * time.Second)
	reports := 0
	for _, r := range d.requests {
		if r.rtts != nil {
			reports++
		}
	}
	t.Logf("%d requests, %d with a report, in 60 s", len(d.requests), reports)
	if len(d.requests) > 2*12+1 || reports < 6 {
		t.Errorf("%d requests (%d reports) in 60 s, want at most two per announce interval of 5 s, and reports", len(d.requests), reports)
	}
}
