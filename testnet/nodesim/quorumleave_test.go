package nodesim

import (
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestQuorumMemberLeaves: with Quorum, an ordinary member that crashes
// stays in its cluster's electorate for quorumMemory (150 s), and then
// leaves it. Every member's machine takes the change in place
// (classic.Quorum.Reconfigure), so no one goes unserved then. Before, every
// member built a new machine at its own moment, whose first lease granted
// no claim, and the cluster (10 nodes at seed 1) went unserved for 10 to
// 20 s, 150 s after the crash: bully and candidate 150 to 170 s after it,
// stable 150 to 160 s (candidate and stable also needed the node to stand
// as leader through its new inner machine's campaign). The algorithms
// whose faults differed; 64 nodes, S = 8, seed 1.
func TestQuorumMemberLeaves(t *testing.T) {
	if testing.Short() {
		t.Skip("64 node machines for 4 virtual minutes, per algorithm")
	}
	for _, alg := range []string{"bully", "candidate", "stable"} {
		t.Run(alg, func(t *testing.T) {
			s := settledQuorum64(t, alg)
			s.RunFor(30 * time.Second)
			crashed := -1
			for i := range s.N() {
				if s.State(i).Role == node.RoleOrdinary {
					crashed = i
					break
				}
			}
			if crashed < 0 {
				t.Fatal("no ordinary member")
			}
			s.Crash(crashed)
			at := s.Now()
			// From 100 s after the crash (its failover and the churn of k
			// that follows the first settling long over) to 200 s: the
			// crashed member leaves the electorate at 150 s.
			s.RunFor(100 * time.Second)
			worst, when, split := 0, time.Duration(0), 0
			s.Every(100*time.Millisecond, func(s *Sim) {
				x := s.Take()
				if x.Live-x.Covered > worst {
					worst, when = x.Live-x.Covered, s.Now()-at
				}
				split = max(split, x.Split)
			})
			s.RunFor(100 * time.Second)
			if worst > 0 || split > 0 {
				t.Errorf("%d nodes unserved %v after an ordinary member crashed (its electorate changes 150 s after); %d clusters claimed twice at most", worst, when, split)
			}
		})
	}
}

// settledQuorum64 starts 64 node machines under alg with Quorum, S = 8
// (on the threshold of k = 3), seed 1, starts spread over 5 s, and runs
// them until every node is served and no cluster is claimed twice.
func settledQuorum64(t *testing.T, alg string) *Sim {
	t.Helper()
	s, err := New(Config{N: 64, Seed: 1, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: alg, Quorum: true}})
	if err != nil {
		t.Fatal(err)
	}
	settled := func(s *Sim) bool { x := s.Take(); return x.Live == 64 && x.Covered == x.Live && x.Split == 0 }
	if !s.RunUntil(settled, 100*time.Millisecond, 4*time.Minute) {
		t.Fatal("not settled within 4 virtual minutes")
	}
	return s
}
