package overlay

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/gossip"
)

// geoMembership is the geometric strategy's membership (issue 20): a node
// announces on no topic of the swarm, and its view is its cluster, as the
// attach protocol gives it (the roster a superpeer sends with every yes,
// geo.go): an ordinary peer's is itself and its superpeer, a superpeer's
// itself and its members, as the node's state lists them (node.GeoState's
// Members). The superpeer (the node itself when it serves) is flagged
// Superpeer; the node's own entry carries its own announcement's flags
// (private, flapping). What the machine reads
// from the view with this strategy is the cluster's: the election's ranks
// (rankedLast), the RTTs behind its timeout (Member.RTT, the node's own
// pings of its cluster, rtt.go), and the private peers no token is passed
// to. Other peers' flags are not in the view: they travel with the attach
// protocol (a member says in each request whether it is private or
// flapping, and the superpeer's roster lists the members that did,
// node.GeoAnswer.Demoted), and the machine ranks those last and hands
// them no token by what the roster says (overlay/node's demotes).
//
// Nothing here is gossiped: SetLocal keeps the announcement, Leave and
// Close do nothing, and the view changes (Changes) when the node's state
// lists another cluster (changed, from geo.carryOut).
type geoMembership struct {
	n       *Node
	mu      sync.Mutex
	local   gossip.Announcement
	members []peer.ID // the cluster last committed, sorted
	sp      peer.ID   // its superpeer
	changes chan struct{}
}

var _ membership = (*geoMembership)(nil)

func newGeoMembership(n *Node) *geoMembership {
	return &geoMembership{n: n, local: gossip.Announcement{ID: n.self}, members: []peer.ID{n.self}, changes: make(chan struct{}, 1)}
}

// changed takes the cluster of the node's state st: its members and its
// superpeer (st.Superpeer, or the node itself when it serves).
func (m *geoMembership) changed(st State) {
	sp := st.Superpeer.ID
	if st.Role == RoleSuperpeer {
		sp = m.n.self
	}
	members := slices.Clone(st.Members)
	if !slices.Contains(members, m.n.self) {
		members = append(members, m.n.self)
	}
	slices.Sort(members)
	m.mu.Lock()
	same := sp == m.sp && slices.Equal(members, m.members)
	m.members, m.sp = members, sp
	m.mu.Unlock()
	if !same {
		notify(m.changes)
	}
}

func (m *geoMembership) entry(p peer.ID, now time.Time) gossip.Entry {
	if p == m.n.self {
		a := m.local
		a.ID, a.Superpeer = p, p == m.sp
		return gossip.Entry{Announcement: a, Seen: now}
	}
	return gossip.Entry{Announcement: gossip.Announcement{ID: p, Superpeer: p == m.sp}, Seen: now}
}

// Entries are the node's cluster, sorted by ID.
func (m *geoMembership) Entries() []gossip.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	out := make([]gossip.Entry, 0, len(m.members))
	for _, p := range m.members {
		out = append(out, m.entry(p, now))
	}
	return out
}

func (m *geoMembership) Get(p peer.ID) (gossip.Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.members, p) {
		return gossip.Entry{}, false
	}
	return m.entry(p, time.Now()), true
}

func (m *geoMembership) Left(peer.ID) bool { return false }

func (m *geoMembership) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.members)
}

func (m *geoMembership) Changes() <-chan struct{} { return m.changes }

// SetLocal keeps the node's own announcement for its entry; it goes to
// nobody.
func (m *geoMembership) SetLocal(_ context.Context, a gossip.Announcement) error {
	m.mu.Lock()
	changed := a.Private != m.local.Private || a.Flapping != m.local.Flapping
	m.local = a
	m.mu.Unlock()
	if changed {
		notify(m.changes)
	}
	return nil
}

func (m *geoMembership) Leave(context.Context) error { return nil }
func (m *geoMembership) Close() error                { return nil }
func (m *geoMembership) Stats() gossip.FeedStats     { return gossip.FeedStats{} }
