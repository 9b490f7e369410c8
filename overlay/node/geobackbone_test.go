package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/geometric"
)

// What a superpeer relays in a yes: itself first, then the geoNearby
// superpeers with room nearest the member's coordinate, then
// geoNearbyRotate others in turn; none full, none that is not a
// superpeer, none twice.
func TestGeoNearby(t *testing.T) {
	d := servingAmong(t, 9)
	d.feed.Tokens[1].Load = d.m.geo.tc.Capacity // s2 full
	d.feed.Tokens[2].Superpeer = false          // s3 in transit
	d.step(d.feed)
	d.step(AttachAsked{From: "m", Coord: at(t, 0.075)})
	a := d.m.GeoAnswer()
	if !a.Yes {
		t.Fatal("refused")
	}
	var got []peer.ID
	for _, tp := range a.Nearby {
		got = append(got, tp.Holder)
	}
	if len(a.Rotated) != 0 || a.NearbyHeld {
		t.Fatalf("in turn %v, held %v: want none, and the nearest sent", a.Rotated, a.NearbyHeld)
	}
	// Nearest 0.075: s7 and s8, then s6, s5, s4 and s1 (s2 full, s3 no
	// superpeer); no others left for their turn.
	if want := []peer.ID{"s", "s7", "s8", "s6", "s5", "s4", "s1"}; !slices.Equal(got, want) {
		t.Fatalf("nearby %v, want %v", got, want)
	}
	// Five more superpeers, far (s10-s14, at 0.2 and beyond): the nearest
	// six, then two of the far ones, consecutive in ID order from a point
	// drawn for each answer: each in some answer of 30.
	var far []peer.ID
	for i := 10; i < 15; i++ {
		far = append(far, peer.ID(fmt.Sprintf("s%d", i)))
		d.feed.Tokens = append(d.feed.Tokens, TokenPos{Holder: far[len(far)-1], Token: geometric.Token{Num: i - 1}, Coord: at(t, float64(i)/50), Superpeer: true})
	}
	seen := map[peer.ID]int{}
	for range 30 {
		d.step(d.feed)
		d.step(AttachAsked{From: "m", Coord: at(t, 0.075)})
		ans := d.m.GeoAnswer()
		nb := append(ans.Nearby, ans.Rotated...)
		got = got[:0]
		for _, tp := range nb[:7] {
			got = append(got, tp.Holder)
		}
		if want := []peer.ID{"s", "s7", "s8", "s6", "s5", "s4", "s1"}; !slices.Equal(got, want) {
			t.Fatalf("nearby %v, want %v first", got, want)
		}
		if len(nb) != 9 {
			t.Fatalf("nearby %d, want 9", len(nb))
		}
		a, b := nb[7].Holder, nb[8].Holder
		if i, j := slices.Index(far, a), slices.Index(far, b); i < 0 || j != (i+1)%len(far) {
			t.Fatalf("in turn %s and %s, want two consecutive of %v", a, b, far)
		}
		seen[a]++
		seen[b]++
	}
	for _, p := range far {
		if seen[p] == 0 {
			t.Errorf("%s never relayed in 30 answers (%v)", p, seen)
		}
	}
	if own := a.Nearby[0]; own.Token.Num != 0 || !own.Superpeer || own.Load != 1 {
		t.Errorf("own position %+v: want token 0, a superpeer serving 1", own)
	}
}

// A member names the nearest superpeers it holds from its superpeer by
// their digest, while they are fresh, and the superpeer's yes then leaves
// them out: the member keeps them, and takes the ones relayed in turn and
// the superpeer's own position anew. A digest that is not the
// superpeer's nearest gets them in full.
func TestGeoNearbyHeld(t *testing.T) {
	d := servingAmong(t, 12)
	d.step(d.feed)
	d.step(AttachAsked{From: "m", Coord: at(t, 0.075)})
	full := d.m.GeoAnswer()
	if full.NearbyHeld || len(full.Nearby) != 1+geoNearby || len(full.Rotated) != geoNearbyRotate {
		t.Fatalf("no digest: held %v, %d nearby and %d in turn; want the nearest in full, %d and %d", full.NearbyHeld, len(full.Nearby), len(full.Rotated), 1+geoNearby, geoNearbyRotate)
	}
	digest := NearDigest(full.Nearby[1:])
	d.step(AttachAsked{From: "m", Coord: at(t, 0.075), Near: digest})
	held := d.m.GeoAnswer()
	if !held.NearbyHeld || len(held.Nearby) != 1 || held.Nearby[0].Holder != "s" || len(held.Rotated) != geoNearbyRotate {
		t.Fatalf("the nearest's digest: held %v, nearby %v, %d in turn; want held, the superpeer's own position alone, %d in turn", held.NearbyHeld, held.Nearby, len(held.Rotated), geoNearbyRotate)
	}
	d.step(AttachAsked{From: "m", Coord: at(t, 0.075), Near: digest + 1})
	if a := d.m.GeoAnswer(); a.NearbyHeld || len(a.Nearby) != 1+geoNearby {
		t.Fatalf("another digest: held %v, %d nearby; want the nearest in full", a.NearbyHeld, len(a.Nearby))
	}
	// The member's side.
	m := newGeoDriver(t, geoTestConfig("o", 14))
	g := m.m.geo
	if got := g.nearHeld(m.now, "s"); got != 0 {
		t.Fatalf("digest %d before any yes, want none", got)
	}
	g.relayed(m.now, "s", full.Nearby, false, full.Rotated, nil)
	if got := g.nearHeld(m.now, "s"); got != digest {
		t.Fatalf("digest %d after a full yes, want %d", got, digest)
	}
	if got := g.nearHeld(m.now, "s1"); got != 0 {
		t.Fatalf("digest %d for another superpeer, want none", got)
	}
	later := m.now.Add(g.nearKeptFor() - time.Second)
	g.relayed(later, "s", held.Nearby, true, held.Rotated, nil)
	var want []peer.ID
	for _, tp := range append(slices.Clone(full.Nearby), held.Rotated...) {
		want = append(want, tp.Holder)
	}
	var got []peer.ID
	for _, tp := range g.near {
		got = append(got, tp.Holder)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after a held yes the member holds %v, want %v (its own nearest, the new ones in turn)", got, want)
	}
	if got := g.nearHeld(later, "s"); got != digest {
		t.Fatalf("digest %d after a held yes, want %d still", got, digest)
	}
	if got := g.nearHeld(m.now.Add(g.nearKeptFor()), "s"); got != 0 {
		t.Fatalf("digest %d once the nearest are %v old, want none: the next yes sends them in full", got, g.nearKeptFor())
	}
	// A yes that says held from a superpeer nothing is held of: its own
	// position and those in turn alone.
	g.relayed(later, "s1", held.Nearby, true, held.Rotated, nil)
	if len(g.near) != 1+geoNearbyRotate || g.nearHeld(later, "s1") != 0 {
		t.Fatalf("held from a superpeer nothing is held of: near %v, digest %d; want 3 and none", g.near, g.nearHeld(later, "s1"))
	}
}

// A member takes its superpeer's relay as places to ask, never over what
// it hears: a relayed holder or token that a claim it hears names is left
// out, believed or not; and the relay counts only while it is attached to
// the superpeer that sent it. The superpeer's own position names the
// cluster's token, which the member's topics follow.
func TestGeoRelayed(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("o", 3))
	g := d.m.geo
	near := []TokenPos{
		{Holder: "s1", Token: geometric.Token{Num: 0, Seq: 4}, Coord: at(t, 0.01), Superpeer: true, Load: 1},
		{Holder: "s2", Token: geometric.Token{Num: 1}, Coord: at(t, 0.02), Superpeer: true},
		{Holder: "o", Token: geometric.Token{Num: 2}, Coord: at(t, 0.02), Superpeer: true}, // itself: dropped
	}
	g.relayed(d.now, "s1", near, false, nil, nil)
	g.attached = "s1"
	holders := func() (out []peer.ID) {
		for _, tp := range g.relayedPositions() {
			out = append(out, tp.Holder)
		}
		return out
	}
	if got := holders(); !slices.Equal(got, []peer.ID{"s1", "s2"}) || g.spToken != 0 || g.clusterToken != -1 {
		t.Fatalf("relayed %v, topic token %d, cluster token %d; want s1 and s2, the topic of token 0, and no cluster token (the election's is the believed report's, not the relay's)",
			got, g.spToken, g.clusterToken)
	}
	g.attachOK = d.now
	if tp := g.topics(d.now); tp.All || tp.Cluster != 0 {
		t.Errorf("a member of s1 hears %+v, want token 0's topic only", tp)
	}
	// No yes from s1 for two announce intervals: the backbone too.
	if tp := g.topics(d.now.Add(11 * time.Second)); !tp.All || tp.Cluster != 0 {
		t.Errorf("a member that s1 has not answered for 11 s hears %+v, want the backbone and token 0's topic", tp)
	}
	// A holder in transit hears the backbone and its superpeer's
	// cluster, not its own token's (which the election takes for its
	// cluster's token).
	if err := g.holder.Receive(geometric.Token{Num: 2, Seq: 1 << 32}, d.now); err != nil {
		t.Fatal(err)
	}
	g.clusterToken = 2
	if tp := g.topics(d.now); !tp.All || tp.Cluster != 0 {
		t.Errorf("a holder in transit attached to s1 hears %+v, want the backbone and token 0's topic", tp)
	}
	g.holder.Yield()
	// s1 passed token 0 on: y's claim, heard on the cluster's topic, not
	// believed yet.
	g.claims = []TokenPos{{Holder: "y", Token: geometric.Token{Num: 0, Seq: 5}, Coord: at(t, 0.01), Giver: "s1"}}
	if got := holders(); !slices.Equal(got, []peer.ID{"s2"}) {
		t.Errorf("relayed %v after y claimed s1's token, want s2", got)
	}
	// What a member takes of what it hears on its cluster's topic: claims
	// on its cluster's token, and its mates'; not a stranger's claim on
	// another token (anyone may publish there, and the member does not
	// hear that token's holder to oppose it).
	g.heard = GeoTopics{Cluster: 0}
	g.mates, g.matesOf = []peer.ID{"s1", "o", "m"}, "s1"
	claims := []TokenPos{
		{Holder: "y", Token: geometric.Token{Num: 0, Seq: 5}, Giver: "s1"},
		{Holder: "m", Token: geometric.Token{Num: 2, Seq: 3}, Giver: "q"},
		{Holder: "z", Token: geometric.Token{Num: 1, Seq: 9 << 32}, Coord: at(t, 0), Superpeer: true},
	}
	var kept []peer.ID
	for _, c := range g.heardClaims(claims) {
		kept = append(kept, c.Holder)
	}
	if !slices.Equal(kept, []peer.ID{"y", "m"}) {
		t.Errorf("a member takes the claims of %v, want y (its cluster's token) and m (a mate)", kept)
	}
	g.heard = GeoTopics{All: true, Cluster: -1}
	if got := g.heardClaims(claims); len(got) != 3 {
		t.Errorf("a node on the backbone takes %d claims of 3", len(got))
	}
	g.attached = "s2"
	if got := holders(); len(got) != 0 {
		t.Errorf("relayed %v once attached to another superpeer, want none", got)
	}
}

// TestGeoMoveKeepsNewCluster: a member moves from s2's cluster (token 1)
// to s1 (token 0), clearly nearer by the relay. Until it hears s1's report
// on token 0's topic, its feed is still token 1's, where s2 claims token 1
// as a superpeer. That claim is not one on s1's cluster's token: the
// member must not take it for a mate's takeover of s1's cluster and
// abandon s1 (found with 12 processes on loopback: members hopped between
// two live superpeers every 15 s and the network never held still).
func TestGeoMoveKeepsNewCluster(t *testing.T) {
	cfg := geoTestConfig("o", 2)
	cfg.Election = "bully"
	d := newGeoDriver(t, cfg)
	d.m.Step(d.now, view("o", "s1", "s2"))
	s1 := TokenPos{Holder: "s1", Token: geometric.Token{Num: 0}, Coord: at(t, 0.01), Superpeer: true}
	s2 := TokenPos{Holder: "s2", Token: geometric.Token{Num: 1}, Coord: at(t, 0.02), Superpeer: true}
	topic := func(num int) GeoFeed {
		f := GeoFeed{Connected: []peer.ID{"s1", "s2"}}
		for _, tp := range []TokenPos{s1, s2} {
			if tp.Token.Num == num {
				f.Tokens = append(f.Tokens, tp)
			}
		}
		return f
	}
	d.feed = topic(1)
	rtt := map[peer.ID]time.Duration{"s1": 60 * ms, "s2": 50 * ms}
	d.ping = func(p peer.ID) (time.Duration, error) { return rtt[p], nil }
	d.attach = func(p peer.ID) AttachDone {
		own, other := s1, s2
		if p == "s2" {
			own, other = s2, s1
		}
		return AttachDone{To: p, OK: true, Mates: []peer.ID{p, "o"}, Nearby: []TokenPos{own, other}}
	}
	d.run(3 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "s2" {
		t.Fatalf("attached to %q, want s2", sp)
	}
	// The superpeer leads its cluster's election, as its heartbeats say.
	d.step(ElectionMessage{Msg: classic.Message{Type: classic.MsgOK, From: "s2", To: "o"}})
	d.step(ElectionMessage{Msg: classic.Message{Type: classic.MsgCoordinator, From: "s2", To: "o", Leader: "s2"}})
	beating := func(dur time.Duration, until func() bool) {
		for end := d.now.Add(dur); d.now.Before(end) && !until(); {
			d.run(100 * ms)
			sp := classic.ID(d.m.GeoState().Superpeer)
			d.step(ElectionMessage{Msg: classic.Message{Type: classic.MsgHeartbeat, From: sp, To: "o", Leader: sp}})
		}
	}
	never := func() bool { return false }
	beating(10*time.Second, never)
	if l := d.m.leaderOf("s2"); l != "s2" {
		t.Fatalf("the election of s2's cluster names %q, want s2", l)
	}
	rtt["s1"] = 20 * ms
	beating(20*time.Second, func() bool { return d.m.GeoState().Superpeer == "s1" })
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Fatalf("attached to %q, want s1, clearly nearer", sp)
	}
	// Still on token 1's topic for a while (the driver joins token 0's
	// topic, and s1 republishes its report an announce interval later).
	beating(4*time.Second, never)
	d.feed = topic(0)
	beating(20*time.Second, never)
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Errorf("attached to %q, want s1", sp)
	}
	if !slices.Equal(d.detached, []peer.ID{"s2"}) {
		t.Errorf("told %v it left them, want s2 once", d.detached)
	}
	for _, n := range d.notes {
		if strings.Contains(n.Msg, "outside our roster") {
			t.Errorf("%s %v", n.Msg, n.Args)
		}
	}
}

// servingAmong is the driver of superpeer s (token 0 of 14) whose feed
// holds superpeers s1 to s<n-1>, si serving token i at i/100 s.
func servingAmong(t *testing.T, n int) *geoDriver {
	t.Helper()
	d := newGeoDriver(t, geoTestConfig("s", 14))
	d.promote(geometric.Token{Num: 0, Seq: 1})
	d.feed = GeoFeed{}
	for i := 1; i < n; i++ {
		d.feed.Tokens = append(d.feed.Tokens, TokenPos{Holder: peer.ID(fmt.Sprintf("s%d", i)), Token: geometric.Token{Num: i}, Coord: at(t, float64(i)/100), Superpeer: true})
	}
	return d
}
