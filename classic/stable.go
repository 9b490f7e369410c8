package classic

import (
	"fmt"
	"maps"
	"slices"
)

// Stable is the stable-leader election with heartbeats as a Machine: once a
// leader is chosen it stays leader for as long as it is alive and reachable,
// however well a newcomer ranks, and hosts that keep losing the leadership
// (flapping) are passed over.
//
// The protocol, all timing in ticks:
//
//   - The leader sends HEARTBEAT{Term, IDs: flap counts} to every member
//     each HeartbeatTicks; its followers answer HEARTBEAT_ACK and adopt the
//     counts, so a process that restarts with no memory relearns them.
//   - A follower that hears no heartbeat from its leader for TimeoutTicks
//     suspects it, counts one flap for it (once per term the leader held),
//     and starts an election; so does a process whose Campaign is called.
//   - Election (best known candidate after a liveness poll): the candidate
//     sends ELECTION{Term: its term + 1} to every member and collects VOTE
//     for at most TimeoutTicks. A VOTE says that its sender is alive and
//     names the leader the sender still considers alive (itself if it leads,
//     its leader if it heard from it within TimeoutTicks, else none), and
//     carries the sender's flap counts (IDs lists an ID once per flap).
//   - If more than half of the votes name a live leader, the candidate
//     simply follows it: a live, reachable leader is never replaced. (A
//     leader's heartbeat during the election counts as its vote naming
//     itself; one member's word alone is not followed.) Otherwise the winner is the
//     highest-ranked live process (the voters and the candidate) whose flap
//     count is below MaxFlaps (WithMaxFlaps); only if every live process
//     has reached MaxFlaps does the highest-ranked of them win. The candidate
//     announces COORDINATOR{Term, Leader, IDs: flap counts} to everyone.
//   - A process without a live leader adopts a COORDINATOR or HEARTBEAT of
//     a higher term, or of its own term naming a higher-ranked leader (so
//     concurrent elections converge), and merges flap counts by taking the
//     maximum per ID. A process with a live leader (a leader too) adopts
//     only the latter: a live leader is never replaced, not by a higher
//     term either, which one member could claim with one message (issue
//     19). A leader that a majority has not acknowledged for TimeoutTicks
//     yields to any other leader it hears, so the sides of a healed
//     partition merge under the majority's leader. No term is taken that
//     is more than TermJumpPerTick per tick above this process's (see
//     mayReplace and ceiling).
//
// Messages used: HEARTBEAT, HEARTBEAT_ACK, ELECTION, VOTE, COORDINATOR.
type Stable struct {
	cfg      Config
	maxFlaps int

	role    Role
	leader  ID
	term    uint64
	elapsed int // follower: ticks since the leader's heartbeat; leader: since ours
	now     int
	passive bool // see Passive

	raisedAt int // tick term last rose (see ceiling)
	ledSince int // tick this process became leader

	electTerm uint64
	left      int
	votes     map[ID]bool
	named     map[ID]ID // voter -> the live leader its vote named (or its heartbeat, itself)

	asked    map[ID]uint64 // the term of each member's last ELECTION we answered (see fresh)
	flaps    map[ID]int    // flap count per ID, as observed or learned
	lastFlap map[ID]uint64 // the term for which we last counted a flap of ID
	lastAck  map[ID]int    // leader: when each follower last acknowledged

	outbox
}

var _ Machine = (*Stable)(nil)

// StableOption changes a Stable machine's settings.
type StableOption func(*Stable) error

// WithMaxFlaps sets the flap count at which a process is passed over while a
// process with fewer flaps is alive. The default is 2.
func WithMaxFlaps(n int) StableOption {
	return func(s *Stable) error {
		if n <= 0 {
			return fmt.Errorf("%w: WithMaxFlaps(%d): the threshold must be at least 1", ErrBadOption, n)
		}
		s.maxFlaps = n
		return nil
	}
}

// NewStable returns the stable-leader machine for cfg.ID, a follower with no
// leader that elects one after TimeoutTicks unless it hears a heartbeat.
//
// Config fields used: ID, Peers, Rank (nil: HighestID), HeartbeatTicks
// (0: 2), TimeoutTicks (0: 10; must exceed HeartbeatTicks and a round trip).
// Rand is ignored. For terms and majority wrap it with NewQuorum.
func NewStable(cfg Config, opts ...StableOption) (*Stable, error) {
	cfg, err := electConfig(cfg, "NewStable", true)
	if err != nil {
		return nil, err
	}
	s := &Stable{
		cfg: cfg, maxFlaps: 2, outbox: newOutbox(cfg),
		flaps: map[ID]int{}, lastFlap: map[ID]uint64{}, lastAck: map[ID]int{}, asked: map[ID]uint64{},
	}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Flaps returns how many times this process has seen (or learned that) id
// lose the leadership.
func (s *Stable) Flaps(id ID) int { return s.flaps[id] }

// Followers returns, for a leader, the members that acknowledged a heartbeat
// within the last TimeoutTicks, in Peers order; nil for a non-leader.
func (s *Stable) Followers() []ID {
	if s.role != Leader {
		return nil
	}
	var out []ID
	for _, p := range s.cfg.Peers {
		if at, ok := s.lastAck[p]; ok && s.now-at < s.cfg.TimeoutTicks {
			out = append(out, p)
		}
	}
	return out
}

// Campaign starts an election unless this process leads or is already
// running one. If the leader is in fact alive, the election only confirms it.
func (s *Stable) Campaign() {
	if s.role == Follower {
		s.startElection()
	}
}

// Tick advances the logical clock by one tick.
func (s *Stable) Tick() {
	s.now++
	switch s.role {
	case Leader:
		s.elapsed++
		if s.elapsed >= s.cfg.HeartbeatTicks {
			s.heartbeat()
		}
	case Candidate:
		s.left--
		if s.left <= 0 {
			s.finish()
		}
	case Follower:
		s.elapsed++
		if s.elapsed >= s.cfg.TimeoutTicks {
			s.lose()
			s.startElection()
		}
	}
}

// forget is what a passive process does where the others' election, or
// a member's word, would make it lead (see Passive): it follows no one,
// and its next poll (which names any other live member, never itself)
// finds the leader.
func (s *Stable) forget() {
	s.role, s.leader, s.elapsed = Follower, None, 0
	s.votes, s.named = nil, nil
}

// lose records that the current leader is gone.
func (s *Stable) lose() {
	if s.leader != None && s.leader != s.cfg.ID && s.lastFlap[s.leader] != s.term {
		s.lastFlap[s.leader] = s.term
		s.flaps[s.leader]++
	}
	s.leader = None
}

func (s *Stable) heartbeat() {
	s.elapsed = 0
	s.broadcast(Message{Type: MsgHeartbeat, Term: s.term, Leader: s.cfg.ID, IDs: s.flapList()})
}

func (s *Stable) startElection() {
	s.role = Candidate
	s.electTerm = s.term + 1
	s.left = s.cfg.TimeoutTicks
	s.votes = map[ID]bool{}
	s.named = map[ID]ID{}
	s.broadcast(Message{Type: MsgElection, Term: s.electTerm})
	if len(s.cfg.Peers) == 1 {
		s.finish()
	}
}

// liveLeader is the live leader the election follows: the best-ranked of
// those named by more than half of the voters (a vote names the leader its
// sender considers alive; a heartbeat during the election names its
// sender). One voter's word is not enough (issue 19: a member that
// heartbeats at every election would be followed by every candidate);
// when the leader is alive and only this process lost it, every voter
// names it.
func (s *Stable) liveLeader() ID {
	count := map[ID]int{}
	for _, l := range s.named {
		count[l]++
	}
	best := None
	for l, c := range count {
		if 2*c > len(s.votes) && (best == None || s.cfg.Rank.Compare(l, best) > 0) {
			best = l
		}
	}
	return best
}

// finish ends the election: follow a live leader, or announce a winner.
func (s *Stable) finish() {
	if l := s.liveLeader(); l != None {
		s.follow(l, s.term)
		return
	}
	live := []ID{s.cfg.ID}
	if s.passive {
		live = nil // see Passive: it polls, but does not stand
	}
	for id := range s.votes {
		live = append(live, id)
	}
	if len(live) == 0 {
		s.forget()
		return
	}
	stable := slices.DeleteFunc(slices.Clone(live), func(id ID) bool { return s.flaps[id] >= s.maxFlaps })
	if len(stable) == 0 {
		stable = live
	}
	w := electBest(s.cfg.Rank, stable)
	s.broadcast(Message{Type: MsgCoordinator, Term: s.electTerm, Leader: w, IDs: s.flapList()})
	s.follow(w, s.electTerm)
}

// follow makes leader (of term) the current leader and ends any election.
func (s *Stable) follow(leader ID, term uint64) {
	if term > s.term {
		s.raisedAt = s.now
	}
	if leader == s.cfg.ID && s.passive {
		s.term = max(s.term, term)
		s.forget() // see Passive
		return
	}
	s.leader, s.term = leader, term
	s.votes, s.named = nil, nil
	s.elapsed = 0
	if leader == s.cfg.ID {
		if s.role != Leader {
			s.ledSince = s.now
		}
		s.role = Leader
		s.lastAck = map[ID]int{}
		s.heartbeat()
		return
	}
	s.role = Follower
}

// supersedes reports whether leader l of term t should replace the one we follow.
func (s *Stable) supersedes(l ID, t uint64) bool {
	if t != s.term {
		return t > s.term
	}
	return s.leader == None || s.cfg.Rank.Compare(l, s.leader) > 0
}

// Step delivers one message.
func (s *Stable) Step(m Message) {
	if m.From == s.cfg.ID || !slices.Contains(s.cfg.Peers, m.From) || m.Term > maxTerm {
		return // only the other members take part; see maxTerm
	}
	if s.role == Follower && s.leader == None && (m.Type == MsgHeartbeat || m.Type == MsgCoordinator) && m.Term <= s.ceiling() &&
		(s.asked[m.From] != m.Term || m.Term == 0) {
		// A process that has never had a leader (it has just started)
		// does not take one member's word for who leads, unless it is
		// the result of that member's election it voted in: it asks them
		// all (see fresh).
		s.startElection()
	}
	switch m.Type {
	case MsgHeartbeat:
		switch {
		case m.Term > s.ceiling():
			return // see TermJumpPerTick
		case m.From == s.leader && s.role != Leader:
			s.follow(m.From, max(s.term, m.Term))
		case s.role == Candidate && m.Term >= s.term:
			// A live leader, as far as its own word goes: a vote for
			// it, which the election follows if most voters agree.
			s.votes[m.From], s.named[m.From] = true, m.From
			if len(s.votes) == len(s.cfg.Peers)-1 {
				s.finish()
			}
			return
		case s.mayReplace(m.From, m.Term):
			s.follow(m.From, max(s.term, m.Term))
		default:
			return
		}
		s.mergeFlaps(m.IDs)
		s.send(Message{Type: MsgHeartbeatAck, To: m.From, Term: s.term})
	case MsgHeartbeatAck:
		if s.role == Leader {
			s.lastAck[m.From] = s.now
		}
	case MsgElection:
		s.asked[m.From] = m.Term
		s.send(Message{Type: MsgVote, To: m.From, Term: m.Term, Leader: s.aliveLeader(), IDs: s.flapList()})
	case MsgVote:
		if s.role != Candidate || m.Term != s.electTerm {
			return
		}
		s.mergeFlaps(m.IDs)
		s.votes[m.From] = true
		if m.Leader != None && m.Leader != s.cfg.ID && slices.Contains(s.cfg.Peers, m.Leader) {
			s.named[m.From] = m.Leader
		}
		if len(s.votes) == len(s.cfg.Peers)-1 {
			s.finish()
		}
	case MsgCoordinator:
		s.mergeFlaps(m.IDs)
		switch {
		case !slices.Contains(s.cfg.Peers, m.Leader) || m.Term > s.ceiling():
		case s.role == Candidate && m.Term >= s.term:
			// Another candidate's result: its sender's vote for the
			// leader it names, which the election follows if most
			// voters agree, as a heartbeat's (see fresh).
			s.votes[m.From], s.named[m.From] = true, m.Leader
			if len(s.votes) == len(s.cfg.Peers)-1 {
				s.finish()
			}
		case s.mayReplace(m.Leader, m.Term):
			s.follow(m.Leader, max(s.term, m.Term))
		}
	}
}

// fresh: what a process without a live leader believes (issue 19's
// hostile member, in the node simulator: after the leader's crash, every
// member below the attacker followed it in all samples). Such a process
// took any announcement of a higher term, and then kept its announcer as
// a live leader for as long as it heartbeats: a candidate took the first
// COORDINATOR of a higher term, from anyone, and so did a process that
// had just started (the node builds a new machine whenever the members
// change, as after a crash), which took the first HEARTBEAT as well. Now
// neither takes one member's word:
//
//   - A candidate counts a COORDINATOR as its sender's vote for the leader
//     it names, as it counts a heartbeat as its sender's vote for itself;
//     its election follows a leader most voters name, or elects the best
//     live member itself. An honest candidate's result names that member
//     too (all candidates ask all members), so concurrent elections agree
//     as before.
//   - A process that has never had a leader starts an election at the first
//     HEARTBEAT or COORDINATOR it gets (rather than at its timeout), and
//     counts it as a vote: a live leader is then followed within a round
//     trip of the votes, by the majority's word. But for the result of an
//     election it voted in (an announcement of term t from the member
//     whose ELECTION of term t it answered last): at a cold start every
//     process would otherwise run an election of its own when the first
//     one ends (3(n-1) messages became 3n(n-1), bench's
//     TestElectionMatchesTheory). A member that runs an election to
//     announce itself afterwards is not caught by this.
//
// mayReplace reports whether a HEARTBEAT or COORDINATOR naming leader l in
// term t may replace the leader this process has. A live leader is never
// replaced (the premise of the algorithm), so what one member's message
// can make a process believe is bounded (issue 19):
//
//   - A candidate, or a follower whose leader has been silent for
//     TimeoutTicks: the usual rule (a higher term, or the same term and a
//     higher-ranked leader; see supersedes).
//   - A follower of a live leader: only a leader of the same term that
//     outranks it (two elections of one term ended at once, and the
//     better winner stands). An honest election of a higher term replaces
//     no live leader: its candidate asked us, and our vote named our live
//     leader, which it would then have followed.
//   - A leader: the same; and, once it has led for TimeoutTicks without
//     a majority of the members acknowledging its heartbeats, any other
//     leader it hears, so that the sides of a healed partition merge under
//     the leader with the majority (this process's term does not go down).
//
// What the algorithm cannot tell is a same-term announcement naming a
// member above the leader, and any announcement to a process without a
// live leader.
func (s *Stable) mayReplace(l ID, t uint64) bool {
	switch {
	case l == s.cfg.ID && s.role == Leader:
		return false
	case s.role == Candidate, s.role == Follower && s.aliveLeader() == None:
		return s.supersedes(l, t)
	case t == s.term && s.cfg.Rank.Compare(l, s.leader) > 0:
		return true
	case s.role == Leader:
		return !s.backed()
	}
	return false
}

// backed reports whether this leader has led for less than TimeoutTicks,
// or a majority of the members (itself included) acknowledged one of its
// heartbeats within the last TimeoutTicks.
func (s *Stable) backed() bool {
	return s.now-s.ledSince < s.cfg.TimeoutTicks || 2*(len(s.Followers())+1) > len(s.cfg.Peers)
}

// ceiling is the highest term this process takes from a message now: one
// above its own, plus TermJumpPerTick per tick since its term last rose,
// so that no member can push the terms towards their end (see
// TermJumpPerTick).
func (s *Stable) ceiling() uint64 {
	return termCeiling(s.term, s.now-s.raisedAt)
}

// aliveLeader is the leader this process currently considers alive.
func (s *Stable) aliveLeader() ID {
	switch {
	case s.role == Leader:
		return s.cfg.ID
	case s.role == Follower && s.leader != None && s.elapsed < s.cfg.TimeoutTicks:
		return s.leader
	}
	return None
}

// flapList encodes the flap counts as a sorted list with each ID repeated
// once per flap, up to MaxFlaps times: only the threshold matters, and the
// list must stay within what the wire carries (a member that flapped, or
// that a hostile member said flapped, thousands of times would otherwise
// make our heartbeats too large to send).
func (s *Stable) flapList() []ID {
	var out []ID
	for _, id := range slices.Sorted(maps.Keys(s.flaps)) {
		for range min(s.flaps[id], s.maxFlaps) {
			out = append(out, id)
		}
	}
	return out
}

// mergeFlaps takes the maximum of our counts and those encoded in ids. IDs
// that are not members are ignored: no one can fill our table (and our
// heartbeats) with strangers.
func (s *Stable) mergeFlaps(ids []ID) {
	got := map[ID]int{}
	for _, id := range ids {
		if slices.Contains(s.cfg.Peers, id) {
			got[id]++
		}
	}
	for id, c := range got {
		s.flaps[id] = max(s.flaps[id], c)
	}
}

// Ready returns and clears the pending messages, with the current state.
func (s *Stable) Ready() Ready {
	return Ready{Messages: s.take(), State: State{Role: s.role, Leader: s.leader, Term: s.term}}
}
