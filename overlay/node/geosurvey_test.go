package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The survey of a new network, at its first superpeer s: s starts the
// network (token 0 after the warm-up, promoted after the dwell) with
// three tokens and eight members on a line, in three groups: near s, at
// 100 ms and at 200 ms. Promoted, s names landmarks (peers it is
// connected to) and says it surveys; its members report their RTTs to
// them (those of the far groups, a majority); an announce interval
// later it names the central member of each far group for tokens 1 and 2,
// itself for token 0, and pins its token. (Its search afterwards, with a
// larger margin, is TestGeoSwapMarginGrows'.)
func TestGeoSurveySuperpeer(t *testing.T) {
	pos := map[peer.ID]float64{"s": 0, "p1": 1, "p2": 2, "p3": 100, "p4": 101, "p5": 102, "p6": 200, "p7": 201, "p8": 202}
	rtt := func(a, b peer.ID) time.Duration {
		d := pos[a] - pos[b]
		return time.Duration(max(d, -d) * float64(ms))
	}
	cfg := geoTestConfig("s", 3)
	cfg.Bootstrap = false // it starts the network
	cfg.Geo.Tokens.Capacity = 8
	d := newGeoDriver(t, cfg)
	d.ping = func(p peer.ID) (time.Duration, error) { return rtt("s", p), nil }
	var members []peer.ID
	for p, x := range pos {
		d.coords[p] = at(t, x/1000)
		if p != "s" {
			members = append(members, p)
		}
	}
	slices.Sort(members)
	d.feed = GeoFeed{Connected: members}
	d.run(23 * time.Second) // warm-up 15 s, dwell 5 s
	if st := d.m.GeoState(); st.Token != 0 || st.Role != RoleSuperpeer {
		t.Fatalf("at %v: token %d, role %v; want token 0, a superpeer", d.now.Sub(t0), st.Token, st.Role)
	}
	ask := func(p peer.ID, rtts []time.Duration) GeoAnswer {
		d.step(GeoFeed{Connected: members})
		d.step(AttachAsked{From: p, RTTs: rtts, Coord: d.coords[p]})
		return d.m.GeoAnswer()
	}
	var landmarks []peer.ID
	for _, p := range members {
		a := ask(p, nil)
		if !a.Yes || !a.Surveying || len(a.Placement) != 0 {
			t.Fatalf("%s's answer: yes %v, surveying %v, placement %v; want yes, surveying, none", p, a.Yes, a.Surveying, a.Placement)
		}
		landmarks = a.Candidates
	}
	if len(landmarks) != len(members) {
		t.Fatalf("landmarks %v, want every member (at most %d)", landmarks, SurveyLandmarks)
	}
	if !d.m.geo.holder.Pinned() {
		t.Error("the token is not pinned while its holder surveys")
	}
	for _, p := range members[2:] { // a majority of eight: the far groups
		rtts := []time.Duration{rtt(p, "s")}
		for _, c := range landmarks {
			rtts = append(rtts, max(rtt(p, c), time.Nanosecond))
		}
		ask(p, rtts)
	}
	d.run(2 * time.Second)
	if a := ask("p1", nil); len(a.Placement) != 0 || !a.Surveying {
		t.Fatalf("decided within an announce interval: placement %v", a.Placement)
	}
	d.run(5 * time.Second)
	a := ask("p1", nil)
	if len(a.Placement) == 3 {
		slices.Sort(a.Placement[1:]) // tokens 1 and 2 in the landmarks' order
	}
	if want := []peer.ID{"s", "p4", "p7"}; !slices.Equal(a.Placement, want) || a.Surveying {
		t.Fatalf("placement %v, surveying %v; want %v, done", a.Placement, a.Surveying, want)
	}
	if !d.m.geo.holder.Pinned() {
		t.Error("the token is not pinned after the survey")
	}
}

// A member of the first cluster: told that its superpeer h surveys, it
// does not re-home a missing token by the hash, even where the hash names
// it; named by the placement, it takes its token, pinned; and when the
// node the placement names for a token does not take it, the hash rule
// applies again once the placement is surveyWait old.
func TestGeoSurveyMember(t *testing.T) {
	cfg := geoTestConfig("o", 3)
	cfg.Geo.Tokens.Capacity = 8
	d := newGeoDriver(t, cfg)
	d.m.Step(d.now, view("o", "h", "x"))
	d.feed = attachFeed(t, "h")
	d.feed.Tokens[0].Load = 2
	d.feed.Connected = []peer.ID{"h", "x"}
	// The hash names o for one token and x for the other, or o for both.
	hash := map[int]geometric.ID{}
	for num := 1; num < 3; num++ {
		hash[num] = geometric.Rehome(d.m.geo.seed, num, []geometric.ID{"o", "x"}, nil)
	}
	var answer AttachDone
	d.attach = func(p peer.ID) AttachDone {
		a := answer
		a.To, a.OK, a.Mates = p, true, []peer.ID{"h", "o", "x"}
		return a
	}
	d.run(10 * time.Second)
	answer.Surveying = true // heard from the request at 11.6 s
	d.run(11 * time.Second) // the hash would re-home at 20 s (the warm-up, then an announce interval)
	if st := d.m.GeoState(); st.Superpeer != "h" || st.Token >= 0 {
		t.Fatalf("while h surveys: superpeer %q, token %d; want h and none (the hash names %v)", st.Superpeer, st.Token, hash)
	}
	// The placement (heard from the request at 22.2 s): x for token 1, o
	// for token 2.
	answer = AttachDone{Placement: []peer.ID{"h", "x", "o"}}
	d.run(6 * time.Second)
	if st := d.m.GeoState(); st.Token != 2 || !d.m.geo.holder.Pinned() {
		t.Fatalf("named for token 2: holds %d, pinned %v", st.Token, d.m.geo.holder.Pinned())
	}
	// x never takes token 1: after surveyWait the hash rule decides.
	if hash[1] == "o" {
		t.Log("the hash names o for token 1, which o cannot take while it holds token 2")
	}
	d2 := newGeoDriver(t, cfg)
	d2.m.Step(d2.now, view("o", "h", "x"))
	d2.feed = d.feed
	d2.attach = d.attach
	answer = AttachDone{Placement: []peer.ID{"h", "x", "x"}}
	var took []string
	for range 40 {
		d2.run(time.Second)
		if st := d2.m.GeoState(); st.Token >= 0 {
			took = append(took, fmt.Sprintf("%d at %v", st.Token, d2.now.Sub(t0)))
			break
		}
	}
	want := hash[1] == "o" || hash[2] == "o"
	if got := len(took) > 0; got != want {
		t.Fatalf("the placement names x for both tokens, which it never takes: o took %v; the hash names %v", took, hash)
	}
	if want && d2.now.Sub(d2.m.geo.placedAt) < d2.m.geo.surveyWait() {
		t.Errorf("took %v, before the placement (heard at %v) was surveyWait old", took, d2.m.geo.placedAt.Sub(t0))
	}
	// A superpeer that says it surveys in every answer and never names
	// anyone holds the re-homing back for surveyWait from the first
	// answer that said so, not for good.
	d3 := newGeoDriver(t, cfg)
	d3.m.Step(d3.now, view("o", "h", "x"))
	d3.feed = d.feed
	d3.attach = d.attach
	answer = AttachDone{Surveying: true}
	d3.run(40 * time.Second)
	if got := d3.m.GeoState().Token >= 0; got != want {
		t.Errorf("h says it surveys in every answer: o holds a token %v, want %v (the hash names %v)", got, want, hash)
	}
}
