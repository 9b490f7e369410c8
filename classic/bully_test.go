package classic

import (
	"errors"
	"fmt"
	"testing"
)

func TestNewBullyValidatesConfig(t *testing.T) {
	peers := tnSplit("a b c")
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"empty ID", Config{Peers: peers}, ErrBadID},
		{"no peers", Config{ID: "a"}, ErrBadID},
		{"ID not a peer", Config{ID: "z", Peers: peers}, ErrBadID},
		{"duplicate peer", Config{ID: "a", Peers: tnSplit("a b a")}, ErrBadID},
		{"empty peer", Config{ID: "a", Peers: []ID{"a", ""}}, ErrBadID},
		{"negative timeout", Config{ID: "a", Peers: peers, TimeoutTicks: -1}, ErrBadTicks},
		{"negative heartbeat", Config{ID: "a", Peers: peers, HeartbeatTicks: -1}, ErrBadTicks},
		{"timeout not above heartbeat", Config{ID: "a", Peers: peers, HeartbeatTicks: 5, TimeoutTicks: 5}, ErrBadTicks},
		{"defaults", Config{ID: "a", Peers: peers}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := NewBully(tt.cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("NewBully: error %v, want %v", err, tt.want)
			}
			if tt.want != nil {
				if b != nil {
					t.Fatalf("NewBully returned a machine with error %v", err)
				}
				return
			}
			if got := b.c.cfg; got.HeartbeatTicks != 2 || got.TimeoutTicks != 10 || got.Rank == nil {
				t.Fatalf("defaults: HeartbeatTicks=%d TimeoutTicks=%d Rank=%v, want 2, 10, HighestID",
					got.HeartbeatTicks, got.TimeoutTicks, got.Rank)
			}
			if st := b.Ready().State; st.Role != Follower || st.Leader != None {
				t.Fatalf("new machine is %s following %q, want a follower without leader", st.Role, st.Leader)
			}
		})
	}
}

// TestBullyWalkthrough is the textbook run: eight processes 0..7, leader 7
// crashes, 4 notices; 5 and 6 answer OK and hold elections of their own; 6
// hears nothing from 7 and announces itself. Then 7 comes back and bullies
// its way to the top again.
//
// Only 4, 5 and 6 are ticked while the election runs: the others' clocks
// would make them notice the crash as well, which
// TestBullyEveryoneNoticesTheCrash covers.
func TestBullyWalkthrough(t *testing.T) {
	ids := tnIDs(8)
	n := tnBully(t, ids)
	T := 10

	// 7 starts: nobody outranks it, so it wins at once.
	n.campaign("7")
	n.wantPending("7 campaigns", "7->0 COORDINATOR(7), 7->1 COORDINATOR(7), 7->2 COORDINATOR(7), "+
		"7->3 COORDINATOR(7), 7->4 COORDINATOR(7), 7->5 COORDINATOR(7), 7->6 COORDINATOR(7)")
	n.settle()
	n.wantLeader("7 announced", "7")

	// 7 crashes; 4 notices and sends ELECTION to every higher process.
	n.crash("7")
	n.campaign("4")
	n.wantState("4 campaigns", "4", Candidate, None)
	n.wantPending("4 campaigns", "4->5 ELECTION, 4->6 ELECTION, 4->7 ELECTION")

	// 5 and 6 answer OK and start elections of their own; 7 is gone.
	n.round()
	n.wantPending("5 and 6 answer", "5->4 OK, 5->6 ELECTION, 5->7 ELECTION, 6->4 OK, 6->7 ELECTION")
	n.wantState("5 answers", "5", Candidate, None)
	n.wantState("6 answers", "6", Candidate, None)

	// 4 stands down and waits for a COORDINATOR; 6 answers 5.
	n.round()
	n.wantPending("6 answers 5", "6->5 OK")
	n.round()
	n.wantPending("5 stands down", "")

	// 6 hears no OK from 7 for TimeoutTicks and announces itself. (Time
	// passes for everyone: 0 to 3 have not heard 7 for as long, short of
	// their own timeout, which is why they take 6's word; see mayFollow.)
	n.run(T - 1)
	n.wantState("just before the timeout", "6", Candidate, None)
	n.tick("4", "5", "6")
	n.wantPending("6 wins", "6->0 COORDINATOR(6), 6->1 COORDINATOR(6), 6->2 COORDINATOR(6), "+
		"6->3 COORDINATOR(6), 6->4 COORDINATOR(6), 6->5 COORDINATOR(6), 6->7 COORDINATOR(6)")
	n.settle()
	n.wantLeader("6 announced", "6")

	// The leader's heartbeats keep everyone quiet.
	n.resetCounts()
	n.run(5 * T)
	n.wantLeader("6 leads", "6")
	if n.count(MsgElection) != 0 || n.count(MsgHeartbeat) == 0 {
		t.Fatalf("under leader 6: %d ELECTION, %d HEARTBEAT sent; want 0 and some", n.count(MsgElection), n.count(MsgHeartbeat))
	}

	// 7 recovers as a fresh process and campaigns: it outranks everyone, so
	// it announces itself at once and everyone, 6 included, follows it.
	n.restart("7", tnMust[*Bully](t)(NewBully(tnCfg("7", ids))))
	n.campaign("7")
	n.wantState("7 recovers", "7", Leader, "7")
	n.settle()
	n.wantLeader("7 bullied back", "7")
}

// TestBullyEveryoneNoticesTheCrash lets every process time out on the dead
// leader in the same tick: seven concurrent elections still give one leader,
// at the cost of the lowest-initiator case, n(n-1) messages.
func TestBullyEveryoneNoticesTheCrash(t *testing.T) {
	n := tnBully(t, tnIDs(8))
	n.campaign("7")
	n.settle()
	n.run(3) // a heartbeat or two
	n.crash("7")
	n.resetCounts()
	n.run(10) // every follower times out on the same tick and campaigns
	if got := len(n.leaders()); got != 0 {
		t.Fatalf("after the timeout: %d leaders, want 0 while 6 waits for OKs", got)
	}
	// ELECTION: process i sends 7-i of them; OK: one per live pair.
	if got, want := n.count(MsgElection), 7+6+5+4+3+2+1; got != want {
		t.Errorf("ELECTION sent: %d, want %d", got, want)
	}
	if got, want := n.count(MsgOK), 6*7/2; got != want {
		t.Errorf("OK sent: %d, want %d", got, want)
	}
	n.run(10)
	n.wantLeader("after the second timeout", "6")
	if got, want := n.count(MsgCoordinator), 7; got != want {
		t.Errorf("COORDINATOR sent: %d, want %d", got, want)
	}
}

// TestBullyLostCoordinator loses 6's COORDINATOR to 4: 4 waited for it after
// 6's OK, restarts its election after 2·TimeoutTicks, and the leader 6 answers
// it with OK and a COORDINATOR. One leader throughout.
func TestBullyLostCoordinator(t *testing.T) {
	n := tnBully(t, tnIDs(8))
	n.campaign("7")
	n.settle()
	n.crash("7")
	n.dropNext(func(m Message) bool { return m.Type == MsgCoordinator && m.To == "4" })
	n.campaign("4")
	n.settle()
	n.run(9) // 0 to 3 wait too, short of their timeout
	n.run(1, "4", "5", "6")
	n.wantLeader("6 won, its COORDINATOR to 4 lost", "6", "0", "1", "2", "3", "5", "6")
	n.wantState("4 still waits", "4", Candidate, None)
	if n.lost == 0 {
		t.Fatalf("no message was lost")
	}

	n.resetCounts()
	n.run(9, "4")
	n.wantState("4 still waits", "4", Candidate, None)
	n.run(1, "4")
	n.wantLeader("4 restarted its election", "6")
	if n.count(MsgElection) == 0 || n.count(MsgCoordinator) == 0 {
		t.Fatalf("restart: %d ELECTION and %d COORDINATOR sent, want some of both", n.count(MsgElection), n.count(MsgCoordinator))
	}
	if got := n.leaders(); len(got) != 1 || got[0] != "6" {
		t.Fatalf("leaders %v, want [6]", got)
	}
}

// TestBullyHigherProcessBulliesBack isolates 7, lets 6 take over, then heals
// 7: the COORDINATOR and heartbeats from the lower 6 make 7 campaign, and
// since nobody outranks it, it announces itself again.
func TestBullyHigherProcessBulliesBack(t *testing.T) {
	n := tnBully(t, tnIDs(8))
	n.campaign("7")
	n.settle()
	n.isolate("7")
	n.run(25) // followers time out, 6 wins; 7 still thinks it leads
	n.wantLeader("7 cut off", "6", "0", "1", "2", "3", "4", "5", "6")
	n.wantState("7 cut off", "7", Leader, "7")

	n.heal("7")
	n.run(3)
	n.wantLeader("healed", "7")
}

// TestBullyCampaignsWithoutLeader checks that a freshly started cluster in
// which nobody calls Campaign elects its highest process on its own.
func TestBullyCampaignsWithoutLeader(t *testing.T) {
	n := tnBully(t, tnIDs(5))
	n.run(9)
	if got := n.leaders(); len(got) != 0 {
		t.Fatalf("leaders before the timeout: %v", got)
	}
	n.run(25)
	n.wantLeader("after the timeouts", "4")
}

// TestBullySingleProcess: a cluster of one elects itself.
func TestBullySingleProcess(t *testing.T) {
	n := tnBully(t, tnSplit("solo"))
	n.campaign("solo")
	n.wantPending("solo campaigns", "")
	n.wantLeader("solo", "solo")
}

// TestBullyMessageCounts counts one election on n processes 0..n-1 whose
// highest process n-1 has crashed.
//
// Lowest process 0 initiates. Every live process i ends up campaigning once
// (the first ELECTION from below triggers it) and sends ELECTION to the
// n-1-i processes above it:
//
//	ELECTION    = Σ_{i=0}^{n-2} (n-1-i) = n(n-1)/2
//	OK          = ELECTIONs to live processes = n(n-1)/2 - (n-1) = (n-1)(n-2)/2
//	COORDINATOR = n-1 (from n-2 to everyone else)
//	total       = n(n-1)
//
// Second-highest process n-2 initiates: 1 ELECTION (to the dead n-1), no OK,
// n-1 COORDINATOR: n messages.
func TestBullyMessageCounts(t *testing.T) {
	for _, size := range []int{8, 64, 512} {
		ids := tnIDs(size)
		top, second := ids[size-1], ids[size-2]
		tests := []struct {
			name                     string
			initiator                ID
			election, ok, coord, all int
		}{
			{"lowest", ids[0], size * (size - 1) / 2, (size - 1) * (size - 2) / 2, size - 1, size * (size - 1)},
			{"second highest", second, 1, 0, size - 1, size},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("n=%d/%s", size, tt.name), func(t *testing.T) {
				n := tnBully(t, ids)
				n.campaign(top)
				n.settle()
				n.crash(top)
				n.resetCounts()
				n.campaign(tt.initiator)
				n.settle()
				n.run(9)         // everyone waits, short of a follower's timeout
				n.run(1, second) // the winner's OK timeout
				n.wantLeader("after the election", second)
				got := [4]int{n.count(MsgElection), n.count(MsgOK), n.count(MsgCoordinator), n.total()}
				want := [4]int{tt.election, tt.ok, tt.coord, tt.all}
				if got != want {
					t.Fatalf("ELECTION, OK, COORDINATOR, total = %v, want %v", got, want)
				}
				t.Logf("n=%d %s initiates: %d messages (ELECTION %d, OK %d, COORDINATOR %d)",
					size, tt.name, got[3], got[0], got[1], got[2])
			})
		}
	}
}

// TestBullyChaos: after random crashes, recoveries, isolation and losses,
// the highest live process leads (see tnChaos).
func TestBullyChaos(t *testing.T) {
	tnChaos(t, 300, false, func(t testing.TB, id ID, ids []ID) Machine {
		return tnMust[*Bully](t)(NewBully(tnCfg(id, ids)))
	})
}

// TestBullyLeaderRelaysItsYield: 4 was down when 3 was elected; back, it
// announces itself to 3 only (a superpeer that knows only the peers
// registered with it, and the other claimer of its cluster). 3 yields and
// tells its followers so; they ask the members above them (an election),
// 4 answers, and all follow 4 well within a timeout (without the relay they
// went on following 3, whose heartbeats had stopped, until they timed
// out).
func TestBullyLeaderRelaysItsYield(t *testing.T) {
	ids := tnIDs(5)
	n := tnBully(t, ids)
	n.crash("4")
	n.campaign("0")
	n.settle()
	n.run(12) // the election skips 4 after a timeout
	n.wantLeader("4 down", "3", "0", "1", "2", "3")
	n.restart("4", tnMust[*Bully](t)(NewBully(tnCfg("4", ids))))
	n.deliver(Message{Type: MsgCoordinator, From: "4", To: "3", Leader: "4"})
	n.settle()
	n.run(3) // less than a timeout (10 ticks)
	n.wantLeader("4 back", "4")
}
