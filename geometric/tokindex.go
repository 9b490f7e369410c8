package geometric

import (
	"cmp"
	"math"
	"slices"
)

// tokenIndex finds the two nearest tokens of a peer for PeerSpace without
// comparing it with all S tokens. The tokens are grouped around fixed
// centres (the Vec parts of some tokens when it was built), each group
// with a bound rad on |centre - t.Vec| - w(t) over its members, so that
// for a peer p and a member t of a group whose centre is cd from p
//
//	Distance(p, t) >= |p.Vec - t.Vec| + w(p) + w(t) >= cd - rad + w(p),
//
// and groups are skipped once that exceeds the second-nearest RTT found.
// Tokens move in and out of groups as they move; rad only grows until the
// index is built again.
type tokenIndex struct {
	dims    int
	centre  []float64 // group × dims
	members [][]int32 // group -> slots
	rad     []float64 // group -> bound
	group   []int32   // slot -> group, -1 when not indexed
	place   []int32   // slot -> index in its group's members
	tcd     []float64 // slot -> |centre - t.Vec|
	cd      []float64 // group -> a distance, during a search
	order   []lbCluster
}

// newTokenIndex builds the index over the live tokens of s.
func newTokenIndex(s *PeerSpace) *tokenIndex {
	d := s.dims
	g := int(math.Sqrt(float64(len(s.liveIDs))))
	if len(s.liveIDs) > 0 {
		g = max(g, 1)
	}
	x := &tokenIndex{dims: d, centre: make([]float64, g*d), members: make([][]int32, g),
		rad: make([]float64, g), cd: make([]float64, g)}
	for k := range g {
		copy(x.centre[k*d:(k+1)*d], s.tokVec(s.liveIDs[k*len(s.liveIDs)/g]))
		x.rad[k] = math.Inf(-1)
	}
	for _, t := range s.liveIDs {
		x.insert(s, t)
	}
	return x
}

// insert puts slot t, whose position is set, in the group of its nearest
// centre.
func (x *tokenIndex) insert(s *PeerSpace, t int32) {
	for int(t) >= len(x.group) {
		x.group, x.place, x.tcd = append(x.group, -1), append(x.place, 0), append(x.tcd, 0)
	}
	tv, d := s.tokVec(t), x.dims
	best, bestD := 0, math.Inf(1)
	for k := range x.members {
		if c := dist(tv, x.centre[k*d:(k+1)*d]); c < bestD {
			best, bestD = k, c
		}
	}
	x.group[t], x.place[t], x.tcd[t] = int32(best), int32(len(x.members[best])), bestD
	x.members[best] = append(x.members[best], t)
	x.rad[best] = max(x.rad[best], bestD-(s.toks[t].h+s.toks[t].a))
}

// remove takes slot t out of its group.
func (x *tokenIndex) remove(t int32) {
	if int(t) >= len(x.group) || x.group[t] < 0 {
		return
	}
	g := x.group[t]
	m := x.members[g]
	last := m[len(m)-1]
	m[x.place[t]], x.place[last] = last, x.place[t]
	x.members[g] = m[:len(m)-1]
	x.group[t] = -1
}

// nearest2 sets d1, n1, d2 and n2 of the peer at k from scratch, as
// PeerSpace.recompute does by comparing it with every token.
func (x *tokenIndex) nearest2(s *PeerSpace, k int32) {
	s.d1[k], s.d2[k], s.n1[k], s.n2[k] = math.Inf(1), math.Inf(1), -1, -1
	for _, t := range s.heldBy[k] {
		s.offer(k, t, 0) // its own tokens, at RTT 0 whatever the bound says
	}
	kv, kh, ka, kw := s.vecOf(k), s.h[k], s.a[k], s.w[k]
	d := x.dims
	order := x.order[:0]
	for g := range x.members {
		if len(x.members[g]) == 0 {
			continue
		}
		x.cd[g] = dist(kv, x.centre[g*d:(g+1)*d])
		order = append(order, lbCluster{x.cd[g] - x.rad[g] + kw - boundSlack, int32(g)})
	}
	slices.SortFunc(order, func(a, b lbCluster) int { return cmp.Compare(a.lb, b.lb) })
	for _, o := range order {
		if o.lb > s.d2[k] {
			break
		}
		cd := x.cd[o.c]
		for _, t := range x.members[o.c] {
			tk := &s.toks[t]
			if tk.at == k {
				continue // offered above
			}
			if math.Abs(cd-x.tcd[t])+kw+tk.h+tk.a-boundSlack > s.d2[k] {
				continue
			}
			if dd := distanceTo(kv, kh, ka, s.tokVec(t), tk.h, tk.a); dd <= s.d2[k] {
				s.offer(k, t, dd)
			}
		}
	}
	x.order = order
}
