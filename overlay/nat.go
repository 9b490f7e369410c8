package overlay

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/overlay/node"
)

// NAT awareness. Only a peer that others can dial may be a superpeer, as a
// Gnutella ultrapeer must accept incoming connections:
//
//   - Reachability: configured (Config.Reachability public or private), or
//     AutoNAT's verdict (auto: the node's host runs AutoNAT's service for
//     the others, and its client asks them to dial it back). A node
//     counts as reachable until AutoNAT finds it private: AutoNAT does not
//     dial back private or loopback addresses, so on a LAN or a local
//     testnet it finds nothing, and such a network needs superpeers too.
//   - A private node runs the overlay's DHT as a client, so no other
//     node's routing table holds it and no lookup ends at it; its own
//     lookup skips itself. Its announcement says it is private: elections
//     rank it below every reachable member (it wins only a cluster with
//     no reachable member), and the geometric strategy neither places nor
//     passes a token to it.
//   - A superpeer that is reachable runs libp2p's circuit relay (v2); a
//     private node reserves a slot at its superpeer's relay and announces
//     the circuit addresses, through which other peers reach it. Hole
//     punching (DCUtR) then upgrades a relayed connection to a direct one
//     where the NATs allow.

// The reachability settings of Config.Reachability.
const (
	ReachabilityAuto    = "auto"
	ReachabilityPublic  = "public"
	ReachabilityPrivate = "private"
)

var reachabilities = []string{ReachabilityAuto, ReachabilityPublic, ReachabilityPrivate}

// natOptions are the host options of NAT awareness, for a host the node
// builds.
func natOptions(cfg Config) []libp2p.Option {
	opts := []libp2p.Option{libp2p.EnableHolePunching()}
	switch cfg.Reachability {
	case ReachabilityPublic:
		opts = append(opts, libp2p.ForceReachabilityPublic())
	case ReachabilityPrivate:
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	default:
		opts = append(opts, libp2p.EnableNATService())
	}
	return opts
}

// dhtMode is the overlay DHT's mode for the configured reachability: with
// auto, kad-dht follows AutoNAT's verdict and serves while it has none.
func dhtMode(r string) dht.ModeOpt {
	switch r {
	case ReachabilityPublic:
		return dht.ModeServer
	case ReachabilityPrivate:
		return dht.ModeClient
	}
	return dht.ModeAutoServer
}

// Private reports whether the node counts as unreachable: configured so,
// or found so by AutoNAT (see Config.Reachability).
func (n *Node) Private() bool {
	switch n.cfg.Reachability {
	case ReachabilityPublic:
		return false
	case ReachabilityPrivate:
		return true
	}
	return n.nat.private.Load()
}

// natState is the node's part of NAT awareness: its relay service while
// it is a reachable superpeer, and its reservation at its superpeer's
// relay while it is private.
type natState struct {
	private atomic.Bool // AutoNAT's verdict (Config.Reachability auto)
	mu      sync.Mutex
	service *relay.Relay   // running while a reachable superpeer
	relay   peer.ID        // where this node holds a reservation
	renew   time.Time      // when to renew it: half its time
	circuit []ma.Multiaddr // the addresses through that relay
}

// natLoop follows AutoNAT's verdicts and the node's role: it starts and
// stops the relay service and keeps the reservation at the superpeer's
// relay, checking every ReevaluateInterval and at once on a change.
func (n *Node) natLoop(ctx context.Context, sub event.Subscription) {
	defer n.wg.Done()
	defer sub.Close()
	defer n.stopRelay()
	t := time.NewTicker(n.cfg.ReevaluateInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sub.Out():
			if !ok {
				return
			}
			if r, ok := e.(event.EvtLocalReachabilityChanged); ok {
				private := r.Reachability == network.ReachabilityPrivate
				if n.nat.private.Load() != private {
					n.nat.private.Store(private)
					n.log.Info("reachability", "autonat", r.Reachability)
					n.feed(node.Reachability{Private: private})
				}
			}
		case <-t.C:
		}
		st := n.State()
		if st.Role == RoleSuperpeer && !n.Private() {
			n.startRelay()
		} else {
			n.stopRelay()
		}
		if n.Private() {
			n.reserve(ctx, st.Superpeer)
		}
	}
}

func (n *Node) startRelay() {
	n.nat.mu.Lock()
	defer n.nat.mu.Unlock()
	if n.nat.service != nil {
		return
	}
	r, err := relay.New(n.host, relay.WithACL(overlayOnly{n}))
	if err != nil {
		n.log.Warn("relay service", "err", err)
		return
	}
	n.nat.service = r
	n.log.Info("relay service started")
}

// overlayOnly is the relay's ACL: reservations for the overlay's peers
// alone (those whose protocols, as identify reported them, include the
// overlay's closer protocol), so that the public network's peers do not
// take the reservations the cluster's private members need (128, 8 an IP:
// an interoperability audit found the relay open to every public peer).
// Anyone may connect through the relay to a peer that holds a
// reservation, as the private member's announced circuit address means
// (TestPrivateNeverSuperpeer dials one from a plain host). A peer can
// claim a protocol it does not serve: this keeps out the public network
// at large, not a determined stranger, whom the relay's own limits bound.
type overlayOnly struct{ n *Node }

// AllowReserve refuses a peer identified as foreign; one whose identify has
// not completed yet is let in, since a private member may ask as soon as
// its own identify of the relay has finished, and a refusal puts the relay
// on the member's backoff (review).
func (a overlayOnly) AllowReserve(p peer.ID, _ ma.Multiaddr) bool { return !a.n.foreign(p) }

func (overlayOnly) AllowConnect(peer.ID, ma.Multiaddr, peer.ID) bool { return true }

func (n *Node) stopRelay() {
	n.nat.mu.Lock()
	defer n.nat.mu.Unlock()
	if n.nat.service == nil {
		return
	}
	_ = n.nat.service.Close()
	n.nat.service = nil
	n.log.Info("relay service stopped")
}

// reserve holds a reservation at sp's relay, renewing it when half its
// time is gone, and re-announces when the circuit addresses change.
func (n *Node) reserve(ctx context.Context, sp peer.AddrInfo) {
	if sp.ID == "" || sp.ID == n.self {
		return
	}
	n.nat.mu.Lock()
	fresh := n.nat.relay == sp.ID && time.Now().Before(n.nat.renew)
	n.nat.mu.Unlock()
	if fresh {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	rsvp, err := client.Reserve(ctx, n.host, sp)
	if err != nil {
		n.log.Debug("relay reservation", "relay", sp.ID, "err", err)
		return
	}
	var circuit []ma.Multiaddr
	for _, a := range sp.Addrs {
		if c, err := ma.NewMultiaddr("/p2p/" + sp.ID.String() + "/p2p-circuit"); err == nil {
			circuit = append(circuit, a.Encapsulate(c))
		}
	}
	n.nat.mu.Lock()
	changed := n.nat.relay != sp.ID || !slices.EqualFunc(circuit, n.nat.circuit, ma.Multiaddr.Equal)
	now := time.Now()
	n.nat.relay, n.nat.renew, n.nat.circuit = sp.ID, now.Add(rsvp.Expiration.Sub(now)/2), circuit
	n.nat.mu.Unlock()
	if changed {
		n.log.Info("relay reservation", "relay", sp.ID, "expires", rsvp.Expiration)
		n.Reevaluate() // announce the circuit addresses
	}
}

// addrs are the addresses the node announces: its host's, and while it is
// private, those through its superpeer's relay.
func (n *Node) addrs() []ma.Multiaddr {
	out := n.host.Addrs()
	if !n.Private() {
		return out
	}
	n.nat.mu.Lock()
	defer n.nat.mu.Unlock()
	return append(out, n.nat.circuit...)
}
