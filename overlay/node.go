package overlay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
)

// State is a node's view of the overlay at one moment.
type State struct {
	Self peer.ID
	Role Role
	// S and K are the superpeer target and the reserved bits derived from
	// the size estimate.
	S, K       int
	ClusterKey dhtselect.Key
	// Prefix is the cluster's k-bit prefix, its human name.
	Prefix string
	// Superpeer is the cluster's superpeer with its addresses (this node
	// itself when it is the superpeer). Empty until the first evaluation.
	Superpeer peer.AddrInfo
	// Members are the peers of the cluster this node knows of from the
	// membership topic, itself included, sorted by key (the superpeer first
	// once the views have converged).
	Members []peer.ID
	// Size is the network-size estimate the target was computed from.
	Size dhtselect.Estimate
	// Evaluations counts completed re-evaluations, Lookups the lookups of
	// the cluster key among them, and Queries the lookup queries sent to
	// other peers.
	Evaluations, Lookups, Queries uint64
	// Coord is the node's network coordinate (geometric strategy only).
	Coord *coordinate.Coordinate
	// Token is the number of the token the node holds, or -1 (geometric
	// strategy only; 0 with the DHT strategy).
	Token int
}

// Node is one overlay peer. Its methods are safe for concurrent use.
type Node struct {
	cfg        Config
	log        *slog.Logger
	host       host.Host
	dht        *dht.IpfsDHT
	ps         *pubsub.PubSub
	members    *gossip.Membership
	nat        natState
	guard      guard    // the ban list and the refused messages' counters (wire.go)
	geo        *geo     // nil with the DHT strategy
	elect      *elector // nil without Config.Election
	lastLookup peer.ID  // the last lookup's answer; only the run loop uses it
	// remembered holds, with Config.Quorum, when each peer was last in the
	// membership view; only the run loop uses it (see configured).
	remembered map[peer.ID]time.Time
	// joined and contact (first connection to another peer) gate the
	// first evaluation; only the run loop uses them (see mayJoin).
	joined      bool
	contact     time.Time
	self        peer.ID
	selfKey     dhtselect.Key
	closerProto protocol.ID

	emitRole, emitSuperpeer, emitCluster event.Emitter
	emitElected, emitLost                event.Emitter

	kick     chan struct{}
	cancel   context.CancelFunc // stops the node's loops
	cancelPS context.CancelFunc // stops GossipSub, after the topic is left; nil when it is the application's
	attached bool               // the host is the application's (Attach): Close leaves it open
	public   *dht.IpfsDHT       // the public DHT's client (Config.Public), or nil
	// rendezvous is the state of the rendezvous search (Config.Public):
	// rendezvousPending, rendezvousAlone or rendezvousReached.
	rendezvous atomic.Int32
	wg         sync.WaitGroup
	closed     atomic.Bool
	queries    atomic.Uint64
	lookups    atomic.Uint64
	// refreshed is set when a routing-table refresh after reaching a
	// bootstrap peer has completed (see mayJoin).
	refreshed atomic.Bool

	mu    sync.RWMutex
	state State
}

// New starts a node: it builds (or adopts) the host, starts the DHT in server
// mode with the overlay's private protocol prefix, joins the membership topic
// on GossipSub, dials the bootstrap peers (retrying while none answers), and
// begins evaluating its role. ctx bounds only the start-up; Close stops the
// node.
func New(ctx context.Context, opts ...Option) (*Node, error) {
	return newNode(ctx, false, opts...)
}

// Attach starts a node on h, a host the application already runs: the
// node adds its DHT (with the overlay's own protocol prefix, apart from any
// other DHT on h), its topics and its protocols to h, and its Close removes
// them and leaves h open. Options are New's, but those that build a host
// (listen addresses, identity, gater, pre-shared key, allowlist) do not
// apply: h has them already. The node starts its own GossipSub on h unless
// WithPubSub gives it the application's: a host carries one GossipSub
// router, so an application that runs one must share it.
func Attach(ctx context.Context, h host.Host, opts ...Option) (*Node, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: Attach needs a host", ErrConfig)
	}
	return newNode(ctx, true, append(opts, WithHost(h))...)
}

func newNode(ctx context.Context, attached bool, opts ...Option) (*Node, error) {
	cfg := DefaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	cfg.privateListen()
	if cfg.Public && len(cfg.PublicBootstrap) == 0 {
		cfg.PublicBootstrap = defaultPublicBootstrap()
	}
	if cfg.Geometric.Dwell == 0 {
		cfg.Geometric.Dwell = 5 * cfg.TokenInterval
	}
	if cfg.Geometric.Margin == 0 {
		cfg.Geometric.Margin = liveMargin
	}
	if cfg.Geometric.MinHold == 0 {
		cfg.Geometric.MinHold = snapshotTicks * cfg.TokenInterval
	}
	if cfg.Geometric.Cooling == 0 {
		cfg.Geometric.Cooling = liveCooling
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, kick: make(chan struct{}, 1), closerProto: closerProtocol(cfg.Network), attached: attached}
	h := cfg.Host
	if h == nil {
		var err error
		if h, err = newHost(cfg); err != nil {
			return nil, err
		}
	}
	n.host, n.self = h, h.ID()
	n.selfKey = dhtselect.KeyOf(n.self)
	n.log = cfg.Logger.With("peer", n.self.ShortString())
	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if err := n.start(runCtx); err != nil {
		cancel()
		n.closeParts()
		return nil, err
	}
	return n, nil
}

// gossipSubParams are GossipSub's defaults but for the gossip factor: each
// heartbeat sends IHAVE gossip to Dlazy (6) peers, as GossipSub v1.0 did,
// not to a quarter of all the topic's peers. Every peer announces itself
// on the membership topic every interval, so with the default factor each
// peer's IHAVE lists grow as the square of the network: in a 256-node
// testnet they carried 10 million message IDs in the first two minutes,
// and their IWANTs re-sent messages that overloaded validation queues had
// dropped, a loop that kept the overlay from converging. The price is the
// v1.1 defence against an eclipse by many Sybils, which the factor exists
// for; the mesh and flood publishing still deliver.
func gossipSubParams() pubsub.GossipSubParams {
	p := pubsub.DefaultGossipSubParams()
	p.GossipFactor = 0
	return p
}

func newHost(cfg Config) (host.Host, error) {
	key := cfg.Identity
	if key == nil {
		var err error
		if key, _, err = crypto.GenerateEd25519Key(nil); err != nil {
			return nil, fmt.Errorf("overlay: identity: %w", err)
		}
	}
	res, err := resourceOptions(cfg)
	if err != nil {
		return nil, err
	}
	opts := append([]libp2p.Option{libp2p.Identity(key), libp2p.ListenAddrs(cfg.ListenAddrs...)}, natOptions(cfg)...)
	opts = append(opts, res...)
	if cfg.Gater != nil {
		opts = append(opts, libp2p.ConnectionGater(cfg.Gater))
	}
	if len(cfg.Allow) > 0 {
		self, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("overlay: identity: %w", err)
		}
		opts = append(opts, libp2p.ConnectionGater(allowlist{peers: append(slices.Clone(cfg.Allow), self)}))
	}
	if len(cfg.PSK) > 0 {
		opts = append(opts, libp2p.PrivateNetwork(cfg.PSK))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("overlay: host on %v: %w", cfg.ListenAddrs, err)
	}
	return h, nil
}

func (n *Node) start(ctx context.Context) error {
	n.state = State{Self: n.self}
	if n.cfg.Strategy == StrategyGeometric {
		n.state.Token = -1
	}
	var err error
	n.dht, err = dht.New(n.host,
		dht.Mode(dhtMode(n.cfg.Reachability)),
		dht.ProtocolPrefix(protocol.ID("/superpeer/"+n.cfg.Network)),
		dht.BootstrapPeers(n.cfg.Bootstrap...),
	)
	if err != nil {
		return fmt.Errorf("overlay: dht: %w", err)
	}
	if n.ps = n.cfg.PubSub; n.ps == nil {
		psCtx, cancelPS := context.WithCancel(context.Background())
		n.cancelPS = cancelPS
		// Larger queues than the defaults (32): a swarm that starts at once
		// sends every node a burst of announcements, and a full queue drops
		// messages silently.
		n.ps, err = pubsub.NewGossipSub(psCtx, n.host, pubsub.WithGossipSubParams(gossipSubParams()),
			pubsub.WithValidateQueueSize(1024), pubsub.WithPeerOutboundQueueSize(256), n.peerScore())
		if err != nil {
			return fmt.Errorf("overlay: gossipsub: %w", err)
		}
	}
	n.members, err = gossip.JoinMembership(n.ps, n.self, gossip.MembershipConfig{
		Network: n.cfg.Network, Interval: n.cfg.AnnounceInterval, Logger: n.log,
		Connected: func(p peer.ID) bool { return n.host.Network().Connectedness(p) == network.Connected },
		Refuse:    n.guard.Banned,
		Rejected:  n.gossipRejected("membership"),
	})
	if err != nil {
		return err
	}
	bus := n.host.EventBus()
	for _, e := range []struct {
		typ any
		dst *event.Emitter
	}{{new(EvtRoleChanged), &n.emitRole}, {new(EvtSuperpeerChanged), &n.emitSuperpeer}, {new(EvtClusterChanged), &n.emitCluster},
		{new(EvtSuperpeerElected), &n.emitElected}, {new(EvtSuperpeerLost), &n.emitLost}} {
		if *e.dst, err = bus.Emitter(e.typ); err != nil {
			return fmt.Errorf("overlay: event emitter: %w", err)
		}
	}
	n.host.SetStreamHandler(n.closerProto, n.handleCloser)
	if n.cfg.Public {
		if err := n.startPublic(ctx); err != nil {
			return err
		}
	}
	if n.cfg.Election != "" {
		n.startElector(ctx)
	}
	n.host.Network().Notify(&network.NotifyBundle{DisconnectedF: n.disconnected, ConnectedF: n.connected})
	if n.cfg.Strategy == StrategyGeometric {
		if err := n.startGeo(ctx); err != nil {
			return err
		}
	}
	// The loops start last: they read the state set up above. (The
	// reachability event is stateful, so the late subscription still gets
	// AutoNAT's last verdict; natLoop reads the role on every tick.)
	natSub, err := bus.Subscribe([]any{new(event.EvtLocalReachabilityChanged), new(EvtRoleChanged), new(EvtSuperpeerChanged)})
	if err != nil {
		return fmt.Errorf("overlay: event subscription: %w", err)
	}
	n.wg.Add(2)
	go n.natLoop(ctx, natSub)
	go n.bootstrapLoop(ctx)
	if n.cfg.Strategy != StrategyGeometric {
		n.wg.Add(1)
		go n.run(ctx) // the geometric strategy's loops are geo's (startGeo)
	}
	return nil
}

// disconnected re-evaluates at once when the last connection to the
// superpeer drops: the fast path of failover.
func (n *Node) disconnected(nw network.Network, c network.Conn) {
	p := c.RemotePeer()
	n.mu.RLock()
	sp := n.state.Superpeer.ID
	n.mu.RUnlock()
	if p == sp && nw.Connectedness(p) != network.Connected {
		n.Reevaluate()
	}
	if n.elect != nil && nw.Connectedness(p) != network.Connected {
		n.elect.lost(p)
	}
}

// Reevaluate asks the node to re-evaluate its role now rather than at the
// next period.
func (n *Node) Reevaluate() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *Node) run(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.ReevaluateInterval)
	defer t.Stop()
	// Membership changes come in bursts (a swarm starting, a cluster
	// expiring); they are handled at most once per settle period.
	settle := n.cfg.ReevaluateInterval / 4
	var pending <-chan time.Time
	n.evaluate(ctx, true)
	for {
		lookup := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			lookup = true
		case <-n.kick:
			lookup = true
		case <-n.members.Changes():
			if pending == nil {
				pending = time.After(settle)
			}
			continue
		case <-pending:
		}
		pending = nil
		n.evaluate(ctx, lookup)
	}
}

// quorumMemory is, in announce intervals, how long a peer that left the
// membership view still counts as a member of its cluster with
// Config.Quorum: a majority is of the cluster as configured, not as seen,
// or the minority side of a partition, which stops seeing the others after
// one membership TTL, would make a majority of itself. The price is that a
// cluster that loses half of its members for good has no superpeer until
// they are forgotten.
const quorumMemory = 30

// configured returns the peers that count as members with Config.Quorum:
// those in the membership view now, and those seen there within
// quorumMemory announce intervals. Without quorum it is the view. Called
// by the run loop only.
func (n *Node) configured(view []peer.ID) []peer.ID {
	if !n.cfg.Quorum {
		return view
	}
	if n.remembered == nil {
		n.remembered = map[peer.ID]time.Time{}
	}
	now := time.Now()
	for _, p := range view {
		n.remembered[p] = now
	}
	var ids []peer.ID
	for p, seen := range n.remembered {
		if now.Sub(seen) > quorumMemory*n.cfg.AnnounceInterval {
			delete(n.remembered, p)
			continue
		}
		ids = append(ids, p)
	}
	return ids
}

// mayJoin reports whether a node that has not evaluated yet may take a
// role. A node without bootstrap peers starts a network: at once. One with
// bootstrap peers joins a network, and knows nothing of its size before
// its routing table tells it: it waits until the first routing-table
// refresh after reaching a bootstrap peer has completed (its lookups fill
// the table), or, when connected to some peer, two announce intervals have
// passed. Without that wait a joining node would estimate a network of
// one, take k = 0, and claim the whole key space as its cluster until
// the announcements arrive: a split brain with every superpeer, seen on
// every join of a churn scenario. A few announcements are not enough:
// joining node processes that went by the first ones estimated 3 to 11
// peers in a network of 32. Called by the run loop only.
func (n *Node) mayJoin() bool {
	if n.refreshed.Load() {
		return true
	}
	if n.cfg.Public {
		// The peers found by rendezvous are the bootstrap peers: none
		// found (after an advertisement) starts a network, as no bootstrap
		// peer does; some found wait like bootstrap peers.
		switch n.rendezvous.Load() {
		case rendezvousPending:
			return false
		case rendezvousAlone:
			return !slices.ContainsFunc(n.cfg.Bootstrap, func(b peer.AddrInfo) bool { return b.ID != n.self })
		}
	} else if !slices.ContainsFunc(n.cfg.Bootstrap, func(b peer.AddrInfo) bool { return b.ID != n.self }) {
		return true
	}
	if len(n.host.Network().Peers()) == 0 {
		return false
	}
	if n.contact.IsZero() {
		n.contact = time.Now()
	}
	return time.Since(n.contact) >= 2*n.cfg.AnnounceInterval
}

// estimate gathers the inputs of dhtselect.EstimateSize; known is the
// number of peers known (configured), view the membership view. A routing
// table peer counts only while it is connected or announces itself: kad-dht
// keeps a peer that crashed in its table until a query to it fails, and
// when such peers outnumber the membership view the estimate would leave
// the exact count for a guess (seen with churn among node processes, where
// a killed QUIC peer is not noticed at once: estimates of 38 to 50 in a
// network of 32).
func (n *Node) estimate(known int, view []peer.ID) dhtselect.Estimate {
	in := dhtselect.SizeInputs{Self: n.selfKey, Members: known}
	for _, p := range n.dht.RoutingTable().ListPeers() {
		if n.host.Network().Connectedness(p) == network.Connected || slices.Contains(view, p) {
			in.Routing = append(in.Routing, dhtselect.KeyOf(p))
		}
	}
	if s, err := n.dht.NetworkSize(); err == nil {
		in.Kad, in.KadOK = float64(s), true
	}
	return dhtselect.EstimateSize(in)
}

// evaluate recomputes the node's role, cluster, superpeer and members, emits
// events for what changed, and announces the result. The lookup of the
// cluster key runs when forced (period, kick) or when k or the set of known
// cluster members changed, since a joining or leaving member may be the
// superpeer; otherwise the last lookup's answer stands.
func (n *Node) evaluate(ctx context.Context, force bool) {
	var view []peer.ID
	for _, e := range n.members.Entries() {
		if !n.guard.Banned(e.ID) { // a banned peer is no member (wire.go)
			view = append(view, e.ID)
		}
	}
	if !n.joined {
		if n.joined = n.mayJoin(); !n.joined {
			return // the role stays unknown
		}
	}
	known := n.configured(view)
	est := n.estimate(len(known), view)
	s, k := n.cfg.Target.S(est.N), n.cfg.Target.K(est.N)
	ck := n.selfKey.Cluster(k)
	members := n.clusterMembers(k, ck, view)
	n.mu.RLock()
	prev := n.state
	n.mu.RUnlock()
	sp := n.lastLookup
	if force || sp == "" || k != prev.K || !slices.Equal(members, prev.Members) {
		var q int
		var err error
		sp, q, err = n.lookup(ctx, ck)
		n.queries.Add(uint64(q))
		n.lookups.Add(1)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("lookup of cluster key failed", "err", err)
			}
			return
		}
		n.lastLookup = sp
	}
	if n.elect != nil {
		var err error
		electorate := members
		if n.cfg.Quorum {
			electorate = n.clusterMembers(k, ck, known)
		}
		if sp, err = n.elect.superpeer(ctx, k, ck, electorate, sp, ""); err != nil {
			n.log.Warn("election", "err", err)
			return
		}
	}
	next := State{
		Self: n.self, S: s, K: k, ClusterKey: ck, Prefix: ck.Prefix(k), Size: est,
		Superpeer: n.addrInfo(sp), Members: members,
		Role: RoleOrdinary, Lookups: n.lookups.Load(), Queries: n.queries.Load(),
	}
	if sp == n.self {
		next.Role = RoleSuperpeer
	}
	n.commit(next)
	if err := n.members.SetLocal(ctx, gossip.Announcement{
		ID: n.self, Addrs: n.addrs(), Superpeer: next.Role == RoleSuperpeer, K: k, ClusterKey: ck, Private: n.Private(),
	}); err != nil {
		n.log.Warn("announce", "err", err)
	}
}

// addrInfo returns p with the best addresses known: the node's own, the
// ones p announced, or the peerstore's.
func (n *Node) addrInfo(p peer.ID) peer.AddrInfo {
	if p == n.self {
		return peer.AddrInfo{ID: p, Addrs: n.addrs()}
	}
	if e, ok := n.members.Get(p); ok && len(e.Addrs) > 0 {
		return peer.AddrInfo{ID: p, Addrs: e.Addrs}
	}
	return n.host.Peerstore().PeerInfo(p)
}

// clusterMembers lists the peers whose keys share the cluster's prefix,
// this node included, sorted by key.
func (n *Node) clusterMembers(k int, ck dhtselect.Key, peers []peer.ID) []peer.ID {
	out := []peer.ID{n.self}
	for _, p := range peers {
		if p != n.self && dhtselect.KeyOf(p).Cluster(k) == ck {
			out = append(out, p)
		}
	}
	dhtselect.SortByKey(out)
	return out
}

// commit makes next the node's state, counting the evaluation, and reports
// what changed.
func (n *Node) commit(next State) {
	n.mu.Lock()
	prev := n.state
	next.Evaluations = prev.Evaluations + 1
	n.state = next
	n.mu.Unlock()
	n.report(prev, next)
}

// report logs and emits what changed between two states.
func (n *Node) report(prev, next State) {
	n.protect(prev, next)
	if prev.Role != next.Role {
		n.log.Info("role changed", "from", prev.Role, "to", next.Role, "cluster", next.Prefix, "k", next.K)
		n.emit(n.emitRole, EvtRoleChanged{Old: prev.Role, New: next.Role})
	}
	if prev.Superpeer.ID != next.Superpeer.ID {
		n.log.Info("superpeer changed", "superpeer", next.Superpeer.ID, "cluster", next.Prefix)
		n.emit(n.emitSuperpeer, EvtSuperpeerChanged{Old: prev.Superpeer, New: next.Superpeer})
	}
	if prev.K != next.K || prev.ClusterKey != next.ClusterKey || !slices.Equal(prev.Members, next.Members) {
		n.log.Info("cluster changed", "cluster", next.Prefix, "k", next.K, "S", next.S,
			"members", len(next.Members), "size_estimate", next.Size.N, "size_source", next.Size.Source)
		n.emit(n.emitCluster, EvtClusterChanged{K: next.K, ClusterKey: next.ClusterKey, Members: slices.Clone(next.Members)})
	}
}

func (n *Node) emit(e event.Emitter, evt any) {
	if err := e.Emit(evt); err != nil && !n.closed.Load() {
		n.log.Warn("emit event", "err", err)
	}
}

// State returns the node's current view.
func (n *Node) State() State {
	n.mu.RLock()
	defer n.mu.RUnlock()
	s := n.state
	s.Members = slices.Clone(s.Members)
	return s
}

// Subscribe returns a subscription to the node's events (EvtRoleChanged,
// EvtSuperpeerChanged, EvtClusterChanged, and with an election
// EvtSuperpeerElected and EvtSuperpeerLost) on the host's event bus; its
// Out() is a Go channel. Read it promptly or Close it: like every event-bus
// subscription, a full one holds up the emitter.
func (n *Node) Subscribe() (event.Subscription, error) {
	return n.host.EventBus().Subscribe(eventTypes)
}

// ID is the node's peer ID.
func (n *Node) ID() peer.ID { return n.self }

// Host is the node's libp2p host.
func (n *Node) Host() host.Host { return n.host }

// P2PAddrs returns the node's addresses with its /p2p/ component, ready to
// be given to other nodes as bootstrap addresses.
func (n *Node) P2PAddrs() []ma.Multiaddr {
	addrs, _ := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: n.self, Addrs: n.host.Addrs()})
	return addrs
}

// goodbyeGrace is how long Close gives GossipSub to write the goodbye
// before it closes the host. Without it the goodbye arrived in 10 of 10
// closes on an idle machine, but was lost under make test's load
// (TestCloseSaysGoodbye and the SIGTERM case of TestProcsKillSuperpeer
// failed); with 100 ms a full make test passed. 250 ms leaves a margin.
const goodbyeGrace = 250 * time.Millisecond

// Close says goodbye on the membership topic, so that the other peers drop
// this one at once, then stops the node and its host (not an attached
// host: see Attach). It is safe to call more than once.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	// A goodbye on the membership topic first: the other peers drop this
	// one from their views at once (see gossip.Membership.Leave).
	ctx, cancel := context.WithTimeout(context.Background(), streamDeadline)
	if err := n.members.Leave(ctx); err != nil {
		n.log.Debug("goodbye not published", "err", err)
	}
	cancel()
	goodbye := time.Now()
	n.cancel()
	n.wg.Wait()
	if n.geo != nil {
		// The loops have stopped: nothing else moves the token now.
		ctx, cancel := context.WithTimeout(context.Background(), streamDeadline)
		n.geo.leave(ctx) // hand the token on before going
		cancel()
	}
	// Publish only queues the goodbye: let GossipSub write it before the
	// connections close.
	time.Sleep(time.Until(goodbye.Add(goodbyeGrace)))
	return n.closeParts()
}

func (n *Node) closeParts() error {
	var errs []error
	if n.host != nil {
		n.host.RemoveStreamHandler(n.closerProto)
	}
	if n.elect != nil {
		n.elect.close()
	}
	if n.geo != nil {
		errs = append(errs, n.geo.close())
	}
	if n.members != nil {
		errs = append(errs, n.members.Close())
	}
	if n.cancelPS != nil {
		n.cancelPS()
		if n.attached {
			// GossipSub leaves its protocol handlers behind; on a host
			// that lives on they would take streams to a stopped router.
			for _, p := range pubsub.GossipSubDefaultProtocols {
				n.host.RemoveStreamHandler(p)
			}
		}
	}
	for _, e := range []event.Emitter{n.emitRole, n.emitSuperpeer, n.emitCluster, n.emitElected, n.emitLost} {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	if n.dht != nil {
		errs = append(errs, n.dht.Close())
	}
	if n.public != nil {
		errs = append(errs, n.public.Close())
	}
	if n.host != nil && n.attached {
		// kad-dht, too, leaves its handler: drop every protocol of this
		// overlay (all are /superpeer/<network>/...).
		prefix := "/superpeer/" + n.cfg.Network + "/"
		for _, p := range n.host.Mux().Protocols() {
			if strings.HasPrefix(string(p), prefix) {
				n.host.RemoveStreamHandler(p)
			}
		}
	}
	if n.host != nil && !n.attached {
		errs = append(errs, n.host.Close())
	}
	return errors.Join(errs...)
}
