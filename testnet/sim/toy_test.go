package sim

import (
	"github.com/superpeer/superpeer/classic"
)

// flood is a toy election for testing the simulator, not a real algorithm:
// flood the highest ID, and the winner heartbeats.
//
//   - Campaign starts round r+1: the node floods ELECTION{Term: r+1, Leader:
//     its best known ID} to its neighbours. A node that hears a higher round
//     joins it; a node that hears a higher ID in its round adopts it and
//     floods it on. Both make the node a Candidate.
//   - A Candidate that has heard nothing better for settle ticks becomes
//     Leader if its best is itself, else Follower of its best.
//   - A Leader floods HEARTBEAT{Term, Leader, Capacity: sequence number}
//     every hbEvery ticks; nodes forward each new heartbeat once. A heartbeat
//     of a higher round, or of the same round and an ID at least the best
//     known, makes the node a Follower of its sender's leader.
//   - A Follower that hears no heartbeat for timeout ticks campaigns.
//   - A node of a higher round answers an ELECTION or HEARTBEAT of a lower
//     round with COORDINATOR{Term, Leader}, which the other adopts: so a
//     restarted node, or a stale leader after a partition heals, joins the
//     current leader.
//   - UNREACHABLE is only counted.
type flood struct {
	id      classic.ID
	peers   []classic.ID // neighbours, without id
	settle  int
	hbEvery int
	timeout int

	round   uint64
	best    classic.ID
	role    classic.Role
	leader  classic.ID
	quiet   int // Candidate: ticks since best improved
	since   int // Leader: ticks since the last heartbeat; Follower: since one arrived
	hbSeq   uint64
	lastSeq uint64
	out     []classic.Message

	unreachable int
}

var _ classic.Machine = (*flood)(nil)

func newFlood(id classic.ID, peers []classic.ID, settle, hbEvery, timeout int) *flood {
	return &flood{id: id, peers: peers, settle: settle, hbEvery: hbEvery, timeout: timeout}
}

func (f *flood) broadcast(m classic.Message, except classic.ID) {
	for _, p := range f.peers {
		if p != except {
			m.To = p
			f.out = append(f.out, m)
		}
	}
}

func (f *flood) Campaign() {
	f.startRound(f.round+1, f.id)
	f.broadcast(classic.Message{Type: classic.MsgElection, Term: f.round, Leader: f.best}, classic.None)
}

func (f *flood) startRound(r uint64, best classic.ID) {
	f.round, f.best = r, max(f.id, best)
	f.role, f.leader, f.quiet = classic.Candidate, classic.None, 0
}

func (f *flood) follow(r uint64, leader classic.ID) {
	f.round, f.best, f.leader, f.since, f.lastSeq = r, leader, leader, 0, 0
	if leader == f.id {
		f.role = classic.Leader
	} else {
		f.role = classic.Follower
	}
}

func (f *flood) Step(m classic.Message) {
	switch m.Type {
	case classic.MsgElection:
		switch {
		case m.Term > f.round:
			f.startRound(m.Term, m.Leader)
			f.broadcast(classic.Message{Type: classic.MsgElection, Term: f.round, Leader: f.best}, classic.None)
		case m.Term == f.round && m.Leader > f.best:
			f.startRound(m.Term, m.Leader)
			f.broadcast(classic.Message{Type: classic.MsgElection, Term: f.round, Leader: f.best}, m.From)
		case m.Term < f.round && f.leader != classic.None:
			f.out = append(f.out, classic.Message{Type: classic.MsgCoordinator, To: m.From, Term: f.round, Leader: f.leader})
		}
	case classic.MsgHeartbeat:
		switch {
		case m.Term > f.round || (m.Term == f.round && m.Leader >= f.best && m.Leader != f.leader):
			f.follow(m.Term, m.Leader)
			fallthrough
		case m.Term == f.round && m.Leader == f.leader && m.Capacity > f.lastSeq:
			f.lastSeq, f.since = m.Capacity, 0
			f.broadcast(m, m.From)
		case m.Term < f.round && f.leader != classic.None:
			f.out = append(f.out, classic.Message{Type: classic.MsgCoordinator, To: m.From, Term: f.round, Leader: f.leader})
		}
	case classic.MsgCoordinator:
		if m.Term > f.round || (m.Term == f.round && f.role == classic.Candidate) {
			f.follow(m.Term, m.Leader)
		}
	case classic.MsgUnreachable:
		f.unreachable++
	}
}

func (f *flood) Tick() {
	switch f.role {
	case classic.Candidate:
		if f.quiet++; f.quiet >= f.settle {
			f.follow(f.round, f.best)
			if f.role == classic.Leader {
				f.heartbeat()
			}
		}
	case classic.Leader:
		if f.since++; f.since >= f.hbEvery {
			f.heartbeat()
		}
	case classic.Follower:
		if f.since++; f.since > f.timeout {
			f.Campaign()
		}
	}
}

func (f *flood) heartbeat() {
	f.since = 0
	f.hbSeq++
	f.lastSeq = f.hbSeq // do not forward our own heartbeat when it comes back
	f.broadcast(classic.Message{Type: classic.MsgHeartbeat, Term: f.round, Leader: f.id, Capacity: f.hbSeq}, classic.None)
}

func (f *flood) Ready() classic.Ready {
	rd := classic.Ready{Messages: f.out, State: classic.State{Role: f.role, Leader: f.leader, Term: f.round}}
	f.out = f.out[:0] // the simulator copies the messages before calling again
	return rd
}

// probe is a passive machine for tests that drive the network by hand with
// Sim.Send: it records what it receives and counts ticks and campaigns.
type probe struct {
	id        classic.ID
	restarted bool
	state     classic.State
	got       []classic.Message
	ticks     int
	campaigns int
}

var _ classic.Machine = (*probe)(nil)

func (p *probe) Step(m classic.Message) { p.got = append(p.got, m) }
func (p *probe) Tick()                  { p.ticks++ }
func (p *probe) Campaign()              { p.campaigns++ }
func (p *probe) Ready() classic.Ready   { return classic.Ready{State: p.state} }
