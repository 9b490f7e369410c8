package nodesim

import (
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// Covered reports whether node i is served: it is alive and has a role,
// and its superpeer is alive, reachable from it, claims the superpeer role,
// and is in the same cluster (k and key).
func (s *Sim) Covered(i int) bool {
	n := s.nodes[i]
	if !n.alive || n.state.Role == node.RoleUnknown || n.state.Superpeer == "" {
		return false
	}
	j := s.idx.names[i] // the index of n.state.Superpeer, or -1
	if j < 0 || !s.nodes[j].alive || !s.reachable(i, j) {
		return false
	}
	sp := s.nodes[j].state
	return sp.Role == node.RoleSuperpeer && sp.K == n.state.K && sp.ClusterKey == n.state.ClusterKey
}

// Sample is the network at one instant.
type Sample struct {
	At time.Duration
	// Live nodes, those of them with a role (Joined), and those served
	// (Covered: see Covered).
	Live, Joined, Covered int
	// Claimers is the number of live nodes that claim the superpeer role;
	// Split is the number of clusters (k and key) with two or more.
	Claimers, Split int
}

// Orphans are the joined nodes that are not covered.
func (x Sample) Orphans() int { return x.Joined - x.Covered }

// Take samples the network now.
func (s *Sim) Take() Sample {
	if !s.cfg.Node.Geometric {
		return s.takeDense()
	}
	x := Sample{At: s.now}
	type cluster struct {
		k   int
		key dhtselect.Key
	}
	claims := map[cluster]int{}
	for i, up := range s.isUp {
		if !up {
			continue // (isUp is n.alive, dense: the dead are not visited)
		}
		n := s.nodes[i]
		x.Live++
		if n.state.Role == node.RoleUnknown {
			continue
		}
		x.Joined++
		if s.Covered(i) {
			x.Covered++
		}
		if n.state.Role == node.RoleSuperpeer {
			x.Claimers++
			c := cluster{n.state.K, n.state.ClusterKey}
			if g := n.geo; g != nil && g.state != nil {
				// Geometric: a cluster is a token's.
				c = cluster{-1, node.TokenKey(s.cfg.Node.Geo.Network, g.state.Token)}
			}
			if claims[c]++; claims[c] == 2 {
				x.Split++
			}
		}
	}
	return x
}

// obsNode is what the Observer reads of a node, kept dense (Sim.obs)
// so that a sample, which visits every node ten times a virtual second,
// reads one array rather than every node's state and machine: its
// state's role, k and cluster key (carryOut), and whether its machine's
// Elected named two peers after its last input (electSplit; no tick
// that the driver skipped changes them: Machine.Skip makes only idle
// ones).
type obsNode struct {
	key        dhtselect.Key
	k          int
	role       node.Role
	electSplit bool
}

// obsState notes node i's state for the Observer.
func (s *Sim) obsState(i int, st *node.State) {
	o := &s.obs[i]
	o.key, o.k, o.role = st.ClusterKey, st.K, st.Role
}

// obsElected notes what node i's machine names, after an input.
func (s *Sim) obsElected(i int) {
	lookup, leader := s.nodes[i].m.Elected()
	s.obs[i].electSplit = lookup != leader
}

// obsCluster is a cluster's claim count in takeDense.
type obsCluster struct {
	k   int
	key dhtselect.Key
}

// takeDense is Take with the DHT strategy, from the dense copies (obs,
// isUp, comp, and the superpeers' indexes idx.names): what Covered
// reads of each node's state, read alike.
func (s *Sim) takeDense() Sample {
	x := Sample{At: s.now}
	if s.claims == nil {
		s.claims = map[obsCluster]int{}
	}
	claims := s.claims
	clear(claims)
	names := s.idx.names
	for i, up := range s.isUp {
		if !up {
			continue
		}
		x.Live++
		o := &s.obs[i]
		if o.role == node.RoleUnknown {
			continue
		}
		x.Joined++
		// Covered: a known superpeer (its index; -1 for none), alive,
		// reachable, claiming the role, in the same cluster.
		if j := names[i]; j >= 0 && s.isUp[j] && s.comp[i] == s.comp[j] {
			if p := &s.obs[j]; p.role == node.RoleSuperpeer && p.k == o.k && p.key == o.key {
				x.Covered++
			}
		}
		if o.role == node.RoleSuperpeer {
			x.Claimers++
			c := obsCluster{o.k, o.key}
			if claims[c]++; claims[c] == 2 {
				x.Split++
			}
		}
	}
	return x
}

// Observer samples the network every Period and follows the failover of
// every crashed superpeer.
type Observer struct {
	Period  time.Duration
	Samples []Sample
	// Failovers are the failover times of the superpeers crashed while
	// observed: from the crash until every live node that named the crashed
	// superpeer is covered by another; Unrepaired counts those not repaired
	// by the end.
	Failovers  []time.Duration
	Unrepaired int
	// Disagree is the longest time a live node's lookup and its election
	// named different live superpeers (both named, and both joined), but
	// for a lookup that names a member ranked last, by the node or by
	// itself (host quality overrides the lookup by design, and the news
	// that a member ranks itself last takes a gossip delay, a view period
	// and a settle period to reach its mates).
	Disagree time.Duration
	pending  []failover
	since    []time.Duration // since when node i's lookup and election differ (notDiffering: they do not)
}

type failover struct {
	at        time.Duration
	followers []int
}

// Observe starts sampling s every period; it returns the observer.
func (s *Sim) Observe(period time.Duration) *Observer {
	o := &Observer{Period: period}
	s.Every(period, func(s *Sim) { o.sample(s) })
	return o
}

func (o *Observer) sample(s *Sim) {
	o.Samples = append(o.Samples, s.Take())
	if s.cfg.Node.Election != "" {
		o.disagreement(s)
	}
	o.pending = slices.DeleteFunc(o.pending, func(f failover) bool {
		for _, i := range f.followers {
			if s.nodes[i].alive && !s.Covered(i) {
				return false
			}
		}
		o.Failovers = append(o.Failovers, s.now-f.at)
		return true
	})
}

func (o *Observer) disagreement(s *Sim) {
	// A peer counts when it is alive and has taken a role: one that is
	// still joining (it takes one only when its view has filled) has not
	// yet had its chance to campaign.
	joined := func(p peer.ID) bool {
		j, ok := s.indexOf(p)
		return ok && s.nodes[j].alive && s.nodes[j].state.Role != node.RoleUnknown
	}
	dense := !s.cfg.Node.Geometric
	for len(o.since) < len(s.isUp) {
		o.since = append(o.since, notDiffering)
	}
	for i, up := range s.isUp {
		since := o.since[i]
		if !up {
			// (isUp is n.alive, dense: the dead are not visited.) A dead
			// node differs no more.
			if since != notDiffering {
				o.Disagree = max(o.Disagree, s.now-since)
				o.since[i] = notDiffering
			}
			continue
		}
		differs := false
		if !dense || s.obs[i].electSplit {
			// (With the DHT strategy, a machine whose lookup and leader
			// are the same, as most are, is not visited.)
			n := s.nodes[i]
			lookup, leader := n.m.Elected()
			differs = lookup != leader && joined(lookup) && joined(leader) && !n.m.Demotes(lookup) && !s.ranksItselfLast(lookup)
		}
		switch {
		case differs && since == notDiffering:
			o.since[i] = s.now
		case since != notDiffering:
			o.Disagree = max(o.Disagree, s.now-since)
			if !differs {
				o.since[i] = notDiffering
			}
		}
	}
}

// notDiffering is Observer.since's entry for a node whose lookup and
// election do not differ.
const notDiffering = time.Duration(-1 << 63)

// ranksItselfLast reports whether p's own election ranks it last.
func (s *Sim) ranksItselfLast(p peer.ID) bool {
	j, ok := s.indexOf(p)
	return ok && s.nodes[j].m != nil && s.nodes[j].m.Demotes(p)
}

// CrashSuperpeer crashes node i and, when it was a superpeer, follows its
// failover.
func (o *Observer) CrashSuperpeer(s *Sim, i int) {
	if s.nodes[i].state.Role == node.RoleSuperpeer {
		var f failover
		f.at = s.now
		for _, j := range s.followers(i) {
			if s.nodes[j].alive {
				f.followers = append(f.followers, j)
			}
		}
		if len(f.followers) > 0 {
			o.pending = append(o.pending, f)
		}
	}
	s.Crash(i)
}

// Finish counts the failovers still pending as unrepaired.
func (o *Observer) Finish() {
	o.Unrepaired += len(o.pending)
	o.pending = nil
}

// Coverage is the mean fraction of the joined nodes covered, over the
// samples from..to.
func (o *Observer) Coverage(from, to time.Duration) float64 {
	var sum float64
	var k int
	for _, x := range o.Samples {
		if x.At < from || x.At > to || x.Joined == 0 {
			continue
		}
		sum += float64(x.Covered) / float64(x.Joined)
		k++
	}
	if k == 0 {
		return 0
	}
	return sum / float64(k)
}

// SplitTime is the time, over the samples from..to, during which some
// cluster had two live claimers (each sample counts for Period).
func (o *Observer) SplitTime(from, to time.Duration) time.Duration {
	var d time.Duration
	for _, x := range o.Samples {
		if x.At >= from && x.At <= to && x.Split > 0 {
			d += o.Period
		}
	}
	return d
}

// MaxOrphans is the most orphans in a sample from..to.
func (o *Observer) MaxOrphans(from, to time.Duration) int {
	m := 0
	for _, x := range o.Samples {
		if x.At >= from && x.At <= to {
			m = max(m, x.Orphans())
		}
	}
	return m
}

// Churn replaces a fraction rate of the live nodes per minute for d: a
// Poisson process in which a live node drawn at random crashes (followed
// by o, when not nil) and a new node joins at once.
func (s *Sim) Churn(rate float64, d time.Duration, o *Observer) {
	s.churn(rate, d, o, nil)
}

// churn is Churn, sparing the nodes spare names (nil: none).
func (s *Sim) churn(rate float64, d time.Duration, o *Observer, spare func(i int) bool) {
	end := s.now + d
	var next func(*Sim)
	next = func(s *Sim) {
		if s.now >= end {
			return
		}
		live := s.liveCount()
		if live > 1 {
			victim := s.idx.live.nth(s.rng.IntN(live)) // the live nodes in index order
			for spare != nil && spare(victim) {
				victim = s.idx.live.nth(s.rng.IntN(live))
			}
			if o != nil {
				o.CrashSuperpeer(s, victim)
			} else {
				s.Crash(victim)
			}
			s.Add()
		}
		s.After(s.expGap(rate*float64(live)), next)
	}
	s.After(s.expGap(rate*float64(s.liveCount())), next)
}

func (s *Sim) liveCount() int { return s.idx.live.n }

// expGap is an exponential gap for perMinute events per minute.
func (s *Sim) expGap(perMinute float64) time.Duration {
	if perMinute <= 0 {
		return time.Hour
	}
	return time.Duration(s.rng.ExpFloat64() / perMinute * float64(time.Minute))
}

// Converged reports whether every live node has a role and is covered, and
// the clusters are those dhtselect.Assign gives for the live nodes at the
// k they agree on, which is the k of the live count (DHT strategy: with
// the cluster-scoped membership a node's estimate is its superpeer's, and
// k lags a growing network by a few intervals; agreeing on a stale k is
// not converged).
func (s *Sim) Converged() bool {
	x := s.Take()
	return x.Live > 0 && x.Covered == x.Live && x.Split == 0 && s.agreesWithAssign()
}

// agreesWithAssign checks that the live nodes agree on k and that each
// names the live node closest to its cluster key (dhtselect.Closest).
func (s *Sim) agreesWithAssign() bool {
	k, live := -1, 0
	for _, n := range s.nodes {
		if !n.alive {
			continue
		}
		if k >= 0 && n.state.K != k {
			return false
		}
		k = n.state.K
		live++
	}
	if k >= 0 && k != s.cfg.Node.Target.K(live) {
		return false
	}
	want := map[dhtselect.Key]int{}
	for _, n := range s.nodes {
		if !n.alive {
			continue
		}
		ck := n.key.Cluster(k)
		w, ok := want[ck]
		if !ok {
			w = s.closestLive(ck)
			want[ck] = w
		}
		if n.state.Superpeer != s.nodes[w].id {
			return false
		}
	}
	return true
}

// closestLive is the live node closest to key, in any component
// (dhtselect.Closest over the live nodes' keys).
func (s *Sim) closestLive(key dhtselect.Key) int {
	best := -1
	for _, t := range s.idx.up {
		j := t.nearest(&key, func(int) bool { return true })
		if j >= 0 && (best < 0 || dhtselect.Closer(s.nodes[j].key, s.nodes[best].key, key)) {
			best = j
		}
	}
	return best
}

// SizeErrors are the relative errors of the live nodes' size estimates
// (State.Size.N against the number of live nodes: |est − live| / live),
// sorted, over the nodes that have a role.
func (s *Sim) SizeErrors() []float64 {
	live := s.liveCount()
	if live == 0 {
		return nil
	}
	var out []float64
	for _, n := range s.nodes {
		if n.alive && n.state.Role != node.RoleUnknown {
			e := float64(n.state.Size.N-live) / float64(live)
			out = append(out, max(e, -e))
		}
	}
	slices.Sort(out)
	return out
}
