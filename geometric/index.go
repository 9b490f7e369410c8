package geometric

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/hashicorp/serf/coordinate"
)

// pivotIndex indexes a fixed set of coordinates for exact searches by
// Distance. The points are grouped in clusters around pivots (the nearest
// pivot by Vec distance), stored cluster by cluster in flat arrays, and
// searches skip whole clusters by the triangle inequality. Distance is not
// a metric on Vec alone, but with w = Height + Adjustment (see weight)
//
//	Distance(q, p) >= |q.Vec - p.Vec| + w(q) + w(p)
//	               >= |q.Vec - c| - |c - p.Vec| + w(q) + w(p)
//
// for the centre c of p's cluster, which bounds every member of a cluster
// from below by one distance to its centre. Searches compare exact
// distances at the end, so their results are those of a linear scan;
// bounds are loosened by boundSlack to absorb rounding.
type pivotIndex struct {
	dims    int
	order   []int32   // position -> point index
	pos     []int32   // point index -> position
	vec     []float64 // position × dims: the Vec parts
	h, a, w []float64 // position -> Height, Adjustment, weight
	cluster []int32   // position -> cluster
	cdist   []float64 // position -> Vec distance to its cluster's centre
	start   []int32   // cluster c holds positions [start[c], start[c+1])
	centre  []float64 // cluster × dims
	rad     []float64 // cluster -> largest cdist - w of its members
	minW    []float64 // cluster -> smallest w of its members
	scratch []float64 // cluster -> a distance, during a search
	byLB    []lbCluster
}

// lbCluster is a cluster and a lower bound on the distance from a query
// to its members.
type lbCluster struct {
	lb float64
	c  int32
}

// boundSlack (seconds) is subtracted from every lower bound before it
// prunes: far more than the rounding of the sums involved (values below
// 10 s, in float64) and far less than any RTT that matters.
const boundSlack = 1e-9

// weight returns w = Height + Adjustment. Distance(a, b) >= dist(a.Vec,
// b.Vec) + weight(a) + weight(b): Distance adds both adjustments whenever
// that leaves it positive, and otherwise returns the distance without
// them, which is then larger than the sum with them.
func weight(c *coordinate.Coordinate) float64 { return c.Height + c.Adjustment }

// clustersFor is the number of clusters for n points: about 2√n, which
// balances the distances to the centres that every search computes
// against the members of the clusters it cannot skip.
func clustersFor(n int) int {
	return max(1, min(n, int(2*math.Sqrt(float64(n)))))
}

// newPivotIndex indexes cs, which must all have dims dimensions. The
// pivots are every (n/C)-th point, moved once to the centroid of the points
// nearest to them (one step of Lloyd's algorithm).
func newPivotIndex(cs []*coordinate.Coordinate, dims int) *pivotIndex {
	n := len(cs)
	c := clustersFor(n)
	if n == 0 {
		c = 0
	}
	x := &pivotIndex{dims: dims, centre: make([]float64, c*dims), scratch: make([]float64, c)}
	for k := range c {
		copy(x.centre[k*dims:(k+1)*dims], cs[k*n/c].Vec)
	}
	of := make([]int32, n)
	assign := func() {
		for i, p := range cs {
			best, bestD := int32(0), math.Inf(1)
			for k := range c {
				if d := dist(p.Vec, x.centre[k*dims:(k+1)*dims]); d < bestD {
					best, bestD = int32(k), d
				}
			}
			of[i] = best
		}
	}
	assign()
	count := make([]int, c)
	clear(x.centre)
	for i, p := range cs {
		count[of[i]]++
		for k, v := range p.Vec {
			x.centre[int(of[i])*dims+k] += v
		}
	}
	for k := range c {
		for d := range dims {
			x.centre[k*dims+d] /= float64(max(count[k], 1))
		}
	}
	assign()
	// Lay the points out cluster by cluster, nearest to the centre first
	// within each (ties by index).
	x.start = make([]int32, c+1)
	for _, k := range of {
		x.start[k+1]++
	}
	for k := range c {
		x.start[k+1] += x.start[k]
	}
	next := append([]int32(nil), x.start[:c]...)
	x.order, x.pos = make([]int32, n), make([]int32, n)
	for i, k := range of {
		x.order[next[k]] = int32(i)
		next[k]++
	}
	cdistOf := func(i int32) float64 {
		k := int(of[i])
		return dist(cs[i].Vec, x.centre[k*dims:(k+1)*dims])
	}
	for k := range c {
		slices.SortFunc(x.order[x.start[k]:x.start[k+1]], func(a, b int32) int {
			return cmp.Or(cmp.Compare(cdistOf(a), cdistOf(b)), cmp.Compare(a, b))
		})
	}
	for p, i := range x.order {
		x.pos[i] = int32(p)
	}
	x.vec = make([]float64, n*dims)
	x.h, x.a, x.w = make([]float64, n), make([]float64, n), make([]float64, n)
	x.cluster, x.cdist = make([]int32, n), make([]float64, n)
	x.rad, x.minW, x.byLB = make([]float64, c), make([]float64, c), make([]lbCluster, c)
	for k := range x.rad {
		x.rad[k], x.minW[k] = math.Inf(-1), math.Inf(1)
	}
	for p, i := range x.order {
		copy(x.vec[p*dims:(p+1)*dims], cs[i].Vec)
		x.h[p], x.a[p], x.w[p] = cs[i].Height, cs[i].Adjustment, weight(cs[i])
		k := of[i]
		x.cluster[p] = k
		x.cdist[p] = dist(cs[i].Vec, x.centre[int(k)*dims:int(k+1)*dims])
		x.rad[k] = max(x.rad[k], x.cdist[p]-x.w[p])
		x.minW[k] = min(x.minW[k], x.w[p])
	}
	return x
}

// clusters returns the number of clusters.
func (x *pivotIndex) clusters() int { return len(x.rad) }

// point returns the Vec part of the point at position p.
func (x *pivotIndex) point(p int32) []float64 {
	return x.vec[int(p)*x.dims : int(p+1)*x.dims]
}

// centreDists fills x.scratch with the Vec distance from q to every centre
// and returns it.
func (x *pivotIndex) centreDists(q []float64) []float64 {
	d := x.dims
	for k := range x.scratch {
		x.scratch[k] = dist(q, x.centre[k*d:(k+1)*d])
	}
	return x.scratch
}

// distanceTo is Distance for coordinates given by parts, with the same
// operations in the same order, so that it returns the same bits.
func distanceTo(av []float64, ah, aa float64, bv []float64, bh, ba float64) float64 {
	d := dist(av, bv) + ah + bh
	if adj := d + aa + ba; adj > 0 {
		return adj
	}
	return d
}

// neighbour is a candidate of a nearest-neighbour search.
type neighbour struct {
	d float64
	i int32 // point index
}

func (a neighbour) less(b neighbour) bool { return a.d < b.d || (a.d == b.d && a.i < b.i) }

// nearest returns the k points nearest to q by Distance(q, point), ties by
// index, leaving out point skip. best is reused for the result.
func (x *pivotIndex) nearest(q *coordinate.Coordinate, k int, skip int32, best []neighbour) []neighbour {
	best = best[:0]
	if k <= 0 || x.clusters() == 0 {
		return best
	}
	cd := x.centreDists(q.Vec)
	qw := weight(q)
	lb := func(c int) float64 { return cd[c] + qw - x.rad[c] - boundSlack }
	// The cluster with the least lower bound first; then the others that
	// its k-th distance cannot rule out, in order of their lower bound,
	// until the bound exceeds the k-th distance found.
	first := 0
	for c := range cd {
		if lb(c) < lb(first) {
			first = c
		}
	}
	order := append(x.byLB[:0], lbCluster{lb(first), int32(first)})
	best = x.scan(order, cd, q, k, skip, best)
	order = order[:0]
	for c := range cd {
		if c != first && x.start[c] < x.start[c+1] && (len(best) < k || lb(c) <= best[k-1].d) {
			order = append(order, lbCluster{lb(c), int32(c)})
		}
	}
	slices.SortFunc(order, func(a, b lbCluster) int { return cmp.Compare(a.lb, b.lb) })
	best = x.scan(order, cd, q, k, skip, best)
	x.byLB = order
	return best
}

// scan is nearest's look at the members of the clusters in order, until
// their lower bound exceeds the k-th distance in best.
func (x *pivotIndex) scan(order []lbCluster, cd []float64, q *coordinate.Coordinate, k int, skip int32, best []neighbour) []neighbour {
	qv, qh, qa, qw := q.Vec, q.Height, q.Adjustment, weight(q)
	for _, o := range order {
		if len(best) == k && o.lb > best[k-1].d {
			break
		}
		c := int(o.c)
		// Members lie cdist from the centre, in increasing order, and
		// Distance(q, p) >= |cd - cdist| + w(q) + w(p): only those with
		// cdist within reach of cd need a look.
		lo, hi := x.start[c], x.start[c+1]
		if len(best) == k {
			reach := best[k-1].d - qw - x.minW[c] + boundSlack
			lo += int32(sort.Search(int(hi-lo), func(m int) bool { return x.cdist[lo+int32(m)] >= cd[c]-reach }))
		}
		for p := lo; p < hi; p++ {
			if len(best) == k {
				if x.cdist[p]-cd[c]+qw+x.minW[c]-boundSlack > best[k-1].d {
					break // and all farther out
				}
				if math.Abs(cd[c]-x.cdist[p])+qw+x.w[p]-boundSlack > best[k-1].d {
					continue
				}
			}
			i := x.order[p]
			if i == skip {
				continue
			}
			nb := neighbour{distanceTo(qv, qh, qa, x.point(p), x.h[p], x.a[p]), i}
			if len(best) == k && !nb.less(best[k-1]) {
				continue
			}
			at := len(best)
			if at < k {
				best = append(best, nb)
			} else {
				at--
				best[at] = nb
			}
			for ; at > 0 && best[at].less(best[at-1]); at-- {
				best[at], best[at-1] = best[at-1], best[at]
			}
		}
	}
	return best
}
