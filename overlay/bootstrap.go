package overlay

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/overlay/node"
)

// links is what the host's connections are, for the machine (LinksDue):
// with Superpeer the connection to sp.
func (n *Node) links(sp peer.ID) node.Links {
	nw := n.host.Network()
	return node.Links{
		Table: n.dht.RoutingTable().Size(), Connected: len(nw.Peers()), Bootstrap: n.bootstrapConnected(),
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
// many are connected.
func (n *Node) dialBootstrap(ctx context.Context) int {
	ok := 0
	for _, b := range n.cfg.Bootstrap {
		if b.ID == n.self {
			continue
		}
		if n.host.Network().Connectedness(b.ID) == network.Connected {
			ok++
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, n.cfg.QueryTimeout)
		err := n.host.Connect(dctx, b)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("bootstrap peer unreachable, will retry", "bootstrap", b.ID, "addrs", b.Addrs, "err", err) // when again is the machine's redial pacer's to say
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

// bootstrapConnected reports whether a bootstrap peer other than this node
// is connected (true when it has no other bootstrap peer, or none).
func (n *Node) bootstrapConnected() bool {
	others := false
	for _, b := range n.cfg.Bootstrap {
		if b.ID == n.self {
			continue
		}
		if n.host.Network().Connectedness(b.ID) == network.Connected {
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
