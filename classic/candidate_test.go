package classic

import (
	"errors"
	"slices"
	"testing"
)

// newCand makes member id of peers with candidates 5, 6, 7 (HighestID rank,
// heartbeat every tick, timeout 3 ticks).
func newCand(t testing.TB, id ID, peers []ID) *CandidateElection {
	t.Helper()
	return tnMust[*CandidateElection](t)(NewCandidate(Config{ID: id, Peers: peers, HeartbeatTicks: 1, TimeoutTicks: 3}, tnSplit("5 6 7")))
}

// candNet builds members 1..7 with candidates 5, 6, 7 (HighestID rank,
// heartbeat every tick, timeout 3 ticks) and runs it until everyone follows 7.
func candNet(t *testing.T) *tnet {
	t.Helper()
	peers := tnSplit("1 2 3 4 5 6 7")
	n := newTnet(t, peers, func(id ID) Machine { return newCand(t, id, peers) })
	n.runUntil(50, "following 7", func() bool { return n.agree("7") })
	return n
}

// leaderSilent runs the clocks of the live processes others for two
// heartbeat periods (less than a timeout) after the leader crashed: they have not
// noticed yet, but they have missed its heartbeats, as they have in any
// real run by the time one of them has noticed, waited its δ and queried
// (an heir's announcement counts only then: see CandidateElection.missed).
func leaderSilent(n *tnet, others string) {
	n.run(4, tnSplit(others)...)
}

func TestCandidateDelayByRankPosition(t *testing.T) {
	peers := tnSplit("1 2 3 4 5 6 7")
	want := map[ID]int{"7": 3, "6": 6, "5": 9, "4": 12, "3": 15, "2": 18, "1": 21}
	for id, d := range want {
		m := newCand(t, id, peers)
		if m.Delay() != d {
			t.Errorf("δ(%s) = %d, want %d", id, m.Delay(), d)
		}
	}
}

// TestCandidateWalkthrough: candidates {5,6,7}, 7 dies, ordinary 2 notices,
// waits its δ, queries the candidates, hears from 5 and 6 only and announces 6.
func TestCandidateWalkthrough(t *testing.T) {
	n := candNet(t)
	n.crash("7")
	leaderSilent(n, "1 3 4 5 6")

	// 2 notices (Campaign). Only 2's clock runs here, as if the others had
	// not yet noticed; δ(2) = (5+1)·3 = 18 ticks.
	n.campaign("2")
	n.settle()
	mark := n.mark()
	for range 17 {
		n.run(1, "2")
	}
	if got := n.since(mark, 0); len(got) != 0 {
		t.Fatalf("2 sent before its δ ran out:\n%s", tnFmtLongs(got))
	}
	if st := n.state("2"); st.Role != Candidate {
		t.Fatalf("2 during δ: role %v, want candidate", st.Role)
	}

	// Tick 18: QUERY to every candidate; 5 and 6 answer, 7 is dead.
	n.run(1, "2")
	queries := n.since(mark, MsgQuery)
	if got, want := tnTos(queries), tnSplit("5 6 7"); !slices.Equal(got, want) {
		t.Fatalf("2 queried %v, want %v", got, want)
	}
	replies := n.since(mark, MsgQueryReply)
	if got, want := tnFroms(replies), tnSplit("5 6"); !slices.Equal(got, want) {
		t.Fatalf("replies from %v, want %v", got, want)
	}
	if c := n.since(mark, MsgCoordinator); len(c) != 0 {
		t.Fatalf("2 announced before its query timeout although 7 never answered:\n%s", tnFmtLongs(c))
	}

	// TimeoutTicks later 2 gives up on 7 and announces 6 to everyone.
	n.run(1, "2")
	n.run(1, "2")
	if c := n.since(mark, MsgCoordinator); len(c) != 0 {
		t.Fatalf("2 announced early:\n%s", tnFmtLongs(c))
	}
	n.run(1, "2")
	coords := n.since(mark, MsgCoordinator)
	if got, want := tnTos(coords), tnSplit("1 3 4 5 6 7"); !slices.Equal(got, want) {
		t.Fatalf("COORDINATOR sent to %v, want %v", got, want)
	}
	for _, m := range coords {
		if m.From != "2" || m.Leader != "6" {
			t.Fatalf("bad announcement %s, want 2 announcing 6", tnFmtLong(m))
		}
	}
	if !n.agree("6") {
		t.Fatalf("not everyone follows 6: %s", n.states())
	}

	// 6 now heartbeats; nobody starts another election.
	mark = n.mark()
	n.run(30)
	if q := n.since(mark, MsgQuery); len(q) != 0 {
		t.Fatalf("an election started under a live leader 6:\n%s", tnFmtLongs(q[:1]))
	}
	if hb := n.since(mark, MsgHeartbeat); len(hb) != 30*6 {
		t.Fatalf("6 sent %d heartbeats in 30 ticks, want %d", len(hb), 30*6)
	}
	if !n.agree("6") {
		t.Fatalf("leadership changed: %s", n.states())
	}
}

// TestCandidateTwoOrdinariesNoticeTogether: 1 and 2 notice 7's failure in the
// same tick. 2 (δ 18) queries first and announces at tick 21; 1 (δ 21)
// starts querying in that very tick, receives 2's COORDINATOR and stands
// down. There is exactly one announcement.
func TestCandidateTwoOrdinariesNoticeTogether(t *testing.T) {
	n := candNet(t)
	n.crash("7")
	leaderSilent(n, "3 4 5 6")
	n.campaign("1")
	n.settle()
	n.campaign("2")
	n.settle()
	mark := n.mark()
	for range 40 {
		n.run(1, "1", "2")
	}
	coords := n.since(mark, MsgCoordinator)
	if len(coords) != 6 {
		t.Fatalf("got %d COORDINATOR messages, want one announcement to 6 members:\n%s", len(coords), tnFmtLongs(coords))
	}
	for _, m := range coords {
		if m.From != "2" || m.Leader != "6" {
			t.Fatalf("bad announcement %s, want only 2 announcing 6", tnFmtLong(m))
		}
	}
	if !n.agree("6") {
		t.Fatalf("not everyone follows 6: %s", n.states())
	}
}

// TestCandidateEveryoneNotices: the leader dies and every process times out
// in the same tick. The highest-priority live process, candidate 6, has the
// smallest δ and announces itself; nobody announces anything else.
func TestCandidateEveryoneNotices(t *testing.T) {
	n := candNet(t)
	n.crash("7")
	mark := n.mark()
	n.runUntil(100, "following 6", func() bool { return n.agree("6") })
	n.run(50)
	coords := n.since(mark, MsgCoordinator)
	announcers := map[ID]bool{}
	for _, m := range coords {
		if m.Leader != "6" {
			t.Fatalf("announcement of %s, want only 6:\n%s", m.Leader, tnFmtLongs(coords))
		}
		announcers[m.From] = true
	}
	if len(announcers) != 1 || !announcers["6"] {
		t.Fatalf("announcers %v, want only 6", announcers)
	}
	if !n.agree("6") {
		t.Fatalf("not stable under 6: %s", n.states())
	}
}

// TestCandidateNoLiveCandidate: with every candidate dead nobody is
// announced and the ordinaries keep retrying (and keep querying).
func TestCandidateNoLiveCandidate(t *testing.T) {
	n := candNet(t)
	for _, id := range tnSplit("5 6 7") {
		n.crash(id)
	}
	mark := n.mark()
	n.run(200)
	if c := n.since(mark, MsgCoordinator); len(c) != 0 {
		t.Fatalf("announced a dead candidate:\n%s", tnFmtLongs(c))
	}
	if q := n.since(mark, MsgQuery); len(q) == 0 {
		t.Fatal("nobody queried the candidates")
	}
	for _, id := range tnSplit("1 2 3 4") {
		if st := n.state(id); st.Leader != None && st.Leader != "7" {
			t.Fatalf("%s follows %s with no live candidate", id, st.Leader)
		}
	}
}

func TestNewCandidateValidation(t *testing.T) {
	peers := tnSplit("1 2 3")
	cases := []struct {
		name  string
		cfg   Config
		cands []ID
		want  error
	}{
		{"no ID", Config{Peers: peers}, tnSplit("3"), ErrBadID},
		{"ID not a peer", Config{ID: "9", Peers: peers}, tnSplit("3"), ErrBadID},
		{"duplicate peer", Config{ID: "1", Peers: tnSplit("1 2 2")}, tnSplit("2"), ErrBadID},
		{"negative ticks", Config{ID: "1", Peers: peers, TimeoutTicks: -1}, tnSplit("3"), ErrBadTicks},
		{"timeout not above heartbeat", Config{ID: "1", Peers: peers, HeartbeatTicks: 4, TimeoutTicks: 4}, tnSplit("3"), ErrBadTicks},
		{"no candidates", Config{ID: "1", Peers: peers}, nil, ErrBadCandidates},
		{"unknown candidate", Config{ID: "1", Peers: peers}, tnSplit("3 8"), ErrBadCandidates},
		{"duplicate candidate", Config{ID: "1", Peers: peers}, tnSplit("3 3"), ErrBadCandidates},
	}
	for _, tc := range cases {
		if _, err := NewCandidate(tc.cfg, tc.cands); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := NewCandidate(Config{ID: "1", Peers: peers}, tnSplit("2 3")); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

// TestCandidateRecoveredBetterCandidateTakesOver: 7 dies and 6 takes over;
// then 7 recovers with no memory and campaigns (as a restarted process does).
// While 7 waits its δ, 6's heartbeat arrives. A candidate never follows a
// candidate it outranks, so 7 does not stand down behind 6 (the old
// behaviour, which left 6 leading for ever while the better 7 was live): it
// announces itself at once, and everyone, 6 included, follows 7.
func TestCandidateRecoveredBetterCandidateTakesOver(t *testing.T) {
	peers := tnSplit("1 2 3 4 5 6 7")
	n := candNet(t)
	n.crash("7")
	n.runUntil(100, "following 6", func() bool { return n.agree("6") })

	// 7 recovers and campaigns: it waits δ(7) = 3 ticks, silent.
	n.restart("7", newCand(t, "7", peers))
	n.campaign("7")
	n.wantState("7 recovered", "7", Candidate, None)
	mark := n.mark()
	if got := n.since(mark, 0); len(got) != 0 {
		t.Fatalf("7 sent on Campaign, before its δ:\n%s", tnFmtLongs(got))
	}

	// One tick: 6 heartbeats; 7 hears the lesser leader during δ and takes
	// over without querying anyone.
	n.run(1)
	if q := n.since(mark, MsgQuery); len(q) != 0 {
		t.Fatalf("7 queried instead of taking over:\n%s", tnFmtLongs(q))
	}
	coords := n.since(mark, MsgCoordinator)
	if got, want := tnTos(coords), tnSplit("1 2 3 4 5 6"); !slices.Equal(got, want) {
		t.Fatalf("COORDINATOR sent to %v, want %v:\n%s", got, want, tnFmtLongs(coords))
	}
	for _, m := range coords {
		if m.From != "7" || m.Leader != "7" {
			t.Fatalf("bad announcement %s, want 7 announcing itself", tnFmtLong(m))
		}
	}
	n.wantLeader("after 7's take-over", "7")

	// Stable under 7: no further announcements or queries, 6 stays a
	// follower.
	mark = n.mark()
	n.run(30)
	if c := n.since(mark, MsgCoordinator); len(c) != 0 {
		t.Fatalf("announcement under a live leader 7:\n%s", tnFmtLongs(c[:1]))
	}
	if q := n.since(mark, MsgQuery); len(q) != 0 {
		t.Fatalf("an election started under a live leader 7:\n%s", tnFmtLongs(q[:1]))
	}
	n.wantLeader("30 ticks later", "7")
}

// TestCandidatePassedOverCandidateTakesOver: 7 dies; ordinary 2 queries the
// candidates but 6's QUERY_REPLY is lost, so 2 announces 5. 6 is live and
// outranks 5: on the COORDINATOR naming 5 it announces itself, and everyone
// ends up following 6, the best live candidate.
func TestCandidatePassedOverCandidateTakesOver(t *testing.T) {
	n := candNet(t)
	n.crash("7")
	leaderSilent(n, "1 3 4 5 6")
	n.campaign("2")
	n.settle()
	n.dropNext(func(m Message) bool { return m.Type == MsgQueryReply && m.From == "6" })
	mark := n.mark()
	for range 21 { // δ(2) = 18, then the query timeout of 3 ticks
		n.run(1, "2")
	}
	coords := n.since(mark, MsgCoordinator)
	var from2, from6 []Message
	for _, m := range coords {
		switch {
		case m.From == "2" && m.Leader == "5":
			from2 = append(from2, m)
		case m.From == "6" && m.Leader == "6":
			from6 = append(from6, m)
		default:
			t.Fatalf("unexpected announcement %s:\n%s", tnFmtLong(m), tnFmtLongs(coords))
		}
	}
	if got, want := tnTos(from2), tnSplit("1 3 4 5 6 7"); !slices.Equal(got, want) {
		t.Fatalf("2 announced 5 to %v, want %v:\n%s", got, want, tnFmtLongs(coords))
	}
	if got, want := tnTos(from6), tnSplit("1 2 3 4 5 7"); !slices.Equal(got, want) {
		t.Fatalf("6 announced itself to %v, want %v:\n%s", got, want, tnFmtLongs(coords))
	}
	n.wantLeader("after 6's take-over", "6")
	n.run(30)
	n.wantLeader("30 ticks later", "6")
}

// TestCandidateHeirAnnouncementOverALiveLeader: 1 has just heard its
// leader 7; an announcement by 3 naming 7's heir 6 is not followed (a
// hostile member, or a stale one, would otherwise take every member whose
// machine is fresh). Once 7 has been silent for two heartbeats, the same
// announcement by another member counts (as in the walkthroughs).
func TestCandidateHeirAnnouncementOverALiveLeader(t *testing.T) {
	n := candNet(t)
	n.wantState("before", "1", Follower, "7")
	n.deliver(Message{Type: MsgCoordinator, From: "3", To: "1", Leader: "6"})
	n.wantState("after the heir's announcement over a live leader", "1", Follower, "7")
	n.crash("7")
	leaderSilent(n, "1")
	n.deliver(Message{Type: MsgCoordinator, From: "2", To: "1", Leader: "6"})
	n.wantState("2's announcement once 7 was silent", "1", Follower, "6")
}
