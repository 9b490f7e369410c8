package classic_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
)

// The fuzz targets of the election machines. The fuzzer's bytes are read as
// a stream of choices (fuzzIn): a few header bytes pick the algorithm, the
// cluster, the rank and the tick settings (fuzzSetup), and the rest drive a
// sequence of inputs. Past the end of the bytes every choice is 0, so any
// input is a valid run.
//
// FuzzMachine feeds one machine messages from anyone, with any fields: what
// a hostile member (or a broken driver) can send. FuzzCluster runs a small
// cluster of honest machines over a hostile network (loss, reordering,
// duplication, delay, failed sends, crashes and restarts) and checks what
// must hold across the cluster.

// fuzzIn reads a fuzzer's bytes as a stream of small choices.
type fuzzIn struct{ b []byte }

func (in *fuzzIn) more() bool { return len(in.b) > 0 }

func (in *fuzzIn) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

// intn returns a number in [0, n), n <= 256.
func (in *fuzzIn) intn(n int) int {
	if n <= 1 {
		in.byte()
		return 0
	}
	return int(in.byte()) % n
}

func (in *fuzzIn) u64() uint64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(in.byte())
	}
	return v
}

// num returns a term, sequence number or capacity: mostly small, sometimes
// at the very top of the range (where a careless +1 wraps), sometimes any.
func (in *fuzzIn) num() uint64 {
	switch c := in.byte(); {
	case c < 200:
		return uint64(c % 16)
	case c < 230:
		return math.MaxUint64 - uint64(c%4)
	default:
		return in.u64()
	}
}

// fuzzUniverse is every process a fuzzed cluster may have (a reconfigured
// one may grow to all of them), plus a stranger that is never a member.
var fuzzUniverse = []classic.ID{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}

const fuzzStranger classic.ID = "stranger"

// fuzzSetup is a cluster as the header bytes describe it.
type fuzzSetup struct {
	algo   string
	quorum bool
	ids    []classic.ID
	rank   classic.Rank
	hb, to int
	opts   map[classic.ID]classic.Options
}

func readSetup(in *fuzzIn, minN int) fuzzSetup {
	algos := classic.Algorithms()
	c := in.byte()
	s := fuzzSetup{algo: algos[int(c&0x7f)%len(algos)], quorum: c&0x80 != 0}
	n := minN + in.intn(len(fuzzUniverse)-minN+1)
	s.ids = slices.Clone(fuzzUniverse[:n])
	switch in.intn(3) {
	case 0:
		s.rank = classic.HighestID{}
	case 1:
		s.rank = classic.XORCloseness{Target: []byte{in.byte(), in.byte()}}
	default:
		q := classic.HostQuality{}
		for _, id := range s.ids {
			q[id] = classic.Quality{Capacity: uint64(in.intn(3)), UptimeTicks: uint64(in.intn(3)), Flaps: uint32(in.intn(3))}
		}
		s.rank = q
	}
	s.hb = 1 + in.intn(3)
	s.to = s.hb + 1 + in.intn(8)
	// Options for every process: a candidate set, a symmetric connected
	// neighbour graph (a path plus extra edges) and capacities.
	cands := in.byte()
	var candidates []classic.ID
	for i, id := range s.ids {
		if cands&(1<<i) != 0 {
			candidates = append(candidates, id)
		}
	}
	adj := map[classic.ID][]classic.ID{}
	link := func(a, b classic.ID) {
		if a != b && !slices.Contains(adj[a], b) {
			adj[a] = append(adj[a], b)
			adj[b] = append(adj[b], a)
		}
	}
	for i := 1; i < n; i++ {
		link(s.ids[in.intn(i)], s.ids[i]) // a random tree: connected
	}
	for range in.intn(4) {
		link(s.ids[in.intn(n)], s.ids[in.intn(n)])
	}
	listLen := in.intn(4)
	s.opts = map[classic.ID]classic.Options{}
	for _, id := range s.ids {
		s.opts[id] = classic.Options{
			ListLen: listLen, Candidates: candidates, Neighbours: adj[id],
			Capacity: uint64(in.intn(4)), Quorum: s.quorum,
		}
	}
	return s
}

func (s fuzzSetup) config(id classic.ID, peers []classic.ID) classic.Config {
	return classic.Config{ID: id, Peers: slices.Clone(peers), Rank: s.rank, HeartbeatTicks: s.hb, TimeoutTicks: s.to}
}

// build makes id's machine; hs is its stored HardState (quorum only).
func (s fuzzSetup) build(t *testing.T, id classic.ID, peers []classic.ID, hs classic.HardState) classic.Machine {
	t.Helper()
	o := s.opts[id]
	o.HardState = hs
	m, err := classic.New(s.algo, s.config(id, peers), o)
	if err != nil {
		t.Fatalf("%s: building %s: %v", s, id, err)
	}
	return m
}

func (s fuzzSetup) String() string {
	return fmt.Sprintf("%s quorum=%v peers=%v rank=%T hb=%d timeout=%d", s.algo, s.quorum, s.ids, s.rank, s.hb, s.to)
}

// pickFrom picks a sender: mostly another member, sometimes the process
// itself, a stranger or no one.
func (in *fuzzIn) pickFrom(self classic.ID, peers []classic.ID) classic.ID {
	others := slices.DeleteFunc(slices.Clone(peers), func(p classic.ID) bool { return p == self })
	switch c := in.byte(); {
	case c < 200 && len(others) > 0:
		return others[int(c)%len(others)]
	case c < 220:
		return self
	case c < 245:
		return fuzzStranger
	default:
		return classic.None
	}
}

// pickID picks any ID a message field may carry: a member of the universe
// (so perhaps not of this cluster), the stranger or none.
func (in *fuzzIn) pickID() classic.ID {
	c := int(in.byte())
	switch {
	case c < 7*32:
		return fuzzUniverse[c%len(fuzzUniverse)]
	case c < 240:
		return fuzzStranger
	default:
		return classic.None
	}
}

// message makes a message to self with arbitrary fields.
func (in *fuzzIn) message(self classic.ID, peers []classic.ID) classic.Message {
	m := classic.Message{From: in.pickFrom(self, peers), To: self}
	if c := in.byte(); c < 240 {
		m.Type = classic.MsgType(1 + c%15)
	} else {
		m.Type = classic.MsgType(in.byte()) // unknown kinds too
	}
	if in.byte() >= 240 {
		m.To = in.pickID()
	}
	m.Term = in.num()
	m.Leader = in.pickID()
	m.Election = classic.ElectionID{Source: in.pickID(), Seq: in.num()}
	m.Capacity = in.num()
	n := in.intn(8)
	if n == 7 && in.byte() == 0xff {
		n = pb.MaxIDs // as long as the wire allows
	}
	for range n {
		id := in.pickID()
		if id == classic.None {
			id = fuzzStranger // the wire carries no empty IDs in a list
		}
		m.IDs = append(m.IDs, id)
	}
	return m
}

// reply makes a plausible answer to out, one of the machine's own messages,
// from its recipient: the fuzzer gets past "who are you" checks far sooner
// with answers that echo the machine's own fields.
func (in *fuzzIn) reply(out classic.Message) classic.Message {
	m := out
	m.From, m.To = out.To, out.From
	m.IDs = slices.Clone(out.IDs)
	answers := map[classic.MsgType][]classic.MsgType{
		classic.MsgElection:  {classic.MsgOK, classic.MsgElection, classic.MsgEcho, classic.MsgVote, classic.MsgCoordinator},
		classic.MsgClaim:     {classic.MsgClaimAck, classic.MsgClaim},
		classic.MsgQuery:     {classic.MsgQueryReply},
		classic.MsgInvite:    {classic.MsgAccept, classic.MsgInvite},
		classic.MsgHeartbeat: {classic.MsgHeartbeatAck, classic.MsgAccept, classic.MsgHeartbeat},
		classic.MsgAccept:    {classic.MsgReady, classic.MsgInvite},
		classic.MsgEcho:      {classic.MsgCoordinator},
	}
	if as := answers[out.Type]; len(as) > 0 {
		m.Type = as[in.intn(len(as))]
	}
	switch in.intn(4) {
	case 0:
		m.Leader = m.From
	case 1:
		m.Leader = out.From
	case 2:
		m.Leader = in.pickID()
	}
	if in.intn(4) == 0 {
		m.Term = in.num()
	}
	if m.Type == classic.MsgReady || m.Type == classic.MsgAccept && in.intn(2) == 0 {
		m.IDs = append(m.IDs, m.From)
	}
	return m
}

// fuzzCheck holds what one process has said so far, to check each Ready
// against. Every check is one that must hold whatever the process was sent.
type fuzzCheck struct {
	t     *testing.T
	setup fuzzSetup
	self  classic.ID
	peers []classic.ID // the current configuration

	lastTerm  uint64                // State.Term in this incarnation (not Quorum)
	hardTerm  uint64                // Quorum: HardState.Term, across restarts
	votes     map[uint64]classic.ID // Quorum: term -> whom this process backed in it
	claimed   map[uint64]bool       // Quorum: the terms this process claimed
	lastState classic.State
}

func newFuzzCheck(t *testing.T, s fuzzSetup, self classic.ID, peers []classic.ID) *fuzzCheck {
	return &fuzzCheck{t: t, setup: s, self: self, peers: peers, votes: map[uint64]classic.ID{}, claimed: map[uint64]bool{}}
}

func (c *fuzzCheck) member(id classic.ID) bool { return slices.Contains(c.peers, id) }

// leaderOK reports whether id may be named as a leader. Echo takes the
// winner its neighbours report without knowing every member: on an ad hoc
// network (as the simulator builds it) a process's Peers are only itself
// and its neighbours, and the winner is usually further away. So a hostile
// neighbour can make it name a stranger; only the other algorithms promise
// a leader from Peers.
func (c *fuzzCheck) leaderOK(id classic.ID) bool {
	return id == classic.None || c.member(id) || c.setup.algo == "echo"
}

func (c *fuzzCheck) fail(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s, process %s: %s", c.setup, c.self, fmt.Sprintf(format, args...))
}

// vote records that this process backed who in term, and fails if it backed
// someone else in that term before: under Quorum a process votes once per
// term, across restarts (its HardState keeps the vote). A CLAIM is a vote for
// itself; a CLAIM_ACK naming its recipient is counted as a grant by the
// recipient, so it is one.
func (c *fuzzCheck) vote(term uint64, who classic.ID, m classic.Message) {
	if v, ok := c.votes[term]; ok && v != who {
		c.fail("backs %s in term %d after backing %s in it: %+v", who, term, v, m)
	}
	c.votes[term] = who
}

// ready checks one Ready of the process: its messages, then its state.
func (c *fuzzCheck) ready(rd classic.Ready, m classic.Machine) {
	for _, out := range rd.Messages {
		switch {
		case out.From != c.self:
			c.fail("sent a message with From=%q: %+v", out.From, out)
		case out.To == c.self || !c.member(out.To):
			c.fail("sent a message to %q, not another member of %v: %+v", out.To, c.peers, out)
		case out.Type == classic.MsgUnreachable || out.Type.String() == "UNKNOWN":
			c.fail("sent a message of kind %d (%s): %+v", out.Type, out.Type, out)
		case !c.leaderOK(out.Leader):
			c.fail("sent a message naming %q, not a member, as leader: %+v", out.Leader, out)
		}
		for _, id := range out.IDs {
			if !c.member(id) {
				c.fail("sent a list with %q, not a member: %+v", id, out)
			}
		}
		if _, err := pb.Marshal(out); err != nil {
			c.fail("sent a message the wire cannot carry (%v): %+v", err, out)
		}
		if c.setup.quorum {
			switch {
			case out.Type == classic.MsgClaim:
				c.claimed[out.Term] = true
				c.vote(out.Term, c.self, out)
			case out.Type == classic.MsgClaimAck && out.Leader == out.To:
				c.vote(out.Term, out.To, out)
			}
		}
	}
	st := rd.State
	switch {
	case st.Role > classic.Leader:
		c.fail("role %d", st.Role)
	case !c.leaderOK(st.Leader):
		c.fail("follows %q, not a member of %v", st.Leader, c.peers)
	case st.Role == classic.Leader && st.Leader != c.self:
		c.fail("is leader but names %q as leader", st.Leader)
	case st.Role == classic.Follower && st.Leader == c.self:
		c.fail("is a follower of itself")
	}
	if q, ok := m.(*classic.Quorum); ok {
		hs := q.HardState()
		if hs.Term < c.hardTerm {
			c.fail("HardState term went back from %d to %d", c.hardTerm, hs.Term)
		}
		c.hardTerm = hs.Term
		if hs.Vote != classic.None && !c.member(hs.Vote) {
			c.fail("votes for %q, not a member", hs.Vote)
		}
		if v, ok := c.votes[hs.Term]; ok && hs.Vote == c.self && v != c.self && !c.member(v) {
			// It voted in this term for a member that has left since
			// (Reconfigure): the vote is its own now, which grants no one
			// else in the term (the member back included) and is no claim.
			c.votes[hs.Term] = c.self
		} else if hs.Vote != classic.None {
			// A vote for itself is a claim, even one that no message
			// shows (a cluster of one).
			if hs.Vote == c.self {
				c.claimed[hs.Term] = true
			}
			c.vote(hs.Term, hs.Vote, classic.Message{})
		}
		if st.Role == classic.Leader && !c.claimed[st.Term] {
			c.fail("leads term %d, which it never claimed (claimed %v)", st.Term, c.claimed)
		}
		if q.LeaseLeft() < 0 || q.LeaseLeft() > c.setup.to {
			c.fail("lease left %d ticks, outside [0, %d]", q.LeaseLeft(), c.setup.to)
		}
	} else {
		// Without Quorum, terms (Stable's, echo's sequence numbers) only
		// go up while the process lives.
		if st.Term < c.lastTerm {
			c.fail("term went back from %d to %d (state %+v)", c.lastTerm, st.Term, st)
		}
		c.lastTerm = st.Term
	}
	c.lastState = st
}

// restarted forgets what a restart forgets: a fresh machine's terms start
// again unless Quorum's HardState carries them.
func (c *fuzzCheck) restarted() { c.lastTerm = 0 }

// fuzzMaxOps bounds the inputs of one run, to keep every run short.
const fuzzMaxOps = 600

// FuzzMachine drives one election machine (any algorithm, with or without
// Quorum) with arbitrary messages from anyone (members, itself, a stranger,
// no one; any kind, including unknown ones and driver-only UNREACHABLE;
// terms and sequence numbers up to 2^64-1; ID lists up to the wire's limit),
// ticks, campaigns, restarts (with the stored HardState) and, for the
// machines that support it, reconfigurations. After every input:
//
//   - nothing panics;
//   - every message it sends comes from it, goes to another member, is of a
//     kind a machine sends, names only members (in lists, and as leader but
//     for echo) and fits the wire (pb.Marshal accepts it);
//   - its state names no leader outside the cluster (but for echo, see
//     leaderOK), a Leader names itself and a Follower does not;
//   - without Quorum its term never goes back; with Quorum its HardState
//     term never goes back (across restarts), it backs at most one process
//     per term (counting its claims and its grants), it leads only terms it
//     claimed, and its lease is never longer than TimeoutTicks.
//
// A hostile member can still lie (name a worse leader, claim a huge group
// or capacity): that is not checked, since no rule of a single machine can
// prevent it.
func FuzzMachine(f *testing.F) {
	for _, seed := range fuzzMachineSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzIn{b: data}
		s := readSetup(in, 1)
		self := s.ids[in.intn(len(s.ids))]
		peers := s.ids
		m := s.build(t, self, peers, classic.HardState{})
		c := newFuzzCheck(t, s, self, peers)
		var outs []classic.Message // the latest messages it sent
		ready := func() {
			rd := m.Ready()
			c.ready(rd, m)
			outs = append(outs, rd.Messages...)
			if len(outs) > 32 {
				outs = outs[len(outs)-32:]
			}
		}
		ready()
		for ops := 0; in.more() && ops < fuzzMaxOps; ops++ {
			switch op := in.intn(16); op {
			case 0, 1, 2, 3, 4:
				m.Step(in.message(self, peers))
			case 5, 6:
				if len(outs) > 0 {
					m.Step(in.reply(outs[in.intn(len(outs))]))
				}
			case 7, 8:
				m.Tick()
			case 9:
				for range 1 + in.intn(4*s.to) {
					m.Tick()
					ready()
				}
			case 10:
				m.Campaign()
			case 11:
				// The driver reports a failed send to a member.
				u := classic.Message{Type: classic.MsgUnreachable, From: in.pickFrom(self, peers), To: self}
				if len(outs) > 0 && in.intn(2) == 0 {
					o := outs[in.intn(len(outs))]
					u.From, u.Election, u.Term = o.To, o.Election, o.Term
				}
				m.Step(u)
			case 12:
				// A restart: a fresh machine, with the HardState the
				// driver stored after the last Ready.
				var hs classic.HardState
				if q, ok := m.(*classic.Quorum); ok {
					hs = q.HardState()
				}
				m = s.build(t, self, peers, hs)
				c.restarted()
				outs = nil
			case 13:
				// A new view of the cluster, for the machines that take
				// one without starting over: any set of members, or (the
				// top bit) one member more or less, which Quorum takes in
				// place and refuses a larger change of (ErrRebuild: the
				// driver builds a new machine; this one is unchanged).
				r, ok := m.(classic.Reconfigurer)
				if !ok {
					break
				}
				b := in.byte()
				np := []classic.ID{self}
				if b&0x80 != 0 {
					id := fuzzUniverse[int(b&0x7f)%len(fuzzUniverse)]
					np = slices.Clone(peers)
					if i := slices.Index(np, id); i >= 0 && id != self {
						np = slices.Delete(np, i, i+1)
					} else if i < 0 {
						np = append(np, id)
					}
				} else {
					for i, id := range fuzzUniverse {
						if b&(1<<i) != 0 && id != self {
							np = append(np, id)
						}
					}
				}
				cfg := s.config(self, np)
				err := r.Reconfigure(cfg)
				_, quorum := m.(*classic.Quorum)
				switch {
				case err == nil:
					peers = np
					c.peers = np
				case quorum && errors.Is(err, classic.ErrRebuild) && (membersChanged(peers, np) > 1 ||
					errors.Is(err, classic.ErrBadNeighbours) || errors.Is(err, classic.ErrBadCandidates)):
				default:
					t.Fatalf("%s: Reconfigure(%v): %v", s, np, err)
				}
			default:
				// A message from the cluster's own vocabulary, with a
				// current term or election.
				msg := in.message(self, peers)
				msg.Term, msg.Election = c.lastState.Term, classic.ElectionID{Source: in.pickID(), Seq: c.lastState.Term}
				m.Step(msg)
			}
			ready()
		}
	})
}

// membersChanged counts the members in one of a and b only.
func membersChanged(a, b []classic.ID) int {
	n := 0
	for _, p := range a {
		if !slices.Contains(b, p) {
			n++
		}
	}
	for _, p := range b {
		if !slices.Contains(a, p) {
			n++
		}
	}
	return n
}

// fuzzNet is FuzzCluster's network: every message in flight, delivered,
// lost, duplicated or failed in any order the fuzzer chooses.
type fuzzNet struct {
	t       *testing.T
	s       fuzzSetup
	ms      map[classic.ID]classic.Machine
	checks  map[classic.ID]*fuzzCheck
	crashed map[classic.ID]bool
	hard    map[classic.ID]classic.HardState
	queue   []classic.Message
	// Quorum: the leader of each term, as any process reported it.
	leaderOf map[uint64]classic.ID
}

// fuzzMaxQueue bounds the messages in flight; beyond it the oldest are lost.
// fuzzMaxBatch bounds the messages one "deliver what is in flight" step
// delivers. Both keep a message storm from making one run take seconds.
const (
	fuzzMaxQueue = 256
	fuzzMaxBatch = 64
)

// collect takes every live machine's output into the network and checks it.
func (n *fuzzNet) collect() {
	var leaders []classic.ID
	for _, id := range n.s.ids {
		if n.crashed[id] {
			continue
		}
		m := n.ms[id]
		rd := m.Ready()
		n.checks[id].ready(rd, m)
		if q, ok := m.(*classic.Quorum); ok {
			n.hard[id] = q.HardState() // stored before the messages go out
		}
		n.queue = append(n.queue, rd.Messages...)
		if rd.State.Role == classic.Leader {
			leaders = append(leaders, id)
			if n.s.quorum {
				if l, ok := n.leaderOf[rd.State.Term]; ok && l != id {
					n.t.Fatalf("%s: two leaders of term %d: %s and %s", n.s, rd.State.Term, l, id)
				}
				n.leaderOf[rd.State.Term] = id
			}
		}
	}
	if n.s.quorum && len(leaders) > 1 {
		n.t.Fatalf("%s: %v lead at the same time", n.s, leaders)
	}
	if len(n.queue) > fuzzMaxQueue {
		n.queue = slices.Delete(n.queue, 0, len(n.queue)-fuzzMaxQueue)
	}
}

// take removes and returns the message at i.
func (n *fuzzNet) take(i int) classic.Message {
	m := n.queue[i]
	n.queue = slices.Delete(n.queue, i, i+1)
	return m
}

// deliver hands m to its recipient; a message to a crashed process is lost,
// and when failed is set its sender hears of it as the driver reports a
// failed send.
func (n *fuzzNet) deliver(m classic.Message, failed bool) {
	if n.crashed[m.To] || failed {
		if !n.crashed[m.From] {
			n.ms[m.From].Step(classic.Message{Type: classic.MsgUnreachable, From: m.To, To: m.From, Election: m.Election, Term: m.Term})
		}
		return
	}
	n.ms[m.To].Step(m)
}

// FuzzCluster runs a cluster of 2 to 7 honest processes (any algorithm,
// with or without Quorum) over a network that the fuzzer controls: it
// delivers, loses, duplicates and fails messages in any order and delays
// them as long as it likes, crashes and restarts processes (restarted ones
// get the HardState stored after their last Ready), and makes any process
// campaign. Ticks reach every live process together, as the simulator's do.
// After every step:
//
//   - every process passes FuzzMachine's checks;
//   - with Quorum: no term has two leaders, and no two processes are
//     Leader at the same time, which is what Quorum promises when ticks run
//     at the same rate everywhere whatever the network does.
//
// Without Quorum two leaders at once are expected while messages are lost
// (a partitioned leader keeps leading), so nothing is asserted across
// processes; the chaos tests check that the elections converge once the
// faults stop.
func FuzzCluster(f *testing.F) {
	for _, seed := range fuzzClusterSeeds() {
		f.Add(seed)
	}
	f.Fuzz(fuzzClusterOne)
}

// fuzzClusterOne is one run of FuzzCluster.
func fuzzClusterOne(t *testing.T, data []byte) {
	in := &fuzzIn{b: data}
	s := readSetup(in, 2)
	n := &fuzzNet{
		t: t, s: s, ms: map[classic.ID]classic.Machine{}, checks: map[classic.ID]*fuzzCheck{},
		crashed: map[classic.ID]bool{}, hard: map[classic.ID]classic.HardState{}, leaderOf: map[uint64]classic.ID{},
	}
	for _, id := range s.ids {
		n.ms[id] = s.build(t, id, s.ids, classic.HardState{})
		n.checks[id] = newFuzzCheck(t, s, id, s.ids)
	}
	n.collect()
	for ops := 0; in.more() && ops < fuzzMaxOps; ops++ {
		id := s.ids[in.intn(len(s.ids))]
		switch op := in.intn(16); {
		case op < 5 && len(n.queue) > 0:
			n.deliver(n.take(in.intn(len(n.queue))), false)
		case op == 5 && len(n.queue) > 0:
			n.take(in.intn(len(n.queue))) // lost
		case op == 6 && len(n.queue) > 0:
			i := in.intn(len(n.queue))
			n.queue = append(n.queue, n.queue[i]) // duplicated, delivered later
		case op == 7 && len(n.queue) > 0:
			n.deliver(n.take(in.intn(len(n.queue))), true) // a failed send
		case op == 8 || op == 9:
			for range 1 + in.intn(8) {
				for _, p := range s.ids {
					if !n.crashed[p] {
						n.ms[p].Tick()
					}
				}
				n.collect()
			}
		case op == 10:
			n.crashed[id] = true
		case op == 11 && n.crashed[id]:
			n.crashed[id] = false
			n.ms[id] = s.build(t, id, s.ids, n.hard[id])
			n.checks[id].restarted()
		case op == 12 && !n.crashed[id]:
			n.ms[id].Campaign()
		default:
			// Deliver what is in flight now, oldest first: a quiet
			// network for a moment.
			batch := slices.Clone(n.queue[:min(len(n.queue), fuzzMaxBatch)])
			n.queue = slices.Delete(n.queue, 0, len(batch))
			for _, m := range batch {
				n.deliver(m, false)
			}
		}
		n.collect()
	}
}

// fuzzSeeds returns seeds for every algorithm, with and without Quorum: the
// header byte that picks them, a cluster of four (three for FuzzCluster's
// minimum of two plus one), then a tail of pseudo-random choices from a
// fixed seed, which runs a few hundred inputs.
func fuzzSeeds(salt uint64) [][]byte {
	var out [][]byte
	for i := range classic.Algorithms() {
		for _, q := range []byte{0, 0x80} {
			r := rand.New(rand.NewPCG(uint64(i)<<8|uint64(q), salt))
			b := []byte{byte(i) | q, 3}
			for range 600 {
				b = append(b, byte(r.Uint32()))
			}
			out = append(out, b)
		}
	}
	return out
}

func fuzzMachineSeeds() [][]byte { return fuzzSeeds(1) }

func fuzzClusterSeeds() [][]byte { return fuzzSeeds(2) }

// A Stable process told by its members that others flapped thousands of
// times (each list within the wire's limit) still sends heartbeats the wire
// carries: it sends each flap count only up to the threshold. FuzzMachine
// checks every message with pb.Marshal but rarely builds two long lists
// that name different members.
func TestStableFlapListFitsTheWire(t *testing.T) {
	ids := []classic.ID{"a", "b", "c"}
	s, err := classic.NewStable(classic.Config{ID: "c", Peers: ids})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []classic.ID{"a", "b"} {
		s.Step(classic.Message{Type: classic.MsgCoordinator, From: "a", To: "c", Term: 1, Leader: "c", IDs: slices.Repeat([]classic.ID{id}, pb.MaxIDs)})
	}
	for range 20 {
		s.Tick()
	}
	msgs := s.Ready().Messages
	if len(msgs) == 0 {
		t.Fatal("no heartbeats")
	}
	for _, m := range msgs {
		if _, err := pb.Marshal(m); err != nil {
			t.Fatalf("%s with %d IDs: %v", m.Type, len(m.IDs), err)
		}
	}
}
