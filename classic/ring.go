package classic

import (
	"maps"
	"slices"
)

// Ring is the ring election as a Machine, in two variants. Messages travel
// to the successor in Config.Peers order (cyclically), skipping members
// known to be down.
//
// The ID-list variant (NewRing, after Le Lann and the textbook ring
// algorithm): the initiator sends ELECTION with IDs = [itself] and
// Election = {Source: itself, Seq}; every process appends its ID and passes
// it on. When it comes back to the initiator, the list holds every live
// member; the initiator picks the highest-ranked one and sends COORDINATOR
// with Leader = the winner and IDs = the list (the new ring, in ring order
// from the initiator) around the ring, so every process learns both.
//
// The max-only variant (NewRingMax, after Chang and Roberts 1979): ELECTION
// carries only the highest-ranked ID seen so far, in Leader. A process of
// higher rank replaces it with its own ID. A process that receives its own
// ID back is the winner and sends COORDINATOR (Leader = itself) around.
//
// Both variants:
//
//   - Concurrent elections are extinguished as in Chang-Roberts. Each
//     process remembers the best it has forwarded or initiated in the
//     current election (max-only: the highest max; ID-list: the
//     highest-ranked initiator) and swallows any ELECTION that ranks below
//     it. Only the best message survives a full turn, so there is exactly
//     one COORDINATOR round; the others die on the way.
//   - A COORDINATOR must be a result an election can end with (see
//     validResult), and a follower of a live leader adopts none naming a
//     member below that leader (see mayAdopt), but forwards it.
//   - A COORDINATOR circulates once: it stops at the process that started it,
//     and a process that sees the same COORDINATOR (by Election) again within
//     2·TimeoutTicks drops it, so it cannot circle forever if its sender dies.
//   - Dead successors: the driver injects Message{Type: MsgUnreachable,
//     From: dead, To: self} when a send to dead failed. The process marks
//     dead as down for TimeoutTicks ticks (a later send tries it again, so a
//     recovered process rejoins) and resends its ring messages of the last
//     TimeoutTicks ticks that went to dead to the next live successor. An
//     ELECTION whose initiator (ID-list) or max (max-only) is down cannot
//     complete: ID-list, the process that finds this announces the list's
//     winner itself (the list has been all the way round); max-only, it
//     drops the message and starts a new election.
//   - Lost messages: a process taking part in an election that sees no
//     ELECTION or COORDINATOR for TimeoutTicks starts a new election.
//     TimeoutTicks must therefore exceed the time a message needs to go
//     round the ring twice.
//   - The leader sends HEARTBEAT every HeartbeatTicks to every other member
//     (ID-list: with IDs = the ring); a follower that hears nothing from its
//     leader for TimeoutTicks campaigns. A COORDINATOR or heartbeat naming a
//     leader that ranks below this process makes it forward the message and
//     then campaign, so a skipped or recovered higher process takes over.
//
// Costs with one initiator on n live processes: the ID-list variant uses n
// ELECTION and n COORDINATOR messages; the max-only variant n+d ELECTION
// (d: hops from the initiator to the winner) and n COORDINATOR, so between
// 2n and 3n-1. With every process initiating at once, the max-only variant
// uses at most n(n+1)/2 ELECTION messages (IDs decreasing along the ring)
// and 2n-1 when they increase (see the tests).
type Ring struct {
	c       memberCore
	maxOnly bool

	seq           uint64 // numbers this process's elections and COORDINATOR rounds
	participating bool   // taking part in an election (Role Candidate)
	best          ID     // see the type comment: best max / best initiator
	elapsed       int    // participating: ticks without election progress
	heard         int    // follower: ticks since the leader was last heard
	beat          int    // leader: ticks since the last heartbeat
	now           uint64 // local clock, in ticks

	down      map[ID]uint64         // member -> tick when it was found unreachable
	ring      []ID                  // ID-list: the last ring announced
	recent    []ringSent            // ring messages sent in the last TimeoutTicks
	seenCoord map[ElectionID]uint64 // COORDINATOR rounds seen -> tick, kept 2·TimeoutTicks
}

// ringSent is a ring message and the tick it was sent at.
type ringSent struct {
	m  Message
	at uint64
}

var _ Machine = (*Ring)(nil)

// NewRing returns a Ring running the ID-list variant. It uses ID, Peers (in
// ring order), Rank (nil means HighestID), HeartbeatTicks (0 means 2) and
// TimeoutTicks (0 means 10; see the type comment for what it must exceed).
// Rand is not used. For terms and majority wrap it with NewQuorum. Errors
// wrap ErrBadID or ErrBadTicks.
func NewRing(cfg Config) (*Ring, error) { return newRing(cfg, false, "NewRing") }

// NewRingMax returns a Ring running the max-only (Chang-Roberts) variant. It
// uses Config as NewRing does.
func NewRingMax(cfg Config) (*Ring, error) { return newRing(cfg, true, "NewRingMax") }

func newRing(cfg Config, maxOnly bool, algo string) (*Ring, error) {
	cfg, err := electConfig(cfg, algo, true)
	if err != nil {
		return nil, err
	}
	return &Ring{c: newMemberCore(cfg), maxOnly: maxOnly, down: map[ID]uint64{}, seenCoord: map[ElectionID]uint64{}}, nil
}

// MaxOnly reports whether r runs the max-only variant.
func (r *Ring) MaxOnly() bool { return r.maxOnly }

// Members returns the ring as this process last learned it from a
// COORDINATOR or heartbeat (ID-list variant only; nil before any, and always
// nil for the max-only variant).
func (r *Ring) Members() []ID { return slices.Clone(r.ring) }

// Campaign starts an election now.
func (r *Ring) Campaign() {
	if r.c.passive {
		r.forget()
		return
	}
	self := r.c.cfg.ID
	r.seq++
	r.participate()
	r.best, r.elapsed = self, 0
	m := Message{Type: MsgElection, Election: ElectionID{Source: self, Seq: r.seq}}
	if r.maxOnly {
		m.Leader = self
	} else {
		m.IDs = []ID{self}
	}
	r.sendRing(m)
}

func (r *Ring) participate() {
	if !r.participating {
		r.participating, r.elapsed = true, 0
	}
	r.c.role, r.c.leader = Candidate, None
}

// isDown reports whether id was found unreachable in the last TimeoutTicks.
func (r *Ring) isDown(id ID) bool {
	at, ok := r.down[id]
	return ok && r.now-at < uint64(r.c.cfg.TimeoutTicks)
}

// successor returns the next member after this process that is not down, or
// None if every other member is down.
func (r *Ring) successor() ID {
	peers := r.c.cfg.Peers
	i := r.c.member[r.c.cfg.ID]
	for k := 1; k < len(peers); k++ {
		p := peers[(i+k)%len(peers)]
		if !r.isDown(p) {
			return p
		}
	}
	return None
}

// sendRing sends m to the successor, or handles it locally when this
// process is the only live one.
func (r *Ring) sendRing(m Message) {
	to := r.successor()
	if to == None {
		if m.Type == MsgElection && !r.c.passive { // alone: the only candidate wins
			r.participating = false
			r.c.role, r.c.leader, r.beat = Leader, r.c.cfg.ID, 0
			if !r.maxOnly {
				r.ring = []ID{r.c.cfg.ID}
			}
		}
		return
	}
	m.To = to
	m.IDs = slices.Clone(m.IDs)
	r.c.send(m)
	r.recent = append(r.recent, ringSent{m: m, at: r.now})
}

// forwardElection passes an ELECTION on, unless the process it waits for
// (its initiator or its max) is known to be down.
func (r *Ring) forwardElection(m Message) {
	owner := m.Election.Source
	if r.maxOnly {
		owner = m.Leader
	}
	if owner != r.c.cfg.ID && r.isDown(owner) {
		if r.maxOnly {
			r.Campaign()
			return
		}
		var live []ID
		for _, id := range m.IDs {
			if !r.isDown(id) {
				live = append(live, id)
			}
		}
		r.announce(live)
		return
	}
	r.sendRing(m)
}

// announce ends an election: the highest-ranked of ids wins, and a
// COORDINATOR round tells everyone. For the max-only variant ids is just
// this process.
func (r *Ring) announce(ids []ID) {
	self := r.c.cfg.ID
	winner := None
	for _, id := range ids {
		if winner == None || r.c.above(id, winner) {
			winner = id
		}
	}
	if winner == None {
		winner = self
	}
	if winner == self && r.c.passive {
		r.forget()
		return
	}
	r.participating = false
	r.heard, r.beat = 0, 0
	r.c.leader = winner
	if winner == self {
		r.c.role = Leader
	} else {
		r.c.role = Follower
	}
	m := Message{Type: MsgCoordinator, Leader: winner}
	if !r.maxOnly {
		r.ring = slices.Clone(ids)
		m.IDs = ids
	}
	r.seq++
	m.Election = ElectionID{Source: self, Seq: r.seq}
	r.seenCoord[m.Election] = r.now
	r.dropRecentElections()
	r.sendRing(m)
}

// Relays implements Relayer: an ELECTION or COORDINATOR of an election a
// member started, passed on by a process this one does not count as a
// member. Members' views of a cluster can differ (the overlay's
// cluster-scoped membership: while two superpeers claim a cluster, each
// member knows the roster of the one it registered with, and the two
// superpeers each other), and a ring message crosses from one roster to
// the other at the superpeer that does not know its sender: dropped
// there, every election of the rightful superpeer stalled, and the two
// claimed the cluster for minutes (the node simulator, 64 nodes,
// TestRingSplitHeals).
func (r *Ring) Relays(m Message) bool {
	return (m.To == r.c.cfg.ID || m.To == None) && m.From != r.c.cfg.ID && m.From != None &&
		(m.Type == MsgElection || m.Type == MsgCoordinator) && r.c.isMember(m.Election.Source)
}

// Step implements Machine.
func (r *Ring) Step(m Message) {
	if !r.c.accepts(m) && !r.Relays(m) {
		return
	}
	if m.Type == MsgUnreachable {
		r.unreachable(m.From)
		return
	}
	delete(r.down, m.From) // it just spoke
	// A message from the wire may carry anything, and ring messages are
	// forwarded: keep only the fields the variant uses, and of a list its
	// members, each once, so that what we forward names only members and
	// cannot outgrow the wire.
	m.Term, m.Capacity = 0, 0
	switch {
	case r.maxOnly:
		m.IDs = nil
	case m.IDs != nil:
		m.IDs = r.c.cleanIDs(m.IDs)
	}
	if !r.maxOnly && m.Type == MsgElection {
		m.Leader = None
	}
	switch m.Type {
	case MsgElection:
		if r.maxOnly {
			r.stepMax(m)
		} else {
			r.stepList(m)
		}
	case MsgCoordinator:
		r.stepCoordinator(m)
	case MsgHeartbeat:
		r.stepHeartbeat(m)
	}
}

// stepMax handles a max-only ELECTION.
func (r *Ring) stepMax(m Message) {
	self, mx := r.c.cfg.ID, m.Leader
	if !r.c.isMember(mx) {
		return
	}
	switch {
	case mx == self:
		if r.participating && r.best == self {
			r.announce([]ID{self}) // my ID went all the way round
		}
	case r.c.above(mx, self) || r.c.passive: // a passive process replaces no lower max (see Passive)
		if r.participating && r.c.above(r.best, mx) {
			return // I already forwarded a higher max
		}
		r.participate()
		r.best, r.elapsed = mx, 0
		r.forwardElection(m)
	default: // a lower max: replace it with mine, unless I already took part
		if r.participating {
			return
		}
		r.participate()
		r.best, r.elapsed = self, 0
		m.Leader = self
		r.forwardElection(m)
	}
}

// stepList handles an ID-list ELECTION.
func (r *Ring) stepList(m Message) {
	self, src := r.c.cfg.ID, m.Election.Source
	if !r.c.isMember(src) {
		return
	}
	if src == self {
		if r.participating && r.best == self && m.Election.Seq == r.seq {
			r.announce(r.c.cleanIDs(m.IDs))
		}
		return
	}
	if slices.Contains(m.IDs, self) {
		return // it has been round without meeting its initiator: stale
	}
	if r.participating && r.c.above(r.best, src) {
		return // I already forwarded a higher initiator's election
	}
	if !r.participating || r.c.above(src, r.best) {
		r.best = src
	}
	r.participate()
	r.elapsed = 0
	if !r.c.passive { // a passive process relays, and does not stand (see Passive)
		m.IDs = append(slices.Clone(m.IDs), self)
	}
	r.forwardElection(m)
}

// stepCoordinator adopts and forwards a COORDINATOR.
func (r *Ring) stepCoordinator(m Message) {
	self := r.c.cfg.ID
	if _, seen := r.seenCoord[m.Election]; seen || m.Election.Source == self {
		return // it has been round
	}
	if !r.c.isMember(m.Leader) || !r.validResult(m) {
		return
	}
	r.seenCoord[m.Election] = r.now
	stands := r.c.above(self, m.Leader) && r.c.role == Leader && (r.maxOnly || electBest(r.c.cfg.Rank, r.ring) == self)
	if !r.maxOnly && m.IDs != nil && !stands {
		// The new ring is reported, not used for routing: only a failed
		// send (MsgUnreachable) marks a member down, so a member missing
		// from the list because it was down for a moment rejoins as soon
		// as it answers again.
		r.ring = r.c.cleanIDs(m.IDs)
	}
	adopt := r.mayAdopt(m.Leader)
	if adopt {
		r.dropRecentElections()
	}
	r.sendRing(m) // the others judge it for themselves
	switch {
	case !adopt:
	case stands:
		// A result below the leader that stands: it says so again to
		// every member at once, a heartbeat, rather than start an
		// election (a member that forges results every heartbeat made
		// its leader campaign at each, and every election it took part
		// in was a window in which a forged result counts: issue 19's
		// hostile member served 0.5 % of the samples under ring-max).
		// Not a COORDINATOR round: that goes round the ring, through
		// the forger if it is next, which swallows it; and it put the
		// heartbeats off, so that the forger's results, one every 200
		// ms, silenced the leader (found by the node simulator). The
		// heartbeat also ends the election of a member the forgery
		// drew into one (see stepHeartbeat). Its ring is not the one
		// the leader reports either: a forged one without the leader
		// made it campaign.
		r.heartbeat()
	case r.c.above(self, m.Leader) && !r.c.passive:
		r.Campaign() // I was skipped and outrank the winner
	default:
		r.follow(m.Leader)
	}
}

// validResult reports whether a COORDINATOR is what an election can end
// with: the ID-list variant's carries the ring it was decided on, this
// process included when it takes part in an election, and names its
// highest-ranked member (or, with an empty list, its announcer); the
// max-only variant's is announced by its winner, which ranks at least as
// high as the best max this process forwarded in the election it takes
// part in.
func (r *Ring) validResult(m Message) bool {
	if r.maxOnly {
		return m.Leader == m.Election.Source && (!r.participating || !r.c.above(r.best, m.Leader))
	}
	if len(m.IDs) == 0 {
		return m.Leader == m.Election.Source
	}
	if r.participating && !r.c.passive && !slices.Contains(m.IDs, r.c.cfg.ID) {
		return false // not the election we took part in (a passive process adds itself to none)
	}
	return electBest(r.c.cfg.Rank, m.IDs) == m.Leader
}

// mayAdopt reports whether a valid COORDINATOR naming l may end this
// process's election or replace its leader: when it takes part in an
// election, has no leader, leads, or l is its leader or outranks it. A
// follower whose leader is live (it hears from it within TimeoutTicks, or
// campaigns) took part in every election since, which would have made it
// a participant: a result naming someone below its leader is stale or
// forged, and one member could otherwise take followers with it (issue
// 19). It forwards the message all the same (the others judge it), and
// if its leader has died, its own timeout starts the election it missed.
// What the ring cannot tell is a well-formed result naming a member above
// our leader, or any result during an election we take part in.
func (r *Ring) mayAdopt(l ID) bool {
	return r.participating || r.c.leader == None || r.c.role == Leader || l == r.c.leader || r.c.above(l, r.c.leader)
}

// stepHeartbeat handles a leader's heartbeat.
func (r *Ring) stepHeartbeat(m Message) {
	self := r.c.cfg.ID
	if m.Leader != m.From {
		return
	}
	if r.participating {
		// During an election only a COORDINATOR counts, but for a
		// heartbeat from a member that ranks above this node and at
		// least as high as the best this election has seen: the
		// election would name it, or one above it that would not be
		// silent. Without this, a member that swallows the election
		// (a hostile one, next in the ring) kept the cluster electing
		// while its heir led, and every round was a window for its
		// forged results (found by the node simulator under ring-max).
		if !r.c.isMember(m.From) || !r.c.above(m.From, self) || r.c.above(r.best, m.From) {
			return
		}
		r.follow(m.From)
		return
	}
	switch {
	case m.From == r.c.leader:
		r.heard = 0
		if !r.maxOnly && m.IDs != nil {
			r.ring = r.c.cleanIDs(m.IDs)
		}
	case r.c.above(self, m.From) && r.c.passive:
		// It does not stand (see Passive): it follows a claimant below
		// it when it has no leader, or over a leader the claimant
		// outranks (not over one above it: found in review).
		if r.c.leader == None || r.c.above(m.From, r.c.leader) {
			r.follow(m.From)
		}
	case r.c.above(self, m.From):
		r.Campaign() // a lower process claims to lead
	case r.c.leader == None || r.c.role == Leader || r.c.above(m.From, r.c.leader):
		r.follow(m.From)
		if !r.maxOnly && m.IDs != nil {
			r.ring = r.c.cleanIDs(m.IDs)
		}
	}
}

// forget is a passive process's campaign, and what it does where a result
// names itself (see Passive): it forgets its leader, and relays the
// others' elections as usual.
func (r *Ring) forget() {
	r.participating = false
	r.c.role, r.c.leader = Follower, None
	r.heard = 0
}

func (r *Ring) follow(leader ID) {
	if leader == r.c.cfg.ID && r.c.passive {
		r.forget()
		return
	}
	r.participating = false
	r.heard, r.beat = 0, 0
	r.c.leader = leader
	if leader == r.c.cfg.ID {
		r.c.role = Leader
	} else {
		r.c.role = Follower
	}
}

// unreachable marks dead as down and reroutes the recent ring messages that
// went to it.
func (r *Ring) unreachable(dead ID) {
	if dead == r.c.cfg.ID {
		return
	}
	r.down[dead] = r.now
	var resend []Message
	kept := r.recent[:0]
	for _, s := range r.recent {
		if s.m.To == dead {
			resend = append(resend, s.m)
		} else {
			kept = append(kept, s)
		}
	}
	r.recent = kept
	for _, m := range resend {
		if m.Type == MsgElection {
			r.forwardElection(m)
		} else {
			r.sendRing(m)
		}
	}
}

// dropRecentElections forgets ELECTION messages sent before an election
// ended, so a late MsgUnreachable cannot revive them.
func (r *Ring) dropRecentElections() {
	r.recent = slices.DeleteFunc(r.recent, func(s ringSent) bool { return s.m.Type == MsgElection })
}

// Tick implements Machine.
func (r *Ring) Tick() {
	r.now++
	t := uint64(r.c.cfg.TimeoutTicks)
	r.recent = slices.DeleteFunc(r.recent, func(s ringSent) bool { return r.now-s.at > t })
	maps.DeleteFunc(r.seenCoord, func(_ ElectionID, at uint64) bool { return r.now-at > 2*t })
	switch {
	case r.participating:
		r.elapsed++
		if r.elapsed >= r.c.cfg.TimeoutTicks {
			r.Campaign()
		}
	case r.c.role == Leader:
		r.beat++
		if r.beat >= r.c.cfg.HeartbeatTicks {
			r.heartbeat()
		}
	default:
		r.heard++
		if r.heard >= r.c.cfg.TimeoutTicks {
			r.Campaign()
		}
	}
}

// heartbeat tells every member that the leader stands.
func (r *Ring) heartbeat() {
	r.beat = 0
	m := Message{Type: MsgHeartbeat, Leader: r.c.cfg.ID}
	if !r.maxOnly {
		m.IDs = r.ring
	}
	r.c.broadcast(m)
}

// Ready implements Machine.
func (r *Ring) Ready() Ready { return r.c.ready() }
