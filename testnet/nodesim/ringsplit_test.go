package nodesim

import (
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestRingSplitHeals: 64 nodes under ring and ring-max, started over
// 5 s. While k settles, two nodes claim a cluster, each with the members
// that registered with it; each knows the other, not the other's members.
// A ring election crosses from one roster to the other at the claimer
// that does not know the member passing it on, which dropped it: every
// election of the rightful superpeer stalled there, and the two claimed
// the cluster from about 30 s for as long as the run went on (seeds 1 and
// 2, two clusters each). A ring machine now takes a member's election
// passed on by a non-member (classic.Relayer, Ring.Relays), and the
// split heals: no cluster has two claimers in the second minute, and
// every node is served at its end.
func TestRingSplitHeals(t *testing.T) {
	for _, alg := range []string{"ring", "ring-max"} {
		for seed := uint64(1); seed <= 2; seed++ {
			s, err := New(Config{N: 64, Seed: seed, Stagger: 5 * time.Second,
				Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: alg}})
			if err != nil {
				t.Fatal(err)
			}
			o := s.Observe(100 * time.Millisecond)
			s.Run(2 * time.Minute)
			x := s.Take()
			if split := o.SplitTime(time.Minute, 2*time.Minute); split > 0 || x.Covered != x.Live || x.Split > 0 {
				t.Errorf("%s seed %d: %v of the second minute with two claimers in a cluster; at 2 min %+v", alg, seed, split, x)
			}
		}
	}
}
