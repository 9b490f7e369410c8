package classic

import (
	"fmt"
	"slices"
	"testing"
)

// tnHostile is a member that runs no algorithm: it sends what attack makes
// of each tick and of each message it receives. Its messages carry its own
// ID as From, as the transport authenticates them.
type tnHostile struct {
	id     ID
	inner  Machine // nil, or an honest machine whose messages it sends too
	now    int
	onTick func(now int) []Message
	onStep func(now int, m Message) []Message
	out    []Message
}

func (h *tnHostile) Step(m Message) {
	if h.inner != nil {
		h.inner.Step(m)
	}
	if h.onStep != nil {
		h.out = append(h.out, h.onStep(h.now, m)...)
	}
}

func (h *tnHostile) Tick() {
	h.now++
	if h.inner != nil {
		h.inner.Tick()
	}
	if h.onTick != nil {
		h.out = append(h.out, h.onTick(h.now)...)
	}
}

func (h *tnHostile) Campaign() {}

func (h *tnHostile) Ready() Ready {
	out := h.out
	h.out = nil
	if h.inner != nil {
		out = append(h.inner.Ready().Messages, out...)
	}
	for i := range out {
		out[i].From = h.id
	}
	return Ready{Messages: out, State: State{Role: Follower}}
}

// tnHostileNet builds ids with mk for the honest processes and h for the
// hostile one.
func tnHostileNet(t *testing.T, ids []ID, h *tnHostile, mk func(id ID) Machine) *tnet {
	t.Helper()
	n := newTnet(t, ids, func(id ID) Machine {
		if id == h.id {
			return h
		}
		return mk(id)
	})
	n.hostile = h.id
	return n
}

// agreeHonest reports whether every live process but hostile follows leader
// (and leader leads).
func (n *tnet) agreeHonest(hostile, leader ID) bool {
	for _, id := range n.live() {
		if id == hostile {
			continue
		}
		st := n.state(id)
		if st.Leader != leader || (id == leader) != (st.Role == Leader) {
			return false
		}
	}
	return true
}

// tnHonest returns ids without the hostile one.
func tnHonest(ids []ID, hostile ID) []ID {
	return slices.DeleteFunc(slices.Clone(ids), func(id ID) bool { return id == hostile })
}

// TestQuorumHostileTerms: one hostile member of five (f = 1 of 2f+1 = 3
// would do; five leave room for a crash as well) sends what issue 19 found
// (CLAIM_ACKs of term 2^63-1, which ended every election for good) and
// more: fake grants of huge terms, CLAIMs of huge and fast-rising terms to
// every member each tick, and a refusal of a higher term to every CLAIM it
// gets, to make the claimant start over. The honest members must still
// have a leader, never the hostile one, at every tick after the first
// election, again within two leases of their leader's crash, and their
// terms must stay far from the end of the term space.
func TestQuorumHostileTerms(t *testing.T) {
	ids := tnIDs(5)
	honest := tnHonest(ids, "0")
	issue := func(now int) []Message { // issue 19: four CLAIM_ACKs, once
		if now != 1 {
			return nil
		}
		var out []Message
		for _, to := range honest {
			out = append(out, Message{Type: MsgClaimAck, To: to, Term: maxTerm})
		}
		return out
	}
	flood := func(now int) []Message {
		var out []Message
		for _, to := range honest {
			out = append(out,
				Message{Type: MsgClaimAck, To: to, Term: maxTerm},
				Message{Type: MsgClaimAck, To: to, Term: maxTerm, Leader: to, Election: ElectionID{Source: to, Seq: uint64(now)}},
				Message{Type: MsgClaim, To: to, Term: maxTerm, Election: ElectionID{Source: "0", Seq: uint64(now)}},
				Message{Type: MsgClaim, To: to, Term: uint64(now) * 1e6, Election: ElectionID{Source: "0", Seq: uint64(now)}},
			)
		}
		return out
	}
	refuse := func(now int, m Message) []Message {
		if m.Type != MsgClaim {
			return nil
		}
		return []Message{
			{Type: MsgClaimAck, To: m.From, Term: m.Term, Election: m.Election},
			{Type: MsgClaimAck, To: m.From, Term: m.Term + 5000, Election: m.Election},
		}
	}
	for _, tt := range []struct {
		name   string
		onTick func(int) []Message
		onStep func(int, Message) []Message
	}{
		{"silent", nil, nil}, // the reference: a member that says nothing
		{"issue 19", issue, nil},
		{"flood", flood, refuse},
	} {
		t.Run(tt.name, func(t *testing.T) {
			testQuorumHostile(t, ids, &tnHostile{id: "0", onTick: tt.onTick, onStep: tt.onStep})
		})
	}
}

func testQuorumHostile(t *testing.T, ids []ID, h *tnHostile) {
	n := tnHostileNet(t, ids, h, func(id ID) Machine {
		b := tnMust[*Bully](t)(NewBully(tnCfg(id, ids)))
		return tnMust[*Quorum](t)(NewQuorum(tnCfg(id, ids), b, HardState{}))
	})
	check := func(step string) (leader ID) {
		t.Helper()
		for _, id := range n.live() {
			if id == h.id {
				continue
			}
			st := n.state(id)
			if st.Leader == h.id {
				t.Fatalf("%s: %s follows the hostile member: %s", step, id, n.states())
			}
			if st.Term > maxTerm/1024 {
				t.Fatalf("%s: %s has term %d, pushed towards the end of the term space", step, id, st.Term)
			}
		}
		if ls := tnQuorumLeaders(t, n, step); len(ls) == 1 {
			leader = ls[0]
		}
		return leader
	}
	n.campaign("1")
	n.runUntil(60, "led by 4", func() bool { return check("start") == "4" && n.agreeHonest(h.id, "4") })
	for i := range 200 {
		n.run(1)
		if l := check("attack"); l != "4" {
			t.Fatalf("attack, tick %d: leader %q, want 4: %s", i, l, n.states())
		}
	}
	n.crash("4")
	took := n.runUntil(2*10+20, "led by 3", func() bool {
		l := check("failover")
		return l == "3" && n.agreeHonest(h.id, "3")
	})
	t.Logf("3 leads %d ticks after 4's crash", took)
	for i := range 200 {
		n.run(1)
		if l := check("after failover"); l != "3" {
			t.Fatalf("after failover, tick %d: leader %q, want 3: %s", i, l, n.states())
		}
	}
}

// tnAnnounce makes a hostile member announce itself every tick to to:
// COORDINATOR and HEARTBEAT naming itself, and ELECTION to the members in
// elect (to start elections it could then end).
func tnAnnounce(to, elect []ID, ids []ID) func(int) []Message {
	return func(int) []Message {
		var out []Message
		for _, p := range to {
			out = append(out, Message{Type: MsgCoordinator, To: p, IDs: ids}, Message{Type: MsgHeartbeat, To: p, IDs: ids})
		}
		for _, p := range elect {
			out = append(out, Message{Type: MsgElection, To: p})
		}
		return out
	}
}

// TestBullyHostileCoordinator: a member of eight announces itself to the
// followers below it every tick, as issue 19's attacker did (it was their
// superpeer in 98 % of samples), and sends ELECTION to those above it.
// Under bully and next-in-line, mid-rank 3 is never anyone's leader, before
// the leader 7 crashes or after; nor is the heir 6 (the one member whose
// announcement over a leader that missed a heartbeat counts) while 7
// leads. After 7's crash the honest members agree on a leader within one
// failover.
func TestBullyHostileCoordinator(t *testing.T) {
	ids := tnIDs(8)
	for _, algo := range []string{"bully", "next-in-line"} {
		for _, hostile := range []ID{"3", "6"} {
			t.Run(fmt.Sprintf("%s/%s", algo, hostile), func(t *testing.T) {
				var below, above []ID
				for _, p := range ids {
					switch {
					case p < hostile:
						below = append(below, p)
					case p > hostile:
						above = append(above, p)
					}
				}
				h := &tnHostile{id: hostile}
				n := tnHostileNet(t, ids, h, func(id ID) Machine {
					m, err := New(algo, tnCfg(id, ids), Options{ListLen: 3})
					if err != nil {
						t.Fatal(err)
					}
					return m
				})
				n.campaign("7")
				n.settle()
				n.run(3)
				for i := range ids {
					ids[i] = ID(fmt.Sprint(i)) // the lists the attacker sends
				}
				h.onTick = func(now int) []Message {
					for _, m := range tnAnnounce(below, above, ids)(now) {
						h.out = append(h.out, Message{Type: m.Type, To: m.To, Leader: h.id, IDs: m.IDs})
					}
					return nil
				}
				// Samples (one per honest member and tick) in which the
				// hostile member is a member's leader, per phase.
				type count struct{ samples, held int }
				phases := map[string]*count{}
				watch := func(phase string) {
					c := phases[phase]
					if c == nil {
						c = &count{}
						phases[phase] = c
					}
					for _, id := range n.live() {
						if id != hostile {
							c.samples++
							if n.state(id).Leader == hostile {
								c.held++
							}
						}
					}
				}
				for range 100 {
					n.run(1)
					watch("before")
				}
				n.crash("7")
				want := ID("6")
				took := 0
				for ; took < 3*10 && !n.agreeHonest(hostile, want); took++ {
					n.run(1)
					watch("failover")
				}
				for range 100 {
					n.run(1)
					watch("after")
				}
				for _, ph := range []string{"before", "failover", "after"} {
					if c := phases[ph]; c != nil {
						t.Logf("%s the crash of 7: hostile %s leader in %d of %d samples (%.1f %%)",
							ph, hostile, c.held, c.samples, 100*float64(c.held)/float64(c.samples))
					}
				}
				switch hostile {
				case "3":
					if c := phases["before"]; c.held != 0 {
						t.Fatalf("mid-rank 3 was leader in %d samples while 7 led", c.held)
					}
					if c := phases["after"]; c.held != 0 {
						t.Fatalf("mid-rank 3 was leader in %d samples while 6 led", c.held)
					}
					if !n.agreeHonest(hostile, want) {
						t.Fatalf("no agreement on %s within 30 ticks of 7's crash: %s", want, n.states())
					}
					t.Logf("6 leads %d ticks after 7's crash", took)
				case "6":
					// While 7 leads, the heir holds no follower: its word
					// counts only when 7 has missed a heartbeat (it held
					// each of the 6 followers below it once, until 7's
					// next heartbeat, before that rule).
					// After the crash 6 outranks every live member: it is
					// the rightful leader.
					if c := phases["before"]; c.held != 0 {
						t.Fatalf("heir 6 was leader in %d samples while 7 led, want none", c.held)
					}
				}
			})
		}
	}
}

// TestCandidateHostileAnnouncer: every member of eight is a candidate and
// 7 leads; member 3 announces every tick, to every other member, itself
// (COORDINATOR and HEARTBEAT), a low candidate (0: every candidate above it
// would take over) and 7's heir 6. While 7 leads, nobody follows 3 or 0 and
// no candidate but the heir takes over; the heir's announcement counts at
// most once per member (until 7's next heartbeat), and 3 is distrusted
// from then on. After 7's crash the honest members follow 6.
func TestCandidateHostileAnnouncer(t *testing.T) {
	ids := tnIDs(8)
	h := &tnHostile{id: "3"}
	attack := func(int) []Message {
		var out []Message
		for _, p := range ids {
			if p != h.id {
				out = append(out,
					Message{Type: MsgCoordinator, To: p, Leader: "3"},
					Message{Type: MsgHeartbeat, To: p, Leader: "3"},
					Message{Type: MsgCoordinator, To: p, Leader: "0"},
					Message{Type: MsgCoordinator, To: p, Leader: "6"})
			}
		}
		return out
	}
	n := tnHostileNet(t, ids, h, func(id ID) Machine {
		return tnMust[*CandidateElection](t)(NewCandidate(tnCfg(id, ids), ids))
	})
	n.campaign("7")
	n.runUntil(200, "led by 7", func() bool { return n.agreeHonest(h.id, "7") })
	h.onTick = attack
	var wrong, heir int
	for range 100 {
		n.run(1)
		for _, id := range n.live() {
			if id == h.id || id == "7" {
				continue
			}
			switch st := n.state(id); {
			case st.Leader == "6":
				heir++
			case st.Leader != "7":
				wrong++
				t.Errorf("%s: %s", id, n.states())
			}
		}
	}
	t.Logf("while 7 led: %d samples following someone else, %d following the heir 6 (of %d)", wrong, heir, 100*6)
	if wrong != 0 || heir > 6*2 {
		t.Fatalf("while 7 led: %d samples following 3 or 0, %d following 6; want 0 and at most 12", wrong, heir)
	}
	n.crash("7")
	took := n.runUntil(20*10, "led by 6", func() bool { return n.agreeHonest(h.id, "6") })
	t.Logf("6 leads %d ticks after 7's crash", took)
}

// TestStableHostileTerms: of five stable-leader processes, 3 announces
// itself every tick to every other member with COORDINATORs and
// HEARTBEATs of huge and fast-rising terms (2^63-1 made every later
// election's term, one above, be dropped). While leader 5 lives nobody
// follows 3 and no term moves towards the end of the term space; when 5
// crashes and 3 falls silent, the others elect 4.
func TestStableHostileTerms(t *testing.T) {
	ids := tnSplit("1 2 3 4 5")
	h := &tnHostile{id: "3"}
	attack := func(now int) []Message {
		var out []Message
		for _, p := range ids {
			if p != h.id {
				out = append(out,
					Message{Type: MsgCoordinator, To: p, Term: maxTerm, Leader: "3"},
					Message{Type: MsgHeartbeat, To: p, Term: maxTerm, Leader: "3"},
					Message{Type: MsgCoordinator, To: p, Term: uint64(now) * 1e6, Leader: "3"},
					Message{Type: MsgHeartbeat, To: p, Term: uint64(now) + 3, Leader: "3"})
			}
		}
		return out
	}
	n := tnHostileNet(t, ids, h, func(id ID) Machine { return tnMust[*Stable](t)(NewStable(tnCfg(id, ids))) })
	n.runUntil(40, "led by 5", func() bool { return n.agreeHonest(h.id, "5") })
	h.onTick = attack
	for i := range 100 {
		n.run(1)
		for _, id := range tnHonest(ids, h.id) {
			st := n.state(id)
			if st.Leader != "5" || st.Term > maxTerm/1024 {
				t.Fatalf("tick %d under attack: %s is %+v; want following 5, term far from the end: %s", i, id, st, n.states())
			}
		}
	}
	h.onTick = nil
	n.crash("5")
	took := n.runUntil(60, "led by 4", func() bool { return n.agreeHonest(h.id, "4") })
	t.Logf("4 leads %d ticks after 5's crash", took)
}

// TestRingHostileCoordinator: in a ring of eight led by 7, member 3 sends
// the members below it, every tick, a COORDINATOR naming itself: with a ring
// it is the best of ([0 1 2 3]) and, for the max-only variant, as its own
// announcer. Nobody follows 3 while 7 lives, nor once the ring has elected
// 6 after 7's crash.
func TestRingHostileCoordinator(t *testing.T) {
	ids := tnIDs(8)
	for _, maxOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("maxOnly=%v", maxOnly), func(t *testing.T) {
			// 3 takes part in the ring as an honest member would (a member
			// that drops what it should forward stops any ring election).
			h := &tnHostile{id: "3"}
			if maxOnly {
				h.inner = tnMust[*Ring](t)(NewRingMax(tnCfg("3", ids)))
			} else {
				h.inner = tnMust[*Ring](t)(NewRing(tnCfg("3", ids)))
			}
			attack := func(now int) []Message {
				var out []Message
				for _, p := range tnSplit("0 1 2") { // the followers below it, as in issue 19
					{
						out = append(out,
							Message{Type: MsgCoordinator, To: p, Leader: "3", IDs: tnSplit("0 1 2 3"), Election: ElectionID{Source: "3", Seq: uint64(2 * now)}},
							Message{Type: MsgCoordinator, To: p, Leader: "3", Election: ElectionID{Source: "3", Seq: uint64(2*now + 1)}})
					}
				}
				return out
			}
			n := tnHostileNet(t, ids, h, func(id ID) Machine {
				if maxOnly {
					return tnMust[*Ring](t)(NewRingMax(tnCfg(id, ids)))
				}
				return tnMust[*Ring](t)(NewRing(tnCfg(id, ids)))
			})
			n.unreachable = true
			n.campaign("0")
			n.runUntil(100, "led by 7", func() bool { return n.agreeHonest(h.id, "7") })
			h.onTick = attack
			held := map[string]int{}
			watch := func(phase string) {
				for _, id := range tnHonest(ids, h.id) {
					if !n.crashed[id] && n.state(id).Leader == h.id {
						held[phase]++
					}
				}
			}
			for range 100 {
				n.run(1)
				watch("before")
			}
			n.crash("7")
			took := 0
			for ; took < 60 && !n.agreeHonest(h.id, "6"); took++ {
				n.run(1)
				watch("failover")
			}
			for range 100 {
				n.run(1)
				watch("after")
			}
			t.Logf("samples following 3: %v; 6 led %d ticks after 7's crash", held, took)
			if held["before"] != 0 || held["after"] != 0 || !n.agreeHonest(h.id, "6") {
				t.Fatalf("samples following 3: %v; want none while 7 or 6 leads: %s", held, n.states())
			}
		})
	}
}

// TestInvitationHostileReady: five processes merge into one group; member
// 0 then sends every other member, every tick, a READY saying that its
// group absorbed theirs. Each follower believes it at most once, until its
// leader's next heartbeat, and then never while its leader is live: the
// group keeps its leader.
func TestInvitationHostileReady(t *testing.T) {
	ids := tnSplit("0 1 2 3 4")
	h := &tnHostile{id: "0", inner: tnMust[*Invitation](t)(NewInvitation(tnCfg("0", ids)))}
	n := tnHostileNet(t, ids, h, func(id ID) Machine { return tnMust[*Invitation](t)(NewInvitation(tnCfg(id, ids))) })
	var leader ID
	n.runUntil(300, "one group", func() bool {
		leader = n.state("2").Leader
		return leader != None && leader != h.id && n.agreeHonest(h.id, leader)
	})
	h.onTick = func(int) []Message {
		var out []Message
		for _, p := range ids {
			if p != h.id && p != leader {
				out = append(out, Message{Type: MsgReady, To: p, Leader: h.id, IDs: ids})
			}
		}
		return out
	}
	held := 0
	for range 100 {
		n.run(1)
		for _, id := range tnHonest(ids, h.id) {
			if n.state(id).Leader == h.id {
				held++
			}
		}
	}
	t.Logf("leader %s; samples following 0: %d of %d", leader, held, 100*4)
	if held > 3*2 || !n.agreeHonest(h.id, leader) {
		t.Fatalf("samples following 0: %d, want at most 6 (once each, a heartbeat interval); %s", held, n.states())
	}
}

// TestEchoHostileSequence: of five echo processes on a full mesh, 2 (which
// otherwise takes part honestly: a silent member stalls every echo wave)
// sends every other member, every tick, an ELECTION of sequence 2^63-1
// (every later election, one above, used to be dropped), results of
// fast-rising elections naming a stranger, and an ECHO naming one. Nobody
// names the stranger, sequence numbers stay far from the end, and after
// the leader 4 crashes a new election elects 3.
func TestEchoHostileSequence(t *testing.T) {
	ids := tnSplit("0 1 2 3 4")
	mk := func(id ID) Machine {
		return tnMust[*Echo](t)(NewEcho(tnCfg(id, ids), tnHonest(ids, id), 1))
	}
	h := &tnHostile{id: "2", inner: mk("2")}
	n := tnHostileNet(t, ids, h, mk)
	n.unreachable = true
	n.campaign("0")
	n.runUntil(50, "led by 4", func() bool { return n.agreeHonest(h.id, "4") })
	h.onTick = func(now int) []Message {
		var out []Message
		for _, p := range ids {
			if p != h.id {
				out = append(out,
					Message{Type: MsgElection, To: p, Election: ElectionID{Source: "2", Seq: maxTerm}},
					Message{Type: MsgCoordinator, To: p, Election: ElectionID{Source: "2", Seq: uint64(now) * 1e6}, Leader: "z", Capacity: 1 << 40},
					Message{Type: MsgEcho, To: p, Election: ElectionID{Source: p, Seq: uint64(now) * 1e6}, Leader: "z", Capacity: 1 << 40})
			}
		}
		return out
	}
	check := func(step string) {
		t.Helper()
		for _, id := range tnHonest(ids, h.id) {
			if n.crashed[id] {
				continue
			}
			e := n.nodes[id].(*Echo)
			if st := n.state(id); st.Leader == "z" || e.maxSeq > maxTerm/1024 {
				t.Fatalf("%s: %s is %+v, highest sequence %d: %s", step, id, st, e.maxSeq, n.states())
			}
		}
	}
	for range 50 {
		n.run(1)
		check("attack")
	}
	n.crash("4")
	n.campaign("0")
	took := n.runUntil(100, "led by 3", func() bool { check("failover"); return n.agreeHonest(h.id, "3") })
	t.Logf("3 leads %d ticks after the election started", took)
}

// TestBullyElectionFlood: issue 19's finding 1. The lowest of four members
// sends every member above it five ELECTIONs a tick (45 a second at the
// overlay's 100 ms tick). An ELECTION used to make a follower start an
// election at once, every time: the follower sent its leader one ELECTION
// per attacker's message. Now messages from others start at most one
// election of a follower per timeout while its leader lives (TimeoutTicks
// 10 here), each member answers the attacker with OK only within its
// allowance and names it a flooder, the leader stays everyone's, and
// after the leader's crash the honest members fail over as fast as
// without the flood.
func TestBullyElectionFlood(t *testing.T) {
	ids := tnIDs(4)
	const ticks = 100
	for _, algo := range []string{"bully", "next-in-line"} {
		for _, flood := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/flood=%v", algo, flood), func(t *testing.T) {
				h := &tnHostile{id: "0", inner: tnMust[Machine](t)(New(algo, tnCfg("0", ids), Options{}))}
				n := tnHostileNet(t, ids, h, func(id ID) Machine {
					return tnMust[Machine](t)(New(algo, tnCfg(id, ids), Options{}))
				})
				n.campaign("3")
				n.settle()
				n.run(3)
				if flood {
					h.onTick = func(int) []Message {
						var out []Message
						for _, p := range ids[1:] {
							for range 5 {
								out = append(out, Message{Type: MsgElection, To: p})
							}
						}
						return out
					}
				}
				mark := n.mark()
				for range ticks {
					n.run(1)
					for _, id := range ids[1:] {
						if st := n.state(id); st.Leader != "3" && st.Role != Candidate {
							t.Fatalf("%s follows %q under the flood: %s", id, st.Leader, n.states())
						}
					}
				}
				timeout := tnCfg("1", ids).TimeoutTicks
				if timeout == 0 {
					timeout = 10
				}
				sent := map[[2]ID]int{}
				for _, m := range n.sent[mark:] {
					if m.From != "0" {
						sent[[2]ID{m.From, m.To}]++
					}
				}
				elections := 0
				for _, m := range n.since(mark, MsgElection) {
					if m.From != "0" {
						elections++
					}
				}
				t.Logf("%d ticks: honest members sent %d ELECTIONs, 3 sent 0 %d messages, 1 sent 0 %d; flooder named %d times",
					ticks, elections, sent[[2]ID{"3", "0"}], sent[[2]ID{"1", "0"}], n.flooded)
				// Followers 1 and 2 campaign at most once a timeout
				// because of the flood: one ELECTION to each member above.
				if limit := 3 * (ticks/timeout + 1); elections > limit {
					t.Errorf("honest members sent %d ELECTIONs in %d ticks, want at most %d", elections, ticks, limit)
				}
				// What a member sends the flooder: the leader's heartbeats
				// (every 2 ticks), and OK (and the leader's COORDINATOR) to
				// each ELECTION within the allowance.
				allowed := askBurst + timeout/askTicks + askSlack + ticks/(askTicks/2)
				for k, c := range sent {
					if k[1] == "0" && c > ticks/2+2*allowed {
						t.Errorf("%s sent the flooder %d messages in %d ticks", k[0], c, ticks)
					}
				}
				if flood && n.flooded == 0 {
					t.Error("no member named the flooder")
				}
				n.crash("3")
				took := 0
				for ; took < 4*timeout && !n.agreeHonest("0", "2"); took++ {
					n.run(1)
				}
				if !n.agreeHonest("0", "2") {
					t.Fatalf("no failover to 2 within %d ticks: %s", 4*timeout, n.states())
				}
				t.Logf("2 leads %d ticks after 3's crash", took)
			})
		}
	}
}
