package overlay

import (
	"context"
	"fmt"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"

	"github.com/superpeer/superpeer/overlay/node"
)

// Joining the public libp2p network (Config.Public): besides the overlay's
// private DHT, the node runs a client of the public one (kad-dht's standard
// protocol, through the usual public bootstrap peers), advertises itself
// there under a rendezvous namespace derived from the overlay's network
// name, and connects to the peers it finds under it. Those are the
// overlay's bootstrap peers: the private DHT, the membership topic and the
// lookups then work among them as usual. A public peer that is not in the
// overlay never speaks the overlay's protocols, so it never enters the
// private DHT's routing table or the membership view: it cannot become a
// member or a superpeer.

// RendezvousNamespace is the namespace under which the peers of an overlay
// network advertise themselves on the public DHT.
func RendezvousNamespace(network string) string { return "/superpeer/" + network + "/rendezvous/1" }

// startPublic starts the public DHT client and the rendezvous loop.
func (n *Node) startPublic(ctx context.Context) error {
	var err error
	n.public, err = dht.New(n.host, dht.Mode(dht.ModeClient), dht.BootstrapPeers(n.cfg.PublicBootstrap...))
	if err != nil {
		return fmt.Errorf("overlay: public dht: %w", err)
	}
	n.wg.Add(1)
	go n.rendezvousLoop(ctx)
	return nil
}

// rendezvousLoop keeps the node advertised under its namespace and
// connects to the overlay peers it finds there: every BootstrapRetry while
// it has no overlay peer, every RendezvousInterval once it has.
func (n *Node) rendezvousLoop(ctx context.Context) {
	defer n.wg.Done()
	disc := drouting.NewRoutingDiscovery(n.public)
	ns := RendezvousNamespace(n.cfg.Network)
	var advertiseAt time.Time // when to advertise again; zero: now
	for {
		n.dialPublic(ctx)
		if !time.Now().Before(advertiseAt) {
			actx, cancel := context.WithTimeout(ctx, rendezvousTimeout)
			ttl, err := disc.Advertise(actx, ns)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				n.log.Debug("rendezvous: advertise failed, will retry", "namespace", ns, "err", err)
			} else {
				advertiseAt = time.Now().Add(7 * ttl / 8)
			}
		}
		found := n.findOverlayPeers(ctx, disc, ns)
		switch {
		case found > 0:
			n.feed(node.Rendezvous{Found: true}) // the machine refreshes and re-evaluates
		case !advertiseAt.IsZero():
			// Advertised, and nobody else yet: this node may start the
			// overlay; the next to come will find it.
			n.feed(node.Rendezvous{})
		}
		wait := n.cfg.RendezvousInterval
		if n.dht.RoutingTable().Size() == 0 || advertiseAt.IsZero() {
			wait = n.cfg.BootstrapRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// rendezvousTimeout bounds one advertisement or one search on the public
// DHT.
const rendezvousTimeout = 30 * time.Second

// rendezvousLimit bounds the peers one search asks the public DHT for, and
// rendezvousEnough the overlay peers it connects to: bootstrap peers
// enough for the private DHT to find the rest.
const (
	rendezvousLimit  = 32
	rendezvousEnough = 8
)

// findOverlayPeers connects to the peers advertised under ns and returns
// how many other peers it is connected to among them: it asks for at most
// rendezvousLimit, and stops at rendezvousEnough. They are the overlay's
// bootstrap peers, and a few do; every node searching every interval
// asked for, and dialled, every peer of the overlay, O(N) dials a minute
// each (an interoperability audit).
func (n *Node) findOverlayPeers(ctx context.Context, disc *drouting.RoutingDiscovery, ns string) int {
	fctx, cancel := context.WithTimeout(ctx, rendezvousTimeout)
	defer cancel()
	ch, err := disc.FindPeers(fctx, ns, discovery.Limit(rendezvousLimit))
	if err != nil {
		n.log.Debug("rendezvous: search failed", "namespace", ns, "err", err)
		return 0
	}
	found := 0
	for p := range ch {
		if p.ID == n.self || len(p.Addrs) == 0 {
			continue
		}
		if n.host.Network().Connectedness(p.ID) != network.Connected {
			dctx, dcancel := context.WithTimeout(ctx, n.cfg.QueryTimeout)
			err := n.host.Connect(dctx, p)
			dcancel()
			if err != nil {
				n.log.Debug("rendezvous: peer unreachable", "peer", p.ID, "err", err)
				continue
			}
		}
		if found++; found == rendezvousEnough {
			break // cancel ends the search
		}
	}
	if found > 0 {
		n.log.Info("rendezvous: connected to overlay peers", "namespace", ns, "count", found)
	}
	return found
}

// dialPublic connects to the public bootstrap peers while the public
// routing table is empty. An unreachable one is a warning.
func (n *Node) dialPublic(ctx context.Context) {
	if n.public.RoutingTable().Size() > 0 {
		return
	}
	ok := 0
	for _, b := range n.cfg.PublicBootstrap {
		dctx, cancel := context.WithTimeout(ctx, n.cfg.QueryTimeout)
		err := n.host.Connect(dctx, b)
		cancel()
		if err == nil {
			ok++
		}
	}
	if ok == 0 && ctx.Err() == nil {
		n.log.Warn("no public bootstrap peer reachable, will retry", "peers", len(n.cfg.PublicBootstrap), "retry_in", n.cfg.BootstrapRetry)
		return
	}
	select {
	case <-n.public.RefreshRoutingTable():
	case <-ctx.Done():
	}
}

// defaultPublicBootstrap is the public libp2p network's bootstrap peers.
func defaultPublicBootstrap() []peer.AddrInfo { return dht.GetDefaultBootstrapPeerAddrInfos() }
