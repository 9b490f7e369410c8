package testnet

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay"
)

// Overview returns the whole testnet as the page of `peer testnet --http`
// draws it (overlay.Overview): every cluster in full, from every live
// node's own state and election. With the DHT strategy a cluster is the
// nodes that place themselves in it (k and cluster key); with the
// geometric strategy, the nodes attached to one superpeer (and those
// attached to none). A cluster's state follows overlay.ClusterFacts: its
// superpeer is live when it is a live node in the superpeer role; its
// members agree when all of them, and their elections, name it.
//
// Each call notes in the Net's time line how the clusters changed since
// the last call; the Net adds its own faults (stops, joins, partitions)
// to it, and right after a stop notes the clusters again, so that the
// state a stop leaves is in the time line however soon it is repaired.
func (t *Net) Overview() overlay.Overview {
	t.watched.Store(true)
	return t.overview()
}

func (t *Net) overview() overlay.Overview {
	// One at a time, so that the time line notes what each saw in order.
	t.overviewMu.Lock()
	defer t.overviewMu.Unlock()
	members := t.Members()
	o := overlay.Overview{Source: "testnet", Strategy: t.cfg.Strategy, Election: t.cfg.Election, Peers: len(members)}
	type node struct {
		id peer.ID
		st overlay.State
		es overlay.ElectionStats
	}
	nodes := make([]node, len(members))
	live := map[peer.ID]overlay.Role{}
	for i, m := range members {
		nodes[i] = node{m.ID(), m.State(), m.ElectionStats()}
		live[m.ID()] = nodes[i].st.Role
	}
	capacity := 0
	if t.cfg.Strategy == StrategyGeometric {
		capacity = t.cfg.Geometric.Capacity
		if capacity == 0 {
			capacity = geometric.DefaultConfig().Capacity
		}
	}
	groups := map[string][]node{}
	var ids []string
	for _, n := range nodes {
		var id string
		if t.cfg.Strategy == StrategyGeometric {
			id = overlay.GeoClusterID(n.st.Superpeer.ID)
		} else {
			id = overlay.DHTClusterID(n.st.K, n.st.ClusterKey)
		}
		if _, ok := groups[id]; !ok {
			ids = append(ids, id)
		}
		groups[id] = append(groups[id], n)
	}
	for _, id := range ids {
		g := groups[id]
		first := g[0].st
		cv := overlay.ClusterView{ID: id, K: first.K, Size: len(g), Source: "testnet"}
		if t.cfg.Strategy == StrategyGeometric {
			cv.Name = overlay.GeoClusterName(first.Superpeer.ID)
		} else {
			cv.Name, cv.Key = overlay.ClusterName(first.K, first.ClusterKey), first.ClusterKey.String()
		}
		// The superpeer: the one most members name (ties: the smaller key).
		named := map[peer.ID]int{}
		for _, n := range g {
			if sp := n.st.Superpeer.ID; sp != "" {
				named[sp]++
			}
		}
		var sp peer.ID
		if len(named) > 0 {
			cands := slices.Collect(maps.Keys(named))
			dhtselect.SortByKey(cands)
			slices.SortStableFunc(cands, func(a, b peer.ID) int { return cmp.Compare(named[b], named[a]) })
			sp = cands[0]
		}
		agree, electing := true, false
		for _, n := range g {
			mv := overlay.MemberView{ID: n.id.String(), Role: n.st.Role, Election: n.es.Role}
			if n.st.Superpeer.ID != sp {
				agree = false
				mv.Superpeer = n.st.Superpeer.ID.String()
			}
			if n.es.Algorithm != "" {
				agree = agree && n.es.Leader == sp
				electing = electing || n.es.Leader == "" || n.es.Role == "candidate"
			}
			cv.Term = max(cv.Term, n.es.Term)
			cv.Members = append(cv.Members, mv)
			if n.id == sp && n.st.Coord != nil {
				cv.Coord = &overlay.Coord{Vec: slices.Clone(n.st.Coord.Vec), Height: n.st.Coord.Height, Error: n.st.Coord.Error}
			}
		}
		slices.SortFunc(cv.Members, func(a, b overlay.MemberView) int { return cmp.Compare(a.ID, b.ID) })
		if sp != "" {
			cv.Superpeer = sp.String()
		}
		cv.SuperpeerDown = sp != "" && live[sp] != overlay.RoleSuperpeer
		cv.State = overlay.ClusterFacts{Live: sp != "" && !cv.SuperpeerDown, Agree: agree, Electing: electing,
			Size: len(g), Capacity: capacity}.State()
		o.Clusters = append(o.Clusters, cv)
	}
	o.Finish(time.Now())
	t.timeline.Observe(o.Time, o.Clusters)
	o.Timeline = t.timeline.Entries(o.Time)
	return o
}

// fault notes one of the Net's faults in its time line.
func (t *Net) fault(p peer.ID, format string, args ...any) {
	t.timeline.Add(overlay.TimelineEntry{Time: time.Now(), Kind: "fault", Peer: idString(p), Text: fmt.Sprintf(format, args...)})
}

func idString(p peer.ID) string {
	if p == "" {
		return ""
	}
	return p.String()
}
