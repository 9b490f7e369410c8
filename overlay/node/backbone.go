package node

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// NewBackbone returns the Backbone input of the summaries ss, with a table
// of what a machine derives from them (the estimate they give, the
// superpeers that claim each cluster) that every machine given this same
// value shares: it is derived once, the first time a machine needs it,
// not once per machine and per evaluation. The node simulator gives one
// to every superpeer of a partition side, which all hear the same
// summaries; what each machine decides is what it would decide from a
// Backbone{Summaries: ss} of its own, since the table is a pure function
// of ss. ss must not be changed afterwards.
func NewBackbone(ss []Summary) Backbone {
	return Backbone{Summaries: ss, table: &backboneTable{sums: ss}}
}

// backboneTable is what a machine derives from a backbone's summaries,
// each part at most once (safe for machines on different goroutines).
type backboneTable struct {
	sums []Summary

	claimOnce sync.Once
	claims    map[clusterOf][]peer.ID // by cluster: its superpeers, as listed

	estOnce sync.Once
	est     dhtselect.Estimate
	estOK   bool
}

// clusterOf names a cluster on the backbone.
type clusterOf struct {
	k   int
	key dhtselect.Key
}

// tableOf returns b's table, or a new one of its own when b has none (a
// Backbone given as a literal).
func tableOf(b Backbone) *backboneTable {
	if b.table != nil {
		return b.table
	}
	return &backboneTable{sums: b.Summaries}
}

// claimers returns the superpeers whose summaries claim the cluster at k
// with key ck, in the order listed; nil for a nil table.
func (t *backboneTable) claimers(k int, ck dhtselect.Key) []peer.ID {
	if t == nil {
		return nil
	}
	t.claimOnce.Do(func() {
		t.claims = make(map[clusterOf][]peer.ID, len(t.sums))
		for _, b := range t.sums {
			c := clusterOf{b.K, b.ClusterKey}
			t.claims[c] = append(t.claims[c], b.Superpeer)
		}
	})
	return t.claims[clusterOf{k, ck}]
}

// estimate is dhtselect.EstimateFromClusters of the summaries.
func (t *backboneTable) estimate() (dhtselect.Estimate, bool) {
	t.estOnce.Do(func() {
		cs := make([]dhtselect.ClusterSize, len(t.sums))
		for i, b := range t.sums {
			cs[i] = dhtselect.ClusterSize{K: b.K, Key: b.ClusterKey, Size: b.Size}
		}
		t.est, t.estOK = dhtselect.EstimateFromClusters(cs)
	})
	return t.est, t.estOK
}

// summaries returns the table's summaries (none for a nil table).
func (t *backboneTable) summaries() []Summary {
	if t == nil {
		return nil
	}
	return t.sums
}
