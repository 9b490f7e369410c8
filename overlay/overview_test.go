package overlay

import (
	"testing"
	"time"

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
	// The summary of the other cluster is waited for as it is now: a
	// superpeer publishes one when its cluster changes, and the one heard
	// first may be from before its roster filled (size 1 of 2: under the
	// race detector, once in make test).
	waitFor(t, "every node in its cluster, and a superpeer hearing the other's summary as it is now", func() bool {
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
		if sp == nil || member == nil || len(sp.backboneSummaries()) != 2 {
			return false
		}
		for _, c := range sp.Overview().Clusters {
			if !c.Own && c.Size != want[c.ID].size {
				return false
			}
		}
		return true
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

// TestTimelineWithoutReaders: a StatusServer notes the clusters in its
// time line whether or not anyone reads /overview, so that a page opened
// after a failover shows it: with no request made, a member's time line
// holds its cluster's change of superpeer after the superpeer closes.
func TestTimelineWithoutReaders(t *testing.T) {
	nodes := honestLoopback(t, 4, WithTarget(dhtselect.Target{Superpeers: 1}), WithElection("bully", false))
	var sp, member *Node
	waitFor(t, "one superpeer that every node names", func() bool {
		sp, member = nil, nil
		for _, n := range nodes {
			st := n.State()
			if st.Superpeer.ID != nodes[0].State().Superpeer.ID {
				return false
			}
			if st.Role == RoleSuperpeer {
				sp = n
			} else {
				member = n
			}
		}
		return sp != nil && member != nil
	})
	srv, err := NewStatusServer(member)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	old := sp.ID().String()
	waitFor(t, "the server to have looked at the cluster with its superpeer", func() bool {
		srv.timeline.mu.Lock()
		defer srv.timeline.mu.Unlock()
		for _, c := range srv.timeline.last {
			if c.Own && c.Superpeer == old {
				return true
			}
		}
		return false
	})
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the member's time line to note its cluster's new superpeer, unread", func() bool {
		for _, e := range srv.timeline.Entries(time.Now()) {
			if e.Kind == "superpeer" && e.From == old && e.To != "" && e.To != old {
				return true
			}
		}
		return false
	})
}
