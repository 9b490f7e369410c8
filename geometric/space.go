package geometric

import (
	"cmp"
	"math"
	"slices"

	"github.com/hashicorp/serf/coordinate"
)

// PeerSpace is a list of peers and their coordinates, indexed for the
// attraction term of the token dynamics, to be shared by many Holders
// (Holder.SetPeerSpace): the simulator gives one to every peer of a large
// network.
//
// A holder that knows N peers and hears S-1 other tokens spends O(N·S) on
// the attraction term (the RTT from every peer to its nearest other token)
// and O(N) on the energy of every candidate peer. A PeerSpace keeps, for
// every peer, the RTT to its nearest and second-nearest token, d1 and d2,
// and indexes the peers as balls of radius d2 (a ballTree). The energy at
// a candidate x needs only the peers nearer to x than to any other token
// (the others contribute the same to the energy of every candidate and
// cancel out of every decision); they lie in balls that hold x, which the
// tree finds without looking at most of the others. When a token moves,
// the peers that had it as nearest or second-nearest token lie in balls
// that hold its old place, and those that may gain it in balls that hold
// its new place; only they are looked at, and only those that lost it are
// compared with all S tokens.
//
// The results are those of SetPeers with the same list: the same passes,
// the same forces to the last bit; the energies differ from SetPeers' only
// in rounding, as they are summed over the cell instead of over all N
// peers (TestPeerSpaceMatchesPeers). A holder uses the PeerSpace instead
// of the list only while every peer with a coordinate has the holder's
// dimensionality, the IDs are distinct and the holder hears at least one
// other token; otherwise it scans the list.
//
// A PeerSpace keeps the token positions of the last holder that used it,
// so it is cheap when the holders that share it hear the same positions,
// as in Simulate; holders that disagree make it recompute more. It is not
// safe for concurrent use: holders that share one must be driven from one
// goroutine.
type PeerSpace struct {
	peers   []Peer
	dims    int
	usable  bool    // one dimensionality, distinct IDs
	point   []int32 // position -> index in peers (see posOf)
	byID    map[ID]int32
	vec     []float64 // position × dims
	h, a, w []float64 // position -> Height, Adjustment, weight

	// Per position: the RTT to the nearest and the second-nearest token
	// (+Inf when there is none) and their slots (-1), and the radius of
	// its ball, d2 - w.
	d1, d2 []float64
	n1, n2 []int32
	r      []float64
	tree   *ballTree // nil until the first sync
	drift  int       // radii changed since the tree was built

	// version counts the syncs that changed d1, d2, n1 or n2 of some
	// peer; changed[k] is the version in which those of the peer at k
	// last changed (0: before the first). caches holds, per token, the
	// cells of its holder's candidates (cached).
	version uint64
	changed []uint64
	caches  map[int]map[ID]*cellCache
	posOf   []int32 // index in peers -> position, -1 for peers left out

	// Per token slot.
	slot    map[int]int32 // token number -> slot
	toks    []spaceToken
	tv      []float64         // slot × dims: the Vec of the token's position
	liveIDs []int32           // the live slots, in increasing order
	heldBy  map[int32][]int32 // position -> the slots it holds
	tix     *tokenIndex
	free    []int32
	epoch   uint64
	live    int

	mark    []uint64 // position -> epoch in which it was marked
	offered []uint64 // position -> epoch in which it was offered a token
	marked  []int32
	touched []int32
	changes []change
}

// spaceToken is a token as the PeerSpace last heard of it.
type spaceToken struct {
	num    int
	live   bool
	seen   uint64
	holder ID
	at     int32 // position of the holder, -1 when it is not a peer
	coord  *coordinate.Coordinate
	h, a   float64
}

// change is a token that came, went or moved in a sync.
type change struct {
	slot int32
	old  bool // it was live before
	at   int32
	vec  []float64 // the old position
	h, a float64
}

// NewPeerSpace indexes ps. Peers without a usable coordinate (nil, of
// another dimensionality than the first, or not finite) are left out of
// the attraction term, as SetPeers leaves them. The PeerSpace keeps ps,
// whose coordinates must not be modified afterwards.
func NewPeerSpace(ps []Peer) *PeerSpace {
	s := &PeerSpace{peers: ps, usable: true, byID: map[ID]int32{}, slot: map[int]int32{}, caches: map[int]map[ID]*cellCache{}}
	for _, p := range ps {
		if p.Coord == nil {
			continue
		}
		if s.dims == 0 {
			s.dims = len(p.Coord.Vec)
		} else if len(p.Coord.Vec) != s.dims {
			s.usable = false
		}
	}
	for i, p := range ps {
		c := p.Coord
		if c == nil || len(c.Vec) != s.dims || !c.IsValid() {
			continue
		}
		k := int32(len(s.point))
		s.point = append(s.point, int32(i))
		s.vec = append(s.vec, c.Vec...)
		s.h, s.a, s.w = append(s.h, c.Height), append(s.a, c.Adjustment), append(s.w, weight(c))
		if p.ID != "" {
			if _, dup := s.byID[p.ID]; dup {
				s.usable = false // rtt treats equal IDs as one peer
			}
			s.byID[p.ID] = k
		}
	}
	n := len(s.point)
	s.posOf = make([]int32, len(ps))
	for i := range s.posOf {
		s.posOf[i] = -1
	}
	for k, i := range s.point {
		s.posOf[i] = int32(k)
	}
	s.d1, s.d2, s.r = make([]float64, n), make([]float64, n), make([]float64, n)
	s.n1, s.n2 = make([]int32, n), make([]int32, n)
	s.mark, s.offered, s.changed = make([]uint64, n), make([]uint64, n), make([]uint64, n)
	for k := range s.d1 {
		s.d1[k], s.d2[k], s.r[k], s.n1[k], s.n2[k] = math.Inf(1), math.Inf(1), math.Inf(1), -1, -1
	}
	return s
}

// Len returns the number of peers with a usable coordinate.
func (s *PeerSpace) Len() int { return len(s.point) }

// vecOf returns the Vec part of the peer at position k.
func (s *PeerSpace) vecOf(k int32) []float64 { return s.vec[int(k)*s.dims : int(k+1)*s.dims] }

func (s *PeerSpace) tokVec(t int32) []float64 {
	return s.tv[int(t)*s.dims : int(t+1)*s.dims]
}

// tokenRTT is rtt(peer at k, holder of token slot t), as Holder.field
// computes it: 0 for the holder itself, else Distance(peer, token).
func (s *PeerSpace) tokenRTT(k, t int32) float64 {
	tk := &s.toks[t]
	if tk.at == k {
		return 0
	}
	return distanceTo(s.vecOf(k), s.h[k], s.a[k], s.tokVec(t), tk.h, tk.a)
}

// before orders (d, token number) pairs.
func (s *PeerSpace) before(d float64, t int32, d0 float64, t0 int32) bool {
	if t0 < 0 {
		return true
	}
	return d < d0 || (d == d0 && s.toks[t].num < s.toks[t0].num)
}

// offer records token slot t at RTT d from the peer at k if it is among
// its two nearest, and reports whether it is.
func (s *PeerSpace) offer(k, t int32, d float64) bool {
	switch {
	case s.before(d, t, s.d1[k], s.n1[k]):
		s.d2[k], s.n2[k] = s.d1[k], s.n1[k]
		s.d1[k], s.n1[k] = d, t
	case s.before(d, t, s.d2[k], s.n2[k]):
		s.d2[k], s.n2[k] = d, t
	default:
		return false
	}
	return true
}

// recompute finds the two nearest tokens of the peer at k afresh.
func (s *PeerSpace) recompute(k int32) {
	if s.tix != nil {
		s.tix.nearest2(s, k)
		return
	}
	s.d1[k], s.d2[k], s.n1[k], s.n2[k] = math.Inf(1), math.Inf(1), -1, -1
	kv, kh, ka := s.vecOf(k), s.h[k], s.a[k]
	for _, t := range s.liveIDs {
		tk := &s.toks[t]
		d := 0.0
		if tk.at != k {
			d = distanceTo(kv, kh, ka, s.tokVec(t), tk.h, tk.a)
		}
		if d <= s.d2[k] {
			s.offer(k, t, d)
		}
	}
}

// moved updates the peer at k, whose nearest or second-nearest token t
// (only) moved, now at RTT d from it: without looking at the other tokens
// when t stays ahead of them all, by recompute otherwise.
func (s *PeerSpace) moved(k, t int32, d float64) {
	switch {
	case s.n1[k] == t && s.before(d, t, s.d2[k], s.n2[k]):
		s.d1[k] = d // still the nearest: the others lie beyond d2
	case s.n1[k] == t:
		// The second is now the nearest; the new second is unknown.
		s.recompute(k)
	case s.before(d, t, s.d1[k], s.n1[k]):
		s.d2[k], s.n2[k] = s.d1[k], s.n1[k]
		s.d1[k] = d
		s.n1[k] = t
	case d <= s.d2[k]:
		s.d2[k] = d // nearer than before: still ahead of the others
	default:
		s.recompute(k)
	}
}

// near returns the RTT from the peer at k to its nearest token other than
// slot own.
func (s *PeerSpace) near(k int32, own int32) float64 {
	if s.n1[k] == own && own >= 0 {
		return s.d2[k]
	}
	return s.d1[k]
}

// sync makes the PeerSpace's tokens ts (every token the holder knows,
// its own included) and updates the nearest tokens of the peers.
func (s *PeerSpace) sync(ts []Position) {
	s.epoch++
	s.changes = s.changes[:0]
	for _, p := range ts {
		t, ok := s.slot[p.Token.Num]
		if !ok {
			if n := len(s.free); n > 0 {
				t, s.free = s.free[n-1], s.free[:n-1]
			} else {
				t = int32(len(s.toks))
				s.toks = append(s.toks, spaceToken{})
				s.tv = append(s.tv, make([]float64, s.dims)...)
			}
			s.slot[p.Token.Num] = t
			s.toks[t] = spaceToken{num: p.Token.Num}
			s.changes = append(s.changes, change{slot: t})
		} else if tk := &s.toks[t]; tk.seen == s.epoch {
			continue // a duplicate report: the first one stands
		} else if tk.holder == p.Holder && (tk.coord == p.Coord || sameCoord(tk.coord, p.Coord)) {
			tk.seen = s.epoch
			continue // unchanged
		} else {
			s.changes = append(s.changes, change{slot: t, old: true, at: tk.at, vec: slices.Clone(s.tokVec(t)), h: tk.h, a: tk.a})
		}
		tk := &s.toks[t]
		if !tk.live {
			tk.live = true
			s.live++
		}
		tk.seen, tk.holder, tk.coord = s.epoch, p.Holder, p.Coord
		tk.h, tk.a = p.Coord.Height, p.Coord.Adjustment
		copy(s.tokVec(t), p.Coord.Vec)
		tk.at = -1
		if k, ok := s.byID[p.Holder]; ok {
			tk.at = k
		}
	}
	for t := range s.toks {
		if tk := &s.toks[t]; tk.live && tk.seen != s.epoch {
			s.changes = append(s.changes, change{slot: int32(t), old: true, at: tk.at, vec: slices.Clone(s.tokVec(int32(t))), h: tk.h, a: tk.a})
			tk.live = false
			delete(s.slot, tk.num)
			s.free = append(s.free, int32(t))
			s.live--
		}
	}
	if len(s.changes) == 0 {
		return
	}
	s.liveIDs = s.liveIDs[:0]
	for t := range s.toks {
		if s.toks[t].live {
			s.liveIDs = append(s.liveIDs, int32(t))
		}
	}
	s.held()
	s.version++
	if s.tree == nil || 4*len(s.changes) >= s.live {
		s.tix = newTokenIndex(s)
		for k := range s.point {
			s.recompute(int32(k))
			s.r[k] = s.d2[k] - s.w[k]
			s.changed[k] = s.version
		}
		s.rebuild()
		return
	}
	for _, ch := range s.changes {
		s.tix.remove(ch.slot)
		if s.toks[ch.slot].live {
			s.tix.insert(s, ch.slot)
		}
	}
	s.update()
	if s.drift > len(s.point) {
		s.rebuild() // the radii drifted from those the tree was shaped for
	}
}

// held sets heldBy from the tokens' holders.
func (s *PeerSpace) held() {
	if s.heldBy == nil {
		s.heldBy = map[int32][]int32{}
	}
	clear(s.heldBy)
	for _, t := range s.liveIDs {
		if at := s.toks[t].at; at >= 0 {
			s.heldBy[at] = append(s.heldBy[at], t)
		}
	}
}

// rebuild builds the tree anew for the current radii and lays the peers
// out in its order.
func (s *PeerSpace) rebuild() {
	tree, order := newBallTree(s.dims, s.vec, s.r, s.changed)
	s.tree, s.drift = tree, 0
	n, d := len(order), s.dims
	where := make([]int32, n) // old position -> new
	for k, i := range order {
		where[i] = int32(k)
	}
	permute := func(x []float64) {
		y := make([]float64, len(x))
		for k, i := range order {
			y[k] = x[i]
		}
		copy(x, y)
	}
	permute32 := func(x []int32) {
		y := make([]int32, len(x))
		for k, i := range order {
			y[k] = x[i]
		}
		copy(x, y)
	}
	vec := make([]float64, len(s.vec))
	for k, i := range order {
		copy(vec[k*d:(k+1)*d], s.vecOf(i))
	}
	s.vec = vec
	for _, x := range [][]float64{s.h, s.a, s.w, s.d1, s.d2, s.r} {
		permute(x)
	}
	for _, x := range [][]int32{s.point, s.n1, s.n2} {
		permute32(x)
	}
	changed := make([]uint64, n)
	for k, i := range order {
		changed[k] = s.changed[i]
	}
	s.changed = changed
	clear(s.mark)
	clear(s.offered)
	for k, i := range s.point {
		s.posOf[i] = int32(k)
		if id := s.peers[i].ID; id != "" {
			s.byID[id] = int32(k)
		}
	}
	for t := range s.toks {
		if tk := &s.toks[t]; tk.at >= 0 {
			tk.at = where[tk.at]
		}
	}
	s.held()
	s.tix = newTokenIndex(s)
}

// update applies s.changes, few against the live tokens, incrementally.
func (s *PeerSpace) update() {
	ep := s.epoch
	s.marked, s.touched = s.marked[:0], s.touched[:0]
	tr := s.tree
	// The peers that had a changed token as nearest or second-nearest:
	// no farther from its old place than their d2, so in a ball that
	// holds it (its holder, at RTT 0, apart).
	for _, ch := range s.changes {
		if !ch.old {
			continue
		}
		t := ch.slot
		markIf := func(k int32) {
			if s.mark[k] != ep && (s.n1[k] == t || s.n2[k] == t) {
				s.mark[k] = ep
				s.marked = append(s.marked, k)
			}
		}
		if ch.at >= 0 {
			markIf(ch.at)
		}
		tr.search(ch.vec, ch.h+ch.a, markIf)
	}
	// The others may gain a changed token that is now nearer to them than
	// their d2: they lie in a ball that holds its new place.
	for _, ch := range s.changes {
		tk := &s.toks[ch.slot]
		if !tk.live {
			continue
		}
		t := ch.slot
		tv := s.tokVec(t)
		offer := func(k int32, d float64) {
			if s.mark[k] != ep && s.offer(k, t, d) && s.offered[k] != ep {
				s.offered[k] = ep
				s.touched = append(s.touched, k)
			}
		}
		if tk.at >= 0 {
			offer(tk.at, 0)
		}
		tr.search(tv, tk.h+tk.a, func(k int32) {
			if k != tk.at && s.mark[k] != ep {
				offer(k, distanceTo(s.vecOf(k), s.h[k], s.a[k], tv, tk.h, tk.a))
			}
		})
	}
	single := len(s.changes) == 1 && s.changes[0].old && s.toks[s.changes[0].slot].live
	for _, k := range s.marked {
		if t := s.changes[0].slot; single {
			s.moved(k, t, s.tokenRTT(k, t))
		} else {
			s.recompute(k)
		}
	}
	for _, list := range [2][]int32{s.marked, s.touched} {
		for _, k := range list {
			s.changed[k] = s.version
			tr.changed(k)
			if r := s.d2[k] - s.w[k]; r != s.r[k] {
				s.r[k] = r
				s.drift++
			}
		}
	}
	tr.refresh(s.r, s.changed)
}

// cellPeer is a peer that a candidate holder x would take from the other
// tokens: rtt(x, peer) = d < near, the RTT from the peer to its nearest
// other token.
type cellPeer struct {
	point   int32 // index in peers
	k       int32 // position
	d, near float64
}

// cell appends to out every peer p with rtt(x, p) < near(p), the RTT from
// p to its nearest token other than token own, in no particular order: the
// peers that x would serve if it held token own. They are no farther from
// x than their d2, so in a ball that holds x (x itself, at RTT 0, apart).
func (s *PeerSpace) cell(x Peer, own int, out []cellPeer) []cellPeer {
	ownSlot, self := s.ownAndSelf(x, own)
	if self >= 0 {
		if near := s.near(self, ownSlot); near > 0 {
			out = append(out, cellPeer{s.point[self], self, 0, near})
		}
	}
	return s.others(x, ownSlot, self, 0, out)
}

func (s *PeerSpace) ownAndSelf(x Peer, own int) (ownSlot, self int32) {
	ownSlot, self = -1, -1
	if t, ok := s.slot[own]; ok {
		ownSlot = t
	}
	if k, ok := s.byID[x.ID]; ok {
		self = k
	}
	return ownSlot, self
}

// others appends to out the peers of x's cell other than x itself (self,
// -1 when x is not a peer), looking only at peers whose version is newer
// than since.
func (s *PeerSpace) others(x Peer, ownSlot, self int32, since uint64, out []cellPeer) []cellPeer {
	xv, xh, xa := x.Coord.Vec, x.Coord.Height, x.Coord.Adjustment
	xw := weight(x.Coord)
	f := func(k int32) {
		if k == self || s.changed[k] < since {
			return
		}
		near := s.near(k, ownSlot)
		if s.w[k]+xw-boundSlack > near {
			return // Distance(x, p) >= w(x) + w(p)
		}
		if d := distanceTo(xv, xh, xa, s.vecOf(k), s.h[k], s.a[k]); d < near {
			out = append(out, cellPeer{s.point[k], k, d, near})
		}
	}
	if since == 0 {
		s.tree.search(xv, xw, f)
	} else {
		s.tree.searchSince(xv, xw, since-1, f)
	}
	return out
}

// cellCache is the cell of one candidate of a holder (PeerSpace.cached),
// without the candidate itself, in the order of the peer list. Its
// entries' positions (k) are those of when it was brought up to date.
type cellCache struct {
	version uint64 // of the PeerSpace it is from; 0: none
	own     int
	x       Peer
	cell    []cellPeer
}

// cellsOf returns the cell caches of the holder of token own: they pass
// with the token from holder to holder, as the next one's candidates are
// often the last one's.
func (s *PeerSpace) cellsOf(own int) map[ID]*cellCache {
	m := s.caches[own]
	if m == nil {
		m = map[ID]*cellCache{}
		s.caches[own] = m
	}
	return m
}

// cached appends to out the cell of x for token own, in the order of the
// peer list, as cell and sortCell would, from c, which it brings up to
// date: of
// the peers in c, those whose d1, d2 or nearest token changed since go
// out, and those of the changed peers that are now in the cell come in
// (a peer that did not change keeps its place in or out of the cell).
func (s *PeerSpace) cached(x Peer, own int, c *cellCache, out []cellPeer) []cellPeer {
	ownSlot, self := s.ownAndSelf(x, own)
	if c.version == 0 || c.own != own || c.x.ID != x.ID || !sameCoord(c.x.Coord, x.Coord) {
		c.cell = s.others(x, ownSlot, self, 0, c.cell[:0])
		sortCell(c.cell)
	} else if c.version < s.version {
		kept := c.cell[:0]
		for _, p := range c.cell {
			if k := s.posOf[p.point]; s.changed[k] <= c.version {
				p.k = k // it may have moved in a rebuild
				kept = append(kept, p)
			}
		}
		n := len(kept)
		c.cell = s.others(x, ownSlot, self, c.version+1, kept)
		if len(c.cell) > n {
			sortCell(c.cell)
		}
	}
	c.version, c.own, c.x = s.version, own, x
	if self >= 0 {
		if near := s.near(self, ownSlot); near > 0 {
			at, _ := slices.BinarySearchFunc(c.cell, s.point[self], func(p cellPeer, pt int32) int { return cmp.Compare(p.point, pt) })
			out = append(append(append(out, c.cell[:at]...), cellPeer{s.point[self], self, 0, near}), c.cell[at:]...)
			return out
		}
	}
	return append(out, c.cell...)
}

// sortCell puts a cell in the order of the peer list, the order in which
// Holder.field sums the forces.
func sortCell(c []cellPeer) {
	slices.SortFunc(c, func(a, b cellPeer) int { return cmp.Compare(a.point, b.point) })
}
