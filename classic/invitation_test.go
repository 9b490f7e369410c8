package classic

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// invNet builds an invitation cluster. The rank is h2lowestID (the smaller
// ID wins a tie between equal-sized groups), so that {1,2} is led by 1, {3,4}
// by 3, and the two merge under 1.
func invNet(t *testing.T, peers []ID, seed uint64) *h2net {
	t.Helper()
	return newH2Net(t, peers, func(id ID) Machine {
		m, err := NewInvitation(Config{
			ID: id, Peers: peers, Rank: h2lowestID{},
			Rand:           rand.New(rand.NewPCG(seed, uint64(len(id))+uint64(id[0]))),
			HeartbeatTicks: 1, TimeoutTicks: 4,
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

func invMembers(n *h2net, id ID) []ID { return n.nodes[id].(*Invitation).Members() }

// TestInvitationWalkthrough drives the merge of {1,2} and {3,4} by hand,
// with Campaign (an invitation round) and no ticks, and asserts every message.
func TestInvitationWalkthrough(t *testing.T) {
	n := invNet(t, h2ids("1 2 3 4"), 1)
	for _, id := range h2ids("1 2 3 4") {
		if st := n.state(id); st.Role != Leader || st.Leader != id {
			t.Fatalf("%s starts as %v of %s, want leader of {%s}", id, st.Role, st.Leader, id)
		}
	}
	n.partition(h2ids("1 2"), h2ids("3 4"))

	// 1 invites 2 (its invitations to 3 and 4 are lost in the partition).
	// Equal sizes, 1 outranks 2: 2 yields its group {2}; 1 tells 2 READY.
	mark := len(n.log)
	n.campaign("1")
	want := []string{
		"INVITE 1→2 ids=[1]",
		"ACCEPT 2→1 leader=2 ids=[2]",
		"READY 1→2 leader=1 ids=[1 2]",
	}
	h2wantLog(t, "{1} meets {2}", n.log[mark:], want)

	mark = len(n.log)
	n.campaign("3")
	want = []string{
		"INVITE 3→4 ids=[3]",
		"ACCEPT 4→3 leader=4 ids=[4]",
		"READY 3→4 leader=3 ids=[3 4]",
	}
	h2wantLog(t, "{3} meets {4}", n.log[mark:], want)
	if got := invMembers(n, "1"); !slices.Equal(got, h2ids("1 2")) {
		t.Fatalf("1 leads %v, want [1 2]", got)
	}
	if got := invMembers(n, "3"); !slices.Equal(got, h2ids("3 4")) {
		t.Fatalf("3 leads %v, want [3 4]", got)
	}

	// The partition heals and the LOSING leader 3 happens to invite first.
	// 2 is a member and points 3 to its leader 1. 1 sees two groups of two
	// and outranks 3, so it invites 3 back; 3 yields {3,4}; 1 tells only 3
	// and 4. 2 (already in the winning group) hears nothing.
	n.heal()
	mark = len(n.log)
	n.campaign("3")
	want = []string{
		"INVITE 3→1 ids=[3 4]",
		"INVITE 3→2 ids=[3 4]",
		"INVITE 1→3 ids=[1 2]",
		"ACCEPT 2→3 leader=1",
		"ACCEPT 3→1 leader=3 ids=[3 4]",
		"READY 1→3 leader=1 ids=[1 2 3 4]",
		"READY 1→4 leader=1 ids=[1 2 3 4]",
	}
	h2wantLog(t, "{1,2} meets {3,4}", n.log[mark:], want)
	if !n.agree("1") {
		t.Fatalf("not everyone follows 1: %s", n.states())
	}
	if got := invMembers(n, "1"); !slices.Equal(got, h2ids("1 2 3 4")) {
		t.Fatalf("1 leads %v, want [1 2 3 4]", got)
	}

	// From now on 1 heartbeats all three; nothing else happens.
	mark = n.mark()
	n.run(20)
	for _, m := range n.since(mark, 0) {
		if m.Type != MsgHeartbeat {
			t.Fatalf("unexpected %s in a merged, quiet group", h2fmt(m))
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
		n := invNet(t, h2ids("1 2 3 4"), seed)
		n.partition(h2ids("1 2"), h2ids("3 4"))
		n.runUntil(100, "two groups", func() bool {
			return slices.Equal(invMembers(n, "1"), h2ids("1 2")) && slices.Equal(invMembers(n, "3"), h2ids("3 4")) &&
				n.state("2").Leader == "1" && n.state("4").Leader == "3"
		})
		n.heal()
		mark := n.mark()
		n.runUntil(100, "merged under 1", func() bool { return n.agree("1") })
		readies := n.since(mark, MsgReady)
		if got := h2tos(readies); !slices.Equal(got, h2ids("3 4")) {
			t.Fatalf("seed %d: READY went to %v, want exactly [3 4]:\n%s", seed, got, h2fmts(readies))
		}
		for _, m := range readies {
			if m.From != "1" || m.Leader != "1" || !slices.Equal(m.IDs, h2ids("1 2 3 4")) {
				t.Fatalf("seed %d: bad READY %s", seed, h2fmt(m))
			}
		}
		if got := invMembers(n, "1"); !slices.Equal(got, h2ids("1 2 3 4")) {
			t.Fatalf("seed %d: 1 leads %v, want [1 2 3 4]", seed, got)
		}
	}
}

// TestInvitationLargerGroupWins: a group of three led by the low-ranked 9
// absorbs the singleton 1 although 1 outranks 9, because it is larger.
func TestInvitationLargerGroupWins(t *testing.T) {
	n := invNet(t, h2ids("1 7 8 9"), 3)
	n.partition(h2ids("1"), h2ids("7 8 9"))
	n.runUntil(100, "{7,8,9} under 7", func() bool { return slices.Equal(invMembers(n, "7"), h2ids("7 8 9")) })
	n.heal()
	mark := n.mark()
	n.runUntil(100, "merged under 7", func() bool { return n.agree("7") })
	if got := h2tos(n.since(mark, MsgReady)); !slices.Equal(got, h2ids("1")) {
		t.Fatalf("READY went to %v, want only the smaller group [1]", got)
	}
}

// TestInvitationLeaderCrash: when the leader stops heartbeating, each member
// becomes the leader of its own singleton group, and the groups then merge
// again under one live leader.
func TestInvitationLeaderCrash(t *testing.T) {
	peers := h2ids("1 2 3 4 5")
	n := invNet(t, peers, 7)
	n.runUntil(200, "one group", func() bool { return len(invMembers(n, "1")) == 5 && n.agree("1") })
	n.crash("1")
	n.runUntil(10, "singletons", func() bool {
		for _, id := range h2ids("2 3 4 5") {
			if st := n.state(id); st.Role != Leader || st.Leader != id || !slices.Equal(invMembers(n, id), []ID{id}) {
				return false
			}
		}
		return true
	})
	n.runUntil(200, "one live leader", func() bool {
		ls := n.leaders()
		return len(ls) == 1 && ls[0] != "1" && len(invMembers(n, ls[0])) == 4 && n.agree(ls[0])
	})
}

func TestNewInvitationValidation(t *testing.T) {
	if _, err := NewInvitation(Config{ID: "x", Peers: h2ids("1 2")}); !errors.Is(err, ErrBadID) {
		t.Errorf("ID outside Peers: err = %v, want ErrBadID", err)
	}
	if _, err := NewInvitation(Config{ID: "1", Peers: h2ids("1 2"), HeartbeatTicks: 5, TimeoutTicks: 2}); !errors.Is(err, ErrBadTicks) {
		t.Errorf("timeout below heartbeat: err = %v, want ErrBadTicks", err)
	}
}

// h2wantLog compares delivered messages with their expected renderings.
func h2wantLog(t *testing.T, what string, got []Message, want []string) {
	t.Helper()
	var g []string
	for _, m := range got {
		g = append(g, h2fmt(m))
	}
	if !slices.Equal(g, want) {
		t.Fatalf("%s: delivered\n%s\nwant\n  %v", what, h2fmts(got), want)
	}
}
