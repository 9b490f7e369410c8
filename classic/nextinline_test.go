package classic

import (
	"errors"
	"slices"
	"testing"
)

func TestNewNextInLineValidates(t *testing.T) {
	peers := tnSplit("a b c")
	tests := []struct {
		name    string
		cfg     Config
		listLen int
		want    error
	}{
		{"ID not a peer", Config{ID: "x", Peers: peers}, 0, ErrBadID},
		{"negative list length", Config{ID: "a", Peers: peers}, -1, ErrBadOption},
		{"bad ticks", Config{ID: "a", Peers: peers, TimeoutTicks: -1}, 0, ErrBadTicks},
		{"all others", Config{ID: "a", Peers: peers}, 0, nil},
		{"two", Config{ID: "a", Peers: peers}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewNextInLine(tt.cfg, tt.listLen)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if tt.want == nil && m.FailoverList() != nil {
				t.Fatalf("a new machine knows the list %v, want none", m.FailoverList())
			}
		})
	}
}

// nilAnnounce starts a next-in-line cluster with leader top and lets one
// heartbeat through, so that every follower heard the leader on the same
// tick and holds its failover list.
func nilAnnounce(t *testing.T, n *tnet, top ID) {
	t.Helper()
	n.campaign(top)
	n.settle()
	n.run(2) // HeartbeatTicks: one heartbeat, delivered
	n.wantLeader(string(top)+" leads", top)
}

// wantList asserts the failover list every live process holds.
func wantList(t *testing.T, n *tnet, step string, want []ID) {
	t.Helper()
	for _, id := range n.live() {
		if got := n.nodes[id].(*NextInLine).FailoverList(); !slices.Equal(got, want) {
			t.Fatalf("%s: %s holds the failover list %v, want %v", step, id, got, want)
		}
	}
}

// TestNextInLineWalkthrough: leader 7 publishes the list [6 5 4 3 2 1 0].
// When 7 crashes, 6 takes over directly, with no ELECTION at all. When 6
// crashes too, 7 (first on 6's list) is dead, so 5, second, takes over one
// TimeoutTicks later. Finally 7 recovers and bullies its way back.
func TestNextInLineWalkthrough(t *testing.T) {
	const T = 10
	ids := tnIDs(8)
	n := tnNextInLine(t, ids, 0)
	nilAnnounce(t, n, "7")
	wantList(t, n, "7 published", tnSplit("6 5 4 3 2 1 0"))

	// 7 crashes; every follower misses its heartbeats for T ticks.
	n.crash("7")
	n.resetCounts()
	n.run(T - 1)
	n.wantLeader("before the timeout", "7", n.live()...)
	n.tick()
	n.wantState("6 is first in line: takes over at once", "6", Leader, "6")
	n.wantState("5 waits its turn", "5", Candidate, None)
	n.settle()
	n.wantLeader("6 took over", "6")
	wantList(t, n, "6 published", tnSplit("7 5 4 3 2 1 0"))
	if n.count(MsgElection)+n.count(MsgOK) != 0 || n.count(MsgCoordinator) != 7 {
		t.Fatalf("failover to 6: %d ELECTION, %d OK, %d COORDINATOR; want 0, 0, 7",
			n.count(MsgElection), n.count(MsgOK), n.count(MsgCoordinator))
	}
	n.run(3 * T)
	if n.count(MsgCoordinator) != 7 {
		t.Fatalf("%d COORDINATOR after the failover, want still 7: nobody later in line announces", n.count(MsgCoordinator))
	}

	// 6 crashes; 7, first on 6's list, is dead; 5 waits one slot, then
	// takes over.
	// The last of those 3T ticks carried 6's heartbeat (every 2 ticks).
	n.crash("6")
	n.resetCounts()
	n.run(T)
	n.wantState("5 waits one slot", "5", Candidate, None)
	n.run(T - 1)
	n.wantState("5 still waits", "5", Candidate, None)
	n.run(1)
	n.wantLeader("5 took over after its delay", "5")
	if n.count(MsgElection)+n.count(MsgOK) != 0 || n.count(MsgCoordinator) != 7 {
		t.Fatalf("failover to 5: %d ELECTION, %d OK, %d COORDINATOR; want 0, 0, 7",
			n.count(MsgElection), n.count(MsgOK), n.count(MsgCoordinator))
	}

	// 7 recovers and campaigns: a bully election, which it wins at once.
	n.restart("7", tnMust[*NextInLine](t)(NewNextInLine(tnCfg("7", ids), 0)))
	n.campaign("7")
	n.settle()
	n.wantLeader("7 is back", "7")
	wantList(t, n, "7 published again", tnSplit("6 5 4 3 2 1 0"))
}

// TestNextInLineWholeListDead: the list holds only 6, 5 and 4. With 7 and
// the whole list dead, the others wait 3·T after noticing, then run a full
// bully election, which 3 wins.
func TestNextInLineWholeListDead(t *testing.T) {
	const T = 10
	n := tnNextInLine(t, tnIDs(8), 3)
	nilAnnounce(t, n, "7")
	wantList(t, n, "7 published", tnSplit("6 5 4"))
	for _, id := range tnSplit("7 6 5 4") {
		n.crash(id)
	}
	n.resetCounts()
	n.run(T)
	for _, id := range n.live() {
		n.wantState("noticed", id, Candidate, None)
	}
	n.run(3*T - 1)
	if n.total() != 0 {
		t.Fatalf("%d messages while waiting for the list, want 0", n.total())
	}
	n.run(1)
	if n.count(MsgElection) == 0 {
		t.Fatalf("no bully election after the list's slots passed")
	}
	n.run(T)
	n.wantLeader("full election", "3")
}

// TestNextInLineWithoutList: a cluster that never had a leader knows no
// list, so its processes fall back to a bully election on their timeout.
func TestNextInLineWithoutList(t *testing.T) {
	n := tnNextInLine(t, tnIDs(4), 0)
	n.run(10)
	if n.count(MsgElection) == 0 {
		t.Fatalf("no election after the timeout")
	}
	n.run(10)
	n.wantLeader("bully fallback", "3")
	wantList(t, n, "3 published", tnSplit("2 1 0"))
}

// TestNextInLineChaos: after random crashes, recoveries, isolation and
// losses, the highest live process leads (see tnChaos). The failover list is
// two long, so both failover and full elections happen.
func TestNextInLineChaos(t *testing.T) {
	tnChaos(t, 300, false, func(t testing.TB, id ID, ids []ID) Machine {
		return tnMust[*NextInLine](t)(NewNextInLine(tnCfg(id, ids), 2))
	})
}
