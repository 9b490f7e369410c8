package testnet

import (
	"slices"
	"sync"
	"testing"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
)

// Overview gives the brute-force answer's clusters in full once the
// overlay converged, all stable; a crashed superpeer's cluster shows in
// the time line (the crash, the cluster leaving stable at once), while
// overviews are taken concurrently (the page's server and sampler do).
func TestOverview(t *testing.T) {
	tn := startNet(t, Config{N: 8, Target: dhtselect.Target{Superpeers: 2}, Seed: 1})
	waitConverged(t, tn, tn.Started())
	k, as := tn.Expected()
	want := map[string]int{}
	for _, c := range dhtselect.Clusters(as, k) {
		want[overlay.DHTClusterID(k, c.Key)] = len(c.Members)
	}
	o := tn.Overview()
	if o.Source != "testnet" || o.Peers != 8 || len(o.Clusters) != len(want) || len(o.Layout.Clusters) != len(want) {
		t.Fatalf("overview: %d peers, %d clusters (%d laid out), want 8 and %d", o.Peers, len(o.Clusters), len(o.Layout.Clusters), len(want))
	}
	var victim, cluster string
	for _, c := range o.Clusters {
		if want[c.ID] != c.Size || len(c.Members) != c.Size || c.State != overlay.ClusterStable || c.SuperpeerDown {
			t.Errorf("cluster %+v, want %d members, stable", c, want[c.ID])
		}
		if c.Size > 1 {
			victim, cluster = c.Superpeer, c.ID
		}
	}
	if victim == "" {
		t.Fatal("no cluster with a superpeer and a member")
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					tn.Overview()
				}
			}
		})
	}
	for _, n := range tn.Members() {
		if n.ID().String() == victim {
			if err := tn.Stop(n.ID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	tl := tn.Overview().Timeline
	i := slices.IndexFunc(tl, func(e overlay.TimelineEntry) bool { return e.Kind == "fault" && e.Peer == victim })
	if i < 0 {
		t.Fatalf("no crash in the time line %+v", tl)
	}
	if len(tl) <= i+1 || tl[i+1].Cluster != cluster || tl[i+1].From != overlay.ClusterStable ||
		tl[i+1].To != overlay.ClusterNoSuperpeer && tl[i+1].To != overlay.ClusterElecting {
		t.Errorf("after the crash the time line goes on %+v; want cluster %s to leave stable", tl[i:], cluster)
	}
}
