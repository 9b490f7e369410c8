package nodesim

import (
	"math/rand/v2"
	"testing"

	"github.com/superpeer/superpeer/overlay/node"
)

// TestSummaryChanges: summaryChanges counts as a count by value and by
// superpeer does (the simulator's figure of summary changes), and leaves
// its places zero.
func TestSummaryChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	byMaps := func(a, b []node.Summary) uint64 {
		old := map[node.Summary]bool{}
		for _, x := range a {
			old[x] = true
		}
		var c uint64
		for _, x := range b {
			if !old[x] {
				c++
			}
		}
		now := map[string]bool{}
		for _, x := range b {
			now[string(x.Superpeer)] = true
		}
		for _, x := range a {
			if !now[string(x.Superpeer)] {
				c++
			}
		}
		return c
	}
	draw := func() ([]node.Summary, []int32) {
		var l []node.Summary
		var idx []int32
		for _, j := range rng.Perm(40)[:rng.IntN(40)] {
			l = append(l, node.Summary{Superpeer: nodeID(j), K: rng.IntN(2), Size: rng.IntN(2)})
			idx = append(idx, int32(j))
		}
		return l, idx
	}
	pos := make([]int32, 40)
	for range 500 {
		a, ai := draw()
		b, bi := draw()
		if got, want := summaryChanges(a, ai, b, bi, pos), byMaps(a, b); got != want {
			t.Fatalf("summaryChanges = %d, want %d", got, want)
		}
		for j, p := range pos {
			if p != 0 {
				t.Fatalf("pos[%d] = %d after", j, p)
			}
		}
	}
}
