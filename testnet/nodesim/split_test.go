package nodesim

import (
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestSuperpeersAreElected: under churn with replacement (300 nodes,
// bully, 10 % replaced per minute for 3 minutes: about 90 joiners, one in
// ten of them the closest to its cluster's key), a joiner claims the
// superpeer role only once its election names it (or it is alone in its
// cluster); in a failover, once it has had a leader, the lookup's answer
// stands while the election runs, as for every member. A joiner the lookup named used to claim its cluster as soon as
// the lookup answered, while its mates, who drop election messages from a
// peer not yet in their views, followed the leader they had: 20
// cluster-seconds of split brain in this run, 8 now.
func TestSuperpeersAreElected(t *testing.T) {
	s := converged(t, Config{N: 300, Seed: 1, Stagger: 10 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.1}, Election: "bully"}})
	o := s.Observe(time.Second)
	s.Churn(0.1, 3*time.Minute, o)
	bad := 0
	led := map[int]bool{} // joiners whose election has named a leader
	s.Every(100*time.Millisecond, func(s *Sim) {
		for i := 300; i < s.N(); i++ {
			st := s.State(i)
			l := s.Machine(i).Election().Leader
			if l != "" {
				led[i] = true
			}
			if !s.Alive(i) || led[i] && l == "" || st.Role != node.RoleSuperpeer || len(st.Members) == 1 {
				continue // a failover: the lookup's answer stands while the election runs
			}
			if l != s.ID(i) {
				if bad++; bad <= 3 {
					t.Errorf("t=%v: n%d claims its cluster (%d members) while its election names %q", s.Now(), i, len(st.Members), l)
				}
			}
		}
	})
	s.RunFor(3 * time.Minute)
	split := 0
	for _, x := range o.Samples {
		split += x.Split
	}
	t.Logf("unelected claims: %d samples; cluster-seconds of split brain: %d; failovers %d, coverage %.4f",
		bad, split, len(o.Failovers), o.Coverage(0, s.Now()))
}

// TestQuorumPartitionHasOneSuperpeer: with --quorum, 64 nodes in 8
// clusters are cut into two sides of 24 and 40 for a minute, then healed.
// Once a lease has passed since the cut, no cluster has two claimers (the
// minority side of each cluster has none), and after the heal every
// cluster has one superpeer again.
func TestQuorumPartitionHasOneSuperpeer(t *testing.T) {
	for seed := range uint64(3) {
		s := converged(t, Config{N: 64, Seed: seed, Stagger: 5 * time.Second,
			Node: node.Config{Target: dhtselect.Target{Superpeers: 8}, Election: "bully", Quorum: true}})
		s.RunFor(10 * time.Second)
		o := s.Observe(100 * time.Millisecond)
		var side []int
		for i := range 24 {
			side = append(side, i)
		}
		cut := s.Now()
		s.Partition(side)
		s.RunFor(time.Minute)
		var timeout time.Duration
		for i := range s.N() {
			timeout = max(timeout, s.Machine(i).Detection())
		}
		if d := o.SplitTime(cut+2*timeout, s.Now()); d > 0 {
			t.Errorf("seed %d: some cluster had two superpeers for %v of the cut (from two timeouts after it)", seed, d)
		}
		s.Heal()
		healed := func(s *Sim) bool {
			x := s.Take()
			return x.Split == 0 && x.Claimers == 8 && x.Covered == x.Live
		}
		if !s.RunUntil(healed, 100*time.Millisecond, 2*time.Minute) {
			t.Errorf("seed %d: 2 minutes after the heal: %+v", seed, s.Take())
		}
	}
}
