package node

import (
	"maps"
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
	surveying := func() bool { return d.m.geo.search != nil && d.m.geo.search.survey }
	var landmarks []peer.ID
	for _, p := range members {
		a := ask(p, nil)
		if !a.Yes || !surveying() || a.Rehome != nil {
			t.Fatalf("%s's answer: yes %v, surveying %v, order %+v; want yes, surveying, none", p, a.Yes, surveying(), a.Rehome)
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
	if a := ask("p1", nil); !surveying() || a.Rehome != nil {
		t.Fatalf("decided within an announce interval: order %+v", a.Rehome)
	}
	d.run(5 * time.Second)
	if surveying() || len(d.m.geo.placement) != 3 {
		t.Fatalf("surveying %v, placement %v; want done", surveying(), d.m.geo.placement)
	}
	// The tokens the placement names holders for are never heard of: s,
	// their sponsor (the only superpeer with members), names each holder
	// in its answers to it alone, once the token has been missing an
	// announce interval.
	orders := map[peer.ID]int{}
	for range 10 {
		d.run(time.Second)
		for _, p := range members {
			if a := ask(p, nil); a.Rehome != nil {
				if !a.Rehome.Survey || a.Rehome.Token.Seq != geometric.Rehomed(a.Rehome.Token.Num, 0).Seq {
					t.Errorf("%s ordered %+v: want a placement by survey", p, *a.Rehome)
				}
				orders[p] = a.Rehome.Token.Num
			}
		}
	}
	// Tokens 1 and 2 in the landmarks' order.
	if want1, want2 := map[peer.ID]int{"p4": 1, "p7": 2}, map[peer.ID]int{"p4": 2, "p7": 1}; !maps.Equal(orders, want1) && !maps.Equal(orders, want2) {
		t.Fatalf("orders %v; want p4 and p7 named for tokens 1 and 2", orders)
	}
	if !d.m.geo.holder.Pinned() {
		t.Error("the token is not pinned after the survey")
	}
}

// A member hears only its cluster's topic, and re-homes nothing on its
// own: tokens 1 and 2 are missing from what it hears, and it takes none
// (before, the hash would have had it re-home one 20 s in). Its superpeer's
// order it takes: pinned when the survey named it; a member that holds a
// token takes no other; a private one none.
func TestGeoRehomeOrdered(t *testing.T) {
	cfg := geoTestConfig("o", 3)
	cfg.Geo.Tokens.Capacity = 8
	member := func() (*geoDriver, *AttachDone) {
		d := newGeoDriver(t, cfg)
		d.m.Step(d.now, view("o", "h", "x"))
		d.feed = attachFeed(t, "h")
		d.feed.Tokens[0].Load = 2
		d.feed.Connected = []peer.ID{"h", "x"}
		answer := &AttachDone{}
		d.attach = func(p peer.ID) AttachDone {
			a := *answer
			a.To, a.OK, a.Mates = p, true, []peer.ID{"h", "o", "x"}
			a.Nearby = []TokenPos{d.feed.Tokens[0]}
			return a
		}
		return d, answer
	}
	d, answer := member()
	d.run(40 * time.Second)
	if st := d.m.GeoState(); st.Superpeer != "h" || st.Token >= 0 {
		t.Fatalf("superpeer %q, token %d; want h and none", st.Superpeer, st.Token)
	}
	if tp := d.m.geo.heard; tp.All || tp.Cluster != 0 {
		t.Errorf("a member hears %+v; want only its cluster's topic (token 0)", tp)
	}
	ordered := func(d *geoDriver, answer *AttachDone, o RehomeOrder) {
		*answer = AttachDone{Rehome: &o}
		d.run(6 * time.Second) // the next renewal, an announce interval after the last
		*answer = AttachDone{}
	}
	ordered(d, answer, RehomeOrder{Token: geometric.Rehomed(2, 0), Survey: true})
	if st := d.m.GeoState(); st.Token != 2 || !d.m.geo.holder.Pinned() || d.m.geo.placed == nil || d.m.geo.placed.replaced != "" {
		t.Fatalf("ordered to take token 2 by survey: holds %d, pinned %v, placement %+v", st.Token, d.m.geo.holder.Pinned(), d.m.geo.placed)
	}
	if tp := d.m.geo.heard; !tp.All || tp.Cluster != 0 {
		t.Errorf("a member holding a token hears %+v; want the backbone and its cluster", tp)
	}
	ordered(d, answer, RehomeOrder{Token: geometric.Rehomed(1, 0)})
	if st := d.m.GeoState(); st.Token != 2 {
		t.Errorf("a holder ordered to take another token holds %d, want 2", st.Token)
	}
	// What a member refuses of its superpeer's word: a token of epoch 0
	// (the network's first placement), one near the counter's end, a
	// placement with passes, a token out of range (3 of 3), its own
	// cluster's token, a token it hears a claim on. Then a later placement naming the holder it replaces,
	// not by survey: taken, the holder kept (the node gives way if it is
	// alive), not pinned.
	d2, answer2 := member()
	d2.run(20 * time.Second)
	d2.feed.Tokens = append(d2.feed.Tokens, TokenPos{Holder: "x", Token: geometric.Token{Num: 2, Seq: 3}, Coord: at(t, 0.02)}) // a mate in transit
	for _, o := range []RehomeOrder{
		{Token: geometric.Token{Num: 1}, Replaced: "z"},
		{Token: geometric.Token{Num: 1, Seq: 1 << 31 << 32}, Replaced: "z"},
		{Token: geometric.Token{Num: 1, Seq: 2<<32 | 1}, Replaced: "z"},
		{Token: geometric.Rehomed(3, 1<<32), Replaced: "z"},
		{Token: geometric.Rehomed(0, 1<<32), Replaced: "h"},
		{Token: geometric.Rehomed(2, 1<<32), Replaced: "z"},
	} {
		ordered(d2, answer2, o)
		if st := d2.m.GeoState(); st.Token >= 0 {
			t.Fatalf("took token %d on the order %+v", st.Token, o)
		}
	}
	ordered(d2, answer2, RehomeOrder{Token: geometric.Rehomed(1, 1<<32), Replaced: "z"})
	if st := d2.m.GeoState(); st.Token != 1 || d2.m.geo.holder.Pinned() || d2.m.geo.placed == nil || d2.m.geo.placed.replaced != "z" {
		t.Errorf("ordered to take token 1 by the hash: holds %d, pinned %v, placement %+v", st.Token, d2.m.geo.holder.Pinned(), d2.m.geo.placed)
	}
	d3, answer3 := member()
	d3.step(Reachability{Private: true})
	d3.run(20 * time.Second)
	ordered(d3, answer3, RehomeOrder{Token: geometric.Rehomed(1, 0)})
	if st := d3.m.GeoState(); st.Token >= 0 {
		t.Errorf("a private member took token %d", st.Token)
	}
}
