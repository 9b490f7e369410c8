package nodesim

import (
	"testing"
	"time"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
)

// vantageSim is 48 geometric machines with S = 5 on PlanetLab whose liar
// check distrusts a claim with the given number of vantage points
// (node.GeoConfig.Vantage), without the search on measured RTTs
// (SwapCandidates < 0), which settles tokens where it hands them and so
// leaves fewer coordinate passes to check (with it: 8 of 67 checks
// distrusted with 3 vantage points, 9 of 70 with the holder's alone).
func vantageSim(t *testing.T, m *latency.Matrix, seed uint64, vantage int) *Sim {
	t.Helper()
	s, err := New(Config{N: 48, Seed: seed, Stagger: 5 * time.Second, Latency: m.Sub(firstN(48)), Jitter: 2 * time.Millisecond,
		Node: node.Config{Geometric: true, Geo: node.GeoConfig{Vantage: vantage, SwapCandidates: -1, Tokens: geometric.Config{Tokens: 5}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// distrust sums the machines' liar-check counts: distrusted claims, claims
// checked, and checks in which a holder's own found the claim implausible
// and it was trusted all the same.
func distrust(s *Sim) (distrusted, checks, overruled uint64) {
	for i := range s.N() {
		m := s.Machine(i)
		c, o := m.VetChecks()
		distrusted, checks, overruled = distrusted+m.Distrusted(), checks+c, overruled+o
	}
	return
}

// TestGeoLiarCheckVantage (issue 19, finding 10: the live liar check, from
// the holder's vantage point alone, distrusted honest peers 10 to 45 times
// per 48-node run with no liar).
//
// No liar: 48 machines, five virtual minutes, seeds 1-3. With three
// vantage points (the default: a distrust needs at least three votes of
// the holder and the four peers nearest the claimed coordinate, and their
// majority), the honest claims distrusted are at most 22 % of the claims
// checked, pooled over the seeds (measured: 14 of 70, 20 %); with the
// holder's alone (Vantage 1) they are more (measured: 24 of 91, 26 %).
// What is left are honest peers whose coordinate the network does not
// fit: four or five of the five vantage points near the claimed spot
// measure far more than it predicts (a PlanetLab host 256 ms from a peer
// its coordinate puts 28 ms away), which no vantage point tells from a lie
// (and passing a token on such a claim would mislead the placement all
// the same). The runs are deterministic; the margin to the bound is thin.
//
// A liar, on 48 PlanetLab hosts at least 10 ms apart: see below (measured:
// five superpeers stopped, four distrusted the liar, the fifth passed to
// another peer; no token passed to the liar).
func TestGeoLiarCheckVantage(t *testing.T) {
	skipShort(t)
	m := loadPlanetLab(t)
	rate := func(vantage int) (uint64, uint64) {
		var d, c uint64
		for _, seed := range []uint64{1, 2, 3} {
			s := vantageSim(t, m, seed, vantage)
			s.Run(5 * time.Minute)
			sd, sc, so := distrust(s)
			t.Logf("vantage %d, seed %d: %d of %d claims checked distrusted (%d in which the holder's own check failed trusted)", vantage, seed, sd, sc, so)
			d, c = d+sd, c+sc
		}
		return d, c
	}
	const bound = 0.22
	d3, c3 := rate(node.DefaultVantage)
	d1, c1 := rate(1)
	t.Logf("false distrust: %d of %d checks (%.3f) with %d vantage points, %d of %d (%.3f) with the holder's alone; bound %.2f",
		d3, c3, float64(d3)/float64(c3), node.DefaultVantage, d1, c1, float64(d1)/float64(c1), bound)
	if c3 == 0 || c1 == 0 {
		t.Fatal("no claim checked: the test tests nothing")
	}
	if r := float64(d3) / float64(c3); r > bound {
		t.Errorf("%d vantage points distrusted %d of %d honest claims checked (%.3f), want at most %.2f", node.DefaultVantage, d3, c3, r, bound)
	}
	if r := float64(d1) / float64(c1); r <= bound {
		t.Errorf("the holder's check alone distrusted %d of %d (%.3f), within the bound %.2f: the comparison shows nothing", d1, c1, r, bound)
	}

	// The liar: on 48 PlanetLab hosts at least 10 ms apart (so that no
	// honest peer's coordinate is as near a superpeer's as the lie), it
	// claims, in turn, to sit where each superpeer sits (the superpeer's
	// own coordinate as its machine has it, at the least height), and the
	// superpeer stops gracefully: it would pass its token to its nearest
	// peer, the liar. Every check of the liar distrusts it, and no token
	// is passed to it.
	var apart []int
	for h := 0; h < m.N() && len(apart) < 48; h++ {
		ok := true
		for _, o := range apart {
			if rtt, known := m.RTT(h, o); !known || rtt < 10*time.Millisecond {
				ok = false
				break
			}
		}
		if ok {
			apart = append(apart, h)
		}
	}
	// Without the search on measured RTTs (SwapCandidates < 0): it hands
	// superpeers' roles on while the liar claims their spot (one of the
	// five stopped was no longer a superpeer), and any change of the run's
	// course changes which peer is nearest a stopped superpeer (the liar,
	// or a peer of its site: with the search off but one ping more per
	// member, 0 of 5 caught it and one passed it a token unchecked). The
	// walkthrough is the liar check's.
	s, err := New(Config{N: 48, Seed: 1, Stagger: 5 * time.Second, Latency: m.Sub(apart), Jitter: 2 * time.Millisecond,
		Node: node.Config{Geometric: true, Geo: node.GeoConfig{SwapCandidates: -1, Tokens: geometric.Config{Tokens: 5}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Run(3 * time.Minute)
	liar := -1
	for i := range s.N() {
		if st := s.GeoState(i); st != nil && st.Token < 0 {
			liar = i
			break
		}
	}
	passed, lies, caught, trusted := 0, 0, 0, 0
	s.Log = func(at time.Duration, i int, n node.Note) {
		switch {
		case i == liar && n.Msg == "received token":
			passed++
		case len(n.Args) > 1 && n.Args[1] == s.ID(liar) && n.Msg == "geometric: our check of a peer's coordinate failed, too few vantage points' did; trusted":
			trusted++
		}
	}
	for range 5 {
		holder := -1
		for i := range s.N() {
			if st := s.GeoState(i); s.Alive(i) && st != nil && st.Role == node.RoleSuperpeer && s.rtt(i, liar) > 30*time.Millisecond {
				holder = i
				break
			}
		}
		if holder < 0 {
			break
		}
		lying := true
		s.Every(100*time.Millisecond, func(s *Sim) {
			if lying {
				lie := s.Machine(holder).GeoState().Coord.Clone()
				lie.Height = 1e-5 // serf's least
				s.LieCoord(liar, lie)
			}
		})
		s.RunFor(2 * node.SnapshotTicks * time.Second) // the lie in every snapshot
		before := s.Machine(holder).Distrusted()
		s.Stop(holder)
		lying = false
		s.LieCoord(liar, nil)
		lies++
		if s.Machine(holder).Distrusted() > before {
			caught++
		}
		s.RunFor(30 * time.Second)
	}
	t.Logf("liar n%d: %d superpeers stopped while it claimed their spot, %d of them distrusted it, %d trusted it; tokens passed to it: %d",
		liar, lies, caught, trusted, passed)
	if caught == 0 || caught < lies-1 {
		t.Errorf("%d of %d superpeers caught the liar, want all or all but one (a peer of its site may be nearer)", caught, lies)
	}
	if trusted > 0 || passed > 0 {
		t.Errorf("the liar's claim was trusted %d times, and %d tokens passed to it", trusted, passed)
	}
}
