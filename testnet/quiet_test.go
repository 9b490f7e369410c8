package testnet

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
)

// TestConvergedNodesEvaluateOncePerPeriod: once a testnet has converged
// and nothing changes, a node evaluates its role about once per
// ReevaluateInterval (the period), plus the evaluations that its view's
// periodic refreshes settle into: not several times a period. In virtual
// time (a testing/synctest bubble), so that the count depends on the
// nodes' timers and not on this machine's load.
//
// Found by a CPU profile of a converged 64-node testnet: every
// evaluation announced the node, the announcement (unchanged) signalled
// the membership as changed, the loop gave the machine its view again,
// the view made an evaluation due a settle period later, and that one
// announced again. Each node evaluated and registered 3.6 times a second
// at a period of 1 s, and the 512-node testnet never converged on two
// cores.
func TestConvergedNodesEvaluateOncePerPeriod(t *testing.T) {
	if testing.Short() {
		t.Skip("32 live nodes in virtual time")
	}
	synctest.Test(t, func(t *testing.T) {
		const n, window = 32, 30 * time.Second
		tn := startConverged(t, Config{N: n, Target: dhtselect.Target{Superpeers: 4}, Seed: 1})
		time.Sleep(10 * time.Second) // the joins' last settled evaluations
		before := map[string]uint64{}
		for _, m := range tn.Members() {
			before[m.ID().String()] = m.State().Evaluations
		}
		time.Sleep(window)
		if ms := tn.Check(); len(ms) > 0 {
			t.Fatalf("the testnet changed during the window: %d mismatches, e.g. %v", len(ms), ms[0])
		}
		total := uint64(0)
		for _, m := range tn.Members() {
			total += m.State().Evaluations - before[m.ID().String()]
		}
		period := tn.cfg.ReevaluateInterval
		perPeriod := float64(total) / n / (float64(window) / float64(period))
		t.Logf("%d evaluations by %d nodes in %v: %.2f per node per period of %v", total, n, window, perPeriod, period)
		// One a period, and one a settle period after each refresh of
		// the view (every announce interval, and after each round of
		// RTT probes): about 1.2 at a 1 s period. It was 3.6.
		if perPeriod > 1.6 {
			t.Errorf("%.2f evaluations per node per period, want at most 1.6", perPeriod)
		}
	})
}
