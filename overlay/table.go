package overlay

import (
	dht "github.com/libp2p/go-libp2p-kad-dht"
	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p-kbucket/peerdiversity"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

// The overlay's routing table holds overlay peers only: peers whose
// protocols, as identify put them in the peerstore, include the overlay's
// closer protocol (speaksCloser), and the configured bootstrap peers
// (dhtOptions).
//
// kad-dht takes into its table any peer that speaks its protocol, here
// the overlay's DHT prefix (/superpeer/<network>/kad/1.0.0). A host that
// runs kad-dht alone with that prefix (a rust, js or Go client configured
// with it), or an overlay build whose closer protocol is of another
// version (the DHT prefix is not versioned with the overlay's protocols),
// took bucket slots from overlay peers, and the lookups' seeds and the
// closer answers are taken from the table: with 20 of them closer to a
// cluster key than its superpeer, every seed of a lookup was one that
// does not speak the closer protocol, the lookup ended at the node itself,
// and every member of the cluster declared itself its superpeer (the
// interoperability audit: 4 nodes and 24 such hosts, 4 superpeers of one
// cluster for 20 s; TestKadOnlyPeersNearClusterKey).
//
// kad-dht adds a peer to its table by two ways, and each needs its own
// filter:
//
//   - when identify completes or a peer's protocols change, and when the
//     table runs low (the connected peers), it asks its RoutingTableFilter
//     (dhtOptions' first), after checking that the peer speaks the DHT
//     protocol. Identify has put the peer's protocols in the peerstore by
//     then. A peer the filter refuses on a change of its protocols is
//     taken out of the table: an overlay peer that closes (it removes its
//     closer handler) leaves the others' tables at once.
//   - after any query of its own that the peer answered (a table
//     refresh's, GetClosestPeers'), it adds the peer without
//     asking that filter (go-libp2p-kad-dht v0.42.2, query.go: queryPeer
//     calls validPeerFound). A table refresh that hears of a kad-only
//     peer from a table that holds one (an older build's) would put it
//     back. The one check every addition passes is kbucket's diversity
//     filter (RoutingTable.TryAddPeer), whose policy is ours to give
//     (tablePolicy). A query dials and waits for identify (BasicHost's
//     Connect) before it asks, so the protocols are known then as well;
//     a peer whose identify has not completed is refused, and added when
//     it completes (the first way).
//
// One thing of the overlay needs a peer outside it in that table: a
// bootstrap peer that runs only kad-dht with the overlay's prefix (or
// another build) introduces the nodes that dial it to each other only
// through the DHT's refresh, which starts from the table; refused, it
// left two nodes bootstrapped from it alone, each its own superpeer
// (TestKadOnlyBootstrapIntroduces). The peers the operator configured
// (Config.Bootstrap) are therefore admitted whatever they speak: a few,
// chosen, and the lookups and closer answers pass over them all the same
// (lookup.go: they ask and name only peers that speak the closer
// protocol). The public DHT (public.go) is a separate DHT with a table
// of its own. The overlay's own protocols that start late (GossipSub,
// started when a node first serves) play no part: the closer protocol
// is registered before the DHT's (start), so that any identify that shows
// a node's DHT protocol shows its closer protocol too.

// A peer found by a connection joins the table only where its bucket has
// room (hasRoom); a full bucket takes new peers from the answers to the
// node's own queries alone. kad-dht takes a connected peer into a full
// bucket in place of one that joined the same way, but first checks it
// with a FIND_NODE (its lookupCheck: about 2 KB with the answer), for
// every new connection to a peer not in the table. The peers a node
// talks to come and go as the connection managers trim (a superpeer is
// pinged by every peer that holds it among its nearest, more than its
// watermark at 512 in-process nodes): those checks were most of the
// DHT's traffic after convergence, about 100 B/s of an ordinary peer's
// 500 and 1 KB/s of a superpeer's, and they grew with the swarm. A table
// holds dead peers no longer for it: kad-dht's refresh pings the peers
// not heard from and drops those that do not answer, which makes room.

// dhtOptions are the private DHT's filters of its routing table (see
// above).
func (n *Node) dhtOptions() []dht.Option {
	boot := make(map[peer.ID]bool, len(n.cfg.Bootstrap))
	for _, b := range n.cfg.Bootstrap {
		boot[b.ID] = true
	}
	admits := func(p peer.ID) bool { return boot[p] || n.speaksCloser(p) }
	self := kb.ConvertPeerID(n.self)
	return []dht.Option{
		dht.RoutingTableFilter(func(d any, p peer.ID) bool {
			return admits(p) && (boot[p] || hasRoom(d, self, p))
		}),
		dht.RoutingTablePeerDiversityFilter(tablePolicy{admits: admits}),
	}
}

// hasRoom reports whether the routing table of d (a *dht.IpfsDHT) holds
// p already (kad-dht asks again when p's protocols change, and takes out
// a peer refused then), or fewer than a bucket's worth of peers at p's
// common prefix length with self. The last bucket holds every longer
// prefix as well, and counting one length alone admits more there, where
// kad-dht splits the bucket.
func hasRoom(d any, self kb.ID, p peer.ID) bool {
	kd, ok := d.(*dht.IpfsDHT)
	if !ok {
		return true
	}
	rt := kd.RoutingTable()
	if rt.Find(p) != "" {
		return true
	}
	return rt.NPeersForCpl(uint(kb.CommonPrefixLen(self, kb.ConvertPeerID(p)))) < dhtselect.BucketSize
}

// tablePolicy is kbucket's diversity-filter policy that admits a peer to
// the routing table when admits says so (it speaks the overlay's closer
// protocol, or is a bootstrap peer), and has no rule on addresses.
// kbucket's filter groups a peer's addresses by IP and asks Allow once
// per address (and refuses a peer with no address it can parse as IP, a
// DNS one say): PeerAddresses gives it one placeholder address, so that
// Allow is asked once per peer whatever the peer's addresses are.
// Increment and Decrement keep no counts.
type tablePolicy struct {
	admits func(peer.ID) bool
}

var _ peerdiversity.PeerIPGroupFilter = tablePolicy{}

// anyIP is tablePolicy's placeholder address of every peer.
var anyIP = []ma.Multiaddr{ma.StringCast("/ip4/0.0.0.0")}

func (f tablePolicy) Allow(g peerdiversity.PeerGroupInfo) bool { return f.admits(g.Id) }
func (tablePolicy) Increment(peerdiversity.PeerGroupInfo)      {}
func (tablePolicy) Decrement(peerdiversity.PeerGroupInfo)      {}
func (tablePolicy) PeerAddresses(peer.ID) []ma.Multiaddr       { return anyIP }
