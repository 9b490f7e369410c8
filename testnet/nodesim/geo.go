package nodesim

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/stats"
)

// The geometric strategy (Config.Node.Geometric): the oracles that stand
// where overlay/geo.go does I/O. See the package comment.

// Defaults of the geometric strategy, as the live node's (overlay.Config).
const (
	DefaultGeoNetwork  = "nodesim"
	DefaultGeoInterval = time.Second      // PingInterval and TokenInterval
	DefaultGeoTimeout  = 10 * time.Second // the live stream deadline
	liveCooling        = 4                // overlay's liveCooling
)

// errGeoTimeout is the error of a ping, a pass or an attach request to a
// peer that is down or unreachable.
var errGeoTimeout = errors.New("nodesim: no answer (timeout)")

// errNoVouch is a vantage point's answer of no RTT: it keeps none for the
// peer asked about and does not measure one (overlay/node's vouchAsked).
var errNoVouch = errors.New("nodesim: no RTT kept, none measured")

// fillGeo fills the geometric settings left zero as the live node does
// (overlay.New and overlay's geoConfig).
func (c *Config) fillGeo() error {
	g := &c.Node.Geo
	g.Network = cmp.Or(g.Network, DefaultGeoNetwork)
	g.PingInterval = cmp.Or(g.PingInterval, DefaultGeoInterval)
	g.TokenInterval = cmp.Or(g.TokenInterval, DefaultGeoInterval)
	t := &g.Tokens
	t.Dwell = cmp.Or(t.Dwell, 5*g.TokenInterval)
	t.Margin = cmp.Or(t.Margin, node.LiveMargin)
	t.MinHold = cmp.Or(t.MinHold, node.SnapshotTicks*g.TokenInterval)
	t.Cooling = cmp.Or(t.Cooling, liveCooling)
	if g.Coords == (geometric.CoordConfig{}) {
		g.Coords = geometric.DefaultCoordConfig()
	}
	filled, err := g.Tokens.Filled()
	if err != nil {
		return errors.Join(ErrConfig, err)
	}
	g.Tokens = filled
	c.GeoTimeout = cmp.Or(c.GeoTimeout, DefaultGeoTimeout)
	return nil
}

// geoNode is what the simulator keeps of one node's geometric strategy:
// what it publishes, what its peers have heard of it, and its state.
type geoNode struct {
	own *node.TokenReport // the token it reports now (nil: none)
	// What gossip has delivered of it (see the package comment): its
	// token report until tokUntil (0: while it is heard at all).
	heardTok *node.TokenReport
	tokUntil time.Duration
	// forged are token claims a hostile member makes besides its
	// machine's report (ForgeTokens), published on its topics while it
	// lives: since forgedSince, last changed at forgedAt.
	forged                []node.TokenReport
	forgedSince, forgedAt time.Duration
	// Its token topics (topics.go): those its machine said it hears
	// (node.GeoReady.Topics; the backbone before it said), whether it is
	// counted among their subscribers (alive) and as a superpeer, when
	// it joined the backbone and its cluster topic, and its reports as
	// each topic's subscribers hold them, by topic key.
	topics      node.GeoTopics
	subscribed  bool
	subSuper    bool
	allAt, clAt time.Duration
	recs        map[int]*topicRec
	// lie, when set, is the coordinate it sends its superpeer instead of
	// its own (LieCoord); load is the most its measurements are delayed
	// by (Load).
	lie  *coordinate.Coordinate
	load time.Duration
	// asked holds, for a liar in the search (LieInSearch), the
	// candidates each superpeer last named it.
	asked map[peer.ID][]peer.ID
	state *node.GeoState // the last the machine reported
	// The view it was given last (geoView): its cluster, its
	// superpeer, and its own flag.
	viewIDs  []peer.ID
	viewSP   peer.ID
	viewFlap bool
	tickAt   time.Duration // the geometric tick scheduled (GeoNext); -1 none
	lastTick time.Duration
	downAt   time.Duration
	// Its token feed as the live node's (gossip/feed.go): started at
	// feedStart, it republishes every announce interval from then, and
	// publishes a change that is not urgent (tokenUrgent) no sooner than
	// an announce interval (gossip.GeoConfig.MinGap) after the last
	// publication. lastPub is the last publication pushed (published:
	// whether there was one), ownSince since when it has had a report
	// to republish, pending a report held back, whose publication is
	// scheduled at flushAt.
	feedStart, lastPub, ownSince, flushAt time.Duration
	published                             bool
	pending                               *node.TokenReport
}

// geoStart prepares node i's geometric part at a start: a restarted node
// keeps what its peers heard of it, but a token report that its new
// incarnation does not renew expires one TTL after it was last heard.
func (s *Sim) geoStart(i int) {
	n := s.nodes[i]
	if n.geo == nil {
		n.geo = &geoNode{}
	} else {
		g := n.geo
		if g.heardTok != nil && g.tokUntil == 0 {
			g.tokUntil = g.downAt + s.ttl - s.randDur(s.cfg.Node.AnnounceInterval)
		}
		g.own, g.state = nil, nil
		g.viewIDs, g.viewSP, g.viewFlap = nil, "", false // a new machine: its view is given at once
	}
	g := n.geo
	g.tickAt, g.lastTick = -1, -1
	g.feedStart, g.published, g.pending, g.flushAt = s.now, false, nil, -1 // a new feed
	s.subscribeStart(i)
	s.scheduleRepublish(i)
}

func (s *Sim) randDur(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(s.rng.Int64N(int64(d)))
}

// geoDown notes node i's stop. A graceful one hands its token on first,
// as overlay's leave does with the loop stopped: GeoLeave, then the pings
// and passes the machine asks for, carried out one by one until it asks
// for none; the node waits for each, and the simulator answers them at
// once (a ping with the matrix RTT, a pass with the recipient's machine's
// answer, which it takes now).
func (s *Sim) geoDown(i int, graceful bool) {
	n := s.nodes[i]
	if n.geo == nil {
		return
	}
	n.geo.downAt = s.now
	defer s.unsubscribe(i)
	if !graceful {
		return
	}
	now := s.wall()
	n.m.Step(now, node.GeoLeave{})
	for range 16 { // the machine asks for a ping and a pass at most per hand-over
		rd := n.m.Ready()
		if s.Log != nil {
			for _, note := range rd.Notes {
				s.Log(s.now, i, note)
			}
		}
		for _, r := range rd.Geo.Tokens {
			s.publishToken(i, r)
		}
		if t := rd.Geo.Topics; t != nil {
			s.setTopics(i, *t)
		}
		if len(rd.Geo.Pings) == 0 && len(rd.Geo.Passes) == 0 && len(rd.Geo.Vouch) == 0 {
			return
		}
		for _, v := range rd.Geo.Vouch {
			in := node.VouchDone{From: v.To, Of: v.Of, Err: errGeoTimeout}
			if j, ok := s.indexOf(v.To); ok && s.up(i, j) {
				in.RTT, in.Err = s.vouch(j, v.Of, n.id)
			}
			n.m.Step(now, in)
		}
		for _, p := range rd.Geo.Pings {
			s.stats.GeoPings++
			in := node.PingDone{Peer: p, Err: errGeoTimeout}
			if j, ok := s.indexOf(p); ok && s.up(i, j) {
				in = node.PingDone{Peer: p, RTT: s.rtt(i, j), Coord: s.pingCoord(j)}
			}
			n.m.Step(now, in)
		}
		for _, p := range rd.Geo.Passes {
			s.stats.GeoPasses++
			in := node.PassDone{To: p.To, Token: p.Token}
			if j, ok := s.indexOf(p.To); ok && s.up(i, j) {
				m := s.nodes[j].m
				m.Step(now, node.TokenOffered{From: n.id, Token: p.Token})
				in.OK = m.GeoAnswer().Yes
				s.carryOut(j)
			}
			n.m.Step(now, in)
		}
	}
}

// geoCarryOut does the geometric part of node i's Ready.
func (s *Sim) geoCarryOut(i int, rd node.GeoReady) {
	n := s.nodes[i]
	g := n.geo
	// As the driver does (overlay/geotopics.go): the reports go out on
	// the topics the node is on, then it joins and leaves topics, and its
	// report goes on a topic it joins at once. So a holder in transit
	// that is promoted says so on its old cluster's topic before it
	// leaves it: the members there, its mates, hear of the new superpeer
	// at once.
	for _, r := range rd.Tokens {
		s.publishToken(i, r)
	}
	if t := rd.Topics; t != nil {
		old := g.topics
		s.setTopics(i, *t)
		var joined []int
		for _, k := range topicKeys(*t) {
			if !onTopic(old, k) {
				joined = append(joined, k)
			}
		}
		if g.own != nil && len(joined) > 0 {
			s.sendTokenOn(i, *g.own, joined)
		}
	}
	if st := rd.State; st != nil {
		prevTok := -1
		if g.state != nil {
			prevTok = g.state.Token
		}
		g.state = st
		prev := n.state
		n.state = node.State{Role: st.Role, S: st.S, Superpeer: st.Superpeer, Members: st.Members, Prefix: st.Prefix}
		s.named(i)
		if prev.Role != st.Role || prev.Superpeer != st.Superpeer || !slices.Equal(prev.Members, st.Members) || prevTok != st.Token {
			if s.Record {
				s.Changes = append(s.Changes, Change{At: s.now, Node: i, State: n.state})
			}
			h := fnv.New64a()
			fmt.Fprintf(h, "%x %d %d %s %s %d %v", s.trace, s.now, i, st.Superpeer, st.Role, st.Token, st.Members)
			s.trace = h.Sum64()
		}
	}
	s.topicRole(i) // its role as its topics count their subscribers
	for _, p := range rd.Pings {
		s.geoPing(i, p)
	}
	for _, p := range rd.Passes {
		if s.hostile[i].keep {
			// It keeps what it holds: the pass is never made.
			s.stats.KeptPasses++
			s.After(0, func(s *Sim) { s.step(i, node.PassDone{To: p.To, Token: p.Token}) })
			continue
		}
		s.geoPass(i, p)
	}
	for _, p := range rd.Attach {
		c := rd.AttachCoord
		if g.lie != nil {
			c = g.lie
		}
		in := node.AttachAsked{RTTs: rd.AttachRTTs[p], Coord: c, Private: rd.AttachPrivate, Flapping: rd.AttachFlapping, Near: rd.AttachNear[p]}
		if in.RTTs != nil {
			in.Second = rd.AttachSecond
			if s.hostile[i].lies {
				in.RTTs, in.Second = s.lieReport(p, in.RTTs, g.asked[p]), node.PeerRTT{}
				s.stats.LiedReports++
			}
		}
		s.geoAttach(i, p, in)
	}
	for _, p := range rd.Detach {
		c := rd.AttachCoord
		if g.lie != nil {
			c = g.lie
		}
		s.geoDetach(i, p, c)
	}
	for _, v := range rd.Vouch {
		s.geoVouch(i, v)
	}
}

// geoVouch carries out a request for the RTT a peer measures to another
// (see geoRequest): its machine answers with the RTT it keeps (VouchAsked),
// or, with none and when the machine says so, the oracle measures one as
// the live node's ping does.
func (s *Sim) geoVouch(i int, v node.VouchRequest) {
	var rtt time.Duration
	var err error
	s.geoRequest(i, v.To,
		func(m *node.Machine, j int, now time.Time, from peer.ID) {
			rtt, err = s.vouch(j, v.Of, from)
		},
		func(_ node.GeoAnswer, ok bool) node.Input {
			if !ok {
				return node.VouchDone{From: v.To, Of: v.Of, Err: errGeoTimeout}
			}
			return node.VouchDone{From: v.To, Of: v.Of, RTT: rtt, Err: err}
		})
}

// vouch is node j's answer to from's question: the RTT it measures to of
// (its machine's, or, when the machine says to measure one, a ping by the
// oracle: the matrix RTT and the least of three jitters), or an error
// when it has none or of does not answer it.
func (s *Sim) vouch(j int, of, from peer.ID) (time.Duration, error) {
	m := s.nodes[j].m
	m.Step(s.wall(), node.VouchAsked{From: from, Of: of})
	a := m.GeoAnswer()
	if a.RTT > 0 {
		return a.RTT, nil
	}
	if !a.Measure {
		return 0, errNoVouch
	}
	k, ok := s.indexOf(of)
	if !ok || !s.up(j, k) {
		return 0, errGeoTimeout
	}
	s.stats.GeoPings++
	jit := s.randDur(s.cfg.Jitter)
	for range 2 {
		jit = min(jit, s.randDur(s.cfg.Jitter))
	}
	return s.rtt(j, k) + jit + s.randDur(s.nodes[j].geo.load), nil
}

// LieCoord makes node i a liar: it sends c as its coordinate with its
// attach requests, which its superpeer passes on to its other members
// (nil ends the lie).
func (s *Sim) LieCoord(i int, c *coordinate.Coordinate) {
	if g := s.nodes[i].geo; g != nil {
		g.lie = c
	}
}

// LieInSearch makes the nodes of liars liars in the search on measured
// RTTs (overlay/node's geoswap.go), who know one another and every true
// RTT, and aim to hold superpeer roles: a liar's report to its superpeer
// s claims, at the ends of what geometric.Swap accepts, that each liar
// candidate c saves it r(s, c) and each honest one costs it r(s, c), with
// no next superpeer (which would bound its claimed loss); its RTT to s is
// raised as far as the claimed saving needs. A liar superpeer's summary
// of its cluster claims the most it can for a fellow liar (lieSummary).
// As geometric.SimConfig.Liars does for the simulator of the placement;
// with KeepTokens, its liar superpeers never give their roles away
// either.
func (s *Sim) LieInSearch(liars []int) { s.makeHostile(liars, func(h *hostility) { h.lies = true }) }

// hostility is what a hostile node does (LieInSearch, KeepTokens).
type hostility struct{ lies, keep bool }

// KeepTokens makes the nodes of keep hostile holders: a token they get
// they never pass on (their machines' passes, the coordinates' forces'
// and the search's hand-overs, are not made, and their machines hear that
// the passes failed).
func (s *Sim) KeepTokens(keep []int) { s.makeHostile(keep, func(h *hostility) { h.keep = true }) }

// makeHostile sets what the nodes of nodes do. A number that is no
// node's panics, naming it (LieCoord's panics too), rather than set
// nothing.
func (s *Sim) makeHostile(nodes []int, set func(*hostility)) {
	if s.hostile == nil {
		s.hostile = map[int]hostility{}
	}
	for _, i := range nodes {
		if i < 0 || i >= len(s.nodes) {
			panic(fmt.Sprintf("nodesim: no node %d to make hostile (%d nodes)", i, len(s.nodes)))
		}
		h := s.hostile[i]
		set(&h)
		s.hostile[i] = h
	}
}

// lieSummary is a liar superpeer's summary of its cluster (node's
// georelocate.go), in place of its own: the most that the wire lets it
// claim (gossip.MaxSummaryRTT) as the gain of a second superpeer at a
// fellow liar that holds no token, and as the cost of its own removal,
// so that honest superpeers relocate their tokens to liars and never
// take its own.
func (s *Sim) lieSummary(i int) *geometric.ClusterSummary {
	const most = time.Hour // gossip.MaxSummaryRTT
	sum := &geometric.ClusterSummary{Superpeer: geometric.ID(s.nodes[i].id), Remove: most, Cost: most}
	for _, j := range slices.Sorted(maps.Keys(s.hostile)) {
		if g := s.nodes[j].geo; j != i && s.hostile[j].lies && s.nodes[j].alive && g != nil && g.own == nil {
			sum.Candidate, sum.Gain = geometric.ID(s.nodes[j].id), most
			break
		}
	}
	return sum
}

// lieReport is a liar's report to superpeer sp, whose candidates were
// cands, in place of rtts (its RTT to sp, then to each candidate): see
// LieInSearch. A report that does not match cands is sent as it is.
func (s *Sim) lieReport(sp peer.ID, rtts []time.Duration, cands []peer.ID) []time.Duration {
	j, ok := s.indexOf(sp)
	if !ok || len(rtts) != len(cands)+1 {
		return rtts
	}
	d := make([]time.Duration, len(cands)) // r(sp, c)
	liar := make([]bool, len(cands))
	t := rtts[0]
	for k, c := range cands {
		if x, ok := s.indexOf(c); ok {
			d[k], liar[k] = s.rtt(j, x), s.hostile[x].lies
			if liar[k] {
				t = max(t, d[k]+time.Nanosecond)
			}
		}
	}
	out := []time.Duration{t}
	for k := range cands {
		if liar[k] {
			out = append(out, max(t-d[k], time.Nanosecond))
		} else {
			out = append(out, t+d[k])
		}
	}
	return out
}

// Load makes node i a loaded host: every RTT it measures (its pings, and
// those it answers a vantage point's question with) is delayed by a
// random amount up to d, the scheduling delays a busy host adds to a ping
// and never takes away (all three pings of a measurement alike).
func (s *Sim) Load(i int, d time.Duration) {
	if g := s.nodes[i].geo; g != nil {
		g.load = d
	}
}

// publishToken publishes one token report of node i as the live feed
// would (see the package comment); its peers hear it GossipDelay after
// its publication. A report of no token leaves the last one to expire
// (one TTL after it was last republished), a release takes it out at once.
func (s *Sim) publishToken(i int, r node.TokenReport) {
	g := s.nodes[i].geo
	if r.Summary != nil && s.hostile[i].lies {
		r.Summary = s.lieSummary(i)
		s.stats.LiedReports++
	}
	if g.own != nil && !r.None && !r.Released && sameReport(g.own, &r) {
		return // the feed's next republication carries it (gossip/feed.go: set)
	}
	last, had := s.lastPublished(i)
	if g.own == nil && !r.None && !r.Released {
		g.ownSince = s.now
	}
	old := g.own
	g.own = &r
	if r.None || r.Released {
		g.own = nil
	}
	// The live feed publishes a new token, a promotion and a release at
	// once, and a change of load, coordinate or summary no sooner than
	// its minimum gap after the last publication, or at its next
	// republication if that comes first: then the newest report goes out
	// (gossip/feed.go: set and run). A report of no token is not
	// published (its last one expires).
	g.pending = nil
	if r.None {
		s.sendToken(i, r)
		return
	}
	gap := s.cfg.Node.AnnounceInterval
	if r.Released || tokenUrgent(old, &r) || !had || s.now-last >= gap {
		s.sendToken(i, r)
		return
	}
	g.pending = &r
	at := min(last+gap, s.nextRepublish(i))
	if g.flushAt == at {
		return
	}
	g.flushAt = at
	s.back(i, at, func(s *Sim) {
		if g.flushAt != at {
			return
		}
		g.flushAt = -1
		if p := g.pending; p != nil {
			g.pending = nil
			s.sendToken(i, *p)
		}
	})
}

// sameReport reports whether the live feed takes b for a as its value
// (gossip's tokenSpec.same): nothing to publish.
func sameReport(a, b *node.TokenReport) bool {
	return a.Token == b.Token && a.Superpeer == b.Superpeer && a.Load == b.Load && a.Capacity == b.Capacity &&
		a.Released == b.Released && a.Giver == b.Giver && bytes.Equal(a.Link, b.Link) && geometric.SameCoord(a.Coord, b.Coord) &&
		(a.Summary == nil) == (b.Summary == nil) && (a.Summary == nil || *a.Summary == *b.Summary)
}

// tokenUrgent reports whether the live feed publishes report r at once
// after old (nil: none), as gossip's tokenSpec.urgent does: a first
// report, another token, or a promotion or demotion.
func tokenUrgent(old, r *node.TokenReport) bool {
	return old == nil || old.Token != r.Token || old.Superpeer != r.Superpeer
}

// nextRepublish is the first tick of node i's feed after now.
func (s *Sim) nextRepublish(i int) time.Duration {
	g, iv := s.nodes[i].geo, s.cfg.Node.AnnounceInterval
	return g.feedStart + ((s.now-g.feedStart)/iv+1)*iv
}

// lastPublished is when node i's feed last published, counting the
// republications of its ticks, which the simulator does not run as
// events (peers hear its report while it has one): the latest tick up to
// now republished if the feed had a report then and, when it was the
// first tick after the last publication, that was at least half an
// interval before or a change was pending.
func (s *Sim) lastPublished(i int) (time.Duration, bool) {
	g, iv := s.nodes[i].geo, s.cfg.Node.AnnounceInterval
	k := (s.now - g.feedStart) / iv
	if k < 1 {
		return g.lastPub, g.published
	}
	t0 := g.feedStart + k*iv
	if g.own == nil || g.ownSince > t0 || g.published && g.lastPub >= t0 {
		return g.lastPub, g.published
	}
	first := !g.published || g.lastPub > t0-iv // t0 is the first tick after the last publication
	if first && g.published && t0-g.lastPub < iv/2 && g.pending == nil {
		return g.lastPub, g.published
	}
	return t0, true
}

// sendToken is node i's publication of r on its topics: its peers there
// hear it GossipDelay later (topics.go).
func (s *Sim) sendToken(i int, r node.TokenReport) { s.sendTokenOn(i, r, nil) }

// sendTokenOn is node i's publication of r on the topics of keys (nil:
// every topic it is on).
func (s *Sim) sendTokenOn(i int, r node.TokenReport, keys []int) {
	g := s.nodes[i].geo
	if !r.None { // (the live feed publishes nothing for it: its last report expires)
		g.lastPub, g.published = s.now, true
		if keys == nil {
			keys = s.published(i)
		} else {
			s.publishedOn(i, keys)
		}
	}
	var until time.Duration
	if r.None {
		until = s.now + s.ttl - s.randDur(s.cfg.Node.AnnounceInterval)
	}
	pub := s.now
	s.After(s.cfg.GossipDelay, func(s *Sim) {
		if !r.None {
			s.delivered(i, keys, &r, pub)
		}
		switch {
		case r.None:
			if g.heardTok != nil && g.tokUntil == 0 {
				g.tokUntil = until
			}
		case r.Released:
			g.heardTok = nil
		default:
			g.heardTok, g.tokUntil = &r, 0
		}
	})
}

// present reports whether node i's feed has node j's entries: j is alive
// and reachable, or still in i's membership view (it has not expired).
func (s *Sim) present(i, j int) bool {
	if s.nodes[j].alive && s.reachable(i, j) {
		return true
	}
	_, ok := s.comps[s.comp[i]].vis[j]
	return ok
}

// geoFeed is node i's GeoFeed: the token positions heard on its topics
// (topics.go) in its component, as gossip.Geo's Reports give them, and
// the peers it is connected to.
func (s *Sim) geoFeed(i int) node.GeoFeed {
	// Tokens: the live reports of the topics it hears (gossip.Geo.Reports),
	// a holder's newest where it hears it on two, the giver of a passed
	// token as its link names it; this node's own report at once; a
	// hostile member's forged claims while it lives and is reachable.
	g := s.nodes[i].geo
	var tokens []node.TokenPos
	add := func(j int, r *node.TokenReport) {
		tokens = append(tokens, node.TokenPos{Holder: s.nodes[j].id, Token: r.Token, Coord: r.Coord, Superpeer: r.Superpeer, Load: r.Load, Giver: r.Giver, Summary: r.Summary})
	}
	for _, j := range s.forgers {
		if s.forgedHeard(i, j) {
			for _, r := range s.nodes[j].geo.forged {
				add(j, &r)
			}
		}
	}
	if g.own != nil {
		add(i, g.own)
	}
	type heard struct {
		j   int
		rec *topicRec
	}
	var hs []heard
	var gone [][2]int
	keys := topicKeys(g.topics)
	for _, k := range keys {
		t := s.topics[k]
		if t == nil {
			continue
		}
		joined := g.joinedAt(k)
		for _, j := range t.pubs {
			if j == i {
				continue
			}
			rec, expired := s.heardOn(i, j, k, joined)
			if expired {
				gone = append(gone, [2]int{j, k})
			}
			if rec != nil {
				hs = append(hs, heard{j, rec})
			}
		}
	}
	for _, x := range gone {
		s.dropRec(x[0], x[1])
	}
	if len(keys) > 1 { // one entry a holder: the newest publication
		slices.SortFunc(hs, func(a, b heard) int { return cmp.Or(cmp.Compare(a.j, b.j), cmp.Compare(b.rec.pub, a.rec.pub)) })
		hs = slices.CompactFunc(hs, func(a, b heard) bool { return a.j == b.j })
	}
	for _, h := range hs {
		add(h.j, h.rec.rep)
	}
	slices.SortStableFunc(tokens, func(a, b node.TokenPos) int {
		return cmp.Or(cmp.Compare(a.Token.Num, b.Token.Num), cmp.Compare(a.Holder, b.Holder))
	})
	return node.GeoFeed{Tokens: tokens, Connected: s.connectedPeers(i)}
}

// stillConnected says whether node i's host is still connected to node j as far as
// j's state goes: j is alive, or crashed less than ConnLoss ago (a
// connection to a crashed peer lasts until i's host notices, as a
// live QUIC connection lasts until its idle timeout).
func (s *Sim) stillConnected(i, j int) bool {
	o := s.nodes[j]
	return o.alive || (o.crashedAt > 0 && s.now < o.crashedAt+s.connLoss(j, i))
}

// connectedPeers are the peers node i's host is connected to: its live,
// reachable routing peers and contacts (see isContact).
func (s *Sim) connectedPeers(i int) []peer.ID {
	n := s.nodes[i]
	seen := map[int]bool{}
	var out []peer.ID
	add := func(j int) {
		if j != i && !seen[j] && s.stillConnected(i, j) && s.reachable(i, j) {
			seen[j] = true
			out = append(out, s.nodes[j].id)
		}
	}
	for _, j := range n.routing {
		add(j)
	}
	for _, j := range n.contacts.peers() {
		if s.isContact(i, j) {
			add(j)
		}
	}
	return out
}

// up reports whether j answers i now: alive and reachable.
func (s *Sim) up(i, j int) bool { return s.nodes[j].alive && s.reachable(i, j) }

// oneWay is a one-way delay from i to j: half the RTT, plus the jitter.
func (s *Sim) oneWay(i, j int) time.Duration {
	return s.rtt(i, j)/2 + s.randDur(s.cfg.Jitter)
}

// back runs f for node i's current incarnation at time at (not before
// now), if it is still alive then.
func (s *Sim) back(i int, at time.Duration, f func(s *Sim)) {
	inc := s.nodes[i].inc
	s.At(at, func(s *Sim) {
		if n := s.nodes[i]; n.alive && n.inc == inc {
			f(s)
		}
	})
}

// geoPing answers a ping by the oracle: the least of three pings, so the
// matrix RTT plus the least of three jitters, three RTTs later, with the
// peer's coordinate (pingCoord); or an error after GeoTimeout when the
// peer is down or unreachable.
func (s *Sim) geoPing(i int, p peer.ID) {
	s.stats.GeoPings++
	sent := s.now
	fail := func(s *Sim) {
		s.back(i, sent+s.cfg.GeoTimeout, func(s *Sim) { s.step(i, node.PingDone{Peer: p, Err: errGeoTimeout}) })
	}
	j, ok := s.indexOf(p)
	if !ok || !s.up(i, j) {
		fail(s)
		return
	}
	s.contact(i, j)
	d := s.rtt(i, j)
	jit := s.randDur(s.cfg.Jitter)
	for range 2 {
		jit = min(jit, s.randDur(s.cfg.Jitter))
	}
	rtt := d + jit + s.randDur(s.nodes[i].geo.load)
	s.back(i, s.now+3*rtt, func(s *Sim) {
		if !s.up(i, j) {
			fail(s)
			return
		}
		s.step(i, node.PingDone{Peer: p, RTT: rtt, Coord: s.pingCoord(j)})
	})
}

// pingCoord is the coordinate node j's ping answer carries, as the live
// node's (overlay's rtt.go): the one its machine last reported
// (GeoState), or its lie (LieCoord); nil before its first report.
func (s *Sim) pingCoord(j int) *coordinate.Coordinate {
	g := s.nodes[j].geo
	switch {
	case g == nil:
		return nil
	case g.lie != nil:
		return g.lie.Clone()
	case g.state != nil && g.state.Coord != nil:
		return g.state.Coord.Clone()
	}
	return nil
}

// geoPass carries out a token pass (see geoRequest): the recipient's
// machine decides (TokenOffered, GeoAnswer).
func (s *Sim) geoPass(i int, p node.TokenPass) {
	s.stats.GeoPasses++
	s.geoRequest(i, p.To,
		func(m *node.Machine, _ int, now time.Time, from peer.ID) {
			m.Step(now, node.TokenOffered{From: from, Token: p.Token})
		},
		func(a node.GeoAnswer, ok bool) node.Input {
			return node.PassDone{To: p.To, Token: p.Token, OK: ok && a.Yes}
		})
}

// ForgeTokens makes node i a hostile member that claims, on the backbone
// and its own token topics, the tokens of reports besides its machine's own (issue 19,
// finding 3: "I hold both tokens, one pass above their holders"): the
// peers on those topics hear them, as gossip delivers (forgedHeard),
// while i lives and is reachable. Nil stops the claims.
func (s *Sim) ForgeTokens(i int, reports []node.TokenReport) {
	g := s.nodes[i].geo
	if g == nil {
		return
	}
	at, found := slices.BinarySearch(s.forgers, i)
	switch {
	case len(reports) == 0:
		if found {
			s.forgers = slices.Delete(s.forgers, at, at+1)
		}
	case !found:
		s.forgers = slices.Insert(s.forgers, at, i)
		g.forgedSince = s.now
	}
	g.forged, g.forgedAt = slices.Clone(reports), s.now
}

// ForgePass has node from pass token t to node to, as a hostile member
// that never held it would: to's machine gets the pass one way later
// (TokenOffered), and takes it or not. It reports to the caller, through
// done (when not nil), to's answer.
func (s *Sim) ForgePass(from, to int, t geometric.Token, done func(node.GeoAnswer)) {
	if !s.up(from, to) {
		return
	}
	id := s.nodes[from].id
	s.At(s.now+s.oneWay(from, to), func(s *Sim) {
		if !s.up(from, to) {
			return
		}
		m := s.nodes[to].m
		m.Step(s.wall(), node.TokenOffered{From: id, Token: t})
		ans := m.GeoAnswer()
		s.carryOut(to)
		if done != nil {
			done(ans)
		}
	})
}

// geoAttach carries out an attach request (see geoRequest): the
// superpeer's machine gets a fresh feed and the request (GeoFeed, then
// in from i: the report for the search on measured RTTs, the asker's
// coordinate and what it says of itself), and decides (GeoAnswer, with
// the search's candidates, some members' coordinates and the demoted
// members).
func (s *Sim) geoAttach(i int, p peer.ID, in node.AttachAsked) {
	s.stats.GeoAttaches++
	s.geoRequest(i, p, s.attachAsk(in),
		func(a node.GeoAnswer, ok bool) node.Input {
			if !ok {
				return node.AttachDone{To: p, Err: errGeoTimeout}
			}
			if g := s.nodes[i].geo; s.hostile[i].lies && a.Yes {
				if g.asked == nil {
					g.asked = map[peer.ID][]peer.ID{}
				}
				g.asked[p] = slices.Clone(a.Candidates)
			}
			return a.Done(p)
		})
}

// geoDetach tells superpeer p that node i left it (GeoReady.Detach): an
// attach request that says so, carried as geoAttach's is; its answer
// (no) tells i nothing, and nothing comes back.
func (s *Sim) geoDetach(i int, p peer.ID, c *coordinate.Coordinate) {
	s.stats.GeoAttaches++
	s.geoRequest(i, p, s.attachAsk(node.AttachAsked{Coord: c, Leaving: true}), nil)
}

// attachAsk is geoRequest's ask for the attach request in: the
// superpeer's machine gets a fresh feed, then in from its sender.
func (s *Sim) attachAsk(in node.AttachAsked) func(m *node.Machine, j int, now time.Time, from peer.ID) {
	return func(m *node.Machine, j int, now time.Time, from peer.ID) {
		m.Step(now, s.geoFeed(j))
		in.From = from
		m.Step(now, in)
	}
}

// geoRequest carries out one request stream of node i to peer to: the
// request reaches to's machine (node j) one way later (ask steps it there, and its
// GeoAnswer is the answer), and the answer comes back one way later as
// done(answer, true). A request to a peer down or unreachable, or whose
// answer is lost (Loss) or cut off on the way back, comes back as
// done(_, false) GeoTimeout after it was sent. With done nil nothing
// comes back (a request whose sender reads no answer).
func (s *Sim) geoRequest(i int, to peer.ID, ask func(m *node.Machine, j int, now time.Time, from peer.ID), done func(a node.GeoAnswer, ok bool) node.Input) {
	sent := s.now
	fail := func(s *Sim) {
		if done == nil {
			return
		}
		s.back(i, max(s.now, sent+s.cfg.GeoTimeout), func(s *Sim) { s.step(i, done(node.GeoAnswer{}, false)) })
	}
	j, ok := s.indexOf(to)
	if !ok || !s.up(i, j) {
		fail(s)
		return
	}
	s.contact(i, j)
	from := s.nodes[i].id
	s.At(s.now+s.oneWay(i, j), func(s *Sim) {
		if !s.up(i, j) {
			fail(s)
			return
		}
		m := s.nodes[j].m
		ask(m, j, s.wall(), from)
		ans := m.GeoAnswer()
		s.carryOut(j)
		if done == nil {
			return
		}
		s.back(i, s.now+s.oneWay(j, i), func(s *Sim) {
			if !s.up(i, j) || s.lost() {
				fail(s) // the answer is lost with the connection
				return
			}
			s.step(i, done(ans, true))
		})
	})
}

// lost draws whether a stream's answer is lost (Loss): the asker times
// out although the receiver took the request.
func (s *Sim) lost() bool {
	if s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
		s.stats.Lost++
		return true
	}
	return false
}

// scheduleGeo schedules node i's next geometric tick at its machine's
// GeoNext, as the live loop resets its timer after every Ready.
func (s *Sim) scheduleGeo(i int) {
	n := s.nodes[i]
	g := n.geo
	if g == nil || !n.alive {
		return
	}
	next := n.m.GeoNext()
	if next.IsZero() {
		return
	}
	t := max(next.Sub(Epoch), s.now)
	if t == s.now && g.lastTick == s.now {
		t = s.now + time.Millisecond // never twice at one instant
	}
	if g.tickAt == t {
		return
	}
	g.tickAt = t
	inc := n.inc
	s.At(t, func(s *Sim) {
		if n.alive && n.inc == inc && g.tickAt == t {
			g.tickAt, g.lastTick = -1, s.now
			s.tick(i)
		}
	})
}

// GeoState is node i's last geometric state (nil before its first).
func (s *Sim) GeoState(i int) *node.GeoState {
	if g := s.nodes[i].geo; g != nil {
		return g.state
	}
	return nil
}

// GeoConverged reports whether every live node is covered (attached to a
// live superpeer it can reach), the live superpeers hold distinct tokens,
// and there are S of them (or as many as live nodes).
func (s *Sim) GeoConverged() bool {
	x := s.Take()
	want := min(s.cfg.Node.Geo.Tokens.Tokens, x.Live)
	return x.Live > 0 && x.Covered == x.Live && x.Split == 0 && x.Claimers == want
}

// GeoQuality is the geometric placement's quality at one instant, in
// matrix RTTs from the ordinary nodes to their superpeers.
type GeoQuality struct {
	// Superpeers live; Attached ordinary nodes covered (Covered), Others
	// the live ordinary nodes that are not.
	Superpeers, Attached, Others int
	// Mean is the mean RTT from the attached nodes to their superpeer.
	Mean time.Duration
	// Ideal is the mean with the same superpeers and every live ordinary
	// node attached to the nearest with room by the matrix (the
	// placement's quality apart from the attachment's).
	Ideal time.Duration
	// Random is the mean of Ideal over random placements of as many
	// superpeers among the live nodes.
	Random time.Duration
}

// Ratio is Mean over Random: below 1 is better than random placement.
func (q GeoQuality) Ratio() float64 {
	if q.Random <= 0 {
		return 0
	}
	return float64(q.Mean) / float64(q.Random)
}

// IdealRatio is Ideal over Random.
func (q GeoQuality) IdealRatio() float64 {
	if q.Random <= 0 {
		return 0
	}
	return float64(q.Ideal) / float64(q.Random)
}

// GeoQuality measures the placement now, against draws random placements
// drawn from a source of their own (seeded by the seed): measuring does
// not change the run.
func (s *Sim) GeoQuality(draws int) GeoQuality {
	var q GeoQuality
	var live, sps []int
	var sum time.Duration
	for i, n := range s.nodes {
		if !n.alive {
			continue
		}
		live = append(live, i)
		switch {
		case n.state.Role == node.RoleSuperpeer:
			q.Superpeers++
			sps = append(sps, len(live)-1)
		case s.Covered(i):
			q.Attached++
			j, _ := s.indexOf(n.state.Superpeer)
			sum += s.rtt(i, j)
		default:
			q.Others++
		}
	}
	if q.Attached > 0 {
		q.Mean = sum / time.Duration(q.Attached)
	}
	if len(sps) == 0 {
		return q
	}
	capacity := s.cfg.Node.Geo.Tokens.Capacity
	dist := func(a, b int) float64 { return float64(s.rtt(live[a], live[b])) }
	ideal := func(sp []int) time.Duration {
		at, err := geometric.AttachAllBy(len(live), dist, sp, capacity)
		if err != nil {
			return 0
		}
		var sum float64
		k := 0
		for a, b := range at {
			if b >= 0 && a != b {
				sum += dist(a, b)
				k++
			}
		}
		if k == 0 {
			return 0
		}
		return time.Duration(sum / float64(k))
	}
	q.Ideal = ideal(sps)
	rng := rand.New(rand.NewPCG(s.cfg.Seed, 0x6e6f646573696d))
	var rsum time.Duration
	for range draws {
		rsum += ideal(rng.Perm(len(live))[:len(sps)])
	}
	if draws > 0 {
		q.Random = rsum / time.Duration(draws)
	}
	return q
}

// GeoCoordError is the median relative error of the RTTs the live nodes'
// coordinates predict against the matrix's, over all pairs of live nodes
// with a coordinate (as the testnet's report measures it); 0 without any
// pair.
func (s *Sim) GeoCoordError() float64 {
	type nc struct {
		i int
		c *coordinate.Coordinate
	}
	var ns []nc
	for i, n := range s.nodes {
		if n.alive {
			if c := n.m.GeoState().Coord; c != nil {
				ns = append(ns, nc{i, c})
			}
		}
	}
	var errs []float64
	for a := range ns {
		for b := a + 1; b < len(ns); b++ {
			rtt := s.rtt(ns[a].i, ns[b].i)
			if rtt <= 0 {
				continue
			}
			pred := geometric.Distance(ns[a].c, ns[b].c) * float64(time.Second)
			errs = append(errs, math.Abs(pred-float64(rtt))/float64(rtt))
		}
	}
	if len(errs) == 0 {
		return 0
	}
	return stats.Sort(errs).Median()
}

// geoView gives node i's machine its view as a live geometric node's
// membership does (overlay/geomembership.go): no topic of the swarm, only
// its cluster as its state lists it (GeoState.Members: itself and its
// superpeer, or a superpeer's members), the superpeer flagged, its own
// entry with its own flag (flapping); its mates' flags come with the
// attach answers (GeoAnswer.Demoted), not in the view. With an election
// the entries carry the RTTs, as the live node's own pings give them.
// The view is given when it changes.
func (s *Sim) geoView(i int) {
	n := s.nodes[i]
	st := n.m.GeoState()
	sp := st.Superpeer
	if st.Role == node.RoleSuperpeer {
		sp = n.id
	}
	ids := slices.Clone(st.Members)
	if !slices.Contains(ids, n.id) {
		ids = append(ids, n.id)
	}
	slices.Sort(ids)
	g := n.geo
	if g.viewIDs != nil && sp == g.viewSP && n.flapping == g.viewFlap && slices.Equal(ids, g.viewIDs) {
		return
	}
	g.viewIDs, g.viewSP, g.viewFlap = ids, sp, n.flapping
	n.viewAt = s.now
	view := make([]node.Member, 0, len(ids))
	for _, p := range ids {
		j, ok := s.indexOf(p)
		if !ok {
			continue
		}
		e := node.Member{ID: p, Key: s.nodes[j].key, Superpeer: p == sp}
		if j == i {
			e.Flapping = n.flapping
		} else if s.cfg.Node.Election != "" {
			e.RTT = s.rtt(i, j)
		}
		view = append(view, e)
	}
	s.stats.Views++
	n.m.Step(s.wall(), node.View{Members: view})
	s.carryOut(i)
}
