package nodesim

import (
	"fmt"
	"testing"
	"time"

	"github.com/superpeer/superpeer/overlay/node"
)

// TestQuorumOneKAfterCrashes: 64 nodes with --fraction 0.125 sit on the
// threshold of k = 3, and about half of them join at k = 4 on their own
// size guess. With Quorum, a node left alone at k = 4 (its superpeer moved
// to k = 3) could not elect itself while the mates it remembered stayed in
// its electorate, and asked only mates without a superpeer, which named
// no one (node.Machine.Hint: now they name their lookup's end, the
// candidate that serves the cluster), so it kept k = 4 and its old
// cluster, whose electorate counted it, went unserved (echo: seed 1, a
// node at k = 4 and 8 to 19 nodes unserved to the end of the survey's
// run; here, without the hint, echo had 3 nodes at k = 4 and 8 unserved,
// ring one node unserved). After three superpeer crashes 20 s apart,
// every node must have one k, and be served, through the last 20 s of 30
// more. It is one seed's scenario: over seeds 1 to 12 (found in review),
// 13 of the 24 runs fail without the hint and 3 with it, those where two
// of a 3-member cluster crash, which quorum cannot serve until the
// crashed leave its electorate (quorumMemory).
func TestQuorumOneKAfterCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("64 node machines for two virtual minutes")
	}
	for _, alg := range []string{"echo", "ring"} {
		t.Run(alg, func(t *testing.T) {
			s := settledQuorum64(t, alg)
			for range 3 {
				for i := range s.N() {
					if s.Alive(i) && s.State(i).Role == node.RoleSuperpeer {
						s.Crash(i)
						break
					}
				}
				s.RunFor(20 * time.Second)
			}
			s.RunFor(10 * time.Second)
			var bad []string
			s.Every(time.Second, func(s *Sim) {
				ks := map[int]int{}
				for i := range s.N() {
					if s.Alive(i) {
						ks[s.State(i).K]++
					}
				}
				if x := s.Take(); len(ks) > 1 || x.Covered < x.Live {
					bad = append(bad, fmt.Sprintf("%v: k %v, %d of %d served", s.Now(), ks, x.Covered, x.Live))
				}
			})
			s.RunFor(20 * time.Second)
			if len(bad) > 0 {
				t.Errorf("%d of 20 samples with more than one k or nodes unserved, the first %s", len(bad), bad[0])
			}
		})
	}
}
