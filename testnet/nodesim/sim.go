package nodesim

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
)

// Epoch is the instant the machines see at virtual time 0.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Defaults for Config fields left zero.
const (
	DefaultRTT           = 100 * time.Millisecond
	DefaultGossipDelay   = 200 * time.Millisecond
	DefaultLookupRTTs    = 3
	DefaultContactWindow = 30 * time.Second
	DefaultQueryTimeout  = 5 * time.Second
	// A bootstrap peer's connection manager: overlay.NewConnManager's
	// for a public node (watermarks 160 and 192, a minute's grace), and
	// go-libp2p's BasicConnMgr trims at most every 10 s.
	DefaultConnLow   = 160
	DefaultConnHigh  = 192
	DefaultConnGrace = time.Minute
	connTrimPeriod   = 10 * time.Second
)

// ErrConfig is wrapped by every error New returns for a bad Config.
var ErrConfig = errors.New("nodesim: invalid config")

// Config describes a simulated network of node machines.
type Config struct {
	// N is the number of nodes at the start. Node 0 starts the network
	// (it has no bootstrap peer); the others join it.
	N int
	// Seed is the only source of randomness.
	Seed uint64
	// Node is every machine's configuration; Self and Bootstrap are set
	// per node. Zero intervals take the live node's defaults (announce and
	// re-evaluate 5 s, election tick 100 ms).
	Node node.Config
	// Stagger spreads the starts of nodes 1..N-1 uniformly over
	// [0, Stagger).
	Stagger time.Duration
	// Latency gives the RTT between hosts; node i runs on host i modulo
	// Latency.N(). Nil means DefaultRTT between every two nodes. Missing
	// entries take DefaultRTT.
	Latency *latency.Matrix
	// Jitter adds a delay drawn uniformly from [0, Jitter) to every
	// election message.
	Jitter time.Duration
	// Loss is the probability, in [0, 1), that an election message is
	// lost, or the answer to a token pass or an attach request (geometric
	// strategy).
	Loss float64
	// GossipDelay is how long an announcement or goodbye takes to reach
	// the views. Zero means DefaultGossipDelay.
	GossipDelay time.Duration
	// ViewPeriod is the shortest time between two views given to one
	// machine. Zero means a quarter of the re-evaluation interval.
	ViewPeriod time.Duration
	// ConnLoss is how long after a crash or a cut its peers see the
	// connection drop (Conn); a crashed node stays in their
	// GeoFeed.Connected as long. Zero means one RTT; a live QUIC
	// connection to a killed process lasts its 30 s idle timeout.
	ConnLoss time.Duration
	// ContactWindow: a node is connected to the peers it exchanged an
	// election message with within it. Zero means DefaultContactWindow.
	ContactWindow time.Duration
	// QueryTimeout bounds a lookup query to a dead peer when the asker
	// has no failure-detection timeout. Zero means DefaultQueryTimeout.
	QueryTimeout time.Duration
	// LookupRTTs is how many round trips a lookup takes. Zero means
	// DefaultLookupRTTs.
	LookupRTTs int
	// GeoTimeout is how long a ping, a token pass or an attach request to
	// a peer that is down or unreachable takes to fail (geometric
	// strategy). Zero means DefaultGeoTimeout.
	GeoTimeout time.Duration
	// Addr names node i's address group, for the machines' identities
	// per address (node.Config.MaxPerAddr, which turns them on). Nil
	// gives each node its own. Every node is seen on its address by every
	// other (the simulator models no connections), and a lookup ends at
	// the closest node the asker's request may ask.
	Addr func(i int) string
	// ConnLow and ConnHigh are a bootstrap peer's connection manager's
	// watermarks, ConnGrace the age under which it keeps a connection:
	// once over ConnHigh it closes the oldest connections older than
	// ConnGrace down to ConnLow, sparing its superpeer and members (the
	// peers the live node protects), at most every 10 s. Only the
	// connections of the dials it got count (no other connection is
	// modelled as such: see doc.go). Zero means DefaultConnLow,
	// DefaultConnHigh and DefaultConnGrace.
	ConnLow, ConnHigh int
	ConnGrace         time.Duration
}

func (c *Config) fill() error {
	switch {
	case c.N < 1:
		return fmt.Errorf("%w: N = %d, want at least 1", ErrConfig, c.N)
	case c.Loss < 0 || c.Loss >= 1:
		return fmt.Errorf("%w: Loss = %v, want [0, 1)", ErrConfig, c.Loss)
	case c.Stagger < 0 || c.Jitter < 0:
		return fmt.Errorf("%w: negative Stagger or Jitter", ErrConfig)
	case c.GossipDelay < 0 || c.ViewPeriod < 0 || c.ConnLoss < 0 || c.ContactWindow < 0 || c.QueryTimeout < 0 || c.GeoTimeout < 0:
		return fmt.Errorf("%w: a negative delay (GossipDelay %v, ViewPeriod %v, ConnLoss %v, ContactWindow %v, QueryTimeout %v, GeoTimeout %v); zero takes the default",
			ErrConfig, c.GossipDelay, c.ViewPeriod, c.ConnLoss, c.ContactWindow, c.QueryTimeout, c.GeoTimeout)
	case c.LookupRTTs < 0:
		return fmt.Errorf("%w: LookupRTTs %d: want 0 (the default) or more", ErrConfig, c.LookupRTTs)
	case c.ConnLow < 0 || c.ConnHigh < 0 || c.ConnGrace < 0:
		return fmt.Errorf("%w: ConnLow %d, ConnHigh %d, ConnGrace %v: want 0 (the default) or more", ErrConfig, c.ConnLow, c.ConnHigh, c.ConnGrace)
	}
	c.ConnLow, c.ConnHigh = cmp.Or(c.ConnLow, DefaultConnLow), cmp.Or(c.ConnHigh, DefaultConnHigh)
	c.ConnGrace = cmp.Or(c.ConnGrace, DefaultConnGrace)
	if c.ConnLow > c.ConnHigh {
		return fmt.Errorf("%w: ConnLow %d above ConnHigh %d", ErrConfig, c.ConnLow, c.ConnHigh)
	}
	n := &c.Node
	n.AnnounceInterval = cmp.Or(n.AnnounceInterval, 5*time.Second)
	n.ReevaluateInterval = cmp.Or(n.ReevaluateInterval, 5*time.Second)
	n.ElectionTick = cmp.Or(n.ElectionTick, 100*time.Millisecond)
	if n.Target == (dhtselect.Target{}) && !n.Geometric {
		n.Target = dhtselect.Target{Fraction: 0.1}
	}
	c.GossipDelay = cmp.Or(c.GossipDelay, DefaultGossipDelay)
	c.ViewPeriod = cmp.Or(c.ViewPeriod, n.ReevaluateInterval/4)
	c.ContactWindow = cmp.Or(c.ContactWindow, DefaultContactWindow)
	c.QueryTimeout = cmp.Or(c.QueryTimeout, DefaultQueryTimeout)
	c.LookupRTTs = cmp.Or(c.LookupRTTs, DefaultLookupRTTs)
	if n.Geometric {
		return c.fillGeo()
	}
	return nil
}

// simNode is one node: its machine and what the simulator knows of it.
type simNode struct {
	// First what every tick and input reads (see next.go), in the first
	// cache lines: most events find their node out of the cache.
	m     *node.Machine
	inc   int // incarnation: bumped by every start
	alive bool
	// The peers it exchanged an election message with, and when last:
	// every message puts both ends, the other end usually out of the
	// cache (with alive, in the same line as it).
	contacts contactSet
	// Ticks when due (next.go): the node's next tick not yet made or
	// skipped (-1 before its first is drawn), and its pending tick event.
	grid    time.Duration
	tickAt  time.Duration
	tickGen uint64
	// What due last read of its machine (NextTick, Serves), while ntOK:
	// until the machine is next stepped, ticked or made to skip ticks.
	ntAt     time.Time
	ntServes bool
	ntOK     bool
	// The first tick of its incarnation: when, and its seq.
	firstAt  time.Duration
	firstSeq uint64
	viewAt   time.Duration // when it last got a view
	id       peer.ID
	state    node.State
	sc       scoped // the cluster-scoped membership (scoped.go)

	idText      string // id.String(), once the trace has needed it
	key         dhtselect.Key
	crashedAt   time.Duration // when it last crashed (not stopped): its peers stay connected to it for ConnLoss
	started     time.Duration // of this incarnation
	announced   bool          // has announced since it started
	flapping    bool          // its last announcement said it flaps,
	super       bool          // and that it is a superpeer
	heardFlap   bool          // what the views say of it
	heardSup    bool
	refreshAt   time.Duration                       // when its routing-table refresh completes
	bootInc     int                                 // the incarnation of its bootstrap peer its dial reached (links.go)
	dialIn      []dialIn                            // a bootstrap peer's: the connections of the dials it got, oldest first (trim)
	trimAt      time.Duration                       // its next trim is due (0: none)
	hard        map[dhtselect.Key]classic.HardState // its disk: quorum state,
	outages     []time.Time                         // and its own outages
	routing     []int
	lastRouting []node.RoutingPeer // the routing table last given to the machine (routingOf)
	rtHeld      []node.RoutingPeer // the one the machine holds (givenRouting)
	// routingOf's answer, lastRouting and rtConn connected, holds while
	// rtVer (bumped when a peer of its table goes up or down) and the
	// simulator's rtAll (bumped by a regroup) are those it was made at,
	// rtMade, and the refresh has not completed since (rtEarly).
	rtVer, rtMade, rtAll uint64
	rtConn               int
	rtEarly, rtOK        bool
	geo                  *geoNode         // the geometric strategy's part (geo.go)
	beacon               dhtselect.Beacon // its last announcement's beacon (epoch defence),
	heardBcn             dhtselect.Beacon // and the views'
}

// component is a side of a partition: who its peers see in their views.
type component struct {
	vis     map[int]time.Duration // node -> expiry (0: alive and heard)
	version uint64
}

// Sim is a simulated network of node machines.
type Sim struct {
	cfg   Config
	rng   *rand.Rand
	now   time.Duration
	q     queue
	nodes []*simNode
	comp  []int  // node -> component
	isUp  []bool // node -> alive (simNode.alive, dense: read for every routing peer)
	comps map[int]*component
	ttl   time.Duration
	epoch uint64 // bumped by every change of who is alive or reachable
	trace uint64 // FNV-1a of every state change, for replay checks
	// hostile holds what the hostile nodes do (geo.go: LieInSearch,
	// KeepTokens); nil reads as none.
	hostile map[int]hostility
	// traceBuf is traceOf's buffer.
	traceBuf []byte

	// Changes is every state change of every node, in order, when
	// Record is set.
	Record  bool
	Changes []Change

	// Log, when set, receives every node's notes (what its machine
	// decided and why).
	Log func(at time.Duration, i int, n node.Note)
	// Watch, when set, sees every Ready of every node before the
	// simulator carries it out (the messages it sends, the members it
	// names as flooders).
	Watch func(at time.Duration, i int, rd node.Ready)

	lookupCache map[lookupKey]lookupAnswer
	index       map[peer.ID]int
	customIDs   bool               // a node's ID is not nodeID's (AddID; indexOf)
	idx         *simIndex          // the oracles' indexes (index.go)
	addrs       map[peer.ID]string // with Node.MaxPerAddr: each node's address group
	stats       Stats
	// obs is what the Observer reads of each node (measure.go), claims
	// Take's count of each cluster's claimers.
	obs    []obsNode
	claims map[obsCluster]int

	// The cluster-scoped membership (scoped.go): the superpeers, and the
	// backbone's version, its pending change, and its lists by component.
	sps map[int]bool
	// rtFree are routing tables to reuse (routingBuf).
	rtFree [][]node.RoutingPeer
	// rtUsers are, for each node, the nodes whose routing tables hold it
	// (routingOf's cache), and rtAll is bumped by every regroup.
	rtUsers [][]int32
	// regBy are, for each node, the nodes that may hold its registration
	// (checked against their registries when used).
	regBy     [][]int32
	rtAll     uint64
	bbVersion uint64
	bbDirty   bool
	bbAt      time.Duration
	bbCache   map[int]bbList
	bbPos     []int32 // summaryChanges's, for each node

	// The geometric strategy's token topics, by key (topics.go), and the
	// nodes that forge token claims (ForgeTokens), sorted.
	topics  map[int]*geoTopic
	forgers []int

	// Ticks when due (next.go): everyTick ticks every node every
	// ElectionTick instead (the driver before it, kept for the geometric
	// strategy and for the tests that compare the two); flipAt and
	// flipGen are the pending backbone delivery's.
	everyTick bool
	// plain turns off the shortcuts that only save time (routingOf's
	// cache), for the tests that check they change nothing.
	plain   bool
	flipAt  time.Duration
	flipGen uint64
	cur     uint64        // the seq of the event being processed
	instAt  time.Duration // the time of the last push, and the count of pushes then
	inst    uint64
}

// Change is a node's new state at a time.
type Change struct {
	At    time.Duration
	Node  int
	State node.State
}

// Stats counts what the simulator did.
type Stats struct {
	Events, Messages, Lost, Failed, Lookups, Views uint64
	// The cluster-scoped membership's registrations (sent) and their
	// answers.
	Registrations, Replies uint64
	// Backbones counts the backbone's deliveries to a superpeer (a new
	// list of every superpeer's summary), Summaries the summaries they
	// held, SummaryChanges those new or changed (or gone) since the list
	// the superpeer got before: what a backbone that carries a summary
	// when it changes delivers.
	Backbones, Summaries, SummaryChanges uint64
	// The geometric strategy's pings, token passes and attach requests.
	GeoPings, GeoPasses, GeoAttaches uint64
	// TokenDeliveries counts the token reports delivered (topics.go):
	// each publication or republication of a report on a topic, once
	// for every other node subscribed to the topic then; split by the
	// receiver's role then, a superpeer or not (an ordinary peer, or a
	// holder not promoted yet).
	TokenDeliveries, SuperpeerDeliveries, OrdinaryDeliveries uint64
	// What hostile nodes did: the passes a keeper did not make
	// (KeepTokens), and the reports and summaries a liar lied in
	// (LieInSearch).
	KeptPasses, LiedReports uint64
	// Dials of the bootstrap peer and refreshes of every bucket that the
	// machines asked for (node.Ready.Dial, node.RefreshAll).
	Dials, FullRefreshes uint64
	// FailedDials counts the dials that reached no bootstrap peer (down,
	// or across a partition), Trims the bootstrap connections a bootstrap
	// peer's connection manager closed (Config.ConnHigh).
	FailedDials, Trims uint64
}

type lookupKey struct {
	key   dhtselect.Key
	comp  int
	skip  int
	epoch uint64
}

type lookupAnswer struct {
	to       int
	deadNear bool
}

// New builds the network; nothing runs before Run.
func New(cfg Config) (*Sim, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Sim{
		cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		comps: map[int]*component{0: {vis: map[int]time.Duration{}}}, ttl: 3 * cfg.Node.AnnounceInterval,
		lookupCache: map[lookupKey]lookupAnswer{}, index: map[peer.ID]int{}, idx: newSimIndex(),
		sps: map[int]bool{},
	}
	for i := range cfg.N {
		var at time.Duration
		if i > 0 && cfg.Stagger > 0 {
			at = time.Duration(s.rng.Int64N(int64(cfg.Stagger)))
		}
		s.addNode(at)
	}
	return s, nil
}

// ID returns node i's peer ID.
func (s *Sim) ID(i int) peer.ID { return s.nodes[i].id }

// N is the number of nodes ever added.
func (s *Sim) N() int { return len(s.nodes) }

// Now is the virtual time.
func (s *Sim) Now() time.Duration { return s.now }

// Alive reports whether node i runs.
func (s *Sim) Alive(i int) bool { return s.nodes[i].alive }

// State is node i's last state.
func (s *Sim) State(i int) node.State { return s.nodes[i].state }

// Machine is node i's machine (nil before it starts, and while it is
// down).
func (s *Sim) Machine(i int) *node.Machine { return s.nodes[i].m }

// Stats returns the counters.
func (s *Sim) Stats() Stats { return s.stats }

// Trace is a digest of every state change so far: two runs with the same
// seed and faults have the same trace.
func (s *Sim) Trace() uint64 { return s.trace }

// Index returns the node with ID id.
func (s *Sim) Index(id peer.ID) (int, bool) { return s.indexOf(id) }

// nodeID names node i: short, readable in traces, and sorted as the
// indices are.
func nodeID(i int) peer.ID { return peer.ID(fmt.Sprintf("n%07d", i)) }

// addNode adds a node that starts at time at.
func (s *Sim) addNode(at time.Duration) int { return s.addNodeID(at, nodeID(len(s.nodes))) }

// addNodeID adds a node with ID id that starts at time at.
func (s *Sim) addNodeID(at time.Duration, id peer.ID) int {
	i := len(s.nodes)
	s.nodes = append(s.nodes, &simNode{id: id, key: dhtselect.KeyOf(id), hard: map[dhtselect.Key]classic.HardState{}})
	if id != nodeID(i) {
		s.customIDs = true // indexOf checks the ID it reads the index from
	}
	s.index[id] = i
	s.idx.added(i, s.nodes[i].key)
	if s.cfg.Node.MaxPerAddr > 0 {
		if s.addrs == nil {
			s.addrs = map[peer.ID]string{}
		}
		s.addrs[id] = fmt.Sprintf("sim/%d", i)
		if s.cfg.Addr != nil {
			s.addrs[id] = s.cfg.Addr(i)
		}
	}
	s.comp = append(s.comp, 0)
	s.isUp = append(s.isUp, false)
	s.obs = append(s.obs, obsNode{})
	s.rtUsers = append(s.rtUsers, nil)
	s.regBy = append(s.regBy, nil)
	s.push(event{at: at, kind: evStart, node: i})
	return i
}

// Add adds a node that joins the network now; it returns its index.
func (s *Sim) Add() int { return s.addNode(s.now) }

// ---- events ----

type evKind uint8

const (
	evStart evKind = iota
	evTick
	evDeliver
	evSendFailed
	evLookup
	evConnDown
	evRefreshed
	evVisible
	evExpire
	evFlap
	evAction
	evRegister
	evRegistered
	evBackbone
	evDialled
	evHearing
)

type event struct {
	at    time.Duration
	seq   uint64
	kind  evKind
	node  int
	inc   int
	other int
	msg   classic.Message
	gen   uint64
	key   dhtselect.Key
	stamp time.Duration
	comp  int
	fn    func(*Sim)
	// A registration's answer (scoped.go).
	ids    []int
	digest node.Digest
}

// push queues e, pushed now. Events at one time run in the order they
// were pushed (by the time they were pushed, then in turn), except that a
// tick when due (pushTick) runs where a tick pushed at the tick before it
// would have: seq encodes the order (see seqOf).
func (s *Sim) push(e event) {
	if s.now != s.instAt {
		s.instAt, s.inst = s.now, 0
	}
	s.inst++
	e.seq = seqOf(e.at-s.now, false, s.inst)
	s.q.push(e)
}

// The bits of an event's seq, which orders the events of one time: the
// time between its push and the event (the later pushed first: the
// shorter delay), a tick's bit (pushTick's ticks after the events pushed
// at the same time), and a count of the pushes at the same time.
const (
	seqCountBits  = 21
	seqTick       = 1 << seqCountBits
	seqDelayShift = seqCountBits + 1
	seqMaxDelay   = 1<<(64-seqDelayShift) - 1 // 73 minutes: longer delays order by count
)

func seqOf(delay time.Duration, tick bool, count uint64) uint64 {
	d := uint64(min(max(delay, 0), seqMaxDelay))
	k := (seqMaxDelay-d)<<seqDelayShift | count&(seqTick-1)
	if tick {
		k |= seqTick
	}
	return k
}

// At runs f at virtual time t (now if t is past).
func (s *Sim) At(t time.Duration, f func(*Sim)) {
	s.push(event{at: max(t, s.now), kind: evAction, fn: f})
}

// After runs f d from now.
func (s *Sim) After(d time.Duration, f func(*Sim)) { s.At(s.now+d, f) }

// Every runs f every d from now until the run ends.
func (s *Sim) Every(d time.Duration, f func(*Sim)) {
	var again func(*Sim)
	again = func(s *Sim) {
		f(s)
		s.After(d, again)
	}
	s.After(d, again)
}

// Run processes events until virtual time until.
func (s *Sim) Run(until time.Duration) {
	for s.q.first() && s.q.peek() <= until {
		e := s.q.pop()
		s.now, s.cur = e.at, e.seq
		s.stats.Events++
		s.process(e)
	}
	s.now = max(s.now, until)
}

// RunFor runs for d of virtual time.
func (s *Sim) RunFor(d time.Duration) { s.Run(s.now + d) }

// RunUntil runs until pred holds (checked every check of virtual time)
// or limit has passed; it reports whether pred held.
func (s *Sim) RunUntil(pred func(*Sim) bool, check, limit time.Duration) bool {
	end := s.now + limit
	for s.now < end {
		if pred(s) {
			return true
		}
		s.Run(min(s.now+check, end))
	}
	return pred(s)
}

func (s *Sim) wall() time.Time { return Epoch.Add(s.now) }

// live reports whether e is for node's current incarnation, alive.
func (s *Sim) live(e event) bool {
	n := s.nodes[e.node]
	return n.alive && n.inc == e.inc
}

func (s *Sim) process(e event) {
	switch e.kind {
	case evStart:
		s.begin(e.node)
	case evTick:
		if !s.live(e) {
			return
		}
		if s.sparse() {
			s.ticked(e)
			return
		}
		s.tick(e.node)
		s.push(event{at: s.now + s.cfg.Node.ElectionTick, kind: evTick, node: e.node, inc: e.inc})
	case evDeliver:
		n := s.nodes[e.node]
		if !n.alive || !s.reachable(e.other, e.node) {
			return // in flight when it crashed or the network split
		}
		s.contact(e.node, e.other)
		s.step(e.node, node.ElectionMessage{Msg: e.msg})
	case evSendFailed:
		if s.live(e) {
			s.step(e.node, node.SendFailed{To: s.nodes[e.other].id, Gen: e.gen})
		}
	case evLookup:
		if s.live(e) {
			sp := peer.ID("")
			if e.other >= 0 {
				sp = s.nodes[e.other].id
			}
			var err error
			if sp == "" {
				err = errors.New("nodesim: no reachable peer")
			}
			s.step(e.node, node.LookupDone{Key: e.key, Superpeer: sp, Queries: s.cfg.LookupRTTs, Err: err})
		}
	case evConnDown:
		if s.live(e) {
			s.step(e.node, node.Conn{Peer: s.nodes[e.other].id, Connected: s.connected(e.node)})
		}
	case evRefreshed:
		if s.live(e) && s.connected(e.node) > 0 {
			s.step(e.node, node.Refreshed{})
		}
	case evDialled:
		if s.live(e) {
			s.step(e.node, node.Dialled{Reached: s.dialBootstrap(e.node)})
		}
	case evVisible:
		if s.live(e) {
			c := s.comps[s.comp[e.node]]
			c.vis[e.node] = 0
			c.version++
		}
	case evExpire:
		if c, ok := s.comps[e.comp]; ok {
			if exp, ok := c.vis[e.node]; ok && exp == e.stamp {
				delete(c.vis, e.node)
				c.version++
			}
		}
	case evFlap:
		if n := s.nodes[e.node]; s.live(e) && (n.heardFlap != n.flapping || n.heardSup != n.super || n.heardBcn != n.beacon) {
			n.heardFlap, n.heardSup, n.heardBcn = n.flapping, n.super, n.beacon
			s.comps[s.comp[e.node]].version++
		}
	case evAction:
		e.fn(s)
	case evRegister:
		s.registered(e.node, e.other, e.inc)
	case evRegistered:
		s.answered(e)
	case evBackbone:
		s.flipBackbone(e)
	case evHearing:
		s.firstHearing(e)
	}
}

// ---- node life ----

func (s *Sim) start(i int) {
	n := s.nodes[i]
	cfg := s.cfg.Node
	cfg.Self, cfg.Bootstrap = n.id, i > 0 || n.inc > 0
	cfg.HardState, cfg.Outages, cfg.Restarted = n.hard, n.outages, n.inc > 0
	m, err := node.New(cfg)
	if err != nil {
		panic(fmt.Sprintf("nodesim: node %d: %v", i, err)) // Config was checked by the first node
	}
	n.m, n.alive, n.announced, n.flapping, n.super, n.beacon = m, true, false, false, false, dhtselect.Beacon{} // a restart registers without a beacon, as the live node does
	n.bootInc, n.dialIn, n.trimAt = 0, nil, 0
	n.grid, n.tickAt, n.ntOK = -1, noEntry, false
	s.isUp[i] = true
	s.upChanged(i)
	n.inc++
	n.started = s.now
	n.viewAt = -s.cfg.ViewPeriod
	n.state = node.State{}
	s.obsState(i, &n.state)
	n.contacts = contactSet{}
	if cfg.Geometric {
		s.geoStart(i)
	} else {
		s.resetScoped(i)
	}
	if n.routing == nil {
		n.routing = s.routingTable(i)
		for _, j := range n.routing {
			s.rtUsers[j] = append(s.rtUsers[j], int32(i))
		}
	}
	n.rtOK = false
	s.epoch++
	s.step(i, node.View{Members: []node.Member{{ID: n.id, Key: n.key}}})
	n.refreshAt = s.now + 2*s.rtt(i, s.nearest(i))
	s.push(event{at: n.refreshAt, kind: evRefreshed, node: i, inc: n.inc})
	phase := time.Duration(s.rng.Int64N(int64(cfg.ElectionTick)))
	if s.sparse() {
		s.firstTick(i, s.now+phase)
		return
	}
	s.push(event{at: s.now + phase, kind: evTick, node: i, inc: n.inc})
}

// Crash stops node i at once: it says nothing, and its peers notice by
// their timeouts, by lost connections (ConnLoss later) and by its leaving
// their views (one membership TTL after it was last heard).
func (s *Sim) Crash(i int) { s.down(i, false) }

// Stop shuts node i down gracefully: its goodbye takes it out of the
// views after GossipDelay.
func (s *Sim) Stop(i int) { s.down(i, true) }

func (s *Sim) down(i int, graceful bool) {
	n := s.nodes[i]
	if !n.alive {
		return
	}
	s.geoDown(i, graceful)
	s.dropHearings(i)
	n.alive, s.isUp[i] = false, false
	s.upChanged(i)
	s.registryDown(i)
	s.wentDown(i)
	n.crashedAt = 0
	if !graceful {
		n.crashedAt = s.now
	}
	s.epoch++
	c := s.comps[s.comp[i]]
	if _, ok := c.vis[i]; ok {
		// Its last announcement was up to one interval ago.
		exp := s.now + s.ttl - time.Duration(s.rng.Int64N(int64(s.cfg.Node.AnnounceInterval)))
		if graceful {
			exp = s.now + s.cfg.GossipDelay
		}
		s.expireAt(s.comp[i], i, exp)
	}
	s.dropConnections(i, func(int) bool { return true })
	// Its machine and its last routing table go: a restart builds new
	// ones, and no event reaches a node that is down. Kept, they were
	// most of the heap after churn (a 10,000-node run grew by 44 MB per
	// 1,000 nodes crashed; a 100,000-node run through 10 minutes at 10 %
	// a minute ended with a live heap of 17 GB).
	if !sameTable(n.rtHeld, n.lastRouting) {
		s.freeRouting(n.rtHeld)
	}
	s.freeRouting(n.lastRouting)
	n.m, n.lastRouting, n.rtHeld, n.rtOK = nil, nil, nil, false
}

// Restart starts a crashed node again with the same ID and its disk (the
// hard state it persisted).
func (s *Sim) Restart(i int) {
	if s.nodes[i].alive {
		return
	}
	s.begin(i)
}

// dropConnections tells the peers connected to i, those cut tells, that
// their connection to i dropped, ConnLoss from now.
func (s *Sim) dropConnections(i int, cut func(j int) bool) {
	for _, j := range s.connectedTo(i) {
		if cut(j) {
			s.push(event{at: s.now + s.connLoss(i, j), kind: evConnDown, node: j, inc: s.nodes[j].inc, other: i})
		}
	}
}

func (s *Sim) isContact(j, i int) bool {
	return s.recentContact(j, i) || s.nodes[j].state.Superpeer == s.nodes[i].id
}

func (s *Sim) connLoss(i, j int) time.Duration {
	if s.cfg.ConnLoss > 0 {
		return s.cfg.ConnLoss
	}
	return s.rtt(i, j)
}

func (s *Sim) contact(i, j int) {
	t, ok := s.nodes[i].contacts.put(j, s.now)
	s.contacted(i, j, ok && s.now-t <= s.cfg.ContactWindow)
	if o := s.nodes[j]; o.alive {
		t, ok := o.contacts.put(i, s.now)
		s.contacted(j, i, ok && s.now-t <= s.cfg.ContactWindow)
	}
}

// ---- partitions ----

// Partition splits the network: each group is a side, and the nodes in
// no group form one more. Peers on the other side leave the views one
// membership TTL later, and their connections drop.
func (s *Sim) Partition(groups ...[]int) {
	side := make([]int, len(s.nodes))
	for g, grp := range groups {
		for _, i := range grp {
			side[i] = g + 1
		}
	}
	s.regroup(side)
}

// Isolate cuts node i off from every other node (a flap of its link).
func (s *Sim) Isolate(i int) { s.Partition([]int{i}) }

// Heal joins all sides again.
func (s *Sim) Heal() { s.regroup(make([]int, len(s.nodes))) }

func (s *Sim) regroup(side []int) {
	old := slices.Clone(s.comp)
	oldComps := s.comps
	s.comp, s.comps = side, map[int]*component{}
	// The backbone of each new side: its superpeers hear each other a
	// gossip delay from now (the lists are cached by side).
	s.bbCache = nil
	s.backboneChanged()
	for c := range slices.Values(side) {
		if s.comps[c] == nil {
			s.comps[c] = &component{vis: map[int]time.Duration{}}
		}
	}
	// Each new side starts from what its nodes saw before; a node now on
	// another side expires from it (unless it already does sooner), and
	// a live one of this side is heard again.
	type pair struct{ from, to int }
	done := map[pair]bool{}
	for i, c := range side {
		nc := s.comps[c]
		if s.nodes[i].alive && s.nodes[i].announced {
			nc.vis[i] = 0
		}
		if p := (pair{old[i], c}); done[p] {
			continue
		} else {
			done[p] = true
		}
		ov := oldComps[old[i]].vis
		for _, j := range slices.Sorted(maps.Keys(ov)) { // in order: the expiries draw from the seed
			exp := ov[j]
			if _, done := nc.vis[j]; done {
				continue
			}
			switch {
			case side[j] == c && s.nodes[j].alive && s.nodes[j].announced:
				nc.vis[j] = 0
			case exp == 0:
				s.expireAtIn(nc, c, j, s.now+s.ttl-time.Duration(s.rng.Int64N(int64(s.cfg.Node.AnnounceInterval))))
			default:
				s.expireAtIn(nc, c, j, exp)
			}
		}
	}
	for _, c := range s.comps {
		c.version = 1 + maxVersion(oldComps)
	}
	s.reindex()
	s.epoch++
	s.rtAll++
	for j, n := range s.nodes {
		if n.sc.bbPend.ver == s.bbVersion && !s.heardBy(j, n.sc.bbPend.at) {
			// Not heard yet: its tick hears its side's list.
			s.undefer(n)
			s.schedule(j)
		}
		if len(n.sc.registry) > 0 {
			n.sc.regDown = true
			s.schedule(j)
		}
	}
	for i, c := range side {
		s.dropConnections(i, func(j int) bool { return old[j] == old[i] && side[j] != c })
	}
}

func maxVersion(m map[int]*component) uint64 {
	var v uint64
	for _, c := range m {
		v = max(v, c.version)
	}
	return v
}

func (s *Sim) expireAt(c, j int, at time.Duration) { s.expireAtIn(s.comps[c], c, j, at) }

func (s *Sim) expireAtIn(comp *component, c, j int, at time.Duration) {
	comp.vis[j] = at
	comp.version++
	s.push(event{at: at, kind: evExpire, node: j, comp: c, stamp: at})
}

func (s *Sim) reachable(i, j int) bool { return s.comp[i] == s.comp[j] }

// connected counts i's routing-table peers that are alive and reachable:
// the host's connections.
func (s *Sim) connected(i int) int {
	c := 0
	for _, j := range s.nodes[i].routing {
		if s.isUp[j] && s.reachable(i, j) {
			c++
		}
	}
	return c
}

// upChanged notes that node i went up or down: the routing tables that
// hold it have changed (routingOf).
func (s *Sim) upChanged(i int) {
	for _, u := range s.rtUsers[i] {
		s.nodes[u].rtVer++
	}
}

// ---- the driver of one machine ----

func (s *Sim) tick(i int) {
	n := s.nodes[i]
	now := s.wall()
	if s.scopedMode() {
		s.registerDue(i)
		s.scopedView(i)
	} else {
		s.geoView(i) // cluster-scoped, as the live node's (geo.go)
	}
	if n.m.Due(now) {
		r := s.routingOf(i)
		n.m.Step(now, r)
		s.givenRouting(n, r.Peers)
	}
	if sp, ok := n.m.LinksDue(now); ok {
		n.m.Step(now, s.linksOf(i, sp))
	}
	if n.geo != nil && n.m.GeoDue(now) {
		n.m.Step(now, s.geoFeed(i))
	}
	n.m.Tick(now)
	s.carryOut(i)
}

func (s *Sim) step(i int, in node.Input) {
	s.sync(i)
	s.nodes[i].m.Step(s.wall(), in)
	s.carryOut(i)
}

// bootstrapOf is node i's bootstrap peer: node 0, and node 0's node 1.
func bootstrapOf(i int) int {
	if i == 0 {
		return 1
	}
	return 0
}

// bootConnected says whether node i is connected to its bootstrap peer:
// its dial reached this incarnation, which is up and on its side (a
// connection outlives a cut that has healed: QUIC's idle timeout is 30 s).
func (s *Sim) bootConnected(i int) bool {
	b := bootstrapOf(i)
	return b < len(s.nodes) && s.nodes[i].bootInc == s.nodes[b].inc && s.isUp[b] && s.reachable(i, b)
}

// dialBootstrap is node i's dial of its bootstrap peer (node.Ready.Dial),
// answered at once (its handshake is not timed): 1 when that peer is up
// and on its side, else 0. A new connection counts towards that peer's
// connection manager (trim).
func (s *Sim) dialBootstrap(i int) int {
	b := bootstrapOf(i)
	if b >= len(s.nodes) || !s.isUp[b] || !s.reachable(i, b) {
		s.stats.FailedDials++
		return 0
	}
	if !s.bootConnected(i) {
		h := s.nodes[b]
		s.nodes[i].bootInc = h.inc
		h.dialIn = append(h.dialIn, dialIn{node: i, inc: s.nodes[i].inc, since: s.now})
		if len(h.dialIn) > s.cfg.ConnHigh && h.trimAt == 0 {
			h.trimAt = s.now + connTrimPeriod
			inc := h.inc
			s.At(h.trimAt, func(s *Sim) { s.trim(b, inc) })
		}
	}
	return 1
}

// bootConns is how many connections of the dials it got bootstrap peer b
// holds.
func (s *Sim) bootConns(b int) int {
	h, c := s.nodes[b], 0
	for _, d := range h.dialIn {
		if h.alive && s.holds(h, d) {
			c++
		}
	}
	return c
}

// holds reports whether bootstrap peer h still holds the connection of
// dial d: its dialler is up in the incarnation that dialled, and was not
// trimmed since (its bootInc is h's incarnation).
func (s *Sim) holds(h *simNode, d dialIn) bool {
	n := s.nodes[d.node]
	return n.alive && n.inc == d.inc && n.bootInc == h.inc
}

// dialIn is a connection of a dial that a bootstrap peer got.
type dialIn struct {
	node, inc int
	since     time.Duration
}

// trim is bootstrap peer b's connection manager (Config.ConnHigh), at
// incarnation inc: over ConnHigh connections of dials, it closes the
// oldest older than ConnGrace, but for its superpeer and its members,
// down to ConnLow; each such peer sees its connection drop. It runs
// again a trim period later while b stays over ConnHigh.
func (s *Sim) trim(b, inc int) {
	h := s.nodes[b]
	if h.inc != inc || !h.alive {
		return
	}
	h.trimAt = 0
	live := h.dialIn[:0]
	for _, d := range h.dialIn {
		if s.holds(h, d) {
			live = append(live, d)
		}
	}

	clear(h.dialIn[len(live):])
	h.dialIn = live
	if len(live) <= s.cfg.ConnHigh {
		return
	}
	keepers := map[peer.ID]bool{h.state.Superpeer: true}
	for _, id := range h.state.Members {
		keepers[id] = true
	}
	protected := func(j int) bool { return keepers[s.nodes[j].id] }
	excess := len(live) - s.cfg.ConnLow
	keep := live[:0]
	for _, d := range live {
		if excess > 0 && s.now-d.since >= s.cfg.ConnGrace && !protected(d.node) {
			excess--
			s.stats.Trims++
			s.nodes[d.node].bootInc = 0
			s.push(event{at: s.now + s.connLoss(b, d.node), kind: evConnDown, node: d.node, inc: d.inc, other: b})
			continue
		}
		keep = append(keep, d)
	}
	clear(live[len(keep):])
	h.dialIn = keep
	if len(keep) > s.cfg.ConnHigh {
		h.trimAt = s.now + connTrimPeriod
		s.At(h.trimAt, func(s *Sim) { s.trim(b, inc) })
	}
}

// linksOf is node i's host connections (node.Links): its table as
// routingOf gives it, the routing peers alive and on its side, its
// bootstrap peer's connection, and whether sp, its superpeer, is alive
// and on its side (a node is connected to its superpeer).
func (s *Sim) linksOf(i int, sp peer.ID) node.Links {
	l := node.Links{Table: len(s.routingOf(i).Peers), Connected: s.connected(i), Bootstrap: s.bootConnected(i)}
	if j, ok := s.indexOf(sp); ok && sp != "" {
		l.Superpeer = s.isUp[j] && s.reachable(i, j)
	}
	return l
}

// indexOf returns the index of the node with ID id: at once for an ID
// that nodeID gave (the index is in it), else from the index map (which
// names the last node given an ID: AddID gives none twice).
func (s *Sim) indexOf(id peer.ID) (int, bool) {
	if i, ok := nodeIndex(id); ok && i < len(s.nodes) && (!s.customIDs || s.nodes[i].id == id) {
		return i, true // (without an ID of AddID's, node i's ID is nodeID(i), which id is)
	}
	i, ok := s.index[id]
	return i, ok
}

// nodeIndex is the index that nodeID wrote into id, if it has nodeID's
// form.
func nodeIndex(id peer.ID) (int, bool) {
	if len(id) != 8 || id[0] != 'n' {
		return 0, false
	}
	i := 0
	for k := 1; k < 8; k++ {
		c := id[k] - '0'
		if c > 9 {
			return 0, false
		}
		i = i*10 + int(c)
	}
	return i, true
}

// routingOf is node i's routing table: before its refresh completes, only
// its bootstrap peer (the first live one of its table), as kad-dht has
// only the peers it was connected to.
func (s *Sim) routingOf(i int) node.Routing {
	r := node.Routing{Addrs: s.addrs}
	n := s.nodes[i]
	early := s.now < n.refreshAt
	if !s.plain && n.rtOK && n.rtMade == n.rtVer && n.rtAll == s.rtAll && n.rtEarly == early {
		// No peer of its table went up or down, and no side changed,
		// since the answer was made: it stands.
		r.Peers, r.Connected = n.lastRouting, n.rtConn
		return r
	}
	r, n.rtOK = s.buildRouting(i, r, early)
	n.rtMade, n.rtAll, n.rtEarly, n.rtConn = n.rtVer, s.rtAll, early, r.Connected
	return r
}

// buildRouting is routingOf's answer made afresh, and whether it is
// lastRouting (and may be given again while nothing changed).
func (s *Sim) buildRouting(i int, r node.Routing, early bool) (node.Routing, bool) {
	n := s.nodes[i]
	table := n.routing
	if early {
		k := slices.IndexFunc(table, func(j int) bool { return s.isUp[j] && s.reachable(i, j) })
		if k < 0 {
			return r, false
		}
		table = table[k : k+1]
	}
	// The table given last, when it is the same (kept by the machine:
	// not built again). The table is the whole or its first live peer:
	// its length and first peer tell which.
	last := n.lastRouting
	shape := len(last) == len(table) && (len(table) == 0 || last[0].ID == s.nodes[table[0]].id)
	same := shape
	for k, j := range table {
		ok := s.isUp[j] && s.reachable(i, j)
		if ok {
			r.Connected++
		}
		same = same && last[k].Connected == ok
	}
	if same {
		r.Peers = last
		return r, true
	}
	if shape {
		// The same peers, some connected or not since: the last table
		// with that changed (the peers' IDs and keys not read again).
		r.Peers = append(s.routingBuf(len(last)), last...)
		for k, j := range table {
			r.Peers[k].Connected = s.isUp[j] && s.reachable(i, j)
		}
		s.setLastRouting(n, r.Peers)
		return r, true
	}
	r.Peers = s.routingBuf(len(table))[:len(table)]
	for k, j := range table {
		r.Peers[k] = node.RoutingPeer{ID: s.nodes[j].id, Connected: s.isUp[j] && s.reachable(i, j), Closer: true, Key: s.nodes[j].key}
	}
	s.setLastRouting(n, r.Peers)
	return r, true
}

// The routing tables' memory is reused (they were a third of what the
// simulator allocated): a table that is neither a node's lastRouting
// nor the one its machine holds (rtHeld: node.Machine.HoldsRouting, the
// last it took) goes to rtFree, and a new table takes its place there.
// The machine compares a table it is given with the one it holds, and
// takes it as the same when it is that one (samePeers): a table it
// holds, or may be given again, is never written to.

// routingBuf is an empty table with room for n peers: a free one, or a
// new one with room for a few more (the tables' sizes differ by a few
// peers, and a free table then fits more of them).
func (s *Sim) routingBuf(n int) []node.RoutingPeer {
	for k := len(s.rtFree) - 1; k >= 0 && k >= len(s.rtFree)-16; k-- {
		if b := s.rtFree[k]; cap(b) >= n {
			s.rtFree[k] = s.rtFree[len(s.rtFree)-1]
			s.rtFree = s.rtFree[:len(s.rtFree)-1]
			return b[:0]
		}
	}
	if n >= 16 {
		n = (n + 15) &^ 15 // (a multiple of 64 held a tenth more of the heap)
	}
	return make([]node.RoutingPeer, 0, n)
}

// freeRouting gives table t back (a small one, a joiner's first, goes
// to the garbage collector, as does one that finds the pool full).
func (s *Sim) freeRouting(t []node.RoutingPeer) {
	if cap(t) >= 16 && len(s.rtFree) < 256 {
		clear(t[:cap(t)]) // let its IDs go
		s.rtFree = append(s.rtFree, t[:0])
	}
}

// sameTable reports whether a and b are one table (the same memory).
func sameTable(a, b []node.RoutingPeer) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// setLastRouting makes t node n's lastRouting, and frees the one before
// unless its machine holds it.
func (s *Sim) setLastRouting(n *simNode, t []node.RoutingPeer) {
	if old := n.lastRouting; !sameTable(old, t) && !sameTable(old, n.rtHeld) {
		s.freeRouting(old)
	}
	n.lastRouting = t
}

// givenRouting notes that node n's machine was given the table t: if it
// took it, the one it held before is freed, unless it is lastRouting.
func (s *Sim) givenRouting(n *simNode, t []node.RoutingPeer) {
	if sameTable(t, n.rtHeld) || !n.m.HoldsRouting(t) {
		return
	}
	if old := n.rtHeld; !sameTable(old, n.lastRouting) {
		s.freeRouting(old)
	}
	n.rtHeld = t
}

// carryOut does what node i's machine asks.
func (s *Sim) carryOut(i int) {
	n := s.nodes[i]
	n.ntOK = false // stepped or ticked
	if n.geo == nil && n.m.Quiet() {
		// Nothing to carry out (most inputs and ticks): what Ready
		// would return is the state it has.
		if s.Watch != nil {
			s.Watch(s.now, i, node.Ready{State: n.state})
		}
		s.obsElected(i)
		s.schedule(i)
		return
	}
	rd := n.m.Ready()
	if s.Watch != nil {
		s.Watch(s.now, i, rd)
	}
	if s.Log != nil {
		for _, note := range rd.Notes {
			s.Log(s.now, i, note)
		}
	}
	if rd.HardState != nil {
		n.hard = rd.HardState // synced to its disk before the messages leave
	}
	if rd.Outages != nil {
		n.outages = rd.Outages
	}
	s.obsElected(i)
	for _, o := range rd.Messages {
		s.send(i, o)
	}
	for _, l := range rd.Lookups {
		s.lookup(i, l)
	}
	if rd.Dial {
		s.stats.Dials++
		s.push(event{at: s.now, kind: evDialled, node: i, inc: n.inc})
	}
	switch rd.Refresh {
	case node.RefreshTable:
		s.push(event{at: s.now + 2*s.rtt(i, s.nearest(i)), kind: evRefreshed, node: i, inc: n.inc})
	case node.RefreshAll:
		s.stats.FullRefreshes++ // the oracle's table is the same after it
	}
	if a := rd.Announce; a != nil {
		if !n.announced {
			n.announced = true
			s.push(event{at: s.now + s.cfg.GossipDelay, kind: evVisible, node: i, inc: n.inc})
		}
		if a.Flapping != n.flapping || a.Superpeer != n.super || a.Beacon != n.beacon {
			n.flapping, n.super, n.beacon = a.Flapping, a.Superpeer, a.Beacon
			n.sc.annVer++
			n.sc.regAt = s.now // a new record: registered at once
			s.push(event{at: s.now + s.cfg.GossipDelay, kind: evFlap, node: i, inc: n.inc})
		}
	}
	if rd.StateChanged {
		prev := n.state
		n.state = rd.State
		s.obsState(i, &n.state)
		s.named(i)
		if s.scopedMode() {
			s.scopedChanged(i, prev)
		}
		if s.Record {
			s.Changes = append(s.Changes, Change{At: s.now, Node: i, State: rd.State})
		}
		s.trace = s.traceOf(i, rd.State)
	}
	if n.geo != nil {
		s.geoCarryOut(i, rd.Geo)
		s.scheduleGeo(i)
	}
	s.schedule(i)
}

// traceOf is the trace after a change of node i's state to st now: the
// FNV-1a hash of the text traceText writes.
func (s *Sim) traceOf(i int, st node.State) uint64 {
	sp := ""
	if j := s.idx.names[i]; j >= 0 { // (named has just indexed st.Superpeer)
		n := s.nodes[j]
		if n.idText == "" {
			n.idText = n.id.String()
		}
		sp = n.idText
	} else if st.Superpeer != "" {
		sp = st.Superpeer.String()
	}
	s.traceBuf = traceText(s.traceBuf[:0], s.trace, s.now, i, sp, st.Role.String(), st.K, st.ClusterKey)
	h := uint64(fnvOffset64)
	for _, c := range s.traceBuf {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return h
}

// FNV-1a's 64-bit parameters (hash/fnv's).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// traceText appends to b what the trace hashes of a change of node i at
// now: the trace so far in hexadecimal, the time in nanoseconds, i, the
// superpeer's ID (as peer.ID's String writes it), the role and k, and the
// first four bytes of the cluster key in hexadecimal; space-separated, as
// fmt's "%x %d %d %s %s %d %x" would write them (TestTraceText).
func traceText(b []byte, trace uint64, now time.Duration, i int, sp, role string, k int, key dhtselect.Key) []byte {
	b = strconv.AppendUint(b, trace, 16)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(now), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, ' ')
	b = append(b, sp...)
	b = append(b, ' ')
	b = append(b, role...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, ' ')
	return hex.AppendEncode(b, key[:4])
}

func (s *Sim) send(i int, o node.Outgoing) {
	j, ok := s.indexOf(peer.ID(o.Msg.To))
	if !ok {
		return
	}
	s.stats.Messages++
	s.contact(i, j)
	d := s.rtt(i, j) / 2
	if s.cfg.Jitter > 0 {
		d += time.Duration(s.rng.Int64N(int64(s.cfg.Jitter)))
	}
	if !s.nodes[j].alive || !s.reachable(i, j) {
		s.stats.Failed++
		s.push(event{at: s.now + min(2*d, o.Deadline), kind: evSendFailed, node: i, inc: s.nodes[i].inc, other: j, gen: o.Gen})
		return
	}
	if s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
		s.stats.Lost++
		return
	}
	msg := o.Msg
	msg.From = classic.ID(s.nodes[i].id)
	msg.IDs = slices.Clone(msg.IDs)
	s.push(event{at: s.now + d, kind: evDeliver, node: j, other: i, msg: msg})
}

// Inject delivers msg to node to as if node from had sent it now, half
// their RTT later (From and To are set from the two nodes): what a hostile
// member sends besides its machine's own messages, for tests of what one
// member can make the others believe. It is lost if to is down or
// unreachable from from when it arrives.
func (s *Sim) Inject(from, to int, msg classic.Message) {
	msg.From, msg.To = classic.ID(s.nodes[from].id), classic.ID(s.nodes[to].id)
	msg.IDs = slices.Clone(msg.IDs)
	s.push(event{at: s.now + s.rtt(from, to)/2, kind: evDeliver, node: to, other: from, msg: msg})
}

// lookup answers a lookup by the oracle (see the package comment).
func (s *Sim) lookup(i int, l node.LookupRequest) {
	s.stats.Lookups++
	skip := -1
	if l.SkipSelf {
		skip = i
	}
	lk := lookupKey{key: l.Key, comp: s.comp[i], skip: skip, epoch: s.epoch}
	a, ok := s.lookupCache[lk]
	if s.addrs != nil {
		// Whom a lookup may ask depends on the asker's view: no cache.
		a = s.closest(i, l.Key, skip, func(j int) bool { return l.MayAsk(s.nodes[j].id, true) })
	} else if !ok {
		a = s.closest(i, l.Key, skip, nil)
		if len(s.lookupCache) > 1<<16 {
			clear(s.lookupCache)
		}
		s.lookupCache[lk] = a
	}
	far := a.to
	if far < 0 || far == i {
		far = s.nearest(i)
	}
	delay := time.Duration(s.cfg.LookupRTTs) * s.rtt(i, far)
	if a.deadNear {
		wait := s.cfg.QueryTimeout
		if d := s.nodes[i].m.Detection(); d > 0 {
			wait = min(wait, d)
		}
		delay += wait
	}
	s.push(event{at: s.now + delay, kind: evLookup, node: i, inc: s.nodes[i].inc, other: a.to, key: l.Key})
}

// closest is the live node reachable from i closest to key (not skip, and
// one that may allows when may is set: a lookup asks no other),
// and whether a closer node is dead or unreachable but not yet forgotten.
func (s *Sim) closest(i int, key dhtselect.Key, skip int, may func(j int) bool) lookupAnswer {
	ok := func(j int) bool { return j != skip && (j == i || may == nil || may(j)) }
	c := s.comp[i]
	best := s.idx.upIn(c).nearest(&key, ok)
	// The closest ghost, if closer: dropping those that are no longer.
	var stale []int
	ghost := s.idx.ghostIn(c).nearest(&key, func(j int) bool {
		if best >= 0 && !dhtselect.Closer(s.nodes[j].key, s.nodes[best].key, key) {
			return true // no closer ghost: stop here
		}
		if !s.isGhost(c, j) {
			stale = append(stale, j)
			return false
		}
		return ok(j)
	})
	for _, j := range stale {
		s.idx.ghostIn(c).remove(s.idx.keys, j)
	}
	deadNear := ghost >= 0 && (best < 0 || dhtselect.Closer(s.nodes[ghost].key, s.nodes[best].key, key))
	return lookupAnswer{to: best, deadNear: deadNear}
}

// ---- latency and the routing oracle ----

func (s *Sim) rtt(i, j int) time.Duration {
	if i == j || i < 0 || j < 0 {
		return time.Millisecond
	}
	m := s.cfg.Latency
	if m == nil {
		return DefaultRTT
	}
	d, ok := m.RTT(i%m.N(), j%m.N())
	if !ok || d <= 0 {
		return DefaultRTT
	}
	return d
}

// nearest is the first of i's routing peers (i itself when it has none).
func (s *Sim) nearest(i int) int {
	if r := s.nodes[i].routing; len(r) > 0 {
		return r[0]
	}
	return i
}

// routingTable is node i's routing table as kad-dht's buckets hold it:
// for each common-prefix length c with i's key, up to
// dhtselect.BucketSize of the nodes that share exactly c leading bits with
// it (those nearest a key drawn from the seed in that part of the key
// space), for c up to that of i's nearest node. A bucket is full wherever
// that part holds more nodes than it has room for: kad-dht keeps the
// first it meets, the simulator a random-looking choice.
func (s *Sim) routingTable(i int) []int {
	self := s.nodes[i].key
	deepest := -1
	s.idx.all.walk(&self, func(j int) bool {
		if j == i {
			return true
		}
		deepest = cpl(self, s.nodes[j].key)
		return false
	})
	out := make([]int, 0, dhtselect.BucketSize*(deepest+1))
	for c := 0; c <= deepest; c++ {
		t := s.bucketTarget(self, c)
		got := 0
		s.idx.all.walk(&t, func(j int) bool {
			if j == i || cpl(self, s.nodes[j].key) != c {
				return false // out of the bucket's part: the rest is farther
			}
			out = append(out, j)
			got++
			return got < dhtselect.BucketSize
		})
	}
	return out
}

// bucketTarget is a key that shares exactly c leading bits with self, the
// rest drawn from the seed.
func (s *Sim) bucketTarget(self dhtselect.Key, c int) dhtselect.Key {
	var t dhtselect.Key
	for b := range t {
		t[b] = byte(s.rng.Uint32())
	}
	for b := 0; b < c; b++ { // the shared prefix
		mask := byte(0x80) >> (b % 8)
		t[b/8] = t[b/8]&^mask | self[b/8]&mask
	}
	mask := byte(0x80) >> (c % 8) // and the first bit that differs
	t[c/8] = t[c/8]&^mask | ^self[c/8]&mask
	return t
}

// cpl is the length of the prefix that a and b share.
func cpl(a, b dhtselect.Key) int {
	for i := range a {
		if x := a[i] ^ b[i]; x != 0 {
			return i*8 + bits.LeadingZeros8(x)
		}
	}
	return dhtselect.KeyBits
}

// ---- ticks when due ----

// The DHT strategy's nodes are ticked only when due (node.Machine's
// NextTick): at the first of their ticks, every ElectionTick from a phase
// drawn at the start, at or after the machine's NextTick or when the
// driver's part of the tick falls due (a registration, a view to give, a
// backbone to hear: see due). Before every input the machine makes up
// the ticks skipped (node.Machine.Skip), so that it decides exactly as
// when ticked every tick (TestTicksWhenDue). The geometric strategy ticks
// every node every tick.

// sparse reports whether the nodes are ticked only when due.
func (s *Sim) sparse() bool { return !s.everyTick && s.scopedMode() }

// firstTick makes node i's first tick, at t (pushed now, as every tick
// is when every node ticks), the start of its grid.
func (s *Sim) firstTick(i int, t time.Duration) {
	n := s.nodes[i]
	n.grid, n.tickGen = t, n.tickGen+1
	s.push(event{at: t, kind: evTick, node: i, inc: n.inc, gen: n.tickGen})
	n.tickAt, n.firstAt, n.firstSeq = t, t, seqOf(t-s.now, false, s.inst)
	if s.bbDirty {
		// It may be the first to tick after the backbone's change.
		if g := s.gridFrom(i, s.bbAt); g < s.flipAt {
			s.pushFlip(i, g)
		}
	}
}

// tickSeq is the seq of node i's tick at g: where a tick pushed at the
// tick before would run, or the first tick's.
func (s *Sim) tickSeq(i int, g time.Duration) uint64 {
	n := s.nodes[i]
	if g == n.firstAt {
		return n.firstSeq
	}
	return seqOf(s.cfg.Node.ElectionTick, true, uint64(i))
}

// pushTick moves node i's next tick to g (a tick of its grid).
func (s *Sim) pushTick(i int, g time.Duration) {
	n := s.nodes[i]
	n.tickGen++
	n.tickAt = g
	s.q.push(event{at: g, seq: s.tickSeq(i, g), kind: evTick, node: i, inc: n.inc, gen: n.tickGen})
}

// ticked is node i's tick event when the nodes are ticked when due.
func (s *Sim) ticked(e event) {
	n := s.nodes[e.node]
	if e.gen != n.tickGen {
		return // moved forward since
	}
	if g, idle := s.idleTick(e.node); idle {
		// Not due any more (an input moved what it waited for on): the
		// tick would only count, and is made up with the others.
		n.tickAt = noEntry
		s.pushTick(e.node, g)
		return
	}
	s.sync(e.node)
	n.grid, n.tickAt = s.now+s.cfg.Node.ElectionTick, noEntry
	s.tick(e.node)
	s.schedule(e.node)
}

// idleTick reports whether node i's tick now would only count: it is not
// due (see due); and if so, its next tick that would not.
func (s *Sim) idleTick(i int) (time.Duration, bool) {
	if s.plain {
		return 0, false
	}
	d := s.due(i)
	if d <= s.now {
		return 0, false
	}
	// (NextTick is after now, and so are the next evaluation and Links:
	// Due and LinksDue are false.)
	return s.gridFrom(i, d), true
}

// sync makes node i's machine make up the ticks of its grid before now
// that it was not given.
func (s *Sim) sync(i int) {
	n := s.nodes[i]
	if !s.sparse() || !n.alive || n.grid < 0 || n.grid > s.now {
		return
	}
	p := s.cfg.Node.ElectionTick
	k := (s.now - n.grid + p - 1) / p // its ticks before now,
	if g := n.grid + k*p; g == s.now && n.tickAt != g && s.tickSeq(i, g) < s.cur {
		k++ // and the one now if it would have run before this event
	}
	if k == 0 {
		return
	}
	last := n.grid + (k-1)*p
	n.ntOK = false
	t := n.grid // the first tick not made yet
	if n.sc.bbPrev.ver != 0 || n.sc.bbPend.ver != 0 {
		t = s.giveHeardTo(i, t, last, &n.sc.bbPrev)
		t = s.giveHeardTo(i, t, last, &n.sc.bbPend)
	}
	n.m.Skip(int((last-t)/p+1), s.wallAt(last))
	n.grid += k * p
}

// giveHeardTo gives node i's machine the backbone pd it heard at a tick
// not made (deferHearing), if that tick is among those sync makes up, t
// to last: the ticks before it are made first, and those from it on
// after. It returns the first tick not made yet.
func (s *Sim) giveHeardTo(i int, t, last time.Duration, pd *bbPending) time.Duration {
	if pd.ver == 0 || pd.at > last {
		return t
	}
	if pd.at < t {
		panic(fmt.Sprintf("nodesim: node %d heard the backbone at %v, before its ticks made up from %v", i, pd.at, t))
	}
	p := s.cfg.Node.ElectionTick
	if c := (pd.at - t) / p; c > 0 {
		s.nodes[i].m.Skip(int(c), s.wallAt(pd.at-p))
	}
	at := pd.at
	s.giveHeard(i, pd)
	return at
}

func (s *Sim) wallAt(t time.Duration) time.Time { return Epoch.Add(t) }

// gridFrom is node i's first tick at or after t.
func (s *Sim) gridFrom(i int, t time.Duration) time.Duration {
	n := s.nodes[i]
	if t <= n.grid {
		return n.grid
	}
	p := s.cfg.Node.ElectionTick
	return n.grid + (t-n.grid+p-1)/p*p
}

// tickFrom is node i's first tick at or after t that has not run: its
// tick now has, if it would have run before the event under way.
func (s *Sim) tickFrom(i int, t time.Duration) time.Duration {
	g := s.gridFrom(i, t)
	if g == s.now && s.nodes[i].tickAt != g && s.tickSeq(i, g) < s.cur {
		g += s.cfg.Node.ElectionTick
	}
	return g
}

// schedule makes node i's next tick the first at or after it is due
// (unless one is sooner).
func (s *Sim) schedule(i int) {
	n := s.nodes[i]
	if !s.sparse() || !n.alive || n.grid < 0 {
		return
	}
	d := s.due(i)
	if d >= noEntry/2 {
		return
	}
	if g := s.tickFrom(i, max(d, s.now)); g < n.tickAt {
		s.pushTick(i, g)
	}
}

// due is when node i's next tick does more than count: when its machine
// needs one (NextTick), its next registration (at once for a joiner whose
// registrar changed: registerDue), and its next view (scopedView: for a
// member, a roster brought something new, or its oldest peer expires;
// for a node that serves, servedDue); and for a superpeer, at once when
// the backbone has a version it has not heard.
func (s *Sim) due(i int) time.Duration {
	n := s.nodes[i]
	if !n.ntOK {
		n.ntAt, n.ntServes, n.ntOK = n.m.NextTick(), n.m.Serves(), true
	}
	serves := n.ntServes || n.state.Role == node.RoleSuperpeer
	if serves && s.plain {
		return 0
	}
	hear := n.state.Role == node.RoleSuperpeer && n.sc.bbVer != s.bbVersion
	if pd := n.sc.bbPend; pd.ver == s.bbVersion && s.heardBy(i, pd.at) {
		hear = false // heard, and given at its next input or tick
	} else if !hear {
		s.undefer(n) // no longer a superpeer: it will not hear it
	}
	d := n.sc.regAt
	if n.state.Role == node.RoleUnknown && n.m.Registrar() != n.sc.regWith {
		d = 0 // a joiner's new registrar: registerDue registers at once
	}
	if t := n.ntAt; t.IsZero() {
		d = 0
	} else {
		d = min(d, t.Sub(Epoch))
	}
	v := noEntry
	switch {
	case serves:
		v = s.servedDue(i)
	case n.sc.rosterV != n.sc.seenVer || n.viewAt < 0:
		v = 0
	case n.sc.knownMin != noEntry:
		v = n.sc.knownMin + s.ttl + 1
	}
	if v != noEntry {
		d = min(d, max(v, n.viewAt+s.cfg.ViewPeriod))
	}
	for _, pd := range [2]*bbPending{&n.sc.bbPrev, &n.sc.bbPend} {
		if pd.ver != 0 && pd.ver != s.bbVersion || pd.ver == s.bbVersion && !hear {
			d = min(d, pd.settle) // a settled evaluation a backbone not given yet makes due
		}
	}
	if hear {
		if !s.deferHearing(i, d) {
			return 0 // a backbone to hear
		}
		d = min(d, n.sc.bbPend.settle)
	}
	return d
}

// servedDue is when the view of node i, which serves, may change
// (scopedView gives it no sooner than a view period after the last): at
// once when its registrations or rosters changed since its last view, or
// a node in its registry went down or to another side since rosterOf
// last built its roster (which drops it); else just after its oldest
// registration expires, as rosterOf last found it (registrations renewed
// since only make that early: the tick then finds nothing to drop).
func (s *Sim) servedDue(i int) time.Duration {
	n := s.nodes[i]
	c := &n.sc.rc
	if n.viewAt < 0 || n.sc.regDown || c.ids == nil || c.regVer != n.sc.regVer || n.sc.regVer<<32|n.sc.rosterV != n.sc.seenVer {
		return 0
	}
	if c.until == noEntry {
		return noEntry
	}
	return c.until + 1
}

// scheduleFlip makes the backbone's change heard at the first tick of a
// live node at or after t, as when every node ticks (scopedView: the
// first node to tick after bbAt bumps the backbone's version).
func (s *Sim) scheduleFlip(t time.Duration) {
	if !s.sparse() {
		return
	}
	best, at := -1, noEntry
	for j, n := range s.nodes {
		if n.alive && n.grid >= 0 {
			if g := s.gridFrom(j, t); g < at {
				best, at = j, g
			}
		}
	}
	s.flipGen++
	s.flipAt = at
	if best >= 0 {
		s.pushFlip(best, at)
	}
}

// pushFlip makes node i's tick at g hear the backbone's change: an event
// that runs where that tick does (if it runs, it hears the change itself).
func (s *Sim) pushFlip(i int, g time.Duration) {
	s.flipGen++
	s.flipAt = g
	s.q.push(event{at: g, seq: s.tickSeq(i, g), kind: evBackbone, node: i, inc: s.nodes[i].inc, gen: s.flipGen})
}

// flipBackbone is the tick that hears the backbone's change.
func (s *Sim) flipBackbone(e event) {
	if e.gen != s.flipGen || !s.bbDirty {
		return
	}
	if !s.live(e) {
		s.scheduleFlip(s.now) // it went down meanwhile: the next to tick
		return
	}
	if s.now >= s.bbAt {
		s.bbDirty = false
		s.bbVersion++
		s.backboneHeard(-1)
	}
}
