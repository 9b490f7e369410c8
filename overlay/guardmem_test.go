package overlay

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// guardNode is a node with only what the guard's refusals use (a logger,
// and a host for a ban's disconnection), and a clock moved by hand.
func guardNode(t *testing.T) (*Node, *time.Time) {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	h, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	n := &Node{log: quiet, host: h}
	n.guard.now = func() time.Time { return now }
	return n, &now
}

// fresh is the i-th of a flood of identities, each of an Ed25519 ID's
// length.
func fresh(i int) peer.ID { return peer.ID(fmt.Sprintf("\x00\x24\x08\x01\x12\x20%032d", i)) }

// TestGuardStrikesForgotten: identities struck once and never again do
// not stay in the guard for good. Before, an identity's strikes were
// trimmed only when it struck again: 200,000 identities struck once each
// were all kept (134 bytes each; hostile-peer audit). Now the strikes
// that no longer count (older than banWindow) are forgotten whenever the
// map has doubled since it was last pruned, so it holds at most about
// twice the identities struck within a banWindow; and a flood of fresh
// identities does not wipe a live sender's strikes (or a flooder could
// clear its own).
func TestGuardStrikesForgotten(t *testing.T) {
	n, now := guardNode(t)
	const ids, live = 20000, 500 // struck within a banWindow at this pace
	step := banWindow / live
	bad := peer.ID("a peer struck every half banWindow")
	most := 0
	for i := range ids {
		*now = now.Add(step)
		n.guard.refuse(n, "closer", fresh(i), errTruncated)
		if i%(live/2) == 0 {
			n.guard.refuse(n, "closer", bad, errTruncated)
		}
		if len(n.guard.strikes[bad]) == 0 {
			t.Fatalf("after %d fresh identities, the strikes of a peer struck within banWindow were forgotten", i+1)
		}
		most = max(most, len(n.guard.strikes))
	}
	if bound := max(2*(live+1), pruneMin); most > bound {
		t.Errorf("%d identities struck once, %d within any banWindow: the guard held the strikes of %d at once, want at most %d", ids, live, most, bound)
	}
}

// TestGuardBansForgotten: bans that ended are forgotten even when the
// peer never comes back. Before, a ban was cleared only when its peer was
// checked again, so every identity ever banned stayed in the guard.
func TestGuardBansForgotten(t *testing.T) {
	n, now := guardNode(t)
	const ids, live = 4000, 200 // banned within a banFor at this pace
	step := banFor / live
	most := 0
	for i := range ids {
		*now = now.Add(step)
		for range banStrikes {
			n.guard.refuse(n, "election", fresh(i), errFlood)
		}
		if !n.guard.Banned(fresh(i)) {
			t.Fatalf("identity %d: not banned after %d election floods", i, banStrikes)
		}
		if i > live/2 && !n.guard.Banned(fresh(i-live/2)) {
			t.Fatalf("identity %d: its ban forgotten within banFor", i-live/2)
		}
		most = max(most, len(n.guard.banned))
	}
	if bound := max(2*(live+1), pruneMin); most > bound {
		t.Errorf("%d identities banned, %d within any banFor: the guard held the bans of %d at once, want at most %d", ids, live, most, bound)
	}
	if _, bans := n.guard.Refused(); bans != ids {
		t.Errorf("%d bans counted, want %d", bans, ids)
	}
}
