package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/latency"
)

// Defaults for Config fields left zero.
const (
	// DefaultTickInterval is the virtual time between two ticks of a node.
	DefaultTickInterval = 10 * time.Millisecond
	// DefaultRTT is the round-trip time between every pair of nodes when
	// Config.Latency is nil.
	DefaultRTT = 100 * time.Millisecond
)

// ErrConfig is wrapped by every error New returns for a bad Config.
var ErrConfig = errors.New("sim: invalid config")

// Factory builds the machine of node i, whose ID is id. It is called once per
// node by New (restarted false) and again by each Restart (restarted true).
// A factory that needs randomness should derive it from its own seed and i
// (and count restarts itself), never from global state.
type Factory func(i int, id classic.ID, restarted bool) classic.Machine

// Config describes a simulated network.
type Config struct {
	// IDs names the nodes: node i has ID IDs[i]. They must be distinct and
	// not classic.None. Required.
	IDs []classic.ID
	// Factory builds the machines. Required.
	Factory Factory
	// Seed is the only source of randomness of the simulator: tick phases,
	// jitter and loss. The same Config and Seed give the same run.
	Seed uint64
	// TickInterval is the virtual time between ticks of a node; each node
	// starts at a random phase in [0, TickInterval). Zero means
	// DefaultTickInterval; a negative value disables ticks.
	TickInterval time.Duration
	// Latency gives the RTT between hosts; a message from node i to node j
	// takes RTT(HostOf(i), HostOf(j))/2 plus jitter. Nil means
	// latency.Constant(len(IDs), DefaultRTT).
	Latency *latency.Matrix
	// HostOf maps a node to its host in Latency. Nil means the identity,
	// which needs Latency.N() >= len(IDs). Two nodes on one host are 0
	// apart.
	HostOf func(i int) int
	// MissingRTT is used for pairs whose RTT the matrix lacks. When it is
	// zero, a matrix with missing entries is rejected (see
	// latency.Matrix.FillMissing).
	MissingRTT time.Duration
	// Jitter adds a delay drawn uniformly from [0, Jitter) to every message;
	// messages between the same pair can then be reordered.
	Jitter time.Duration
	// Loss is the probability, in [0, 1), that a message is silently lost.
	// It is drawn when the message arrives, after the check for a crashed or
	// unreachable destination, so a send to a dead node is always reported
	// with MsgUnreachable.
	Loss float64
}

// EventKind says what Step did.
type EventKind uint8

// Kinds of Event.
const (
	// Delivered: Msg was delivered to Node. An injected MsgUnreachable is
	// delivered like any other message.
	Delivered EventKind = iota + 1
	// Dropped: Msg, addressed to Node, was dropped because Node had crashed
	// or was unreachable from the sender; a MsgUnreachable is on its way
	// back to the sender.
	Dropped
	// Lost: Msg, addressed to Node, was lost at random.
	Lost
	// Ticked: Node ticked.
	Ticked
	// Acted: an action scheduled with At ran; Node is -1.
	Acted
)

// String returns the kind's name, such as "delivered".
func (k EventKind) String() string {
	switch k {
	case Delivered:
		return "delivered"
	case Dropped:
		return "dropped"
	case Lost:
		return "lost"
	case Ticked:
		return "ticked"
	case Acted:
		return "acted"
	}
	return "unknown"
}

// Event describes one step of the simulation, as returned by Step.
type Event struct {
	At   time.Duration   // virtual time of the event
	Kind EventKind       // what happened
	Node int             // the node that received, would have received, or ticked
	Msg  classic.Message // the message, for Delivered, Dropped and Lost
}

// Stats counts what happened so far.
type Stats struct {
	// Events is the number of events processed (deliveries, drops, losses,
	// ticks, actions).
	Events uint64
	// Ticks is the number of Tick calls.
	Ticks uint64
	// Sent counts the messages the machines emitted (and Send injected),
	// and SentByType splits them by type.
	Sent       uint64
	SentByType map[classic.MsgType]uint64
	// Delivered counts Step calls, including injected MsgUnreachable.
	Delivered uint64
	// Lost counts messages lost at random.
	Lost uint64
	// Dropped counts messages dropped because the destination had crashed
	// (or restarted) or was partitioned or cut from the sender.
	Dropped uint64
	// Unreachable counts MsgUnreachable injected back into senders; it can be
	// below Dropped when the sender crashed meanwhile.
	Unreachable uint64
	// Misaddressed counts messages to an ID that is no node; they vanish.
	Misaddressed uint64
}

// Sim is a deterministic discrete-event simulation of a network of machines.
// It is not safe for concurrent use.
type Sim struct {
	cfg      Config
	n        int
	ids      []classic.ID
	index    map[classic.ID]int32
	lat      *latency.Matrix
	host     []int32
	machines []classic.Machine
	alive    []bool
	inc      []uint32 // incarnation, bumped by Crash and Restart
	state    []classic.State
	rng      *rand.Rand
	now      time.Duration
	seq      uint64
	q        queue

	msgs    []classic.Message // message slots referenced by events
	freeMsg []int32
	acts    []func(*Sim)
	freeAct []int32
	group   []int32 // partition label per node; nil: no partition
	cuts    map[[2]int]struct{}
	tr      *tracker
	stats   Stats
	byType  [256]uint64
	changes []Change
	faults  []Fault
	sends   []SendRun
	wheel   tickWheel // ticks; empty when disabled
}

// New builds a simulation at virtual time 0: it creates every node's machine
// with the factory, records its initial state and schedules its ticks. No
// node campaigns; call Campaign (or schedule it with At) to start an
// election.
func New(cfg Config) (*Sim, error) {
	n := len(cfg.IDs)
	if n == 0 {
		return nil, fmt.Errorf("%w: no IDs", ErrConfig)
	}
	if cfg.Factory == nil {
		return nil, fmt.Errorf("%w: Factory is nil", ErrConfig)
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = DefaultTickInterval
	}
	if cfg.Loss < 0 || cfg.Loss >= 1 || cfg.Loss != cfg.Loss {
		return nil, fmt.Errorf("%w: Loss %v is not in [0, 1)", ErrConfig, cfg.Loss)
	}
	if cfg.Jitter < 0 || cfg.MissingRTT < 0 {
		return nil, fmt.Errorf("%w: negative Jitter (%v) or MissingRTT (%v)", ErrConfig, cfg.Jitter, cfg.MissingRTT)
	}
	s := &Sim{
		cfg: cfg, n: n,
		ids:      slices.Clone(cfg.IDs),
		index:    make(map[classic.ID]int32, n),
		lat:      cfg.Latency,
		host:     make([]int32, n),
		machines: make([]classic.Machine, n),
		alive:    make([]bool, n),
		inc:      make([]uint32, n),
		state:    make([]classic.State, n),
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
	}
	s.wheel.interval = cfg.TickInterval
	for i, id := range s.ids {
		if id == classic.None {
			return nil, fmt.Errorf("%w: IDs[%d] is empty", ErrConfig, i)
		}
		if j, dup := s.index[id]; dup {
			return nil, fmt.Errorf("%w: IDs[%d] and IDs[%d] are both %q", ErrConfig, j, i, id)
		}
		s.index[id] = int32(i)
	}
	if s.lat == nil {
		s.lat = latency.Constant(n, DefaultRTT)
	}
	for i := range s.host {
		h := i
		if cfg.HostOf != nil {
			h = cfg.HostOf(i)
		}
		if h < 0 || h >= s.lat.N() {
			return nil, fmt.Errorf("%w: node %d is on host %d, but the latency matrix has %d hosts (set HostOf)",
				ErrConfig, i, h, s.lat.N())
		}
		s.host[i] = int32(h)
	}
	if s.lat.Missing() > 0 && cfg.MissingRTT == 0 {
		return nil, fmt.Errorf("%w: the latency matrix misses %d pairs; set MissingRTT or use FillMissing",
			ErrConfig, s.lat.Missing())
	}
	s.tr = newTracker(s.ids, s.index, nil)
	for i := range s.machines {
		s.machines[i] = cfg.Factory(i, s.ids[i], false)
		if s.machines[i] == nil {
			return nil, fmt.Errorf("%w: Factory returned nil for node %d", ErrConfig, i)
		}
		s.alive[i] = true
	}
	for i := range s.machines {
		s.drain(i, true)
	}
	if cfg.TickInterval > 0 {
		first := make([]time.Duration, n)
		for i := range first {
			first[i] = s.randPhase()
		}
		s.wheel.init(first)
	}
	return s, nil
}

// N returns the number of nodes.
func (s *Sim) N() int { return s.n }

// Now returns the current virtual time.
func (s *Sim) Now() time.Duration { return s.now }

// ID returns the ID of node i.
func (s *Sim) ID(i int) classic.ID { return s.ids[i] }

// Index returns the node whose ID is id.
func (s *Sim) Index(id classic.ID) (int, bool) {
	i, ok := s.index[id]
	return int(i), ok
}

// Machine returns node i's current machine (a new one after a Restart).
func (s *Sim) Machine(i int) classic.Machine { return s.machines[i] }

// State returns node i's last reported state (the last before its crash, if
// it is down).
func (s *Sim) State(i int) classic.State { return s.state[i] }

// Alive reports whether node i is up.
func (s *Sim) Alive(i int) bool { return s.alive[i] }

// Reachable reports whether a message from i to j would pass the network:
// they are in the same partition group and their link is not cut. It does
// not look at whether the nodes are up.
func (s *Sim) Reachable(i, j int) bool {
	if i == j {
		return true
	}
	if s.group != nil && s.group[i] != s.group[j] {
		return false
	}
	if s.cuts != nil {
		if _, cut := s.cuts[pairKey(i, j)]; cut {
			return false
		}
	}
	return true
}

// Stats returns the counters so far.
func (s *Sim) Stats() Stats {
	st := s.stats
	st.SentByType = make(map[classic.MsgType]uint64)
	for t, k := range s.byType {
		if k > 0 {
			st.SentByType[classic.MsgType(t)] = k
		}
	}
	return st
}

// Pending returns the number of queued events: messages in flight and
// scheduled actions, not ticks.
func (s *Sim) Pending() int { return s.q.Len() }

// nextAt returns the time of the next event or tick, false if there is none.
func (s *Sim) nextAt() (time.Duration, bool) {
	t, ok := s.wheel.next()
	if s.q.Len() > 0 {
		if qa := s.q.peek().at; !ok || qa <= t {
			return qa, true
		}
	}
	return t, ok
}

// Agreed reports whether the live nodes agree on a leader now: in every
// connected component (partition group), all live nodes name the same live
// member with role Leader, and it is the only one with that role. The ID is
// the leader when all live nodes form one component, else classic.None. It
// costs O(1), so it suits RunUntil.
func (s *Sim) Agreed() (classic.ID, bool) { return s.tr.agreed() }

// Record returns the history so far, with End set to Now. It shares storage
// with the simulation but stays valid as the simulation goes on, since the
// simulation only appends; do not modify its entries.
func (s *Sim) Record() *Record {
	return &Record{IDs: s.ids, Changes: s.changes, Faults: s.faults, Sends: s.sends, End: s.now}
}

// Run processes every event due at or before until, then sets the clock to
// until (if it was earlier).
func (s *Sim) Run(until time.Duration) {
	for t, ok := s.nextAt(); ok && t <= until; t, ok = s.nextAt() {
		s.process(nil)
	}
	if until > s.now {
		s.now = until
	}
}

// RunFor runs for d of virtual time.
func (s *Sim) RunFor(d time.Duration) { s.Run(s.now + d) }

// RunUntil runs until pred holds or the clock would pass limit. It checks
// pred first, and then after all the events of each instant (never halfway
// through an instant). It reports whether pred held; on false the clock is at
// limit.
func (s *Sim) RunUntil(pred func(*Sim) bool, limit time.Duration) bool {
	if pred(s) {
		return true
	}
	for t, ok := s.nextAt(); ok && t <= limit; t, ok = s.nextAt() {
		for u, ok := t, true; ok && u == t; u, ok = s.nextAt() {
			s.process(nil)
		}
		if pred(s) {
			return true
		}
	}
	if limit > s.now {
		s.now = limit
	}
	return false
}

// AllAgree is a RunUntil predicate: the live nodes agree on a leader (see
// Agreed).
func AllAgree(s *Sim) bool {
	_, ok := s.Agreed()
	return ok
}

// Step processes the next event or tick and describes it. It returns false
// when nothing is left (no message in flight, no action, no live node
// ticking).
func (s *Sim) Step() (Event, bool) {
	var ev Event
	for _, ok := s.nextAt(); ok; _, ok = s.nextAt() {
		if s.process(&ev) {
			return ev, true
		}
	}
	return Event{}, false
}

// At schedules f to run at virtual time t (now, if t has passed). Use it to
// inject faults: s.At(2*time.Second, func(s *sim.Sim) { s.Crash(3) }).
func (s *Sim) At(t time.Duration, f func(*Sim)) {
	var ref int32
	if k := len(s.freeAct); k > 0 {
		ref = s.freeAct[k-1]
		s.freeAct = s.freeAct[:k-1]
		s.acts[ref] = f
	} else {
		ref = int32(len(s.acts))
		s.acts = append(s.acts, f)
	}
	s.push(event{at: max(t, s.now), kind: evAction, node: -1, ref: ref})
}

// After schedules f to run d from now.
func (s *Sim) After(d time.Duration, f func(*Sim)) { s.At(s.now+d, f) }

// Campaign makes node i start an election now. It does nothing if i is down.
func (s *Sim) Campaign(i int) {
	if !s.alive[i] {
		return
	}
	s.machines[i].Campaign()
	s.drain(i, false)
}

// Send makes node from send m now, as if its machine had: From is set to
// from's ID and the message meets the same latency, loss and faults. It does
// nothing if from is down.
func (s *Sim) Send(from int, m classic.Message) {
	if !s.alive[from] {
		return
	}
	s.send(from, &m)
}

// Crash stops node i now: it no longer ticks or receives, messages in flight
// to it are dropped on arrival (and reported back to their senders as
// MsgUnreachable), and its machine is discarded. Messages it sent before
// remain in flight. Crashing a crashed node does nothing.
func (s *Sim) Crash(i int) {
	if !s.alive[i] {
		return
	}
	s.alive[i] = false
	s.inc[i]++
	s.wheel.remove(i)
	s.tr.setAlive(i, false)
	s.faults = append(s.faults, Fault{At: s.now, Kind: FaultCrash, Node: i})
}

// Restart brings node i back now with a fresh machine from the factory
// (restarted true), which then campaigns. A live node is crashed first. It
// panics if the factory returns nil, as New reports it as an error.
func (s *Sim) Restart(i int) {
	s.Crash(i)
	s.machines[i] = s.cfg.Factory(i, s.ids[i], true)
	if s.machines[i] == nil {
		panic(fmt.Sprintf("sim: Restart(%d): Factory returned nil for node %q", i, s.ids[i]))
	}
	s.alive[i] = true
	s.inc[i]++
	s.faults = append(s.faults, Fault{At: s.now, Kind: FaultRestart, Node: i})
	s.tr.setAlive(i, true)
	s.machines[i].Campaign()
	s.drain(i, true)
	if s.cfg.TickInterval > 0 {
		s.wheel.add(i, s.now+s.randPhase())
	}
}

// Partition splits the network into groups: messages pass only between
// nodes of one group. Nodes named in no group form one more group together.
// It replaces any earlier partition; cut links stay cut. It panics if a node
// is out of range or named twice.
func (s *Sim) Partition(groups ...[]int) {
	label := make([]int32, s.n)
	for i := range label {
		label[i] = -1
	}
	for g, members := range groups {
		for _, i := range members {
			if i < 0 || i >= s.n {
				panic(fmt.Sprintf("sim: Partition: node %d out of range [0, %d)", i, s.n))
			}
			if label[i] >= 0 {
				panic(fmt.Sprintf("sim: Partition: node %d is in groups %d and %d", i, label[i], g))
			}
			label[i] = int32(g)
		}
	}
	for i := range label {
		if label[i] < 0 {
			label[i] = int32(len(groups))
		}
	}
	s.group = label
	s.networkChanged()
}

// Heal ends any partition and recovers every cut link.
func (s *Sim) Heal() {
	s.group, s.cuts = nil, nil
	s.networkChanged()
}

// Cut breaks the link between i and j in both directions.
func (s *Sim) Cut(i, j int) {
	if i < 0 || j < 0 || i >= s.n || j >= s.n || i == j {
		panic(fmt.Sprintf("sim: Cut(%d, %d): want two distinct nodes in [0, %d)", i, j, s.n))
	}
	if s.cuts == nil {
		s.cuts = make(map[[2]int]struct{})
	}
	s.cuts[pairKey(i, j)] = struct{}{}
	s.networkChanged()
}

// Recover restores the link between i and j cut by Cut.
func (s *Sim) Recover(i, j int) {
	delete(s.cuts, pairKey(i, j))
	if len(s.cuts) == 0 {
		s.cuts = nil
	}
	s.networkChanged()
}

// networkChanged records the new connectivity and updates the tracker.
func (s *Sim) networkChanged() {
	f := Fault{At: s.now, Kind: FaultNetwork, Groups: slices.Clone(s.group)}
	for p := range s.cuts {
		f.Cuts = append(f.Cuts, p)
	}
	slices.SortFunc(f.Cuts, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	s.faults = append(s.faults, f)
	s.tr.setTopology(f.Groups, f.Cuts)
}

// randPhase draws a tick phase in [0, TickInterval).
func (s *Sim) randPhase() time.Duration {
	return time.Duration(s.rng.Int64N(int64(s.cfg.TickInterval)))
}

func (s *Sim) push(e event) {
	e.seq = s.seq
	s.seq++
	s.q.push(e)
}

// oneWay is the delay from node i to node j, without jitter.
func (s *Sim) oneWay(i, j int) time.Duration {
	rtt, ok := s.lat.RTT(int(s.host[i]), int(s.host[j]))
	if !ok {
		rtt = s.cfg.MissingRTT
	}
	return rtt / 2
}

// drain collects node i's output: it sends the messages and records a state
// change (always when force is set).
func (s *Sim) drain(i int, force bool) {
	rd := s.machines[i].Ready()
	for k := range rd.Messages {
		s.send(i, &rd.Messages[k])
	}
	if force || rd.State != s.state[i] {
		s.state[i] = rd.State
		s.changes = append(s.changes, Change{At: s.now, Node: i, State: rd.State})
		s.tr.setState(i, rd.State)
	}
}

// send queues m from node i. The machine's From is overwritten with the true
// sender, and IDs is copied as the wire would.
func (s *Sim) send(i int, m *classic.Message) {
	m.From = s.ids[i]
	if m.IDs != nil {
		m.IDs = slices.Clone(m.IDs)
	}
	s.stats.Sent++
	s.byType[m.Type]++
	if k := len(s.sends); k > 0 && s.sends[k-1].At == s.now && s.sends[k-1].Type == m.Type {
		s.sends[k-1].Count++
	} else {
		s.sends = append(s.sends, SendRun{At: s.now, Type: m.Type, Count: 1})
	}
	j32, ok := s.index[m.To]
	if !ok {
		s.stats.Misaddressed++
		return
	}
	j := int(j32)
	d := s.oneWay(i, j)
	if s.cfg.Jitter > 0 {
		d += time.Duration(s.rng.Int64N(int64(s.cfg.Jitter)))
	}
	s.push(event{at: s.now + d, kind: evDeliver, node: j32, from: int32(i),
		inc: s.inc[j], finc: s.inc[i], ref: s.putMsg(m)})
}

func (s *Sim) putMsg(m *classic.Message) int32 {
	if k := len(s.freeMsg); k > 0 {
		ref := s.freeMsg[k-1]
		s.freeMsg = s.freeMsg[:k-1]
		s.msgs[ref] = *m
		return ref
	}
	s.msgs = append(s.msgs, *m)
	return int32(len(s.msgs) - 1)
}

// takeMsg empties a message slot and returns its message.
func (s *Sim) takeMsg(ref int32) classic.Message {
	m := s.msgs[ref]
	s.msgs[ref] = classic.Message{}
	s.freeMsg = append(s.freeMsg, ref)
	return m
}

// process handles the next tick or queued event; there must be one. It
// fills out (if not nil) and returns true, or returns false for a stale event
// (an UNREACHABLE for a crashed incarnation), which changes nothing.
func (s *Sim) process(out *Event) bool {
	if t, ok := s.wheel.next(); ok && (s.q.Len() == 0 || t < s.q.peek().at) {
		i := s.wheel.advance()
		s.now = t
		s.stats.Events++
		s.stats.Ticks++
		s.machines[i].Tick()
		s.drain(i, false)
		if out != nil {
			*out = Event{At: t, Kind: Ticked, Node: i}
		}
		return true
	}
	e := s.q.pop()
	i := int(e.node)
	switch e.kind {

	case evDeliver:
		s.now = e.at
		s.stats.Events++
		from := int(e.from)
		if !s.alive[i] || s.inc[i] != e.inc || !s.Reachable(from, i) {
			// The connection fails: the sender hears of it one way later.
			s.stats.Dropped++
			if out != nil {
				*out = Event{At: e.at, Kind: Dropped, Node: i, Msg: s.msgs[e.ref]}
			}
			s.msgs[e.ref] = classic.Message{Type: classic.MsgUnreachable, From: s.ids[i], To: s.ids[from]}
			s.push(event{at: e.at + s.oneWay(from, i), kind: evUnreachable, node: e.from, inc: e.finc, ref: e.ref})
			return true
		}
		if s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
			s.stats.Lost++
			m := s.takeMsg(e.ref)
			if out != nil {
				*out = Event{At: e.at, Kind: Lost, Node: i, Msg: m}
			}
			return true
		}
		s.deliver(i, e.ref, e.at, out)
		return true

	case evUnreachable:
		if !s.alive[i] || s.inc[i] != e.inc {
			s.takeMsg(e.ref)
			return false
		}
		s.now = e.at
		s.stats.Events++
		s.stats.Unreachable++
		s.deliver(i, e.ref, e.at, out)
		return true

	case evAction:
		s.now = e.at
		s.stats.Events++
		f := s.acts[e.ref]
		s.acts[e.ref] = nil
		s.freeAct = append(s.freeAct, e.ref)
		f(s)
		if out != nil {
			*out = Event{At: e.at, Kind: Acted, Node: -1}
		}
		return true
	}
	panic(fmt.Sprintf("sim: unknown event kind %d", e.kind))
}

// deliver steps node i with the message in slot ref.
func (s *Sim) deliver(i int, ref int32, at time.Duration, out *Event) {
	m := s.takeMsg(ref)
	s.stats.Delivered++
	s.machines[i].Step(m)
	s.drain(i, false)
	if out != nil {
		*out = Event{At: at, Kind: Delivered, Node: i, Msg: m}
	}
}
