package overlay

import (
	"fmt"
	"testing"
	"time"
)

// A cluster's state from what is known of it.
func TestClusterState(t *testing.T) {
	for _, c := range []struct {
		f    ClusterFacts
		want string
	}{
		{ClusterFacts{Live: true, Agree: true, Size: 5}, ClusterStable},
		{ClusterFacts{Live: true, Agree: true, Size: 5, Capacity: 4}, ClusterStable},
		{ClusterFacts{Live: true, Agree: true, Size: 6, Capacity: 4}, ClusterOverCapacity},
		{ClusterFacts{Live: true, Agree: false, Size: 5}, ClusterElecting},
		{ClusterFacts{Live: true, Agree: true, Electing: true, Size: 5}, ClusterElecting},
		{ClusterFacts{Live: false, Agree: true, Size: 5}, ClusterNoSuperpeer},
		{ClusterFacts{Live: false, Electing: true, Size: 5}, ClusterElecting},
		// A summary: a superpeer, its size, nothing else known.
		{ClusterFacts{Live: true, Agree: true, Size: 40, Capacity: 0}, ClusterStable},
	} {
		if got := c.f.State(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.f, got, c.want)
		}
	}
}

// The time line notes state and superpeer changes and clusters that come
// and go (nothing on the first look), and stays within its bounds: at most
// MaxTimeline entries, none older than TimelineAge.
func TestTimeline(t *testing.T) {
	var tl Timeline
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a := ClusterView{ID: "2/00", Name: "00", Superpeer: "A", State: ClusterStable}
	b := ClusterView{ID: "2/40", Name: "01", Superpeer: "B", State: ClusterStable}
	tl.Observe(t0, []ClusterView{a, b})
	if es := tl.Entries(t0); len(es) != 0 {
		t.Fatalf("first look: %+v, want nothing", es)
	}
	a2 := a
	a2.State, a2.Superpeer = ClusterNoSuperpeer, "A"
	tl.Observe(t0.Add(time.Second), []ClusterView{a2, b})
	a3 := a
	a3.Superpeer = "C"
	c := ClusterView{ID: "2/80", Name: "10", Superpeer: "D", State: ClusterElecting}
	tl.Observe(t0.Add(2*time.Second), []ClusterView{a3, c})
	tl.Add(TimelineEntry{Time: t0.Add(3 * time.Second), Kind: "fault", Text: "node 1 crashed"})
	var got []string
	for _, e := range tl.Entries(t0.Add(3 * time.Second)) {
		got = append(got, fmt.Sprintf("%s %s %s>%s", e.Kind, e.Cluster, e.From, e.To))
	}
	want := []string{
		"state 2/00 stable>no superpeer",
		"state 2/00 no superpeer>stable",
		"superpeer 2/00 A>C",
		"cluster 2/80 >electing",
		"cluster 2/40 stable>",
		"fault  >",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entries\n%v\nwant\n%v", got, want)
	}

	// Bounded in number and in age.
	for i := range 3 * MaxTimeline {
		tl.Add(TimelineEntry{Time: t0.Add(time.Duration(i) * time.Second), Kind: "fault"})
	}
	es := tl.Entries(t0.Add(3 * MaxTimeline * time.Second))
	if len(es) > MaxTimeline {
		t.Errorf("%d entries, more than %d", len(es), MaxTimeline)
	}
	for _, e := range es {
		if d := t0.Add(3 * MaxTimeline * time.Second).Sub(e.Time); d > TimelineAge {
			t.Errorf("an entry %v old, older than %v", d, TimelineAge)
		}
	}
}

// Finish puts the node's own cluster first and lays out every cluster,
// one known only by its size (a backbone summary) included.
func TestOverviewFinish(t *testing.T) {
	o := Overview{Clusters: []ClusterView{
		{ID: "2/c0", Name: "11", Superpeer: "12D3KooWsummary", Size: 40, State: ClusterStable, Source: "summary"},
		{ID: "2/00", Name: "00", Superpeer: "12D3KooWself", Size: 2, State: ClusterStable, Own: true, Source: "self",
			Members: []MemberView{{ID: "12D3KooWself", Role: RoleSuperpeer, Self: true}, {ID: "12D3KooWother", Role: RoleOrdinary}}},
	}}
	o.Finish(time.Now())
	if !o.Clusters[0].Own || len(o.Layout.Clusters) != 2 || o.Layout.Clusters[0].ID != "2/00" {
		t.Fatalf("clusters %+v, layout %+v", o.Clusters, o.Layout.Clusters)
	}
	if len(o.Layout.Clusters[1].Members) != 0 || len(o.Layout.Clusters[0].Members) != 1 {
		t.Errorf("member dots: %+v", o.Layout.Clusters)
	}
	// One label per cluster, and the own cluster's member (not its
	// superpeer, labelled by the cluster's label).
	if len(o.Layout.Labels) != 3 {
		t.Errorf("labels %+v", o.Layout.Labels)
	}
}
