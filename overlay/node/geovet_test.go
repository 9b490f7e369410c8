package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The liar check from several vantage points (geovet.go, issue 19,
// finding 10). Holder a leaves and would pass its token to b, which
// claims to sit 5 ms from a; a measures 80 ms (its own check fails).
// Four peers v1-v4 sit around b's claimed spot and are asked the RTT they
// measure to b: when at least three checks of five find b nearer than
// measured, b is distrusted; when a measured b on a bad day and the
// others measure what b's claim predicts, b is trusted (the holder's
// check alone, Vantage 1, distrusts it). An answer that does not come is
// no check.
func TestGeoVetVantagePoints(t *testing.T) {
	for _, c := range []struct {
		name    string
		vantage int
		rtts    []time.Duration // v1-v4's answers; 0: no answer
		trust   bool
	}{
		{"liar", 0, []time.Duration{90 * ms, 85 * ms, 95 * ms, 80 * ms}, false},
		{"liar, two answers", 0, []time.Duration{90 * ms, 0, 95 * ms, 0}, false},
		{"honest, the holder's measurement off", 0, []time.Duration{8 * ms, 9 * ms, 7 * ms, 10 * ms}, true},
		{"honest, one vantage point off", 0, []time.Duration{8 * ms, 90 * ms, 7 * ms, 10 * ms}, true},
		{"the holder and one vantage point, the others silent", 0, []time.Duration{0, 90 * ms, 0, 0}, false},
		{"the holder alone", 1, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := geoTestConfig("a", 1)
			cfg.Geo.Vantage = c.vantage
			d := newGeoDriver(t, cfg)
			d.handOver("k", geometric.Token{Num: 0, Seq: 1})
			coords := map[peer.ID]*coordinate.Coordinate{"a": at(t, 0), "b": at(t, 0.005)}
			for i := range 4 {
				coords[peer.ID(fmt.Sprintf("v%d", i+1))] = at(t, 0.005+float64(i+1)/1000)
			}
			d.coords, d.feed = coords, GeoFeed{}
			d.run(2 * time.Second) // a token round: the snapshot
			d.m.geo.rtt["b"] = 80 * ms
			d.m.Step(d.now, GeoLeave{})
			rd := d.m.Ready()
			asked := rd.Geo.Vouch
			want := 4
			if c.vantage == 1 {
				want = 0
			}
			if len(asked) != want {
				t.Fatalf("asked %v, want the %d peers nearest b's claim", asked, want)
			}
			for _, v := range asked {
				i := int(v.To[1] - '1')
				in := VouchDone{From: v.To, Of: v.Of, RTT: c.rtts[i]}
				if c.rtts[i] == 0 {
					in.Err = fmt.Errorf("no answer")
				}
				d.m.Step(d.now, in)
			}
			rd = d.m.Ready()
			passed := slices.ContainsFunc(rd.Geo.Passes, func(p TokenPass) bool { return p.To == "b" })
			if passed != c.trust {
				t.Errorf("passes %v, want a pass to b: %v", rd.Geo.Passes, c.trust)
			}
			checks, _ := d.m.VetChecks()
			if d.m.Distrusted() != map[bool]uint64{true: 0, false: 1}[c.trust] || checks != 1 {
				t.Errorf("distrusted %d of %d checks", d.m.Distrusted(), checks)
			}
		})
	}
}

// A vantage point's answers (vouchAsked; hostile-peer audit, finding A:
// a stranger's request made the live node ping the peer named, one ping
// per request, and the peer named banned it for the rate). It answers
// anyone with the RTT it keeps; it measures one only for a holder it
// believes, at most once a ping interval for each peer asked about and
// for each holder asking, and vouchBudget times in all; else it answers
// none.
func TestGeoVouchBudget(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("v", 6))
	var holders []TokenPos
	for i := range 6 {
		holders = append(holders, TokenPos{Holder: peer.ID(fmt.Sprintf("h%d", i+1)), Token: tok(i, 1), Coord: at(t, float64(i)/100)})
	}
	d.feed = GeoFeed{Tokens: holders}
	d.step(d.feed)
	ask := func(from, of peer.ID) GeoAnswer {
		d.step(VouchAsked{From: from, Of: of})
		return d.m.GeoAnswer()
	}
	for i := range 300 {
		if a := ask(peer.ID(fmt.Sprintf("z%d", i%3)), "x"); a.Measure || a.RTT != 0 {
			t.Fatalf("a stranger's request %d: %+v, want none and no measurement", i, a)
		}
	}
	if m, n := d.m.VouchAnswers(); m != 0 || n != 300 {
		t.Fatalf("%d measured, %d answered with none; want 0 and 300", m, n)
	}
	d.m.geo.rtt["k"] = 30 * ms
	if a := ask("z0", "k"); a.RTT != 30*ms || a.Measure {
		t.Errorf("a stranger asked of a peer measured: %+v, want the 30 ms kept", a)
	}
	for _, c := range []struct {
		from, of peer.ID
		measure  bool
	}{
		{"h1", "x", true},
		{"h1", "y", false}, // h1 had its measurement this interval
		{"h2", "x", false}, // x was measured this interval
		{"h2", "y", true},
		{"h3", "w1", true},
		{"h4", "w2", true},
		{"h5", "w3", false}, // the budget: 4 an interval
		{"v", "x1", false},  // not a holder it believes (itself)
	} {
		if a := ask(c.from, c.of); a.Measure != c.measure {
			t.Errorf("%s asks of %s: measure %v, want %v", c.from, c.of, a.Measure, c.measure)
		}
	}
	d.now = d.now.Add(time.Second) // a ping interval on
	if a := ask("h2", "x"); !a.Measure {
		t.Error("h2 asks of x a ping interval later: no measurement")
	}
}
