package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/superpeer/superpeer/classic"
)

// tracker follows liveness, connectivity and states of n nodes and answers,
// in O(1) after each change, whether the live nodes agree on a leader and
// whether two live nodes both claim leadership. The Sim keeps one up to date
// as it runs; the checker replays a Record through another.
//
// Agreement is judged per component (nodes connected through the partition
// groups and cut links; see components): a component agrees when all its
// live in-scope nodes name the same leader X, X is one of them and has role
// Leader, and no other of them has role Leader. The nodes agree when every
// component with a live in-scope node agrees, and at least one such
// component exists.
type tracker struct {
	ids   []classic.ID
	index map[classic.ID]int32
	scope []bool // nil: every node
	alive []bool
	state []classic.State
	comp  []int32
	comps []compStats
	// okCount counts components that agree; nonEmpty those with a live
	// in-scope node.
	okCount, nonEmpty int

	// Split brain, over all nodes regardless of scope and connectivity.
	leaders     int              // live nodes with role Leader
	termLeaders map[uint64]int32 // live leaders per term
	dupTerms    int              // terms with two or more live leaders
}

type compStats struct {
	live    int32                // live in-scope nodes
	leaders int32                // of which with role Leader
	votes   map[classic.ID]int32 // their State.Leader values, zero counts deleted
	ok      bool                 // the component agrees
}

func newTracker(ids []classic.ID, index map[classic.ID]int32, scope []bool) *tracker {
	n := len(ids)
	t := &tracker{
		ids: ids, index: index, scope: scope,
		alive:       make([]bool, n),
		state:       make([]classic.State, n),
		comp:        make([]int32, n),
		comps:       make([]compStats, 1),
		termLeaders: make(map[uint64]int32),
	}
	for i := range t.alive {
		t.alive[i] = true
		t.add(i)
	}
	t.refresh(0)
	return t
}

func (t *tracker) inScope(i int) bool { return t.scope == nil || t.scope[i] }

// add counts node i's current state, if it is alive.
func (t *tracker) add(i int) {
	if !t.alive[i] {
		return
	}
	st := t.state[i]
	if st.Role == classic.Leader {
		t.leaders++
		t.termLeaders[st.Term]++
		if t.termLeaders[st.Term] == 2 {
			t.dupTerms++
		}
	}
	if !t.inScope(i) {
		return
	}
	c := &t.comps[t.comp[i]]
	if c.live++; c.live == 1 {
		t.nonEmpty++
	}
	if st.Role == classic.Leader {
		c.leaders++
	}
	if c.votes == nil {
		c.votes = make(map[classic.ID]int32)
	}
	c.votes[st.Leader]++
}

// remove undoes add.
func (t *tracker) remove(i int) {
	if !t.alive[i] {
		return
	}
	st := t.state[i]
	if st.Role == classic.Leader {
		t.leaders--
		if t.termLeaders[st.Term] == 2 {
			t.dupTerms--
		}
		if t.termLeaders[st.Term]--; t.termLeaders[st.Term] == 0 {
			delete(t.termLeaders, st.Term)
		}
	}
	if !t.inScope(i) {
		return
	}
	c := &t.comps[t.comp[i]]
	if c.live--; c.live == 0 {
		t.nonEmpty--
	}
	if st.Role == classic.Leader {
		c.leaders--
	}
	if c.votes[st.Leader]--; c.votes[st.Leader] == 0 {
		delete(c.votes, st.Leader)
	}
}

// refresh recomputes whether component c agrees.
func (t *tracker) refresh(c int32) {
	cs := &t.comps[c]
	ok := false
	if cs.live > 0 && cs.leaders == 1 && len(cs.votes) == 1 {
		for id := range cs.votes { // exactly one key
			x, found := t.index[id]
			ok = id != classic.None && found && t.alive[x] && t.inScope(int(x)) &&
				t.comp[x] == c && t.state[x].Role == classic.Leader
		}
	}
	if ok != cs.ok {
		if ok {
			t.okCount++
		} else {
			t.okCount--
		}
		cs.ok = ok
	}
}

// setState records node i's new state.
func (t *tracker) setState(i int, st classic.State) {
	t.remove(i)
	t.state[i] = st
	t.add(i)
	t.refresh(t.comp[i])
}

// setAlive marks node i crashed or alive again.
func (t *tracker) setAlive(i int, alive bool) {
	if t.alive[i] == alive {
		return
	}
	if alive {
		t.alive[i] = true
		t.add(i)
	} else {
		t.remove(i)
		t.alive[i] = false
	}
	t.refresh(t.comp[i])
}

// setTopology replaces the connectivity (see components) and recounts.
func (t *tracker) setTopology(groups []int32, cuts [][2]int) {
	comp, k := components(len(t.ids), groups, cuts)
	for i := range t.ids {
		t.remove(i)
	}
	t.comp = comp
	t.comps = make([]compStats, k)
	t.okCount, t.nonEmpty = 0, 0
	for i := range t.ids {
		t.add(i)
	}
	for c := range t.comps {
		t.refresh(int32(c))
	}
}

// agreed reports whether the live in-scope nodes agree, and the leader when
// they form a single component.
func (t *tracker) agreed() (classic.ID, bool) {
	if t.nonEmpty == 0 || t.okCount != t.nonEmpty {
		return classic.None, false
	}
	if t.nonEmpty > 1 {
		return classic.None, true
	}
	for i := range t.comps {
		if t.comps[i].live > 0 {
			for id := range t.comps[i].votes {
				return id, true
			}
		}
	}
	return classic.None, false // unreachable
}

// leaderIDs lists the live nodes with role Leader, in index order. It costs
// O(n).
func (t *tracker) leaderIDs() []classic.ID {
	var out []classic.ID
	for i, st := range t.state {
		if t.alive[i] && st.Role == classic.Leader {
			out = append(out, t.ids[i])
		}
	}
	return out
}

// describe explains, for an error message, why the nodes do not agree. It
// costs O(n).
func (t *tracker) describe() string {
	if t.nonEmpty == 0 {
		return "no live node in scope"
	}
	var parts []string
	for c := range t.comps {
		cs := &t.comps[c]
		if cs.live == 0 || cs.ok {
			continue
		}
		var claim []string
		for i, st := range t.state {
			if t.comp[i] == int32(c) && t.alive[i] && t.inScope(i) && st.Role == classic.Leader {
				claim = append(claim, string(t.ids[i]))
			}
		}
		names := make([]string, 0, len(cs.votes))
		for id, k := range cs.votes {
			name := string(id)
			if id == classic.None {
				name = "(none)"
			}
			names = append(names, fmt.Sprintf("%s×%d", name, k))
		}
		slices.Sort(names)
		if len(names) > 8 {
			names = append(names[:8], "...")
		}
		parts = append(parts, fmt.Sprintf("component %d: %d live, leaders %v, named as leader: %s",
			c, cs.live, claim, strings.Join(names, " ")))
	}
	if len(parts) == 0 && t.nonEmpty > 1 {
		return fmt.Sprintf("the live nodes form %d components, each with its own leader", t.nonEmpty)
	}
	return strings.Join(parts, "; ")
}

// components labels each of n nodes with its connected component, given
// partition groups (nil: one group) and cut links. Inside a group every pair
// is linked except cut pairs; a group with fewer than size-1 cut pairs inside
// is always connected, so only a heavily cut group costs O(size²).
func components(n int, groups []int32, cuts [][2]int) ([]int32, int) {
	comp := make([]int32, n)
	if groups != nil {
		copy(comp, groups)
	}
	if len(cuts) == 0 {
		return compact(comp)
	}
	size := map[int32]int{}
	for _, g := range comp {
		size[g]++
	}
	cutIn := map[int32]int{}
	cut := make(map[[2]int]bool, len(cuts))
	for _, p := range cuts {
		cut[p] = true
		if comp[p[0]] == comp[p[1]] {
			cutIn[comp[p[0]]]++
		}
	}
	next := int32(0)
	for _, g := range comp {
		next = max(next, g+1)
	}
	// Split heavily cut groups by breadth-first search over uncut links.
	for g, k := range cutIn {
		if k < size[g]-1 {
			continue
		}
		var members []int
		for i, c := range comp {
			if c == g {
				members = append(members, i)
			}
		}
		seen := make(map[int]bool, len(members))
		for _, root := range members {
			if seen[root] {
				continue
			}
			label := next
			next++
			queue := []int{root}
			seen[root] = true
			for len(queue) > 0 {
				u := queue[0]
				queue = queue[1:]
				comp[u] = label
				for _, v := range members {
					if !seen[v] && !cut[pairKey(u, v)] {
						seen[v] = true
						queue = append(queue, v)
					}
				}
			}
		}
	}
	return compact(comp)
}

// compact renumbers labels to 0..k-1 in order of first appearance.
func compact(comp []int32) ([]int32, int) {
	re := map[int32]int32{}
	for i, c := range comp {
		r, ok := re[c]
		if !ok {
			r = int32(len(re))
			re[c] = r
		}
		comp[i] = r
	}
	return comp, max(len(re), 1)
}

// pairKey orders a pair of nodes.
func pairKey(i, j int) [2]int {
	if i > j {
		i, j = j, i
	}
	return [2]int{i, j}
}
