package classic

import (
	"maps"
	"slices"
)

// Invitation is Garcia-Molina's invitation election (group merging) as a
// Machine. Every process starts as the leader of its own group {self}.
// Leaders merge groups whenever they meet, so after a partition heals the
// groups on both sides merge again.
//
// The protocol, all timing in ticks:
//
//   - A leader sends HEARTBEAT to its other members each HeartbeatTicks. A
//     member that hears nothing (a heartbeat or any other message) from its
//     leader for TimeoutTicks becomes the leader of the singleton group
//     {self}.
//   - A leader runs an invitation round every TimeoutTicks + r ticks, r drawn
//     from Config.Rand in [0, TimeoutTicks) (first round after 1 + r ticks),
//     and also when Campaign is called: INVITE, carrying its member list in
//     IDs, to every process not in its group.
//   - A non-leader that is invited answers ACCEPT with Leader set to its own
//     leader and no IDs (a pointer), and the inviter invites that leader. Any
//     process that gets a HEARTBEAT from someone it does not follow answers
//     with the same pointer, and the sender drops it from its member list.
//   - When a leader is invited by another leader the groups merge under the
//     leader of the LARGER group; with equal sizes the higher-ranked leader
//     wins. If the inviter wins, the invitee yields: ACCEPT with Leader set to
//     itself and IDs its member list. If the invitee wins, it invites the
//     inviter back (with its own list), and the inviter then yields.
//   - The winner adds the yielded members to its group and sends READY, with
//     Leader = itself and IDs = the merged member list, to the members of the
//     yielding group only; its own members are not told.
//   - A yielding leader keeps leading its group until READY arrives, for at
//     most TimeoutTicks, and while it waits it points other inviters to the
//     leader it is joining.
//   - A member that follows a READY over its live leader goes back to that
//     leader if it heartbeats again, and believes that READY's sender no
//     more over a leader that beat within HeartbeatTicks (see stepReady).
//
// Messages used: HEARTBEAT, INVITE, ACCEPT, READY.
//
// The leader does not expire members that died: its member list (and so its
// group size in a merge) may count dead processes until they come back and
// answer a heartbeat with a pointer, or until the driver drops them from
// the configuration with Reconfigure, which changes the member set without
// an election (a new machine would start over as a singleton).
type Invitation struct {
	cfg Config

	leader  ID
	members []ID // when leading: the group, highest rank first, self included

	elapsed   int // follower: ticks since the leader's heartbeat; leader: since ours
	inviteIn  int // leader: ticks until the next invitation round
	yieldTo   ID  // leader: the leader this group is joining, or None
	yieldLeft int

	now       int
	invitedAt map[ID]int // leader: when each process was last invited

	// See stepReady: the leader we left on a READY, and the senders of
	// READYs that a live leader outlived.
	usurped  ID
	distrust map[ID]bool

	outbox
}

var _ Machine = (*Invitation)(nil)

// NewInvitation returns the invitation machine for cfg.ID, leading {cfg.ID}.
//
// Config fields used: ID, Peers, Rank (nil: HighestID; it breaks ties between
// equal-sized groups), Rand (nil: a fixed seed derived from ID; it spreads
// the invitation rounds), HeartbeatTicks (0: 2), TimeoutTicks (0: 10; must
// exceed HeartbeatTicks and a round trip).
func NewInvitation(cfg Config) (*Invitation, error) {
	cfg, err := electConfig(cfg, "NewInvitation", true)
	if err != nil {
		return nil, err
	}
	iv := &Invitation{cfg: cfg, invitedAt: map[ID]int{}, distrust: map[ID]bool{}, outbox: newOutbox(cfg)}
	iv.lead([]ID{cfg.ID})
	iv.inviteIn = 1 + cfg.Rand.IntN(cfg.TimeoutTicks)
	return iv, nil
}

// Reconfigure gives the machine a new configuration of the same process
// (cfg.ID unchanged): another member set, rank or tick setting, as when the
// driver's view of the cluster changes. Unlike a new machine, which starts
// as the leader of {self} and so splits the cluster into singletons again,
// it keeps the group: a leader keeps those of its members that are still
// in cfg.Peers (ordered by the new rank) and invites the peers new to it at
// once, rather than at its next round (a newcomer joins, or a follower it
// had dropped answers with a pointer to it and is a member again); a
// follower keeps its leader. A
// follower whose leader is no longer in cfg.Peers leaves its group and runs
// an invitation round, as Campaign does; a yielding leader whose inviter is
// gone carries on alone. A nil cfg.Rand keeps the current source.
//
// It returns the constructor's errors (ErrBadID, ErrBadTicks) for a bad
// cfg, and ErrBadID when cfg.ID is not this process; the machine is then
// unchanged.
func (iv *Invitation) Reconfigure(cfg Config) error {
	cfg, err := reconfigConfig(iv.cfg, cfg, "Invitation.Reconfigure")
	if err != nil {
		return err
	}
	old := iv.cfg.Peers
	iv.cfg, iv.outbox.peers = cfg, cfg.Peers
	gone := func(p ID) bool { return !slices.Contains(cfg.Peers, p) }
	maps.DeleteFunc(iv.invitedAt, func(p ID, _ int) bool { return gone(p) })
	if !iv.leading() {
		if gone(iv.leader) {
			iv.Campaign()
		}
		return nil
	}
	iv.members = electByRank(cfg.Rank, slices.DeleteFunc(iv.members, gone))
	if iv.yieldTo != None && gone(iv.yieldTo) {
		iv.yieldTo, iv.yieldLeft = None, 0
	}
	iv.yieldLeft = min(iv.yieldLeft, cfg.TimeoutTicks)
	iv.inviteIn = min(iv.inviteIn, 2*cfg.TimeoutTicks)
	if iv.yieldTo == None {
		for _, p := range cfg.Peers {
			if !slices.Contains(old, p) && !slices.Contains(iv.members, p) {
				iv.invite(p) // a newcomer, or a member back in view: one round trip
			}
		}
	}
	return nil
}

var _ Reconfigurer = (*Invitation)(nil)

// Members returns the group this process leads, highest rank first, or nil
// when it follows another leader.
func (iv *Invitation) Members() []ID {
	if iv.leader != iv.cfg.ID {
		return nil
	}
	return slices.Clone(iv.members)
}

func (iv *Invitation) leading() bool { return iv.leader == iv.cfg.ID }

// lead makes this process the leader of the given group.
func (iv *Invitation) lead(members []ID) {
	iv.leader = iv.cfg.ID
	iv.members = electByRank(iv.cfg.Rank, members)
	iv.elapsed = 0
	iv.yieldTo, iv.yieldLeft = None, 0
	iv.inviteIn = iv.period()
}

func (iv *Invitation) period() int {
	return iv.cfg.TimeoutTicks + iv.cfg.Rand.IntN(iv.cfg.TimeoutTicks)
}

// Campaign runs an invitation round now (a follower first leaves its group).
func (iv *Invitation) Campaign() {
	if !iv.leading() {
		iv.lead([]ID{iv.cfg.ID})
	}
	iv.inviteRound()
}

// Tick advances the logical clock by one tick.
func (iv *Invitation) Tick() {
	iv.now++
	if !iv.leading() {
		iv.elapsed++
		if iv.elapsed >= iv.cfg.TimeoutTicks {
			iv.lead([]ID{iv.cfg.ID})
		}
		return
	}
	iv.elapsed++
	if iv.elapsed >= iv.cfg.HeartbeatTicks {
		iv.elapsed = 0
		for _, p := range iv.members {
			if p != iv.cfg.ID {
				iv.send(Message{Type: MsgHeartbeat, To: p, Leader: iv.cfg.ID})
			}
		}
	}
	if iv.yieldTo != None {
		iv.yieldLeft--
		if iv.yieldLeft <= 0 {
			iv.yieldTo = None // READY never came: carry on alone
		}
		return
	}
	iv.inviteIn--
	if iv.inviteIn <= 0 {
		iv.inviteRound()
	}
}

// inviteRound invites every process outside the group.
func (iv *Invitation) inviteRound() {
	iv.inviteIn = iv.period()
	if iv.yieldTo != None {
		return
	}
	for _, p := range iv.cfg.Peers {
		if !slices.Contains(iv.members, p) {
			iv.invite(p)
		}
	}
}

func (iv *Invitation) invite(p ID) {
	iv.invitedAt[p] = iv.now
	iv.send(Message{Type: MsgInvite, To: p, IDs: slices.Clone(iv.members)})
}

// pointsTo is the leader this process names in a pointer ACCEPT.
func (iv *Invitation) pointsTo() ID {
	if iv.yieldTo != None {
		return iv.yieldTo
	}
	return iv.leader
}

// Step delivers one message.
func (iv *Invitation) Step(m Message) {
	if m.From == iv.cfg.ID || !slices.Contains(iv.cfg.Peers, m.From) {
		return // only the other members take part
	}
	if !iv.leading() && m.From == iv.leader && m.Type != MsgUnreachable {
		iv.elapsed = 0 // any message from the leader shows it is alive
	}
	switch m.Type {
	case MsgHeartbeat:
		if !iv.leading() && m.From == iv.leader {
			return
		}
		if !iv.leading() && m.From == iv.usurped {
			// The leader whose group a READY said was absorbed still
			// leads: it did not yield, and the READY's sender is not
			// believed over a live leader again (see stepReady).
			iv.distrust[iv.leader] = true
			iv.leader, iv.usurped, iv.elapsed = m.From, None, 0
			return
		}
		iv.send(Message{Type: MsgAccept, To: m.From, Leader: iv.pointsTo()})
	case MsgInvite:
		iv.stepInvite(m)
	case MsgAccept:
		if len(m.IDs) > 0 {
			iv.stepYield(m)
		} else {
			iv.stepPointer(m)
		}
	case MsgReady:
		iv.stepReady(m)
	}
}

func (iv *Invitation) stepInvite(m Message) {
	switch {
	case !iv.leading():
		iv.send(Message{Type: MsgAccept, To: m.From, Leader: iv.leader})
		return
	case iv.yieldTo == m.From:
		return // our ACCEPT to this inviter is already on its way
	case iv.yieldTo != None:
		iv.send(Message{Type: MsgAccept, To: m.From, Leader: iv.yieldTo})
		return
	}
	// The inviter leads a group and so is not following us any more.
	iv.members = slices.DeleteFunc(iv.members, func(p ID) bool { return p == m.From })
	theirs := len(m.IDs)
	if theirs == 0 {
		theirs = 1
	}
	ours := len(iv.members)
	if theirs > ours || (theirs == ours && iv.cfg.Rank.Compare(m.From, iv.cfg.ID) > 0) {
		iv.yieldTo, iv.yieldLeft = m.From, iv.cfg.TimeoutTicks
		iv.send(Message{Type: MsgAccept, To: m.From, Leader: iv.cfg.ID, IDs: slices.Clone(iv.members)})
		return
	}
	iv.invite(m.From) // we win: let the inviter yield to us
}

// stepYield handles a leader's ACCEPT that hands over its group.
func (iv *Invitation) stepYield(m Message) {
	if !iv.leading() || iv.yieldTo != None {
		// We no longer lead a group of our own: redirect the yielder.
		iv.send(Message{Type: MsgAccept, To: m.From, Leader: iv.pointsTo()})
		return
	}
	// The yielded group, as far as it is made of members (each once): a
	// list from the wire may carry anything.
	var yielded []ID
	for _, p := range m.IDs {
		if slices.Contains(iv.cfg.Peers, p) && !slices.Contains(yielded, p) {
			yielded = append(yielded, p)
		}
	}
	merged := slices.Clone(iv.members)
	for _, p := range yielded {
		if !slices.Contains(merged, p) {
			merged = append(merged, p)
		}
	}
	iv.members = electByRank(iv.cfg.Rank, merged)
	for _, p := range yielded {
		if p != iv.cfg.ID {
			iv.send(Message{Type: MsgReady, To: p, Leader: iv.cfg.ID, IDs: slices.Clone(iv.members)})
		}
	}
}

// stepPointer handles ACCEPT without IDs: From does not follow us, and
// follows m.Leader.
func (iv *Invitation) stepPointer(m Message) {
	if !iv.leading() {
		return
	}
	if iv.yieldTo == m.From {
		iv.yieldTo, iv.yieldLeft = None, 0 // it will not take us
	}
	if m.Leader == iv.cfg.ID || slices.Contains(iv.members, m.Leader) {
		// From follows us, or follows a leader whose group we have just
		// absorbed (the pointer crossed our READY): it is ours.
		if !slices.Contains(iv.members, m.From) {
			iv.members = electByRank(iv.cfg.Rank, append(iv.members, m.From))
		}
		return
	}
	iv.members = slices.DeleteFunc(iv.members, func(p ID) bool { return p == m.From })
	l := m.Leader
	if l == None || iv.yieldTo != None || !slices.Contains(iv.cfg.Peers, l) {
		return
	}
	if at, ok := iv.invitedAt[l]; ok && iv.now-at < iv.cfg.TimeoutTicks {
		return // already invited recently
	}
	iv.invite(l)
}

// stepReady handles a winner's READY: our group joined m.From's. A member
// cannot check that its leader yielded (the leader's ACCEPT went to the
// winner), so a READY naming our leader absorbed is taken; but if our
// leader heartbeats again afterwards it had not yielded, we go back to it,
// and the READY's sender is not believed again over a leader that beat
// within the last HeartbeatTicks: a member could otherwise take every
// follower with one READY each (issue 19). What the algorithm cannot tell
// is the first such READY of each sender, and one that arrives when our
// leader has been silent for a heartbeat interval.
func (iv *Invitation) stepReady(m Message) {
	if m.Leader != m.From || !slices.Contains(m.IDs, iv.cfg.ID) {
		return
	}
	if iv.leading() {
		if iv.yieldTo != m.From {
			return // stale: we did not yield to this leader
		}
	} else if !slices.Contains(m.IDs, iv.leader) || m.From == iv.leader {
		return // our group was not the one absorbed
	}
	iv.usurped = None
	if !iv.leading() {
		if iv.distrust[m.From] && iv.elapsed < iv.cfg.HeartbeatTicks {
			return // shown wrong before, and our leader beat just now
		}
		iv.usurped = iv.leader
	}
	iv.leader, iv.members = m.From, nil
	iv.elapsed = 0
	iv.yieldTo, iv.yieldLeft = None, 0
}

// Ready returns and clears the pending messages, with the current state.
func (iv *Invitation) Ready() Ready {
	role := Follower
	if iv.leading() {
		role = Leader
	}
	return Ready{Messages: iv.take(), State: State{Role: role, Leader: iv.leader}}
}
