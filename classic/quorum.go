package classic

import (
	"fmt"
	"maps"
	"slices"
)

// Quorum adds terms and majority to any election machine (the inner one), so
// that two leaders never hold the same term and the minority side of a
// partition has no leader.
//
// The inner machine still decides who should lead: when it says this process
// is Leader, Quorum claims a term for it, and this process reports itself
// Leader only while a majority of the cluster's configured members
// (Config.Peers, this process included) back that claim. The protocol:
//
//   - A claimant takes term T = one above any term it has seen, votes for
//     itself, and broadcasts CLAIM{Term: T, round r} every HeartbeatTicks.
//   - A process grants a claim by answering CLAIM_ACK{Term: T, Leader:
//     claimant, round r}. It grants at most one claimant per term (its vote),
//     never a term below the highest it has voted in, and never another
//     claimant while it has a promise outstanding: each grant promises the
//     claimant not to grant anyone else for the lease (TimeoutTicks) plus two
//     ticks, counted from the grant.
//   - The claimant is Leader while a majority of members (itself included)
//     granted a round it sent less than a lease ago: its own lease, or the
//     granter's if shorter (a grant carries the granter's TimeoutTicks in
//     Capacity, since members' leases may differ). Since its lease counts
//     from sending and each promise from receiving (plus a margin for the
//     phase of the ticks), every promise outlasts the lease it backs.
//   - A process refuses any other claim with CLAIM_ACK{Term: its term,
//     Leader: the one it is bound to}, so a claimant learns the current term.
//     It names as Leader the claimant it has promised, or itself during its
//     first lease; None means it is free, or bound to the claimant itself,
//     but the claim's term is too low (it voted for someone else in it, or
//     has seen a higher term), and the claimant then claims a higher term at
//     once. So a CLAIM_ACK naming its recipient is always a grant of its
//     Term. A claimant without a majority for a lease also
//     starts over one term higher.
//   - A leader that moves to a higher term keeps the lease of the term it
//     holds until the new term has a majority, so it stays Leader (of the
//     old term) in between.
//   - When the inner machine stops saying Leader, the claimant stops
//     claiming; its followers' promises run out within a lease, and only then
//     can they back another claimant.
//
// Hence one leader per term (a majority voted once in it), no leader on a
// minority side once a lease has passed since the partition, and, because
// promises outlast leases, no two Leaders at the same time either, as long as
// ticks run at the same rate everywhere (which the simulator guarantees).
//
// Hostile members (see also the comment on TermJumpPerTick): with at most f
// of 2f+1 members hostile, terms stay honest and the space of terms does not
// run out, because no single message moves a term far:
//
//   - A CLAIM_ACK never raises the receiver's term. Its Term is only a report
//     of the sender's term, kept per member; in Raft any higher term adopts
//     it, which here let four CLAIM_ACKs of term 2^63-1 end every election
//     for good (the next claim, one above, was dropped by everyone).
//   - A new claim takes the lowest term above the terms that all but f of
//     the other members report (a majority with the claimant), not above
//     the largest one member reports: f hostile reports of any height are
//     passed over, while the f honest others' are covered.
//   - No process raises its term, by claiming or granting, by more than one
//     plus TermJumpPerTick per tick since it last raised it. An honest
//     process that fell behind (restarted, partitioned) catches up at that
//     rate, far faster than honest elections move terms; a hostile claimant
//     can push a term no faster (plus one per message it gets granted), so
//     2^63 terms last about 2^53 ticks (10^7 years at 100 ms a tick).
//   - A claimant moves to a higher term on a refusal (CLAIM_ACK naming no
//     one) only when the refuser's term is within its own reach, and after
//     its first such move at most once per lease, so that refusals cannot
//     keep it restarting faster than grants come back; its current lease
//     is kept meanwhile, as for any move to a higher term.
//   - A member's CLAIM takes no follower of a live leader: they are bound
//     to it by promises the leader renews every round. A free process (its
//     leader's lease ran out, or it has just started) grants any claimant
//     within its reach, as before, whatever its inner machine says: a
//     grant rule that asked the inner machine (which member it follows)
//     was tried and refused claims that the node's quorum restart test
//     (overlay, issue 18) expects granted.
//
// None of this touches a vote: one vote per term and promises that outlast
// leases are what make one leader per term, and a hostile member still has
// only its own vote. Liveness: an honest claimant needs only the f honest
// others; their terms are below its claim's, or within a few ticks of
// TermJumpPerTick of it, and refusals from the hostile f cannot make it
// restart more than once per lease.
//
// Followers report the claimant they back, while their promise holds, as
// their Leader; a process that backs no one reports no leader. Messages of
// older terms are refused; the inner machine's own messages pass through
// untouched (their kinds are distinct from CLAIM and CLAIM_ACK). Claims and
// answers of terms above 2^63-1 are dropped, so that one above a term never
// wraps round to 0.
//
// The vote must survive a restart, as Raft's HardState does: the driver
// stores HardState after each Ready, before it sends that Ready's messages,
// and passes it to NewQuorum when the process comes back. Promises are not
// stored: a process grants no new claimant for its first lease after it
// starts, so the promises it made before a crash run out first.
type Quorum struct {
	cfg      Config
	members  map[ID]bool // Config.Peers: only they may claim or grant
	inner    Machine
	innerSt  State
	majority int
	lease    int // ticks: Config.TimeoutTicks

	now          int // ticks since this process started
	term         uint64
	vote         ID  // whom we granted in term (ourselves when claiming)
	promisedTo   ID  // whom we must not betray until promiseUntil
	promiseUntil int // tick
	startGuard   int // no new claimant before this tick
	raisedAt     int // tick term last rose (see ceiling)

	// reported is the highest term each other member has reported (in a
	// CLAIM or a CLAIM_ACK); reports never move term.
	reported map[ID]uint64

	// Claiming.
	claiming   bool
	claimTerm  uint64         // the term we claim (term may have moved above it)
	claimStart int            // tick of the claim's first round
	held       uint64         // the term a majority backs (0: none)
	heldUntil  int            // tick when that majority's lease runs out
	round      uint64         // last round sent
	sentAt     map[uint64]int // round -> tick sent, for the rounds of a lease
	backed     map[ID]grant   // member -> the latest round it granted
	nextRound  int            // tick of the next round
	bumped     bool           // this claim was started by a refusal
	// standUntil: the claim of a leader whose inner machine Reconfigure
	// built afresh stands while that machine campaigns, until this tick
	// at most (see pull).
	standUntil int

	flooders []ID // the inner machine's, until Ready
	outbox

	// fresh builds an inner machine for a new configuration (Reconfigure),
	// when the inner machine is no Reconfigurer; nil: it cannot.
	fresh func(Config) (Machine, error)
}

var (
	_ Machine      = (*Quorum)(nil)
	_ Reconfigurer = (*Quorum)(nil)
)

// grant is a member's grant of a claim round: the tick the round was sent,
// and the lease the member promised (its TimeoutTicks, which CLAIM_ACK
// carries in Capacity; this process's own for a member that sends none).
type grant struct{ at, lease int }

// HardState is what a Quorum process must keep across restarts: the highest
// term it has seen and whom it voted for in that term.
type HardState struct {
	Term uint64
	Vote ID
}

// NewQuorum wraps inner, which must have been built from the same cfg, with
// terms and majority. hs is the HardState stored before a restart (zero for a
// fresh process). It uses Peers (the majority is over all configured
// members, live or not), HeartbeatTicks (the claim interval) and TimeoutTicks
// (the lease), which must exceed HeartbeatTicks plus a round trip. Errors wrap
// ErrBadID, ErrBadTicks or ErrBadOption.
func NewQuorum(cfg Config, inner Machine, hs HardState) (*Quorum, error) {
	cfg, err := electConfig(cfg, "quorum", true)
	if err != nil {
		return nil, err
	}
	if inner == nil {
		return nil, fmt.Errorf("%w: quorum: the inner machine is nil", ErrBadOption)
	}
	if hs.Vote != None && !slices.Contains(cfg.Peers, hs.Vote) {
		return nil, fmt.Errorf("%w: quorum: HardState.Vote %q is not one of Config.Peers", ErrBadID, hs.Vote)
	}
	q := &Quorum{
		inner:    inner,
		term:     hs.Term,
		vote:     hs.Vote,
		reported: map[ID]uint64{},
		outbox:   newOutbox(cfg),
	}
	q.configure(cfg)
	q.startGuard = q.lease + PromiseMargin
	q.pull()
	return q, nil
}

// Reconfigure takes a new configuration of the same cluster and keeps the
// term, the vote, the promises and the claim: a member that joins or
// leaves the cluster costs it no election. A machine built afresh for the
// new members would grant no claimant for its first lease (see Quorum),
// and when every member rebuilt its machine for a departed member, at
// their own times, their first leases refused the leader's claims in
// turn: a cluster of 10 went unserved for 10 to 20 s, 150 s after one
// member crashed (the node's quorumMemory; BENCHMARKS.md, Election).
//
// It takes only a change of at most one member, added or removed, and
// returns ErrRebuild otherwise:
//
//   - Processes take a change at their own times, so a claimant may count
//     a majority of the old members while another counts one of the new.
//     Two such majorities of configurations one member apart share a
//     process, and a process backs one claimant at a time (its promise,
//     kept here), so there is still one Leader at a time. Of
//     configurations two members apart they need not (11 members and 9:
//     6 + 5 grants from 11 processes). This is checked per process only:
//     one that takes two changes one after the other while another has
//     taken neither is two apart from it, and two leaders can then lead
//     at once, whether the processes took the changes in place or built
//     new machines (found in review: 0 at {0..4} and 1, 2 at {0, 1, 2},
//     partitioned {1, 2} | {0, 3, 4}). One at a time across the cluster,
//     as Raft commits each change before the next, would need a
//     configuration version in CLAIM; the node's members take changes as
//     their views do, and a member leaves an electorate only after
//     quorumMemory unseen.
//   - A new TimeoutTicks is taken as well: a promise already made keeps
//     its length, and a claim counts each grant for no longer than the
//     lease its granter promised (see count).
//
// The lease it holds is counted again over the new members. The inner
// machine is reconfigured in place when it is a Reconfigurer; otherwise
// one is built for cfg (Quorum from New: the same algorithm and options),
// and it campaigns at once if the old one led or was electing, as a
// driver does with a machine it rebuilds. A leader's claim then stands
// while its new inner machine campaigns, two leases at most, and stops if
// that machine follows another or gives up: a candidate election waits
// and queries for longer than a lease, and its cluster lost its leader
// for a moment at every change of members. A vote for a member that has
// left becomes this process's own (no other grant in its term), and a
// promise to it still binds until it runs out, but names no leader.
//
// A Quorum from NewQuorum around a machine that is no Reconfigurer
// returns ErrRebuild, and so does one whose options (echo's neighbours,
// the candidates) do not fit cfg. It returns ErrBadID when cfg.ID is not
// this process, and the constructor's errors for a bad cfg; on any error
// the machine is unchanged. A nil cfg.Rand keeps the current source.
func (q *Quorum) Reconfigure(cfg Config) error {
	cfg, err := reconfigConfig(q.cfg, cfg, "Quorum.Reconfigure")
	if err != nil {
		return err
	}
	changed := 0
	for _, p := range cfg.Peers {
		if !q.members[p] {
			changed++
		}
	}
	changed += len(q.members) - (len(cfg.Peers) - changed) // the members gone
	if changed > 1 {
		return fmt.Errorf("%w: Quorum.Reconfigure: %d members changed; the majorities of two configurations share a process only when they are at most one member apart", ErrRebuild, changed)
	}
	inner := q.inner
	if r, ok := inner.(Reconfigurer); ok {
		if err := r.Reconfigure(cfg); err != nil {
			return err
		}
	} else {
		if q.fresh == nil {
			return fmt.Errorf("%w: Quorum.Reconfigure: the inner machine is no Reconfigurer", ErrRebuild)
		}
		if inner, err = q.fresh(cfg); err != nil {
			// The options given to New do not fit cfg (echo's neighbours,
			// the candidates): a new machine needs new options.
			return fmt.Errorf("%w: Quorum.Reconfigure: %w", ErrRebuild, err)
		}
		if q.innerSt.Role == Leader || q.innerSt.Role == Candidate {
			inner.Campaign()
		}
		q.standUntil = 0
		if q.claiming && q.innerSt.Role == Leader {
			q.standUntil = q.now + 2*cfg.TimeoutTicks
		}
	}
	q.inner = inner
	q.configure(cfg)
	if q.vote != None && !q.members[q.vote] {
		// As the node keeps a stored vote for a peer no longer a member:
		// its own, so that it grants no one else in this term, and a
		// restart with this HardState is one of the new members'.
		q.vote = q.cfg.ID
	}
	maps.DeleteFunc(q.reported, func(p ID, _ uint64) bool { return !q.members[p] })
	if q.backed != nil {
		maps.DeleteFunc(q.backed, func(p ID, _ grant) bool { return !q.members[p] })
		q.held, q.heldUntil = 0, 0
		q.count()
	}
	q.pull()
	return nil
}

// configure takes cfg's members, majority and lease (NewQuorum,
// Reconfigure).
func (q *Quorum) configure(cfg Config) {
	q.cfg, q.outbox.peers = cfg, cfg.Peers
	q.members = make(map[ID]bool, len(cfg.Peers))
	for _, p := range cfg.Peers {
		q.members[p] = true
	}
	q.majority = len(cfg.Peers)/2 + 1
	q.lease = cfg.TimeoutTicks
}

// PromiseMargin, in ticks, is added to every promise: the ticks of two
// processes are up to one tick out of phase, and the receiver's tick count
// at a message's arrival may lag the sender's by one more.
const PromiseMargin = 2

// TermJumpPerTick bounds how fast a process's term rises: by one, plus
// TermJumpPerTick for every tick since it last rose. Honest elections move
// terms by about one a lease, so a process that fell behind catches up in a
// tick or two; a hostile member that claims or reports absurd terms moves
// none of them faster, and 2^63 terms last more than 2^53 ticks.
const TermJumpPerTick = 1 << 10

// ceiling is the highest term this process may move to now.
func (q *Quorum) ceiling() uint64 { return termCeiling(q.term, q.now-q.raisedAt) }

// termCeiling is the highest term (or sequence number) a process at term
// may move to ticks after it last rose: one above, plus TermJumpPerTick a
// tick, at most maxTerm. Quorum, Stable and Echo bound their terms by it.
func termCeiling(term uint64, ticks int) uint64 {
	d := uint64(max(ticks, 0))
	if d >= (maxTerm-term)/TermJumpPerTick {
		return maxTerm
	}
	return term + 1 + d*TermJumpPerTick
}

// raise moves the term up to t (never down) and notes when.
func (q *Quorum) raise(t uint64) {
	if t > q.term {
		q.term, q.raisedAt = t, q.now
	}
}

// report records a member's term, as its CLAIM or CLAIM_ACK states it.
func (q *Quorum) report(from ID, t uint64) {
	if t > q.reported[from] {
		q.reported[from] = t
	}
}

// majorityTerm is the lowest term that a majority (this process included)
// could all grant: one above the terms that all but f of the other members
// report (0 for those that have reported none). The f highest reports are
// passed over, so f hostile members cannot raise it above an honest report.
func (q *Quorum) majorityTerm() uint64 {
	need := q.majority - 1 // grants from others
	if need == 0 {
		return 0
	}
	terms := make([]uint64, 0, len(q.cfg.Peers)-1)
	for _, p := range q.cfg.Peers {
		if p != q.cfg.ID {
			terms = append(terms, q.reported[p])
		}
	}
	slices.Sort(terms)
	return terms[need-1] + 1
}

// HardState returns what the driver must store before it sends the messages
// of the last Ready.
func (q *Quorum) HardState() HardState { return HardState{Term: q.term, Vote: q.vote} }

// Inner returns the wrapped machine.
func (q *Quorum) Inner() Machine { return q.inner }

// Tick advances the clock of both machines.
func (q *Quorum) Tick() {
	q.now++
	q.inner.Tick()
	q.pull()
	if q.claiming && q.now >= q.nextRound {
		switch {
		case q.sentAt == nil: // waiting for our promise to someone else to run out
			q.startClaim()
		case !q.leading() && q.now-q.claimStart >= q.lease:
			q.startClaim() // no majority for a whole lease: try a higher term
		default:
			q.sendRound()
		}
	}
}

// Campaign starts an election in the inner machine.
func (q *Quorum) Campaign() {
	q.inner.Campaign()
	q.pull()
}

// Step delivers one message: claims to Quorum, everything else to the inner
// machine.
func (q *Quorum) Step(m Message) {
	switch m.Type {
	case MsgClaim, MsgClaimAck:
		if !q.members[m.From] || m.From == q.cfg.ID {
			return // a stranger's vote would break the majority
		}
		if m.Term > maxTerm {
			return // no honest process gets there (see maxTerm)
		}
		if m.Type == MsgClaim {
			q.stepClaim(m)
		} else {
			q.stepAck(m)
		}
	default:
		q.inner.Step(m)
		q.pull()
	}
}

// Ready returns the inner machine's messages and Quorum's own, and the state
// backed by the majority.
func (q *Quorum) Ready() Ready {
	q.pull()
	fl := q.flooders
	q.flooders = nil
	return Ready{Messages: q.take(), State: q.state(), Flooders: fl}
}

// pull takes the inner machine's output and follows its view of who leads.
func (q *Quorum) pull() {
	rd := q.inner.Ready()
	q.msgs = append(q.msgs, rd.Messages...)
	q.flooders = append(q.flooders, rd.Flooders...)
	q.innerSt = rd.State
	if rd.State.Role != Candidate || q.now >= q.standUntil {
		q.standUntil = 0
	}
	switch {
	case rd.State.Role == Leader && !q.claiming:
		q.startClaim()
	case rd.State.Role != Leader && q.claiming && q.standUntil == 0:
		q.stopClaim() // our followers' promises run out within a lease
	}
}

// stopClaim gives up claiming, and any lease we hold.
func (q *Quorum) stopClaim() {
	q.claiming, q.held, q.heldUntil = false, 0, 0
	q.sentAt, q.backed = nil, nil
}

// free reports whether we may grant c now.
func (q *Quorum) free(c ID) bool {
	if q.promisedTo == c && q.now < q.promiseUntil {
		return true
	}
	return q.now >= q.promiseUntil && q.now >= q.startGuard
}

// startClaim claims a new term for ourselves, if no promise forbids it.
func (q *Quorum) startClaim() {
	if !q.free(q.cfg.ID) {
		// Claim when the promise runs out (Tick calls us again).
		q.claiming, q.nextRound = true, max(q.promiseUntil, q.startGuard)
		q.sentAt, q.backed = nil, nil
		return
	}
	q.claimAbove(q.majorityTerm())
}

// claimAbove claims a term above ours and at least want, within our reach
// (ceiling), and votes for ourselves in it. The caller has checked free.
func (q *Quorum) claimAbove(want uint64) {
	t := max(q.term+1, min(want, q.ceiling()))
	q.raise(t)
	q.bumped = false
	q.vote, q.claimTerm = q.cfg.ID, q.term
	q.claiming, q.claimStart, q.round = true, q.now, 0
	q.sentAt, q.backed = map[uint64]int{}, map[ID]grant{}
	q.sendRound()
}

// sendRound broadcasts one CLAIM round and promises ourselves for a lease.
func (q *Quorum) sendRound() {
	q.round++
	q.sentAt[q.round] = q.now
	q.backed[q.cfg.ID] = grant{q.now, q.lease}
	q.count()
	q.promisedTo, q.promiseUntil = q.cfg.ID, q.now+q.lease+PromiseMargin
	for r, at := range q.sentAt {
		if q.now-at >= q.lease {
			delete(q.sentAt, r) // its grants could not extend the lease
		}
	}
	q.nextRound = q.now + q.cfg.HeartbeatTicks
	q.broadcast(Message{Type: MsgClaim, Term: q.claimTerm, Election: ElectionID{Source: q.cfg.ID, Seq: q.round}})
}

// PromiseLeft returns the ticks until the promise this process made last
// runs out (to a claimant, or to itself while claiming), 0 when none
// holds.
func (q *Quorum) PromiseLeft() int { return max(q.promiseUntil-q.now, 0) }

// Hold makes the process grant no claimant, itself included, for the next
// ticks ticks at least, as in its first lease. A driver that replaces a
// machine (a new cluster, two members changed) passes the old machine's
// PromiseLeft: the new one's first lease is its own lease, and a promise
// made for a longer one would outlast it.
func (q *Quorum) Hold(ticks int) { q.startGuard = max(q.startGuard, q.now+ticks) }

// LeaseLeft returns the ticks until the lease that makes this process
// Leader runs out, 0 when it is not Leader. A driver that replaces the
// machine (a new member set) may go on reporting this process as leader
// that long, and no longer: by then the promises behind the lease may have
// run out, and a majority may back someone else.
func (q *Quorum) LeaseLeft() int {
	if !q.leading() {
		return 0
	}
	return q.heldUntil - q.now
}

// leading reports whether a majority backs a term of ours now.
func (q *Quorum) leading() bool { return q.claiming && q.held != 0 && q.now < q.heldUntil }

// count updates the lease from the grants of the current term: each grant
// backs the claim from its round's send tick for the shorter of this
// process's lease and the one its granter promised, and the claim holds
// while a majority's do. Members' leases differ (the node derives each
// one's from its own RTTs); counted on this process's own lease alone, a
// claimant with a lease of 20 ticks led on promises of 12, and another
// claimant led beside it once they ran out (TestQuorumLeasesDiffer).
func (q *Quorum) count() {
	untils := make([]int, 0, len(q.backed))
	for _, g := range q.backed {
		untils = append(untils, g.at+min(g.lease, q.lease))
	}
	if len(untils) < q.majority {
		return
	}
	slices.Sort(untils)
	slices.Reverse(untils)
	if until := untils[q.majority-1]; until > q.now {
		q.held, q.heldUntil = q.claimTerm, until
	}
}

func (q *Quorum) stepClaim(m Message) {
	q.pull()
	q.report(m.From, m.Term)
	grant := q.free(m.From) && m.Term <= q.ceiling() &&
		(m.Term > q.term || m.Term == q.term && (q.vote == m.From || q.vote == None))
	if !grant {
		bound := None
		switch {
		case q.now < q.promiseUntil:
			bound = q.promisedTo
		case q.now < q.startGuard:
			bound = q.cfg.ID
		}
		if bound != None && !q.members[bound] {
			// Bound to a member that has left (Reconfigure): the promise
			// holds, and the refusal names this process, as in its first
			// lease, rather than a peer that is no member.
			bound = q.cfg.ID
		}
		if bound == m.From {
			// The claimant we are bound to, with a claim of a term below
			// ours: naming it would read as a grant of our term, which we
			// have not given it (and may give someone else). None makes it
			// claim above our term, which we grant.
			bound = None
		}
		q.send(Message{Type: MsgClaimAck, To: m.From, Term: q.term, Leader: bound, Election: m.Election})
		return
	}
	if q.claiming && m.From != q.cfg.ID {
		q.stopClaim() // only reached when our own promise ran out
	}
	q.raise(m.Term)
	q.vote = m.From
	until := q.now + q.lease + PromiseMargin
	if q.promisedTo == m.From && q.promiseUntil > until {
		// A promise made for a longer lease (Reconfigure shortened it)
		// keeps its length: the claimant counts the grants it acked for
		// that lease until it hears of the shorter one, which a lost ack
		// may never tell it (found in review: two leaders at once).
		until = q.promiseUntil
	}
	q.promisedTo, q.promiseUntil = m.From, until
	q.send(Message{Type: MsgClaimAck, To: m.From, Term: m.Term, Leader: m.From, Election: m.Election, Capacity: uint64(q.lease)})
}

func (q *Quorum) stepAck(m Message) {
	q.pull()
	q.report(m.From, m.Term) // a report only: an ack never moves our term
	if !q.claiming || q.sentAt == nil {
		return
	}
	switch {
	case m.Term == q.claimTerm && m.Leader == q.cfg.ID:
		if at, ok := q.sentAt[m.Election.Seq]; ok && at > q.backed[m.From].at {
			lease := q.lease // a granter that names no lease (an older version)
			if m.Capacity > 0 {
				lease = int(min(m.Capacity, uint64(q.lease)))
			}
			q.backed[m.From] = grant{at, lease}
			q.count()
		}
	case m.Leader == None && m.Term >= q.claimTerm && m.Term < q.ceiling() &&
		(!q.bumped || q.now-q.claimStart >= q.lease):
		// A free process whose term is at or above ours (it voted for
		// someone else in it): claim above it, and it will back us, if
		// its term is within our reach (a hostile member reports any
		// term), and at most once a lease after the first time (refusals
		// must not restart us faster than grants come back). A bound
		// process (Leader set) is not worth a new term: claiming again at
		// once against it would only raise the terms of both sides round
		// after round; our claim runs out instead.
		q.claimAbove(max(m.Term+1, q.majorityTerm()))
		q.bumped = true
	}
}

// state is what Quorum reports: Leader only with a majority behind us; a
// follower names the claimant it has promised while the promise holds.
func (q *Quorum) state() State {
	switch {
	case q.leading():
		return State{Role: Leader, Leader: q.cfg.ID, Term: q.held}
	case q.promisedTo != None && q.promisedTo != q.cfg.ID && q.now < q.promiseUntil && q.members[q.promisedTo]:
		// (A promise to a member that has left still binds, see free, but
		// names no leader.)
		return State{Role: Follower, Leader: q.promisedTo, Term: q.term}
	case q.claiming || q.innerSt.Role == Candidate:
		return State{Role: Candidate, Term: q.term}
	}
	return State{Role: Follower, Term: q.term}
}
