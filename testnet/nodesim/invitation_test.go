package nodesim

import (
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// claimers returns the live nodes that claim the superpeer role.
func claimers(s *Sim) []int {
	var out []int
	for i := range s.N() {
		if s.Alive(i) && s.State(i).Role == node.RoleSuperpeer {
			out = append(out, i)
		}
	}
	return out
}

// TestInvitationKillSuperpeerClaims replays, on one cluster of 8 node
// machines running invitation, what the live kill-superpeer scenario does:
// the cluster agrees on a superpeer, which is stopped abruptly; its
// members lose their connections to it and campaign, and it leaves their
// views one membership TTL later. Invitation starts every member of a
// failed leader's group as the leader of a singleton group; such a group
// names no leader (see overlay/node's elected), or each member would claim
// the superpeer role at once, claims that no other member follows (the
// live benchmark reported "the peers of stopped superpeer ... have no live
// superpeer yet" for invitation only). Sampled every 20 ms:
//
//   - for a minute before the stop, every node names the superpeer, also
//     while a member is cut off for 20 s, leaves the views (a change of
//     members: invitation's machine is reconfigured, not rebuilt, so that
//     its group survives) and comes back;
//   - after the stop, no node claims the role unfollowed for longer than
//     lonelyBound;
//   - 30 s after the stop the cluster has one superpeer, which every live
//     node names.
func TestInvitationKillSuperpeerClaims(t *testing.T) {
	const lonelyBound = 500 * time.Millisecond
	for seed := range uint64(10) {
		s := converged(t, Config{N: 8, Seed: seed, Node: node.Config{
			Target: dhtselect.Target{Superpeers: 1}, Election: "invitation"}})
		// Converged names the lookup's answer while invitation's groups
		// still merge; wait for the election: every node's leader is the
		// one claimer, which every node names.
		agreed := func(s *Sim) bool {
			cl := claimers(s)
			if len(cl) != 1 || leaderOf(s) != cl[0] {
				return false
			}
			for i := range s.N() {
				if s.State(i).Superpeer != s.ID(cl[0]) {
					return false
				}
			}
			return true
		}
		if !s.RunUntil(agreed, 20*time.Millisecond, time.Minute) {
			t.Fatalf("seed %d: no single elected superpeer a minute after convergence", seed)
		}
		victim := claimers(s)[0]
		other := (victim + 1) % 8
		s.After(10*time.Second, func(s *Sim) { s.Isolate(other) })
		s.After(30*time.Second, func(s *Sim) { s.Heal() })
		for end := s.Now() + time.Minute; s.Now() < end; {
			s.RunFor(20 * time.Millisecond)
			for i := range s.N() {
				if sp := s.State(i).Superpeer; i != other && sp != s.ID(victim) {
					t.Fatalf("seed %d, t=%v: n%d names %q, not the superpeer %s (n%d was cut off from 10 s to 30 s)",
						seed, s.Now(), i, sp, s.ID(victim), other)
				}
			}
		}
		stop := s.Now()
		s.Crash(victim)
		lonely := map[int]time.Duration{} // unfollowed claimer: since when
		for s.Now() < stop+30*time.Second {
			s.RunFor(20 * time.Millisecond)
			cl := claimers(s)
			for _, c := range cl {
				followed := false
				for i := range s.N() {
					followed = followed || i != c && s.Alive(i) && s.State(i).Superpeer == s.ID(c)
				}
				if followed {
					delete(lonely, c)
					continue
				}
				if _, ok := lonely[c]; !ok {
					lonely[c] = s.Now()
				}
				if d := s.Now() - lonely[c]; d > lonelyBound {
					t.Fatalf("seed %d, t=+%v after the stop of n%d: n%d has claimed the superpeer role for %v and no member names it (claimers %v)",
						seed, s.Now()-stop, victim, c, d, cl)
				}
			}
			for c := range lonely {
				if !slices.Contains(cl, c) {
					delete(lonely, c)
				}
			}
		}
		cl := claimers(s)
		if len(cl) != 1 {
			t.Fatalf("seed %d: 30 s after the stop of n%d: claimers %v, want one", seed, victim, cl)
		}
		for i := range s.N() {
			if s.Alive(i) && s.State(i).Superpeer != s.ID(cl[0]) {
				t.Fatalf("seed %d: 30 s after the stop: n%d names %q, not the superpeer n%d", seed, i, s.State(i).Superpeer, cl[0])
			}
		}
	}
}
