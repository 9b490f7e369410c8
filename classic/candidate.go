package classic

import (
	"fmt"
	"slices"
)

// CandidateElection is the candidate/ordinary election as a Machine. Only the
// configured candidates may lead; every member (candidate or ordinary) watches
// the leader.
//
// The protocol, all timing in ticks:
//
//   - The leader sends HEARTBEAT to every member each HeartbeatTicks.
//   - A process that hears no heartbeat from its leader for TimeoutTicks, or
//     whose Campaign is called, has noticed a failure. It waits its delay
//     δ = (p+1)·TimeoutTicks, where p is its position among all members by
//     rank (0 for the highest), so higher-priority processes act first.
//   - If a COORDINATOR (or a heartbeat from a candidate) arrives during δ the
//     process stands down. Otherwise it sends QUERY to every candidate and
//     collects QUERY_REPLY for at most TimeoutTicks (less when every candidate
//     has answered). A candidate that queries counts itself as alive.
//   - It then announces the highest-ranked live candidate: COORDINATOR with
//     Leader set, to every member. If no candidate answered it waits for the
//     next timeout and tries again.
//   - A candidate never follows a candidate it outranks (bully-back). When a
//     candidate that is not leading hears a HEARTBEAT from, or a COORDINATOR
//     naming, a lower-ranked candidate, it announces itself at once:
//     COORDINATOR naming itself to every member, then it leads. This happens
//     in any phase, during δ too: a candidate that restarts (Campaign) while a
//     lesser candidate leads takes over as soon as it hears that leader,
//     instead of standing down behind it; so does a candidate that an
//     ordinary process passed over because its QUERY_REPLY was lost. A
//     leader that hears a better candidate's heartbeat or COORDINATOR follows
//     it; a leader ignores a lower candidate's COORDINATOR and heartbeat
//     (its own heartbeats make that candidate follow it).
//
// What one member's message can make a process believe is bounded (issue
// 19): a COORDINATOR naming a candidate below a live leader is not
// followed, nor makes a candidate that follows a live leader above it take
// over, but for the leader's heir, once per announcer (see mayFollow and
// mayTakeOver).
//
// Every bully-back names a strictly better candidate than the leader it
// replaces, so leadership only moves up the ranking and the highest-ranked
// live, connected candidate ends up leading: whoever leads below it is heard
// by it and displaced. The rule concerns candidates only; an ordinary
// process still waits δ, and the argument below is unchanged.
//
// Because δ of consecutive positions differs by TimeoutTicks, the next
// process in line starts querying only after the first one has finished its
// query phase; its own query phase (another TimeoutTicks) then sees the first
// one's COORDINATOR as long as a one-way delay is below TimeoutTicks, and it
// stands down. Even if it did not, it would query the same live candidates and
// announce the same winner.
//
// Messages used: HEARTBEAT, QUERY, QUERY_REPLY, COORDINATOR.
type CandidateElection struct {
	cfg        Config
	candidates map[ID]bool
	delta      int // δ in ticks

	role   Role
	leader ID

	// elapsed counts ticks since the last sign of the leader (followers) or
	// since the last heartbeat sent (leader).
	elapsed int
	// phase is the failure-handling phase; wait and left count down its ticks.
	phase   candPhase
	left    int
	replies map[ID]bool

	// See mayFollow: the leader we left for an announcement of its heir,
	// and who made it; announcers shown wrong.
	usurped, announcer ID
	distrust           map[ID]bool

	passive bool // see Passive

	outbox
}

type candPhase uint8

const (
	candIdle     candPhase = iota // following a leader (or waiting for one)
	candWaiting                   // noticed a failure, waiting δ
	candQuerying                  // QUERY sent, collecting replies
)

var _ Machine = (*CandidateElection)(nil)

// NewCandidate returns the candidate/ordinary machine for cfg.ID. candidates
// must be a non-empty subset of cfg.Peers without repeats; cfg.ID may or may
// not be among them.
//
// Config fields used: ID, Peers, Rank (nil: HighestID), HeartbeatTicks
// (0: 2), TimeoutTicks (0: 10; must exceed HeartbeatTicks and a round trip).
// Rand is ignored.
func NewCandidate(cfg Config, candidates []ID) (*CandidateElection, error) {
	cfg, err := electConfig(cfg, "NewCandidate", true)
	if err != nil {
		return nil, err
	}
	if len(candidates) == 0 {
		return nil, fmt.Errorf("%w: NewCandidate: no candidates given; name at least one member that may lead", ErrBadCandidates)
	}
	members := make(map[ID]bool, len(cfg.Peers))
	for _, p := range cfg.Peers {
		members[p] = true
	}
	cs := make(map[ID]bool, len(candidates))
	for i, c := range candidates {
		if !members[c] {
			return nil, fmt.Errorf("%w: NewCandidate: candidates[%d] = %q is not in Config.Peers", ErrBadCandidates, i, c)
		}
		if cs[c] {
			return nil, fmt.Errorf("%w: NewCandidate: candidate %q is listed twice", ErrBadCandidates, c)
		}
		cs[c] = true
	}
	pos := slices.Index(electByRank(cfg.Rank, cfg.Peers), cfg.ID)
	return &CandidateElection{
		cfg:        cfg,
		outbox:     newOutbox(cfg),
		candidates: cs,
		delta:      (pos + 1) * cfg.TimeoutTicks,
		distrust:   map[ID]bool{},
	}, nil
}

// Delay returns this process's δ in ticks.
func (c *CandidateElection) Delay() int { return c.delta }

// IsCandidate reports whether id may lead.
func (c *CandidateElection) IsCandidate(id ID) bool { return c.candidates[id] }

// Campaign reports a noticed leader failure: the process starts waiting δ
// (unless it is already handling a failure).
func (c *CandidateElection) Campaign() { c.notice() }

func (c *CandidateElection) notice() {
	if c.passive {
		c.forget()
		return
	}
	if c.phase != candIdle {
		return
	}
	if c.role == Leader {
		// A leader has nothing to notice; it keeps leading.
		return
	}
	c.phase, c.left = candWaiting, c.delta
	c.role = Candidate
}

// Tick advances the logical clock by one tick.
func (c *CandidateElection) Tick() {
	switch {
	case c.role == Leader:
		c.elapsed++
		if c.elapsed >= c.cfg.HeartbeatTicks {
			c.elapsed = 0
			c.broadcast(Message{Type: MsgHeartbeat, Leader: c.cfg.ID})
		}
	case c.phase == candIdle:
		c.elapsed++
		if c.elapsed >= c.cfg.TimeoutTicks {
			c.notice()
		}
	case c.phase == candWaiting:
		c.left--
		if c.left <= 0 {
			c.query()
		}
	case c.phase == candQuerying:
		c.left--
		if c.left <= 0 {
			c.announce()
		}
	}
}

// query sends QUERY to every other candidate.
func (c *CandidateElection) query() {
	c.phase, c.left = candQuerying, c.cfg.TimeoutTicks
	c.replies = map[ID]bool{}
	if c.stands() {
		c.replies[c.cfg.ID] = true
	}
	for _, p := range c.cfg.Peers {
		if c.candidates[p] && p != c.cfg.ID {
			c.send(Message{Type: MsgQuery, To: p})
		}
	}
	if len(c.replies) == len(c.candidates) {
		c.announce()
	}
}

// announce picks the best live candidate and tells everyone.
func (c *CandidateElection) announce() {
	live := make([]ID, 0, len(c.replies))
	for id := range c.replies {
		live = append(live, id)
	}
	best := electBest(c.cfg.Rank, live)
	if c.passive && best == c.cfg.ID {
		c.forget()
		return
	}
	c.phase, c.replies, c.elapsed = candIdle, nil, 0
	if best == None {
		// Nobody answered: wait for the next timeout and try again.
		c.role, c.leader = Follower, None
		return
	}
	c.broadcast(Message{Type: MsgCoordinator, Leader: best})
	c.follow(best)
}

// forget is a passive process's election and takeover (see Passive): no
// leader, and the next announcement that mayFollow allows is followed. A
// passive process still queries the candidates when an announcement
// needs it (vouched), as an ordinary process does: the query finds the
// best live candidate, which a passive one takes only if it is another.
func (c *CandidateElection) forget() {
	c.role, c.leader, c.phase, c.replies, c.elapsed = Follower, None, candIdle, nil, 0
}

// stands reports whether this process is a candidate that stands: not a
// passive one (see Passive), which answers no query, outranks no one, and
// counts itself among no query's live candidates.
func (c *CandidateElection) stands() bool { return c.candidates[c.cfg.ID] && !c.passive }

// follow makes leader the current leader and ends any failure handling.
func (c *CandidateElection) follow(leader ID) {
	if leader == c.cfg.ID && c.passive {
		c.forget()
		return
	}
	c.leader, c.phase, c.replies, c.elapsed = leader, candIdle, nil, 0
	if leader == c.cfg.ID {
		c.role = Leader
		c.broadcast(Message{Type: MsgHeartbeat, Leader: c.cfg.ID})
	} else {
		c.role = Follower
	}
}

// outranks reports whether this process is a candidate that outranks the
// candidate id, and so must not follow it.
func (c *CandidateElection) outranks(id ID) bool {
	return c.stands() && id != c.cfg.ID && c.cfg.Rank.Compare(c.cfg.ID, id) > 0
}

// mayFollow reports whether a COORDINATOR from `from` naming the
// candidate l, which this process does not outrank, may make it l's
// follower: when it has no leader, suspects its leader (it waits δ or
// queries), leads, or l is its leader or outranks it. A COORDINATOR naming
// a candidate below a live leader is not followed (a mid-rank member could
// take a follower with one, as one did in issue 19), with one exception
// that keeps the one-announcement failover: the announcement of our
// leader's heir (the candidate next below it), the winner of any query
// after our leader died, by an announcer that has not been shown wrong (an
// announcer after whose heir announcement our leader spoke again is
// distrusted for good), once our leader has missed a heartbeat (missed).
//
// What the election cannot tell is an announcement naming a candidate
// above our leader, or any announcement while we have no live leader: that
// is how a recovered candidate takes over, and what an ordinary process's
// query ends with; nor the first heir announcement of each member.
func (c *CandidateElection) mayFollow(from, l ID) bool {
	switch {
	case l == c.leader:
		return true
	case c.role == Leader || c.leader != None && c.cfg.Rank.Compare(l, c.leader) > 0:
		c.usurped = None
		return true
	case c.leader == None || c.phase != candIdle:
		if !c.vouched(l) {
			return false
		}
		c.usurped = None
		return true
	case !c.distrust[from] && l == c.heir(c.leader) && c.missed():
		c.usurped, c.announcer = c.leader, from
		return true
	}
	c.distrust[from] = true
	return false
}

// missed reports whether this follower's leader has been silent for two
// heartbeat periods (half a timeout if that is shorter): only then does
// its heir's announcement count (see mayFollow), as in Bully.missed. An
// honest heir announces itself after it found the leader dead (a timeout)
// and queried; the node rebuilds a member's machine whenever its view
// changes, and each fresh machine took the heir's first announcement
// (found by the node simulator: the hostile member, the new leader's heir,
// held a victim whose view lost the crashed superpeer 15 s after the
// failover, 0.4 % of the samples after it).
func (c *CandidateElection) missed() bool { return c.elapsed >= c.cfg.missedTicks() }

// vouched reports whether l, announced to a process that has no leader or
// suspects its own, is the candidate a query would find, or else asks:
// issue 19's hostile member, third in rank, announced itself during the
// others' wait δ after the leader's crash and was their leader in 96 % of
// those samples (the textbook stands down on any announcement then), and
// took the members whose machines the node had just rebuilt, which follow
// the first heartbeat they hear. An announcement is taken at once only
// when it names the highest-ranked candidate but our suspected leader
// (its heir, when our leader has died), whom any query would find if it is
// live; any other makes the process query the candidates now (rather than
// after δ), and its query, which finds the best live candidate, decides.
func (c *CandidateElection) vouched(l ID) bool {
	for _, p := range c.cfg.Peers {
		if c.candidates[p] && p != c.leader && p != l && (p != c.cfg.ID || c.stands()) && c.cfg.Rank.Compare(p, l) > 0 {
			if c.phase != candQuerying {
				c.role = Candidate
				c.query()
			}
			return false
		}
	}
	return true
}

// mayTakeOver reports whether this candidate may take over on news from
// `from` that a candidate it outranks leads: yes, unless it follows a live
// leader above it. Then only its heir may (it was passed over after the
// leader died, which it has not noticed yet), on the word of a member that
// has not been shown wrong: if the leader speaks again, `from` is
// distrusted (see mayFollow). A member naming a low candidate would
// otherwise make every candidate above it announce itself.
func (c *CandidateElection) mayTakeOver(from ID) bool {
	if c.role != Follower || c.phase != candIdle || c.leader == None || c.cfg.Rank.Compare(c.leader, c.cfg.ID) <= 0 {
		return true
	}
	if c.distrust[from] || c.heir(c.leader) != c.cfg.ID {
		c.distrust[from] = true
		return false
	}
	c.usurped, c.announcer = c.leader, from
	return true
}

// heir returns the candidate ranked next below l, None if there is none.
func (c *CandidateElection) heir(l ID) ID {
	h := None
	for _, p := range c.cfg.Peers {
		if c.candidates[p] && c.cfg.Rank.Compare(l, p) > 0 && (h == None || c.cfg.Rank.Compare(p, h) > 0) {
			h = p
		}
	}
	return h
}

// takeOver announces this candidate as leader to everyone and leads
// (bully-back: it heard a lower-ranked candidate lead).
func (c *CandidateElection) takeOver() {
	if c.passive {
		c.forget() // see Passive
		return
	}
	c.broadcast(Message{Type: MsgCoordinator, Leader: c.cfg.ID})
	c.follow(c.cfg.ID)
}

// Step delivers one message.
func (c *CandidateElection) Step(m Message) {
	if m.From == c.cfg.ID || !slices.Contains(c.cfg.Peers, m.From) {
		return // only the other members take part
	}
	switch m.Type {
	case MsgHeartbeat:
		if !c.candidates[m.From] || m.From == c.cfg.ID {
			return
		}
		switch {
		case c.outranks(m.From):
			// A lesser candidate leads: take over, unless we already lead
			// (then our heartbeats make it follow us).
			if c.role != Leader && c.mayTakeOver(m.From) {
				c.takeOver()
			}
		case m.From == c.leader:
			if c.phase != candIdle {
				c.follow(m.From) // the leader was only slow
			}
			c.elapsed = 0
		case m.From == c.usurped && c.leader != None && c.cfg.Rank.Compare(m.From, c.leader) > 0:
			// The leader we left for an announcement of its heir is live:
			// the announcer was wrong, or lied.
			c.distrust[c.announcer] = true
			c.follow(m.From)
		case c.leader != None && c.cfg.Rank.Compare(m.From, c.leader) > 0:
			c.follow(m.From) // a better leader
		case c.leader == None || c.phase != candIdle:
			// Any leader while ours is suspected, or we have none, if it
			// is the one a query would find (see vouched).
			if c.vouched(m.From) {
				c.follow(m.From)
			}
		}
	case MsgCoordinator:
		if !c.candidates[m.Leader] {
			return
		}
		if c.outranks(m.Leader) {
			if c.role != Leader && c.mayTakeOver(m.From) {
				// Never follow a lesser candidate: take over.
				c.takeOver()
			}
			// A leader ignores a stale announcement of a lower
			// candidate: its heartbeats will correct the sender.
			return
		}
		if c.mayFollow(m.From, m.Leader) {
			c.follow(m.Leader)
		}
	case MsgQuery:
		if c.stands() {
			c.send(Message{Type: MsgQueryReply, To: m.From, Leader: c.leader})
		}
	case MsgQueryReply:
		if c.phase == candQuerying && c.candidates[m.From] {
			c.replies[m.From] = true
			if len(c.replies) == len(c.candidates) {
				c.announce()
			}
		}
	}
}

// Ready returns and clears the pending messages, with the current state.
func (c *CandidateElection) Ready() Ready {
	return Ready{Messages: c.take(), State: State{Role: c.role, Leader: c.leader}}
}
