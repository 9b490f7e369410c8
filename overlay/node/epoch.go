package node

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// The defence against ID grinding (DHT strategy, Config.Epoch; the rules
// and the reasons are in dhtselect/epoch.go). Without it a peer that grinds
// a key pair until its Kademlia key falls next to its cluster key is the
// superpeer as soon as it joins, and for ever. With it:
//
//   - the superpeer of a cluster in an epoch is the eligible member closest
//     to the cluster's salted target (dhtselect.SaltedTarget), which the
//     lookup looks up instead of the cluster key and the election ranks by;
//   - the salt of the epoch is made from the chain value, for that epoch,
//     of the superpeer this node had at the end of the previous epoch (each
//     peer reveals its next value in its announcement, Beacon.Reveal); a
//     superpeer that revealed nothing gives a salt chained from the
//     previous one, and is not eligible in the epoch; when the node's
//     cluster changes (k changed) the new cluster's salt is chained from
//     the old one's; a node that has no salt of its own (it has just
//     started) computes one that anyone could, and takes the members';
//   - the salt the node takes is the one most eligible members of the
//     cluster announce for the epoch (its own counts when it computed one
//     from a source; a tie goes to the smaller salt): members that named
//     different superpeers at the boundary (a failover under way) agree
//     again within an announcement, and a node that joined takes the
//     cluster's salt;
//   - a member is eligible when it started MinAge epochs before the
//     current one: in the epoch it says it started in (Beacon.Since) if it
//     was in this node's view before this node joined (took its first role:
//     mayJoin waits for the view to fill), or in its first view with peers
//     if it joined alone and that view came within believeFor of the join,
//     else in the later of that and the epoch before the one this node
//     first saw it in (one epoch of slack, so that observers who saw a
//     peer arrive on either side of an epoch's end agree; MinAge makes up
//     for it). (A peer that joins with a node is believed by it: that node
//     disagrees with the older members on the peer's age for up to MinAge
//     epochs.) A peer that has announced no beacon yet has said no age,
//     and counts as first seen. A peer that announces another hash chain
//     is seen anew. An ineligible member ranks last, and a lookup that
//     ends at one is replaced by the eligible member closest to the
//     target;
//   - while no member of the cluster is eligible (a network's first MinAge
//     epochs; a member that left the view counts for a membership TTL
//     more), the defence does not apply: the target is the cluster key
//     and no member ranks last for its age. A ground ID is then as good as
//     it was without the defence, until the first members come of age.
//
// What it costs: a hand-over per cluster per epoch (the default epoch is
// an hour), and a node that restarts is not eligible for MinAge epochs.

// EpochConfig configures the defence against ID grinding.
type EpochConfig struct {
	// Length is the epoch's length; zero turns the defence off (the
	// superpeer is the member closest to the cluster key).
	Length time.Duration
	// Secret seeds the node's hash chain, with its peer ID: random in
	// the live node, drawn from the seed in the simulator.
	Secret dhtselect.Salt
	// Chain is how many epochs the hash chain lasts; zero means
	// DefaultChain. Past its end the node reveals nothing, and is not
	// eligible when it would give the salt.
	Chain int
}

// DefaultChain is the default length of a node's hash chain, in epochs:
// 7.5 years of hour-long epochs, 65536 hashes at the start.
const DefaultChain = 1 << 16

// MinAge is the age, in whole epochs, a member needs to be eligible: it
// counts as started in the epoch it says, but no earlier than the epoch
// before the one it was first seen in (so that observers who first saw an
// honest peer on either side of an epoch's end agree on its age). An ID
// first seen in epoch f is eligible from epoch f+MinAge-1 on, two epochs
// after f's start at the earliest: the salt of f+MinAge-1 was revealed
// during f+MinAge-2, after the ID was first seen.
const MinAge = 3

func (c EpochConfig) validate() error {
	if c.Length < 0 || c.Chain < 0 || c.Chain > 1<<24 {
		return fmt.Errorf("node: Epoch.Length %v and Epoch.Chain %d: want 0 (off, the default) or more, and a chain of at most 2^24 epochs", c.Length, c.Chain)
	}
	if c.Length > 0 && c.Length < time.Millisecond {
		return fmt.Errorf("node: Epoch.Length %v: want at least 1ms", c.Length)
	}
	return nil
}

// epochs is the defence's state; nil when it is off.
type epochs struct {
	m       *Machine
	cfg     EpochConfig
	started time.Time // the first input
	since   uint64    // the epoch of started
	chain   *dhtselect.Chain
	peers   map[peer.ID]*aged
	salt    clusterSalt
	// asked is the target of the last lookup asked for.
	asked dhtselect.Key
	// withheld gave no chain value for salt's epoch: not eligible in it.
	withheld peer.ID
	// active: a member of salt's cluster is eligible, and the defence
	// applies to it.
	active bool
	// known: the node has had a view that held another peer. A node
	// that took a role while alone in its view believes the peers of its
	// first view with any (aged.old), as it would have before it joined,
	// if that view comes within believeFor of its join
	// (TestFirstViewAfterJoining); later, a stranger's claim of age is no
	// more believed by a node that was alone than by one that was not
	// (TestAloneLongBelievesNoStranger).
	known  bool
	joined time.Time // when the node took its first role
	// lastActive is when the node last saw an eligible member of its
	// cluster in its view (active).
	lastActive time.Time
}

// join notes the node's first role.
func (ep *epochs) join(now time.Time) {
	if ep != nil && ep.joined.IsZero() {
		ep.joined = now
	}
}

// believeFor is how long after joining alone a node believes its first
// view with peers: the wait for a digest (digestWait) and a membership
// TTL, in which a joiner that took a role before its registrations
// answered hears them.
func (ep *epochs) believeFor() time.Duration { return ep.m.digestWait() + ep.m.ttl() }

// aged is what the node knows of a peer's age and chain.
type aged struct {
	first uint64    // the epoch the node first saw it in
	old   bool      // in the view before the node joined (or in its first view: known)
	last  time.Time // last in the view
	since uint64    // the epoch it says it started in
	said  bool      // it has announced a beacon (since is a claim)
	ve    uint64    // its latest chain value checked, for epoch ve
	v     dhtselect.Salt
}

// clusterSalt is the salt of one cluster in one epoch.
type clusterSalt struct {
	e       uint64
	k       int
	ck      dhtselect.Key
	own     dhtselect.Salt // computed by this node
	sourced bool           // own came from a superpeer's chain (or its absence)
	s       dhtselect.Salt // taken: the most announced
}

func newEpochs(m *Machine, cfg Config) *epochs {
	if cfg.Epoch.Length <= 0 || cfg.Geometric {
		return nil
	}
	ep := &epochs{m: m, cfg: cfg.Epoch, peers: map[peer.ID]*aged{}}
	if ep.cfg.Chain == 0 {
		ep.cfg.Chain = DefaultChain
	}
	return ep
}

func (ep *epochs) epoch(now time.Time) uint64 { return dhtselect.EpochOf(now, ep.cfg.Length) }

// begin notes the node's start.
func (ep *epochs) begin(now time.Time) {
	if ep.started.IsZero() {
		ep.started, ep.since = now, ep.epoch(now)
	}
}

// observe takes the view's ages and chain values.
func (ep *epochs) observe(now time.Time) {
	if ep == nil {
		return
	}
	ep.begin(now)
	cur := ep.epoch(now)
	believe := !ep.m.joined || !ep.known && now.Sub(ep.joined) <= ep.believeFor()
	for _, e := range ep.m.view {
		if e.ID == ep.m.cfg.Self {
			continue
		}
		ep.known = true
		a := ep.peers[e.ID]
		if a == nil {
			a = &aged{first: cur, old: believe}
			ep.peers[e.ID] = a
		}
		a.last = now
		b := e.Beacon
		if b.Next != 0 {
			// A beacon (every node that runs the defence announces
			// Next, the epoch after the current one; a registration
			// made before the peer's first role has none).
			a.since, a.said = b.Since, true
		}
		switch {
		case b.Reveal == (dhtselect.Salt{}) || b.Next <= a.ve:
		case a.ve == 0:
			if b.Next == cur || b.Next == cur+1 {
				a.ve, a.v = b.Next, b.Reveal
			}
		case dhtselect.ChainFollows(a.ve, a.v, b.Next, b.Reveal):
			a.ve, a.v = b.Next, b.Reveal
		default:
			// Another chain: as far as age goes, another peer.
			*a = aged{first: cur, last: now, since: b.Since, said: true, ve: b.Next, v: b.Reveal}
		}
	}
	for p, a := range ep.peers {
		if now.Sub(a.last) > MinAge*ep.cfg.Length {
			delete(ep.peers, p)
		}
	}
}

// sinceOf is the epoch p counts as started in.
func (ep *epochs) sinceOf(p peer.ID, cur uint64) uint64 {
	if p == ep.m.cfg.Self {
		return ep.since
	}
	a := ep.peers[p]
	switch {
	case a == nil:
		return cur
	case a.old && a.said:
		// A peer that has said nothing yet is as old as the node has
		// seen it: a beaconless entry is no claim to have started in
		// epoch 0 (a joiner that believed its peers' silence counted
		// every peer that had not taken a role yet eligible, and two
		// nodes each named the other: overlay's TestBannedRedial).
		return a.since
	}
	return max(a.since, a.first-1)
}

// eligible reports whether p may serve its cluster now.
func (ep *epochs) eligible(p peer.ID) bool {
	if ep == nil {
		return true
	}
	ep.begin(ep.m.now)
	cur := ep.epoch(ep.m.now)
	return p != ep.withheld && ep.sinceOf(p, cur)+MinAge <= cur
}

// value is p's chain value for epoch e, if known.
func (ep *epochs) value(p peer.ID, e uint64) (dhtselect.Salt, bool) {
	if p == ep.m.cfg.Self {
		return ep.ownChain().Value(e)
	}
	if a := ep.peers[p]; a != nil && a.ve != 0 {
		return dhtselect.ChainBack(a.ve, a.v, e)
	}
	return dhtselect.Salt{}, false
}

func (ep *epochs) ownChain() *dhtselect.Chain {
	if ep.chain == nil {
		h := sha256.New()
		h.Write(ep.cfg.Secret[:])
		h.Write([]byte(ep.m.cfg.Self))
		var seed dhtselect.Salt
		h.Sum(seed[:0])
		ep.chain = dhtselect.NewChain(seed, ep.since, ep.cfg.Chain)
	}
	return ep.chain
}

// target returns the point the superpeer of cluster ck (k bits) is
// closest to now: ck itself without the defence.
func (ep *epochs) target(now time.Time, k int, ck dhtselect.Key) dhtselect.Key {
	if ep == nil {
		return ck
	}
	ep.begin(now)
	cur := ep.epoch(now)
	if s := &ep.salt; s.e != cur || s.k != k || s.ck != ck {
		prev := *s
		if prev.k != k || prev.ck != ck {
			ep.lastActive = time.Time{} // another cluster
		}
		next := clusterSalt{e: cur, k: k, ck: ck, own: dhtselect.ClusterSalt(ck, k, cur, dhtselect.Salt{})}
		ep.withheld = ""
		src := ep.m.state.Superpeer
		switch {
		case prev.e+1 == cur && prev.k == k && prev.ck == ck && src != "":
			// The superpeer at the end of the last epoch gives the salt.
			next.sourced = true
			if v, ok := ep.value(src, cur); ok {
				next.own = dhtselect.ClusterSalt(ck, k, cur, v)
			} else {
				next.own, ep.withheld = dhtselect.ClusterSalt(ck, k, cur, prev.s), src
				ep.m.note(slog.LevelWarn, "epoch: the superpeer revealed no salt", "superpeer", src, "epoch", cur)
			}
		case prev.e == cur || prev.e+1 == cur && prev.s != (dhtselect.Salt{}):
			// Another cluster (k changed): the salt follows from the
			// last one, which no one knew two epochs ago either (a
			// salt that anyone can compute for any epoch would do for
			// an ID ground long before). Members that come from two
			// clusters (k fell) vote.
			next.own, next.sourced = dhtselect.ClusterSalt(ck, k, cur, prev.s), true
		}
		*s = next
	}
	// Every node evaluates at the epoch's end, so that the members change
	// targets together (a forced evaluation moves the next one on).
	ep.m.evaluateAt(dhtselect.EpochStart(cur+1, ep.cfg.Length))
	ep.salt.s = ep.vote(cur)
	// Active when a member of the cluster in the view is eligible, or
	// was within a membership TTL: a member whose registrar changed had
	// a view of itself alone for a moment, dropped the defence, and,
	// closest to the cluster key, claimed the cluster (the node
	// simulator, 500 ms from its cluster: TestFarJoinerUnderDefence).
	// Longer would not do: a node that still counted a member that had
	// left targeted the salted key while a joiner that never saw that
	// member targeted the cluster key, and each named itself
	// (TestDepartedMemberKeepsNoDefence).
	active := false
	for _, p := range ep.m.clusterMembers(k, ck, false) {
		if ep.eligible(p) {
			active = true
			break
		}
	}
	if active {
		ep.lastActive = now
	}
	ep.active = active || !ep.lastActive.IsZero() && now.Sub(ep.lastActive) <= ep.m.ttl()
	if !ep.active {
		return ck
	}
	return dhtselect.SaltedTarget(ck, k, ep.salt.s)
}

// barred reports whether p ranks last in its cluster for its age: the
// defence applies to the cluster (a member is eligible) and p is not
// eligible.
func (ep *epochs) barred(p peer.ID) bool { return ep != nil && ep.active && !ep.eligible(p) }

// vote returns the salt most eligible members of the cluster announce for
// the epoch, this node's own included when it computed one from a source;
// a tie goes to the smaller.
func (ep *epochs) vote(cur uint64) dhtselect.Salt {
	s := ep.salt
	counts := map[dhtselect.Salt]int{}
	if s.sourced {
		counts[s.own]++
	}
	for _, e := range ep.m.view {
		b := e.Beacon
		if e.ID != ep.m.cfg.Self && b.SaltEpoch == cur && b.K == s.k && b.Cluster == s.ck && b.Salt != (dhtselect.Salt{}) && ep.eligible(e.ID) {
			counts[b.Salt]++
		}
	}
	best, most := s.own, 0
	for v, c := range counts {
		if c > most || c == most && bytes.Compare(v[:], best[:]) < 0 {
			best, most = v, c
		}
	}
	return best
}

// lookupKey is the key to look up for cluster ck (k bits): its target.
func (ep *epochs) lookupKey(now time.Time, k int, ck dhtselect.Key) dhtselect.Key {
	t := ep.target(now, k, ck)
	if ep != nil {
		ep.asked = t
	}
	return t
}

// answers reports whether a lookup of key answers the one asked for
// cluster ck.
func (ep *epochs) answers(key, ck dhtselect.Key) bool {
	if ep == nil {
		return key == ck
	}
	return key == ep.asked
}

// vet replaces a lookup's answer that is not eligible by the eligible
// member of the cluster closest to the target that ranks first (not
// private, not flapping), if there is one.
func (ep *epochs) vet(sp peer.ID) peer.ID {
	if !ep.barred(sp) {
		return sp
	}
	m := ep.m
	members := m.clusterMembers(m.lookupK, m.lookupKey, false)
	last := m.rankedLast(members)
	best := peer.ID("")
	for _, p := range members {
		if !last[p] && (best == "" || dhtselect.Closer(dhtselect.KeyOf(p), dhtselect.KeyOf(best), ep.asked)) {
			best = p
		}
	}
	if best == "" {
		return sp
	}
	m.note(slog.LevelInfo, "epoch: the lookup named a member not eligible yet", "named", sp, "superpeer", best)
	return best
}

// beacon is what the node says for the defence in its announcement.
func (ep *epochs) beacon(now time.Time) dhtselect.Beacon {
	if ep == nil {
		return dhtselect.Beacon{}
	}
	ep.begin(now)
	cur := ep.epoch(now)
	v, _ := ep.ownChain().Value(cur + 1)
	s := ep.salt
	return dhtselect.Beacon{Since: ep.since, Next: cur + 1, Reveal: v, SaltEpoch: s.e, K: s.k, Cluster: s.ck, Salt: s.s}
}

// EpochStatus is the defence's state: the epoch, the salt taken for the
// node's cluster and its target (zero when the defence is off).
type EpochStatus struct {
	Epoch  uint64
	Since  uint64
	Salt   dhtselect.Salt
	Target dhtselect.Key
}

// Epoch returns the defence's state.
func (m *Machine) Epoch() EpochStatus {
	ep := m.ep
	if ep == nil {
		return EpochStatus{}
	}
	return EpochStatus{Epoch: ep.salt.e, Since: ep.since, Salt: ep.salt.s, Target: ep.asked}
}

// Eligible reports whether the node counts p as eligible to serve now
// (always true without the defence).
func (m *Machine) Eligible(p peer.ID) bool { return m.ep.eligible(p) }
