package classic

// Passive is implemented by the machines that can take part in their
// cluster's elections without standing in them. A passive process runs
// its clock and its failure detector as usual, relays and votes; but it is
// never its own leader. Where it would start an election of its own (its
// leader's timeout, Campaign) or take the leadership (a bully election no
// one above answered, a next-in-line or candidate takeover), it only
// forgets its leader, so that it follows whichever member the others
// elect next; where it would bully back a lower member that claims to
// lead (bully, ring), it follows that member if it has no leader or the
// member outranks its leader; and it puts itself forward in no election:
// bully answers no ELECTION (an OK would hold the sender back for a
// COORDINATOR that never comes), a candidate answers no query, ring and
// ring-max relay the election without adding themselves, echo relays with
// no candidate of its own, and stable polls (a leaderless stable process
// asks them all, rather than take one member's word for the leader) but
// names any other live member, never itself. A result that names it
// anyway is not followed. Echo keeps the leader it knows until an
// election that reaches it decides another.
//
// Under stable the passive process must rank below the active ones, as
// the overlay ranks it: ranked above them, their polls name it, and of
// 400 seeded chaos runs 10 ended with no leader. The other algorithms
// hold at any rank (TestPassive, TestPassiveChaos).
//
// A driver makes a process passive when it cannot win while some other
// member lives (the overlay: a node that flaps, or is private, below a
// mate that does not), and active again when that no longer holds.
// Before there was this mode, the overlay stopped ticking such a machine,
// and its stopped clock broke every rule that counts time: a follower
// never suspected its dead leader, so it refused the heir's COORDINATOR
// (bully, next-in-line, candidate), named the dead leader alive in its
// votes, which made the survivor follow the dead leader (stable), or
// refused every claim (Quorum); and the flood allowance it keeps for its
// members never refilled (TestFailsOverWithPrivateMate in overlay/node).
//
// Of the algorithms, Bully, NextInLine, Ring (both variants), Stable,
// CandidateElection and Echo implement it. Invitation does not: a process
// without a group leads one of its own and cannot lead another member but
// by its ACCEPT. Nor does Quorum, whose claims need a majority's votes.
type Passive interface {
	// SetPassive makes the process passive (true) or active (false).
	SetPassive(bool)
}

var (
	_ Passive = (*Bully)(nil)
	_ Passive = (*NextInLine)(nil)
	_ Passive = (*Ring)(nil)
	_ Passive = (*Stable)(nil)
	_ Passive = (*CandidateElection)(nil)
	_ Passive = (*Echo)(nil)
)

// SetPassive implements Passive.
func (b *Bully) SetPassive(p bool) { b.c.passive = p }

// SetPassive implements Passive.
func (n *NextInLine) SetPassive(p bool) { n.b.SetPassive(p) }

// SetPassive implements Passive.
func (r *Ring) SetPassive(p bool) { r.c.passive = p }

// SetPassive implements Passive.
func (s *Stable) SetPassive(p bool) { s.passive = p }

// SetPassive implements Passive.
func (c *CandidateElection) SetPassive(p bool) { c.passive = p }

// SetPassive implements Passive.
func (e *Echo) SetPassive(p bool) { e.passive = p }

// forget is a passive bully process's campaign and win: it drops its
// leader, and follows the next member above it that announces itself
// (mayFollow: a process without a leader follows any).
func (b *Bully) forget() {
	b.c.role, b.c.leader = Follower, None
	b.suspect, b.prodPending = None, false
	b.phase, b.elapsed, b.heard = bullyIdle, 0, 0
}
