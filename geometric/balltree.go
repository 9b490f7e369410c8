package geometric

import "math"

// ballTree indexes balls: point p is a ball of centre p.Vec and radius
// r(p), and a search from a query y finds every point whose ball may hold
// y, in the sense that
//
//	|y.Vec - p.Vec| + w(y) <= r(p) + boundSlack,
//
// with w the weight of the query. PeerSpace puts there r(p) = d2(p) -
// w(p), so that Distance(y, p) <= d2(p) only for points a search visits
// (Distance(y, p) >= |y.Vec - p.Vec| + w(y) + w(p); see weight). It is a
// k-d tree whose nodes know the bounding box of their centres and the
// largest radius below them, and which splits along the radius as along
// any axis, so that large balls, which a search cannot skip, gather in few
// nodes. The radii may change after the build: refresh restores the
// largest radius of the nodes above the changed points (the tree's shape,
// chosen for the old radii, may then prune less well; build again).
//
// The tree does not keep the points: newBallTree returns the order in
// which the caller must lay its points out, and nodes cover ranges of
// points in that order, so that the points of a node lie together in
// memory.
type ballTree struct {
	dims    int
	nodes   []btNode
	boxes   []float64 // node × 2·dims: low corner, high corner
	rmax    []float64 // node -> largest radius below it
	newest  []uint64  // node -> newest version of a point below it
	leafOf  []int32   // point -> its leaf
	stack   []int32
	dirty   []int32 // leaves whose radii changed
	isDirty []bool  // node -> listed in dirty
}

type btNode struct {
	lo, hi, left, right, parent int32
}

const (
	// btLeaf is the most points a leaf holds.
	btLeaf = 16
	// btRadiusWeight scales the spread of the radii against the spread
	// of the Vec axes when the build chooses the axis to split: measured
	// on 100,000 synthetic peers, a search visits fewest nodes with 2-4.
	btRadiusWeight = 2
	// btInf stands for an infinite radius when choosing splits.
	btInf = 1e3
)

// newBallTree builds the tree over n points with Vec parts vec (point ×
// dims), radii r and versions version (see refresh), and returns it with
// order: the point that must come k-th, for every k. The tree then speaks
// of points in that order.
func newBallTree(dims int, vec, r []float64, version []uint64) (*ballTree, []int32) {
	n := len(r)
	t := &ballTree{dims: dims}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	keys := make([]float64, n)
	if n > 0 {
		t.build(vec, r, order, keys, 0, int32(n), -1)
	}
	t.rmax = make([]float64, len(t.nodes))
	t.newest = make([]uint64, len(t.nodes))
	t.isDirty = make([]bool, len(t.nodes))
	t.leafOf = make([]int32, n)
	ro := make([]float64, n) // the radii and versions in the new order
	vo := make([]uint64, n)
	for k, i := range order {
		ro[k], vo[k] = r[i], version[i]
	}
	for id := len(t.nodes) - 1; id >= 0; id-- {
		if n := &t.nodes[id]; n.left < 0 {
			for k := n.lo; k < n.hi; k++ {
				t.leafOf[k] = int32(id)
			}
		}
		t.rmax[id] = t.nodeMax(int32(id), ro)
		t.newest[id] = t.nodeNewest(int32(id), vo)
	}
	return t, order
}

// nodeMax returns the largest radius below node id, from its children or,
// for a leaf, from its points.
func (t *ballTree) nodeMax(id int32, r []float64) float64 {
	n := &t.nodes[id]
	if n.left >= 0 {
		return max(t.rmax[n.left], t.rmax[n.right])
	}
	m := math.Inf(-1)
	for _, x := range r[n.lo:n.hi] {
		m = max(m, x)
	}
	return m
}

func (t *ballTree) build(vec, r []float64, order []int32, keys []float64, lo, hi, parent int32) int32 {
	id := int32(len(t.nodes))
	t.nodes = append(t.nodes, btNode{lo: lo, hi: hi, left: -1, right: -1, parent: parent})
	d := t.dims
	box := make([]float64, 2*d)
	for k := range d {
		box[k], box[d+k] = math.Inf(1), math.Inf(-1)
	}
	rlo, rhi := math.Inf(1), math.Inf(-1)
	for _, i := range order[lo:hi] {
		for k, v := range vec[int(i)*d : int(i+1)*d] {
			box[k] = min(box[k], v)
			box[d+k] = max(box[d+k], v)
		}
		rlo, rhi = min(rlo, finite(r[i])), max(rhi, finite(r[i]))
	}
	t.boxes = append(t.boxes, box...)
	if hi-lo <= btLeaf {
		return id
	}
	split, spread := d, btRadiusWeight*(rhi-rlo)
	for k := range d {
		if s := box[d+k] - box[k]; s > spread {
			split, spread = k, s
		}
	}
	if spread <= 0 {
		return id // all alike: one leaf
	}
	for k, i := range order[lo:hi] {
		if split == d {
			keys[int(lo)+k] = finite(r[i])
		} else {
			keys[int(lo)+k] = vec[int(i)*d+split]
		}
	}
	mid := lo + (hi-lo)/2
	selectNth(keys[lo:hi], order[lo:hi], int(mid-lo))
	left := t.build(vec, r, order, keys, lo, mid, id)
	right := t.build(vec, r, order, keys, mid, hi, id)
	t.nodes[id].left, t.nodes[id].right = left, right
	return id
}

// finite stands btInf for an infinite radius when choosing splits.
func finite(x float64) float64 { return min(max(x, -btInf), btInf) }

// selectNth reorders keys and ids together so that the n-th smallest (key,
// id) pair comes n-th, the smaller ones before it and the larger after it
// (Hoare's selection; deterministic).
func selectNth(keys []float64, ids []int32, n int) {
	less := func(i, j int) bool { return keys[i] < keys[j] || (keys[i] == keys[j] && ids[i] < ids[j]) }
	swap := func(i, j int) { keys[i], keys[j] = keys[j], keys[i]; ids[i], ids[j] = ids[j], ids[i] }
	lo, hi := 0, len(keys)-1
	for lo < hi {
		// Median of three as the pivot, moved to hi.
		mid := lo + (hi-lo)/2
		if less(mid, lo) {
			swap(mid, lo)
		}
		if less(hi, lo) {
			swap(hi, lo)
		}
		if less(mid, hi) {
			swap(mid, hi)
		}
		store := lo
		for i := lo; i < hi; i++ {
			if less(i, hi) {
				swap(i, store)
				store++
			}
		}
		swap(store, hi)
		switch {
		case n < store:
			hi = store - 1
		case n > store:
			lo = store + 1
		default:
			return
		}
	}
}

func (t *ballTree) boxDist(q []float64, id int32) float64 {
	d := t.dims
	box := t.boxes[int(id)*2*d : (int(id)+1)*2*d]
	s := 0.0
	for k, v := range q {
		var gap float64
		if lo := box[k]; v < lo {
			gap = lo - v
		} else if hi := box[d+k]; v > hi {
			gap = v - hi
		}
		s += gap * gap
	}
	return math.Sqrt(s)
}

// search calls f(k) for every point k whose ball may hold the query q of
// weight qw, and for some others.
func (t *ballTree) search(q []float64, qw float64, f func(k int32)) { t.walk(q, qw, false, 0, f) }

// changed notes that the radius of point k changed.
func (t *ballTree) changed(k int32) {
	if l := t.leafOf[k]; !t.isDirty[l] {
		t.isDirty[l] = true
		t.dirty = append(t.dirty, l)
	}
}

// refresh restores the largest radii and the newest versions above the
// changed points; version[k] is the version of point k, which only grows.
func (t *ballTree) refresh(r []float64, version []uint64) {
	for _, l := range t.dirty {
		t.isDirty[l] = false
		for id := l; id >= 0; id = t.nodes[id].parent {
			m, v := t.nodeMax(id, r), t.nodeNewest(id, version)
			if m == t.rmax[id] && v == t.newest[id] && id != l {
				break // nothing changes further up
			}
			t.rmax[id], t.newest[id] = m, v
		}
	}
	t.dirty = t.dirty[:0]
}

// nodeNewest returns the newest version below node id.
func (t *ballTree) nodeNewest(id int32, version []uint64) uint64 {
	n := &t.nodes[id]
	if n.left >= 0 {
		return max(t.newest[n.left], t.newest[n.right])
	}
	var v uint64
	for _, x := range version[n.lo:n.hi] {
		v = max(v, x)
	}
	return v
}

// searchSince is search restricted to the points of a version newer than
// since (and some others).
func (t *ballTree) searchSince(q []float64, qw float64, since uint64, f func(k int32)) {
	t.walk(q, qw, true, since, f)
}

// walk calls f for the points of the leaves that the query may reach,
// skipping, when versioned, the subtrees with no point newer than since.
func (t *ballTree) walk(q []float64, qw float64, versioned bool, since uint64, f func(k int32)) {
	if len(t.nodes) == 0 {
		return
	}
	todo := append(t.stack[:0], 0)
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if (versioned && t.newest[id] <= since) || t.boxDist(q, id)+qw-boundSlack > t.rmax[id] {
			continue
		}
		n := &t.nodes[id]
		if n.left >= 0 {
			todo = append(todo, n.right, n.left)
			continue
		}
		for k := n.lo; k < n.hi; k++ {
			f(k)
		}
	}
	t.stack = todo
}
