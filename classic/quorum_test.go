package classic

import (
	"errors"
	"testing"
)

// tnQuorumBully builds bully processes wrapped with terms and majority.
func tnQuorumBully(t testing.TB, ids []ID) *tnet {
	t.Helper()
	return newTnet(t, ids, func(id ID) Machine {
		b := tnMust[*Bully](t)(NewBully(tnCfg(id, ids)))
		return tnMust[*Quorum](t)(NewQuorum(tnCfg(id, ids), b, HardState{}))
	})
}

func TestQuorumConfig(t *testing.T) {
	ids := tnSplit("a b c")
	b := tnMust[*Bully](t)(NewBully(tnCfg("a", ids)))
	for _, tt := range []struct {
		name  string
		cfg   Config
		inner Machine
		hs    HardState
		want  error
	}{
		{"nil inner", tnCfg("a", ids), nil, HardState{}, ErrBadOption},
		{"vote for a stranger", tnCfg("a", ids), b, HardState{Term: 3, Vote: "z"}, ErrBadID},
		{"lease not above the claim interval", Config{ID: "a", Peers: ids, HeartbeatTicks: 4, TimeoutTicks: 4}, b, HardState{}, ErrBadTicks},
		{"ID not a member", tnCfg("z", ids), b, HardState{}, ErrBadID},
		{"restored", tnCfg("a", ids), b, HardState{Term: 3, Vote: "b"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q, err := NewQuorum(tt.cfg, tt.inner, tt.hs)
			if !errors.Is(err, tt.want) {
				t.Fatalf("NewQuorum: error %v, want %v", err, tt.want)
			}
			if err == nil && q.HardState() != tt.hs {
				t.Fatalf("HardState %+v, want the restored %+v", q.HardState(), tt.hs)
			}
		})
	}
}

// tnQuorumLeaders returns the live processes that report themselves Leader, and
// fails the test if two of them share a term.
func tnQuorumLeaders(t *testing.T, n *tnet, step string) []ID {
	t.Helper()
	terms := map[uint64]ID{}
	var out []ID
	for _, id := range n.live() {
		st := n.state(id)
		if st.Role != Leader {
			continue
		}
		if other, ok := terms[st.Term]; ok {
			t.Fatalf("%s: %s and %s both lead term %d", step, other, id, st.Term)
		}
		terms[st.Term] = id
		out = append(out, id)
	}
	return out
}

// TestQuorumPartition: five processes 0..4 elect 4 by bully, backed by a
// majority. A partition cuts {3, 4} off: within a lease 4 stops being
// leader (it has two of five), and the majority side {0, 1, 2} elects 2 in a
// higher term. After the heal 4 wins again, in a higher term still. At no
// tick are there two leaders, of the same term or not.
func TestQuorumPartition(t *testing.T) {
	ids := tnIDs(5)
	n := tnQuorumBully(t, ids)
	tick := func(k int, step string, check func() bool) int {
		t.Helper()
		for i := 1; i <= k; i++ {
			n.run(1)
			if len(tnQuorumLeaders(t, n, step)) > 1 {
				t.Fatalf("%s: two leaders at once: %s", step, n.states())
			}
			if check() {
				return i
			}
		}
		t.Fatalf("%s: not reached after %d ticks: %s", step, k, n.states())
		return 0
	}
	n.campaign("0")
	tick(40, "start", func() bool { return n.agree("4") })
	t4 := n.state("4").Term
	if t4 == 0 {
		t.Fatalf("4 leads without a term")
	}

	n.partition(tnSplit("0 1 2"), tnSplit("3 4"))
	// Lease: TimeoutTicks = 10 from the last round 0..2 granted.
	lost := tick(12, "minority", func() bool { return n.state("4").Role != Leader })
	t.Logf("4 stepped down %d ticks after the partition", lost)
	tick(60, "majority side", func() bool {
		return n.state("2").Role == Leader && n.state("0").Leader == "2" && n.state("1").Leader == "2"
	})
	if t2 := n.state("2").Term; t2 <= t4 {
		t.Fatalf("2 leads term %d, not above 4's %d", t2, t4)
	}
	for range 30 { // the minority never gets a leader
		n.run(1)
		for _, id := range tnSplit("3 4") {
			if n.state(id).Role == Leader {
				t.Fatalf("%s leads on the minority side: %s", id, n.states())
			}
		}
	}

	t2 := n.state("2").Term
	n.heal()
	tick(80, "heal", func() bool { return n.agree("4") })
	if got := n.state("4").Term; got <= t2 {
		t.Fatalf("after the heal 4 leads term %d, not above 2's %d", got, t2)
	}
}

// TestQuorumTextbookSplitBrain is the same partition without Quorum: bully
// elects 2 on the majority side while 4 still leads its side: two leaders.
func TestQuorumTextbookSplitBrain(t *testing.T) {
	ids := tnIDs(5)
	n := tnBully(t, ids)
	n.campaign("0")
	n.run(30)
	n.partition(tnSplit("0 1 2"), tnSplit("3 4"))
	n.run(30)
	if got := n.leaders(); len(got) != 2 {
		t.Fatalf("leaders %v, want the textbook split brain (2 and 4): %s", got, n.states())
	}
}

// tnPassive is an inner machine that never leads, so that only the claims
// fed by hand decide what Quorum does.
type tnPassive struct{}

func (tnPassive) Step(Message) {}
func (tnPassive) Tick()        {}
func (tnPassive) Campaign()    {}
func (tnPassive) Ready() Ready { return Ready{} }

// TestQuorumOneVotePerTerm feeds claims to one process by hand.
func TestQuorumOneVotePerTerm(t *testing.T) {
	ids := tnSplit("a b c")
	mk := func(hs HardState) *Quorum {
		return tnMust[*Quorum](t)(NewQuorum(tnCfg("c", ids), tnPassive{}, hs))
	}
	claim := func(from ID, term, round uint64) Message {
		return Message{Type: MsgClaim, From: from, To: "c", Term: term, Election: ElectionID{Source: from, Seq: round}}
	}
	acks := func(q *Quorum) []string {
		var out []string
		for _, m := range q.Ready().Messages {
			if m.Type == MsgClaimAck {
				out = append(out, tnFmtLong(m))
			}
		}
		return out
	}
	q := mk(HardState{})
	// A fresh process grants nobody during its first lease (it may have
	// made promises before a restart).
	q.Step(claim("a", 1, 1))
	if got := acks(q); len(got) != 1 || q.HardState().Vote != None {
		t.Fatalf("during the first lease: %v, vote %q; want one refusal and no vote", got, q.HardState().Vote)
	}
	for range 12 {
		q.Tick()
	}
	q.Ready()
	q.Step(claim("a", 1, 2))
	if hs := q.HardState(); hs != (HardState{Term: 1, Vote: "a"}) {
		t.Fatalf("after a's claim: %+v, want term 1 voted for a", hs)
	}
	if st := q.Ready().State; st.Leader != "a" || st.Role != Follower {
		t.Fatalf("state %+v, want following a", st)
	}
	// b claims the same term, then a higher one while the promise to a
	// holds: both refused, naming a's term.
	q.Step(claim("b", 1, 1))
	q.Step(claim("b", 2, 1))
	for _, m := range q.Ready().Messages {
		if m.Type != MsgClaimAck || m.To != "b" || m.Term != 1 || m.Leader != "a" {
			t.Fatalf("answer to b: %s, want a refusal naming term 1 and a", tnFmtLong(m))
		}
	}
	if hs := q.HardState(); hs != (HardState{Term: 1, Vote: "a"}) {
		t.Fatalf("after b's claims: %+v, want still term 1 voted for a", hs)
	}
	// The promise runs out (lease 10 + margin 2): b's higher term wins.
	for range 12 {
		q.Tick()
	}
	q.Ready()
	q.Step(claim("b", 2, 2))
	if hs := q.HardState(); hs != (HardState{Term: 2, Vote: "b"}) {
		t.Fatalf("after the promise ran out: %+v, want term 2 voted for b", hs)
	}
	// A claim of an older term is refused for good.
	q.Step(claim("a", 1, 3))
	if hs := q.HardState(); hs.Term != 2 || hs.Vote != "b" {
		t.Fatalf("an old term changed the vote: %+v", hs)
	}

	// After a restart with the stored vote, b's rival in term 2 is refused
	// even once the first lease is over.
	r := mk(HardState{Term: 2, Vote: "b"})
	for range 13 {
		r.Tick()
	}
	r.Ready()
	r.Step(claim("a", 2, 1))
	if hs := r.HardState(); hs != (HardState{Term: 2, Vote: "b"}) {
		t.Fatalf("restarted process voted twice in term 2: %+v", hs)
	}
}

// A process bound to a whose term has since risen refuses a's stale claim
// without naming a: a CLAIM_ACK{Term: 6, Leader: a} to a would count, at a,
// as a grant of term 6 (once a claims 6, by the round number), whatever c
// did in term 6. (Found while writing FuzzMachine and its one-vote-per-term
// check, which asserts against it.) The test first reached a term of 6 at c
// through a CLAIM_ACK from b; acks no longer move a term (a hostile member
// ended every election with CLAIM_ACKs of term 2^63-1, issue 19), so that
// path is checked to leave c's term alone, and c's term rises through a's
// own claim of 6 instead, whose round 1 of term 5 arrives late.
func TestQuorumRefusalIsNoGrant(t *testing.T) {
	ids := tnSplit("a b c")
	q := tnMust[*Quorum](t)(NewQuorum(tnCfg("c", ids), tnPassive{}, HardState{}))
	claim := func(from ID, term, round uint64) Message {
		return Message{Type: MsgClaim, From: from, To: "c", Term: term, Election: ElectionID{Source: from, Seq: round}}
	}
	for range 13 {
		q.Tick()
	}
	q.Ready()
	q.Step(claim("a", 5, 2))                                        // granted: bound to a
	q.Step(Message{Type: MsgClaimAck, From: "b", To: "c", Term: 6}) // a report of term 6, no more
	if hs := q.HardState(); hs != (HardState{Term: 5, Vote: "a"}) {
		t.Fatalf("after b's ack of term 6: %+v, want still term 5 voted for a", hs)
	}
	q.Step(claim("a", 6, 3)) // a claims 6: granted
	q.Step(claim("a", 5, 1)) // a's stale claim of 5 arrives late: refused
	msgs := q.Ready().Messages
	if len(msgs) != 3 {
		t.Fatalf("answers %v, want three", msgs)
	}
	for _, m := range msgs[2:] {
		if m.Leader == "a" && m.Term == 6 {
			t.Fatalf("refusal %s reads as a grant of term 6", tnFmtLong(m))
		}
		if m.Leader != None || m.Term != 6 {
			t.Fatalf("refusal %s, want term 6 naming no one (a then claims above 6)", tnFmtLong(m))
		}
	}
	q.Step(claim("a", 7, 4)) // a claims above: granted, c is bound to it
	if hs := q.HardState(); hs != (HardState{Term: 7, Vote: "a"}) {
		t.Fatalf("after a's claim above: %+v, want term 7 voted for a", hs)
	}
}

// Claims and grants from a process that is not a configured member are
// dropped: a stranger neither gets a vote nor counts towards a majority.
func TestQuorumIgnoresStrangers(t *testing.T) {
	ids := tnSplit("a b c")
	q := tnMust[*Quorum](t)(NewQuorum(tnCfg("c", ids), tnPassive{}, HardState{}))
	for range 13 {
		q.Tick()
	}
	q.Step(Message{Type: MsgClaim, From: "z", To: "c", Term: 5, Election: ElectionID{Source: "z", Seq: 1}})
	if hs := q.HardState(); hs != (HardState{}) {
		t.Fatalf("a stranger's claim changed the vote: %+v", hs)
	}
	if msgs := q.Ready().Messages; len(msgs) != 0 {
		t.Fatalf("answered a stranger: %v", msgs)
	}

	// c claims (its inner machine says it leads); only b of the members
	// grants, and a stranger's grant must not make the majority of 2.
	lead := &tnLeader{id: "c"}
	l := tnMust[*Quorum](t)(NewQuorum(tnCfg("c", ids), lead, HardState{}))
	for range 13 {
		l.Tick()
	}
	var round uint64
	for _, m := range l.Ready().Messages {
		if m.Type == MsgClaim {
			round = m.Election.Seq
		}
	}
	if round == 0 {
		t.Fatal("c sent no claim")
	}
	l.Step(Message{Type: MsgClaimAck, From: "z", To: "c", Term: 1, Leader: "c", Election: ElectionID{Source: "c", Seq: round}})
	if st := l.Ready().State; st.Role == Leader {
		t.Fatalf("a stranger's grant made c leader: %+v", st)
	}
	l.Step(Message{Type: MsgClaimAck, From: "b", To: "c", Term: 1, Leader: "c", Election: ElectionID{Source: "c", Seq: round}})
	if st := l.Ready().State; st.Role != Leader || st.Term != 1 {
		t.Fatalf("with b's grant c should lead term 1: %+v", st)
	}
}

// tnLeader is an inner machine that always says its process leads.
type tnLeader struct{ id ID }

func (*tnLeader) Step(Message)   {}
func (*tnLeader) Tick()          {}
func (*tnLeader) Campaign()      {}
func (l *tnLeader) Ready() Ready { return Ready{State: State{Role: Leader, Leader: l.id}} }

// TestQuorumLeaseLeft: a leader's LeaseLeft counts down to the end of its
// lease once a partition leaves it without a majority, and is 0 for a
// follower and after the lease; while it is positive, the majority side
// has no leader yet (the bound a driver relies on when it replaces the
// machine and carries the old leader on).
func TestQuorumLeaseLeft(t *testing.T) {
	ids := tnIDs(5)
	n := tnQuorumBully(t, ids)
	n.campaign("0")
	for i := 0; i < 40 && !n.agree("4"); i++ {
		n.run(1)
	}
	q4 := n.nodes["4"].(*Quorum)
	if l := q4.LeaseLeft(); l <= 0 || l > q4.lease {
		t.Fatalf("leader's LeaseLeft %d, want 1..%d", l, q4.lease)
	}
	if l := n.nodes["0"].(*Quorum).LeaseLeft(); l != 0 {
		t.Fatalf("follower's LeaseLeft %d, want 0", l)
	}
	n.partition(tnSplit("0 1 2"), tnSplit("3 4"))
	prev := q4.LeaseLeft()
	for tick := 0; q4.LeaseLeft() > 0; tick++ {
		if tick > q4.lease {
			t.Fatalf("LeaseLeft still %d after %d ticks without a majority, more than a lease", q4.LeaseLeft(), tick)
		}
		n.run(1)
		if l := q4.LeaseLeft(); l != 0 && l != prev-1 {
			t.Fatalf("LeaseLeft went from %d to %d in one tick without a majority", prev, l)
		}
		prev = q4.LeaseLeft()
		if n.state("2").Role == Leader {
			t.Fatalf("2 leads the majority side while 4's lease has %d ticks left", q4.LeaseLeft())
		}
	}
	if n.state("4").Role == Leader {
		t.Fatal("4 still Leader after its lease ran out")
	}
}
