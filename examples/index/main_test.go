package main

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/overlay"
)

// After a superpeer is stopped, every live ordinary node is in the index
// of the superpeer it names, with its items: the members registered again
// with the successor on the events alone.
func TestIndexSurvivesFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 12 libp2p nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apps, err := run(ctx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for id, x := range apps {
		st := x.node.State()
		if st.Role == overlay.RoleSuperpeer {
			continue
		}
		sp, ok := apps[st.Superpeer.ID]
		if !ok {
			t.Fatalf("%s names superpeer %s, not a live node", id.ShortString(), st.Superpeer.ID.ShortString())
		}
		sp.mu.Lock()
		items := sp.index[id]
		sp.mu.Unlock()
		if !slices.Equal(items, x.items) {
			t.Errorf("superpeer %s indexes %v for %s, want %v", st.Superpeer.ID.ShortString(), items, id.ShortString(), x.items)
		}
	}
}
