package overlay

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A peer's streams refused over its rate are a strike every rateLimit-th
// (a second's worth) within banWindow: a burst of an honest peer's
// streams that a starved node admits late costs the peer a few refusals
// and no ban, while a flood is banned after banStrikes × rateLimit
// refusals. With a strike for each refusal, five refused streams banned a
// peer for ten minutes, and honest members of a loaded 64-node testnet
// were banned by their superpeers at its start.
func TestRateRefusalsStrikeBySecondsWorth(t *testing.T) {
	n := oneCluster(t, keysByDistance(t, 1)[0])
	p := peer.ID("a peer over its rate")
	for n.guard.admit(p) == nil { // the burst, and what the clock refills
	}
	refuseOverRate := func(times int) {
		for range times {
			n.guard.refuse(n, "register", p, errRate)
		}
	}
	// A second's worth of streams and more are refused: one strike.
	refuseOverRate(2*rateLimit - 1)
	if n.guard.Banned(p) {
		t.Fatal("banned after a second's worth of refusals")
	}
	n.guard.mu.Lock()
	got := len(n.guard.strikes[p])
	n.guard.mu.Unlock()
	if got != 1 {
		t.Fatalf("%d strikes after %d refusals over the rate, want 1", got, 2*rateLimit-1)
	}
	// A flood: banned once the refusals reach banStrikes seconds' worth.
	refuseOverRate(banStrikes*rateLimit - 2*rateLimit + 1)
	if !n.guard.Banned(p) {
		t.Fatalf("not banned after %d refusals over the rate", banStrikes*rateLimit)
	}
}

// An election flood (errFlood: messages over what the algorithm allows,
// which no honest member sends) is a strike each time, not by the
// second's worth: banStrikes of them ban the flooder.
func TestElectionFloodStrikesEachTime(t *testing.T) {
	n := oneCluster(t, keysByDistance(t, 1)[0])
	p := peer.ID("an election flooder")
	for range banStrikes {
		n.guard.refuse(n, "election", p, errFlood)
	}
	if !n.guard.Banned(p) {
		t.Fatalf("not banned after %d election floods", banStrikes)
	}
}
