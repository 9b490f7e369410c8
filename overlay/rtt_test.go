package overlay

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// rttDue pings a member without a sample at once, rttFirst times, in
// every round until it has one; a member with a sample once in every
// rttEvery rounds of the ticker, once, and never in a round the change of
// members asked for; itself never; and rttMaxPeers at most a round.
func TestRTTDue(t *testing.T) {
	self := peer.ID("self")
	var members []peer.ID
	known := map[peer.ID]bool{}
	for i := range 48 {
		p := peer.ID(string(rune('a'+i%26)) + string(rune('A'+i/26)))
		members = append(members, p)
		known[p] = i >= 2 // the first two are new
	}
	members = append(members, self)
	isKnown := func(p peer.ID) bool { return known[p] }

	turns := map[peer.ID]int{}
	for round := 5; round < 5+2*rttEvery; round++ {
		due := rttDue(members, self, isKnown, true, round)
		if _, ok := due[self]; ok {
			t.Fatalf("round %d pings itself", round)
		}
		for _, p := range members[:2] {
			if due[p] != rttFirst {
				t.Errorf("round %d: new member %s pinged %d times, want %d", round, p, due[p], rttFirst)
			}
		}
		for p, c := range due {
			if known[p] {
				if c != rttAgain {
					t.Errorf("round %d: member %s pinged %d times, want %d", round, p, c, rttAgain)
				}
				turns[p]++
			}
		}
		if len(due) == len(members)-1 {
			t.Errorf("round %d pings every member", round)
		}
	}
	for _, p := range members[2:48] {
		if turns[p] != 2 {
			t.Errorf("member %s pinged in %d of %d rounds, want 2", p, turns[p], 2*rttEvery)
		}
	}

	// A round the change of members asked for: only the new members.
	due := rttDue(members, self, isKnown, false, 0)
	if len(due) != 2 || due[members[0]] != rttFirst || due[members[1]] != rttFirst {
		t.Errorf("a kicked round pings %v, want the two new members %d times each", due, rttFirst)
	}

	// Nothing known: rttMaxPeers at most.
	many := make([]peer.ID, 2*rttMaxPeers)
	for i := range many {
		many[i] = peer.ID([]byte{byte(i), byte(i >> 8), 'x'})
	}
	if due := rttDue(many, self, func(peer.ID) bool { return false }, true, 0); len(due) != rttMaxPeers {
		t.Errorf("%d new members: %d pinged, want %d", len(many), len(due), rttMaxPeers)
	}
}

// The table keeps the least of a peer's last rttKeep samples, whichever
// round they came from, and forgets a peer not sampled since the cutoff.
func TestRTTTableLeastOfLast(t *testing.T) {
	var tab rttTable
	p, q := peer.ID("p"), peer.ID("q")
	if _, ok := tab.get(p); ok {
		t.Fatal("a sample of a peer never pinged")
	}
	ms := time.Millisecond
	tab.record(p, 9*ms)
	tab.record(p, 4*ms) // the least
	tab.record(p, 7*ms)
	if d, _ := tab.get(p); d != 4*ms {
		t.Errorf("least of 9, 4, 7 ms = %v, want 4 ms", d)
	}
	for range rttKeep - 1 {
		tab.record(p, 6*ms)
	}
	if d, _ := tab.get(p); d != 6*ms { // 4 ms is older than the last rttKeep
		t.Errorf("least of the last %d samples = %v, want 6 ms", rttKeep, d)
	}
	tab.record(q, ms)
	tab.forget(time.Now().Add(time.Hour)) // every sample is before the cutoff
	if _, ok := tab.get(p); ok {
		t.Error("p kept after its last sample fell behind the cutoff")
	}
	if _, ok := tab.get(q); ok {
		t.Error("q kept after its last sample fell behind the cutoff")
	}
}
