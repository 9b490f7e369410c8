package nodesim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// hostileRun is one run of TestHostileMember: the share of samples in
// which the attacker was a victim's superpeer, while the real superpeer
// led, during its failover and after it, and the failover.
type hostileRun struct {
	before, during, after [2]int // samples in which the attacker served a victim, samples
	failover              time.Duration
	unrepaired            int
	covered               bool // every live node covered at the end
	victims               []int
}

// runHostile builds 24 nodes in 3 clusters (bully, with or without quorum),
// picks a cluster of at least 4 and in it the attacker, third in rank (below
// the superpeer and its heir), and makes it announce itself to the members
// ranked below it every 200 ms (COORDINATOR and HEARTBEAT naming itself;
// with quorum also CLAIMs of huge terms and issue 19's CLAIM_ACKs of term
// 2^63-1) while sampling every 100 ms, for 30 s; then crashes the
// superpeer and goes on for 30 s. attack false runs the same without the
// injected messages.
func runHostile(t *testing.T, algo string, seed uint64, quorum, attack bool) hostileRun {
	t.Helper()
	s := converged(t, Config{N: 24, Seed: seed, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Superpeers: 3}, Election: algo, Quorum: quorum}})
	s.RunFor(10 * time.Second)
	lead, members := rankedCluster(t, s, 4, seed)
	if members[0] != s.ID(lead) {
		t.Fatalf("seed %d: superpeer %s is not the cluster's first in rank %v", seed, s.ID(lead), members)
	}
	a, _ := s.Index(members[2])
	var victims []int
	for _, id := range members[3:] {
		v, _ := s.Index(id)
		victims = append(victims, v)
	}
	attacker := s.ID(a)
	crashed := false
	if attack {
		seq := uint64(0)
		s.Every(200*time.Millisecond, func(s *Sim) {
			if !s.Alive(a) {
				return
			}
			seq++
			for _, v := range victims {
				// The announcement each algorithm would send: a COORDINATOR
				// by the winner (as ring's results, naming the best of a
				// ring of one), a heartbeat of a higher term.
				s.Inject(a, v, classic.Message{Type: classic.MsgCoordinator, Leader: classic.ID(attacker), IDs: []classic.ID{classic.ID(attacker)},
					Election: classic.ElectionID{Source: classic.ID(attacker), Seq: seq}, Term: seq})
				s.Inject(a, v, classic.Message{Type: classic.MsgHeartbeat, Leader: classic.ID(attacker), Term: seq})
				if quorum {
					s.Inject(a, v, classic.Message{Type: classic.MsgClaimAck, Term: math.MaxUint64 / 2})
					s.Inject(a, v, classic.Message{Type: classic.MsgClaim, Term: seq * 1e9,
						Election: classic.ElectionID{Source: classic.ID(attacker), Seq: seq}})
				}
			}
		})
	}
	r := hostileRun{victims: victims}
	o := s.Observe(100 * time.Millisecond)
	s.Every(100*time.Millisecond, func(s *Sim) {
		phase := &r.before
		switch {
		case crashed && len(o.Failovers) == 0:
			phase = &r.during
		case crashed:
			phase = &r.after
		}
		for _, v := range victims {
			if s.Alive(v) {
				phase[1]++
				if s.State(v).Superpeer == attacker {
					phase[0]++
				}
			}
		}
	})
	s.RunFor(30 * time.Second)
	crashed = true
	o.CrashSuperpeer(s, lead)
	s.Crash(lead)
	s.RunFor(30 * time.Second)
	o.Finish()
	if len(o.Failovers) > 0 {
		r.failover = o.Failovers[0]
	}
	r.unrepaired = o.Unrepaired
	r.covered = s.Take().Covered == s.Take().Live
	return r
}

func share(c [2]int) float64 {
	if c[1] == 0 {
		return 0
	}
	return 100 * float64(c[0]) / float64(c[1])
}

// TestHostileMember: issue 19's finding 4 (a mid-rank member announcing
// itself to the followers below it was their superpeer in 98 % of samples)
// and, with quorum, finding 2 (four CLAIM_ACKs of term 2^63-1 left a
// cluster without a superpeer for good), in the node simulator: the
// attacker, third in rank in its cluster, is a victim's superpeer in no
// sample while the superpeer leads, nor once the failover after the
// superpeer's crash is done; the cluster fails over (every node covered
// again) as fast as without the attack, give or take a heartbeat.
// During the failover the victims elect, and bully cannot always tell an
// announcement then from an honest one (in its election a victim follows
// the highest member that answered it in time, which the attacker can be
// when the heir's answer is late): that share is reported only (0 % in
// these runs).
func TestHostileMember(t *testing.T) {
	for _, quorum := range []bool{false, true} {
		for seed := range uint64(3) {
			honest := runHostile(t, "bully", seed, quorum, false)
			r := runHostile(t, "bully", seed, quorum, true)
			t.Logf("quorum=%v seed %d: attacker served a victim in %.1f %% of samples before the crash, %.1f %% during the failover, %.1f %% after; failover %v (without the attack %v), unrepaired %d",
				quorum, seed, share(r.before), share(r.during), share(r.after), r.failover, honest.failover, r.unrepaired)
			if r.before[0] != 0 {
				t.Errorf("quorum=%v seed %d: the attacker served a victim in %d of %d samples before the crash",
					quorum, seed, r.before[0], r.before[1])
			}
			// After the failover the attacker is the new leader's heir,
			// and the node rebuilds each member's election machine for the
			// new member set (the crashed superpeer leaves the views): a
			// fresh machine trusted the heir's first announcement over its
			// leader, and the attacker held its victims until the leader's
			// next heartbeat, in 0.7-1.4 % of the samples after the
			// failover. The heir's word now counts only when the leader has
			// missed a heartbeat (see Bully.missed).
			if r.after[0] != 0 {
				t.Errorf("quorum=%v seed %d: the attacker served a victim in %d of %d samples after the failover",
					quorum, seed, r.after[0], r.after[1])
			}
			if r.unrepaired != 0 || !r.covered || r.failover == 0 {
				t.Errorf("quorum=%v seed %d: failover %v, unrepaired %d, all covered at the end %v", quorum, seed, r.failover, r.unrepaired, r.covered)
			}
			if slack := time.Second; r.failover > honest.failover+slack {
				t.Errorf("quorum=%v seed %d: failover %v under attack, %v without", quorum, seed, r.failover, honest.failover)
			}
		}
	}
}

// TestHostileMemberAlgorithms: the same attack under the other algorithms
// whose announcements name a leader (one seed each, without quorum): the
// attacker serves no victim while the superpeer leads, and the cluster
// fails over as fast as without the attack, give or take a second. Under
// candidate, ring, ring-max and stable it serves none during the failover
// or after either: the attacker is third in rank, and the heir is live.
// (Stable's victims followed it in 99-100 % of the samples during and
// after the failover, candidate's in 96.5 % during it and 2.5 % after:
// see Stable's fresh and CandidateElection's vouched.) Next-in-line is
// bully's: none after the failover, and its share during it is reported
// only, as in TestHostileMember.
func TestHostileMemberAlgorithms(t *testing.T) {
	for _, algo := range []string{"next-in-line", "candidate", "ring", "ring-max", "stable"} {
		t.Run(algo, func(t *testing.T) {
			honest := runHostile(t, algo, 0, false, false)
			r := runHostile(t, algo, 0, false, true)
			t.Logf("%s: attacker served a victim in %.1f %% of samples before the crash, %.1f %% during the failover, %.1f %% after; failover %v (without the attack %v), unrepaired %d",
				algo, share(r.before), share(r.during), share(r.after), r.failover, honest.failover, r.unrepaired)
			if r.before[0] != 0 {
				t.Errorf("the attacker served a victim in %d of %d samples before the crash", r.before[0], r.before[1])
			}
			if r.unrepaired != 0 || !r.covered {
				t.Errorf("failover %v, unrepaired %d, all covered at the end %v", r.failover, r.unrepaired, r.covered)
			}
			if algo != "next-in-line" && r.during[0] != 0 || r.after[0] != 0 {
				t.Errorf("the attacker served a victim in %d of %d samples during the failover, %d of %d after",
					r.during[0], r.during[1], r.after[0], r.after[1])
			}
			if slack := time.Second; r.failover > honest.failover+slack {
				t.Errorf("failover %v under attack, %v without", r.failover, honest.failover)
			}
		})
	}
}

// rankedCluster finds the first superpeer whose cluster has at least min
// members, and returns it with the cluster's members from the highest
// rank (XOR closeness to the cluster key) down.
func rankedCluster(t *testing.T, s *Sim, min int, seed uint64) (int, []peer.ID) {
	t.Helper()
	for i := range s.N() {
		st := s.State(i)
		if st.Role != node.RoleSuperpeer || len(st.Members) < min {
			continue
		}
		rank := classic.XORCloseness{Target: st.ClusterKey[:]}
		members := slices.Clone(st.Members)
		slices.SortFunc(members, func(a, b peer.ID) int { return rank.Compare(classic.ID(b), classic.ID(a)) })
		return i, members
	}
	t.Fatalf("seed %d: no cluster of %d", seed, min)
	return 0, nil
}
