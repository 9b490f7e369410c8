package classic

import (
	"slices"
	"testing"
)

// TestSilentMember: the leader crashes, and a member is cut off without
// failed sends (a hostile member that takes every message and answers
// nothing, or one that dropped the cluster from its view): the others
// must agree on a new leader, neither of the two, within 100 ticks. Ring,
// ring-max and echo do not (no leader in 400 ticks; README, known
// limits): they skip only a member whose send fails, and an election
// that passes through the silent member, or waits for its echo, dies
// there.
func TestSilentMember(t *testing.T) {
	for _, algo := range Algorithms() {
		if slices.Contains([]string{"ring", "ring-max", "echo"}, algo) {
			continue
		}
		t.Run(algo, func(t *testing.T) {
			ids := tnIDs(6)
			n := newTnet(t, ids, func(id ID) Machine { return tnMust[Machine](t)(New(algo, tnCfg(id, ids), Options{})) })
			for _, id := range ids {
				n.campaign(id)
			}
			n.runUntil(300, "one leader", func() bool { ls := n.leaders(); return len(ls) == 1 && n.agree(ls[0]) })
			dead := n.leaders()[0]
			silent := ids[2]
			if silent == dead {
				silent = ids[1]
			}
			n.crash(dead)
			n.isolate(silent)
			others := slices.DeleteFunc(slices.Clone(ids), func(id ID) bool { return id == dead || id == silent })
			n.runUntil(100, "the others agreeing on a live leader", func() bool {
				l := n.state(others[0]).Leader
				if l == None || l == dead || l == silent {
					return false
				}
				for _, id := range others {
					if n.state(id).Leader != l {
						return false
					}
				}
				return true
			})
		})
	}
}
