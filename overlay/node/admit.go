package node

import (
	"cmp"
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// Who counts: identities per address, and peers that are not the
// overlay's.
//
// A peer ID costs nothing: one host can announce any number of them, each
// with a valid signature (issue 19: 200 identities from 127.0.0.1 took
// the size estimate from 4 to 204, k from 1 to 7 with --fraction 0.5, and
// with --quorum flooded the clusters' electorates). Bans are per peer ID
// and do not stop a fresh one. What does cost is an address, so the
// machine counts identities per address group (AddrGroup of the remote
// address of the connection the driver sees each identity on, never one
// the peer claims):
//
//   - an identity counts (for the membership view, the size estimate, the
//     electorate and the lookups) only once the driver has seen it on a
//     connection (Routing.Addrs): an announcement relayed by gossip proves
//     a signature, not a host;
//   - a group with more than MaxPerAddr overlay identities (members or
//     routing-table peers) is flooded, and counts for nothing: none of its
//     identities counts towards the size estimate, is a member of any
//     cluster, an elector, or a peer a lookup may ask or end at (so none is
//     ever the superpeer). A flood from one address then leaves k as it
//     was; up to MaxPerAddr identities from one address count as any
//     MaxPerAddr peers joining would (with --fraction 0.5, S grows by 2 at
//     most, and k by one at most in a swarm of 3 or more). Counting a
//     flooded address as MaxPerAddr peers instead moved k by one under the
//     flood, and with --quorum the clusters that the new k made went about
//     2 s without a superpeer until their elections ended (the live
//     TestSybilFlood): counting nothing gives a flood nothing to move. An
//     honest peer that shares an address with a flood loses its place in
//     the others' views, and nothing more: it is not banned, and its own
//     machine goes on.
//
// And a routing-table peer counts for the size estimate only if it is a
// member or speaks the overlay's closer protocol (Routing.Peers[].Closer,
// from identify): kad-dht lets any host that speaks the overlay's DHT
// prefix into the table, and such a host is no overlay peer (issue 19,
// finding 9). Lookups ask only members and peers that speak the closer
// protocol (LookupRequest.MayAsk).
//
// MaxPerAddr = 0 turns the accounting off: the simulator, which models no
// addresses, and the unit tests of other rules. The geometric strategy
// does not count identities per address yet: its token machines ping and
// attach to members the driver may not be connected to yet.

// DefaultMaxPerAddr is the overlay's default of Config.MaxPerAddr: a few
// nodes behind one NAT, or a few processes on one machine, count; more do
// not. Up to it, identities from one address move k as that many honest
// peers joining would: by one at most with --fraction 0.5 in a swarm of
// 3 peers or more (S grows by 2 at most).
const DefaultMaxPerAddr = 4

// AddrGroup names the address group of an IP address, the unit in which
// identities are counted: an IPv4 address by itself (/32; the IPv4-mapped
// form included), an IPv6 address by its /64, the block one subscriber or
// one machine gets (grouping by /48 would lump together whole providers'
// customers; a /64 per identity costs an attacker with a /48 65536
// groups, a cost we accept: see the notes). Invalid: "".
//
// IPv4 is not grouped by /24: honest peers in one data centre share /24s,
// and the in-process testnet gives its nodes neighbouring addresses.
func AddrGroup(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return ""
	case ip.Is4():
		return ip.String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// admit recomputes the view that counts (m.view) from the view as given
// (m.raw) and the addresses the driver saw (m.routing.Addrs).
func (m *Machine) admit() {
	m.sizeVer++ // the own estimate's inputs may have changed
	m.refused = nil
	if m.cfg.MaxPerAddr <= 0 || m.cfg.Geometric {
		m.view = m.raw
		return
	}
	// Overlay identities per address group: members and routing-table
	// peers the driver is connected to.
	groups := map[string][]peer.ID{}
	seen := map[peer.ID]bool{}
	add := func(p peer.ID) {
		if g, ok := m.routing.Addrs[p]; ok && g != "" && p != m.cfg.Self && !seen[p] {
			seen[p] = true
			groups[g] = append(groups[g], p)
		}
	}
	for _, e := range m.raw {
		add(e.ID)
	}
	for _, p := range m.routing.Peers {
		add(p.ID)
	}
	for _, b := range m.backbone.summaries() {
		// The superpeers on the backbone: with the cluster-scoped
		// membership a node sees few identities besides its cluster's,
		// and a flood from one address shows among the superpeers
		// (found by the node simulator: sybil superpeers claimed an
		// honest cluster on the backbone, and entered its electorate).
		add(b.Superpeer)
	}
	flooded := map[string]bool{}
	for g, ids := range groups {
		if len(ids) <= m.cfg.MaxPerAddr {
			continue
		}
		flooded[g] = true
		m.refused = append(m.refused, ids...)
	}
	slices.Sort(m.refused)
	view := make([]Member, 0, len(m.raw))
	for _, e := range m.raw {
		g, ok := m.routing.Addrs[e.ID]
		if e.ID == m.cfg.Self || ok && g != "" && !flooded[g] {
			view = append(view, e)
		}
	}
	m.view = view
	// Quorum remembers members past their last announcement (configured):
	// not those of a flooded group, or identities that were admitted while
	// the flood was building up would stay in the electorates.
	for _, p := range m.refused {
		delete(m.remembered, p)
	}
}

// maxConnect bounds Ready.Connect: the peers a node asks its driver to
// connect to per evaluation. A cluster is a few dozen peers; and an
// identity costs nothing to announce, so the announcements of a flood
// make a node dial at most this many a period.
const maxConnect = 16

// unseen lists, sorted by ID, up to maxConnect peers of the cluster (k, ck)
// that the view as given holds but that count for nothing because the
// driver has not seen them on a connection (Routing.Addrs), leaving out
// those asked for less than a ReevaluateInterval ago: Ready.Connect. A
// member counts only while the driver is connected to it, and the driver
// connects to the members that count (it pings them, rtt.go) and to no
// others: a cluster-mate that it saw go away with its connection (the
// other side of a partition, a peer whose link flapped) would otherwise
// never count again once it is back, whatever its announcements say.
// Found live: after a partition of 16 nodes healed, the nodes stayed
// connected to only some of the other side's members, and 6 of 16 went on
// knowing 5 or 7 of their cluster's 9 members (peer testnet --scenario
// partition). Without the accounting (MaxPerAddr = 0, or the geometric
// strategy) every member of the view counts: none.
func (m *Machine) unseen(now time.Time, k int, ck dhtselect.Key) []peer.ID {
	if m.cfg.MaxPerAddr <= 0 || m.cfg.Geometric {
		return nil
	}
	if m.asked == nil {
		m.asked = map[peer.ID]time.Time{}
	}
	for p, at := range m.asked {
		if now.Sub(at) >= m.cfg.ReevaluateInterval {
			delete(m.asked, p)
		}
	}
	var out []peer.ID
	for _, e := range m.raw {
		if len(out) == maxConnect {
			break
		}
		_, seen := m.routing.Addrs[e.ID]
		_, asked := m.asked[e.ID]
		if e.ID == m.cfg.Self || seen || asked || e.Key.Cluster(k) != ck {
			continue
		}
		m.asked[e.ID] = now
		out = append(out, e.ID)
	}
	return out
}

// errFlooded: a lookup ended at an identity of a flooded address group,
// which may not be a superpeer.
var errFlooded = errors.New("lookup ended at an identity whose address shows more identities than MaxPerAddr")

// Refused returns the identities of the address groups the node found
// flooded at its last evaluation, sorted: they count for nothing here,
// and a superpeer's registry refuses them and takes them out of the
// roster it hands its members (whose own views, without the backbone's
// summaries, may show fewer of them than MaxPerAddr). The machine's own
// slice, replaced and never changed: not to be modified.
func (m *Machine) Refused() []peer.ID { return m.refused }

// IsRefused reports whether p is among refused (sorted, as Refused
// returns it): an identity of a flooded address group.
func IsRefused(refused []peer.ID, p peer.ID) bool {
	_, ok := slices.BinarySearch(refused, p)
	return ok
}

// admitted reports whether p would count as a member if it were one (see
// admit): without the address accounting, any peer; with it, a peer seen
// on a connection, of no flooded address group.
func (m *Machine) admitted(p peer.ID) bool {
	if m.cfg.MaxPerAddr <= 0 || m.cfg.Geometric {
		return true
	}
	g, ok := m.routing.Addrs[p]
	return ok && g != "" && !IsRefused(m.refused, p)
}

// countsForSize reports whether a routing-table peer counts for the size
// estimate: a member that counts, or (without the address accounting, a
// connected peer; with it, a connected peer whose group is not flooded)
// that speaks the overlay's closer protocol.
func (m *Machine) countsForSize(p RoutingPeer) bool {
	if m.speaks(p) {
		return true // the cheaper test first: most routing peers pass it
	}
	return m.memberOf(p.ID) != nil
}

// speaks reports whether routing-table peer p is connected and speaks
// the overlay's closer protocol, and is no identity of a flooded address
// group.
func (m *Machine) speaks(p RoutingPeer) bool {
	return p.Connected && p.Closer && !IsRefused(m.refused, p.ID)
}

// MayAsk reports whether the lookup may query p, given whether p's
// protocols (identify's, in the peerstore) include the overlay's closer
// protocol: not an identity of a flooded address group, and either a peer
// that speaks the protocol or a member (whose protocols may not be known
// yet: it was not connected). A peer it may not ask counts as failed.
func (r LookupRequest) MayAsk(p peer.ID, closer bool) bool {
	if IsRefused(r.refused, p) {
		return false
	}
	if closer {
		return true
	}
	_, ok := slices.BinarySearchFunc(r.members, p, func(e Member, p peer.ID) int { return cmp.Compare(e.ID, p) })
	return ok
}
