package overlay

import (
	"context"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"

	"github.com/superpeer/superpeer/overlay/node"
)

// links is what the host's connections are, for the machine (LinksDue):
// with Superpeer the connection to sp.
func (n *Node) links(sp peer.ID) node.Links {
	nw := n.host.Network()
	return node.Links{
		Table: n.dht.RoutingTable().Size(), Connected: len(n.connectedPeers()), Bootstrap: n.bootstrapConnected(),
		Superpeer: sp != "" && nw.Connectedness(sp) == network.Connected,
	}
}

// dial dials the bootstrap peers, as the machine asked (Ready.Dial), and
// answers it with Dialled. The machine asks for no other dial until then.
func (n *Node) dial(ctx context.Context) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		reached := n.dialBootstrap(ctx)
		if ctx.Err() == nil {
			n.feed(node.Dialled{Reached: reached})
		}
	}()
}

// refresh refreshes the routing table, as the machine asked
// (Ready.Refresh).
func (n *Node) refresh(ctx context.Context, r node.Refresh) {
	switch r {
	case node.RefreshTable:
		done := n.dht.RefreshRoutingTable()
		if n.awaiting.CompareAndSwap(false, true) {
			n.wg.Add(1)
			go n.awaitRefresh(ctx, done)
		}
	case node.RefreshAll:
		_ = n.dht.ForceRefresh() // every bucket, not only the stale ones; its outcome is the table's
	}
}

// dialBootstrap dials the bootstrap peers not connected, and returns how
// many are connected and, once identified, of this network (foreign).
func (n *Node) dialBootstrap(ctx context.Context) int {
	ok := 0
	for _, b := range n.cfg.Bootstrap {
		if b.ID == n.self {
			continue
		}
		if n.host.Network().Connectedness(b.ID) != network.Connected {
			dctx, cancel := context.WithTimeout(ctx, n.cfg.QueryTimeout)
			err := n.host.Connect(dctx, b)
			if err == nil {
				n.identified(dctx, b.ID)
			}
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					n.log.Warn("bootstrap peer unreachable, will retry", "bootstrap", b.ID, "addrs", b.Addrs, "err", err) // when again is the machine's redial pacer's to say
				}
				continue
			}
		}
		if n.foreign(b.ID) {
			if _, warned := n.foreignBoot.LoadOrStore(b.ID, true); !warned {
				n.log.Warn("bootstrap peer is no node of this network: it speaks neither its DHT nor its closer protocol (a public IPFS node, or a node of another --network?); this node will not find the swarm through it",
					"bootstrap", b.ID, "network", n.cfg.Network, "want", dhtProtocol(n.cfg.Network))
			}
			continue
		}
		ok++
	}
	if ok > 0 {
		n.log.Info("connected to bootstrap peers", "count", ok)
	}
	return ok
}

// identified waits, until ctx ends, for identify to finish on the
// connection to p, so that p's protocols are known (foreign).
func (n *Node) identified(ctx context.Context, p peer.ID) {
	h, ok := n.host.(interface{ IDService() identify.IDService })
	conns := n.host.Network().ConnsToPeer(p)
	if !ok || h.IDService() == nil || len(conns) == 0 {
		return
	}
	select {
	case <-h.IDService().IdentifyWait(conns[0]):
	case <-ctx.Done():
	}
}

// foreign reports whether p, identified, speaks neither the overlay's DHT
// nor its closer protocol: no node of this network, though it may be a
// libp2p peer like any other (a public IPFS node, a node of another
// network name). Two nodes given such a bootstrap peer connected to it,
// found their private routing tables empty, and each served the whole key
// space alone, without a word (an interoperability audit). A peer not
// identified yet (no protocols known) is not foreign.
func (n *Node) foreign(p peer.ID) bool {
	ps, err := n.host.Peerstore().GetProtocols(p)
	if err != nil || len(ps) == 0 {
		return false
	}
	return !slices.Contains(ps, dhtProtocol(n.cfg.Network)) && !slices.Contains(ps, n.closerProto)
}

// bootstrapConnected reports whether a bootstrap peer other than this node
// is connected and not foreign (true when it has no other bootstrap peer,
// or none).
func (n *Node) bootstrapConnected() bool {
	others := false
	for _, b := range n.cfg.Bootstrap {
		if b.ID == n.self {
			continue
		}
		if n.host.Network().Connectedness(b.ID) == network.Connected && !n.foreign(b.ID) {
			return true
		}
		others = true
	}
	return !others
}

// awaitRefresh tells the machine (Refreshed) once a routing-table refresh
// has completed with a table that is not empty: from then on the size
// estimate is worth a role (see mayJoin). A refresh that starts before
// kad-dht has added the bootstrap peer (it waits for identify) finds
// nothing and ends at once; it is repeated every refreshRetry until ctx
// ends.
func (n *Node) awaitRefresh(ctx context.Context, done <-chan error) {
	defer n.wg.Done()
	defer n.awaiting.Store(false)
	for {
		select {
		case <-done: // an error too: the table holds what it found
		case <-ctx.Done():
			return
		}
		if n.dht.RoutingTable().Size() > 0 {
			n.feed(node.Refreshed{})
			return
		}
		select {
		case <-time.After(refreshRetry):
		case <-ctx.Done():
			return
		}
		done = n.dht.RefreshRoutingTable()
	}
}

// refreshRetry is the pause before a routing-table refresh that found an
// empty table is repeated.
const refreshRetry = 250 * time.Millisecond
