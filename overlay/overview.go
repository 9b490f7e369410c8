package overlay

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/web"
)

// Overview is the whole overlay as one observer knows it, for the page on
// / (overlay/web): every cluster, and a short time line of what changed.
// A node fills it from what it knows (Node.Overview): its own cluster in
// detail, the other clusters from the backbone (a superpeer, DHT
// strategy) or the token reports (geometric strategy). A superpeer fills
// the other clusters from the backbone's summaries (gossip.Summary: Superpeer, K,
// ClusterKey, Size, Term), which give a cluster's size and no member list:
// ClusterView takes such a cluster (Members nil, Size set, Source
// "summary"). With the DHT strategy's cluster-scoped membership a member
// knows only its cluster, and a superpeer the others by their summaries. A testnet, which knows every node, fills every cluster in
// full (testnet.Net.Overview).
type Overview struct {
	// Source is "node" or "testnet".
	Source   string `json:"source"`
	Network  string `json:"network,omitempty"`
	Strategy string `json:"strategy"`
	// Election is the clusters' election algorithm, if any.
	Election string `json:"election,omitempty"`
	// Node is the observing node's status, without its peer list (Source
	// "node").
	Node *Status `json:"node,omitempty"`
	// Peers is the number of peers the observer knows of.
	Peers    int           `json:"peers"`
	Clusters []ClusterView `json:"clusters"`
	// Timeline is the latest changes, oldest first (see Timeline).
	Timeline []TimelineEntry `json:"timeline"`
	// Layout is how the page draws Clusters (see web.Place).
	Layout web.Layout `json:"layout"`
	Time   time.Time  `json:"time"`
}

// The states of a cluster (ClusterView.State; see ClusterFacts.State).
const (
	ClusterStable       = "stable"
	ClusterElecting     = "electing"
	ClusterNoSuperpeer  = "no superpeer"
	ClusterOverCapacity = "over capacity"
)

// ClusterView is one cluster of an Overview.
type ClusterView struct {
	// ID names the cluster for as long as it exists: "k/key" (the cluster
	// key in hex) with the DHT strategy, "sp/" and the superpeer's ID with
	// the geometric strategy ("sp/" alone for the peers attached to none).
	ID string `json:"id"`
	// Name is its human name: the k-bit prefix, or "sp-" and the end of
	// the superpeer's ID.
	Name string `json:"name"`
	K    int    `json:"k"`
	Key  string `json:"key,omitempty"`
	// Superpeer is the superpeer its members name (the one most of them
	// name while they disagree); empty when none.
	Superpeer string `json:"superpeer,omitempty"`
	// SuperpeerDown says that superpeer is not alive or does not act as
	// one, as far as the observer knows.
	SuperpeerDown bool `json:"superpeer_down,omitempty"`
	// Size is its number of members, the superpeer included; 0 when
	// unknown.
	Size int `json:"size"`
	// Members are its members when known in detail (sorted by ID); nil
	// for a cluster known only by its size (a backbone summary).
	Members []MemberView `json:"members,omitempty"`
	// Coord is its superpeer's network coordinate, when known.
	Coord *Coord `json:"coord,omitempty"`
	// State is ClusterStable, ClusterElecting, ClusterNoSuperpeer or
	// ClusterOverCapacity.
	State string `json:"state"`
	Term  uint64 `json:"term,omitempty"`
	// Own marks the observing node's cluster.
	Own bool `json:"own,omitempty"`
	// Source is where it is known from: "self" (the node's own cluster),
	// "view" (the membership view or token reports), "summary" (a
	// backbone summary) or "testnet" (every member's own state).
	Source string `json:"source"`
}

// MemberView is a member of a cluster.
type MemberView struct {
	ID   string `json:"id"`
	Role Role   `json:"role"`
	// Superpeer is the superpeer the member names, when it is not the
	// cluster's (while members disagree).
	Superpeer string `json:"superpeer,omitempty"`
	// Election is its election role (follower, candidate, leader), when
	// known.
	Election string `json:"election,omitempty"`
	Self     bool   `json:"self,omitempty"`
}

// ClusterFacts is what a cluster's State is decided from.
type ClusterFacts struct {
	// Live says the superpeer named is alive and acts as one, as far as
	// the observer knows.
	Live bool
	// Agree says every member known names that superpeer, and every
	// election known names it as leader.
	Agree bool
	// Electing says an election known is running: a member is a candidate
	// or its election names no leader.
	Electing bool
	// Size and Capacity: a cluster with more than Capacity ordinary
	// members (Size - 1) is over capacity; Capacity 0 is no limit.
	Size, Capacity int
}

// State is a cluster's state: no superpeer when none alive is named (or
// electing, when an election runs); electing while the members or their
// elections disagree or an election runs; over capacity when it serves
// more than Capacity ordinary peers; stable otherwise.
func (f ClusterFacts) State() string {
	switch {
	case !f.Live && f.Electing:
		return ClusterElecting
	case !f.Live:
		return ClusterNoSuperpeer
	case !f.Agree || f.Electing:
		return ClusterElecting
	case f.Capacity > 0 && f.Size-1 > f.Capacity:
		return ClusterOverCapacity
	}
	return ClusterStable
}

// Short is the end of a peer ID, as the page shows it.
func Short(id string) string {
	if len(id) <= 8 {
		return id
	}
	return "…" + id[len(id)-8:]
}

// ClusterName is the human name of the cluster of key at k: its prefix,
// or "(whole key space)" at k = 0.
func ClusterName(k int, key dhtselect.Key) string {
	if k == 0 {
		return "(whole key space)"
	}
	return key.Prefix(k)
}

// DHTClusterID is ClusterView.ID with the DHT strategy.
func DHTClusterID(k int, key dhtselect.Key) string { return fmt.Sprintf("%d/%s", k, key) }

// GeoClusterID is ClusterView.ID with the geometric strategy.
func GeoClusterID(superpeer peer.ID) string { return "sp/" + idString(superpeer) }

// GeoClusterName is ClusterView.Name with the geometric strategy.
func GeoClusterName(superpeer peer.ID) string {
	if superpeer == "" {
		return "(attached to none)"
	}
	s := superpeer.String()
	return "sp-" + s[max(0, len(s)-6):]
}

// Finish sorts o's clusters (own first, then by ID), lays them out for the
// page and stamps the time.
func (o *Overview) Finish(now time.Time) {
	slices.SortFunc(o.Clusters, func(a, b ClusterView) int {
		if a.Own != b.Own {
			if a.Own {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	in := make([]web.Cluster, len(o.Clusters))
	for i, c := range o.Clusters {
		size := "size unknown"
		if c.Size > 0 {
			size = fmt.Sprintf("%d peers", c.Size)
		}
		sp := "none"
		if c.Superpeer != "" {
			sp = Short(c.Superpeer)
		}
		wc := web.Cluster{ID: c.ID, Superpeer: c.Superpeer, Size: c.Size, Detail: c.Own,
			Label: fmt.Sprintf("%s %s %s %s", c.Name, sp, size, c.State)}
		if c.Coord != nil {
			wc.Coord = c.Coord.Vec
		}
		for _, m := range c.Members {
			l := Short(m.ID)
			if m.Self {
				l += " (this node)"
			}
			wc.Members = append(wc.Members, web.MemberIn{ID: m.ID, Label: l})
		}
		in[i] = wc
	}
	o.Layout = web.Place(in)
	o.Time = now
}

// Timeline is a short history of an overlay's changes: entries added by
// the observer (role changes, elections, faults) and the changes of the
// clusters' states and superpeers it saw (Observe). It keeps at most
// MaxTimeline entries, none older than TimelineAge, and the last state of
// the clusters seen in the last Observe only: what it holds does not grow
// with time. Safe for concurrent use.
type Timeline struct {
	mu      sync.Mutex
	entries []TimelineEntry
	last    map[string]ClusterView // by ID, from the last Observe
	seen    bool                   // Observe was called
}

// Timeline bounds.
const (
	MaxTimeline = 200
	TimelineAge = 5 * time.Minute
)

// TimelineEntry is one change.
type TimelineEntry struct {
	Time time.Time `json:"time"`
	// Kind is "state" (a cluster's state changed; From and To say how),
	// "superpeer" (its superpeer changed), "cluster" (one appeared or was
	// gone), "role", "elected", "lost" (the observing node's), or
	// "fault" (a testnet's: a node stopped, joined, a partition).
	Kind    string `json:"kind"`
	Cluster string `json:"cluster,omitempty"`
	Peer    string `json:"peer,omitempty"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Text    string `json:"text"`
}

// Add appends e.
func (tl *Timeline) Add(e TimelineEntry) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.add(e)
}

func (tl *Timeline) add(e TimelineEntry) {
	tl.entries = append(tl.entries, e)
	if over := len(tl.entries) - MaxTimeline; over > 0 {
		tl.entries = slices.Delete(tl.entries, 0, over)
	}
}

// Observe notes, at now, what changed since the last Observe in the
// clusters' states and superpeers, and which clusters appeared or went
// (nothing on the first call: that is where the history starts).
func (tl *Timeline) Observe(now time.Time, clusters []ClusterView) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	cur := make(map[string]ClusterView, len(clusters))
	for _, c := range clusters {
		cur[c.ID] = c
	}
	if tl.seen {
		for _, c := range clusters {
			old, ok := tl.last[c.ID]
			switch {
			case !ok:
				tl.add(TimelineEntry{Time: now, Kind: "cluster", Cluster: c.ID, To: c.State,
					Text: fmt.Sprintf("cluster %s appeared (%s, superpeer %s)", c.Name, c.State, orNone(Short(c.Superpeer)))})
			case old.State != c.State:
				tl.add(TimelineEntry{Time: now, Kind: "state", Cluster: c.ID, Peer: c.Superpeer, From: old.State, To: c.State,
					Text: fmt.Sprintf("cluster %s: %s → %s", c.Name, old.State, c.State)})
			}
			if ok && old.Superpeer != c.Superpeer {
				tl.add(TimelineEntry{Time: now, Kind: "superpeer", Cluster: c.ID, Peer: c.Superpeer, From: old.Superpeer, To: c.Superpeer,
					Text: fmt.Sprintf("cluster %s: superpeer %s → %s", c.Name, orNone(Short(old.Superpeer)), orNone(Short(c.Superpeer)))})
			}
		}
		ids := make([]string, 0, len(tl.last))
		for id := range tl.last {
			if _, ok := cur[id]; !ok {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			tl.add(TimelineEntry{Time: now, Kind: "cluster", Cluster: id, From: tl.last[id].State,
				Text: fmt.Sprintf("cluster %s gone", tl.last[id].Name)})
		}
	}
	tl.last, tl.seen = cur, true
}

// Entries returns the entries of the last TimelineAge before now, oldest
// first, and forgets the older ones.
func (tl *Timeline) Entries(now time.Time) []TimelineEntry {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	i := 0
	for i < len(tl.entries) && now.Sub(tl.entries[i].Time) > TimelineAge {
		i++
	}
	tl.entries = slices.Delete(tl.entries, 0, i)
	return slices.Clone(tl.entries)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Overview returns the overlay as the node knows it (see Overview): its
// own cluster from its state and election, the others from its membership
// view (DHT strategy: the peers' announced clusters, the superpeer being
// the peer that announces itself as one) or from the token reports
// (geometric strategy: each superpeer's cluster, of unknown size). The
// time line is left empty (a StatusServer keeps one).
func (n *Node) Overview() Overview {
	o := n.overview()
	o.Finish(time.Now())
	return o
}

// overview is Overview before Finish: the clusters unsorted and not laid
// out.
func (n *Node) overview() Overview {
	st := n.State()
	es := n.ElectionStats()
	status := n.statusOf(st, es, false)
	o := Overview{Source: "node", Network: n.cfg.Network, Strategy: n.cfg.Strategy, Election: es.Algorithm, Node: &status}
	entries := n.members.Entries()
	o.Peers = len(entries)
	capacity := 0
	if n.geo != nil {
		capacity = n.cfg.Geometric.Capacity
	}

	// The node's own cluster.
	own := ClusterView{Own: true, Source: "self", K: st.K, Superpeer: idString(st.Superpeer.ID), Size: len(st.Members), Term: es.Term}
	if n.geo == nil {
		own.ID, own.Name, own.Key = DHTClusterID(st.K, st.ClusterKey), ClusterName(st.K, st.ClusterKey), st.ClusterKey.String()
	} else {
		own.ID, own.Name = GeoClusterID(st.Superpeer.ID), GeoClusterName(st.Superpeer.ID)
	}
	roles := map[peer.ID]Role{}
	for _, e := range entries {
		roles[e.ID] = RoleOrdinary
		if e.Superpeer {
			roles[e.ID] = RoleSuperpeer
		}
	}
	for _, m := range st.Members {
		mv := MemberView{ID: m.String(), Role: roles[m], Self: m == n.self}
		if m == st.Superpeer.ID {
			mv.Role = RoleSuperpeer
		} else if mv.Role == RoleUnknown {
			mv.Role = RoleOrdinary
		}
		if mv.Self {
			mv.Role, mv.Election = st.Role, es.Role
		}
		own.Members = append(own.Members, mv)
	}
	sp := st.Superpeer.ID
	live := sp != "" && (sp == n.self || n.host.Network().Connectedness(sp) == network.Connected)
	own.SuperpeerDown = sp != "" && !live
	own.State = ClusterFacts{
		Live:     live,
		Agree:    es.Algorithm == "" || es.Leader == sp,
		Electing: es.Algorithm != "" && (es.Leader == "" || es.Role == "candidate"),
		Size:     len(st.Members), Capacity: capacity,
	}.State()
	if st.Coord != nil && sp == n.self {
		own.Coord = coordOf(st.Coord)
	}
	o.Clusters = append(o.Clusters, own)

	if n.geo == nil {
		// The other clusters: the membership view's peers, by the
		// cluster their keys are in at the node's k (with the scoped
		// membership the view is the node's cluster, and the others come
		// from the backbone). Not by the cluster a peer's record
		// announces: a record from before a change of k (a peer that has
		// not announced again yet, or a former roster's entry) drew its
		// peer, a member of the node's cluster, as a cluster of its own
		// "with no superpeer" (a member's overview in make test, under
		// the race detector: the whole key space at k = 0, beside its
		// own cluster at k = 1).
		type key struct {
			k   int
			key dhtselect.Key
		}
		byCluster := map[key]*ClusterView{}
		claims := map[key][]peer.ID{}
		for _, e := range entries {
			c := key{st.K, dhtselect.KeyOf(e.ID).Cluster(st.K)}
			id := DHTClusterID(c.k, c.key)
			if id == own.ID {
				continue
			}
			cv := byCluster[c]
			if cv == nil {
				cv = &ClusterView{ID: id, Name: ClusterName(c.k, c.key), K: c.k, Key: c.key.String(), Source: "view"}
				byCluster[c] = cv
			}
			cv.Size++
			mv := MemberView{ID: e.ID.String(), Role: roles[e.ID]}
			cv.Members = append(cv.Members, mv)
			if e.Superpeer {
				claims[c] = append(claims[c], e.ID)
			}
		}
		// A superpeer hears the others on the backbone: their clusters
		// by size, without members (a member hears none of them).
		for _, sm := range n.backboneSummaries() {
			c := key{sm.K, sm.ClusterKey}
			id := DHTClusterID(c.k, c.key)
			if id == own.ID {
				continue
			}
			cv := byCluster[c]
			if cv == nil {
				cv = &ClusterView{ID: id, Name: ClusterName(c.k, c.key), K: c.k, Key: c.key.String(), Source: "summary", Size: sm.Size, Term: sm.Term}
				byCluster[c] = cv
			}
			if !slices.Contains(claims[c], sm.Superpeer) {
				claims[c] = append(claims[c], sm.Superpeer)
			}
		}
		for c, cv := range byCluster {
			sps := claims[c]
			dhtselect.SortByKey(sps)
			if len(sps) > 0 {
				cv.Superpeer = sps[0].String()
			}
			cv.State = ClusterFacts{Live: len(sps) > 0, Agree: len(sps) == 1, Size: cv.Size}.State()
			slices.SortFunc(cv.Members, func(a, b MemberView) int { return cmp.Compare(a.ID, b.ID) })
			o.Clusters = append(o.Clusters, *cv)
		}
	} else {
		// The other clusters: the superpeers of the token reports.
		coords := n.geo.feeds.coords()
		for _, tp := range n.geo.feeds.tokens() {
			if !tp.Superpeer || tp.Holder == sp {
				continue
			}
			cv := ClusterView{ID: GeoClusterID(tp.Holder), Name: GeoClusterName(tp.Holder), Superpeer: tp.Holder.String(),
				Source: "view", State: ClusterStable}
			if c, ok := coords[tp.Holder]; ok {
				cv.Coord = coordOf(c)
			} else if tp.Coord != nil {
				cv.Coord = coordOf(tp.Coord)
			}
			o.Clusters = append(o.Clusters, cv)
		}
		if own.Coord == nil && sp != "" {
			if c, ok := coords[sp]; ok {
				o.Clusters[0].Coord = coordOf(c)
			}
		}
	}
	return o
}

// serveJSON writes v as indented JSON, not to be cached.
func serveJSON(w http.ResponseWriter, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// OverviewHandler serves the page (web.Page) on / and overview()'s JSON
// on /overview: what `peer testnet --http` serves for a whole testnet. A
// node's StatusServer serves the same two, with its status and metrics.
func OverviewHandler(overview func() Overview) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", serveIndex)
	mux.HandleFunc("GET /overview", func(w http.ResponseWriter, _ *http.Request) { serveJSON(w, overview()) })
	return mux
}

func serveIndex(w http.ResponseWriter, r *http.Request) {
	http.ServeFileFS(w, r, web.Page, "index.html")
}
