package overlay

import (
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
)

// Resource limits. The overlay's stream protocols (closer, token, attach,
// election) are one service of libp2p's resource manager, serviceName,
// with limits on its streams in all and per peer; a stream over them is
// refused (reason "limit": counted, no strike, see wire.go). The limits,
// and the connection manager's watermarks, fit what the node may be: a
// node that may be a superpeer (reachable, or AutoNAT has not said) serves
// a cluster and every lookup that ends at it; a private node never
// does. The other scopes keep go-libp2p's defaults, scaled to the
// machine. The per-peer stream rate (rateLimit) is wire.go's. With a host
// the node does not build (Host, Attach) the host's own manager applies:
// the service limits only when it defines them.
const serviceName = "superpeer"

type roleLimits struct {
	streams, perPeer  int // the service's streams in all, and per peer
	connLow, connHigh int // the connection manager's watermarks
}

var (
	reachableLimits = roleLimits{streams: 4096, perPeer: 64, connLow: 160, connHigh: 192}
	privateLimits   = roleLimits{streams: 512, perPeer: 16, connLow: 32, connHigh: 64}
)

// limitsFor returns the limits for the configured reachability.
func limitsFor(reach string) roleLimits {
	if reach == ReachabilityPrivate {
		return privateLimits
	}
	return reachableLimits
}

// resourceOptions are the resource manager and the connection manager of
// a host the node builds.
func resourceOptions(cfg Config) ([]libp2p.Option, error) {
	l := limitsFor(cfg.Reachability)
	scaling := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&scaling)
	both := func(n int) rcmgr.ResourceLimits {
		return rcmgr.ResourceLimits{Streams: rcmgr.LimitVal(2 * n), StreamsInbound: rcmgr.LimitVal(n), StreamsOutbound: rcmgr.LimitVal(n)}
	}
	partial := rcmgr.PartialLimitConfig{
		Service:      map[string]rcmgr.ResourceLimits{serviceName: both(l.streams)},
		ServicePeer:  map[string]rcmgr.ResourceLimits{serviceName: both(l.perPeer)},
		ProtocolPeer: map[protocol.ID]rcmgr.ResourceLimits{},
	}
	// A stream takes its protocol's scope in libp2p before the handler
	// puts it into the service's. go-libp2p's default per-peer protocol
	// limit (64 inbound plus some scaled to the memory: 75 on a 24 GiB
	// machine) is close to the service's per-peer one, so when a peer's
	// streams came at once, those over it were reset inside libp2p,
	// uncounted (TestStreamLimit's 80 streams: 11 to 14 of the 16 over
	// the limit counted in a few runs of a dozen). With the protocols'
	// limit above the service's, the service's limit refuses, and counts.
	for _, p := range protocolsOf(cfg.Network) {
		partial.ProtocolPeer[p] = both(2 * l.perPeer)
	}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(partial.Build(scaling.AutoScale())))
	if err != nil {
		return nil, fmt.Errorf("overlay: resource manager: %w", err)
	}
	cm, err := connmgr.NewConnManager(l.connLow, l.connHigh, connmgr.WithGracePeriod(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("overlay: connection manager: %w", err)
	}
	return []libp2p.Option{libp2p.ResourceManager(rm), libp2p.ConnectionManager(cm)}, nil
}

// protocolsOf are the overlay's stream protocols on a network: the
// service's.
func protocolsOf(network string) []protocol.ID {
	return []protocol.ID{closerProtocol(network), tokenProtocol(network), attachProtocol(network), electionProtocol(network)}
}

// inService puts a stream of the overlay's protocols into the service's
// scope; its error means the service or the peer is at its limit.
func inService(s network.Stream) error {
	if err := s.Scope().SetService(serviceName); err != nil {
		return fmt.Errorf("%w: %w", errLimit, err)
	}
	return nil
}

// protectTag marks the connections the connection manager must keep: to
// the superpeer, and a superpeer's to its members.
const protectTag = "superpeer-cluster"

// protect keeps the connections of the node's cluster out of the
// connection manager's trimming as the cluster changes.
func (n *Node) protect(prev, next State) {
	cm := n.host.ConnManager()
	keep := map[peer.ID]bool{}
	if next.Superpeer.ID != "" && next.Superpeer.ID != n.self {
		keep[next.Superpeer.ID] = true
	}
	if next.Role == RoleSuperpeer {
		for _, p := range next.Members {
			keep[p] = p != n.self
		}
	}
	old := map[peer.ID]bool{prev.Superpeer.ID: true}
	if prev.Role == RoleSuperpeer {
		for _, p := range prev.Members {
			old[p] = true
		}
	}
	for p := range old {
		if p != "" && !keep[p] {
			cm.Unprotect(p, protectTag)
		}
	}
	for p, k := range keep {
		if k {
			cm.Protect(p, protectTag)
		}
	}
}
