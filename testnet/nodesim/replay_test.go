package nodesim

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// The live faults, replayed: each of these deterministic runs failed on
// the rule as it was before its fix (checked by reverting the rule in
// overlay/node; the commit that adds a test says how).

// crashAndRestart crashes up to count random nodes every period, and
// restarts those of the period before (churn with restarts: the nodes
// come back with their disks).
func crashAndRestart(s *Sim, period time.Duration, count int) {
	var crashed []int
	s.Every(period, func(s *Sim) {
		for _, i := range crashed {
			s.Restart(i)
		}
		crashed = crashed[:0]
		for range count {
			if i := s.rng.IntN(s.N()); s.Alive(i) {
				s.Crash(i)
				crashed = append(crashed, i)
			}
		}
	})
}

// converged builds and runs a network until it converges.
func converged(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !s.RunUntil((*Sim).Converged, time.Second, 2*time.Minute) {
		t.Fatalf("not converged after 2 virtual minutes: %+v", s.Take())
	}
	return s
}

// TestJoinerTakesNoRoleOnAnEstimateOfOne: a node that joins a converged
// network of 32 (k = 2) knows only its bootstrap peer until its
// routing-table refresh completes, and only itself in its view until the
// announcements arrive. On an estimate made then (2 peers: k = 0) it would
// claim the whole key space as its cluster: a split brain with every
// superpeer. The rule (node.Machine's mayJoin): no role before the refresh,
// or two announce intervals after the first connection.
func TestJoinerTakesNoRoleOnAnEstimateOfOne(t *testing.T) {
	for seed := range uint64(5) {
		s := converged(t, Config{N: 32, Seed: seed, Stagger: 5 * time.Second,
			Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}}})
		k := s.State(0).K
		if k != 2 {
			t.Fatalf("seed %d: k = %d before the join, want 2", seed, k)
		}
		s.Record = true
		j := s.Add()
		o := s.Observe(100 * time.Millisecond)
		s.RunFor(30 * time.Second)
		for _, c := range s.Changes {
			if c.Node == j && c.State.K != k {
				t.Fatalf("seed %d: the joiner took a role with k = %d (estimate %d from %s) at %v, the network has k = %d",
					seed, c.State.K, c.State.Size.N, c.State.Size.Source, c.At, k)
			}
		}
		if d := o.SplitTime(0, s.Now()); d > 0 {
			t.Fatalf("seed %d: two superpeers claimed one cluster for %v after the join", seed, d)
		}
		if !s.Converged() {
			t.Fatalf("seed %d: not converged 30 s after the join: %+v", seed, s.Take())
		}
	}
}

// leaderOf returns the node every live node's election names, or -1.
func leaderOf(s *Sim) int {
	l := -1
	for i := range s.N() {
		if !s.Alive(i) {
			continue
		}
		j, ok := s.Index(s.Machine(i).Election().Leader)
		if !ok || l >= 0 && j != l {
			return -1
		}
		l = j
	}
	return l
}

// TestCarriedLeaderOnTheMinoritySide: with --quorum, the leader of a
// cluster of 5 is cut off with one member, briefly and then for a minute.
// The two cuts demote the far side on the near side (host quality: each
// peer lost twice within a minute), which rebuilds the election machine
// there; the leader it had is carried across the rebuild. Carried for as
// long as the new machine names no leader (the rule before the fix), the
// minority-side leader went on claiming the cluster for the whole cut
// while the majority elected another: a split brain. The rule now: a
// carried leader stands one failure-detection timeout at most, and the
// node itself no longer than its old lease.
//
// The rebuild happens at the minority leader's next evaluation after the
// cut (every 5 s), so the fault shows only when that comes within the
// lease: the second cut comes at ten phases of the period.
func TestCarriedLeaderOnTheMinoritySide(t *testing.T) {
	for seed := range uint64(10) {
		s := converged(t, Config{N: 5, Seed: seed, Node: node.Config{
			Target: dhtselect.Target{Superpeers: 1}, Election: "bully", Quorum: true}})
		if !s.RunUntil(func(s *Sim) bool { return leaderOf(s) >= 0 }, 100*time.Millisecond, time.Minute) {
			t.Fatalf("seed %d: no leader", seed)
		}
		l := leaderOf(s)
		mate := (l + 1) % 5
		o := s.Observe(100 * time.Millisecond)
		s.Partition([]int{l, mate})
		s.RunFor(2 * time.Second)
		s.Heal()
		s.RunFor(5*time.Second + time.Duration(seed)*500*time.Millisecond)
		cut := s.Now()
		s.Partition([]int{l, mate})
		timeout := s.Machine(l).Detection()
		s.RunFor(time.Minute)
		// Quorum: no leader on the minority side once a lease (one
		// timeout) has passed since the cut; give it a second one.
		if d := o.SplitTime(cut+2*timeout, s.Now()); d > 0 {
			t.Fatalf("seed %d: two superpeers claimed the cluster for %v of the cut (from %v after it, timeout %v)",
				seed, d, 2*timeout, timeout)
		}
		if s.State(l).Role == node.RoleSuperpeer {
			t.Fatalf("seed %d: the cut-off leader %s still claims the cluster a minute into the cut", seed, s.ID(l))
		}
	}
}

// named returns the superpeer most of the given live nodes name.
func named(s *Sim, ids []int) string {
	count := map[string]int{}
	best := ""
	for _, i := range ids {
		if !s.Alive(i) {
			continue
		}
		sp := string(s.State(i).Superpeer)
		count[sp]++
		if count[sp] > count[best] {
			best = sp
		}
	}
	return best
}

// TestFlappingSuperpeerLosesItsCluster: the superpeer of the largest
// cluster of 64 (bully) goes off the network for 5 s and comes back, every
// 10 s for a minute, as the live flap scenario does. Host quality ranks a
// member that lost its connections twice within a minute last, and the
// flapping node ranks itself last too (its own outages). And while the
// election runs, a lookup that names the flapping member (it is the
// closest to the key) gives way to the last leader. Without host quality
// the flapping node wins its cluster back at every return: here 6 wins in
// 6 flaps with IgnoreFlaps (live, on 64 nodes: 22 leader changes and 11
// wins in a minute, before e71c02e); with it, 1. (The two finer rules of
// e71c02e, the flapping node's own outages and the last leader standing
// against the lookup, make no difference in this run: it fails only with
// host quality off as a whole.)
func TestFlappingSuperpeerLosesItsCluster(t *testing.T) {
	for seed := range uint64(5) {
		s := converged(t, Config{N: 64, Seed: seed, Stagger: 5 * time.Second,
			Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: "bully"}})
		s.RunFor(10 * time.Second)
		wins, changes := flapLargest(s, 6)
		if wins > 2 {
			t.Errorf("seed %d: the flapping superpeer won its cluster back %d times in 6 flaps (%d changes of the superpeer its mates name), want at most 2",
				seed, wins, changes)
		}
		t.Logf("seed %d: %d changes, %d wins", seed, changes, wins)
	}
}

func peerID(s string) peer.ID { return peer.ID(s) }

// TestLookupAndElectionAgreeWithinOneTimeout: the superpeer of the
// largest cluster of 64 (bully) flaps twice, so that it ranks last
// (host quality) and its cluster elects another; a minute later its
// demotion ends, at about the same instant for every member (they saw the
// same losses, and it announced its own), and the lookup, which names the
// member closest to the key whatever its past, names it again while the
// election names the one elected meanwhile. It campaigns after half a
// failure-detection timeout and wins: no live node's lookup and election
// name different superpeers for longer than one timeout. Before 33c382d it
// waited a whole timeout, and the two disagreed for longer.
//
// And under churn with restarts (a crashed node comes back 6 s later, often
// closer to its cluster key than the superpeer elected meanwhile), the
// same bound holds.
func TestLookupAndElectionAgreeWithinOneTimeout(t *testing.T) {
	timeoutOf := func(s *Sim) time.Duration {
		var d time.Duration
		for i := range s.N() {
			if s.Alive(i) {
				d = max(d, s.Machine(i).Detection())
			}
		}
		return d
	}
	for seed := range uint64(3) {
		s := converged(t, Config{N: 64, Seed: seed, Stagger: 5 * time.Second,
			Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: "bully"}})
		s.RunFor(10 * time.Second)
		x := -1
		for i := range s.N() {
			if st := s.State(i); st.Role == node.RoleSuperpeer && (x < 0 || len(st.Members) > len(s.State(x).Members)) {
				x = i
			}
		}
		o := s.Observe(50 * time.Millisecond)
		for range 2 {
			s.Isolate(x)
			s.RunFor(3 * time.Second)
			s.Heal()
			s.RunFor(5 * time.Second)
		}
		if sp := s.State(x).Superpeer; sp == s.ID(x) {
			t.Fatalf("seed %d: the flapping superpeer %s still leads its cluster after two flaps", seed, s.ID(x))
		}
		s.RunFor(90 * time.Second)
		if sp := s.State(x).Superpeer; sp != s.ID(x) {
			t.Fatalf("seed %d: %s, the closest to its cluster key, does not lead it again after its demotion ended (its superpeer is %s): %+v",
				seed, s.ID(x), sp, s.Machine(x).Election())
		}
		if timeout := timeoutOf(s); o.Disagree > timeout {
			t.Errorf("seed %d (flap): a node's lookup and election named different live superpeers for %v, more than one timeout (%v)",
				seed, o.Disagree, timeout)
		}
		t.Logf("seed %d (flap): longest disagreement %v", seed, o.Disagree)
	}
	for seed := range uint64(3) {
		s := converged(t, Config{N: 64, Seed: seed, Stagger: 5 * time.Second,
			Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: "bully"}})
		o := s.Observe(50 * time.Millisecond)
		crashAndRestart(s, 6*time.Second, 2)
		s.RunFor(3 * time.Minute)
		if timeout := timeoutOf(s); o.Disagree > timeout {
			t.Errorf("seed %d (churn): a node's lookup and election named different live superpeers for %v, more than one timeout (%v)",
				seed, o.Disagree, timeout)
		}
		t.Logf("seed %d (churn): longest disagreement %v", seed, o.Disagree)
	}
}
