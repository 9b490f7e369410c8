package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// backboneOf returns summaries of n clusters at k (their superpeers'
// keys masked), and one more claimer of the first cluster.
func backboneOf(n, k int) []Summary {
	var out []Summary
	for i := range n {
		p := peer.ID(fmt.Sprintf("sp%d", i))
		out = append(out, Summary{Superpeer: p, K: k, ClusterKey: dhtselect.KeyOf(p).Cluster(k), Size: 3 + i%5})
	}
	return append(out, Summary{Superpeer: "twin", K: k, ClusterKey: out[0].ClusterKey, Size: 2})
}

// TestBackboneTable: what a machine derives from a backbone (the estimate,
// the claimers of a cluster in the order listed) is what the summaries
// give, whether the Backbone was built by NewBackbone and shared or given
// as a literal.
func TestBackboneTable(t *testing.T) {
	ss := backboneOf(40, 4)
	cs := make([]dhtselect.ClusterSize, len(ss))
	for i, b := range ss {
		cs[i] = dhtselect.ClusterSize{K: b.K, Key: b.ClusterKey, Size: b.Size}
	}
	want, wantOK := dhtselect.EstimateFromClusters(cs)
	for _, b := range []Backbone{NewBackbone(ss), {Summaries: ss}} {
		tab := tableOf(b)
		for range 2 { // derived once, the same the second time
			if got, ok := tab.estimate(); got != want || ok != wantOK {
				t.Errorf("estimate %+v %v, want %+v %v", got, ok, want, wantOK)
			}
		}
		var claim []peer.ID
		for _, s := range ss {
			if s.K == 4 && s.ClusterKey == ss[0].ClusterKey {
				claim = append(claim, s.Superpeer)
			}
		}
		if got := tab.claimers(4, ss[0].ClusterKey); !slices.Equal(got, claim) || len(got) < 2 {
			t.Errorf("claimers %v, want %v (at least the first and its twin)", got, claim)
		}
		if got := tab.claimers(3, ss[0].ClusterKey.Cluster(3)); len(got) != 0 {
			t.Errorf("claimers at another k: %v", got)
		}
	}
	nb := NewBackbone(ss)
	given := []Backbone{nb, nb} // the value each machine gets: a copy
	if tableOf(given[0]) != tableOf(given[1]) {
		t.Error("the copies of a NewBackbone do not share its table")
	}
	lits := []Backbone{{Summaries: ss}, {Summaries: ss}}
	if tableOf(lits[0]) == tableOf(lits[1]) {
		t.Error("two literal Backbones share a table")
	}
	var none *backboneTable
	if none.claimers(1, dhtselect.Key{}) != nil || none.summaries() != nil {
		t.Error("a nil table has claimers or summaries")
	}
}

// TestKeysOf: the routing peers' keys, reused from the previous table
// where the peer is the same (at its place or a few further), hashed
// otherwise, are each peer's key; a key the driver gives is taken.
func TestKeysOf(t *testing.T) {
	ids := func(names ...string) []RoutingPeer {
		var out []RoutingPeer
		for _, n := range names {
			out = append(out, RoutingPeer{ID: peer.ID(n)})
		}
		return out
	}
	prev := ids("a", "b", "c", "d", "e", "f")
	prevKeys := keysOf(prev, nil, nil)
	for _, next := range [][]RoutingPeer{prev, ids("b", "c", "x", "e", "f", "a"), ids(), ids("f", "e"), ids("a", "a", "g")} {
		got := keysOf(next, prev, prevKeys)
		if len(got) != len(next) {
			t.Fatalf("%d keys for %d peers", len(got), len(next))
		}
		for i, p := range next {
			if got[i] != dhtselect.KeyOf(p.ID) {
				t.Errorf("%v: key %d (%s) is not its key", next, i, p.ID)
			}
		}
	}
	// Keys the driver gives are taken as given; with every key given
	// there is nothing to keep.
	given := ids("a", "b")
	given[0].Key = dhtselect.Key{1}
	if got := keysOf(given, prev, prevKeys); got[0] != (dhtselect.Key{1}) || got[1] != dhtselect.KeyOf("b") {
		t.Errorf("with a key given: %x", got)
	}
	given[1].Key = dhtselect.Key{2}
	if got := keysOf(given, prev, prevKeys); got != nil {
		t.Errorf("every key given: kept %x", got)
	}
}

// TestPartialBackboneHoldsTheExactCount: a partial backbone that counts
// less than a backbone that covered every cluster key did within a
// membership TTL does not lower the estimate: a superpeer that raised k
// leaves half of its old cluster without a summary until that half's
// superpeer is elected. Past the TTL it stands. 64 clusters at k = 6 of
// 10 members, the first of 20 (650 peers); its superpeer raises k, and
// its summary is of its half at k = 7 (10 members): the extrapolation
// counts the other half as an average cluster's, below 650. On the old
// rule the estimate fell at once (TestKAtThreshold, in the node
// simulator, is what that did to k).
func TestPartialBackboneHoldsTheExactCount(t *testing.T) {
	cfg := testConfig("a")
	m := mustNew(t, cfg)
	m.Step(t0, view("a", "b", "c", "d", "e"))
	var full []Summary
	for i := range 64 {
		var key dhtselect.Key
		key[0] = byte(i) << 2
		full = append(full, Summary{Superpeer: peer.ID(fmt.Sprintf("sp%d", i)), K: 6, ClusterKey: key, Size: 10})
	}
	full[0].Size = 20
	split := slices.Clone(full)
	split[0].K, split[0].Size = 7, 10
	cs := make([]dhtselect.ClusterSize, len(split))
	for i, s := range split {
		cs[i] = dhtselect.ClusterSize{K: s.K, Key: s.ClusterKey, Size: s.Size}
	}
	partial, ok := dhtselect.EstimateFromClusters(cs)
	if !ok || partial.Source != dhtselect.SourceBackbonePartial || partial.N >= 650 || partial.N <= 2*5 {
		t.Fatalf("the split backbone's estimate %+v, %v: the test needs a partial one between 10 and 650", partial, ok)
	}
	m.Step(t0, Backbone{Summaries: full})
	now, _ := tick(m, t0, time.Second, routing(1), "a")
	if got := m.State().Size; got.N != 650 || got.Source != dhtselect.SourceBackbone {
		t.Fatalf("estimate %+v from the whole backbone, want 650", got)
	}
	m.Step(now, Backbone{Summaries: split})
	now, _ = tick(m, now, 10*time.Second, routing(1), "a")
	if got := m.State().Size; got.N != 650 {
		t.Errorf("estimate %+v 10 s after the backbone turned partial (%d), want the whole backbone's 650 for a TTL (15 s)", got, partial.N)
	}
	m.Step(now, Reevaluate{})
	_, _ = tick(m, now, 10*time.Second, routing(1), "a")
	if got := m.State().Size; got != partial {
		t.Errorf("estimate %+v 20 s after the backbone turned partial, want the partial backbone's %+v", got, partial)
	}
}
