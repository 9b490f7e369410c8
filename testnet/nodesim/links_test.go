package nodesim

import (
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestLinksInSim: the machines decide their dials and refreshes
// (node.Machine's links.go) in the simulator as in the live node. Every
// joiner dials its bootstrap peer once at its start, and no ordinary peer
// attached to its superpeer dials after; a superpeer cut off for longer
// than a retry is alone, dials at every retry while cut off, and refreshes
// every bucket once when it is back, where no other node does.
func TestLinksInSim(t *testing.T) {
	const n = 64
	s := converged(t, Config{N: n, Seed: 1, Node: node.Config{Target: dhtselect.Target{Superpeers: 8}, Election: "bully"}})
	st := s.Stats()
	if st.Dials != n-1 || st.FullRefreshes != 0 {
		t.Fatalf("converged: %d dials (want %d, one per joiner), %d full refreshes (want 0)", st.Dials, n-1, st.FullRefreshes)
	}
	s.RunFor(time.Minute)
	if got := s.Stats().Dials; got != st.Dials {
		t.Fatalf("%d dials in a quiet minute after convergence, want 0", got-st.Dials)
	}
	x := -1
	for i := 1; i < n; i++ {
		if s.State(i).Role == node.RoleSuperpeer {
			x = i
			break
		}
	}
	if x < 0 {
		t.Fatal("no superpeer but node 0")
	}
	before := s.Stats()
	s.Isolate(x)
	s.RunFor(12 * time.Second)
	cut := s.Stats()
	s.Heal()
	s.RunFor(20 * time.Second)
	after := s.Stats()
	if d := cut.Dials - before.Dials; d < 2 {
		t.Errorf("superpeer %d cut off for 12 s dialled %d times, want one every 5 s", x, d)
	}
	if d := after.FullRefreshes - before.FullRefreshes; d != 1 {
		t.Errorf("%d full refreshes after superpeer %d was cut off, want 1 (by it)", d, x)
	}
	if !s.RunUntil((*Sim).Converged, time.Second, time.Minute) {
		t.Fatalf("not converged a minute after the heal: %+v", s.Take())
	}
	t.Logf("dials: %d to converge, %d while superpeer %d was cut off, %d after; full refreshes %d", st.Dials, cut.Dials-before.Dials, x, after.Dials-cut.Dials, after.FullRefreshes)
}

// TestBootstrapTrims: the bootstrap peer's connection manager closes the
// connections of the dials it got down to its low watermark once they are
// past their grace, and the peers it trimmed do not storm it: an ordinary
// peer attached to its superpeer does not dial again, a superpeer waits
// longer after each trim (node's redialPacer). Through churn (the
// bootstrap peers spared) the dials follow the joins, and they die down
// when the churn stops. The bootstrap peer holds more than its high
// watermark while joiners arrive faster than their grace runs out, as the
// live testnet's node 0 did at 512 nodes (about 230).
func TestBootstrapTrims(t *testing.T) {
	const n = 1000
	s := converged(t, Config{N: n, Seed: 1, Stagger: 10 * time.Second, Node: node.Config{Target: dhtselect.Target{Fraction: 0.1}, Election: "bully"}})
	s.RunFor(2 * time.Minute)
	st := s.Stats()
	if c := s.bootConns(0); c > s.cfg.ConnHigh || st.Trims < uint64(n-1-s.cfg.ConnHigh) {
		t.Fatalf("2 minutes after convergence: node 0 holds %d connections of dials (high watermark %d), %d trims (want %d or more)", c, s.cfg.ConnHigh, st.Trims, n-1-s.cfg.ConnHigh)
	}
	s.RunFor(time.Minute)
	if q := s.Stats(); q.Dials != st.Dials || q.Trims != st.Trims {
		t.Fatalf("a quiet minute: %d dials and %d trims, want none", q.Dials-st.Dials, q.Trims-st.Trims)
	}
	// Churn at 10 % a minute for 5 minutes: 500 joiners, each dialling
	// once as it joins.
	before, n0 := s.Stats(), s.N()
	s.churn(0.1, 5*time.Minute, nil, func(i int) bool { return i < 2 })
	most, end := 0, s.Now()+5*time.Minute
	s.Every(5*time.Second, func(s *Sim) {
		if s.Now() <= end {
			most = max(most, s.bootConns(0))
		}
	})
	s.RunFor(5 * time.Minute)
	during := s.Stats()
	joins := s.N() - n0
	dials := int(during.Dials - before.Dials)
	if dials > 3*joins {
		t.Errorf("churn: %d dials for %d joins, want at most 3 per join", dials, joins)
	}
	s.RunFor(2 * time.Minute)
	settling := s.Stats()
	s.RunFor(time.Minute)
	after := s.Stats()
	if late := after.Dials - settling.Dials; late*4 > uint64(dials)/5 {
		t.Errorf("%d dials in the third minute after the churn, against %d a minute during it: want a quarter or less", late, dials/5)
	}
	t.Logf("converged: %d dials, %d trims; churn: %d joins, %d dials, %d trims, node 0 held %d at most; third minute after: %d dials", st.Dials, st.Trims, joins, dials, during.Trims-before.Trims, most, after.Dials-settling.Dials)
}
