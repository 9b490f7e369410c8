package nodesim

import (
	"maps"
	"slices"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
)

// The simulator's indexes: what its oracles (closest, routingTable,
// dropConnections, Churn, agreesWithAssign, CrashSuperpeer) would
// otherwise find by scanning every node, so that each event costs
// O(log N) or O(what the node knows) rather than O(N). They answer
// exactly as the scans did, in the same order, and draw nothing from the
// seed.
//
//   - keys: a crit-bit trie of every node ever added (routing tables), one
//     of the live nodes of each component (lookups, Converged), and one of
//     each component's ghosts, the nodes that went down or to another side
//     while in its view. A ghost entry is checked against the view when a
//     lookup meets it and dropped when it no longer holds (a node becomes a
//     ghost again only by going down or through regroup, which add it).
//   - live: a Fenwick tree of the live nodes by index (Churn's draw).
//   - queue: a calendar of the events' small parts, their payloads apart
//     (queue.go).
//   - rev: for each node, the nodes that may hold it among their contacts,
//     and fol, the nodes that named it as their superpeer (the peers its
//     crash tells). Entries are checked against the contacts and states
//     when used, and stale ones dropped.
type simIndex struct {
	keys  []dhtselect.Key // node -> key
	all   trie
	up    map[int]*trie // component -> its live nodes
	ghost map[int]*trie // component -> its ghosts (a superset)
	live  fenwick
	rev   [][]int32 // node -> nodes that may have it as a contact
	revN  []int32   // len(rev[i]) after its last pruning
	fol   map[int]map[int]struct{}
	// names is the index of the superpeer each node's state names, -1
	// for none or an unknown ID (a state other than the zero state a
	// start gives it is always recorded here).
	names []int
}

func newSimIndex() *simIndex {
	return &simIndex{up: map[int]*trie{}, ghost: map[int]*trie{}, fol: map[int]map[int]struct{}{}}
}

// added records node i, just added with key k.
func (x *simIndex) added(i int, k dhtselect.Key) {
	x.keys = append(x.keys, k)
	x.all.insert(x.keys, i)
	x.live.grow(len(x.keys))
	x.rev = append(x.rev, nil)
	x.revN = append(x.revN, 0)
	x.names = append(x.names, -1)
}

func (x *simIndex) upIn(c int) *trie {
	t := x.up[c]
	if t == nil {
		t = &trie{}
		x.up[c] = t
	}
	return t
}

func (x *simIndex) ghostIn(c int) *trie {
	t := x.ghost[c]
	if t == nil {
		t = &trie{}
		x.ghost[c] = t
	}
	return t
}

// begin starts node i: the index first (its own lookups, from its first
// Step, may find it), then the node.
func (s *Sim) begin(i int) {
	if !s.nodes[i].alive {
		s.idx.upIn(s.comp[i]).insert(s.idx.keys, i)
		s.idx.live.add(i, 1)
	}
	s.start(i)
}

// wentDown records that node i, alive in component c, went down: it
// leaves the live nodes and may stay in c's view for a while.
func (s *Sim) wentDown(i int) {
	c := s.comp[i]
	s.idx.upIn(c).remove(s.idx.keys, i)
	s.idx.ghostIn(c).insert(s.idx.keys, i)
	s.idx.live.add(i, -1)
}

// reindex rebuilds the live and ghost tries after a regroup.
func (s *Sim) reindex() {
	x := s.idx
	x.up, x.ghost = map[int]*trie{}, map[int]*trie{}
	for i, n := range s.nodes {
		if n.alive {
			x.upIn(s.comp[i]).insert(x.keys, i)
		}
	}
	for c, comp := range s.comps {
		for j := range comp.vis {
			if !s.nodes[j].alive || s.comp[j] != c {
				x.ghostIn(c).insert(x.keys, j)
			}
		}
	}
}

// isGhost reports whether node j is in component c's view but not alive
// in c.
func (s *Sim) isGhost(c, j int) bool {
	if s.nodes[j].alive && s.comp[j] == c {
		return false
	}
	_, ok := s.comps[c].vis[j]
	return ok
}

// contacted records that j has just put i among its contacts: if it had
// it there already (within the window), it is in i's list.
func (s *Sim) contacted(j, i int, had bool) {
	if had {
		return
	}
	x := s.idx
	x.rev[i] = append(x.rev[i], int32(j))
	if len(x.rev[i]) > 2*int(x.revN[i])+16 {
		s.pruneRev(i)
	}
}

// pruneRev drops from i's list the nodes that no longer have it as a
// recent contact, and the duplicates; it returns the list, sorted.
func (s *Sim) pruneRev(i int) []int32 {
	x := s.idx
	r := x.rev[i]
	slices.Sort(r)
	r = slices.Compact(r)
	r = slices.DeleteFunc(r, func(j int32) bool {
		t, ok := s.nodes[j].contacts.get(i)
		return !ok || s.now-t > s.cfg.ContactWindow
	})
	x.rev[i], x.revN[i] = r, int32(len(r))
	return r
}

// recentContact reports whether i has j among its contacts within the
// window.
func (s *Sim) recentContact(i, j int) bool {
	t, ok := s.nodes[i].contacts.get(j)
	return ok && s.now-t <= s.cfg.ContactWindow
}

// named records the superpeer node i names in its new state.
func (s *Sim) named(i int) {
	x := s.idx
	sp := -1
	if id := s.nodes[i].state.Superpeer; id != "" {
		if j, ok := s.indexOf(id); ok {
			sp = j
		}
	}
	old := x.names[i]
	if old == sp {
		return
	}
	if old >= 0 {
		delete(x.fol[old], i)
		if len(x.fol[old]) == 0 {
			delete(x.fol, old)
		}
	}
	if sp >= 0 {
		if x.fol[sp] == nil {
			x.fol[sp] = map[int]struct{}{}
		}
		x.fol[sp][i] = struct{}{}
	}
	x.names[i] = sp
}

// connectedTo are the live nodes other than i that are connected to it
// (isContact), in index order: those with i among their recent contacts,
// and its followers.
func (s *Sim) connectedTo(i int) []int {
	var out []int
	rev, fol := s.pruneRev(i), s.followers(i)
	a, b := 0, 0
	for a < len(rev) || b < len(fol) {
		var j int
		switch {
		case b == len(fol) || a < len(rev) && int(rev[a]) < fol[b]:
			j = int(rev[a])
			a++
		case a == len(rev) || fol[b] < int(rev[a]):
			j = fol[b]
			b++
		default:
			j = fol[b]
			a, b = a+1, b+1
		}
		if j != i && s.nodes[j].alive && s.isContact(j, i) {
			out = append(out, j)
		}
	}
	return out
}

// followers are the nodes other than i whose state names node i as their
// superpeer, alive or not, in index order.
func (s *Sim) followers(i int) []int {
	id := s.nodes[i].id
	var out []int
	for j := range s.idx.fol[i] {
		if j != i && s.nodes[j].state.Superpeer == id {
			out = append(out, j)
		}
	}
	slices.Sort(out)
	return out
}

// ---- a crit-bit trie of node indices by key ----

// trie is a crit-bit tree (a binary radix tree without one-way branches)
// of node indices, by their keys. Walking it from a target key, the child
// on the target's side of a branch first, gives its nodes in increasing
// XOR distance: every key on that side is closer than every key on the
// other, as they agree above the branch's bit.
type trie struct {
	root  int32 // a branch (>= 0), a leaf (^node), or none when n = 0
	br    []branch
	free  []int32
	n     int
	stack []int32
}

type branch struct {
	child [2]int32
	bit   uint16 // from the most significant bit of the key's first byte
}

func bitOf(k *dhtselect.Key, b uint16) int { return int(k[b>>3]>>(7-b&7)) & 1 }

// critBit is the first bit in which a and b differ, or -1.
func critBit(a, b *dhtselect.Key) int {
	for i := range a {
		if d := a[i] ^ b[i]; d != 0 {
			k := 0
			for d&0x80 == 0 {
				d <<= 1
				k++
			}
			return 8*i + k
		}
	}
	return -1
}

// leafFor is the leaf a walk by key k ends at (the trie is not empty).
func (t *trie) leafFor(k *dhtselect.Key) int {
	p := t.root
	for p >= 0 {
		b := &t.br[p]
		p = b.child[bitOf(k, b.bit)]
	}
	return int(^p)
}

func (t *trie) insert(keys []dhtselect.Key, i int) {
	k := &keys[i]
	if t.n == 0 {
		t.root, t.n = ^int32(i), 1
		return
	}
	l := t.leafFor(k)
	if l == i {
		return
	}
	cb := critBit(k, &keys[l])
	if cb < 0 {
		panic("nodesim: two nodes with one key")
	}
	var nb int32
	if f := len(t.free); f > 0 {
		nb, t.free = t.free[f-1], t.free[:f-1]
	} else {
		nb = int32(len(t.br))
		t.br = append(t.br, branch{})
	}
	slot := &t.root
	for *slot >= 0 && int(t.br[*slot].bit) < cb {
		b := &t.br[*slot]
		slot = &b.child[bitOf(k, b.bit)]
	}
	d := bitOf(k, uint16(cb))
	t.br[nb].bit = uint16(cb)
	t.br[nb].child[d] = ^int32(i)
	t.br[nb].child[1-d] = *slot
	*slot = nb
	t.n++
}

func (t *trie) remove(keys []dhtselect.Key, i int) {
	if t.n == 0 {
		return
	}
	k := &keys[i]
	var parent *int32 // the slot holding the branch above the leaf
	slot := &t.root
	for *slot >= 0 {
		parent = slot
		b := &t.br[*slot]
		slot = &b.child[bitOf(k, b.bit)]
	}
	if int(^*slot) != i {
		return
	}
	t.n--
	if parent == nil {
		return // it was the only node
	}
	p := *parent
	b := &t.br[p]
	sib := b.child[0]
	if sib == *slot {
		sib = b.child[1]
	}
	*parent = sib
	t.free = append(t.free, p)
}

// walk calls f with the trie's nodes in increasing XOR distance from
// target until f returns false.
func (t *trie) walk(target *dhtselect.Key, f func(i int) bool) {
	if t.n == 0 {
		return
	}
	st := append(t.stack[:0], t.root)
	for len(st) > 0 {
		p := st[len(st)-1]
		st = st[:len(st)-1]
		for p >= 0 {
			b := &t.br[p]
			d := bitOf(target, b.bit)
			st = append(st, b.child[1-d])
			p = b.child[d]
		}
		if !f(int(^p)) {
			break
		}
	}
	t.stack = st[:0]
}

// nearest is the node closest to target that ok accepts, or -1.
func (t *trie) nearest(target *dhtselect.Key, ok func(i int) bool) int {
	best := -1
	t.walk(target, func(i int) bool {
		if ok(i) {
			best = i
			return false
		}
		return true
	})
	return best
}

// ---- live nodes by index ----

// fenwick counts the live nodes by index, to draw the r-th.
type fenwick struct {
	t   []int32 // 1-based
	cnt []int8  // node -> 0 or 1
	n   int
}

func (f *fenwick) grow(n int) {
	f.cnt = append(f.cnt, 0)
	if n < len(f.t) {
		return
	}
	size := max(64, 2*len(f.t))
	f.t = make([]int32, size)
	for i, c := range f.cnt {
		if c != 0 {
			f.update(i, int32(c))
		}
	}
}

func (f *fenwick) update(i int, d int32) {
	for k := i + 1; k < len(f.t); k += k & -k {
		f.t[k] += d
	}
}

func (f *fenwick) add(i, d int) {
	f.cnt[i] += int8(d)
	f.n += d
	f.update(i, int32(d))
}

// nth is the index of the r-th (from 0) counted node.
func (f *fenwick) nth(r int) int {
	pos := 0
	step := 1
	for step*2 < len(f.t) {
		step *= 2
	}
	rem := int32(r + 1)
	for ; step > 0; step /= 2 {
		if next := pos + step; next < len(f.t) && f.t[next] < rem {
			pos = next
			rem -= f.t[next]
		}
	}
	return pos // 1-based pos+1, so the index is pos
}

// ---- contacts ----

// contactSet is a node's contacts: peer -> its last election message
// either way, as a map would hold them (nothing is dropped). A node has
// few, mostly its cluster: a short list while it has at most fewContacts,
// a map above (each lookup of a map of its own was a cache miss or two,
// a tenth of a 100,000-node run).
type contactSet struct {
	few  []contact
	many map[int]time.Duration
}

type contact struct {
	peer int32
	at   time.Duration
}

const fewContacts = 32

func (c *contactSet) get(j int) (time.Duration, bool) {
	if c.many != nil {
		t, ok := c.many[j]
		return t, ok
	}
	for _, x := range c.few {
		if int(x.peer) == j {
			return x.at, true
		}
	}
	return 0, false
}

// put sets j's time to t, and returns the one before.
func (c *contactSet) put(j int, t time.Duration) (time.Duration, bool) {
	if c.many == nil {
		for k := range c.few {
			if x := &c.few[k]; int(x.peer) == j {
				prev := x.at
				x.at = t
				return prev, true
			}
		}
		if len(c.few) < fewContacts {
			c.few = append(c.few, contact{peer: int32(j), at: t})
			return 0, false
		}
		c.many = make(map[int]time.Duration, 2*fewContacts)
		for _, x := range c.few {
			c.many[int(x.peer)] = x.at
		}
		c.few = nil
	}
	prev, ok := c.many[j]
	c.many[j] = t
	return prev, ok
}

// peers returns the peers, in index order.
func (c *contactSet) peers() []int {
	var out []int
	if c.many != nil {
		out = slices.Collect(maps.Keys(c.many))
	} else {
		for _, x := range c.few {
			out = append(out, int(x.peer))
		}
	}
	slices.Sort(out)
	return out
}
