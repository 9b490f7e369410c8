package nodesim

import (
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestSuperpeersAreElected: under churn with replacement (300 nodes,
// bully, 10 % replaced per minute for 3 minutes: about 90 joiners, one in
// ten of them the closest to its cluster's key), a node claims the
// superpeer role only while its election names it (or it is alone in its
// cluster). A joiner the lookup named used to claim its cluster as soon as
// the lookup answered, while its mates, who drop election messages from a
// peer not yet in their views, followed the leader they had: 20
// cluster-seconds of split brain in this run, 8 now.
func TestSuperpeersAreElected(t *testing.T) {
	s := converged(t, Config{N: 300, Seed: 1, Stagger: 10 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.1}, Election: "bully"}})
	o := s.Observe(time.Second)
	s.Churn(0.1, 3*time.Minute, o)
	bad := 0
	s.Every(100*time.Millisecond, func(s *Sim) {
		for i := range s.N() {
			st := s.State(i)
			if !s.Alive(i) || st.Role != node.RoleSuperpeer || len(st.Members) == 1 {
				continue
			}
			if l := s.Machine(i).Election().Leader; l != s.ID(i) {
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
