package classic

import (
	"errors"
	"slices"
	"testing"
)

func newStableMachine(t testing.TB, id ID, peers []ID) *Stable {
	t.Helper()
	return tnMust[*Stable](t)(NewStable(Config{ID: id, Peers: peers, HeartbeatTicks: 1, TimeoutTicks: 3}))
}

func stableNet(t *testing.T, peers []ID) *tnet {
	t.Helper()
	return newTnet(t, peers, func(id ID) Machine { return newStableMachine(t, id, peers) })
}

func stableOf(n *tnet, id ID) *Stable { return n.nodes[id].(*Stable) }

// TestStableNewcomerDoesNotDisplaceLeader: 1, 2, 3 elect 3. The higher 7
// joins (and even campaigns), yet 3 stays leader. When 3 crashes, 7 is
// elected.
func TestStableNewcomerDoesNotDisplaceLeader(t *testing.T) {
	peers := tnSplit("1 2 3 7")
	n := stableNet(t, peers)
	n.crash("7")
	n.runUntil(20, "led by 3", func() bool { return n.agree("3") })
	if got := stableOf(n, "3").Followers(); !slices.Equal(got, tnSplit("1 2")) {
		t.Fatalf("3's followers %v, want [1 2]", got)
	}

	// 7 comes up with no memory; it hears 3's heartbeat, asks everyone
	// (one member's word is not enough: see Stable's fresh), and follows 3.
	mark := n.mark()
	n.restart("7", newStableMachine(t, "7", peers))
	n.run(1)
	if st := n.state("7"); st.Leader != "3" || st.Role != Follower {
		t.Fatalf("newcomer 7: %v of %q, want follower of 3", st.Role, st.Leader)
	}
	// Even an explicit election by 7 only confirms 3: the votes name 3 alive.
	mark2 := n.mark()
	n.campaign("7")
	n.settle()
	n.run(100)
	if !n.agree("3") {
		t.Fatalf("3 was replaced: %s", n.states())
	}
	if c := n.since(mark, MsgCoordinator); len(c) != 0 {
		t.Fatalf("a live leader was challenged:\n%s", tnFmtLongs(c))
	}
	if v := n.since(mark2, MsgVote); len(v) != 3 {
		t.Fatalf("7's election got %d votes, want 3", len(v))
	} else {
		for _, m := range v {
			if m.Leader != "3" {
				t.Fatalf("vote %s does not name the live leader 3", tnFmtLong(m))
			}
		}
	}
	if got := stableOf(n, "3").Followers(); !slices.Equal(got, tnSplit("1 2 7")) {
		t.Fatalf("3's followers %v, want [1 2 7]", got)
	}

	// 3 crashes: everyone times out after TimeoutTicks, counts a flap for 3
	// and elects the best live process, 7.
	n.crash("3")
	n.runUntil(20, "led by 7", func() bool { return n.agree("7") })
	for _, id := range tnSplit("1 2 7") {
		if f := stableOf(n, id).Flaps("3"); f != 1 {
			t.Errorf("%s counts %d flaps for 3, want 1", id, f)
		}
	}
	if st := n.state("7"); st.Term != 2 {
		t.Errorf("7 leads term %d, want 2", st.Term)
	}
}

// TestStableFlappingNodeStopsWinning crashes the current leader and brings
// it back, over and over, with MaxFlaps 2. The highest-ranked 7 wins until
// it has lost the leadership twice; from then on it is passed over while a
// process with fewer flaps is alive, and so is 3.
//
//	leader  lost     flaps after            next leader (live, flaps<2, best rank)
//	7       7        7:1                    3
//	3       3        7:1 3:1                7
//	7       7        7:2 3:1                3
//	3       3        7:2 3:2                2 (7 and 3 passed over)
//	2       2        7:2 3:2 2:1            1 (7 and 3 passed over)
//	1       1        7:2 3:2 2:1 1:1        2
func TestStableFlappingNodeStopsWinning(t *testing.T) {
	peers := tnSplit("1 2 3 7")
	n := stableNet(t, peers)
	n.runUntil(20, "a leader", func() bool { ls := n.followed(); return len(ls) == 1 && ls[0] != None && n.agree(ls[0]) })
	got := []ID{n.followed()[0]}
	for range 6 {
		l := got[len(got)-1]
		n.crash(l)
		n.runUntil(30, "a new leader", func() bool {
			ls := n.followed()
			return len(ls) == 1 && ls[0] != None && ls[0] != l && n.agree(ls[0])
		})
		got = append(got, n.followed()[0])
		n.restart(l, newStableMachine(t, l, peers))
		n.runUntil(30, "the restarted node following", func() bool { return n.agree(got[len(got)-1]) })
	}
	if want := tnSplit("7 3 7 3 2 1 2"); !slices.Equal(got, want) {
		t.Fatalf("leaders %v, want %v", got, want)
	}
	// Even processes that restarted with no memory learned the counts.
	for _, id := range peers {
		if f := stableOf(n, id).Flaps("7"); f != 2 {
			t.Errorf("%s counts %d flaps for 7, want 2", id, f)
		}
	}
}

// TestStableQuietUnderLiveLeader: with a live leader nothing but heartbeats
// and their acknowledgements is sent.
func TestStableQuietUnderLiveLeader(t *testing.T) {
	n := stableNet(t, tnSplit("1 2 3 4 5"))
	n.runUntil(20, "led by 5", func() bool { return n.agree("5") })
	mark := n.mark()
	n.run(100)
	hb, acks := len(n.since(mark, MsgHeartbeat)), len(n.since(mark, MsgHeartbeatAck))
	if hb != 100*4 || acks != hb || len(n.since(mark, 0)) != hb+acks {
		t.Fatalf("in 100 ticks: %d heartbeats, %d acks, %d messages in all; want 400, 400, 800",
			hb, acks, len(n.since(mark, 0)))
	}
}

// TestStablePartitionHeal: a minority cut off from leader 5 elects its own
// leader; after the heal one leader remains: 5, whose heartbeats a majority
// acknowledges. (Before issue 19 the minority's higher term won; but a
// higher term is what one hostile member can claim in one message, and a
// live leader is never replaced, so the leader without a majority yields.)
func TestStablePartitionHeal(t *testing.T) {
	n := stableNet(t, tnSplit("1 2 3 4 5"))
	n.runUntil(20, "led by 5", func() bool { return n.agree("5") })
	n.partition(tnSplit("1 2"), tnSplit("3 4 5"))
	n.run(20)
	if st := n.state("2"); st.Leader != "2" || st.Role != Leader {
		t.Fatalf("minority: 2 is %v of %q, want its leader", st.Role, st.Leader)
	}
	if st := n.state("5"); st.Role != Leader {
		t.Fatalf("majority: 5 is %v, want still leader", st.Role)
	}
	n.heal()
	n.runUntil(20, "one leader", func() bool { ls := n.followed(); return len(ls) == 1 && n.agree(ls[0]) })
	if ls := n.followed(); ls[0] != "5" {
		t.Fatalf("leader after heal %v, want 5 (a majority acknowledges it)", ls)
	}
}

func TestNewStableValidation(t *testing.T) {
	if _, err := NewStable(Config{ID: "1", Peers: tnSplit("1 2")}, WithMaxFlaps(0)); !errors.Is(err, ErrBadOption) {
		t.Errorf("WithMaxFlaps(0): err = %v, want ErrBadOption", err)
	}
	if _, err := NewStable(Config{ID: "1", Peers: tnSplit("1 2"), HeartbeatTicks: 3, TimeoutTicks: 3}); !errors.Is(err, ErrBadTicks) {
		t.Errorf("timeout = heartbeat: err = %v, want ErrBadTicks", err)
	}
	if _, err := NewStable(Config{ID: "", Peers: tnSplit("1 2")}); !errors.Is(err, ErrBadID) {
		t.Errorf("empty ID: err = %v, want ErrBadID", err)
	}
	s, err := NewStable(Config{ID: "1", Peers: tnSplit("1")})
	if err != nil {
		t.Fatal(err)
	}
	s.Campaign()
	if st := s.Ready().State; st.Role != Leader || st.Leader != "1" {
		t.Errorf("lone process after Campaign: %+v, want leader of itself", st)
	}
}
