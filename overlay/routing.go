package overlay

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/overlay/node"
)

// routeCache keeps the machine's last Routing (routing) while nothing it
// is made of has changed: the connections, the routing table's peers, the
// protocols identify learned (which say who speaks the closer protocol).
//
// Building a Routing walks every connection and every routing-table
// peer, and asks the peerstore for each one's protocols: O(N) work in a
// swarm where a node is connected to most peers. The loop needs one
// before every evaluation and with every change of the membership view,
// and in a CPU profile of a converged 128-node in-process testnet it was
// 29 % of all the CPU (about 1.2 ms per node per second, growing with
// N): at 512 nodes the swarm needed more than the machine's two cores,
// registrations came late, members expired from their superpeers'
// rosters, and the testnet never converged.
//
// gen counts the changes the driver hears of: a connection opened or
// closed (the network's notifiee), identify done or protocols changed
// (routeLoop). The routing table has no change notice of its own that
// the overlay may use (kad-dht owns its PeerAdded and PeerRemoved hooks),
// but it changes with connections and identify, and its size is part of
// the key; what else changes it (a peer evicted for another at the same
// size, the DHT's network-size estimate) shows within maxAge.
type routeCache struct {
	gen atomic.Uint64

	// The loop's only (routing runs on it).
	r      node.Routing
	valid  bool
	keyGen uint64
	keyRT  int
	at     time.Time
	builds uint64 // Routings built (the tests count them)

	// peers is the host's connected peers as of a gen (connectedPeers);
	// any goroutine's.
	peers      atomic.Pointer[peerList]
	peerBuilds atomic.Uint64 // lists built (the tests count them)
}

// peerList is the host's connected peers at a gen of routeCache.
type peerList struct {
	gen   uint64
	peers []peer.ID
}

// connectedPeers returns the peers the host is connected to, from the
// cache while no connection has opened or closed since it was built. The
// caller must not change the slice. The geometric feed takes the list for
// every step (several a second, and each attach request a superpeer
// answers), and on a mocknet host, which walks a map of every
// connection for it, the network's Peers was 13 % of the CPU of a
// 256-node geometric testnet in virtual time. gen is read before the list
// is: a change after that read leaves the list kept under the older gen,
// which the next call no longer takes. The network tells of a closed
// connection after it is gone (mocknet and the swarm notify apart from
// the close), and until then the list still names its peer, as a list
// taken a moment before the close would: a scratch count saw one to two
// such calls a run in an 8-node geometric test.
func (n *Node) connectedPeers() []peer.ID {
	c := &n.route
	gen := c.gen.Load()
	if l := c.peers.Load(); l != nil && l.gen == gen {
		return l.peers
	}
	ps := n.host.Network().Peers()
	c.peers.Store(&peerList{gen: gen, peers: ps})
	c.peerBuilds.Add(1)
	return ps
}

// routeMaxAge bounds how old a cached Routing may be: what the cache's
// key does not see is at most this late.
const routeMaxAge = time.Second

// routing is the routing table's view for the size estimate and the
// identities per address (overlay/node's admit.go). The machine does not
// keep or change it, so the cached value is given again as it is.
func (n *Node) routing() node.Routing {
	c := &n.route
	rt := n.dht.RoutingTable()
	gen, size, now := c.gen.Load(), rt.Size(), time.Now()
	if c.valid && gen == c.keyGen && size == c.keyRT && now.Sub(c.at) < routeMaxAge {
		return c.r
	}
	nw := n.host.Network()
	r := node.Routing{Connected: len(n.connectedPeers()), Addrs: n.connAddrs()}
	for _, p := range rt.ListPeers() {
		r.Peers = append(r.Peers, node.RoutingPeer{ID: p, Connected: nw.Connectedness(p) == network.Connected,
			Closer: n.speaksCloser(p)})
	}
	if s, err := n.dht.NetworkSize(); err == nil {
		r.Kad, r.KadOK = float64(s), true
	}
	c.r, c.valid, c.keyGen, c.keyRT, c.at = r, true, gen, size, now
	c.builds++
	return r
}

// routeLoop counts identify's news for the routing cache until ctx ends.
func (n *Node) routeLoop(ctx context.Context, sub event.Subscription) {
	defer n.wg.Done()
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-sub.Out():
			if !ok {
				return
			}
			n.route.gen.Add(1)
		}
	}
}
