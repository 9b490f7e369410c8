package node

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// known lists the peers whose coordinates the machine knows now
// (geocoords.go), sorted.
func known(d *geoDriver) []peer.ID {
	return slices.Sorted(maps.Keys(d.m.geo.coords(d.now)))
}

// A superpeer learns its members' coordinates from their attach requests
// (a valid one, from a member it takes), answers each request with up to
// geoShare of its other members' in turn, and forgets a member's with the
// member; it weighs its members' pull by the swarm's size that the
// holders' loads add up to.
func TestGeoCoordsSuperpeer(t *testing.T) {
	cfg := geoTestConfig("s", 1)
	cfg.Geo.Tokens.Capacity = 6
	d := newGeoDriver(t, cfg)
	d.handOver("x", geometric.Token{Num: 0, Seq: 1})
	d.step(GeoFeed{})
	d.run(7 * time.Second) // promoted after the dwell
	if d.m.GeoState().Role != RoleSuperpeer {
		t.Fatal("not promoted")
	}
	ask := func(p peer.ID, c *coordinate.Coordinate) GeoAnswer {
		d.step(AttachAsked{From: p, Coord: c})
		return d.m.GeoAnswer()
	}
	members := []peer.ID{"m1", "m2", "m3", "m4", "m5", "m6"}
	for i, p := range members {
		if a := ask(p, at(t, float64(i+1)/100)); !a.Yes {
			t.Fatalf("%s refused", p)
		}
	}
	if a := ask("m7", at(t, 0.5)); a.Yes {
		t.Fatal("m7 taken beyond the capacity")
	}
	nan := at(t, 0)
	nan.Vec[1] = math.NaN()
	ask("m1", nan) // an invalid coordinate: the last valid one stands
	ask("m2", nil) // none: likewise
	if got := known(d); !slices.Equal(got, members) {
		t.Fatalf("knows the coordinates of %v, want the members' %v (not the refused m7's)", got, members)
	}
	if c := d.m.geo.memberCoord["m1"]; c.Vec[0] != 0.01 || c.Vec[1] != 0 {
		t.Errorf("m1's coordinate %v, want its last valid one", c.Vec)
	}
	// Two answers to m1 name the other five, four at a time, in turn.
	seen := map[peer.ID]int{}
	for range 2 {
		a := ask("m1", at(t, 0.01))
		if len(a.Coords) != geoShare {
			t.Fatalf("answer with %d coordinates, want %d", len(a.Coords), geoShare)
		}
		for _, pc := range a.Coords {
			if pc.ID == "m1" || pc.Coord.Vec[0] != d.m.geo.memberCoord[pc.ID].Vec[0] {
				t.Fatalf("answer to m1 names %s at %v", pc.ID, pc.Coord.Vec[0])
			}
			seen[pc.ID]++
		}
	}
	if len(seen) != 5 {
		t.Errorf("two answers named %v, want all five other members", seen)
	}
	// The holders' loads give the swarm's size: two holders serving 3
	// and 6 (and one claiming more than the capacity counts for 6).
	d.feed = GeoFeed{Tokens: []TokenPos{
		{Holder: "s", Token: geometric.Token{Num: 0, Seq: 1}, Coord: at(t, 0), Superpeer: true, Load: 6},
		{Holder: "h", Token: geometric.Token{Num: 1}, Coord: at(t, 0.2), Superpeer: true, Load: 1000},
	}}
	d.step(d.feed)
	if n := d.m.geo.population(); n != 14 {
		t.Errorf("population %d, want 2 holders + 6 + 6", n)
	}
	// Members silent for the attachment TTL go, with their coordinates.
	d.run(d.m.geo.attachTTL() + 2*time.Second)
	if got := known(d); !slices.Equal(got, []peer.ID{"h"}) {
		t.Errorf("knows %v after its members went silent, want the other holder h only", got)
	}
}

// A member keeps the coordinates its superpeer sends (at most geoShare, of
// peers the superpeer names as its cluster, valid ones) for the
// attachment TTL; it forgets them when another superpeer takes it.
func TestGeoCoordsMember(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("o", 2))
	d.feed = attachFeed(t, "s1", "s2")
	nan := at(t, 0)
	nan.Vec[0] = math.Inf(1)
	answers := map[peer.ID]AttachDone{
		"s1": {To: "s1", OK: true, Mates: []peer.ID{"s1", "o", "m1", "m2", "m3", "m4"},
			Coords: []PeerCoord{{"m1", at(t, 0.011)}, {"z", at(t, 0.012)}, {"m2", nan}, {"m3", at(t, 0.013)}, {"m4", at(t, 0.014)}}},
		"s2": {To: "s2", OK: true, Mates: []peer.ID{"s2", "o", "n1"}, Coords: []PeerCoord{{"n1", at(t, 0.021)}}},
	}
	var refuse bool
	d.attach = func(p peer.ID) AttachDone {
		if refuse {
			return AttachDone{To: p, Err: fmt.Errorf("no answer")}
		}
		return answers[p]
	}
	d.ping = func(p peer.ID) (time.Duration, error) {
		return map[peer.ID]time.Duration{"s1": 20 * ms, "s2": 90 * ms}[p] + 30*ms, nil
	}
	d.run(2 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Fatalf("attached to %q, want s1", sp)
	}
	if got, want := known(d), []peer.ID{"m1", "m3", "s1", "s2"}; !slices.Equal(got, want) {
		t.Fatalf("knows %v, want %v: the first %d sent, of the cluster's, valid, and the holders", got, want, geoShare)
	}
	// The superpeer stops answering: its mates' coordinates last one
	// attachment TTL after the last yes.
	refuse = true
	d.run(d.m.geo.attachTTL() + 2*time.Second)
	if got := known(d); !slices.Equal(got, []peer.ID{"s1", "s2"}) {
		t.Fatalf("knows %v an attachment TTL after its superpeer's last answer, want the holders only", got)
	}
	// Another superpeer's answer: its mates only.
	refuse = false
	d.m.geo.matesSent(d.now, "s1", answers["s1"].Mates, answers["s1"].Coords)
	d.m.geo.matesOf = "s1"
	d.m.geo.matesSent(d.now, "s2", answers["s2"].Mates, answers["s2"].Coords)
	if got := known(d); !slices.Equal(got, []peer.ID{"n1", "s1", "s2"}) {
		t.Fatalf("knows %v after s2's answer, want s2's mate n1 and the holders", got)
	}
}

// checkKeep fails t unless the peers the node says the driver should keep
// connections to (GeoState.Keep) are its ping targets: its cluster and
// holders, and the random peers drawn now, not the node.
func checkKeep(t *testing.T, d *geoDriver, cluster []peer.ID) {
	t.Helper()
	want := slices.Concat(cluster, d.m.geo.pingRandom)
	slices.Sort(want)
	want = slices.Compact(want)
	if got := d.m.GeoState().Keep; !slices.Equal(got, want) {
		t.Fatalf("keeps connections to %v, want its cluster, holders and random peers %v", got, want)
	}
}

// A node samples a bounded set (pingTargets): the holders, its cluster
// (its superpeer and the mates its answer named) and geoPingRandom of the
// peers it is connected to, drawn again when one is no longer connected
// or does not answer; never the rest of the swarm. Each ping's answer
// carries the answerer's coordinate, which the node fits its own to once
// checked (pingCoord): a NaN component, an error above Vivaldi's largest
// or a height below its floor is no sample.
func TestGeoPingTargets(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("o", 2))
	d.feed = attachFeed(t, "s1", "s2")
	for i := range 40 {
		d.feed.Connected = append(d.feed.Connected, peer.ID(fmt.Sprintf("c%02d", i)))
	}
	d.feed.Connected = append(d.feed.Connected, "s1", "s2", "m1")
	d.attach = func(p peer.ID) AttachDone {
		return AttachDone{To: p, OK: p == "s1", Mates: []peer.ID{"s1", "o", "m1", "m2"}}
	}
	down := map[peer.ID]bool{}
	d.ping = func(p peer.ID) (time.Duration, error) {
		if down[p] {
			return 0, fmt.Errorf("no answer")
		}
		return 30 * ms, nil
	}
	var answer *coordinate.Coordinate // every answer's, when set
	d.pingCoord = func(p peer.ID) *coordinate.Coordinate {
		if answer != nil {
			return answer.Clone()
		}
		return at(t, 0.03)
	}
	d.run(60 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Fatalf("attached to %q, want s1", sp)
	}
	cluster := []peer.ID{"s1", "s2", "m1", "m2"}
	random := map[peer.ID]bool{}
	for _, p := range d.pings {
		if !slices.Contains(cluster, p) {
			random[p] = true
		}
	}
	if len(random) == 0 || len(random) > geoPingRandom {
		t.Fatalf("pinged %d peers outside its cluster and the holders (%v), want 1 to %d", len(random), random, geoPingRandom)
	}
	for _, p := range cluster {
		if !slices.Contains(d.pings, p) {
			t.Errorf("never pinged %s, of its cluster or a holder", p)
		}
	}
	if d.m.geo.badCoords != 0 {
		t.Errorf("%d answers' coordinates refused, want none", d.m.geo.badCoords)
	}
	checkKeep(t, d, cluster)
	// The random peers stop answering: others are drawn, still at most
	// geoPingRandom at a time.
	for p := range random {
		down[p] = true
	}
	d.pings = nil
	d.run(60 * time.Second)
	again := map[peer.ID]bool{}
	for _, p := range d.pings {
		if !slices.Contains(cluster, p) && !random[p] {
			again[p] = true
		}
	}
	if len(again) == 0 {
		t.Errorf("drew no other peer when its random ones stopped answering")
	}
	if n := len(d.m.geo.pingRandom); n > geoPingRandom {
		t.Errorf("%d random peers, want at most %d", n, geoPingRandom)
	}
	checkKeep(t, d, cluster)

	// Bad coordinates: no sample, counted.
	for name, f := range map[string]func(*coordinate.Coordinate){
		"NaN":          func(c *coordinate.Coordinate) { c.Vec[2] = math.NaN() },
		"error 2":      func(c *coordinate.Coordinate) { c.Error = 2 },
		"height 0":     func(c *coordinate.Coordinate) { c.Height = 0 },
		"huge":         func(c *coordinate.Coordinate) { c.Vec[0] = 1e6 },
		"negative err": func(c *coordinate.Coordinate) { c.Error = -0.1 },
	} {
		answer = at(t, 0.03)
		f(answer)
		before, bad := d.m.GeoState().Coord, d.m.geo.badCoords
		d.pings = nil
		d.run(3 * time.Second)
		if len(d.pings) == 0 {
			t.Fatalf("%s: no ping", name)
		}
		if d.m.geo.badCoords == bad {
			t.Errorf("%s: accepted", name)
		}
		if after := d.m.GeoState().Coord; !slices.Equal(before.Vec, after.Vec) || before.Error != after.Error {
			t.Errorf("%s: the coordinate moved from %v to %v", name, before, after)
		}
	}
	// A claim of perfect confidence counts as minPeerError.
	c := at(t, 0.03)
	c.Error = 0
	got, err := pingCoord(c)
	if err != nil || got.Error != minPeerError || c.Error != 0 {
		t.Errorf("an error of 0: %v, %v (the claim's now %v); want %v, the claim untouched", got.Error, err, c.Error, minPeerError)
	}
}

// Nodes leave the origin in different directions: the nudges that keep
// serf off the origin come from a source of each node's own. With one
// source for all, every node's first samples put it at the same point, a
// few microseconds from every other, where serf's height step (divided by
// that distance) threw heights to seconds, and the coordinates of 100
// PlanetLab nodes took minutes to recover.
func TestGeoCoordsStartApart(t *testing.T) {
	var vecs [][]float64
	for _, self := range []string{"a", "b", "c"} {
		m := mustNew(t, geoTestConfig(self, 1))
		remote := at(t, 0) // a peer at the origin, as every peer starts
		if _, err := m.geo.client.Sample("x", remote, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		vecs = append(vecs, m.geo.client.Coordinate().Vec)
	}
	for i := range vecs {
		for j := range i {
			var dot, ni, nj float64
			for k := range vecs[i] {
				dot, ni, nj = dot+vecs[i][k]*vecs[j][k], ni+vecs[i][k]*vecs[i][k], nj+vecs[j][k]*vecs[j][k]
			}
			if c := dot / math.Sqrt(ni*nj); c > 0.99 {
				t.Errorf("nodes %d and %d left the origin in the same direction (cosine %.4f): %v and %v", j, i, c, vecs[j], vecs[i])
			}
		}
	}
}
