package overlay

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestInboxBudget: a flood of election messages fills the inbox to its
// bound and no further, and the node's own inputs still get in (a lost
// LookupDone would leave the machine waiting for it for good).
func TestInboxBudget(t *testing.T) {
	b := inbox{signal: make(chan struct{}, 1)}
	for i := range maxInbox {
		if err := b.push(node.ElectionMessage{Msg: classic.Message{Type: classic.MsgElection, From: "x"}}); err != nil {
			t.Fatalf("election message %d refused below the bound %d: %v", i, maxInbox, err)
		}
	}
	if b.push(node.ElectionMessage{}) == nil {
		t.Fatal("an election message over the bound was taken")
	}
	if b.push(node.LookupDone{}) != nil || b.push(node.SendFailed{}) != nil || b.push(node.Conn{}) != nil {
		t.Fatal("the node's own input refused when the inbox is full of election messages")
	}
	if got := len(b.take()); got != maxInbox+3 {
		t.Fatalf("took %d inputs, want %d", got, maxInbox+3)
	}
}

// TestInboxBytes: election messages of the largest frame fill the inbox
// up to maxInboxBytes of memory, not to maxInbox messages; the ones
// refused are counted as dropped, as those over the count are; the
// node's own inputs still get in; and the loop's take frees the budget.
// Before, the inbox took maxInbox of them whatever their size: 16,384
// frames of 64 KiB, 1 GiB outside the node's memory budget (hostile-peer
// audit).
func TestInboxBytes(t *testing.T) {
	from := fresh(0)
	ids := make([]classic.ID, 1637) // a ring's ID list of peer IDs, as long as a frame holds
	for i := range ids {
		ids[i] = classic.ID(fresh(i + 1))
	}
	wire, err := pb.Marshal(classic.Message{Type: classic.MsgElection, From: classic.ID(from), To: ids[0], IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if len(wire) > maxElectionFrame || len(wire) < maxElectionFrame-1024 {
		t.Fatalf("the test's message is %d bytes, want the largest frame (%d) near enough", len(wire), maxElectionFrame)
	}
	big, err := pb.Unmarshal(wire, classic.ID(from))
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{log: quiet}
	const sent = 1000
	for range sent {
		n.feed(node.ElectionMessage{Msg: big})
	}
	taken := len(n.inbox.items)
	if mem := taken * electionSize(big); mem > maxInboxBytes {
		t.Errorf("the inbox took %d election messages of %d bytes each on the wire, %d bytes in memory, over its %d", taken, len(wire), mem, maxInboxBytes)
	}
	if want := maxInboxBytes / electionSize(big); taken != want {
		t.Errorf("the inbox took %d messages of %d bytes in memory, want %d: as many as its %d bytes hold", taken, electionSize(big), want, maxInboxBytes)
	}
	if dropped := n.electDropped.Load(); dropped != uint64(sent-taken) {
		t.Errorf("%d messages refused, %d counted as dropped", sent-taken, dropped)
	}
	n.feed(node.LookupDone{})
	n.feed(node.Conn{Peer: peer.ID("a connection")})
	if got := len(n.inbox.items); got != taken+2 {
		t.Errorf("the node's own inputs refused when the inbox's bytes are spent: %d inputs, want %d", got, taken+2)
	}
	n.inbox.take()
	if err := n.inbox.push(node.ElectionMessage{Msg: big}); err != nil {
		t.Errorf("an election message refused after the loop took the inbox: %v", err)
	}
}
