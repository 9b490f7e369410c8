package classic

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// h2net is a tiny deterministic message-passing network for the machines in
// candidate.go, invitation.go, echo.go and stable.go. Messages go into one
// global FIFO queue; deliver pops them in order, so a wave of messages is
// delivered breadth-first. Every delivery happens "within the current tick":
// a round trip takes no ticks at all, which keeps timeouts easy to reason
// about in the walkthroughs.
type h2net struct {
	t     testing.TB
	ids   []ID
	nodes map[ID]Machine
	down  map[ID]bool
	cut   map[[2]ID]bool // cut[{a,b}]: messages a→b are dropped

	// unreachable makes the network answer a message to a down node with
	// MsgUnreachable (From the down node, To the sender), as a driver whose
	// connection attempt failed would.
	unreachable bool

	queue []Message
	sent  []Message // every message a machine produced, in order
	log   []Message // every message delivered, in order
	now   int       // ticks so far
}

// newH2Net builds a network of the given machines; ids fixes the order in
// which nodes are ticked.
func newH2Net(t testing.TB, ids []ID, mk func(id ID) Machine) *h2net {
	t.Helper()
	n := &h2net{t: t, ids: slices.Clone(ids), nodes: map[ID]Machine{}, down: map[ID]bool{}, cut: map[[2]ID]bool{}}
	for _, id := range ids {
		n.nodes[id] = mk(id)
	}
	return n
}

// collect moves id's pending output into the queue.
func (n *h2net) collect(id ID) {
	rd := n.nodes[id].Ready()
	for _, m := range rd.Messages {
		if m.From != id {
			n.t.Fatalf("%s sent a message with From=%q", id, m.From)
		}
		n.sent = append(n.sent, m)
		n.queue = append(n.queue, m)
	}
}

// deliverOne delivers the oldest queued message and reports whether there was one.
func (n *h2net) deliverOne() bool {
	if len(n.queue) == 0 {
		return false
	}
	m := n.queue[0]
	n.queue = n.queue[1:]
	switch {
	case n.down[m.From] || n.cut[[2]ID{m.From, m.To}]:
		// Lost on the way.
	case n.down[m.To]:
		if n.unreachable && !n.down[m.From] {
			u := Message{Type: MsgUnreachable, From: m.To, To: m.From, Election: m.Election, Term: m.Term}
			n.log = append(n.log, u)
			n.nodes[m.From].Step(u)
			n.collect(m.From)
		}
	default:
		if _, ok := n.nodes[m.To]; !ok {
			n.t.Fatalf("message to unknown node: %s", h2fmt(m))
		}
		n.log = append(n.log, m)
		n.nodes[m.To].Step(m)
		n.collect(m.To)
	}
	return true
}

// deliverAll delivers until the queue is empty and fails the test on an
// apparently endless exchange.
func (n *h2net) deliverAll() {
	n.t.Helper()
	for i := 0; n.deliverOne(); i++ {
		if i > 10_000_000 {
			n.t.Fatalf("message storm: more than 10M deliveries without quiescence")
		}
	}
}

// tick ticks the given live nodes once each (all live nodes when none are
// named), then delivers everything that results.
func (n *h2net) tick(ids ...ID) {
	n.t.Helper()
	if len(ids) == 0 {
		ids = n.ids
		n.now++
	}
	for _, id := range ids {
		if !n.down[id] {
			n.nodes[id].Tick()
			n.collect(id)
		}
	}
	n.deliverAll()
}

// run ticks every live node k times.
func (n *h2net) run(k int) {
	n.t.Helper()
	for range k {
		n.tick()
	}
}

// runUntil ticks everyone until cond holds, at most limit ticks, and returns
// the number of ticks taken.
func (n *h2net) runUntil(limit int, what string, cond func() bool) int {
	n.t.Helper()
	for i := 0; i <= limit; i++ {
		if cond() {
			return i
		}
		n.tick()
	}
	n.t.Fatalf("after %d ticks: still not %s; states: %s", limit, what, n.states())
	return -1
}

// campaign calls Campaign on id and delivers the consequences.
func (n *h2net) campaign(id ID) {
	n.t.Helper()
	n.nodes[id].Campaign()
	n.collect(id)
	n.deliverAll()
}

// step hands m to its recipient directly (a test's hand-made message).
func (n *h2net) step(m Message) {
	n.log = append(n.log, m)
	n.nodes[m.To].Step(m)
	n.collect(m.To)
}

// crash stops id: it is neither ticked nor stepped, and its queued output is lost.
func (n *h2net) crash(id ID) { n.down[id] = true }

// restart replaces id by a fresh machine (a process that restarted with no
// memory) and brings it up.
func (n *h2net) restart(id ID, m Machine) {
	n.nodes[id] = m
	delete(n.down, id)
}

// partition cuts every link between different groups.
func (n *h2net) partition(groups ...[]ID) {
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

// heal restores every link.
func (n *h2net) heal() { n.cut = map[[2]ID]bool{} }

// state returns id's current state without losing its output.
func (n *h2net) state(id ID) State {
	rd := n.nodes[id].Ready()
	for _, m := range rd.Messages {
		n.sent = append(n.sent, m)
		n.queue = append(n.queue, m)
	}
	return rd.State
}

// leaders returns, for the live nodes, the distinct leaders they follow.
func (n *h2net) leaders() []ID {
	var out []ID
	for _, id := range n.ids {
		if n.down[id] {
			continue
		}
		if l := n.state(id).Leader; !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// agree reports whether every live node follows leader, and leader itself
// (if live) is in role Leader.
func (n *h2net) agree(leader ID) bool {
	for _, id := range n.ids {
		if n.down[id] {
			continue
		}
		st := n.state(id)
		if st.Leader != leader {
			return false
		}
		if id == leader && st.Role != Leader {
			return false
		}
		if id != leader && st.Role == Leader {
			return false
		}
	}
	return true
}

// mark returns the current position in the send log, for since.
func (n *h2net) mark() int { return len(n.sent) }

// since returns the messages of type t sent after mark (all types when t is 0).
func (n *h2net) since(mark int, t MsgType) []Message {
	var out []Message
	for _, m := range n.sent[mark:] {
		if t == 0 || m.Type == t {
			out = append(out, m)
		}
	}
	return out
}

// count returns the number of messages of type t sent so far.
func (n *h2net) count(t MsgType) int { return len(n.since(0, t)) }

// states renders every node's state for failure messages.
func (n *h2net) states() string {
	var b strings.Builder
	for _, id := range n.ids {
		if n.down[id] {
			fmt.Fprintf(&b, "%s:down ", id)
			continue
		}
		st := n.state(id)
		fmt.Fprintf(&b, "%s:%s(%s) ", id, st.Role, st.Leader)
	}
	return b.String()
}

// h2fmt renders a message compactly: "TYPE from→to leader=… ids=…".
func h2fmt(m Message) string {
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

// h2fmts renders a list of messages, one per line.
func h2fmts(ms []Message) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString("  " + h2fmt(m) + "\n")
	}
	return b.String()
}

// h2ids turns "1 2 3" into []ID{"1","2","3"}.
func h2ids(s string) []ID {
	var out []ID
	for _, f := range strings.Fields(s) {
		out = append(out, ID(f))
	}
	return out
}

// h2lowestID is a Rank where the smaller ID wins (the reverse of HighestID).
type h2lowestID struct{}

func (h2lowestID) Compare(a, b ID) int { return HighestID{}.Compare(b, a) }
