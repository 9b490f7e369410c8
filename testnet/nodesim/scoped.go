package nodesim

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/overlay/node"
)

// Cluster-scoped membership (the DHT strategy; the live node's
// overlay/register.go and gossip/backbone.go). A node hears only its
// cluster:
//
//   - every AnnounceInterval, and at once when its superpeer changes, a
//     member registers with its superpeer (a request and its answer, half
//     an RTT each way). The superpeer keeps the registrations of its
//     cluster's keys (a member that registered within the membership TTL
//     and is alive and reachable), and answers with its digest (k and its
//     size estimate: node.Digest) and its roster: those registrations and
//     itself. The member's view is every peer of the rosters it got within
//     the membership TTL (as records within their TTL: a roster that is
//     still filling, from a superpeer just elected, adds to the view
//     rather than replaces it), and itself.
//   - a node that has not joined yet asks its bootstrap peer (the first
//     live one of its routing table) the same way, and gets its digest:
//     the hint that gives it k.
//   - superpeers hear each other's summaries (k, cluster key, members) on
//     the backbone: every superpeer of its partition component, as they
//     are a gossip delay after the first change since the last delivery
//     (the live node publishes its summary when it changes).
//
// The other members learn of a change to the roster at their next
// registration, as the live registrar does: a superpeer tells no member
// (an earlier model pushed every change to every member, which the live
// node never did; its cost grew with the cluster, hundreds to thousands
// of members while a large swarm starts).
//
// A superpeer's view is its registrations and itself. What a member says
// of itself (flapping, its beacon) reaches its superpeer's roster with its
// next registration; the model reads it from the member's last
// announcement when the roster is built.

// scoped is node state of the cluster-scoped membership.
type scoped struct {
	regAt      time.Duration         // the next registration
	registry   map[int]time.Duration // a superpeer's: member -> its last registration
	regAnn     map[int]uint64        // a superpeer's: member -> the version of its record it holds
	annVer     uint64                // bumped when what the node says of itself changes
	rosterFrom [2]uint64             // a member's: the last roster's superpeer and its version
	regVer     uint64                // bumped when the registry changes
	known      map[int]time.Duration // a member's: the peers of the rosters it got, when last
	knownMin   time.Duration         // at most the oldest time in known (noEntry when empty)
	regWith    peer.ID               // the registrar when the state last changed
	rosterV    uint64                // bumped with every roster received
	seenVer    uint64                // the view version the machine last got
	bbVer      uint64                // the backbone version it last got
	bbComp     int                   // and the component and count of summary changes it held (bbList.cum)
	bbCum      uint64
	bbHeard    bool
	// Backbones heard but not yet given (see deferHearing): the newest
	// version's, and one heard before it, given first.
	bbPend, bbPrev bbPending
	rc             rosterCache // rosterOf's
	// A serving node's: a node in its registry went down or to another
	// side since rosterOf last built the roster (its next view may drop
	// it: see due).
	regDown bool
}

// scopedMode reports whether the simulator runs the cluster-scoped
// membership: the DHT strategy.
func (s *Sim) scopedMode() bool { return !s.cfg.Node.Geometric }

// resetScoped starts node i's membership afresh (a start or restart).
func (s *Sim) resetScoped(i int) {
	n := s.nodes[i]
	n.sc = scoped{regAt: s.now, registry: map[int]time.Duration{}, regAnn: map[int]uint64{}, known: map[int]time.Duration{}, knownMin: noEntry}
}

// noEntry is scoped.knownMin when known is empty.
const noEntry = time.Duration(math.MaxInt64)

// registerTarget is whom node i registers with now: its registrar (its
// superpeer when it is a member), or before it has joined and while it
// has none its bootstrap peer; -1 for none.
func (s *Sim) registerTarget(i int) int {
	n := s.nodes[i]
	if n.state.Role != node.RoleUnknown || n.m.Registrar() != "" {
		j, ok := s.indexOf(n.m.Registrar())
		if !ok || j == i {
			return -1
		}
		return j
	}
	for _, j := range n.routing {
		if s.nodes[j].alive && s.reachable(i, j) {
			return j
		}
	}
	return -1
}

// registerDue sends node i's registration when it is due.
func (s *Sim) registerDue(i int) {
	n := s.nodes[i]
	if reg := n.m.Registrar(); n.state.Role == node.RoleUnknown && reg != n.sc.regWith {
		n.sc.regWith, n.sc.regAt = reg, s.now // a joiner's new registrar: at once, as the live driver does
	}
	if s.now < n.sc.regAt {
		return
	}
	n.sc.regAt = s.now + s.cfg.Node.AnnounceInterval
	t := s.registerTarget(i)
	if t < 0 {
		return
	}
	s.stats.Registrations++
	if !s.nodes[t].alive || !s.reachable(i, t) {
		return // fails; the next one is due in an interval
	}
	s.push(event{at: s.now + s.rtt(i, t)/2, kind: evRegister, node: t, other: i, inc: n.inc})
}

// registered is a registration arriving at node t from node i.
func (s *Sim) registered(t, i, inc int) {
	n, m := s.nodes[t], s.nodes[i]
	if !n.alive || !m.alive || m.inc != inc || !s.reachable(i, t) {
		return
	}
	var roster []int
	var hint peer.ID
	if !n.m.Serves() {
		hint = n.m.Hint() // a refusal names the superpeer it knows, or its lookup's end
	}
	if n.m.Serves() && m.key.Cluster(n.state.K) == n.state.ClusterKey {
		_, had := n.sc.registry[i]
		if v, ok := n.sc.regAnn[i]; !had || !ok || v != m.sc.annVer {
			n.sc.regVer++
		}
		if !had {
			s.regBy[i] = append(s.regBy[i], int32(t))
		}
		n.sc.registry[i], n.sc.regAnn[i] = s.now, m.sc.annVer
		roster = s.rosterOf(t)
	}
	s.stats.Replies++
	s.schedule(t)                                 // its registrations changed: its view may be due
	d := node.Digest{From: n.id, Superpeer: hint} // a refusal: the hint only
	if n.m.Serves() {
		d.K, d.Size = n.state.K, n.state.Size
	}
	s.push(event{at: s.now + s.rtt(i, t)/2, kind: evRegistered, node: i, inc: inc, other: t, ids: roster, gen: n.sc.regVer, digest: d})
}

// rosterOf is superpeer t's roster now: its live registrations and itself,
// sorted by index (as IDs sort).
//
// The roster is built again only when it may have changed: a registration
// added or changed (regVer), a node started or went down or the network
// split or healed (Sim.epoch), or its oldest registration may have
// expired. The slice is shared: not to be modified.
func (s *Sim) rosterOf(t int) []int {
	n := s.nodes[t]
	if c := &n.sc.rc; c.ids != nil && c.regVer == n.sc.regVer && c.epoch == s.epoch && s.now <= c.until {
		return c.ids
	}
	n.sc.regDown = false
	out := []int{t}
	oldest := noEntry
	for j, at := range n.sc.registry {
		if s.isUp[j] && s.reachable(t, j) && s.now-at <= s.ttl {
			out = append(out, j)
			oldest = min(oldest, at)
		} else {
			delete(n.sc.registry, j)
			n.sc.regVer++
		}
	}
	slices.Sort(out)
	until := noEntry
	if oldest != noEntry {
		until = oldest + s.ttl
	}
	n.sc.rc = rosterCache{ids: out, regVer: n.sc.regVer, epoch: s.epoch, until: until}
	return out
}

// rosterCache is a superpeer's roster as rosterOf last built it, with
// what it depended on: valid while none has changed and until the oldest
// registration in it may expire.
type rosterCache struct {
	ids    []int
	regVer uint64
	epoch  uint64
	until  time.Duration
}

// answered is node i getting the answer to a registration from node t.
func (s *Sim) answered(e event) {
	if !s.live(e) {
		return
	}
	i, n := e.node, s.nodes[e.node]
	s.sync(i) // Registrar reads the machine's clock
	if e.ids != nil && s.nodes[e.other].id == n.m.Registrar() {
		if from := [2]uint64{uint64(e.other), e.gen}; from != n.sc.rosterFrom {
			n.sc.rosterFrom = from
			n.sc.rosterV++ // a record in it may say something new
		}
		for _, j := range e.ids {
			if _, ok := n.sc.known[j]; !ok && j != i {
				n.sc.rosterV++
			}
			n.sc.known[j] = s.now
			n.sc.knownMin = min(n.sc.knownMin, s.now)
		}
	}
	if h, ok := s.indexOf(e.digest.Superpeer); ok && e.ids == nil && n.state.Role == node.RoleUnknown && h != i {
		// Before the node has joined, a refusal's hint is followed at
		// once (the live driver registers with it in the same call).
		s.stats.Registrations++
		if s.nodes[h].alive && s.reachable(i, h) {
			s.push(event{at: s.now + s.rtt(i, h)/2, kind: evRegister, node: h, other: i, inc: n.inc})
		}
	}
	s.step(i, e.digest)
	if reg := n.m.Registrar(); reg != n.sc.regWith {
		n.sc.regWith, n.sc.regAt = reg, s.now // a hint: register with it now
		s.schedule(i)
	}
}

// scopedChanged notes a change of node i's state: a new superpeer is
// registered with at once, and a superpeer's summary changed the
// backbone.
func (s *Sim) scopedChanged(i int, prev node.State) {
	n := s.nodes[i]
	if reg := n.m.Registrar(); reg != n.sc.regWith || n.state.Role != prev.Role {
		n.sc.regWith = reg
		if n.m.Serves() && len(n.sc.known) > 0 {
			// A new superpeer starts from the view it had as a member:
			// those that do not register with it within the TTL leave.
			for j, at := range n.sc.known {
				if j != i && s.nodes[j].key.Cluster(n.state.K) == n.state.ClusterKey {
					if _, had := n.sc.registry[j]; !had {
						s.regBy[j] = append(s.regBy[j], int32(i))
					}
					n.sc.registry[j] = max(n.sc.registry[j], at)
				}
			}
			n.sc.regVer++
		}
		n.sc.regAt = s.now
		n.sc.rosterV++ // a new view: the registrations, or the rosters
	}
	if n.state.Role == node.RoleSuperpeer || prev.Role == node.RoleSuperpeer {
		if n.state.Role != prev.Role || n.state.K != prev.K || n.state.ClusterKey != prev.ClusterKey || len(n.state.Members) != len(prev.Members) {
			s.backboneChanged()
		}
		if n.state.Role == node.RoleSuperpeer {
			s.sps[i] = true
		} else {
			delete(s.sps, i)
		}
	}
}

// scopedView gives node i's machine its view when it changed: its
// roster (a member) or its registrations (a superpeer), and itself; and a
// superpeer the backbone when it changed.
func (s *Sim) scopedView(i int) {
	n := s.nodes[i]
	now := s.wall()
	if s.bbDirty && s.now >= s.bbAt {
		// A superpeer publishes its summary when it changes, and the
		// backbone hears it a gossip delay later.
		s.bbDirty = false
		s.bbVersion++
		s.backboneHeard(i)
	}
	if n.state.Role == node.RoleSuperpeer && n.sc.bbVer != s.bbVersion {
		n.sc.bbVer = s.bbVersion
		s.undefer(n) // heard now, not later
		bb := s.backboneOf(i)
		in := s.bbCache[s.comp[i]].in
		s.countHeard(n, s.comp[i], s.bbCache[s.comp[i]].cum, len(bb))
		n.m.Step(now, in)
		s.carryOut(i)
		if reg := n.m.Registrar(); reg != n.sc.regWith {
			n.sc.regWith, n.sc.regAt = reg, s.now // another claimer of the cluster
		}
	}
	if s.now-n.viewAt < s.cfg.ViewPeriod {
		return
	}
	if !n.m.Serves() && n.sc.rosterV == n.sc.seenVer && n.viewAt >= 0 && s.now-n.sc.knownMin <= s.ttl {
		return // a member whose rosters brought nothing new and none of whose peers expired
	}
	var ids []int
	var ver uint64
	if n.m.Serves() {
		ids = s.rosterOf(i)
		ver = n.sc.regVer<<32 | n.sc.rosterV
	} else {
		ids = s.knownOf(i)
		ver = n.sc.rosterV
	}
	if ver != n.sc.seenVer || n.viewAt < 0 {
		n.sc.seenVer, n.viewAt = ver, s.now
		s.stats.Views++
		n.m.Step(now, node.View{Members: s.membersOf(i, ids)})
		s.carryOut(i)
	}
}

// countHeard counts a backbone's delivery to node n: the list of
// component comp, of size summaries, cum changes in (bbList.cum).
func (s *Sim) countHeard(n *simNode, comp int, cum uint64, size int) {
	s.stats.Backbones++
	s.stats.Summaries += uint64(size)
	// What a backbone that carries each summary when it changes (the
	// live GossipSub topic) delivers: the summaries changed since the
	// list this superpeer last got, or the whole list the first time
	// (and after a partition rebuilt the lists).
	if n.sc.bbHeard && n.sc.bbComp == comp && n.sc.bbCum <= cum {
		s.stats.SummaryChanges += cum - n.sc.bbCum
	} else {
		s.stats.SummaryChanges += uint64(size)
	}
	n.sc.bbHeard, n.sc.bbComp, n.sc.bbCum = true, comp, cum
}

// A superpeer hears the backbone's new version at its first tick after
// the version's flip (scopedView), and most often that tick does nothing
// else: Step(Backbone) only replaces the machine's table and makes a
// settled evaluation due if none was (no other claimer of its cluster
// came or went: node.Machine.BackboneQuiet), and nothing else falls due
// (due without the backbone: Due and LinksDue neither). Such a tick is not made:
// the simulator notes the version as heard at that tick (bbPending), and
// gives it to the machine just before its next input or tick, at the
// time of the tick it was heard at, between the ticks it makes up
// (sync). The machine decides exactly as when ticked then: nothing reads
// the table in between. At a backbone every 200 ms, that is most of a
// superpeer's ticks while a large swarm churns.

// bbPending is a backbone version heard by a superpeer and not yet given
// to its machine.
type bbPending struct {
	ver uint64        // the version (0: none)
	at  time.Duration // the tick it is heard at
	// settle is when the settled evaluation it makes due falls due (see
	// node.Machine.BackboneQuiet; noEntry for none): due counts it.
	settle time.Duration
	in     node.Backbone // what the machine is given
	comp   int           // and what countHeard counts of it
	cum    uint64
	size   int
}

// heardBy reports whether node i's tick at g has passed: before now, or
// now and before the event under way.
func (s *Sim) heardBy(i int, g time.Duration) bool {
	return g < s.now || g == s.now && s.tickSeq(i, g) < s.cur
}

// deferHearing decides, for superpeer i whose machine has not heard the
// backbone's version and whose next tick is due at d for everything else,
// whether that version is heard at its next tick without the tick being
// made (see bbPending); it reports whether it is.
func (s *Sim) deferHearing(i int, d time.Duration) bool {
	n := s.nodes[i]
	g := s.tickFrom(i, s.now)
	at := s.wallAt(g)
	b, made := s.bbCache[s.comp[i]]
	if made = made && b.ver == s.bbVersion; !made || !s.lazyHearing() || d <= g || n.tickAt < g || s.bbDirty && g >= s.bbAt {
		s.undefer(n) // its tick at g hears it
		return false
	}
	// (d > g: NextTick is after g, and so are the next evaluation and
	// Links: Due and LinksDue are false at g.)
	if n.m.RegistrarAt(at) != n.sc.regWith {
		s.undefer(n)
		return false
	}
	bb := s.backboneOf(i)
	c := s.bbCache[s.comp[i]]
	next, quiet := n.m.BackboneQuiet(at, c.in)
	if !quiet {
		s.undefer(n)
		return false
	}
	if pd := n.sc.bbPend; pd.ver != 0 && pd.ver != s.bbVersion && !s.heardBy(i, pd.at) {
		n.sc.bbPend = bbPending{} // the tick it waited for hears this version instead
	}
	older := n.sc.bbPrev.ver != 0 && n.sc.bbPrev.settle != noEntry
	if pd := n.sc.bbPend; pd.ver != 0 && pd.ver != s.bbVersion {
		// An older version heard and not given yet: given first. One
		// older still, heard and not given either, need not be (nothing
		// read the table in between), unless it made an evaluation due.
		if older {
			s.undefer(n)
			return false
		}
		if n.sc.bbPrev.ver != 0 {
			s.countHeard(n, n.sc.bbPrev.comp, n.sc.bbPrev.cum, n.sc.bbPrev.size)
		}
		n.sc.bbPrev = pd
		older = pd.settle != noEntry
	}
	settle := noEntry
	if !next.IsZero() && !older {
		// (After an older one that did, this one makes none due.)
		settle = next.Sub(Epoch)
	}
	n.sc.bbPend = bbPending{ver: s.bbVersion, at: g, settle: settle, in: c.in, comp: s.comp[i], cum: c.cum, size: len(bb)}
	return true
}

// undefer takes back node n's hearing of the backbone's version at a
// tick to come (deferHearing): that tick hears it, or no tick does.
func (s *Sim) undefer(n *simNode) {
	if n.sc.bbPend.ver == s.bbVersion {
		n.sc.bbPend, n.sc.bbPrev = n.sc.bbPrev, bbPending{}
	}
}

// dropHearings forgets node i's backbones heard and not given, when its
// machine goes: those heard are counted.
func (s *Sim) dropHearings(i int) {
	n := s.nodes[i]
	for _, pd := range []*bbPending{&n.sc.bbPrev, &n.sc.bbPend} {
		if pd.ver != 0 && s.heardBy(i, pd.at) {
			s.countHeard(n, pd.comp, pd.cum, pd.size)
		}
		*pd = bbPending{}
	}
}

// giveHeard gives node i's machine the backbone p it heard at p.at (see
// bbPending).
func (s *Sim) giveHeard(i int, p *bbPending) {
	n := s.nodes[i]
	s.countHeard(n, p.comp, p.cum, p.size)
	n.sc.bbVer = max(n.sc.bbVer, p.ver)
	n.m.Step(s.wallAt(p.at), p.in)
	*p = bbPending{}
}

// backboneChanged notes a change of what the superpeers hear on the
// backbone: they hear it a gossip delay after the first change since
// they last heard it.
func (s *Sim) backboneChanged() {
	if !s.bbDirty {
		s.bbDirty, s.bbAt = true, s.now+s.cfg.GossipDelay
		s.scheduleFlip(s.bbAt)
	}
}

// backboneHeard makes the superpeers' next ticks hear the backbone's new
// version (ticks when due: see due), but node but's, whose tick under way
// hears it (and whose tick it would otherwise move to the next: a Ready
// more than when the backbone's flip event runs first).
func (s *Sim) backboneHeard(but int) {
	if !s.sparse() {
		return
	}
	if s.lazyHearing() {
		if b := s.nodes[max(but, 0)]; but < 0 || b.state.Role != node.RoleSuperpeer || b.sc.bbVer == s.bbVersion {
			// The list is made at the first superpeer's tick that hears
			// it (backboneOf), and until then no superpeer's hearing is
			// put off (deferHearing); then each superpeer is scheduled.
			s.nextHearing()
			return
		}
		s.backboneOf(but) // the tick under way hears it: the list is made now
	}
	for j := range s.sps {
		if j != but {
			s.schedule(j)
		}
	}
}

// lazyHearing reports whether superpeers may hear the backbone without a
// tick of their own (deferHearing): when every node is on one side (the
// lists are made per side).
func (s *Sim) lazyHearing() bool { return !s.plain && len(s.comps) == 1 }

// nextHearing pushes the event of the first tick of a superpeer that
// will hear the backbone's new version (firstHearing), after the event
// under way.
func (s *Sim) nextHearing() {
	best, at, seq := -1, noEntry, uint64(0)
	for j := range s.sps {
		n := s.nodes[j]
		if !n.alive || n.grid < 0 || n.state.Role != node.RoleSuperpeer || n.sc.bbVer == s.bbVersion {
			continue
		}
		g := s.tickFrom(j, s.now)
		if q := s.tickSeq(j, g); g < at || g == at && q < seq {
			best, at, seq = j, g, q
		}
	}
	if best >= 0 {
		s.q.push(event{at: at, seq: seq, kind: evHearing, node: best, inc: s.nodes[best].inc, gen: s.bbVersion})
	}
}

// firstHearing is the tick of the first superpeer to hear the backbone's
// new version, as when every superpeer ticks then: the list is made now,
// and every superpeer is scheduled to hear it (deferHearing). If that
// superpeer went down or stopped serving since, or has heard it, the
// next one's tick is.
func (s *Sim) firstHearing(e event) {
	if e.gen != s.bbVersion {
		return // a newer version flipped before any superpeer heard this one
	}
	c := s.comp[e.node]
	if b, ok := s.bbCache[c]; s.lazyHearing() && (!ok || b.ver != s.bbVersion) {
		if n := s.nodes[e.node]; !s.live(e) || n.state.Role != node.RoleSuperpeer || n.sc.bbVer == s.bbVersion {
			s.nextHearing()
			return
		}
		s.backboneOf(e.node)
	}
	for j := range s.sps {
		s.schedule(j)
	}
}

// registryDown notes that node j went down or to another side: the
// serving nodes that hold its registration may drop it from their view
// (ticks when due: see due). Their list drops those that no longer hold
// it.
func (s *Sim) registryDown(j int) {
	if !s.sparse() {
		return
	}
	by := s.regBy[j][:0]
	for _, t := range s.regBy[j] {
		o := s.nodes[t]
		if _, ok := o.sc.registry[j]; !ok || slices.Contains(by, t) {
			continue
		}
		by = append(by, t)
		o.sc.regDown = true
		s.schedule(int(t))
	}
	s.regBy[j] = by
}

// knownOf is member i's view: the peers of the rosters it got within the
// membership TTL.
func (s *Sim) knownOf(i int) []int {
	n := s.nodes[i]
	out := make([]int, 0, len(n.sc.known))
	n.sc.knownMin = noEntry
	for j, at := range n.sc.known {
		if s.now-at > s.ttl {
			delete(n.sc.known, j)
			n.sc.rosterV++
			continue
		}
		n.sc.knownMin = min(n.sc.knownMin, at)
		out = append(out, j)
	}
	slices.Sort(out)
	return out
}

// membersOf builds a view of the nodes ids and i, with what each said of
// itself and, with an election, i's RTTs.
func (s *Sim) membersOf(i int, ids []int) []node.Member {
	if !slices.Contains(ids, i) {
		ids = append(slices.Clone(ids), i)
		slices.Sort(ids)
	}
	out := make([]node.Member, 0, len(ids))
	for _, j := range ids {
		o := s.nodes[j]
		e := node.Member{ID: o.id, Key: o.key, Flapping: o.flapping, Superpeer: o.super, Beacon: o.beacon}
		if s.cfg.Node.Election != "" && j != i {
			e.RTT = s.rtt(i, j)
		}
		out = append(out, e)
	}
	return out
}

// backboneOf is what superpeer i hears on the backbone: every live
// superpeer of its component, itself included. One list per component
// and backbone version, shared.
func (s *Sim) backboneOf(i int) []node.Summary {
	c := s.comp[i]
	if b, ok := s.bbCache[c]; ok && b.ver == s.bbVersion {
		return b.list
	}
	type entry struct {
		sum node.Summary
		j   int32
	}
	es := make([]entry, 0, len(s.sps))
	for _, j := range slices.Sorted(maps.Keys(s.sps)) {
		if o := s.nodes[j]; o.alive && s.comp[j] == c && o.state.Role == node.RoleSuperpeer {
			es = append(es, entry{node.Summary{Superpeer: o.id, K: o.state.K, ClusterKey: o.state.ClusterKey, Size: len(o.state.Members)}, int32(j)})
		}
	}
	slices.SortStableFunc(es, func(a, b entry) int { return cmp.Compare(string(a.sum.ClusterKey[:]), string(b.sum.ClusterKey[:])) })
	out, idx := make([]node.Summary, len(es)), make([]int32, len(es))
	for k, e := range es {
		out[k], idx[k] = e.sum, e.j
	}
	if s.bbCache == nil {
		s.bbCache = map[int]bbList{}
	}
	prev := s.bbCache[c]
	if len(s.bbPos) < len(s.nodes) {
		s.bbPos = make([]int32, len(s.nodes))
	}
	s.bbCache[c] = bbList{ver: s.bbVersion, list: out, idx: idx, in: node.NewBackbone(out), cum: prev.cum + summaryChanges(prev.list, prev.idx, out, idx, s.bbPos)}
	return out
}

// summaryChanges counts the summaries of b that are not in a as they are
// (new or changed), and those of a that b has no more: both sorted by
// cluster key, then as listed (by superpeer); ai and bi are their
// superpeers' indices (one summary per superpeer in each). pos, zero
// for every node, has a place for each and is left zero.
func summaryChanges(a []node.Summary, ai []int32, b []node.Summary, bi []int32, pos []int32) uint64 {
	for k, j := range ai {
		pos[j] = int32(k + 1)
	}
	var c uint64
	for k, j := range bi {
		p := pos[j]
		if p <= 0 || a[p-1] != b[k] {
			c++ // new or changed
		}
		if p > 0 {
			pos[j] = -1 // still there
		}
	}
	for _, j := range ai {
		if pos[j] != -1 {
			c++ // gone
		}
		pos[j] = 0
	}
	return c
}

// bbList is the backbone of one component at version ver, and the input
// every superpeer of the component is given (node.NewBackbone: what a
// machine derives from the list is derived once, for all of them); cum
// counts the summary changes over the versions built so far (see
// scopedView).
type bbList struct {
	ver  uint64
	list []node.Summary
	idx  []int32 // the node of each summary
	in   node.Backbone
	cum  uint64
}
