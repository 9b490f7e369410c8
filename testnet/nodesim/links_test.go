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
