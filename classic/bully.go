package classic

import (
	"slices"
)

// memberCore is the bookkeeping shared by Bully, NextInLine and Ring: the
// completed config, the outbox, and the externally visible role and leader.
type memberCore struct {
	cfg    Config
	member map[ID]int // position of each peer in cfg.Peers
	role   Role
	leader ID
	outbox
	passive bool // see Passive
}

func newMemberCore(cfg Config) memberCore {
	c := memberCore{cfg: cfg, member: make(map[ID]int, len(cfg.Peers)), outbox: newOutbox(cfg)}
	for i, p := range cfg.Peers {
		c.member[p] = i
	}
	return c
}

// above reports whether a ranks above b.
func (c *memberCore) above(a, b ID) bool { return c.cfg.Rank.Compare(a, b) > 0 }

func (c *memberCore) isMember(id ID) bool {
	_, ok := c.member[id]
	return ok
}

// cleanIDs keeps the members of ids, each once, in order: a list received
// from the wire (a failover list, a ring) may carry anything.
func (c *memberCore) cleanIDs(ids []ID) []ID {
	out := make([]ID, 0, len(ids))
	seen := make(map[ID]bool, len(ids))
	for _, id := range ids {
		if c.isMember(id) && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// accepts reports whether m is addressed to this process and comes from
// another configured member. Anything else is dropped unseen.
func (c *memberCore) accepts(m Message) bool {
	return (m.To == c.cfg.ID || m.To == None) && c.isMember(m.From) && m.From != c.cfg.ID
}

func (c *memberCore) ready() Ready {
	return Ready{Messages: c.take(), State: State{Role: c.role, Leader: c.leader}}
}

// bullyPhase is where a Bully process is in an election.
type bullyPhase uint8

const (
	bullyIdle          bullyPhase = iota // follower or leader, no election running
	bullyAwaitOK                         // sent ELECTION, waiting for an OK
	bullyAwaitCoord                      // got an OK, waiting for COORDINATOR
	bullyAwaitFailover                   // next-in-line: leader lost, waiting for my slot
)

// Bully is the bully election of Garcia-Molina (1982) as a Machine, with
// leader heartbeats for failure detection. The live process of highest rank
// (Config.Rank) always ends up as the leader.
//
// The protocol, all timing in ticks (T = TimeoutTicks, H = HeartbeatTicks):
//
//   - Campaign sends ELECTION to every member that ranks above this process.
//     If none does, the process wins at once.
//   - A process that receives ELECTION from a lower-ranked one answers OK
//     and, unless it is already running an election, starts its own. A
//     leader answers OK and a COORDINATOR to the sender instead, so the
//     sender learns that the leader is alive. An ELECTION that names the
//     receiver's leader (Leader: the sender only doubts it, see below)
//     starts the receiver's election only once the receiver too has
//     missed that leader's heartbeats for two periods (Config's
//     missedTicks), and a heartbeat meanwhile calls it off.
//   - A candidate that gets no OK within T wins: it becomes leader and sends
//     COORDINATOR (Leader = itself) to every other member.
//   - A candidate that got an OK waits 2T for the COORDINATOR (the higher
//     process needs up to T to win, plus the delivery), and starts a new
//     election if none arrives.
//   - A COORDINATOR from a higher-ranked process is adopted when this
//     process has no leader (it is electing, or lost its leader), leads, or
//     follows a leader that the sender outranks; over a live leader that
//     outranks the sender, only the heir's (the member next below that
//     leader) counts, once (see mayFollow). One from a lower-ranked process
//     is answered by an election of our own: the higher process bullies
//     its way back.
//   - A leader that adopts a higher process's COORDINATOR tells its
//     followers with a COORDINATOR naming that process (Leader ≠ sender:
//     a relay). A follower that gets a relay from its own leader, naming a
//     member above it, campaigns at once rather than wait T for heartbeats
//     that stopped; a relay from anyone else is dropped, and none is
//     adopted as such.
//   - The leader sends HEARTBEAT (Leader = itself) every H. A follower that
//     hears nothing from its leader for T (or has had no leader for T)
//     campaigns; as it only doubts its leader (see doubt), it names it
//     in its ELECTIONs, and goes back to it on its heartbeat or
//     COORDINATOR (no OK needed). Heartbeats from a higher-ranked process
//     are adopted like a COORDINATOR, without the heir's exception;
//     candidates wait for the COORDINATOR instead.
//
// A recovered process is a fresh Bully on which the driver calls Campaign:
// if it outranks every live process it announces itself and takes over.
// Bully ignores MsgUnreachable: a dead higher process is detected by its
// missing OK.
//
// With the highest process dead and the lowest one initiating, an election
// on n processes costs n(n-1)/2 ELECTION, (n-1)(n-2)/2 OK and n-1
// COORDINATOR messages, n(n-1) in all; with the second highest initiating it
// costs 1 ELECTION and n-1 COORDINATOR messages, n in all (see
// TestBullyMessageCounts).
type Bully struct {
	c       memberCore
	phase   bullyPhase
	elapsed int // ticks in the current phase
	heard   int // follower: ticks since the leader was last heard
	beat    int // leader: ticks since the last heartbeat
	now     int // ticks since the machine started
	prodded int // tick of the last election a lower member's ELECTION started over a live leader
	// See doubt: whether a lower member's ELECTION came while the leader
	// this process followed when its running election began on a
	// suspicion (suspect) was heard. (The counters that Idle reads come
	// first, in one cache line.)
	prodPending bool

	// Next-in-line failover (see NextInLine); unused when failover is false.
	failover bool
	listLen  int  // length of the list this process publishes as leader
	list     []ID // the failover list last published by the leader
	wait     int  // bullyAwaitFailover: ticks to wait before acting
	takeOver bool // bullyAwaitFailover: on expiry take over (true) or run a bully election

	// See mayFollow: the members that answered OK in our election; the
	// leader we left for its heir's announcement; the members whose
	// announcements a live leader of ours outlived.
	oks      map[ID]bool
	lost     ID // next-in-line: the leader whose failover we wait for
	usurped  ID
	distrust map[ID]bool

	// See doubt: the leader this process followed when its running
	// election began on a suspicion (a timeout, a prod), not on news of
	// its loss (and prodPending above).
	suspect ID

	asks asks // ELECTIONs this process may send and receive (see flood.go)
}

var _ Machine = (*Bully)(nil)

// NewBully returns a Bully for cfg. It uses ID, Peers (any order), Rank (nil
// means HighestID), HeartbeatTicks (0 means 2) and TimeoutTicks (0 means 10),
// which must exceed HeartbeatTicks and a round trip. Rand is not used. For
// terms and majority wrap it with NewQuorum. Errors wrap ErrBadID or
// ErrBadTicks.
//
// The process starts as a follower without a leader; it campaigns on its
// own after TimeoutTicks unless a COORDINATOR or heartbeat arrives first.
func NewBully(cfg Config) (*Bully, error) {
	cfg, err := electConfig(cfg, "NewBully", true)
	if err != nil {
		return nil, err
	}
	return newBully(cfg, false, 0), nil
}

func newBully(cfg Config, failover bool, listLen int) *Bully {
	return &Bully{c: newMemberCore(cfg), failover: failover, listLen: listLen, distrust: map[ID]bool{},
		prodded: -cfg.TimeoutTicks, asks: newAsks(cfg.TimeoutTicks)}
}

// Campaign starts an election now: ELECTION to every higher-ranked member,
// or, if there is none, an immediate win.
func (b *Bully) Campaign() { b.campaign(None) }

// campaign starts an election; suspect, if not None, is the leader this
// process doubts (see doubt), named in its ELECTIONs.
func (b *Bully) campaign(suspect ID) {
	if b.c.passive {
		b.forget()
		return
	}
	b.c.role, b.c.leader = Candidate, None
	b.suspect, b.prodPending = suspect, false
	b.elapsed = 0
	b.oks = map[ID]bool{}
	sent := false
	for _, p := range b.c.cfg.Peers {
		if b.c.above(p, b.c.cfg.ID) {
			b.ask(p)
			sent = true
		}
	}
	if !sent {
		b.win()
		return
	}
	b.phase = bullyAwaitOK
}

// doubt starts an election on a suspicion that the leader is gone (its
// heartbeats stopped for a timeout, or a lower member's ELECTION came
// after they stopped for two periods), not on news of its loss (the
// driver's Campaign). Its ELECTIONs name the leader it doubts, so that a
// member above that still hears that leader does not start an election
// of its own (see Step), and the doubted leader's word, its heartbeat or
// COORDINATOR, ends the election at once, without the OK a candidate
// otherwise waits for first. A live leader answers the ELECTION with OK
// and COORDINATOR, so on a host whose messages are late now and then,
// the follower that missed its heartbeats is a candidate for about a
// round trip, alone; before, its ELECTIONs made every member between it
// and the leader campaign too, each of those made the members above it
// campaign, and an answer late by more than a timeout let one of them
// win over the live leader (issue 22: a converged in-process testnet of
// 32 nodes showed clusters electing for up to 39 s at a load average of
// 14; TestBullyLateHeartbeats). A dead leader answers nothing: the
// election runs as Campaign's, in the same time. The doubted leader
// is not named while the election runs: the overlay then takes the
// lookup's answer, which a dead leader's name would hold up (in the node
// simulator, members named a cut-off superpeer while their lookup named
// a live one for longer than a timeout).
func (b *Bully) doubt() {
	l := b.c.leader
	if l == b.c.cfg.ID {
		l = None
	}
	b.campaign(l)
}

// win makes this process the leader and announces it to everyone.
func (b *Bully) win() {
	if b.c.passive {
		b.forget()
		return
	}
	b.c.role, b.c.leader = Leader, b.c.cfg.ID
	b.suspect, b.prodPending = None, false
	b.phase, b.elapsed, b.beat = bullyIdle, 0, 0
	if b.failover {
		b.list = b.failoverList()
	}
	b.c.broadcast(Message{Type: MsgCoordinator, Leader: b.c.cfg.ID, IDs: b.published()})
}

// published is the IDs field of this leader's COORDINATOR and heartbeats.
func (b *Bully) published() []ID {
	if !b.failover {
		return nil
	}
	return b.list
}

// follow adopts leader as this process's leader.
func (b *Bully) follow(leader ID, ids []ID) {
	b.c.role, b.c.leader = Follower, leader
	b.suspect, b.prodPending = None, false
	b.phase, b.elapsed, b.heard = bullyIdle, 0, 0
	if b.failover && ids != nil {
		b.list = b.c.cleanIDs(ids)
	}
}

// mayFollow reports whether a COORDINATOR (coord) or HEARTBEAT from p, a
// member that outranks this process, may make it p's follower:
//
//   - When it leads, or follows a leader that p outranks: yes.
//   - When it runs an election of its own (it sent ELECTION to every member
//     above it): a COORDINATOR only from a member that answered it with OK
//     and ranks at least as high as every member that did. An honest winner
//     is the highest live member and answers every ELECTION it gets with OK
//     (a leader at once with OK and COORDINATOR), so it always passes; a
//     member that a higher live one outranks does not, nor one that sends
//     COORDINATOR without having been asked (it gets an ELECTION back, so
//     that a leader whose OK was lost, or that won before our ELECTION
//     reached it, answers again with OK and COORDINATOR).
//   - When it waits for its next-in-line failover slot: a member on the
//     failover list, ranked above its first, or the leader it lost (it was
//     only slow).
//   - When it has no leader otherwise (it has just started): yes.
//   - When it follows a live leader (a follower's leader is at most
//     TimeoutTicks silent, or it would have campaigned) that outranks p:
//     no, which a mid-rank member used to take 98 % of the followers it told
//     (issue 19). Our own timeout, or the driver's Campaign on a lost
//     connection, starts an election that the winner's answer ends. One
//     exception keeps the textbook's one-message failover: the COORDINATOR
//     of our leader's heir (the member next below it in rank, whom any
//     election without our leader elects; next-in-line's first in the
//     list), which announces that our leader died before we noticed. It
//     counts unless the heir has been shown wrong: it announced itself, as
//     anything, over a live leader of ours before (see distrust). Until we
//     follow it through an election of our own, its word then no longer
//     counts over a live leader. Nor does it count before our leader has
//     missed a heartbeat (see missed). (Issue 19's hostile member, third
//     in rank, became the heir when the leader crashed, and after each
//     rebuild of its victims' machines, which trust every heir afresh,
//     held them until the new leader's next heartbeat: 0.7-1.4 % of the
//     samples after the failover.)
//
// What bully cannot tell is a higher-ranked member's COORDINATOR or
// heartbeat over our leader (it is how a recovered process takes over,
// honest or not), the first announcement of our leader's heir, and, in an
// election of ours, the OK and COORDINATOR of a member that ranks above
// every other that answered (in time).
func (b *Bully) mayFollow(p ID, coord bool) bool {
	switch {
	case p == b.c.leader || b.c.role == Leader || b.c.leader != None && b.c.above(p, b.c.leader):
		return true
	case b.campaigning():
		if coord && p == b.suspect {
			// Our leader lives: it ends the election we started on a
			// suspicion, unless a member above it answered.
			return !slices.ContainsFunc(b.c.cfg.Peers, func(q ID) bool { return b.oks[q] && b.c.above(q, p) })
		}
		if coord && !b.oks[p] {
			// Not asked, or its OK was lost: ask it (again). A leader
			// answers with OK and COORDINATOR at once.
			b.ask(p)
			return false
		}
		return coord && !slices.ContainsFunc(b.c.cfg.Peers, func(q ID) bool { return b.oks[q] && b.c.above(q, p) })
	case b.phase == bullyAwaitFailover && len(b.list) > 0:
		return p == b.lost || slices.Contains(b.list, p) || b.c.above(p, b.list[0])
	case b.c.leader == None:
		return true
	case coord && !b.distrust[p] && p == b.heir(b.c.leader) && b.missed():
		return true
	}
	b.distrust[p] = true // announced itself over our live leader, who outranks it
	return false
}

// missed reports whether this follower's leader has been silent for two
// heartbeat periods (half a timeout if that is shorter): it missed one.
// Only then does its heir's announcement count (see mayFollow). An honest
// heir announces itself a timeout after it started its election (its
// own; the timeout exceeds two heartbeats in any configuration where the
// exception matters), which it started after our leader died, after the
// last heartbeat we heard; a live leader is heard every heartbeat period,
// give or take a delivery.
func (b *Bully) missed() bool { return b.heard >= b.c.cfg.missedTicks() }

// adopt follows p, a member mayFollow allowed, and keeps the heir's
// record: whom p replaces while it was live (usurped); if that leader
// speaks again the heir is distrusted. Following p through an election of
// our own restores its word.
func (b *Bully) adopt(p ID, ids []ID) {
	switch {
	case p == b.c.leader: // a repeat: the record stands
	case b.campaigning():
		b.usurped = None
		delete(b.distrust, p)
	case p == b.usurped && b.c.leader != None:
		b.distrust[b.c.leader] = true // the leader the heir replaced is live
		b.usurped = None
	case b.c.leader != None && b.c.role == Follower && !b.c.above(p, b.c.leader):
		b.usurped = b.c.leader // the heir's announcement over a live leader
	default:
		b.usurped = None
	}
	b.follow(p, ids)
}

// heir returns the member ranked next below l, None if l ranks lowest.
func (b *Bully) heir(l ID) ID {
	h := None
	for _, p := range b.c.cfg.Peers {
		if b.c.above(l, p) && (h == None || b.c.above(p, h)) {
			h = p
		}
	}
	return h
}

// ask sends ELECTION to p, a member above this process, within this
// process's own bound (see flood.go): over it, the ELECTION is not sent,
// as if lost.
func (b *Bully) ask(p ID) {
	if b.asks.send(p, b.now) {
		b.c.send(Message{Type: MsgElection, To: p, Leader: b.suspect})
	}
}

// campaigning reports whether an election of this process is running.
func (b *Bully) campaigning() bool {
	return b.phase == bullyAwaitOK || b.phase == bullyAwaitCoord
}

// Step implements Machine.
func (b *Bully) Step(m Message) {
	if !b.c.accepts(m) {
		return
	}
	self := b.c.cfg.ID
	switch m.Type {
	case MsgElection:
		if !b.c.above(self, m.From) || !b.asks.receive(m.From, b.now) {
			return // only lower-ranked processes address us, and no more than they may
		}
		if b.c.passive {
			// It does not stand (see Passive): an OK would hold the
			// sender back for a COORDINATOR that never comes.
			return
		}
		b.c.send(Message{Type: MsgOK, To: m.From})
		switch {
		case b.c.role == Leader:
			b.c.send(Message{Type: MsgCoordinator, To: m.From, Leader: self, IDs: slices.Clone(b.published())})
		case b.leaderless():
			b.Campaign()
		case !b.campaigning() && m.Leader != None && m.Leader == b.c.leader && !b.missed():
			// The sender doubts our leader (see doubt), whom we hear:
			// our election waits until we miss a heartbeat too
			// (Tick), and a heartbeat calls it off.
			b.prodPending = true
		case !b.campaigning() && b.now-b.prodded >= b.c.cfg.TimeoutTicks:
			b.prodded = b.now
			if m.Leader != None && m.Leader == b.c.leader {
				b.doubt() // it doubts our leader, and we missed a heartbeat
			} else {
				b.Campaign() // it lost the leader (Campaign)
			}
		}
	case MsgOK:
		if b.campaigning() && b.c.above(m.From, self) {
			b.oks[m.From] = true
		}
		if b.phase == bullyAwaitOK && b.c.above(m.From, self) {
			b.phase, b.elapsed = bullyAwaitCoord, 0
		}
	case MsgCoordinator:
		if m.Leader != m.From {
			// A relay: the leader this process follows yields to one
			// above it. It is no proof that the other leads, so this
			// process asks, an election (the members above it answer,
			// the new leader among them); without the relay it waited
			// a timeout for heartbeats that had stopped (found by the
			// node simulator, where the new leader, a restarted peer,
			// did not know the old one's followers yet).
			if m.From == b.c.leader && b.c.role == Follower && b.c.isMember(m.Leader) && b.c.above(m.Leader, m.From) && !b.campaigning() {
				b.Campaign()
			}
			return
		}
		switch {
		case !b.c.above(m.From, self):
			switch {
			case b.c.passive && b.lowerMayLead(m.From):
				b.adopt(m.From, m.IDs) // it does not stand (see Passive): it follows
			case b.leaderless():
				b.Campaign() // bully back
			}
		case b.mayFollow(m.From, true):
			led := b.c.role == Leader
			b.adopt(m.From, m.IDs)
			if led {
				// Its followers hear that it yields (see the relay
				// above).
				b.c.broadcast(Message{Type: MsgCoordinator, Leader: m.From})
			}
		}
	case MsgHeartbeat:
		if m.Leader != m.From {
			return
		}
		if b.campaigning() {
			if m.From == b.suspect {
				b.adopt(m.From, m.IDs) // our leader lives (see doubt)
			}
			return
		}
		switch {
		case m.From == b.c.leader:
			b.heard, b.prodPending = 0, false
			if b.failover && m.IDs != nil {
				b.list = b.c.cleanIDs(m.IDs)
			}
		case b.c.above(self, m.From):
			switch {
			case b.c.passive && b.lowerMayLead(m.From):
				b.adopt(m.From, m.IDs) // it does not stand (see Passive): it follows
			case b.leaderless():
				b.Campaign() // a lower process claims to lead: bully back
			}
		case b.mayFollow(m.From, false):
			b.adopt(m.From, m.IDs)
		}
	}
}

// lowerMayLead reports whether a passive process follows p, a member
// below it that claims to lead (an active one would bully back): when it
// has no leader, or p outranks the one it follows, as any process follows
// a claimant above its leader (mayFollow). Not over a leader above p: a
// member that claimed to lead while the passive process had none held it
// against the live leader's every heartbeat (found in review).
func (b *Bully) lowerMayLead(p ID) bool {
	return b.leaderless() || b.c.role == Follower && b.c.leader != None && b.c.above(p, b.c.leader)
}

// leaderless reports whether this process knows no live leader and runs
// no election (it has just started, or waits for its failover slot). Then
// an ELECTION or a claim to lead from a member below it makes it campaign
// (the textbook's answer, and its bully back). Otherwise another member
// cannot restart its elections at will (issue 19: a member's ELECTIONs at
// 45 a second made a follower start that many elections, and send its
// superpeer that many ELECTIONs):
//
//   - While it runs an election, nothing restarts it.
//   - While it leads, it answers an ELECTION with OK and its COORDINATOR,
//     and a lower member's claim with nothing: its heartbeats, every
//     HeartbeatTicks, reach every member, and one that claims to lead
//     follows a higher leader's heartbeat at once.
//   - While it follows a live leader (heard within TimeoutTicks, or it
//     would have campaigned), a lower member's claim is the leader's to
//     answer, by its heartbeats, as above; and an ELECTION from below makes
//     it campaign at most once every TimeoutTicks (prodded). That one
//     keeps the textbook's failover: the member that notices a dead
//     leader first (a lost connection) brings the others in at once,
//     rather than a timeout later. A live leader answers that election
//     with its COORDINATOR within a round trip.
//
// So messages from others start at most one election of ours per timeout
// while a leader is live, and none while ours runs.
func (b *Bully) leaderless() bool {
	return b.c.role != Leader && b.c.leader == None && !b.campaigning()
}

// Tick implements Machine.
func (b *Bully) Tick() {
	b.now++
	t := b.c.cfg.TimeoutTicks
	switch {
	case b.c.role == Leader:
		b.beat++
		if b.beat >= b.c.cfg.HeartbeatTicks {
			b.beat = 0
			b.c.broadcast(Message{Type: MsgHeartbeat, Leader: b.c.cfg.ID, IDs: b.published()})
		}
	case b.phase == bullyAwaitOK:
		b.elapsed++
		if b.elapsed >= t {
			b.win() // no higher process answered
		}
	case b.phase == bullyAwaitCoord:
		b.elapsed++
		if b.elapsed >= 2*t {
			b.Campaign() // the higher process died before announcing
		}
	case b.phase == bullyAwaitFailover:
		b.elapsed++
		if b.elapsed >= b.wait {
			if b.takeOver {
				b.win()
			} else {
				b.Campaign()
			}
		}
	default:
		b.heard++
		if b.heard >= t {
			b.leaderLost()
		} else if b.prodPending && b.missed() && b.now-b.prodded >= t {
			b.prodded = b.now
			b.doubt()
		}
	}
}

// leaderLost reacts to a follower timeout: a bully election, or for
// next-in-line the failover slot of this process.
func (b *Bully) leaderLost() {
	if !b.failover || len(b.list) == 0 {
		b.doubt()
		return
	}
	pos := slices.Index(b.list, b.c.cfg.ID)
	if pos == 0 {
		b.win()
		return
	}
	b.lost = b.c.leader
	b.c.role, b.c.leader = Candidate, None
	b.phase, b.elapsed = bullyAwaitFailover, 0
	if pos > 0 {
		b.wait, b.takeOver = pos*b.c.cfg.TimeoutTicks, true
	} else {
		b.wait, b.takeOver = len(b.list)*b.c.cfg.TimeoutTicks, false
	}
}

// failoverList is the list this process publishes as leader: the other
// members from the highest rank down, at most listLen of them.
func (b *Bully) failoverList() []ID {
	others := make([]ID, 0, len(b.c.cfg.Peers)-1)
	for _, p := range b.c.cfg.Peers {
		if p != b.c.cfg.ID {
			others = append(others, p)
		}
	}
	others = electByRank(b.c.cfg.Rank, others)
	if b.listLen > 0 && len(others) > b.listLen {
		others = others[:b.listLen]
	}
	return others
}

// Ready implements Machine.
func (b *Bully) Ready() Ready {
	rd := b.c.ready()
	rd.Flooders = b.asks.take()
	return rd
}
