package overlay

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// membership is what the loop reads of the peers it knows and how it
// announces itself: the global membership topic (gossip.Membership, the
// geometric strategy) or the cluster-scoped membership (clusterMembership,
// the DHT strategy).
type membership interface {
	Entries() []gossip.Entry
	Get(p peer.ID) (gossip.Entry, bool)
	Left(p peer.ID) bool
	Len() int
	Changes() <-chan struct{}
	SetLocal(ctx context.Context, a gossip.Announcement) error
	Leave(ctx context.Context) error
	Close() error
	Stats() gossip.FeedStats
}

var _ membership = (*gossip.Membership)(nil)

// clusterMembership is the DHT strategy's membership (issue 20): a node
// hears its cluster only, and the superpeers each other.
//
//   - A member registers with its registrar (node.Machine.Registrar: its
//     superpeer, or while it has none the peer its lookup ended at) every
//     announce interval and at once when it changes or its announcement
//     does, and its view is the roster the registrar answers with
//     (register.go). The answer's digest, the superpeer's k and size
//     estimate, is the member's estimate (node.Digest).
//   - A node that serves its cluster (node.Machine.Serves) keeps the
//     registrations (the registry), which are its view, and is on the
//     backbone (gossip.Backbone): it publishes its cluster's summary and
//     hears every other superpeer's, whose sizes add up to the network's
//     size (node.Backbone).
//   - A node that has not joined yet asks a peer it is connected to (a
//     bootstrap peer), which names the superpeer it follows, and registers
//     there: the digest that comes back gives it k at once.
//
// What a member sends and keeps then grows with its cluster, not with the
// swarm: a registration a interval (about 180 bytes on the stream while
// nothing changes) and its cluster's roster.
type clusterMembership struct {
	n   *Node
	reg *registry
	rs  *registrar

	changes chan struct{}

	mu      sync.Mutex
	serving bool
	to      peer.ID // the registrar (the peer registered with), as the loop last said
	bb      *gossip.Backbone
	left    bool           // Leave was called: the node is closing
	summary gossip.Summary // the last one published
	// bbPast is the stats of the backbones the node left: Stats counts
	// on from them, so that the metrics' counters do not go back when
	// the node stops serving and starts again.
	bbPast gossip.FeedStats
	kick   chan struct{} // register now
	// protocols announces to the node's own GossipSub that a peer speaks
	// it (see mendGossipSub); made when first needed.
	protocols event.Emitter
	// reopened counts the peers mendGossipSub made GossipSub open a
	// stream to.
	reopened uint64
}

func newClusterMembership(n *Node) *clusterMembership {
	c := &clusterMembership{n: n, changes: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
	c.rs = newRegistrar(n, n.cfg.AnnounceInterval)
	c.reg = newRegistry(n, n.cfg.AnnounceInterval, c.rs.local)
	c.reg.goodbye = c.rs.superpeerLeft
	return c
}

// start installs the register protocol's handler and runs the
// registrations until ctx ends.
func (c *clusterMembership) start(ctx context.Context) {
	// Until the machine announces its first role, the node registers as
	// a peer of the whole key space (k = 0): enough to be answered with
	// a digest.
	if err := c.rs.setLocal(gossip.Announcement{ID: c.n.self, Addrs: c.n.addrs(), ClusterKey: c.n.selfKey.Cluster(0), Private: c.n.Private(),
		Election: node.ElectionTag(c.n.cfg.Election, c.n.cfg.Quorum)}); err != nil {
		c.n.log.Warn("register", "err", err)
	}
	c.n.host.SetStreamHandler(c.reg.proto(), c.reg.handle)
	c.n.wg.Add(2)
	go c.forward(ctx)
	go c.registerLoop(ctx)
}

// forward coalesces the registry's, the registrar's and the backbone's
// change signals into Changes.
func (c *clusterMembership) forward(ctx context.Context) {
	defer c.n.wg.Done()
	for {
		var bb <-chan struct{}
		c.mu.Lock()
		if c.bb != nil {
			bb = c.bb.Changes()
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-c.reg.changed():
		case <-c.rs.changed():
		case <-bb:
		case <-time.After(c.n.cfg.AnnounceInterval):
			// The registry notices expiry when it is read, and the
			// backbone's channel may have been replaced: read again.
		}
		notify(c.changes)
	}
}

// registerLoop registers every announce interval, and at once when the
// loop asks (a new registrar, a new announcement). A node registers at
// once when it starts, and again every joinRetry until a digest has come:
// the machine joins by its timing rule (an announce interval after its
// routing table's refresh) if no digest comes first, and a joiner that
// first registered one interval after its start joined alone in its view
// and claimed its cluster (found live under the race detector: a joining
// ground ID claimed the superpeer role 1.8 s after it joined, in
// testnet/attack's TestGroundIDLive). The node simulator registers at
// start too.
func (c *clusterMembership) registerLoop(ctx context.Context) {
	defer c.n.wg.Done()
	t := time.NewTicker(c.n.cfg.AnnounceInterval)
	defer t.Stop()
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.mendGossipSub()
		case <-c.kick:
		case <-retry.C:
		}
		c.round(ctx)
		if _, ok := c.rs.digest(); !ok {
			retry.Reset(min(joinRetry, c.n.cfg.AnnounceInterval))
		}
	}
}

// joinRetry is how often a node that has no digest yet registers.
const joinRetry = 250 * time.Millisecond

// round is one registration: with the registrar, or before the node has
// one, with a connected peer, and then with the superpeer it names.
func (c *clusterMembership) round(ctx context.Context) {
	c.mu.Lock()
	to, serving := c.to, c.serving
	c.mu.Unlock()
	asked := to == ""
	if asked {
		if serving {
			return // a superpeer with no other claimer of its cluster
		}
		to = c.askAround(ctx)
		if to == "" {
			return
		}
	}
	rctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	err := c.rs.register(rctx, to)
	var ref *registerRefused
	if errors.As(err, &ref) && ref.Why == regNotSuperpeer {
		if !asked {
			// The machine's registrar does not serve the cluster: the
			// superpeer it names is a hint for the machine (Digest with
			// no size), which decides whom to register with.
			c.n.feed(node.Digest{From: to, Superpeer: ref.Hint})
		} else if ref.Hint != "" && ref.Hint != c.n.self {
			// Before the node has joined: the bootstrap peer's superpeer.
			err = c.rs.register(rctx, ref.Hint)
			to = ref.Hint
		} else if ref.Hint == c.n.self {
			// Before the node has joined, a peer that names it its
			// superpeer: none serves, and no digest is coming (the
			// machine's mayJoin).
			c.n.feed(node.Digest{From: to, Superpeer: ref.Hint})
		}
	}
	if err != nil && !errors.Is(err, errRefused) && ctx.Err() == nil {
		c.n.log.Debug("register", "with", to, "err", err)
	}
	if errors.As(err, &ref) && ref.Why == regNotSuperpeer || err != nil && !errors.Is(err, errRefused) {
		// No digest came with this answer: the one the registrar holds
		// is the last superpeer's, from an earlier round. Fed again, it
		// told the machine that its registrar answered as a superpeer
		// with no hint, and so took back the hint that the refusal had
		// just given (the registrar's superpeer): the member went on
		// registering with a peer that did not serve, refused every
		// interval, and its cluster's superpeer never heard of it
		// (found live: testnet's TestInvitationKillSuperpeerScenario,
		// a member refused 578 times while the loop no longer
		// evaluated four times a period).
		return
	}
	if d, ok := c.rs.digest(); ok {
		// Before the node has a role, the roster that came with the
		// digest first, on the same queue: a joiner takes a role once
		// it has a digest, and one
		// that had it before the roster was alone in its view, found
		// itself closest to its cluster's key, and claimed it (found
		// live: a joining ground ID named itself superpeer of a cluster
		// of one before it came of age, one run in four of
		// testnet/attack's TestGroundIDLive). The node simulator
		// delivers the two in this order.
		if c.n.State().Role == RoleUnknown {
			c.n.feed(c.n.view())
		}
		c.n.feed(node.Digest{From: c.rs.registeredWith(), K: d.K, Size: d.Size})
	}
}

// askAround is a peer to ask before the node has a registrar: the first
// bootstrap peer it is connected to, else any peer that speaks the
// register protocol.
func (c *clusterMembership) askAround(ctx context.Context) peer.ID {
	nw := c.n.host.Network()
	for _, b := range c.n.cfg.Bootstrap {
		if b.ID != c.n.self && nw.Connectedness(b.ID) == network.Connected {
			return b.ID
		}
	}
	for _, p := range nw.Peers() {
		if ps, err := c.n.host.Peerstore().SupportsProtocols(p, c.reg.proto()); err == nil && len(ps) > 0 {
			return p
		}
	}
	return ""
}

// follow is what the loop says after every Ready: whom to register with,
// whether the node serves its cluster (with its state), and whom it names
// to the peers that register while it does not (node.Machine.Hint). It
// starts or stops serving and the backbone, and asks for a registration
// when the registrar changed.
func (c *clusterMembership) follow(ctx context.Context, to peer.ID, serves bool, st node.State, hint peer.ID, term uint64, refused []peer.ID) {
	c.mu.Lock()
	changed := to != c.to
	c.to = to
	wasServing := c.serving
	c.serving = serves
	c.mu.Unlock()
	if serves {
		if err := c.reg.setServing(st.K, st.ClusterKey, st.Size, refused); err != nil {
			c.n.log.Warn("registry", "err", err)
		}
		c.publish(ctx, st, term)
	} else if wasServing {
		c.reg.stopServing(hint)
		c.leaveBackbone(ctx)
	} else {
		c.reg.stopServing(hint)
	}
	if changed && to != "" {
		notify(c.kick) // a new registrar: a superpeer's is another claimer of its cluster
	}
}

// vouches reports whether the node can vouch for superpeer p, whose
// summary a cluster full of summaries under fresh keys then still takes
// (gossip.BackboneConfig.Vouch): p is connected, or in the DHT's routing
// table (which takes only closer-speaking peers, table.go). A ghost
// summary's key is neither.
func (n *Node) vouches(p peer.ID) bool {
	return n.host.Network().Connectedness(p) == network.Connected || n.dht.RoutingTable().Find(p) != ""
}

// publish puts the cluster's summary on the backbone, joining it first.
func (c *clusterMembership) publish(ctx context.Context, st node.State, term uint64) {
	c.mu.Lock()
	bb, left := c.bb, c.left
	c.mu.Unlock()
	if left {
		return // closing: no backbone again
	}
	if bb == nil {
		ps, err := c.n.pubSub()
		if err != nil {
			c.n.log.Warn("backbone", "err", err)
			return
		}
		bb, err = gossip.JoinBackbone(ps, c.n.self, gossip.BackboneConfig{
			Network: c.n.cfg.Network, Interval: c.n.cfg.AnnounceInterval, Logger: c.n.log,
			Refuse: c.n.guard.Banned, Rejected: c.n.gossipRejected("backbone"), Vouch: c.n.vouches,
		})
		if err != nil {
			c.n.log.Warn("backbone", "err", err)
			return
		}
		c.mu.Lock()
		c.bb = bb
		c.mu.Unlock()
		notify(c.changes)
	}
	s := gossip.Summary{Superpeer: c.n.self, K: st.K, ClusterKey: st.ClusterKey, Size: max(1, len(st.Members)), Estimate: st.Size.N, Term: term}
	c.mu.Lock()
	same := c.summary == s
	c.summary = s
	c.mu.Unlock()
	if same {
		return
	}
	if err := bb.Set(ctx, s); err != nil && ctx.Err() == nil {
		c.n.log.Warn("backbone", "err", err)
	}
}

// mendGossipSub makes the node's GossipSub open its stream to every peer
// that has opened one to it, while the node is on the backbone. GossipSub
// sends to a peer only on a stream of its own, which it opens when the peer
// connects and identifies, or when identify reports that a connected peer
// added a GossipSub protocol (go-libp2p-pubsub, peer_notify.go,
// watchForNewPeers); an attempt that fails while the peer does not speak
// GossipSub yet is dropped (comm.go, handleNewPeer: newPeerError) and not
// tried again. A node starts GossipSub when it first serves (Node.pubSub),
// long after it connected, so its peers that already run GossipSub learn
// that it does only from its identify push, and identify's push handler
// is rate-limited per subnet (go-libp2p, p2p/protocol/identify/id.go,
// idService.Start: rateLimiter.Limit(handlePush); 0.2 a second, burst 10,
// per IPv4 /24 and IPv6 /56 and /48, loopback exempt): pushes beyond it
// are reset and lost. The late starter opens its streams to them (its
// GossipSub tries every connected peer when it starts) and tells them its
// subscriptions, but they never open theirs: it hears nothing of them, not
// even their subscriptions, so that its ListPeers on the backbone stays
// empty, and they drop what they would send it ("No send queue for
// peer"). Seen in a 64-node in-process testnet, whose hosts all sit in
// 10.0.0.0/24 (a superpeer with no GossipSub peer on the backbone while
// connected to 60); on 8-node mocknets with 4 superpeers, 4 runs in 5 had
// superpeers that did not list each other, 12 of the 60 ordered pairs in
// all. TestGossipSubOpensBothWays makes the push's loss certain. A second
// cause leaves the same state: a router started on connected hosts tries
// a peer whose router has not started, fails, and if the peer's identify
// push arrives while that attempt still holds the peer's queue, skips it
// ("already have connection to peer"); the failure then deletes the
// queue and nothing tries again (go-libp2p-pubsub v0.19.0, pubsub.go
// handlePendingPeers and handleNewPeerError; seen in gossip's
// TestBackboneRejoinOverGossipSub, about one run in 300).
//
// The peer's open GossipSub stream to this node says that it speaks the
// protocol; it is recorded in the peerstore and announced on the host's
// event bus as identify would have announced it (EvtPeerProtocolsUpdated),
// and GossipSub opens its stream. A peer GossipSub already has a queue for
// is left alone; one it fails to open to is tried again an interval later.
// The cost is one pass over the node's connections and their streams an
// interval, on a serving node only.
func (c *clusterMembership) mendGossipSub() {
	c.mu.Lock()
	on := c.bb != nil && !c.left
	c.mu.Unlock()
	if !on {
		return
	}
	ps, err := c.n.pubSub()
	if err != nil {
		return
	}
	lost := oneWayPeers(c.n.host.Network(), ps.ListPeers(""))
	if len(lost) == 0 {
		return
	}
	c.mu.Lock()
	if c.protocols == nil {
		if c.protocols, err = c.n.host.EventBus().Emitter(new(event.EvtPeerProtocolsUpdated)); err != nil {
			c.mu.Unlock()
			c.n.log.Warn("gossipsub", "err", err)
			return
		}
	}
	em := c.protocols
	c.reopened += uint64(len(lost))
	c.mu.Unlock()
	for p, proto := range lost {
		if err := c.n.host.Peerstore().AddProtocols(p, proto); err != nil {
			c.n.log.Debug("gossipsub", "peer", p, "err", err)
		}
		if err := em.Emit(event.EvtPeerProtocolsUpdated{Peer: p, Added: []protocol.ID{proto}}); err != nil {
			c.n.log.Debug("gossipsub", "peer", p, "err", err)
		}
	}
	c.n.log.Debug("gossipsub: opening streams to peers that opened theirs", "peers", len(lost))
}

// oneWayPeers are the peers with a GossipSub stream open to this node
// (inbound) that are not among known (the peers GossipSub has a queue
// for), each with the protocol of its stream.
func oneWayPeers(nw network.Network, known []peer.ID) map[peer.ID]protocol.ID {
	has := make(map[peer.ID]bool, len(known))
	for _, p := range known {
		has[p] = true
	}
	var out map[peer.ID]protocol.ID
	for _, conn := range nw.Conns() {
		p := conn.RemotePeer()
		if _, ok := out[p]; ok || has[p] {
			continue
		}
		for _, s := range conn.GetStreams() {
			if s.Stat().Direction == network.DirInbound && slices.Contains(pubsub.GossipSubDefaultProtocols, s.Protocol()) {
				if out == nil {
					out = map[peer.ID]protocol.ID{}
				}
				out[p] = s.Protocol()
				break
			}
		}
	}
	return out
}

// leaveBackbone says goodbye on the backbone and leaves it.
func (c *clusterMembership) leaveBackbone(context.Context) {
	c.mu.Lock()
	bb := c.bb
	c.bb, c.summary = nil, gossip.Summary{}
	if bb != nil {
		c.bbPast = addStats(c.bbPast, bb.Stats())
	}
	c.mu.Unlock()
	if bb != nil {
		if err := bb.Close(); err != nil {
			c.n.log.Debug("backbone", "err", err)
		}
	}
}

// view is the machine's view: the registry's while the node serves, else
// the roster; and the backbone's summaries while it serves.
func (c *clusterMembership) view() ([]node.Member, *node.Backbone) {
	c.mu.Lock()
	serving, bb := c.serving, c.bb
	c.mu.Unlock()
	if !serving {
		return c.rs.members(), nil
	}
	ms := c.reg.members()
	if bb == nil {
		return ms, nil
	}
	var b node.Backbone
	for _, s := range bb.Summaries() {
		b.Summaries = append(b.Summaries, node.Summary{Superpeer: s.Superpeer, K: s.K, ClusterKey: s.ClusterKey, Size: s.Size})
	}
	return ms, &b
}

// summaries are the backbone's summaries while the node serves (none
// otherwise).
func (c *clusterMembership) summaries() []gossip.Summary {
	c.mu.Lock()
	bb := c.bb
	c.mu.Unlock()
	if bb == nil {
		return nil
	}
	return bb.Summaries()
}

// Entries are the roster's entries (the registry's while the node
// serves).
func (c *clusterMembership) Entries() []gossip.Entry {
	c.mu.Lock()
	serving := c.serving
	c.mu.Unlock()
	if serving {
		return c.reg.roster()
	}
	return c.rs.entries()
}

// Get is p's entry in the roster. The roster is read once: two reads
// may differ (a registration between them), and an index into the first
// read past the end of the second panicked (the node's loop, in a full
// make test).
func (c *clusterMembership) Get(p peer.ID) (gossip.Entry, bool) {
	es := c.Entries()
	i := slices.IndexFunc(es, func(e gossip.Entry) bool { return e.ID == p })
	if i < 0 {
		return gossip.Entry{}, false
	}
	return es[i], true
}

// Left reports whether p left the cluster with a goodbye: its
// registration's goodbye (Leaving) while the node serves, else the
// goodbye its superpeer passed on in the roster (a removal carries the
// goodbye when the member said one).
func (c *clusterMembership) Left(p peer.ID) bool {
	c.mu.Lock()
	serving := c.serving
	c.mu.Unlock()
	if serving {
		return c.reg.left(p)
	}
	return c.rs.left(p)
}

// Len is the roster's length.
func (c *clusterMembership) Len() int { return len(c.Entries()) }

// Changes is signalled when the roster, the registrations or the
// backbone changed (and every announce interval).
func (c *clusterMembership) Changes() <-chan struct{} { return c.changes }

// SetLocal seals the node's announcement and registers it at once.
func (c *clusterMembership) SetLocal(_ context.Context, a gossip.Announcement) error {
	before := c.rs.local()
	if err := c.rs.setLocal(a); err != nil {
		return err
	}
	notify(c.kick)
	if bytes.Equal(before, c.rs.local()) {
		// It says what the last one said (the machine announces after
		// every evaluation): registered again, but nothing changed.
		// Signalled anyway, each announcement made the loop give the
		// machine its view again, which made an evaluation due a settle
		// period later, which announced again: every node evaluated, and
		// registered, about four times a period in a converged
		// in-process testnet, instead of about once.
		return nil
	}
	notify(c.changes) // a serving node's own entry
	return nil
}

// Leave says goodbye: on the backbone, to the superpeer registered with,
// and, while the node serves its cluster, to each of its members, which
// then elect the successor at once rather than when the connection
// drops (registrar.superpeerLeft). The registry stops serving first, so
// that a member that registers meanwhile is told so.
func (c *clusterMembership) Leave(ctx context.Context) error {
	c.mu.Lock()
	c.left = true
	serving := c.serving
	c.mu.Unlock()
	c.leaveBackbone(ctx)
	var members []peer.ID
	if serving {
		for _, m := range c.reg.members() {
			members = append(members, m.ID)
		}
		c.reg.stopServing("")
	}
	return c.rs.goodbye(ctx, members)
}

// Close leaves the backbone and removes the protocol's handler.
func (c *clusterMembership) Close() error {
	c.leaveBackbone(context.Background())
	c.n.host.RemoveStreamHandler(c.reg.proto())
	c.mu.Lock()
	em := c.protocols
	c.protocols = nil
	c.mu.Unlock()
	if em != nil {
		_ = em.Close()
	}
	return nil
}

// Stats are the backbone's: those of every backbone the node was on
// (each time it served), added up.
func (c *clusterMembership) Stats() gossip.FeedStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bb == nil {
		return c.bbPast
	}
	return addStats(c.bbPast, c.bb.Stats())
}

func addStats(a, b gossip.FeedStats) gossip.FeedStats {
	return gossip.FeedStats{Accepted: a.Accepted + b.Accepted, Rejected: a.Rejected + b.Rejected, Ignored: a.Ignored + b.Ignored,
		Crowded: a.Crowded + b.Crowded, Published: a.Published + b.Published}
}

// proto is the register protocol of the registry's network.
func (r *registry) proto() protocol.ID { return registerProtocol(r.n.cfg.Network) }

// roster is the registry's roster while the node serves.
func (r *registry) roster() []gossip.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.serving {
		return nil
	}
	return r.view.Entries()
}

// entries are the roster the registrar holds, the former entries not yet
// expired, and the node's own announcement (as the registry's roster
// holds its node's, and the membership topic's view did).
func (r *registrar) entries() []gossip.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	es := r.viewLocked()
	if r.ann != nil {
		es = append(es, gossip.Entry{Announcement: *r.ann})
	}
	slices.SortFunc(es, func(a, b gossip.Entry) int { return cmp.Compare(a.ID, b.ID) })
	return es
}

// registeredWith is the peer the registrar last registered with.
func (r *registrar) registeredWith() peer.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sp
}

// backboneSummaries are the other superpeers' summaries the node hears on
// the backbone: none unless it serves its cluster with the DHT strategy.
func (n *Node) backboneSummaries() []gossip.Summary {
	if n.cm == nil {
		return nil
	}
	return n.cm.summaries()
}
