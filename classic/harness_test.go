package classic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// tnet is a tiny deterministic message-passing network for the machines of
// this package, in the style of etcd-io/raft's test network.
//
// Messages travel through one global FIFO queue, so a wave of messages is
// delivered breadth-first. The caller drives it: tick and campaign only
// enqueue; round delivers what is in flight now, settle delivers until
// nothing is, and run(k) ticks and settles k times (a round trip then takes
// no ticks at all, which keeps timeouts easy to reason about).
//
// A crashed process neither sends, receives nor ticks; an isolated one runs
// but everything it sends or is sent is lost; a cut link a→b loses the
// messages from a to b (see partition). With unreachable set, a send to a
// crashed process comes back to its sender as MsgUnreachable, as the real
// driver reports a failed dial.
type tnet struct {
	t           testing.TB
	ids         []ID
	nodes       map[ID]Machine
	crashed     map[ID]bool
	isolated    map[ID]bool
	cut         map[[2]ID]bool // cut[{a,b}]: messages a→b are lost
	unreachable bool

	queue []Message
	drops []func(Message) bool // one-shot loss filters

	sent     []Message // every message a machine emitted, in order
	log      []Message // every message delivered, in order
	lost     int       // messages that reached no one
	injected int       // MsgUnreachable notices injected

	// hostile is the one member (tnHostileNet's) that the honest ones may
	// name as a flooder (Ready.Flooders); flooded counts those reports.
	// Naming any other member fails the test: honest members are never
	// flooders.
	hostile ID
	flooded int
}

// newTnet builds a network of the processes ids, making each with mk.
func newTnet(t testing.TB, ids []ID, mk func(id ID) Machine) *tnet {
	t.Helper()
	n := &tnet{
		t: t, ids: slices.Clone(ids), nodes: map[ID]Machine{},
		crashed: map[ID]bool{}, isolated: map[ID]bool{}, cut: map[[2]ID]bool{},
	}
	for _, id := range ids {
		n.nodes[id] = mk(id)
	}
	return n
}

// tnIDs returns the IDs "0".."n-1", zero-padded to equal width so that
// HighestID orders them numerically.
func tnIDs(n int) []ID {
	w := len(fmt.Sprint(n - 1))
	ids := make([]ID, n)
	for i := range ids {
		ids[i] = ID(fmt.Sprintf("%0*d", w, i))
	}
	return ids
}

// tnSplit turns "3 5 2" into []ID{"3", "5", "2"}.
func tnSplit(s string) []ID {
	var ids []ID
	for _, f := range strings.Fields(s) {
		ids = append(ids, ID(f))
	}
	return ids
}

// collect moves id's outgoing messages into the queue and returns its state.
func (n *tnet) collect(id ID) State {
	rd := n.nodes[id].Ready()
	for _, f := range rd.Flooders {
		if f != n.hostile || id == n.hostile {
			n.t.Fatalf("%s named %s a flooder: only a hostile member may be (%s)", id, f, n.states())
		}
		n.flooded++
	}
	for _, m := range rd.Messages {
		if m.From != id {
			n.t.Fatalf("%s sent a message with From=%q: %s", id, m.From, tnFmt(m))
		}
		n.sent = append(n.sent, m)
		if n.isolated[id] {
			n.lost++
			continue
		}
		n.queue = append(n.queue, m)
	}
	return rd.State
}

// state returns id's current state (flushing its outbox into the queue).
func (n *tnet) state(id ID) State { return n.collect(id) }

// campaign makes id start an election (without delivering anything).
func (n *tnet) campaign(id ID) {
	n.nodes[id].Campaign()
	n.collect(id)
}

// deliver hands one message to its receiver, or loses it.
func (n *tnet) deliver(m Message) {
	for i, drop := range n.drops {
		if drop(m) {
			n.drops = slices.Delete(n.drops, i, i+1)
			n.lost++
			return
		}
	}
	switch {
	case n.nodes[m.To] == nil:
		n.t.Fatalf("message to unknown process: %s", tnFmt(m))
	case n.cut[[2]ID{m.From, m.To}]:
		n.lost++
	case n.crashed[m.To]:
		n.lost++
		if n.unreachable && m.Type != MsgUnreachable && !n.crashed[m.From] && !n.isolated[m.From] {
			n.injected++
			n.queue = append(n.queue, Message{Type: MsgUnreachable, From: m.To, To: m.From, Election: m.Election, Term: m.Term})
		}
	case n.isolated[m.To]:
		n.lost++
	default:
		n.log = append(n.log, m)
		n.nodes[m.To].Step(m)
		n.collect(m.To)
	}
}

// round delivers the messages in flight now; what they cause is sent in the
// next round. It returns how many it handled.
func (n *tnet) round() int {
	batch := n.queue
	n.queue = nil
	for _, m := range batch {
		n.deliver(m)
	}
	return len(batch)
}

// tnSettleLimit bounds settle, to report a message storm instead of hanging.
var tnSettleLimit = 10_000_000

// settle delivers until no message is in flight.
func (n *tnet) settle() {
	n.t.Helper()
	for total := 0; len(n.queue) > 0; {
		total += n.round()
		if total > tnSettleLimit {
			n.t.Fatalf("messages never stop: %d delivered, still in flight: %s", total, n.pending())
		}
	}
}

// tick advances the clocks of the given processes (every live one if none),
// without delivering anything.
func (n *tnet) tick(ids ...ID) {
	if len(ids) == 0 {
		ids = n.ids
	}
	for _, id := range ids {
		if !n.crashed[id] {
			n.nodes[id].Tick()
			n.collect(id)
		}
	}
}

// run ticks the given processes (every live one if none) k times, settling
// the network after each tick.
func (n *tnet) run(k int, ids ...ID) {
	n.t.Helper()
	for range k {
		n.tick(ids...)
		n.settle()
	}
}

// runUntil runs the network one tick at a time until cond holds, at most
// limit ticks, and returns the number of ticks taken.
func (n *tnet) runUntil(limit int, what string, cond func() bool) int {
	n.t.Helper()
	for i := 0; i <= limit; i++ {
		if cond() {
			return i
		}
		n.run(1)
	}
	n.t.Fatalf("after %d ticks: still not %s; states: %s", limit, what, n.states())
	return -1
}

// crash stops id: it sends, receives and ticks no more.
func (n *tnet) crash(id ID) { n.crashed[id] = true }

// restart replaces id by a fresh machine m (a recovered process with no
// memory).
func (n *tnet) restart(id ID, m Machine) {
	n.crashed[id] = false
	n.nodes[id] = m
}

// isolate cuts id off: it keeps running, but its messages are lost.
func (n *tnet) isolate(id ID) { n.isolated[id] = true }

// partition cuts every link between different groups.
func (n *tnet) partition(groups ...[]ID) {
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					n.cut[[2]ID{a, b}] = true
				}
			}
		}
	}
}

// heal reconnects the given isolated processes; with none, it reconnects
// every isolated process and restores every cut link.
func (n *tnet) heal(ids ...ID) {
	if len(ids) == 0 {
		n.isolated = map[ID]bool{}
		n.cut = map[[2]ID]bool{}
	}
	for _, id := range ids {
		n.isolated[id] = false
	}
}

// dropNext loses the next message for which match is true.
func (n *tnet) dropNext(match func(Message) bool) { n.drops = append(n.drops, match) }

// resetCounts forgets the messages sent and delivered so far and zeroes the
// loss counters (marks taken before are void).
func (n *tnet) resetCounts() {
	n.sent, n.log = nil, nil
	n.lost, n.injected = 0, 0
}

// total is the number of messages the machines emitted since resetCounts.
func (n *tnet) total() int { return len(n.sent) }

// mark returns the current position in the send log, for since.
func (n *tnet) mark() int { return len(n.sent) }

// since returns the messages of type t sent after mark (all types when t is 0).
func (n *tnet) since(mark int, t MsgType) []Message {
	var out []Message
	for _, m := range n.sent[mark:] {
		if t == 0 || m.Type == t {
			out = append(out, m)
		}
	}
	return out
}

// count returns the number of messages of type t sent since resetCounts.
func (n *tnet) count(t MsgType) int { return len(n.since(0, t)) }

// pending describes the messages in flight, e.g. "4->5 ELECTION, 4->6 ELECTION".
func (n *tnet) pending() string {
	s := make([]string, len(n.queue))
	for i, m := range n.queue {
		s[i] = tnFmt(m)
	}
	return strings.Join(s, ", ")
}

// wantPending asserts the messages in flight, in order.
func (n *tnet) wantPending(step, want string) {
	n.t.Helper()
	if got := n.pending(); got != want {
		n.t.Fatalf("%s: in flight\n got: %s\nwant: %s", step, got, want)
	}
}

// live returns the processes that have not crashed.
func (n *tnet) live() []ID {
	var out []ID
	for _, id := range n.ids {
		if !n.crashed[id] {
			out = append(out, id)
		}
	}
	return out
}

// wantLeader asserts that every given process (every live one if none)
// follows leader, and that leader, and only leader, has the Leader role.
func (n *tnet) wantLeader(step string, leader ID, ids ...ID) {
	n.t.Helper()
	if len(ids) == 0 {
		ids = n.live()
	}
	for _, id := range ids {
		st := n.state(id)
		wantRole := Follower
		if id == leader {
			wantRole = Leader
		}
		if st.Leader != leader || st.Role != wantRole {
			n.t.Fatalf("%s: process %s is %s following %q, want %s following %q\nall: %s",
				step, id, st.Role, st.Leader, wantRole, leader, n.states())
		}
	}
}

// wantState asserts one process's role and leader.
func (n *tnet) wantState(step string, id ID, role Role, leader ID) {
	n.t.Helper()
	if st := n.state(id); st.Role != role || st.Leader != leader {
		n.t.Fatalf("%s: process %s is %s following %q, want %s following %q", step, id, st.Role, st.Leader, role, leader)
	}
}

// leaders returns the live processes in the Leader role.
func (n *tnet) leaders() []ID {
	var out []ID
	for _, id := range n.live() {
		if n.state(id).Role == Leader {
			out = append(out, id)
		}
	}
	return out
}

// followed returns the distinct leaders the live processes follow, in the
// order of ids (None included).
func (n *tnet) followed() []ID {
	var out []ID
	for _, id := range n.live() {
		if l := n.state(id).Leader; !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// agree reports whether every live process follows leader, and leader itself
// (if live) is in role Leader and no other live process is.
func (n *tnet) agree(leader ID) bool {
	for _, id := range n.live() {
		st := n.state(id)
		if st.Leader != leader || (id == leader) != (st.Role == Leader) {
			return false
		}
	}
	return true
}

// states describes every process, for failure messages.
func (n *tnet) states() string {
	var b strings.Builder
	for _, id := range n.ids {
		if n.crashed[id] {
			fmt.Fprintf(&b, "%s:crashed ", id)
			continue
		}
		st := n.state(id)
		fmt.Fprintf(&b, "%s:%s(%s) ", id, st.Role, st.Leader)
	}
	return b.String()
}

// tnFmt formats a message as "from->to TYPE" plus its payload.
func tnFmt(m Message) string {
	s := fmt.Sprintf("%s->%s %s", m.From, m.To, m.Type)
	if m.Leader != None && m.Type != MsgHeartbeat && m.Type != MsgCoordinator {
		s += fmt.Sprintf("(max=%s)", m.Leader)
	}
	if m.Type == MsgCoordinator {
		s += fmt.Sprintf("(%s)", m.Leader)
	}
	if len(m.IDs) > 0 && m.Type == MsgElection {
		s += fmt.Sprintf("%v", m.IDs)
	}
	return s
}

// tnFmtLong formats a message as "TYPE from→to leader=… ids=… e=src/seq".
func tnFmtLong(m Message) string {
	s := fmt.Sprintf("%s %s→%s", m.Type, m.From, m.To)
	if m.Leader != None {
		s += " leader=" + string(m.Leader)
	}
	if len(m.IDs) > 0 {
		s += fmt.Sprintf(" ids=%v", m.IDs)
	}
	if m.Election.Source != None {
		s += fmt.Sprintf(" e=%s/%d", m.Election.Source, m.Election.Seq)
	}
	return s
}

// tnFmtLongs formats messages with tnFmtLong, one per line.
func tnFmtLongs(ms []Message) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString("  " + tnFmtLong(m) + "\n")
	}
	return b.String()
}

// tnWantLog asserts the rendering (tnFmtLong) of the delivered messages got.
func tnWantLog(t testing.TB, what string, got []Message, want []string) {
	t.Helper()
	var g []string
	for _, m := range got {
		g = append(g, tnFmtLong(m))
	}
	if !slices.Equal(g, want) {
		t.Fatalf("%s: delivered\n%s\nwant\n  %v", what, tnFmtLongs(got), want)
	}
}

// tnTos lists the recipients of ms in order.
func tnTos(ms []Message) []ID {
	var out []ID
	for _, m := range ms {
		out = append(out, m.To)
	}
	return out
}

// tnFroms lists the senders of ms in order.
func tnFroms(ms []Message) []ID {
	var out []ID
	for _, m := range ms {
		out = append(out, m.From)
	}
	return out
}

// tnLowestID is a Rank where the smaller ID wins (the reverse of HighestID).
type tnLowestID struct{}

func (tnLowestID) Compare(a, b ID) int { return HighestID{}.Compare(b, a) }

// tnCfg is the configuration the tests use unless they say otherwise.
func tnCfg(id ID, peers []ID) Config {
	return Config{ID: id, Peers: peers, HeartbeatTicks: 2, TimeoutTicks: 10}
}

// Network builders for each machine.

func tnBully(t testing.TB, ids []ID) *tnet {
	t.Helper()
	return newTnet(t, ids, func(id ID) Machine { return tnMust[*Bully](t)(NewBully(tnCfg(id, ids))) })
}

func tnRing(t testing.TB, ids []ID, maxOnly bool) *tnet {
	t.Helper()
	n := newTnet(t, ids, func(id ID) Machine { return tnNewRing(t, id, ids, maxOnly) })
	n.unreachable = true
	return n
}

func tnNewRing(t testing.TB, id ID, ids []ID, maxOnly bool) *Ring {
	t.Helper()
	mk := NewRing
	if maxOnly {
		mk = NewRingMax
	}
	return tnMust[*Ring](t)(mk(tnCfg(id, ids)))
}

func tnNextInLine(t testing.TB, ids []ID, listLen int) *tnet {
	t.Helper()
	return newTnet(t, ids, func(id ID) Machine { return tnMust[*NextInLine](t)(NewNextInLine(tnCfg(id, ids), listLen)) })
}

// tnMust returns a function that fails the test on a constructor error.
func tnMust[M any](t testing.TB) func(M, error) M {
	return func(m M, err error) M {
		t.Helper()
		if err != nil {
			t.Fatalf("constructor: %v", err)
		}
		return m
	}
}

// faults runs ticks ticks of random faults drawn from rng, one delivery
// round per tick: processes crash, recover (made by mk, sometimes
// campaigning), get isolated and healed, messages are lost and random
// processes campaign; after each tick, each (when not nil) is called with
// its number. Then the faults stop: no loss, every process healed.
func (n *tnet) faults(rng *rand.Rand, ticks int, mk func(id ID) Machine, each func(i int)) {
	ids := n.ids
	for i := range ticks {
		id := ids[rng.IntN(len(ids))]
		switch rng.IntN(20) {
		case 0:
			if len(n.live()) > 1 {
				n.crash(id)
			}
		case 1:
			if n.crashed[id] {
				n.restart(id, mk(id))
				if rng.IntN(2) == 0 {
					n.campaign(id)
				}
			}
		case 2:
			n.dropNext(func(Message) bool { return true })
		case 3:
			if !n.crashed[id] {
				n.campaign(id)
			}
		case 4:
			n.isolate(id)
		case 5:
			n.heal(id)
		}
		n.tick()
		n.round()
		if each != nil {
			each(i)
		}
	}
	n.drops = nil
	n.heal()
}

// tnChaos runs seeded random faults on clusters of 3 to 9 processes made by
// mk: for 200 ticks, processes crash, recover (sometimes campaigning), get
// isolated and healed, messages are lost and random processes campaign, with
// one delivery round per tick. Then the faults stop and after 200 quiet
// ticks every live process must follow the highest live one.
func tnChaos(t *testing.T, seeds int, unreachable bool, mk func(t testing.TB, id ID, ids []ID) Machine) {
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			ids := tnIDs(3 + int(seed%7))
			n := newTnet(t, ids, func(id ID) Machine { return mk(t, id, ids) })
			n.unreachable = unreachable
			n.faults(rng, 200, func(id ID) Machine { return mk(t, id, ids) }, nil)
			n.run(200)
			live := n.live()
			n.wantLeader("200 ticks after the faults", live[len(live)-1])
		})
	}
}
