package classic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// tnet is a tiny message-passing network for the machines of bully.go,
// ring.go and nextinline.go, in the style of etcd-io/raft's test network.
// Messages travel through one FIFO queue. A crashed process neither sends,
// receives nor ticks; an isolated one runs but everything it sends or is sent
// is lost. With unreachable set, a send to a crashed process comes back to
// its sender as MsgUnreachable, as the real driver reports a failed dial.
type tnet struct {
	t           testing.TB
	ids         []ID
	nodes       map[ID]Machine
	crashed     map[ID]bool
	isolated    map[ID]bool
	unreachable bool

	queue []Message
	drops []func(Message) bool // one-shot loss filters

	sent      map[MsgType]int // messages the machines emitted, by type
	lost      int             // messages that reached no one
	injected  int             // MsgUnreachable notices injected
	delivered int
}

// newTnet builds a network of the processes ids, making each with mk.
func newTnet(t testing.TB, ids []ID, mk func(id ID) Machine) *tnet {
	t.Helper()
	n := &tnet{
		t: t, ids: slices.Clone(ids), nodes: map[ID]Machine{},
		crashed: map[ID]bool{}, isolated: map[ID]bool{}, sent: map[MsgType]int{},
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
	for _, m := range rd.Messages {
		if m.From != id {
			n.t.Fatalf("%s sent a message with From=%q: %s", id, m.From, tnFmt(m))
		}
		n.sent[m.Type]++
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

// campaign makes id start an election.
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
	case n.crashed[m.To]:
		n.lost++
		if n.unreachable && m.Type != MsgUnreachable && !n.crashed[m.From] && !n.isolated[m.From] {
			n.injected++
			n.queue = append(n.queue, Message{Type: MsgUnreachable, From: m.To, To: m.From})
		}
	case n.isolated[m.To] || n.nodes[m.To] == nil:
		n.lost++
	default:
		n.delivered++
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

// tick advances the clocks of the given processes (every live one if none).
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

// crash stops id: it sends, receives and ticks no more.
func (n *tnet) crash(id ID) { n.crashed[id] = true }

// restart replaces id by a fresh machine m (a recovered process).
func (n *tnet) restart(id ID, m Machine) {
	n.crashed[id] = false
	n.nodes[id] = m
}

// isolate cuts id off: it keeps running, but its messages are lost.
func (n *tnet) isolate(id ID) { n.isolated[id] = true }

// heal reconnects an isolated process.
func (n *tnet) heal(id ID) { n.isolated[id] = false }

// dropNext loses the next message for which match is true.
func (n *tnet) dropNext(match func(Message) bool) { n.drops = append(n.drops, match) }

// resetCounts zeroes the message counters.
func (n *tnet) resetCounts() {
	n.sent = map[MsgType]int{}
	n.lost, n.injected, n.delivered = 0, 0, 0
}

// total is the number of messages the machines emitted since resetCounts.
func (n *tnet) total() int {
	s := 0
	for _, c := range n.sent {
		s += c
	}
	return s
}

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
			for range 200 {
				id := ids[rng.IntN(len(ids))]
				switch rng.IntN(20) {
				case 0:
					if len(n.live()) > 1 {
						n.crash(id)
					}
				case 1:
					if n.crashed[id] {
						n.restart(id, mk(t, id, ids))
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
			}
			n.drops = nil
			for _, id := range ids {
				n.heal(id)
			}
			n.run(200)
			live := n.live()
			n.wantLeader("200 ticks after the faults", live[len(live)-1])
		})
	}
}
