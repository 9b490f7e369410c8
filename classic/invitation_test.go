package classic

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// invNet builds an invitation cluster. The rank is tnLowestID (the smaller
// ID wins a tie between equal-sized groups), so that {1,2} is led by 1, {3,4}
// by 3, and the two merge under 1.
func invNet(t *testing.T, peers []ID, seed uint64) *tnet {
	t.Helper()
	return newTnet(t, peers, func(id ID) Machine {
		return tnMust[*Invitation](t)(NewInvitation(Config{
			ID: id, Peers: peers, Rank: tnLowestID{},
			Rand:           rand.New(rand.NewPCG(seed, uint64(len(id))+uint64(id[0]))),
			HeartbeatTicks: 1, TimeoutTicks: 4,
		}))
	})
}

func invMembers(n *tnet, id ID) []ID { return n.nodes[id].(*Invitation).Members() }

// TestInvitationWalkthrough drives the merge of {1,2} and {3,4} by hand,
// with Campaign (an invitation round) and no ticks, and asserts every message.
func TestInvitationWalkthrough(t *testing.T) {
	n := invNet(t, tnSplit("1 2 3 4"), 1)
	for _, id := range tnSplit("1 2 3 4") {
		if st := n.state(id); st.Role != Leader || st.Leader != id {
			t.Fatalf("%s starts as %v of %s, want leader of {%s}", id, st.Role, st.Leader, id)
		}
	}
	n.partition(tnSplit("1 2"), tnSplit("3 4"))

	// 1 invites 2 (its invitations to 3 and 4 are lost in the partition).
	// Equal sizes, 1 outranks 2: 2 yields its group {2}; 1 tells 2 READY.
	mark := len(n.log)
	n.campaign("1")
	n.settle()
	want := []string{
		"INVITE 1→2 ids=[1]",
		"ACCEPT 2→1 leader=2 ids=[2]",
		"READY 1→2 leader=1 ids=[1 2]",
	}
	tnWantLog(t, "{1} meets {2}", n.log[mark:], want)

	mark = len(n.log)
	n.campaign("3")
	n.settle()
	want = []string{
		"INVITE 3→4 ids=[3]",
		"ACCEPT 4→3 leader=4 ids=[4]",
		"READY 3→4 leader=3 ids=[3 4]",
	}
	tnWantLog(t, "{3} meets {4}", n.log[mark:], want)
	if got := invMembers(n, "1"); !slices.Equal(got, tnSplit("1 2")) {
		t.Fatalf("1 leads %v, want [1 2]", got)
	}
	if got := invMembers(n, "3"); !slices.Equal(got, tnSplit("3 4")) {
		t.Fatalf("3 leads %v, want [3 4]", got)
	}

	// The partition heals and the LOSING leader 3 happens to invite first.
	// 2 is a member and points 3 to its leader 1. 1 sees two groups of two
	// and outranks 3, so it invites 3 back; 3 yields {3,4}; 1 tells only 3
	// and 4. 2 (already in the winning group) hears nothing.
	n.heal()
	mark = len(n.log)
	n.campaign("3")
	n.settle()
	want = []string{
		"INVITE 3→1 ids=[3 4]",
		"INVITE 3→2 ids=[3 4]",
		"INVITE 1→3 ids=[1 2]",
		"ACCEPT 2→3 leader=1",
		"ACCEPT 3→1 leader=3 ids=[3 4]",
		"READY 1→3 leader=1 ids=[1 2 3 4]",
		"READY 1→4 leader=1 ids=[1 2 3 4]",
	}
	tnWantLog(t, "{1,2} meets {3,4}", n.log[mark:], want)
	if !n.agree("1") {
		t.Fatalf("not everyone follows 1: %s", n.states())
	}
	if got := invMembers(n, "1"); !slices.Equal(got, tnSplit("1 2 3 4")) {
		t.Fatalf("1 leads %v, want [1 2 3 4]", got)
	}

	// From now on 1 heartbeats all three; nothing else happens.
	mark = n.mark()
	n.run(20)
	for _, m := range n.since(mark, 0) {
		if m.Type != MsgHeartbeat {
			t.Fatalf("unexpected %s in a merged, quiet group", tnFmtLong(m))
		}
	}
	if !n.agree("1") {
		t.Fatalf("leadership changed: %s", n.states())
	}
}

// TestInvitationPartitionHeals runs the same story on the clock, with
// randomised invitation rounds, for several seeds: two sides form {1,2}
// under 1 and {3,4} under 3; after the heal they merge under 1 and only
// the members of the losing group, 3 and 4, receive READY.
func TestInvitationPartitionHeals(t *testing.T) {
	for seed := range uint64(20) {
		n := invNet(t, tnSplit("1 2 3 4"), seed)
		n.partition(tnSplit("1 2"), tnSplit("3 4"))
		n.runUntil(100, "two groups", func() bool {
			return slices.Equal(invMembers(n, "1"), tnSplit("1 2")) && slices.Equal(invMembers(n, "3"), tnSplit("3 4")) &&
				n.state("2").Leader == "1" && n.state("4").Leader == "3"
		})
		n.heal()
		mark := n.mark()
		n.runUntil(100, "merged under 1", func() bool { return n.agree("1") })
		readies := n.since(mark, MsgReady)
		if got := tnTos(readies); !slices.Equal(got, tnSplit("3 4")) {
			t.Fatalf("seed %d: READY went to %v, want exactly [3 4]:\n%s", seed, got, tnFmtLongs(readies))
		}
		for _, m := range readies {
			if m.From != "1" || m.Leader != "1" || !slices.Equal(m.IDs, tnSplit("1 2 3 4")) {
				t.Fatalf("seed %d: bad READY %s", seed, tnFmtLong(m))
			}
		}
		if got := invMembers(n, "1"); !slices.Equal(got, tnSplit("1 2 3 4")) {
			t.Fatalf("seed %d: 1 leads %v, want [1 2 3 4]", seed, got)
		}
	}
}

// TestInvitationLargerGroupWins: a group of three led by the low-ranked 9
// absorbs the singleton 1 although 1 outranks 9, because it is larger.
func TestInvitationLargerGroupWins(t *testing.T) {
	n := invNet(t, tnSplit("1 7 8 9"), 3)
	n.partition(tnSplit("1"), tnSplit("7 8 9"))
	n.runUntil(100, "{7,8,9} under 7", func() bool { return slices.Equal(invMembers(n, "7"), tnSplit("7 8 9")) })
	n.heal()
	mark := n.mark()
	n.runUntil(100, "merged under 7", func() bool { return n.agree("7") })
	if got := tnTos(n.since(mark, MsgReady)); !slices.Equal(got, tnSplit("1")) {
		t.Fatalf("READY went to %v, want only the smaller group [1]", got)
	}
}

// TestInvitationLeaderCrash: when the leader stops heartbeating, each member
// becomes the leader of its own singleton group, and the groups then merge
// again under one live leader.
func TestInvitationLeaderCrash(t *testing.T) {
	peers := tnSplit("1 2 3 4 5")
	n := invNet(t, peers, 7)
	n.runUntil(200, "one group", func() bool { return len(invMembers(n, "1")) == 5 && n.agree("1") })
	n.crash("1")
	n.runUntil(10, "singletons", func() bool {
		for _, id := range tnSplit("2 3 4 5") {
			if st := n.state(id); st.Role != Leader || st.Leader != id || !slices.Equal(invMembers(n, id), []ID{id}) {
				return false
			}
		}
		return true
	})
	n.runUntil(200, "one live leader", func() bool {
		ls := n.followed()
		return len(ls) == 1 && ls[0] != "1" && len(invMembers(n, ls[0])) == 4 && n.agree(ls[0])
	})
}

func TestNewInvitationValidation(t *testing.T) {
	if _, err := NewInvitation(Config{ID: "x", Peers: tnSplit("1 2")}); !errors.Is(err, ErrBadID) {
		t.Errorf("ID outside Peers: err = %v, want ErrBadID", err)
	}
	if _, err := NewInvitation(Config{ID: "1", Peers: tnSplit("1 2"), HeartbeatTicks: 5, TimeoutTicks: 2}); !errors.Is(err, ErrBadTicks) {
		t.Errorf("timeout below heartbeat: err = %v, want ErrBadTicks", err)
	}
}

// TestInvitationReconfigureKeepsGroup: a change of members is no election.
// The group {1..5} under 1 loses 5 and gains 6 through Reconfigure: 1
// keeps leading, its followers keep following it (no INVITE, ACCEPT or
// READY among them), and the newcomer 6, a singleton, is invited at once
// and joins; a member that drops out of the leader's view and comes back
// stays in the group. Only a member whose leader left its configuration
// leaves its group.
func TestInvitationReconfigureKeepsGroup(t *testing.T) {
	all := tnSplit("1 2 3 4 5 6")
	n := invNet(t, all, 5)
	n.crash("6") // not started yet
	n.runUntil(200, "one group under 1", func() bool {
		return slices.Equal(invMembers(n, "1"), tnSplit("1 2 3 4 5")) && n.agree("1")
	})
	reconf := func(id ID, peers []ID) {
		t.Helper()
		if err := n.nodes[id].(Reconfigurer).Reconfigure(Config{
			ID: id, Peers: peers, Rank: tnLowestID{}, HeartbeatTicks: 1, TimeoutTicks: 4,
		}); err != nil {
			t.Fatalf("Reconfigure(%s): %v", id, err)
		}
		n.collect(id)
	}

	// 5 leaves the cluster (it left the membership view).
	n.crash("5")
	peers := tnSplit("1 2 3 4")
	for _, id := range peers {
		reconf(id, peers)
	}
	mark := n.mark()
	n.run(3)
	for _, m := range n.since(mark, 0) {
		if m.Type != MsgHeartbeat {
			t.Fatalf("a member left, and %s was sent; want heartbeats only", tnFmtLong(m))
		}
	}
	if got := invMembers(n, "1"); !slices.Equal(got, peers) || !n.agree("1") {
		t.Fatalf("after 5 left: 1 leads %v; states %s; want [1 2 3 4] under 1", got, n.states())
	}

	// 6 joins: a fresh machine, a singleton; the others learn of it.
	peers = tnSplit("1 2 3 4 6")
	n.restart("6", tnMust[*Invitation](t)(NewInvitation(Config{
		ID: "6", Peers: peers, Rank: tnLowestID{}, Rand: rand.New(rand.NewPCG(5, 6)), HeartbeatTicks: 1, TimeoutTicks: 4,
	})))
	mark = len(n.log)
	for _, id := range tnSplit("1 2 3 4") {
		reconf(id, peers)
	}
	n.settle()
	tnWantLog(t, "6 joins", n.log[mark:], []string{
		"INVITE 1→6 ids=[1 2 3 4]",
		"ACCEPT 6→1 leader=6 ids=[6]",
		"READY 1→6 leader=1 ids=[1 2 3 4 6]",
	})
	if got := invMembers(n, "1"); !slices.Equal(got, peers) || !n.agree("1") {
		t.Fatalf("after 6 joined: 1 leads %v; states %s; want [1 2 3 4 6] under 1", got, n.states())
	}

	// 3 drops out of the leader's view for 3 ticks, 1 short of its
	// timeout, and comes back (a membership view that flickers): 1 forgets
	// it, then invites it at once, and 3, which never stopped following 1,
	// answers with a pointer to 1 and is a member again; the invitation
	// from its leader, like a heartbeat, restarts its timeout. No one else
	// hears of it.
	reconf("1", tnSplit("1 2 4 6"))
	n.run(3)
	mark = len(n.log)
	reconf("1", peers)
	n.settle()
	tnWantLog(t, "3 back in view", n.log[mark:], []string{"INVITE 1→3 ids=[1 2 4 6]", "ACCEPT 3→1 leader=1"})
	n.run(1)
	if got := invMembers(n, "1"); !slices.Equal(got, peers) || !n.agree("1") {
		t.Fatalf("after 3 came back: 1 leads %v; states %s; want [1 2 3 4 6] under 1", got, n.states())
	}

	// The leader itself leaves the configuration of 2 and 3: they leave its
	// group at once (Campaign) rather than wait for a timeout.
	reconf("2", tnSplit("2 3 4 6"))
	if st := n.state("2"); st.Role != Leader || st.Leader != "2" {
		t.Fatalf("2, whose leader left its configuration, is %v of %s; want the leader of {2}", st.Role, st.Leader)
	}
}

func TestInvitationReconfigureValidation(t *testing.T) {
	iv := tnMust[*Invitation](t)(NewInvitation(Config{ID: "1", Peers: tnSplit("1 2")}))
	if err := iv.Reconfigure(Config{ID: "2", Peers: tnSplit("1 2")}); !errors.Is(err, ErrBadID) {
		t.Errorf("another ID: err = %v, want ErrBadID", err)
	}
	if err := iv.Reconfigure(Config{ID: "1", Peers: tnSplit("2 3")}); !errors.Is(err, ErrBadID) {
		t.Errorf("ID outside Peers: err = %v, want ErrBadID", err)
	}
	if err := iv.Reconfigure(Config{ID: "1", Peers: tnSplit("1 2 3"), HeartbeatTicks: 5, TimeoutTicks: 2}); !errors.Is(err, ErrBadTicks) {
		t.Errorf("timeout below heartbeat: err = %v, want ErrBadTicks", err)
	}
	if got := iv.cfg.Peers; !slices.Equal(got, tnSplit("1 2")) {
		t.Errorf("after failed Reconfigure, Peers = %v, want unchanged [1 2]", got)
	}
}

// TestInvitationUnreachableLeaderIsNoSignOfLife: a follower hears from its
// leader through any message (an INVITE restarts its timeout as a
// HEARTBEAT does), but the driver's notice that the leader could not be
// reached is no such message: the follower still leaves after the timeout.
func TestInvitationUnreachableLeaderIsNoSignOfLife(t *testing.T) {
	n := invNet(t, tnSplit("1 2"), 1)
	n.runUntil(50, "2 follows 1", func() bool { return n.agree("1") })
	n.crash("1")
	iv := n.nodes["2"].(*Invitation)
	for range 3 { // TimeoutTicks is 4
		n.tick("2")
		iv.Step(Message{Type: MsgUnreachable, From: "1", To: "2"})
	}
	n.tick("2")
	if st := n.state("2"); st.Role != Leader || st.Leader != "2" {
		t.Fatalf("2 is %v of %s four ticks after its leader went silent; want the leader of {2}", st.Role, st.Leader)
	}
}
