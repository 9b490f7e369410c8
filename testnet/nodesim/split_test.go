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
			if !s.Alive(i) {
				continue // its machine went with it
			}
			st := s.State(i)
			l := s.Machine(i).Election().Leader
			if l != "" {
				led[i] = true
			}
			if led[i] && l == "" || st.Role != node.RoleSuperpeer || len(st.Members) == 1 {
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

// TestPartitionDemotesNoOne: a partition is no flapping. 16 nodes in 2
// clusters with --quorum are cut twice in a row into sides of 5 and 11
// (each node on one side loses its connections to the other side twice
// within a minute), then healed. No node loses all its connections, so
// none flaps, and no member may rank another last: the members of a
// cluster must agree on its rank. They did not when a member counted its
// own lost connections to a peer against that peer: each side ranked the
// other last, the two sides of a cluster each had a bully leader that
// took the other's COORDINATOR for a lower process's and bullied back,
// and live, on 16 node processes, the storm got the rightful leader
// banned and the cluster stayed split for minutes.
func TestPartitionDemotesNoOne(t *testing.T) {
	for seed := range uint64(3) {
		s := converged(t, Config{N: 16, Seed: seed, Stagger: 3 * time.Second,
			Node: node.Config{Target: dhtselect.Target{Superpeers: 2}, Election: "bully", Quorum: true,
				AnnounceInterval: time.Second, ReevaluateInterval: time.Second}})
		s.RunFor(5 * time.Second)
		side := []int{1, 4, 7, 10, 13}
		for range 2 {
			s.Partition(side)
			s.RunFor(5 * time.Second)
			s.Heal()
			s.RunFor(2 * time.Second)
		}
		for i := range s.N() {
			if d := s.Machine(i).Election().Demoted; len(d) > 0 {
				t.Errorf("seed %d: n%d ranks %v last after a partition", seed, i, d)
			}
		}
		if !s.RunUntil((*Sim).Converged, 100*time.Millisecond, time.Minute) {
			t.Errorf("seed %d: a minute after the heal: %+v", seed, s.Take())
		}
	}
}
