package overlay

import (
	"context"
	"errors"
	"fmt"
	ma "github.com/multiformats/go-multiaddr"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pubsubpb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"

	"github.com/superpeer/superpeer/gossip"
)

// Resource limits. The node has a memory budget (Config.MemoryBudget,
// 256 MiB by default) that no peer, protocol or flood may push it past,
// and every limit of libp2p's resource manager derives from it, not from
// the machine's memory (go-libp2p's default scales to the machine: 3 GiB
// to the system scope on a 24 GiB one). The budget B is split:
//
//   - unaccounted, 64 MiB: the Go runtime, the routing table, the peer
//     store, GossipSub's state, the goroutines and structures of the
//     connections and streams (an idle node takes about 40 MiB), and the
//     decoded election messages waiting for the loop (at most
//     maxInboxBytes, 8 MiB: elect.go);
//   - the rest, B - 64 MiB, is the resource manager's system memory: what
//     it accounts, which is every stream's receive window (yamux reserves
//     256 KiB for each stream as it opens, the most a peer may send it
//     unread) and every buffer of a message the node reads (the overlay's
//     frames, the DHT's and GossipSub's messages: each reserved in its
//     stream's scope before it is allocated, below). One peer may take
//     B/8 of it (64 streams at the least budget), the transient scope
//     (connections and streams not yet named) B/16; the messages of the
//     overlay's protocols (the service) B/8, the DHT's B/8, GossipSub's
//     B/8, one peer B/64 of each. What would go past a limit is refused:
//     a stream does not open, a message is refused (reason "limit":
//     counted, no strike).
//
// Connections in all are one per 256 KiB of the budget, half of them
// inbound (1024 and 512 by default), inbound streams one per 64 KiB; the
// memory above holds the streams to fewer: 768 in all by default.
//
// Each of the three protocols that strangers speak reads messages of a
// bounded size, refused before allocation and a strike: the overlay's
// frames (maxFrame, 64 KiB, the election's included: maxElectionFrame),
// the DHT's (maxDHTMessage, 64 KiB: kad-dht allocates up to 4 MiB for a
// message before reading it), GossipSub's RPCs (maxPubSubMessage). A
// message that has begun must end within frameDeadline, so a stalled
// stream holds its buffer that long at most. GossipSub tracks only the
// overlay's topics and refuses an RPC of more than maxSubscriptions
// subscriptions (a strike; see pubsubOptions).
//
// Connections per IP address keep go-libp2p's limits (8 at once from an
// IPv4 address or IPv6 /56, 0.2 new ones a second after a burst of 16),
// which exempt loopback, so that testnets of many nodes on 127.0.0.1 keep
// working: a per-address limit cannot tell a testnet's honest nodes from
// one attacker's identities there. Fresh identities from one loopback or
// other exempt address are bounded instead by the limits in all (streams,
// memory), and a banned one's address by banGate's penalty (private.go).
//
// The overlay's stream protocols (closer, token, attach, election) are
// one service of the resource manager, serviceName, with limits on its
// streams in all and per peer; a stream over them is refused (reason
// "limit"). The stream limits, and the connection manager's watermarks,
// fit what the node may be: a node that may be a superpeer (reachable, or
// AutoNAT has not said) serves a cluster and every lookup that ends at
// it; a private node never does. The budget caps the stream limits too:
// the service's streams in all to the windows the system's memory holds,
// a peer's to half of what a peer's memory holds (64 by default). The per-peer stream rate (rateLimit) is
// wire.go's. With a host the node does not build (Host, Attach) the
// host's own manager applies: the service limits only when it defines
// them, and the reservations count against whatever it defines.
const serviceName = "superpeer"

// The memory budget's bounds and default.
const (
	DefaultMemoryBudget = 256 << 20
	MinMemoryBudget     = 128 << 20
	MaxMemoryBudget     = 1 << 40
	unaccounted         = 64 << 20
	window              = 256 << 10 // the memory yamux reserves for a stream
)

// Bounds on the messages of the protocols the node does not write.
const (
	maxDHTMessage    = 64 << 10 // a FIND_NODE answer of 20 peers is a few KiB; a record at most 10 KiB
	maxPubSubMessage = 64 << 10 // the overlay's messages are at most 8 KiB; GossipSub splits larger RPCs
	maxSubscriptions = 64       // in one RPC: a node subscribes to two of the overlay's topics at most
	frameDeadline    = 10 * time.Second
)

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

// dhtProtocol is the overlay's DHT protocol on a network.
func dhtProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/kad/1.0.0")
}

// pubsubProtocols are GossipSub's stream protocols.
var pubsubProtocols = pubsub.GossipSubDefaultProtocols

// budgetLimits are the resource manager's limits for a memory budget of
// b bytes with the role limits l (see the split above).
func budgetLimits(b int64, l roleLimits, network string) rcmgr.PartialLimitConfig {
	conns, streamsIn := int(b/(256<<10)), int(b/(64<<10))
	// The service's streams fit the memory their windows take: in all
	// within the system's, and a peer's within half of a peer's.
	l.streams = min(l.streams, int((b-unaccounted)/window))
	l.perPeer = min(l.perPeer, int(b/8/window/2))
	mem := func(m int64, streams, perPeerIn int) rcmgr.ResourceLimits {
		r := rcmgr.ResourceLimits{Memory: rcmgr.LimitVal64(m)}
		if streams > 0 {
			r.Streams, r.StreamsInbound, r.StreamsOutbound = rcmgr.LimitVal(2*streams), rcmgr.LimitVal(streams), rcmgr.LimitVal(streams)
		}
		if perPeerIn > 0 {
			r.StreamsInbound = rcmgr.LimitVal(perPeerIn)
		}
		return r
	}
	partial := rcmgr.PartialLimitConfig{
		System: rcmgr.ResourceLimits{
			Memory: rcmgr.LimitVal64(b - unaccounted), Conns: rcmgr.LimitVal(conns), ConnsInbound: rcmgr.LimitVal(conns / 2),
			ConnsOutbound: rcmgr.LimitVal(conns), Streams: rcmgr.LimitVal(2 * streamsIn), StreamsInbound: rcmgr.LimitVal(streamsIn),
			StreamsOutbound: rcmgr.LimitVal(streamsIn),
		},
		Transient:    rcmgr.ResourceLimits{Memory: rcmgr.LimitVal64(b / 16)},
		PeerDefault:  rcmgr.ResourceLimits{Memory: rcmgr.LimitVal64(b / 8)},
		Service:      map[string]rcmgr.ResourceLimits{serviceName: mem(b/8, l.streams, 0)},
		ServicePeer:  map[string]rcmgr.ResourceLimits{serviceName: mem(b/64, l.perPeer, 0)},
		Protocol:     map[protocol.ID]rcmgr.ResourceLimits{},
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
	for _, p := range protocolsOf(network) {
		partial.ProtocolPeer[p] = mem(0, 2*l.perPeer, 0)
	}
	// The DHT and GossipSub: B/8 each, B/64 per peer; a peer uses one
	// stream of each at a time (kad-dht reuses its stream to a peer,
	// GossipSub keeps one), so 16 inbound per peer leave room.
	for _, p := range append([]protocol.ID{dhtProtocol(network)}, pubsubProtocols...) {
		partial.Protocol[p] = mem(b/8, int(b/(256<<10)), 0)
		partial.ProtocolPeer[p] = mem(b/64, 0, 16)
	}
	return partial
}

// resourceOptions are the resource manager and the connection manager of
// a host the node builds.
func resourceOptions(cfg Config, g *guard) ([]libp2p.Option, error) {
	l := limitsFor(cfg.Reachability)
	scaling := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&scaling)
	partial := budgetLimits(cfg.MemoryBudget, l, cfg.Network)
	// The defaults of the scopes the budget does not name (identify, ping,
	// the other protocols' stream counts) are go-libp2p's for a machine of
	// the budget's size, not of this one's.
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(partial.Build(scaling.Scale(cfg.MemoryBudget, fdLimit))))
	if err != nil {
		return nil, fmt.Errorf("overlay: resource manager: %w", err)
	}
	cm, err := NewConnManager(cfg.Reachability)
	if err != nil {
		return nil, err
	}
	return []libp2p.Option{libp2p.ResourceManager(penaltyRM{rm, g}), libp2p.ConnectionManager(cm)}, nil
}

// NewConnManager returns the connection manager a node builds for its own
// host, with the watermarks of its reachability (160 to 192 connections,
// 32 to 64 for a private node; a minute's grace for a new connection),
// for a host built elsewhere and given with WithHost: the in-process
// testnet's mocknet hosts have none of their own, and without one every
// node stayed connected to every peer it had ever dialled (at 64 nodes,
// 61 connections each, and the process's memory grew as n²). Its
// Notifee must be registered on the host's network, and the host's
// ConnManager must return it, as libp2p's own hosts do.
func NewConnManager(reachability string) (*connmgr.BasicConnMgr, error) {
	l := limitsFor(reachability)
	cm, err := connmgr.NewConnManager(l.connLow, l.connHigh, connmgr.WithGracePeriod(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("overlay: connection manager: %w", err)
	}
	return cm, nil
}

// penaltyRM refuses an inbound connection from an address under a ban's
// penalty (banGate) as the resource manager: QUIC asks it before the
// handshake (go-libp2p's ConnContext), where the connection gater's
// InterceptAccept comes only after it, so that a banned peer redialling
// over QUIC made the node do a handshake each time (0.5 cores on a node
// of the live attack suite's banned-redial, 22 times idle). TCP asks the
// gater first, and this second.
type penaltyRM struct {
	network.ResourceManager
	g *guard
}

func (r penaltyRM) OpenConnection(dir network.Direction, usefd bool, endpoint ma.Multiaddr) (network.ConnManagementScope, error) {
	if dir == network.DirInbound && !r.g.accept(endpoint) {
		return nil, errPenalised
	}
	return r.ResourceManager.OpenConnection(dir, usefd, endpoint)
}

// errPenalised: an inbound connection from an address under a penalty.
var errPenalised = errors.New("overlay: the address of a banned peer, under its penalty")

// fdLimit is the file descriptors the resource manager may give out: the
// scaled limits take a fraction of it.
const fdLimit = 4096

// protocolsOf are the overlay's stream protocols on a network: the
// service's.
func protocolsOf(network string) []protocol.ID {
	return []protocol.ID{closerProtocol(network), tokenProtocol(network), attachProtocol(network), electionProtocol(network),
		vouchProtocol(network), registerProtocol(network)}
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
// the node's cluster, its superpeer and members.
const protectTag = "superpeer-cluster"

// protect keeps the connections of the node's cluster out of the
// connection manager's trimming as the cluster changes: the superpeer and
// every member, whatever the node's role. A member counts for the machine
// only while the node is connected to it (admit.go), the elections talk
// to every member, and the pings measure them (rtt.go); a trimmed
// cluster-mate would leave the view until the machine asked to reconnect.
// The protected set is the cluster, so it follows the cluster's size, not
// the swarm's.
func (n *Node) protect(prev, next State) {
	cm := n.host.ConnManager()
	keep := map[peer.ID]bool{}
	if next.Superpeer.ID != "" && next.Superpeer.ID != n.self {
		keep[next.Superpeer.ID] = true
	}
	for _, p := range next.Members {
		keep[p] = p != n.self
	}
	old := map[peer.ID]bool{prev.Superpeer.ID: true}
	for _, p := range prev.Members {
		old[p] = true
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

// framedHost is the host as the DHT and GossipSub see it: the streams of
// their handlers and those they open read varint-framed messages (both
// protocols frame so), and each message is checked by framedStream.
type framedHost struct {
	host.Host
	n    *Node
	name string // "dht" or "pubsub", for the counters
	max  int
}

func (h framedHost) SetStreamHandler(p protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(p, func(s network.Stream) { handler(h.wrap(s)) })
}

func (h framedHost) SetStreamHandlerMatch(p protocol.ID, match func(protocol.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(p, match, func(s network.Stream) { handler(h.wrap(s)) })
}

// NewStream opens a stream as the host does. For GossipSub it also mends a
// race in go-libp2p-pubsub (v0.19): a router that starts while connected
// to a peer tries a stream to it at once. If the peer's router starts
// during that attempt (both nodes promoted together; the attempt takes a
// round trip), the attempt fails, since the peer had no handler when it
// was asked, while the peer's identify push, which says it now speaks
// GossipSub, is passed over because an attempt is under way; the failed
// attempt is then forgotten, and the two routers exchange nothing for as
// long as the connection lasts. So a failed attempt waits, while the peer
// stays connected and for pubsubRetryWait at most, until the peerstore
// says the peer speaks one of the protocols, and tries once more.
func (h framedHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil && h.name == "pubsub" && h.awaitProtocol(ctx, p, pids) {
		s, err = h.Host.NewStream(ctx, p, pids...)
	}
	if err != nil {
		return nil, err
	}
	return h.wrap(s), nil
}

// pubsubRetryWait bounds how long a failed GossipSub stream waits for its
// peer to speak the protocol (framedHost.NewStream). An identify push takes
// a round trip; a peer that runs no GossipSub (an ordinary peer of the DHT
// strategy) costs a router's goroutine this long, once per connection.
const pubsubRetryWait = 5 * time.Second

// awaitProtocol reports whether p, still connected, is known to speak one
// of pids within pubsubRetryWait; it looks every 100 ms.
func (h framedHost) awaitProtocol(ctx context.Context, p peer.ID, pids []protocol.ID) bool {
	deadline := time.NewTimer(pubsubRetryWait)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if h.Network().Connectedness(p) != network.Connected {
			return false
		}
		if ok, err := h.Peerstore().SupportsProtocols(p, pids...); err == nil && len(ok) > 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

func (h framedHost) wrap(s network.Stream) network.Stream {
	return &framedStream{Stream: s, h: h}
}

// framedStream checks the messages read from a stream of uvarint-framed
// messages as they pass: a length above the maximum is refused before
// the reader (msgio, which allocates the length it reads) sees it, and is
// a strike against the sender; the message's buffer is reserved in the
// stream's resource scope before the reader allocates it (a reservation
// over the limits is refused: "limit"); and a message that has begun
// must be read within frameDeadline. A refusal fails the read, and the
// protocol resets the stream.
type framedStream struct {
	network.Stream
	h         framedHost
	mu        sync.Mutex
	length    uint64 // the length being read, shift its bits so far
	shift     uint
	remaining uint64 // the bytes of the current message still to come
	reserved  int
	err       error
}

func (s *framedStream) Read(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.Stream.Read(b)
	for i := 0; i < n; i++ {
		if s.remaining > 0 {
			k := min(s.remaining, uint64(n-i))
			s.remaining -= k
			i += int(k) - 1
			if s.remaining == 0 {
				s.done()
			}
			continue
		}
		c := b[i]
		if s.shift == 0 {
			_ = s.Stream.SetReadDeadline(time.Now().Add(frameDeadline))
		}
		if s.shift >= 63 {
			return 0, s.refuse(fmt.Errorf("%w: length overflows", errWire))
		}
		s.length |= uint64(c&0x7f) << s.shift
		s.shift += 7
		if c >= 0x80 {
			continue
		}
		l := s.length
		s.length, s.shift = 0, 0
		if l > uint64(s.h.max) {
			return 0, s.refuse(fmt.Errorf("%w: %s message of %d bytes, limit %d", errFrameSize, s.h.name, l, s.h.max))
		}
		if l == 0 {
			s.done()
			continue
		}
		if err := s.Stream.Scope().ReserveMemory(int(l), network.ReservationPriorityAlways); err != nil {
			return 0, s.refuse(fmt.Errorf("%w: %w", errLimit, err))
		}
		s.reserved, s.remaining = int(l), l
	}
	return n, err
}

// done ends a message: its reservation is released and the deadline
// lifted (the protocols set none of their own on the streams they read).
func (s *framedStream) done() {
	if s.reserved > 0 {
		s.Stream.Scope().ReleaseMemory(s.reserved)
		s.reserved = 0
	}
	_ = s.Stream.SetReadDeadline(time.Time{})
}

func (s *framedStream) refuse(err error) error {
	s.err = err
	s.h.n.guard.refuse(s.h.n, s.h.name, s.Stream.Conn().RemotePeer(), err)
	return err
}

// pubsubOptions bound what GossipSub keeps and reads for others, on the
// router the node runs (not on an application's, WithPubSub): it tracks
// subscriptions to the overlay's topics only (with the geometric strategy,
// the cluster topics of the network's S tokens among them), refuses an RPC
// of more than maxSubscriptions subscriptions (a strike: a node subscribes
// to two of the overlay's topics at most), and reads RPCs of
// maxPubSubMessage at most (and splits its own to fit).
func (n *Node) pubsubOptions() []pubsub.Option {
	f := &topicFilter{n: n, network: n.cfg.Network, allow: map[string]bool{
		gossip.MembershipTopic(n.cfg.Network): true, gossip.TokenTopic(n.cfg.Network): true,
		gossip.BackboneTopic(n.cfg.Network): true,
	}}
	if n.cfg.Strategy == StrategyGeometric {
		f.clusters = n.cfg.Target.Superpeers
	}
	return []pubsub.Option{pubsub.WithMaxMessageSize(maxPubSubMessage), pubsub.WithSubscriptionFilter(f)}
}

// topicFilter is GossipSub's subscription filter of pubsubOptions: the
// topics allowed, and the cluster topics of tokens below clusters.
type topicFilter struct {
	n        *Node
	network  string
	allow    map[string]bool
	clusters int
}

var errSubscriptions = fmt.Errorf("%w: too many subscriptions", errWire)

func (f *topicFilter) CanSubscribe(topic string) bool {
	if f.allow[topic] {
		return true
	}
	num, ok := gossip.ClusterTopicToken(f.network, topic)
	return ok && num < f.clusters
}

func (f *topicFilter) FilterIncomingSubscriptions(from peer.ID, subs []*pubsubpb.RPC_SubOpts) ([]*pubsubpb.RPC_SubOpts, error) {
	if len(subs) > maxSubscriptions {
		err := fmt.Errorf("%w: %d in one RPC, limit %d", errSubscriptions, len(subs), maxSubscriptions)
		f.n.guard.refuse(f.n, "pubsub", from, err)
		return nil, err
	}
	return pubsub.FilterSubscriptions(subs, f.CanSubscribe), nil
}
