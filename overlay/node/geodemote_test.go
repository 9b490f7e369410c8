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
	d.handOver("x", geometric.Token{Num: 0, Seq: 1})
	d.run(7 * time.Second) // Dwell 5 s: promoted
	if d.m.GeoState().Role != RoleSuperpeer {
		t.Fatal("not promoted after the dwell time")
	}
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

// A member re-homes a missing token skipping the mates its roster demotes:
// x, whom Rehome names before a among the cluster, is private; with the
// roster saying so a takes the token, without it x is named and (private,
// refusing) never takes it, and a does not either. The member ranks the
// demoted mate last and asks to attach with its own flags.
func TestGeoRehomeSkipsDemoted(t *testing.T) {
	seed := mustNew(t, geoTestConfig("a", 2)).geo.seed
	var x peer.ID
	for c := 'b'; c <= 'z' && x == ""; c++ {
		if p := peer.ID(string(c)); geometric.Rehome(seed, 0, []geometric.ID{"a", geometric.ID(p)}, nil) == geometric.ID(p) {
			x = p
		}
	}
	if x == "" {
		t.Fatal("no peer that Rehome names before a")
	}
	for _, demoted := range []bool{false, true} {
		t.Run(fmt.Sprint("demoted=", demoted), func(t *testing.T) {
			d := newGeoDriver(t, geoTestConfig("a", 2))
			h := peer.ID("h")
			d.ping = func(p peer.ID) (time.Duration, error) {
				if p == h {
					return 0, fmt.Errorf("gone")
				}
				return 30 * ms, nil
			}
			sponsoredFeed(t, d, h)
			roster := AttachDone{OK: true, Mates: []peer.ID{"s", "a", x}}
			if demoted {
				roster.Demoted = []peer.ID{x, "stranger"} // one not in the cluster: ignored
			}
			d.attach = func(p peer.ID) AttachDone { r := roster; r.To = p; return r }
			d.run(20 * time.Second)
			if sp := d.m.GeoState().Superpeer; sp != "s" {
				t.Fatalf("a attached to %q, want s", sp)
			}
			if last := d.m.rankedLast([]peer.ID{"a", "s", x}); last[x] != demoted || last["a"] || last["s"] {
				t.Errorf("a ranks last %v", last)
			}
			d.feed.Tokens = slices.DeleteFunc(d.feed.Tokens, func(tp TokenPos) bool { return tp.Holder == h })
			d.run(60 * time.Second)
			if got := d.m.GeoState().Token == 0; got != demoted {
				t.Fatalf("a holds the missing token 0: %v, want %v (x demoted: %v)", got, demoted, demoted)
			}
		})
	}
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
