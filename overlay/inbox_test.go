package overlay

import (
	"testing"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestInboxBudget: a flood of election messages fills the inbox to its
// bound and no further, and the node's own inputs still get in (a lost
// LookupDone would leave the machine waiting for it for good).
func TestInboxBudget(t *testing.T) {
	b := inbox{signal: make(chan struct{}, 1)}
	for i := range maxInbox {
		if !b.push(node.ElectionMessage{Msg: classic.Message{Type: classic.MsgElection, From: "x"}}) {
			t.Fatalf("election message %d refused below the bound %d", i, maxInbox)
		}
	}
	if b.push(node.ElectionMessage{}) {
		t.Fatal("an election message over the bound was taken")
	}
	if !b.push(node.LookupDone{}) || !b.push(node.SendFailed{}) || !b.push(node.Conn{}) {
		t.Fatal("the node's own input refused when the inbox is full of election messages")
	}
	if got := len(b.take()); got != maxInbox+3 {
		t.Fatalf("took %d inputs, want %d", got, maxInbox+3)
	}
}
