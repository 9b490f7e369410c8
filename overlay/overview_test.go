package overlay

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// TestOverviewFromBackbone: with the cluster-scoped membership a member
// knows its own cluster only, and a superpeer the other clusters by their
// backbone summaries: in a network of six nodes with two clusters, a
// superpeer's overview draws both, the other by the size and superpeer
// its summary gives (no members), and a member's draws its own.
func TestOverviewFromBackbone(t *testing.T) {
	nodes := honestLoopback(t, 6, WithTarget(dhtselect.Target{Superpeers: 2}))
	var ids []peer.ID
	for _, n := range nodes {
		ids = append(ids, n.ID())
	}
	want := map[string]struct {
		sp   string
		size int
	}{}
	for _, a := range dhtselect.Assign(ids, 1) {
		id := DHTClusterID(1, a.ClusterKey)
		w := want[id]
		w.sp, w.size = a.Superpeer.String(), w.size+1
		want[id] = w
	}
	if len(want) != 2 {
		t.Skipf("the six keys make %d clusters at k = 1; the test needs two", len(want))
	}
	var sp, member *Node
	waitFor(t, "every node in its cluster, and a superpeer hearing the other's summary", func() bool {
		sp, member = nil, nil
		for _, n := range nodes {
			st := n.State()
			w := want[DHTClusterID(st.K, st.ClusterKey)]
			if st.K != 1 || st.Superpeer.ID.String() != w.sp || len(st.Members) != w.size {
				return false
			}
			if st.Role == RoleSuperpeer {
				sp = n
			} else {
				member = n
			}
		}
		return sp != nil && member != nil && len(sp.backboneSummaries()) == 2
	})
	o := sp.Overview()
	if len(o.Clusters) != 2 {
		t.Fatalf("the superpeer's overview has %d clusters, want 2: %+v", len(o.Clusters), o.Clusters)
	}
	for _, c := range o.Clusters {
		w := want[c.ID]
		switch {
		case c.Own && (c.Source != "self" || len(c.Members) != w.size):
			t.Errorf("own cluster %+v, want %d members", c, w.size)
		case !c.Own && (c.Source != "summary" || c.Members != nil || c.Size != w.size || c.Superpeer != w.sp || c.State != ClusterStable):
			t.Errorf("other cluster %+v, want from its summary: size %d, superpeer %s, stable", c, w.size, w.sp)
		}
	}
	if o := member.Overview(); len(o.Clusters) != 1 || !o.Clusters[0].Own {
		t.Errorf("a member's overview %+v, want its own cluster only", o.Clusters)
	}
}
