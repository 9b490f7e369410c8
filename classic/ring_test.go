package classic

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// ringVariants runs f for both variants of the ring election.
func ringVariants(t *testing.T, f func(t *testing.T, maxOnly bool)) {
	for _, maxOnly := range []bool{false, true} {
		name := "IDList"
		if maxOnly {
			name = "MaxOnly"
		}
		t.Run(name, func(t *testing.T) { f(t, maxOnly) })
	}
}

func TestNewRingValidatesConfig(t *testing.T) {
	ringVariants(t, func(t *testing.T, maxOnly bool) {
		mk := NewRing
		if maxOnly {
			mk = NewRingMax
		}
		bad := []struct {
			cfg  Config
			want error
		}{
			{Config{Peers: tnSplit("a b")}, ErrBadID},
			{Config{ID: "c", Peers: tnSplit("a b")}, ErrBadID},
			{Config{ID: "a", Peers: tnSplit("a b b")}, ErrBadID},
			{Config{ID: "a", Peers: tnSplit("a b"), TimeoutTicks: -3}, ErrBadTicks},
			{Config{ID: "a", Peers: tnSplit("a b"), HeartbeatTicks: 20, TimeoutTicks: 15}, ErrBadTicks},
		}
		for _, tt := range bad {
			if r, err := mk(tt.cfg); !errors.Is(err, tt.want) || r != nil {
				t.Errorf("%+v: got (%v, %v), want error %v", tt.cfg, r, err, tt.want)
			}
		}
		r, err := mk(Config{ID: "a", Peers: tnSplit("a b")})
		if err != nil || r.MaxOnly() != maxOnly {
			t.Fatalf("valid config: %v, MaxOnly=%v", err, r.MaxOnly())
		}
	})
}

// TestRingMaxWalkthrough is the seed's five-node ring A(3) B(5) C(2) D(1)
// E(4). C starts a max-only election; the max it carries reads 2, 2, 4, 4, 5
// as it leaves C, D, E, A and B. The 5 then goes round once more and comes
// back to B, which is elected and sends COORDINATOR round the ring.
func TestRingMaxWalkthrough(t *testing.T) {
	n := tnRing(t, tnSplit("3 5 2 1 4"), true)
	steps := []struct {
		what, inFlight string
	}{
		{"C(2) initiates with its own ID", "2->1 ELECTION(max=2)"},
		{"D(1) is lower: passes 2 on", "1->4 ELECTION(max=2)"},
		{"E(4) is higher: replaces it", "4->3 ELECTION(max=4)"},
		{"A(3) passes 4 on", "3->5 ELECTION(max=4)"},
		{"B(5) replaces it", "5->2 ELECTION(max=5)"},
		{"C passes 5 on", "2->1 ELECTION(max=5)"},
		{"D passes 5 on", "1->4 ELECTION(max=5)"},
		{"E passes 5 on", "4->3 ELECTION(max=5)"},
		{"A passes 5 on", "3->5 ELECTION(max=5)"},
		{"B gets its own ID back: elected", "5->2 COORDINATOR(5)"},
		{"C learns", "2->1 COORDINATOR(5)"},
		{"D learns", "1->4 COORDINATOR(5)"},
		{"E learns", "4->3 COORDINATOR(5)"},
		{"A learns", "3->5 COORDINATOR(5)"},
		{"back at B: removed", ""},
	}
	n.campaign("2")
	for i, s := range steps {
		if i > 0 {
			n.round()
		}
		n.wantPending(s.what, s.inFlight)
		if i == 9 {
			n.wantState(s.what, "5", Leader, "5")
			n.wantState("C still waits", "2", Candidate, None)
		}
	}
	n.wantLeader("B elected", "5")
	if e, c := n.count(MsgElection), n.count(MsgCoordinator); e != 9 || c != 5 {
		t.Fatalf("ELECTION %d, COORDINATOR %d; want 9 (n + 4 hops from C to B) and 5 (n)", e, c)
	}
}

// TestRingIDListWalkthrough runs the ID-list variant on the same ring: the
// list grows by one ID per hop, and C, back at the start, announces the
// highest of it together with the new ring.
func TestRingIDListWalkthrough(t *testing.T) {
	n := tnRing(t, tnSplit("3 5 2 1 4"), false)
	n.campaign("2")
	for _, s := range []struct{ what, inFlight string }{
		{"C initiates", "2->1 ELECTION[2]"},
		{"D appends itself", "1->4 ELECTION[2 1]"},
		{"E appends itself", "4->3 ELECTION[2 1 4]"},
		{"A appends itself", "3->5 ELECTION[2 1 4 3]"},
		{"B appends itself", "5->2 ELECTION[2 1 4 3 5]"},
		{"back at C: 5 is the highest", "2->1 COORDINATOR(5)"},
	} {
		n.wantPending(s.what, s.inFlight)
		n.round()
	}
	n.settle()
	n.wantLeader("B elected", "5")
	wantRing := tnSplit("2 1 4 3 5")
	for _, id := range n.ids {
		if got := n.nodes[id].(*Ring).Members(); !slices.Equal(got, wantRing) {
			t.Errorf("%s learned the ring %v, want %v", id, got, wantRing)
		}
	}
	if e, c := n.count(MsgElection), n.count(MsgCoordinator); e != 5 || c != 5 {
		t.Fatalf("ELECTION %d, COORDINATOR %d; want 5 and 5", e, c)
	}
}

// TestRingSkipsDeadSuccessor: a ring 0..6 where 6 has failed; 3 initiates.
// 5's send to 6 fails, the driver tells 5, and 5 sends to 0 instead. 5 is
// the highest live process and wins; the COORDINATOR round skips 6 without
// trying it again.
func TestRingSkipsDeadSuccessor(t *testing.T) {
	ringVariants(t, func(t *testing.T, maxOnly bool) {
		n := tnRing(t, tnIDs(7), maxOnly)
		n.crash("6")
		n.campaign("3")
		n.round() // 3 -> 4
		n.round() // 4 -> 5
		if maxOnly {
			n.wantPending("5 sends to its successor 6", "5->6 ELECTION(max=5)")
		} else {
			n.wantPending("5 sends to its successor 6", "5->6 ELECTION[3 4 5]")
		}
		n.round()
		n.wantPending("the send failed", "6->5 UNREACHABLE")
		n.round()
		if maxOnly {
			n.wantPending("5 skips 6", "5->0 ELECTION(max=5)")
		} else {
			n.wantPending("5 skips 6", "5->0 ELECTION[3 4 5]")
		}
		n.settle()
		n.wantLeader("5 wins", "5")
		if n.injected != 1 {
			t.Errorf("%d UNREACHABLE notices, want 1: 5 remembers that 6 is down", n.injected)
		}
		if !maxOnly {
			want := tnSplit("3 4 5 0 1 2")
			for _, id := range n.live() {
				if got := n.nodes[id].(*Ring).Members(); !slices.Equal(got, want) {
					t.Errorf("%s learned the ring %v, want %v", id, got, want)
				}
			}
		}
	})
}

// TestRingConcurrentInitiators starts an election at every process of a ring
// of 8 at once. Exactly one election survives: there is one COORDINATOR
// round (n messages) and one leader, and the ELECTION count stays within
// the Chang-Roberts bounds: 2n-1 when IDs increase along the ring (every
// message but the highest dies at the next hop), n(n+1)/2 when they decrease
// (the message of the k-th lowest goes k hops before the highest process
// swallows it).
func TestRingConcurrentInitiators(t *testing.T) {
	const size = 8
	ids := tnIDs(size)
	desc := slices.Clone(ids)
	slices.Reverse(desc)
	tests := []struct {
		name     string
		ring     []ID
		election int // exact count; 0 means only the bounds are checked
	}{
		{"increasing", ids, 2*size - 1},
		{"decreasing", desc, size * (size + 1) / 2},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 4 {
		p := slices.Clone(ids)
		rng.Shuffle(len(p), func(a, b int) { p[a], p[b] = p[b], p[a] })
		tests = append(tests, struct {
			name     string
			ring     []ID
			election int
		}{fmt.Sprintf("shuffled%d", i), p, 0})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ringVariants(t, func(t *testing.T, maxOnly bool) {
				n := tnRing(t, tt.ring, maxOnly)
				for _, id := range tt.ring {
					n.campaign(id)
				}
				n.settle()
				n.wantLeader("after the election", ids[size-1])
				e, c := n.count(MsgElection), n.count(MsgCoordinator)
				if c != size {
					t.Errorf("COORDINATOR %d, want %d: one round", c, size)
				}
				if tt.election != 0 && e != tt.election {
					t.Errorf("ELECTION %d, want %d", e, tt.election)
				}
				if e < 2*size-1 || e > size*(size+1)/2 {
					t.Errorf("ELECTION %d, want within [2n-1, n(n+1)/2] = [%d, %d]", e, 2*size-1, size*(size+1)/2)
				}
				t.Logf("ring %v: %d ELECTION, %d COORDINATOR", tt.ring, e, c)
			})
		})
	}
}

// TestRingMessageCounts counts one election with one initiator on rings of
// n = 8, 64, 512 processes with IDs increasing along the ring:
//
//	ID-list:  n ELECTION (once round) + n COORDINATOR              = 2n
//	max-only: n+d ELECTION (d hops to the winner, then once round)
//	          + n COORDINATOR; d = 0 when the highest initiates    = 2n
//	          and d = n-1 when its successor, the lowest, does     = 3n-1
func TestRingMessageCounts(t *testing.T) {
	for _, size := range []int{8, 64, 512} {
		ids := tnIDs(size)
		tests := []struct {
			name      string
			maxOnly   bool
			initiator ID
			election  int
		}{
			{"IDList/lowest", false, ids[0], size},
			{"IDList/highest", false, ids[size-1], size},
			{"MaxOnly/highest", true, ids[size-1], size},
			{"MaxOnly/lowest", true, ids[0], 2*size - 1},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("n=%d/%s", size, tt.name), func(t *testing.T) {
				n := tnRing(t, ids, tt.maxOnly)
				n.campaign(tt.initiator)
				n.settle()
				n.wantLeader("after the election", ids[size-1])
				e, c := n.count(MsgElection), n.count(MsgCoordinator)
				if e != tt.election || c != size || n.total() != e+c {
					t.Fatalf("ELECTION %d, COORDINATOR %d, total %d; want %d, %d, %d",
						e, c, n.total(), tt.election, size, tt.election+size)
				}
				t.Logf("n=%d %s initiates: %d messages (ELECTION %d, COORDINATOR %d)", size, tt.name, e+c, e, c)
			})
		}
	}
}

// TestRingLostMessages loses one message of an election. The processes that
// wait in vain restart the election after TimeoutTicks, unless the
// leader's heartbeat reaches them first (a heartbeat from a member ranked
// at least as high as the best the election has seen ends it), and the
// ring still ends with the one right leader.
func TestRingLostMessages(t *testing.T) {
	tests := []struct {
		name    string
		lose    func(Message) bool
		waiting []ID // processes left in the election when the message is lost
	}{
		{"COORDINATOR to 2", func(m Message) bool { return m.Type == MsgCoordinator && m.To == "2" }, tnSplit("2 3")},
		{"ELECTION to 3", func(m Message) bool { return m.Type == MsgElection && m.To == "3" }, tnSplit("0 1 2")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ringVariants(t, func(t *testing.T, maxOnly bool) {
				n := tnRing(t, tnIDs(5), maxOnly)
				n.dropNext(tt.lose)
				n.campaign("0")
				n.settle()
				if n.lost != 1 {
					t.Fatalf("%d messages lost, want 1", n.lost)
				}
				for _, id := range tt.waiting {
					n.wantState("after the loss", id, Candidate, None)
				}
				n.resetCounts()
				n.run(10)
				if n.count(MsgElection) == 0 {
					// No restart: then the leader's heartbeat ended the
					// wait (it ranks above the best the waiting
					// processes saw), and they follow it already.
					for _, id := range tt.waiting {
						n.wantState("after the leader's heartbeat", id, Follower, "4")
					}
				}
				n.run(10)
				n.wantLeader("after the restart", "4")
			})
		})
	}
}

// TestRingLeaderFailure: the leader's heartbeats keep the ring quiet; when
// the leader 4 crashes, the followers time out, the election skips 4, and 3
// leads. When 4 recovers and campaigns it takes over again (after one retry
// at most, while 3 still remembers 4 as down).
func TestRingLeaderFailure(t *testing.T) {
	ringVariants(t, func(t *testing.T, maxOnly bool) {
		ids := tnIDs(5)
		n := tnRing(t, ids, maxOnly)
		n.campaign("4")
		n.settle()
		n.resetCounts()
		n.run(30)
		n.wantLeader("4 leads", "4")
		if n.count(MsgElection) != 0 || n.count(MsgHeartbeat) == 0 {
			t.Fatalf("under a live leader: %d ELECTION, %d HEARTBEAT; want 0 and some", n.count(MsgElection), n.count(MsgHeartbeat))
		}

		n.crash("4")
		n.run(9)
		n.wantLeader("before the timeout", "4")
		n.run(1)
		n.wantLeader("after the timeout", "3")

		n.run(5)
		n.restart("4", tnNewRing(t, "4", ids, maxOnly))
		n.campaign("4")
		n.settle()
		n.run(25)
		n.wantLeader("4 recovered", "4")
	})
}

// TestRingSkippedHigherProcessTakesOver isolates 4 during an election so the
// ring skips it and 3 wins; once 4 is back, the first heartbeat from the
// lower 3 makes it campaign, and it wins.
func TestRingSkippedHigherProcessTakesOver(t *testing.T) {
	ringVariants(t, func(t *testing.T, maxOnly bool) {
		n := tnRing(t, tnIDs(5), maxOnly)
		n.crash("4") // down for the election: the ring skips it
		n.campaign("0")
		n.settle()
		n.wantLeader("4 skipped", "3")
		n.restart("4", tnNewRing(t, "4", n.ids, maxOnly))
		n.run(30)
		n.wantLeader("4 back", "4")
	})
}

// TestRingAlone: a process whose every peer is down elects itself.
func TestRingAlone(t *testing.T) {
	ringVariants(t, func(t *testing.T, maxOnly bool) {
		n := tnRing(t, tnIDs(3), maxOnly)
		n.crash("1")
		n.crash("2")
		n.campaign("0")
		n.settle()
		n.wantLeader("alone", "0")
		if n.injected != 2 {
			t.Fatalf("%d UNREACHABLE notices, want 2", n.injected)
		}
	})
}

// TestRingChaos: after random crashes, recoveries, isolation and losses,
// the highest live process leads, in both variants (see tnChaos).
func TestRingChaos(t *testing.T) {
	ringVariants(t, func(t *testing.T, maxOnly bool) {
		tnChaos(t, 300, true, func(t testing.TB, id ID, ids []ID) Machine {
			return tnNewRing(t, id, ids, maxOnly)
		})
	})
}

// TestRingForgedResultsDoNotSilenceTheLeader: 0, the leader 4's successor
// in the ring, swallows what it gets and sends 4 a forged result naming
// itself every tick (issue 19's hostile member). The leader does not
// campaign, and tells every member directly that it stands: its followers
// hear it and stay with it, and none starts an election. (When it said so
// with a COORDINATOR round, the round went through 0, and each one put its
// heartbeats off: its followers heard nothing and campaigned after a
// timeout.)
func TestRingForgedResultsDoNotSilenceTheLeader(t *testing.T) {
	ringVariants(t, func(t *testing.T, maxOnly bool) {
		n := tnRing(t, tnIDs(5), maxOnly)
		n.campaign("0")
		n.settle()
		n.wantLeader("after the election", "4")
		n.isolate("0") // what reaches 0 goes no further
		n.resetCounts()
		for seq := range uint64(50) { // five timeouts
			forged := Message{Type: MsgCoordinator, From: "0", To: "4", Leader: "0",
				Election: ElectionID{Source: "0", Seq: 1000 + seq}}
			if !maxOnly {
				forged.IDs = []ID{"0"}
			}
			n.deliver(forged)
			n.run(1, "1", "2", "3", "4") // 0 runs no machine of its own
		}
		if e := n.count(MsgElection); e != 0 {
			es := n.since(0, MsgElection)
			for _, m := range es[:min(3, len(es))] {
				t.Logf("%s", tnFmt(m))
			}
			t.Fatalf("%d ELECTION messages under the forged results: a member campaigned", e)
		}
		for _, id := range []ID{"1", "2", "3"} {
			n.wantState("under the forged results", id, Follower, "4")
		}
		n.wantState("under the forged results", "4", Leader, "4")
	})
}

// TestRingRelays: a ring process takes an ELECTION or COORDINATOR of a
// member's election passed on by a process that is not its member (views
// differ: see Relays), and nothing else from one.
func TestRingRelays(t *testing.T) {
	ids := tnSplit("1 2 3")
	for _, maxOnly := range []bool{false, true} {
		r := tnNewRing(t, "2", ids, maxOnly)
		relay := Message{Type: MsgElection, From: "9", To: "2", Election: ElectionID{Source: "3", Seq: 1}, Leader: "3", IDs: []ID{"3"}}
		for _, c := range []struct {
			m    Message
			want bool
		}{
			{relay, true},
			{func() Message { m := relay; m.Type = MsgCoordinator; return m }(), true},
			{func() Message { m := relay; m.Election.Source = "8"; return m }(), false},
			{func() Message { m := relay; m.Type = MsgHeartbeat; return m }(), false},
			{func() Message { m := relay; m.From = "2"; return m }(), false},
			{func() Message { m := relay; m.To = "1"; return m }(), false},
		} {
			if got := r.Relays(c.m); got != c.want {
				t.Errorf("maxOnly=%v: Relays(%s) = %v, want %v", maxOnly, tnFmtLong(c.m), got, c.want)
			}
		}
		// Taken as from a member: it takes part and passes it on.
		r.Step(relay)
		rd := r.Ready()
		if rd.State.Role != Candidate || len(rd.Messages) != 1 || rd.Messages[0].Type != MsgElection {
			t.Errorf("maxOnly=%v: after a relayed ELECTION: %+v, sent %s", maxOnly, rd.State, tnFmtLongs(rd.Messages))
		}
	}
}
