package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The peers of a cluster that say they are private or flapping (the attach
// request's flags, relayed by the superpeer's roster: GeoAnswer.Demoted)
// take no token and rank last, whatever the cluster-scoped view knows.

// A superpeer lists in its answers the members whose last request said
// they are private or flapping, itself when it is private; a member's
// later request without the flag lifts it. The superpeer ranks them last
// in its cluster's election.
func TestGeoAnswersDemoted(t *testing.T) {
	cfg := geoTestConfig("s", 1)
	cfg.Geo.Tokens.Capacity = 3
	d := newGeoDriver(t, cfg)
	d.promote(geometric.Token{Num: 0, Seq: 1})
	ask := func(in AttachAsked) GeoAnswer {
		t.Helper()
		d.step(in)
		a := d.m.GeoAnswer()
		if !a.Yes {
			t.Fatalf("%s refused", in.From)
		}
		return a
	}
	ask(AttachAsked{From: "p", Private: true})
	ask(AttachAsked{From: "f", Flapping: true})
	if a := ask(AttachAsked{From: "o"}); !slices.Equal(a.Demoted, []peer.ID{"f", "p"}) {
		t.Fatalf("demoted %v, want [f p]", a.Demoted)
	}
	if last := d.m.rankedLast([]peer.ID{"f", "o", "p", "s"}); !last["f"] || !last["p"] || last["o"] || last["s"] {
		t.Errorf("the superpeer ranks last %v, want f and p", last)
	}
	if a := ask(AttachAsked{From: "f"}); !slices.Equal(a.Demoted, []peer.ID{"p"}) {
		t.Fatalf("after f's request without the flag, demoted %v, want [p]", a.Demoted)
	}
	d.step(Reachability{Private: true})
	if a := ask(AttachAsked{From: "o"}); !slices.Equal(a.Demoted, []peer.ID{"p", "s"}) {
		t.Fatalf("a private superpeer: demoted %v, want [p s]", a.Demoted)
	}
}

// A sponsor names for a missing token a member that is not demoted: x,
// whom Rehome names before a, said it is private; with the flag a is
// named, without it x. A member ranks the mates its roster demotes last.
func TestGeoRehomeSkipsDemoted(t *testing.T) {
	seed := mustNew(t, geoTestConfig("a", 2)).geo.seed
	var x peer.ID
	for c := 'b'; c <= 'z' && x == ""; c++ {
		if p := peer.ID(string(c)); c != 's' && geometric.Rehome(seed, 0, []geometric.ID{"a", geometric.ID(p)}, nil) == geometric.ID(p) {
			x = p
		}
	}
	if x == "" {
		t.Fatal("no peer that Rehome names before a")
	}
	for _, demoted := range []bool{false, true} {
		t.Run(fmt.Sprint("demoted=", demoted), func(t *testing.T) {
			h := peer.ID("h")
			d, ask := sponsorWith(t, 2, h, "a", x)
			d.ping = func(p peer.ID) (time.Duration, error) {
				if p == h {
					return 0, fmt.Errorf("gone")
				}
				return 30 * ms, nil
			}
			d.step(AttachAsked{From: x, Private: demoted, Coord: at(t, 0.002)})
			d.run(10 * time.Second)
			d.feed.Tokens = slices.DeleteFunc(d.feed.Tokens, func(tp TokenPos) bool { return tp.Holder == h })
			ordered := map[peer.ID]bool{}
			for range 30 {
				d.run(time.Second)
				ordered["a"] = ordered["a"] || ask("a").Rehome != nil
				d.step(AttachAsked{From: x, Private: demoted, Coord: at(t, 0.002)})
				ordered[x] = ordered[x] || d.m.GeoAnswer().Rehome != nil
			}
			if ordered["a"] != demoted || ordered[x] == demoted {
				t.Fatalf("x demoted %v: ordered %v", demoted, ordered)
			}
		})
	}
	t.Run("member ranks", func(t *testing.T) {
		d := newGeoDriver(t, geoTestConfig("a", 2))
		d.feed = attachFeed(t, "s")
		d.feed.Tokens[0].Load = 1
		d.attach = func(p peer.ID) AttachDone {
			return AttachDone{To: p, OK: true, Mates: []peer.ID{"s", "a", x}, Demoted: []peer.ID{x, "stranger"}} // one not in the cluster: ignored
		}
		d.run(5 * time.Second)
		if sp := d.m.GeoState().Superpeer; sp != "s" {
			t.Fatalf("a attached to %q, want s", sp)
		}
		if last := d.m.rankedLast([]peer.ID{"a", "s", x}); !last[x] || last["a"] || last["s"] {
			t.Errorf("a ranks last %v", last)
		}
	})
	t.Run("own flag", func(t *testing.T) {
		d := newGeoDriver(t, geoTestConfig("a", 2))
		for _, private := range []bool{false, true} {
			d.step(Reachability{Private: private})
			g := d.m.geo
			g.ask(&attachRound{}, askBest, "s")
			if g.out.AttachPrivate != private || g.out.AttachFlapping {
				t.Errorf("private %v: an attach request says private %v, flapping %v", private, g.out.AttachPrivate, g.out.AttachFlapping)
			}
			g.take()
		}
	})
	t.Run("flapping", func(t *testing.T) {
		cfg := geoTestConfig("a", 2)
		cfg.Election = "bully"
		d := newGeoDriver(t, cfg)
		d.m.el.selfFlapping = true // lost all its connections flapLimit times in flapWindow (elect.go)
		g := d.m.geo
		g.ask(&attachRound{}, askBest, "s")
		if g.out.AttachPrivate || !g.out.AttachFlapping {
			t.Errorf("a flapping node's attach request says private %v, flapping %v", g.out.AttachPrivate, g.out.AttachFlapping)
		}
		g.take()
		d.handOver("x", geometric.Token{Num: 0, Seq: 1})
		if d.m.GeoAnswer().Yes || d.m.GeoState().Token >= 0 {
			t.Error("a flapping node took a token")
		}
	})
}
