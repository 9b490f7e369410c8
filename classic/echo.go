package classic

import (
	"fmt"
	"slices"
)

// Echo is the echo election with capacities of Vasudevan, Kurose and Towsley
// ("Design and analysis of a leader election algorithm for mobile ad hoc
// networks", ICNP 2004) as a Machine. It needs only a connected graph: each
// process talks to its neighbours, never to the whole cluster. The winner is
// the process of largest capacity; equal capacities go to the higher rank.
//
// The protocol:
//
//   - The source (a process whose Campaign is called, or whose election timed
//     out) starts election E = (Source: self, Seq: one above any sequence
//     number it has seen) and sends ELECTION{E} to all its neighbours.
//   - A process not yet in E (or in a lower election, which it abandons)
//     joins E: the sender becomes its parent (the spanning tree edge), and it
//     sends ELECTION{E} to every other neighbour.
//   - A process waits for an answer from every neighbour other than its
//     parent. An answer is an ECHO{E} from a child (carrying the best
//     (Capacity, Leader) of the child's subtree), an ELECTION{E} from a
//     neighbour already in E (that neighbour has its own parent; its
//     ELECTION is its empty echo, and ours, already sent to it, is ours),
//     or an UNREACHABLE for that neighbour injected by the driver (an answer
//     with nothing). Only then does it send ECHO{E} with the best of its
//     subtree, itself included, to its parent.
//   - When the source has heard from all neighbours it knows the winner and
//     sends COORDINATOR{E, Leader, Capacity} down the tree: every process
//     forwards it to its children (the neighbours that sent it ECHO).
//   - A process drops messages of elections lower than the one it is in. A
//     process that has been in an election for the election timeout (see
//     WithElectionTimeout) without a COORDINATOR starts a new election.
//
// Each edge thus carries exactly two messages per election (ELECTION and
// ECHO on tree edges, an ELECTION each way on the others), and the broadcast
// one per tree edge: 2·|edges| + (n − 1) messages for n processes.
//
// Messages used: ELECTION, ECHO, COORDINATOR, UNREACHABLE. Echo has no
// heartbeats; the driver calls Campaign when it notices the leader is gone.
// State.Term is the sequence number of the election that chose the leader.
type Echo struct {
	cfg        Config
	neighbours []ID
	capacity   uint64
	timeout    int // election timeout in ticks

	leader    ID
	leaderCap uint64
	term      uint64

	cur      ElectionID // the election we are in, or were last in
	maxSeq   uint64
	active   bool // in cur, waiting for answers or for COORDINATOR
	answered bool // our ECHO went to the parent (or, at the source, the result is out)
	parent   ID
	pending  map[ID]bool
	children []ID
	best     echoBest
	left     int // ticks until the election times out

	outbox
}

type echoBest struct {
	cap    uint64
	leader ID
}

var _ Machine = (*Echo)(nil)

// EchoOption changes an Echo machine's settings.
type EchoOption func(*Echo) error

// WithElectionTimeout sets how many ticks a process stays in an election
// without hearing its result before it starts a new one. The default is
// 2·len(Peers)·TimeoutTicks, enough for an echo to cross a path through every
// process and back when each hop takes under TimeoutTicks/2.
func WithElectionTimeout(ticks int) EchoOption {
	return func(e *Echo) error {
		if ticks <= 0 {
			return fmt.Errorf("%w: WithElectionTimeout(%d): the timeout must be a positive number of ticks", ErrBadOption, ticks)
		}
		e.timeout = ticks
		return nil
	}
}

// NewEcho returns the echo machine for cfg.ID with the given neighbours (the
// processes it can reach directly; the graph must be symmetric and connected)
// and its own capacity.
//
// Config fields used: ID, Peers (every process of the graph), Rank (nil:
// HighestID; breaks ties between equal capacities), TimeoutTicks (0: 10; the
// default election timeout derives from it). HeartbeatTicks and Rand
// are ignored.
func NewEcho(cfg Config, neighbours []ID, capacity uint64, opts ...EchoOption) (*Echo, error) {
	cfg, err := electConfig(cfg, "NewEcho", false)
	if err != nil {
		return nil, err
	}
	if len(neighbours) == 0 && len(cfg.Peers) > 1 {
		return nil, fmt.Errorf("%w: NewEcho: %q has no neighbours in a cluster of %d; the graph must be connected", ErrBadNeighbours, cfg.ID, len(cfg.Peers))
	}
	for i, nb := range neighbours {
		switch {
		case nb == cfg.ID:
			return nil, fmt.Errorf("%w: NewEcho: %q lists itself as a neighbour", ErrBadNeighbours, cfg.ID)
		case !slices.Contains(cfg.Peers, nb):
			return nil, fmt.Errorf("%w: NewEcho: neighbour %q of %q is not in Config.Peers", ErrBadNeighbours, nb, cfg.ID)
		case slices.Contains(neighbours[:i], nb):
			return nil, fmt.Errorf("%w: NewEcho: neighbour %q of %q is listed twice", ErrBadNeighbours, nb, cfg.ID)
		}
	}
	e := &Echo{
		cfg:        cfg,
		outbox:     newOutbox(cfg),
		neighbours: slices.Clone(neighbours),
		capacity:   capacity,
		timeout:    2 * len(cfg.Peers) * cfg.TimeoutTicks,
	}
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Parent returns the neighbour this process joined the current (or last)
// election from: its parent in that election's spanning tree. It is None at
// the source and before any election.
func (e *Echo) Parent() ID { return e.parent }

// Election returns the current (or last) election this process took part in.
func (e *Echo) Election() ElectionID { return e.cur }

// better reports whether a beats b: larger capacity, then higher rank.
func (e *Echo) better(a, b echoBest) bool {
	if a.leader == None {
		return false
	}
	if b.leader == None {
		return true
	}
	if a.cap != b.cap {
		return a.cap > b.cap
	}
	return e.cfg.Rank.Compare(a.leader, b.leader) > 0
}

// Campaign starts a new election with this process as its source.
func (e *Echo) Campaign() {
	e.maxSeq++
	e.join(ElectionID{Source: e.cfg.ID, Seq: e.maxSeq}, None)
}

// join enters election id with the given parent (None at the source).
func (e *Echo) join(id ElectionID, parent ID) {
	e.cur, e.parent = id, parent
	e.maxSeq = max(e.maxSeq, id.Seq)
	e.active, e.answered = true, false
	e.children = nil
	e.best = echoBest{cap: e.capacity, leader: e.cfg.ID}
	e.left = e.timeout
	e.pending = map[ID]bool{}
	for _, nb := range e.neighbours {
		if nb != parent {
			e.pending[nb] = true
			e.send(Message{Type: MsgElection, To: nb, Election: id})
		}
	}
	e.maybeAnswer()
}

// maybeAnswer sends the echo (or, at the source, the result) once every
// neighbour but the parent has answered.
func (e *Echo) maybeAnswer() {
	if !e.active || e.answered || len(e.pending) > 0 {
		return
	}
	e.answered = true
	if e.parent != None {
		e.send(Message{Type: MsgEcho, To: e.parent, Election: e.cur, Leader: e.best.leader, Capacity: e.best.cap})
		return
	}
	e.decide(e.best)
}

// decide adopts the result of the current election and passes it down the tree.
func (e *Echo) decide(b echoBest) {
	e.active = false
	e.leader, e.leaderCap, e.term = b.leader, b.cap, e.cur.Seq
	for _, c := range e.children {
		e.send(Message{Type: MsgCoordinator, To: c, Election: e.cur, Leader: b.leader, Capacity: b.cap})
	}
}

// Tick advances the logical clock by one tick.
func (e *Echo) Tick() {
	if !e.active {
		return
	}
	e.left--
	if e.left <= 0 {
		e.Campaign()
	}
}

// Step delivers one message.
func (e *Echo) Step(m Message) {
	if !slices.Contains(e.neighbours, m.From) {
		return // only neighbours can reach us
	}
	e.maxSeq = max(e.maxSeq, m.Election.Seq)
	switch m.Type {
	case MsgElection:
		switch {
		case e.cur.Less(m.Election):
			e.join(m.Election, m.From)
		case m.Election == e.cur && e.active:
			e.answer(m.From, echoBest{})
		}
	case MsgEcho:
		if m.Election == e.cur && e.active && e.pending[m.From] {
			e.children = append(e.children, m.From)
			e.answer(m.From, echoBest{cap: m.Capacity, leader: m.Leader})
		}
	case MsgUnreachable:
		if e.active && (m.Election == e.cur || m.Election == ElectionID{}) {
			e.answer(m.From, echoBest{})
		}
	case MsgCoordinator:
		if m.Election == e.cur && e.active && m.From == e.parent {
			e.decide(echoBest{cap: m.Capacity, leader: m.Leader})
		}
	}
}

// answer records nb's answer and its subtree's best.
func (e *Echo) answer(nb ID, b echoBest) {
	if !e.pending[nb] {
		return
	}
	delete(e.pending, nb)
	if e.better(b, e.best) {
		e.best = b
	}
	e.maybeAnswer()
}

// Ready returns and clears the pending messages, with the current state.
func (e *Echo) Ready() Ready {
	st := State{Leader: e.leader, Term: e.term}
	switch {
	case e.active:
		st.Role = Candidate
	case e.leader == e.cfg.ID:
		st.Role = Leader
	}
	return Ready{Messages: e.take(), State: st}
}
