package overlay

import (
	"context"
	"crypto/rand"
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
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
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

// Node is one overlay peer: a shell around its node machine (package
// overlay/node), which makes every decision. One loop (loop) feeds the
// machine its inputs and carries out its Ready; the host, the DHT, GossipSub
// and the stream handlers turn what happens into inputs. Its methods are
// safe for concurrent use.
type Node struct {
	cfg         Config
	log         *slog.Logger
	host        host.Host
	dht         *dht.IpfsDHT
	dhtUp       chan struct{}      // closed once dht is set
	members     membership         // the global topic (geometric) or cm (DHT)
	cm          *clusterMembership // the DHT strategy's cluster-scoped membership (cluster.go)
	nat         natState
	guard       guard // the ban list and the refused messages' counters (wire.go)
	geo         *geo  // nil with the DHT strategy
	self        peer.ID
	selfKey     dhtselect.Key
	closerProto protocol.ID
	foreignBoot sync.Map      // bootstrap peer IDs found foreign and warned of (bootstrap.go)
	electProto  protocol.ID   // the election protocol, when Config.Election is set
	hard        *hardStore    // the quorum's durable state (Config.DataDir), or nil
	outages     *outageStore  // the node\'s own outages (Config.DataDir, with an election), or nil
	m           *node.Machine // only the loop touches it
	inbox       inbox         // inputs for the machine
	rtts        rttTable      // the RTTs the node measured (rtt.go)
	rttFresh    chan struct{} // a round of pings has answered
	rttKick     chan struct{} // the cluster's members changed
	calls       chan func(*node.Machine)

	emitRole, emitSuperpeer, emitCluster event.Emitter
	emitElected, emitLost                event.Emitter
	events                               chan any // for emitLoop

	cancel context.CancelFunc // stops the node's loops
	// GossipSub, started by pubSub when first needed; cancelPS stops it,
	// after its topics are left (nil when it is the application's or not
	// started), and psClosed says the node is closing.
	psMu     sync.Mutex
	ps       *pubsub.PubSub
	cancelPS context.CancelFunc
	psClosed bool
	attached bool         // the host is the application's (Attach): Close leaves it open
	public   *dht.IpfsDHT // the public DHT's client (Config.Public), or nil
	wg       sync.WaitGroup
	closed   atomic.Bool
	// awaiting is set while awaitRefresh waits for a refresh to complete.
	awaiting atomic.Bool
	// electDropped counts election messages that did not decode or that
	// the inbox refused.
	electDropped atomic.Uint64
	route        routeCache // the machine's Routing, while nothing changed (routing.go)

	// What the loop last learnt from the machine, for the other goroutines.
	mu        sync.RWMutex
	state     State
	election  node.ElectionStatus
	detection time.Duration
	deadline  time.Duration
	// distrusted counts the claims the geometric strategy's liar check
	// found implausible, out of vetChecks.
	distrusted, vetChecks uint64
	// swaps counts the hand-overs of the search on measured RTTs
	// (node.Machine.Swaps).
	swaps uint64
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
	n := &Node{cfg: cfg, closerProto: closerProtocol(cfg.Network), attached: attached}
	h := cfg.Host
	if h == nil {
		var err error
		if h, err = newHost(cfg, &n.guard); err != nil {
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

// pubSub returns the node's GossipSub router, the application's
// (Config.PubSub) or one it starts on first use. With the DHT strategy only
// a superpeer gossips, on the backbone (cluster.go), so an ordinary peer
// that has never served runs no GossipSub at all: it speaks no pubsub
// protocol, and its connections carry no GossipSub streams, queues or
// heartbeats (in a 64-node in-process testnet where every peer ran one,
// GossipSub held three goroutines and two streams on every connection of
// every node, a third of the process's goroutines). Once started it runs
// until the node closes, whatever the node's role later.
func (n *Node) pubSub() (*pubsub.PubSub, error) {
	n.psMu.Lock()
	defer n.psMu.Unlock()
	switch {
	case n.ps != nil:
		return n.ps, nil
	case n.cfg.PubSub != nil:
		n.ps = n.cfg.PubSub
		return n.ps, nil
	case n.psClosed:
		return nil, errors.New("overlay: closing, no GossipSub")
	}
	psCtx, cancelPS := context.WithCancel(context.Background())
	// Larger queues than the defaults (32): a swarm that starts at once
	// sends every node a burst of announcements, and a full queue drops
	// messages silently.
	ps, err := pubsub.NewGossipSub(psCtx, framedHost{Host: n.host, n: n, name: "pubsub", max: maxPubSubMessage},
		append(n.pubsubOptions(), pubsub.WithGossipSubParams(gossipSubParams()),
			pubsub.WithValidateQueueSize(1024), pubsub.WithPeerOutboundQueueSize(256), n.peerScore())...)
	if err != nil {
		cancelPS()
		return nil, fmt.Errorf("overlay: gossipsub: %w", err)
	}
	n.ps, n.cancelPS = ps, cancelPS
	return ps, nil
}

// gossipSubParams are GossipSub's defaults but for the gossip factor: each
// heartbeat sends IHAVE gossip to Dlazy (6) peers, as GossipSub v1.0 did,
// not to a quarter of all the topic's peers. It was set when every peer
// announced itself on a global membership topic every interval, and each
// peer's IHAVE lists grew as the square of the network: in a 256-node
// testnet they carried 10 million message IDs in the first two minutes,
// and their IWANTs re-sent messages that overloaded validation queues had
// dropped, a loop that kept the overlay from converging. No topic of the
// swarm has N publishers any more (the backbone's and the tokens topic's
// are the S superpeers), but every geometric peer subscribed to the
// tokens topic, and with the default factor it would send IHAVE gossip
// to a quarter of its connected subscribers every heartbeat: a cost of an
// ordinary peer that grows with the swarm, up to the connection manager's
// bound (with the default factor an ordinary geometric peer's gossip was
// 3.6 KB/s at 32 nodes and 9.6 KB/s at 64, against 4.0 and 7.5 with 0;
// one run each, TestLiveScaleGeometric). Members now read their
// cluster's token topic instead (geotopics.go); the factor was not
// measured again since. The price is the v1.1 defence against an eclipse
// by many Sybils, which the factor exists for; the mesh and flood
// publishing still deliver.
func gossipSubParams() pubsub.GossipSubParams {
	p := pubsub.DefaultGossipSubParams()
	p.GossipFactor = 0
	return p
}

// newHost builds the node's host; g is the node's guard, whose bans its
// connection gater enforces (banGate).
func newHost(cfg Config, g *guard) (host.Host, error) {
	key := cfg.Identity
	if key == nil {
		var err error
		if key, _, err = crypto.GenerateEd25519Key(nil); err != nil {
			return nil, fmt.Errorf("overlay: identity: %w", err)
		}
	}
	res, err := resourceOptions(cfg, g)
	if err != nil {
		return nil, err
	}
	opts := append([]libp2p.Option{libp2p.Identity(key), libp2p.ListenAddrs(cfg.ListenAddrs...)}, natOptions(cfg)...)
	opts = append(opts, res...)
	opts = append(opts, quicOptions(cfg.ListenAddrs, g))
	opts = append(opts, transportOptions(cfg.ListenAddrs, len(cfg.PSK) > 0)...)
	gate := banGate{g: g, next: cfg.Gater}
	if len(cfg.Allow) > 0 {
		self, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("overlay: identity: %w", err)
		}
		gate.next = allowlist{peers: append(slices.Clone(cfg.Allow), self)}
	}
	opts = append(opts, libp2p.ConnectionGater(gate))
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
	// The closer protocol before the DHT's: the routing tables take only
	// peers that speak it (table.go), so a node must never show its DHT
	// protocol without it. It answers with no peers until the DHT is up.
	n.dhtUp = make(chan struct{})
	n.host.SetStreamHandler(n.closerProto, n.handleCloser)
	n.dht, err = dht.New(framedHost{Host: n.host, n: n, name: "dht", max: maxDHTMessage},
		append([]dht.Option{
			dht.Mode(dhtMode(n.cfg.Reachability)),
			dht.ProtocolPrefix(protocol.ID("/superpeer/" + n.cfg.Network)),
			dht.BootstrapPeers(n.cfg.Bootstrap...),
		}, n.dhtOptions()...)...,
	)
	if err != nil {
		return fmt.Errorf("overlay: dht: %w", err)
	}
	close(n.dhtUp)
	if n.cfg.Strategy == StrategyGeometric {
		n.members = newGeoMembership(n) // its cluster, no global topic (geomembership.go)
	} else {
		n.cm = newClusterMembership(n)
		n.members = n.cm
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
	if err := n.startMachine(); err != nil {
		return err
	}
	if n.cfg.Election != "" {
		n.electProto = electionProtocol(n.cfg.Network)
		n.host.SetStreamHandler(n.electProto, n.handleElection)
	}
	if n.cfg.Public {
		if err := n.startPublic(ctx); err != nil {
			return err
		}
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
	if n.cm != nil {
		n.cm.start(ctx)
	}
	ping.NewPingService(n.host) // a host of our own has it already; a given one may not
	n.rttFresh, n.rttKick = make(chan struct{}, 1), make(chan struct{}, 1)
	routeSub, err := bus.Subscribe([]any{new(event.EvtPeerIdentificationCompleted), new(event.EvtPeerProtocolsUpdated)})
	if err != nil {
		natSub.Close()
		return fmt.Errorf("overlay: event subscription: %w", err)
	}
	n.wg.Add(5)
	go n.routeLoop(ctx, routeSub)
	go n.rttLoop(ctx)
	go n.natLoop(ctx, natSub)
	go n.emitLoop(ctx)
	go n.loop(ctx)
	return nil
}

// startMachine builds the node machine, with the quorum's state read back
// from Config.DataDir.
func (n *Node) startMachine() error {
	var hard map[dhtselect.Key]classic.HardState
	var err error
	if n.hard, hard, err = openConfigHardStore(&n.cfg, n.log); err != nil {
		return err
	}
	var ran bool
	var outages []time.Time
	if n.cfg.DataDir != "" && n.cfg.Election != "" {
		if n.outages, ran, outages, err = openOutageStore(n.cfg.DataDir); err != nil {
			return err
		}
	}
	hasBootstrap := slices.ContainsFunc(n.cfg.Bootstrap, func(b peer.AddrInfo) bool { return b.ID != n.self })
	var geoCfg node.GeoConfig
	if n.cfg.Strategy == StrategyGeometric {
		if geoCfg, err = geoConfig(n.cfg); err != nil {
			return err
		}
	}
	epoch := node.EpochConfig{Length: n.cfg.Epoch}
	if _, err := rand.Read(epoch.Secret[:]); err != nil {
		return fmt.Errorf("overlay: the hash chain's secret: %w", err)
	}
	m, err := node.New(node.Config{
		Self: n.self, Geometric: n.cfg.Strategy == StrategyGeometric, Target: n.cfg.Target,
		Election: n.cfg.Election, Quorum: n.cfg.Quorum, IgnoreFlaps: n.cfg.IgnoreFlaps,
		Bootstrap: hasBootstrap, Rendezvous: n.cfg.Public, Private: n.Private(), BootstrapRetry: n.cfg.BootstrapRetry,
		AnnounceInterval: n.cfg.AnnounceInterval, ReevaluateInterval: n.cfg.ReevaluateInterval,
		ElectionTick: n.cfg.ElectionTick, HardState: hard, Restarted: ran, Outages: outages, Geo: geoCfg,
		Epoch:      epoch,
		MaxPerAddr: n.cfg.MaxPerAddr,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n.m = m
	n.inbox.signal = make(chan struct{}, 1)
	n.calls = make(chan func(*node.Machine))
	n.events = make(chan any, maxEvents)
	return nil
}

// disconnected tells the machine when the last connection to a peer
// closed: the fast path of failover, and host quality.
func (n *Node) disconnected(nw network.Network, c network.Conn) {
	n.route.gen.Add(1)
	p := c.RemotePeer()
	if nw.Connectedness(p) != network.Connected {
		n.feed(node.Conn{Peer: p, Connected: n.overlayPeers()})
	}
}

// overlayPeers counts the peers the host is connected to that may be the
// overlay's: all of them, but with Config.Public those identified as
// foreign (the public DHT's peers). Host quality takes no connection left
// for an outage of the node's own, and in public mode the connections to
// the public network hid an outage of every overlay connection (an
// interoperability audit).
func (n *Node) overlayPeers() int {
	ps := n.connectedPeers()
	if !n.cfg.Public {
		return len(ps)
	}
	c := 0
	for _, p := range ps {
		if !n.foreign(p) {
			c++
		}
	}
	return c
}

// Reevaluate asks the node to re-evaluate its role now rather than at the
// next period.
func (n *Node) Reevaluate() { n.feed(node.Reevaluate{}) }

// feed queues an input for the machine; it never blocks.
func (n *Node) feed(in node.Input) {
	if err := n.inbox.push(in); err != nil {
		n.electDropped.Add(1)
		n.log.Warn("node machine: election message dropped, the inbox is full", "err", err)
	}
}

// do runs fn on the loop, with the machine, and waits for it; the loop
// carries out the machine's Ready afterwards. False when the node stops
// first.
func (n *Node) do(ctx context.Context, fn func(*node.Machine)) bool {
	done := make(chan struct{})
	select {
	case n.calls <- func(m *node.Machine) { fn(m); close(done) }:
	case <-ctx.Done():
		return false
	}
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// loop is the node's one loop: it steps the machine with the inputs, ticks
// it every ElectionTick (and, with the geometric strategy, when its next
// timer falls due: Machine.GeoNext), and carries out its Ready.
func (n *Node) loop(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.ElectionTick)
	defer t.Stop()
	var geoT *time.Timer
	var geoC <-chan time.Time
	if n.geo != nil {
		geoT = time.NewTimer(0)
		defer geoT.Stop()
		geoC = geoT.C
	}
	n.stepView(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.inbox.signal:
			for _, in := range n.inbox.take() {
				n.m.Step(time.Now(), in)
			}
		case f := <-n.calls:
			f(n.m)
		case <-n.members.Changes():
			n.stepView(time.Now())
		case <-n.rttFresh:
			n.m.Step(time.Now(), n.view())
		case <-t.C:
			n.tick(time.Now())
		case <-geoC:
			n.tick(time.Now())
		}
		n.carryOut(ctx, n.m.Ready())
		if geoT != nil {
			geoT.Reset(time.Until(n.m.GeoNext()))
		}
	}
}

// tick ticks the machine, after the fresh inputs it asks for: the routing
// table before an evaluation, the host's connections (links), the
// geometric feed before a geometric decision.
func (n *Node) tick(now time.Time) {
	if n.m.Due(now) {
		n.m.Step(now, n.routing())
	}
	if sp, ok := n.m.LinksDue(now); ok {
		n.m.Step(now, n.links(sp))
	}
	if n.geo != nil && n.m.GeoDue(now) {
		n.geo.stepFeed(n.m, now, n.geo.input())
	}
	n.m.Tick(now)
}

// stepView gives the machine the membership view, after the routing
// table and the addresses of the connected peers that go with it (the
// identities per address, overlay/node's admit.go).
func (n *Node) stepView(now time.Time) {
	n.m.Step(now, n.routing())
	n.m.Step(now, n.view())
	if n.cm != nil {
		if _, bb := n.cm.view(); bb != nil {
			n.m.Step(now, *bb)
		}
	}
}

// view is the membership view as the machine takes it: banned peers are
// no members (wire.go).
func (n *Node) view() node.View {
	var v node.View
	if n.cm != nil {
		v.Members, _ = n.cm.view()
		for i := range v.Members {
			v.Members[i].RTT = n.rtt(v.Members[i].ID)
		}
		return v
	}
	for _, e := range n.members.Entries() {
		if !n.guard.Banned(e.ID) {
			v.Members = append(v.Members, node.Member{ID: e.ID, Superpeer: e.Superpeer, Private: e.Private, Flapping: e.Flapping,
				RTT: n.rtt(e.ID), Beacon: e.Beacon, Election: e.Election})
		}
	}
	return v
}

// carryOut does what the machine asks, in its order: the hard state is
// written and synced before any election message leaves.
func (n *Node) carryOut(ctx context.Context, rd node.Ready) {
	for _, note := range rd.Notes {
		n.log.Log(ctx, note.Level, note.Msg, note.Args...)
	}
	send := true
	if n.hard != nil && (rd.HardState != nil || len(rd.Messages) > 0) {
		// Saved again before every Ready with messages, not only when the
		// machine says it changed: after a failed save, the next grant
		// would otherwise leave with nothing on disk (Save compares first,
		// so this costs nothing while the file is up to date).
		if err := n.hard.Save(n.m.HardState()); err != nil {
			// Nothing that depends on the vote may leave: the messages
			// are lost, as if the network had dropped them.
			n.log.Error("quorum state not saved: election messages dropped", "err", err)
			send = false
		}
	}
	if rd.Outages != nil {
		if err := n.outages.Save(rd.Outages); err != nil {
			n.log.Warn("outages not saved: after a restart this node may rank itself above its peers' view of it", "err", err)
		}
	}
	n.mu.Lock()
	n.election, n.detection, n.deadline = n.m.Election(), n.m.Detection(), n.m.MessageDeadline()
	n.distrusted, n.swaps = n.m.Distrusted(), n.m.Swaps()
	n.vetChecks, _ = n.m.VetChecks()
	n.mu.Unlock()
	for _, e := range rd.Elections {
		if e.Lost {
			n.queue(EvtSuperpeerLost{Superpeer: e.Superpeer})
		} else {
			n.queue(EvtSuperpeerElected{Superpeer: e.Superpeer, Term: e.Term})
		}
	}
	for _, o := range rd.Messages {
		if send {
			n.sendElection(ctx, o)
		}
	}
	for _, p := range rd.Flooders {
		n.guard.refuse(n, "election", p, errFlood)
	}
	for _, l := range rd.Lookups {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			sp, q, err := n.lookup(ctx, l)
			if ctx.Err() == nil {
				n.feed(node.LookupDone{Key: l.Key, Superpeer: sp, Queries: q, Err: err})
			}
		}()
	}
	n.connect(ctx, rd.Connect)
	if rd.Dial {
		n.dial(ctx)
	}
	n.refresh(ctx, rd.Refresh)
	if rd.StateChanged && n.cfg.Strategy != StrategyGeometric {
		st := rd.State
		n.commit(State{
			Self: n.self, Role: st.Role, S: st.S, K: st.K, ClusterKey: st.ClusterKey, Prefix: st.Prefix,
			Superpeer: n.addrInfo(st.Superpeer), Members: st.Members, Size: st.Size,
			Evaluations: st.Evaluations, Lookups: st.Lookups, Queries: st.Queries,
		})
	}
	if a := rd.Announce; a != nil {
		if err := n.members.SetLocal(ctx, gossip.Announcement{
			ID: n.self, Addrs: n.addrs(), Superpeer: a.Superpeer, K: a.K, ClusterKey: a.ClusterKey, Private: a.Private,
			Flapping: a.Flapping, Beacon: a.Beacon, Election: node.ElectionTag(n.cfg.Election, n.cfg.Quorum),
		}); err != nil && ctx.Err() == nil {
			n.log.Warn("announce", "err", err)
		}
	}
	if n.geo != nil {
		n.geo.carryOut(ctx, rd.Geo)
	}
	if n.cm != nil {
		n.cm.follow(ctx, n.m.Registrar(), n.m.Serves(), rd.State, n.m.Hint(), n.m.Election().Term, n.m.Refused())
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

// commit makes next the node's state, counting the evaluation, and reports
// what changed.
func (n *Node) commit(next State) {
	n.mu.Lock()
	prev := n.state
	if n.cfg.Strategy == StrategyGeometric {
		next.Evaluations = prev.Evaluations + 1
	}
	n.state = next
	n.mu.Unlock()
	n.report(prev, next)
}

// report logs and emits what changed between two states.
func (n *Node) report(prev, next State) {
	n.protect(prev, next)
	if prev.Role != next.Role {
		n.log.Info("role changed", "from", prev.Role, "to", next.Role, "cluster", next.Prefix, "k", next.K)
		n.queue(EvtRoleChanged{Old: prev.Role, New: next.Role})
	}
	if prev.Superpeer.ID != next.Superpeer.ID {
		n.log.Info("superpeer changed", "superpeer", next.Superpeer.ID, "cluster", next.Prefix)
		n.queue(EvtSuperpeerChanged{Old: prev.Superpeer, New: next.Superpeer})
	}
	if prev.K != next.K || prev.ClusterKey != next.ClusterKey || !slices.Equal(prev.Members, next.Members) {
		notify(n.rttKick) // ping the new members now (rtt.go)
		n.log.Info("cluster changed", "cluster", next.Prefix, "k", next.K, "S", next.S,
			"members", len(next.Members), "size_estimate", next.Size.N, "size_source", next.Size.Source)
		n.queue(EvtClusterChanged{K: next.K, ClusterKey: next.ClusterKey, Members: slices.Clone(next.Members)})
	}
}

// queue hands an event to emitLoop without blocking: a subscriber that
// does not read holds up only emitLoop, and events beyond maxEvents
// pending are dropped with a warning.
func (n *Node) queue(evt any) {
	select {
	case n.events <- evt:
	default:
		n.log.Warn("event dropped, subscribers are not reading", "event", fmt.Sprintf("%T", evt))
	}
}

// maxEvents is how many events may wait for emitLoop.
const maxEvents = 256

// emitLoop emits the queued events in order.
func (n *Node) emitLoop(ctx context.Context) {
	defer n.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case evt := <-n.events:
			var e event.Emitter
			switch evt.(type) {
			case EvtRoleChanged:
				e = n.emitRole
			case EvtSuperpeerChanged:
				e = n.emitSuperpeer
			case EvtClusterChanged:
				e = n.emitCluster
			case EvtSuperpeerElected:
				e = n.emitElected
			case EvtSuperpeerLost:
				e = n.emitLost
			}
			if err := e.Emit(evt); err != nil && !n.closed.Load() {
				n.log.Warn("emit event", "err", err)
			}
		}
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
	if n.host != nil && n.electProto != "" {
		n.host.RemoveStreamHandler(n.electProto)
	}
	if n.geo != nil {
		errs = append(errs, n.geo.close())
	}
	if n.members != nil {
		errs = append(errs, n.members.Close())
	}
	n.psMu.Lock()
	cancelPS := n.cancelPS
	n.psClosed = true
	n.psMu.Unlock()
	if cancelPS != nil {
		cancelPS()
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
