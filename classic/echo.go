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
//   - The source (a process whose Campaign is called) starts election
//     E = (Source: self, Seq: one above any sequence number it has seen) and
//     sends ELECTION{E} to all its neighbours.
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
//   - A process drops messages of elections lower than the one it is in,
//     except that a process which already knows the result of a higher
//     election answers them with that COORDINATOR (see below).
//
// Each edge thus carries exactly two messages per election (ELECTION and
// ECHO on tree edges, an ELECTION each way on the others), and the broadcast
// one per tree edge: 2·|edges| + (n − 1) messages for n processes. Nothing
// else is sent unless a message is lost or a timer expires.
//
// Recovery from lost messages (every receiver treats duplicates
// idempotently):
//
//   - Retransmission: a process still waiting for answers re-sends ELECTION{E}
//     to each neighbour that has not answered, every retransmission interval
//     (see WithRetransmitTimeout). A neighbour that is in E and already
//     answered re-sends its answer: its ELECTION{E}, or its ECHO{E} if the
//     retransmission came from its parent.
//   - A process that has sent its ECHO but heard no COORDINATOR within the
//     retransmission interval re-sends its ECHO to its parent; a parent that
//     already knows the result answers any ECHO{E} with COORDINATOR{E}. So a
//     process that missed COORDINATOR learns the leader instead of starting a
//     new election.
//   - A process that knows the result of an election answers any message of
//     a lower election (a restarted process, or one that missed the whole
//     election) with its COORDINATOR. A process that receives COORDINATOR of
//     an election higher than its own (one it was not part of) adopts that
//     leader, unless it beats the leader itself; then it starts a new
//     election, since its capacity was not counted.
//   - A process that receives an ECHO of an election higher than its own
//     lost its state in that election (it restarted): it starts a new
//     election, since the old one can no longer complete.
//   - A process whose parent is reported UNREACHABLE after it sent its ECHO
//     starts a new election: the result can no longer reach it.
//   - A process that receives a result worse than the best of its own
//     subtree starts a new election: its ECHO reached the source too late to
//     count (the source had taken a stale UNREACHABLE as its answer).
//   - A process that has been in an election for the election timeout (see
//     WithElectionTimeout) without any progress (an answer, or the result)
//     starts a new election.
//
// What one member can make the others believe (issue 19): no message
// moves the election sequence numbers faster than TermJumpPerTick a tick.
// A winner that is no member cannot be refused here, since a process
// knows its neighbours only (Config.Peers; on a sparse graph the winner is
// rarely one of them): the overlay takes no leader that is not a member of
// its cluster (overlay/node's elector.superpeer). Capacities are what each process reports
// for itself and its subtree, and a result of an election a process was not
// part of is taken as it comes: echo cannot tell a member that claims the
// largest capacity, or announces such a result, from an honest one.
//
// Messages used: ELECTION, ECHO, COORDINATOR, UNREACHABLE. Echo has no
// heartbeats; the driver calls Campaign when it notices the leader is gone.
// State.Term is the sequence number of the election that chose the leader.
type Echo struct {
	cfg        Config
	neighbours []ID
	capacity   uint64
	timeout    int // election timeout in ticks: no progress for this long starts a new election
	rtxTimeout int // retransmission interval in ticks; 0 means timeout/4

	leader    ID
	leaderCap uint64
	term      uint64

	cur      ElectionID // the election we are in, or were last in
	maxSeq   uint64
	now      int  // ticks since start
	seqAt    int  // tick maxSeq last rose (see seqCeiling)
	active   bool // in cur, waiting for answers or for COORDINATOR
	answered bool // our ECHO went to the parent (or, at the source, the result is out)
	parent   ID
	pending  map[ID]bool
	children []ID
	best     echoBest
	left     int  // ticks without progress until the election times out
	rtx      int  // ticks until the next retransmission
	passive  bool // see Passive

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
// without any progress (an answer from a neighbour, or the result) before it
// starts a new one. The default is 4·len(Peers)·TimeoutTicks: four
// retransmission intervals (see WithRetransmitTimeout), each enough for an
// echo to cross a path through every process and back when each hop takes
// under TimeoutTicks/2, so that a lost message is re-sent several times
// before the election is given up.
func WithElectionTimeout(ticks int) EchoOption {
	return func(e *Echo) error {
		if ticks <= 0 {
			return fmt.Errorf("%w: WithElectionTimeout(%d): the timeout must be a positive number of ticks", ErrBadOption, ticks)
		}
		e.timeout = ticks
		return nil
	}
}

// WithRetransmitTimeout sets how many ticks a process waits for a neighbour's
// answer (or, after its ECHO, for the COORDINATOR) before it re-sends its
// ELECTION (or its ECHO). It must exceed the time a subtree's echo can take
// without loss, or loss-free elections send more than 2·|edges| + (n − 1)
// messages; the default is a quarter of the election timeout
// (len(Peers)·TimeoutTicks by default: a subtree's echo crosses at most
// 2·(n−1) hops).
func WithRetransmitTimeout(ticks int) EchoOption {
	return func(e *Echo) error {
		if ticks <= 0 {
			return fmt.Errorf("%w: WithRetransmitTimeout(%d): the interval must be a positive number of ticks", ErrBadOption, ticks)
		}
		e.rtxTimeout = ticks
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
		timeout:    4 * len(cfg.Peers) * cfg.TimeoutTicks,
	}
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	if e.rtxTimeout == 0 {
		e.rtxTimeout = max(1, e.timeout/4)
	}
	if e.rtxTimeout >= e.timeout {
		return nil, fmt.Errorf("%w: retransmission interval %d ticks is not below the election timeout %d ticks; no retransmission would ever go out",
			ErrBadOption, e.rtxTimeout, e.timeout)
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

func (e *Echo) self() echoBest { return echoBest{cap: e.capacity, leader: e.cfg.ID} }

// Campaign starts a new election with this process as its source.
func (e *Echo) Campaign() {
	if e.passive {
		// See Passive: it stops taking part in the election it was in,
		// and keeps the leader it knows until the next election that
		// reaches it decides another.
		e.active, e.pending = false, nil
		return
	}
	e.raiseSeq(e.maxSeq + 1)
	e.join(ElectionID{Source: e.cfg.ID, Seq: e.maxSeq}, None)
}

// join enters election id with the given parent (None at the source).
func (e *Echo) join(id ElectionID, parent ID) {
	e.cur, e.parent = id, parent
	e.raiseSeq(id.Seq)
	e.active, e.answered = true, false
	e.children = nil
	e.best = e.self()
	if e.passive {
		e.best = echoBest{} // it relays, and does not stand (see Passive)
	}
	e.left, e.rtx = e.timeout, e.rtxTimeout
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
		e.rtx = e.rtxTimeout // now waiting for the COORDINATOR
		e.sendEcho()
		return
	}
	e.decide(e.best)
}

func (e *Echo) sendEcho() {
	e.send(Message{Type: MsgEcho, To: e.parent, Election: e.cur, Leader: e.best.leader, Capacity: e.best.cap})
}

// sendResult tells nb the result of the election we are in.
func (e *Echo) sendResult(nb ID) {
	e.send(Message{Type: MsgCoordinator, To: nb, Election: e.cur, Leader: e.leader, Capacity: e.leaderCap})
}

// taken is result b as this process adopts it: none, where it names a
// passive process itself (see Passive).
func (e *Echo) taken(b echoBest) echoBest {
	if e.passive && b.leader == e.cfg.ID {
		return echoBest{}
	}
	return b
}

// decide adopts the result of the current election and passes it down the tree.
func (e *Echo) decide(b echoBest) {
	b = e.taken(b)
	e.active = false
	e.leader, e.leaderCap, e.term = b.leader, b.cap, e.cur.Seq
	for _, c := range e.children {
		e.sendResult(c)
	}
}

// Tick advances the logical clock by one tick.
func (e *Echo) Tick() {
	e.now++
	if !e.active {
		return
	}
	if e.left--; e.left <= 0 {
		e.Campaign()
		return
	}
	if e.rtx--; e.rtx > 0 {
		return
	}
	e.rtx = e.rtxTimeout
	if e.answered {
		e.sendEcho() // the ECHO or the COORDINATOR was lost
		return
	}
	for _, nb := range e.neighbours {
		if e.pending[nb] {
			e.send(Message{Type: MsgElection, To: nb, Election: e.cur})
		}
	}
}

// seqCeiling is the highest election sequence number this process takes
// from a message now: one above the highest it has seen, plus
// TermJumpPerTick per tick since that rose. A member that sends elections
// of sequence 2^63-1 (after which every new election, one above, would be
// dropped) or of fast-rising ones moves no one faster than that, so the
// sequence numbers last (see TermJumpPerTick); one that fell behind
// catches up within a tick or two.
func (e *Echo) seqCeiling() uint64 {
	return termCeiling(e.maxSeq, e.now-e.seqAt)
}

// raiseSeq notes a sequence number seen or used.
func (e *Echo) raiseSeq(seq uint64) {
	if seq > e.maxSeq {
		e.maxSeq, e.seqAt = seq, e.now
	}
}

// progress notes that the current election moved on.
func (e *Echo) progress() { e.left = e.timeout }

// Step delivers one message.
func (e *Echo) Step(m Message) {
	if !slices.Contains(e.neighbours, m.From) {
		return // only neighbours can reach us
	}
	if m.Type == MsgUnreachable {
		e.unreachable(m)
		return
	}
	if m.Election.Seq > e.seqCeiling() {
		return // see seqCeiling
	}
	e.raiseSeq(m.Election.Seq)
	switch {
	case m.Election == e.cur:
		e.stepCurrent(m)
	case e.cur.Less(m.Election):
		e.stepHigher(m)
	case !e.active && e.leader != None:
		// The sender is behind: it missed the election we know the result
		// of, or it restarted. Tell it.
		e.sendResult(m.From)
	}
}

// stepCurrent handles a message of the election we are in (or were last in).
func (e *Echo) stepCurrent(m Message) {
	switch m.Type {
	case MsgElection:
		switch {
		case e.active && e.pending[m.From]:
			e.answer(m.From, echoBest{})
		case m.From == e.parent && e.answered && e.active:
			e.sendEcho() // the parent never got our ECHO
		case m.From != e.parent && e.active && !slices.Contains(e.children, m.From):
			// A retransmission: the neighbour never got our ELECTION, which
			// is our (empty) answer to it.
			e.send(Message{Type: MsgElection, To: m.From, Election: e.cur})
		}
	case MsgEcho:
		switch {
		case e.active && e.pending[m.From]:
			e.children = append(e.children, m.From)
			e.answer(m.From, echoBest{cap: m.Capacity, leader: m.Leader})
		case e.active && !e.answered && !slices.Contains(e.children, m.From):
			// A child we had counted as answered (by a stale UNREACHABLE):
			// still take its subtree into account.
			e.children = append(e.children, m.From)
			if b := (echoBest{cap: m.Capacity, leader: m.Leader}); e.better(b, e.best) {
				e.best = b
			}
			e.progress()
		case !e.active:
			// A child that missed our COORDINATOR re-sent its ECHO.
			if !slices.Contains(e.children, m.From) {
				e.children = append(e.children, m.From)
			}
			e.sendResult(m.From)
		}
	case MsgCoordinator:
		if b := (echoBest{cap: m.Capacity, leader: m.Leader}); !e.passive && e.better(e.best, b) {
			// The result misses the best of our subtree: our ECHO came too
			// late (the source had counted us by a stale UNREACHABLE).
			e.Campaign()
			return
		}
		if e.active {
			// Normally from the parent; from anyone else it is the same
			// result, the election's source decided it.
			e.decide(echoBest{cap: m.Capacity, leader: m.Leader})
		}
	}
}

// stepHigher handles a message of an election higher than ours.
func (e *Echo) stepHigher(m Message) {
	switch m.Type {
	case MsgElection:
		e.join(m.Election, m.From)
	case MsgEcho:
		// The sender thinks we are its parent in an election we do not
		// know: we restarted and lost it, and it can no longer complete.
		e.Campaign()
	case MsgCoordinator:
		// The result of an election we were not part of.
		b := echoBest{cap: m.Capacity, leader: m.Leader}
		switch {
		case !e.passive && e.better(e.self(), b):
			e.Campaign() // we were not counted, and we beat the winner
			return
		case !e.passive && e.active && e.parent == None && !e.answered:
			// Our own campaign turned out lower than an election already
			// decided: run it again above that one, or it would be lost
			// and the processes only it reached would never merge.
			e.Campaign()
			return
		}
		b = e.taken(b)
		e.cur, e.parent, e.children = m.Election, None, nil
		e.active, e.answered, e.pending = false, true, nil
		e.leader, e.leaderCap, e.term = b.leader, b.cap, m.Election.Seq
	}
}

// unreachable handles the driver's report that m.From could not be reached.
func (e *Echo) unreachable(m Message) {
	if !e.active || (m.Election != e.cur && m.Election != ElectionID{}) {
		return
	}
	switch {
	case e.pending[m.From]:
		e.answer(m.From, echoBest{})
	case m.From == e.parent && e.answered:
		// Our ECHO cannot reach the parent: the result will never reach us.
		e.Campaign()
	}
}

// answer records nb's answer and its subtree's best.
func (e *Echo) answer(nb ID, b echoBest) {
	if !e.pending[nb] {
		return
	}
	delete(e.pending, nb)
	e.progress()
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
