package nodesim

import (
	"maps"
	"slices"
	"time"

	"github.com/superpeer/superpeer/overlay/node"
)

// The token topics (issue 20; overlay/node's geobackbone.go): which token
// reports a geometric node hears.
//
// A machine says which topics it hears (node.GeoReady.Topics): the
// backbone (All), where every holder publishes, and the topic of the
// cluster whose superpeer holds token Cluster. Before its first Topics a
// node hears the backbone alone. It subscribes to those topics and
// publishes its token reports, and their republications, on them: node i
// hears node j's report when j published it on a topic i subscribes to.
// GossipSub keeps no history: i hears a report on a topic only once it is
// (re)published there GossipDelay or more after i joined the topic (the
// subscription has to reach the mesh), and GossipDelay after that
// publication; a topic i leaves takes with it the reports i heard only
// there. A report j no longer publishes on a topic (it left it) stays in
// that topic's subscribers' feeds until one TTL after its last
// publication there, as an entry no one renews.
//
// The republications are events (republish, every AnnounceInterval of
// the node's feed, when lastPublished says it republished), so that each
// publication is counted: one delivery for every other node subscribed to
// the topic at that time (Stats.TokenDeliveries).
//
// Cost: each topic keeps its publishers (the nodes with a report
// published on it, sorted) and its subscribers' count, so a member's feed
// walks its cluster topic's publishers (its superpeer and the holders in
// transit attached to it), a superpeer's the backbone's (S) and its
// cluster's; counting a publication is O(1) per topic.

// backboneTopic is the backbone's key among the topics; a cluster topic's
// key is its token number.
const backboneTopic = -1

// geoTopic is what the simulator keeps of one topic.
type geoTopic struct {
	// pubs are the nodes with a report record on the topic (topicRec),
	// sorted; an expired record is taken out when a feed meets it.
	pubs []int
	// subs are the nodes subscribed now (alive), supers those of them
	// that are superpeers.
	subs, supers int
}

// topicRec is a node's report as the subscribers of one topic hold it:
// the report its last publication there delivered, when that publication
// was made, and, once the node left the topic (it no longer renews it),
// when it expires (0: while it is on the topic).
type topicRec struct {
	rep   *node.TokenReport
	pub   time.Duration
	until time.Duration
}

// topicKeys are the keys of the topics of t: the backbone first.
func topicKeys(t node.GeoTopics) []int {
	var k []int
	if t.All {
		k = append(k, backboneTopic)
	}
	if t.Cluster >= 0 {
		k = append(k, t.Cluster)
	}
	return k
}

// onTopic reports whether t includes the topic of key k.
func onTopic(t node.GeoTopics, k int) bool {
	if k == backboneTopic {
		return t.All
	}
	return t.Cluster == k
}

// topic returns the topic of key k, made if new.
func (s *Sim) topic(k int) *geoTopic {
	if s.topics == nil {
		s.topics = map[int]*geoTopic{}
	}
	t := s.topics[k]
	if t == nil {
		t = &geoTopic{}
		s.topics[k] = t
	}
	return t
}

// joinedAt is when node i joined the topic of key k (it is on it).
func (g *geoNode) joinedAt(k int) time.Duration {
	if k == backboneTopic {
		return g.allAt
	}
	return g.clAt
}

// subscribeStart subscribes node i, starting, to the topics of a node
// that has not said which it hears: the backbone.
func (s *Sim) subscribeStart(i int) {
	g := s.nodes[i].geo
	t := node.GeoTopics{All: true, Cluster: -1}
	for k, r := range g.recs { // a restart: its last incarnation's reports there are not renewed
		if !onTopic(t, k) && r.until == 0 {
			r.until = r.pub + s.ttl
		}
	}
	g.topics, g.subscribed, g.subSuper = t, true, s.nodes[i].state.Role == node.RoleSuperpeer
	g.allAt, g.clAt = s.now, s.now
	for _, k := range topicKeys(g.topics) {
		s.topicJoined(k, g.subSuper)
	}
}

// topicJoined and topicLeft count a subscriber in and out of topic k.
func (s *Sim) topicJoined(k int, super bool) {
	t := s.topic(k)
	t.subs++
	if super {
		t.supers++
	}
}

func (s *Sim) topicLeft(k int, super bool) {
	t := s.topic(k)
	t.subs--
	if super {
		t.supers--
	}
}

// setTopics takes node i's machine's topics (GeoReady.Topics): it
// joins the new ones now, leaves the others, and its records on the
// topics it left expire one TTL after its last publication there.
func (s *Sim) setTopics(i int, t node.GeoTopics) {
	g := s.nodes[i].geo
	old := g.topics
	if old == t {
		return
	}
	g.topics = t
	for _, k := range topicKeys(old) {
		if onTopic(t, k) {
			continue
		}
		if g.subscribed {
			s.topicLeft(k, g.subSuper)
		}
		if r := g.recs[k]; r != nil && r.until == 0 {
			r.until = r.pub + s.ttl
		}
	}
	for _, k := range topicKeys(t) {
		if onTopic(old, k) {
			continue
		}
		if g.subscribed {
			s.topicJoined(k, g.subSuper)
		}
		if k == backboneTopic {
			g.allAt = s.now
		} else {
			g.clAt = s.now
		}
	}
}

// unsubscribe takes node i, going down, out of its topics' subscribers;
// what it published stays (present decides when its peers forget it).
func (s *Sim) unsubscribe(i int) {
	g := s.nodes[i].geo
	if g == nil || !g.subscribed {
		return
	}
	for _, k := range topicKeys(g.topics) {
		s.topicLeft(k, g.subSuper)
	}
	g.subscribed = false
}

// topicRole notes node i's role (a superpeer or not) in its topics'
// counts.
func (s *Sim) topicRole(i int) {
	g := s.nodes[i].geo
	super := s.nodes[i].state.Role == node.RoleSuperpeer
	if g == nil || !g.subscribed || super == g.subSuper {
		return
	}
	d := 1
	if !super {
		d = -1
	}
	for _, k := range topicKeys(g.topics) {
		s.topic(k).supers += d
	}
	g.subSuper = super
}

// published counts node i's publication of a report now on its topics
// (a first publication, or a republication at a feed tick): every other
// subscriber of each counts a delivery. It returns the topics' keys: the
// subscribers hear the report GossipDelay later (delivered).
func (s *Sim) published(i int) []int {
	return s.publishedOn(i, topicKeys(s.nodes[i].geo.topics))
}

// publishedOn counts the deliveries of a publication of node i on the
// topics of keys, and returns keys.
func (s *Sim) publishedOn(i int, keys []int) []int {
	g := s.nodes[i].geo
	for _, k := range keys {
		t := s.topic(k)
		n, sp := t.subs, t.supers
		if g.subscribed {
			n--
			if g.subSuper {
				sp--
			}
		}
		s.stats.TokenDeliveries += uint64(n)
		s.stats.SuperpeerDeliveries += uint64(sp)
		s.stats.OrdinaryDeliveries += uint64(n - sp)
	}
	return keys
}

// delivered records node i's report r, published at pub on the topics of
// keys, as their subscribers now hold it; a release takes i's records
// out of every topic.
func (s *Sim) delivered(i int, keys []int, r *node.TokenReport, pub time.Duration) {
	g := s.nodes[i].geo
	if r.Released {
		for _, k := range slices.Sorted(maps.Keys(g.recs)) {
			s.dropRec(i, k)
		}
		return
	}
	if g.recs == nil {
		g.recs = map[int]*topicRec{}
	}
	for _, k := range keys {
		rec := g.recs[k]
		if rec == nil {
			rec = &topicRec{}
			g.recs[k] = rec
			t := s.topic(k)
			if at, found := slices.BinarySearch(t.pubs, i); !found {
				t.pubs = slices.Insert(t.pubs, at, i)
			}
		}
		rec.rep, rec.pub, rec.until = r, pub, 0
		if !onTopic(g.topics, k) { // it left the topic meanwhile
			rec.until = pub + s.ttl
		}
	}
}

// dropRec takes node j's record on topic k out.
func (s *Sim) dropRec(j, k int) {
	g := s.nodes[j].geo
	delete(g.recs, k)
	t := s.topic(k)
	if at, found := slices.BinarySearch(t.pubs, j); found {
		t.pubs = slices.Delete(t.pubs, at, at+1)
	}
}

// scheduleRepublish schedules node i's feed's next tick (nextRepublish),
// for its current incarnation.
func (s *Sim) scheduleRepublish(i int) {
	t := s.nextRepublish(i)
	s.back(i, t, func(s *Sim) { s.republish(i, t) })
}

// republish is node i's feed's tick at t0: the feed republishes its
// report when lastPublished says it does (not a report held back: its
// flush at this tick publishes it, sendToken).
func (s *Sim) republish(i int, t0 time.Duration) {
	g := s.nodes[i].geo
	if g.own != nil && g.pending == nil && !(g.published && g.lastPub == t0) {
		if last, ok := s.lastPublished(i); ok && last == t0 {
			keys, r := s.published(i), g.own
			s.After(s.cfg.GossipDelay, func(s *Sim) { s.delivered(i, keys, r, t0) })
		}
	}
	s.scheduleRepublish(i)
}

// heardOn returns node j's record on topic k as node i, subscribed since
// joined, hears it now: nil if none, expired (expired: the caller takes
// it out), or published before i's subscription reached the topic.
func (s *Sim) heardOn(i, j, k int, joined time.Duration) (rec *topicRec, expired bool) {
	g := s.nodes[j].geo
	rec = g.recs[k]
	if rec == nil {
		return nil, false
	}
	if rec.until != 0 && s.now >= rec.until || g.tokUntil != 0 && s.now >= g.tokUntil {
		return nil, true
	}
	if rec.pub < joined+s.cfg.GossipDelay || !s.present(i, j) {
		return nil, false
	}
	return rec, false
}

// forgedHeard reports whether node i hears forger j's forged claims: j
// is up and on a topic i hears (the backbone, or one of its own), and
// published claims there (when it
// began to forge, at each ForgeTokens since, and with every tick of its
// feed meanwhile) GossipDelay or more after i joined that topic, and
// GossipDelay or more ago. The claims heard are the current ones.
func (s *Sim) forgedHeard(i, j int) bool {
	g, h := s.nodes[i].geo, s.nodes[j].geo
	if j == i || len(h.forged) == 0 || !s.up(i, j) {
		return false
	}
	gd, iv := s.cfg.GossipDelay, s.cfg.Node.AnnounceInterval
	by := s.now - gd // published by then: heard now
	pub := time.Duration(-1)
	for _, p := range []time.Duration{h.forgedSince, h.forgedAt} {
		if p <= by {
			pub = max(pub, p)
		}
	}
	if k := (by - h.feedStart) / iv; k >= 1 && h.feedStart+k*iv >= h.forgedSince {
		pub = max(pub, h.feedStart+k*iv)
	}
	if pub < 0 {
		return false
	}
	// A hostile member publishes on the backbone too, whatever its
	// machine hears: anyone may publish there (gossip does not ask who
	// is a superpeer), and the backbone's readers are the ones it fools.
	keys := topicKeys(h.topics)
	if !slices.Contains(keys, backboneTopic) {
		keys = append(keys, backboneTopic)
	}
	for _, k := range keys {
		if onTopic(g.topics, k) && pub >= g.joinedAt(k)+gd {
			return true
		}
	}
	return false
}
