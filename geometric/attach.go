package geometric

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// Superpeer is a superpeer as an ordinary peer choosing where to attach sees
// it.
type Superpeer struct {
	ID    ID
	Coord *coordinate.Coordinate
	// Load is the number of ordinary peers it serves now.
	Load int
	// RTT is an RTT the caller measured to it, or 0 when none was; a
	// measured RTT takes precedence over the estimate from coordinates.
	RTT time.Duration
}

// Attach returns the superpeer an ordinary peer at self should attach to:
// the nearest one with room (Load < capacity), nearness being the measured
// RTT where the caller supplied one and the distance estimated from
// coordinates otherwise; ties go to the smaller ID. Superpeers without a
// usable coordinate or measurement are skipped. It fails with ErrConfig for
// capacity < 1 and ErrNoRoom when no superpeer has room.
func Attach(self *coordinate.Coordinate, sps []Superpeer, capacity int) (ID, error) {
	if capacity < 1 {
		return "", fmt.Errorf("%w: capacity = %d, want at least 1 ordinary peer per superpeer", ErrConfig, capacity)
	}
	var best ID
	bestD := time.Duration(-1)
	for _, sp := range sps {
		if sp.Load >= capacity {
			continue
		}
		d := sp.RTT
		if d <= 0 {
			if self == nil || validate(self, len(self.Vec)) != nil || validate(sp.Coord, len(self.Vec)) != nil {
				continue // no usable estimate (nil, NaN, absurd, other dimension)
			}
			d = time.Duration(Distance(self, sp.Coord) * float64(time.Second))
		}
		if bestD < 0 || d < bestD || (d == bestD && sp.ID < best) {
			best, bestD = sp.ID, d
		}
	}
	if bestD < 0 {
		return "", fmt.Errorf("%w: none of %d superpeers has room (capacity %d) and a usable coordinate or RTT", ErrNoRoom, len(sps), capacity)
	}
	return best, nil
}

// AttachAll computes, offline, the attachment of every peer: coords[i] is the
// coordinate of peer i and superpeers lists the indexes of the superpeers.
// Pairs (ordinary peer, superpeer) are taken in order of increasing estimated
// distance (ties by peer, then superpeer index), and a peer attaches to the
// superpeer of its first pair that still has room, so each superpeer serves
// at most capacity ordinary peers. The result maps every peer to the index
// of its superpeer; a superpeer maps to itself. It fails with ErrConfig for a
// bad capacity, a superpeer index out of range or repeated, and with
// ErrNoRoom when the ordinary peers outnumber the room (then the result is
// still returned, with -1 for the peers left out).
func AttachAll(coords []*coordinate.Coordinate, superpeers []int, capacity int) ([]int, error) {
	dims := -1
	for _, s := range superpeers {
		if s < 0 || s >= len(coords) {
			dims = -2 // AttachAllBy reports it
			break
		}
	}
	if dims == -1 && len(superpeers) > 0 {
		dims = len(coords[superpeers[0]].Vec)
		for _, c := range coords {
			if c == nil || len(c.Vec) != dims {
				dims = -2 // as Distance takes it, whatever that is
				break
			}
		}
	}
	if dims < 0 {
		return AttachAllBy(len(coords), func(i, j int) float64 { return Distance(coords[i], coords[j]) }, superpeers, capacity)
	}
	// The nearest superpeers of a peer come from an index over them, with
	// the same distances and ties as a scan of all of them.
	sc := make([]*coordinate.Coordinate, len(superpeers))
	for k, s := range superpeers {
		sc[k] = coords[s]
	}
	ix := newPivotIndex(sc, dims)
	var buf []neighbour
	return attachAllNearest(len(coords), func(i, m int, last pair, out []pair) []pair {
		// The m pairs after last are among the nearest m + (the number
		// up to last); ask for more until they are.
		for want := m; ; want *= 2 {
			buf = ix.nearest(coords[i], want, -1, buf)
			out = out[:0]
			for _, nb := range buf {
				if p := (pair{nb.d, i, int(nb.i)}); len(out) < m && (last.k < 0 || p.compare(last) > 0) {
					out = append(out, p)
				}
			}
			if len(out) == m || len(buf) < want {
				return out
			}
		}
	}, superpeers, capacity)
}

// AttachAllBy is AttachAll for n peers with any distance: dist(i, j) is
// the distance from peer i to superpeer j (benchmarks pass the true RTT to
// judge a placement apart from the coordinates' errors).
func AttachAllBy(n int, dist func(i, j int) float64, superpeers []int, capacity int) ([]int, error) {
	return attachAll(n, func(i int, ds []float64) {
		for k, s := range superpeers {
			ds[k] = dist(i, s)
		}
	}, superpeers, capacity)
}

// attachAll is AttachAllBy with the distances from peer i to every
// superpeer k given by row(i, ds) as ds[k].
func attachAll(n int, row func(i int, ds []float64), superpeers []int, capacity int) ([]int, error) {
	ds := make([]float64, len(superpeers))
	return attachAllNearest(n, func(i, m int, last pair, out []pair) []pair {
		row(i, ds)
		return nextPairs(i, ds, m, last, out)
	}, superpeers, capacity)
}

// nextPairs returns in out the m pairs (i, k) at distance ds[k] that
// follow last (k = -1: from the start), in order.
func nextPairs(i int, ds []float64, m int, last pair, out []pair) []pair {
	started := last.k >= 0
	best := out[:0]
	for k, d := range ds {
		// The plain comparisons first: most pairs fail them.
		if (started && d < last.d) || (len(best) == m && d > best[m-1].d) {
			continue
		}
		p := pair{d, i, k}
		if started && p.compare(last) <= 0 {
			continue
		}
		if len(best) == m && p.compare(best[m-1]) >= 0 {
			continue
		}
		// Keep the m smallest, in order (m is small but for unlucky peers).
		if len(best) < m {
			best = append(best, p)
		} else {
			best[m-1] = p
		}
		for at := len(best) - 1; at > 0 && best[at].compare(best[at-1]) < 0; at-- {
			best[at], best[at-1] = best[at-1], best[at]
		}
	}
	return best
}

// attachAllNearest is AttachAllBy with next(i, m, last, out) returning in
// out the m nearest superpeers of peer i whose pairs follow last (fewer
// when there are no more).
func attachAllNearest(n int, next func(i, m int, last pair, out []pair) []pair, superpeers []int, capacity int) ([]int, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("%w: capacity = %d, want at least 1 ordinary peer per superpeer", ErrConfig, capacity)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	for k, s := range superpeers {
		if s < 0 || s >= n {
			return nil, fmt.Errorf("%w: superpeers[%d] = %d is out of range for %d peers", ErrConfig, k, s, n)
		}
		if out[s] >= 0 {
			return nil, fmt.Errorf("%w: superpeers[%d] = %d is listed twice", ErrConfig, k, s)
		}
		out[s] = s
	}
	// The greedy rule takes all (peer, superpeer) pairs in order of
	// distance. Sorting all of them costs O(N·S) memory (2.4 GB for
	// N = 100,000 and S = 1,000), so the pairs are generated lazily, with
	// the same result: every unattached peer offers its nearest superpeer
	// it has not yet found full, the nearest offer overall is taken first,
	// and a peer whose offer meets a full superpeer offers its next one
	// (a full superpeer stays full, so the skipped pairs would have been
	// skipped anyway).
	if left := n - len(superpeers); left > 0 {
		a := newAttacher(n, next, len(superpeers))
		for i := range n {
			if out[i] < 0 {
				if p, ok := a.next(i); ok {
					a.heap = append(a.heap, p)
				}
			}
		}
		a.init()
		load := make([]int, len(superpeers))
		for left > 0 && len(a.heap) > 0 {
			p := a.heap[0]
			if load[p.k] < capacity {
				out[p.peer] = superpeers[p.k]
				load[p.k]++
				left--
				a.pop()
				continue
			}
			if q, ok := a.next(p.peer); ok {
				a.heap[0] = q
				a.down(0)
			} else {
				a.pop()
			}
		}
	}
	left := 0
	for _, s := range out {
		if s < 0 {
			left++
		}
	}
	if left > 0 {
		return out, fmt.Errorf("%w: %d ordinary peers but %d superpeers × capacity %d; %d left unattached",
			ErrNoRoom, n-len(superpeers), len(superpeers), capacity, left)
	}
	return out, nil
}

// pair is a candidate attachment of peer to superpeers[k] at distance d.
type pair struct {
	d       float64
	peer, k int
}

func (a pair) compare(b pair) int {
	return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.peer, b.peer), cmp.Compare(a.k, b.k))
}

// before is a.compare(b) < 0, quicker for distances that differ.
func (a pair) before(b pair) bool {
	if a.d < b.d {
		return true
	}
	if a.d > b.d {
		return false
	}
	return a.compare(b) < 0
}

// attacher hands out the pairs of every peer in increasing order: it keeps
// the next few nearest superpeers of a peer, not yet offered, and asks for
// the next ones when they run out (twice as many each time), so memory
// stays O(N) in all but unlucky cases.
type attacher struct {
	more func(i, m int, last pair, out []pair) []pair
	s    int
	cand [][]pair // peer -> its next pairs, nearest first
	m    []int32  // peer -> how many pairs its next batch holds
	last []pair   // peer -> the last pair offered (k = -1: none yet)
	heap []pair
}

// firstBatch is the number of pairs computed for a peer at first.
const firstBatch = 8

func newAttacher(n int, more func(i, m int, last pair, out []pair) []pair, s int) *attacher {
	a := &attacher{more: more, s: s, cand: make([][]pair, n), m: make([]int32, n), last: make([]pair, n)}
	m := min(s, firstBatch)
	flat := make([]pair, n*m)
	for i := range a.last {
		a.last[i] = pair{math.NaN(), i, -1}
		a.cand[i] = flat[i*m : i*m : (i+1)*m]
		a.m[i] = int32(m)
	}
	return a
}

// next returns the next pair of peer i, or false when it has none left.
func (a *attacher) next(i int) (pair, bool) {
	if len(a.cand[i]) == 0 {
		m := int(a.m[i])
		out := a.cand[i][:0]
		if cap(out) < m {
			out = make([]pair, 0, m)
		}
		a.cand[i] = a.more(i, m, a.last[i], out)
		a.m[i] = int32(min(2*m, a.s))
		if len(a.cand[i]) == 0 {
			return pair{}, false
		}
	}
	p := a.cand[i][0]
	a.cand[i] = a.cand[i][1:]
	a.last[i] = p
	return p, true
}

func (a *attacher) init() {
	for i := len(a.heap)/2 - 1; i >= 0; i-- {
		a.down(i)
	}
}

func (a *attacher) pop() {
	last := len(a.heap) - 1
	a.heap[0] = a.heap[last]
	a.heap = a.heap[:last]
	if last > 0 {
		a.down(0)
	}
}

func (a *attacher) down(i int) {
	h := a.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			l = r
		}
		if !h[l].before(h[i]) {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}
