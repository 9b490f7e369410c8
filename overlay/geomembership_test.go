package overlay

import (
	"context"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/gossip"
)

// The geometric strategy's view is the node's cluster as its state lists
// it: an ordinary peer's superpeer (flagged) and itself, a superpeer's
// members and itself (flagged); its own entry carries its announcement,
// which goes to nobody; a change of cluster or of its flags signals
// Changes, the same cluster again does not.
func TestGeoMembership(t *testing.T) {
	ids := testIDs(t, 4)
	self, sp, m1, m2 := ids[0], ids[1], ids[2], ids[3]
	m := newGeoMembership(&Node{self: self})
	changed := func() bool {
		select {
		case <-m.Changes():
			return true
		default:
			return false
		}
	}
	if got := m.Entries(); len(got) != 1 || got[0].ID != self {
		t.Fatalf("before any state: %v, want itself alone", got)
	}
	m.changed(State{Self: self, Role: RoleOrdinary, Superpeer: peer.AddrInfo{ID: sp}, Members: []peer.ID{sp, self}})
	if !changed() {
		t.Error("no change signalled for a new cluster")
	}
	got := m.Entries()
	if len(got) != 2 || m.Len() != 2 {
		t.Fatalf("ordinary peer's view %v, want its superpeer and itself", got)
	}
	for _, e := range got {
		if e.Superpeer != (e.ID == sp) {
			t.Errorf("%s flagged superpeer %v", e.ID, e.Superpeer)
		}
	}
	m.changed(State{Self: self, Role: RoleOrdinary, Superpeer: peer.AddrInfo{ID: sp}, Members: []peer.ID{self, sp}})
	if changed() {
		t.Error("the same cluster signalled a change")
	}
	if err := m.SetLocal(context.Background(), gossip.Announcement{ID: self, Private: true}); err != nil || !changed() {
		t.Fatalf("SetLocal: %v, or no change signalled", err)
	}
	if e, ok := m.Get(self); !ok || !e.Private {
		t.Errorf("own entry %+v, want private", e)
	}
	if _, ok := m.Get(m1); ok {
		t.Error("a peer outside the cluster is in the view")
	}
	m.changed(State{Self: self, Role: RoleSuperpeer, Members: []peer.ID{m2, self, m1}})
	got = m.Entries()
	want := slices.Sorted(slices.Values([]peer.ID{self, m1, m2}))
	if len(got) != 3 || !changed() {
		t.Fatalf("superpeer's view %v, want %v and a change", got, want)
	}
	for i, e := range got {
		if e.ID != want[i] || e.Superpeer != (e.ID == self) {
			t.Errorf("entry %d: %s superpeer %v, want %s, flagged only for itself", i, e.ID, e.Superpeer, want[i])
		}
	}
	if m.Left(m1) || m.Stats() != (gossip.FeedStats{}) || m.Leave(context.Background()) != nil || m.Close() != nil {
		t.Error("a view that gossips nothing reports something left or gossiped")
	}
}
