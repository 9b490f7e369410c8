package overlay

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// bootstrapLoop dials the bootstrap peers until at least one is connected,
// then refreshes the routing table; while the node has no overlay peer at
// all, it keeps trying every BootstrapRetry. An unreachable bootstrap peer is
// a warning, never a failure.
func (n *Node) bootstrapLoop(ctx context.Context) {
	defer n.wg.Done()
	if len(n.cfg.Bootstrap) == 0 {
		return
	}
	t := time.NewTicker(n.cfg.BootstrapRetry)
	defer t.Stop()
	for {
		if n.dht.RoutingTable().Size() == 0 {
			n.dialBootstrap(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Node) dialBootstrap(ctx context.Context) {
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
				n.log.Warn("bootstrap peer unreachable, will retry", "bootstrap", b.ID, "addrs", b.Addrs, "retry_in", n.cfg.BootstrapRetry, "err", err)
			}
			continue
		}
		ok++
	}
	if ok > 0 {
		n.log.Info("connected to bootstrap peers", "count", ok)
		n.dht.RefreshRoutingTable()
		n.Reevaluate()
	}
}
