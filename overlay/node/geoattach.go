package node

import (
	"log/slog"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// An attachment round keeps an ordinary peer attached to a superpeer with
// room, and a superpeer's member list fresh.
//
// An ordinary peer stays with its superpeer while no superpeer with room is
// clearly nearer (by a tenth and by LiveMargin at the network's scale:
// superpeers are promoted one by one, and the first must not keep
// everyone; and nearness is noisy). It renews the attachment once per
// announce interval, well within attachTTL: a request is a stream, and a
// hundred peers asking every round loaded the host enough to time their
// own requests out. A superpeer that does not answer is kept until
// attachTTL has passed since its last yes, whether or not its token report
// is in our view: a slow answer or a late report is not a lost superpeer.
//
// A round asks one superpeer at a time (GeoReady.Attach, answered by
// AttachDone): the cluster's elected successor of the current superpeer,
// if any; else the current one; else the best three with room, in turn.
// The token rounds do not wait for it: an attach request is a stream round
// trip, or up to three, which on a loaded host with PlanetLab latencies
// takes seconds (measured: 2.5 to 5.5 s with 100 nodes on two cores). The
// next round starts a jittered token interval after this one ends.
type attachRound struct {
	now     time.Time // when it started: the time of a yes
	self    *coordinate.Coordinate
	current peer.ID   // the superpeer at the start
	since   time.Time // its last yes
	sps     []geometric.Superpeer
	i       int // current's index in sps, -1 when it reports no token
	stage   int
	asked   peer.ID
	tries   int
	// moved is set once the round asked the holder its cluster's token
	// moved to (movedHolder): it asks it once a round.
	moved bool
}

// Stages of an attachment round: which request is in flight.
const (
	askSuccessor = iota
	askCurrent
	askBest
)

// startAttach starts an attachment round.
func (g *geoMachine) startAttach(now time.Time) {
	super := g.holder.Superpeer()
	expiry := g.attachTTL()
	for p, seen := range g.members {
		if now.Sub(seen) > expiry {
			delete(g.members, p)
			delete(g.memberCoord, p)
			delete(g.memberDemoted, p)
			delete(g.memberLeft, p)
		}
	}
	g.round = &attachRound{now: now}
	if super {
		g.attached = g.self()
		g.searchRound(now)
		g.attachEnd(now)
		return
	}
	g.search, g.summary = nil, nil
	clear(g.members) // no longer a superpeer: nobody is attached
	clear(g.memberCoord)
	clear(g.memberDemoted)
	clear(g.memberLeft)
	if g.attached == g.self() {
		g.attached = "" // a superpeer no longer: it must attach like anyone
	}
	r := g.round
	r.self, r.current, r.since = g.client.Coordinate(), g.attached, g.attachOK
	for _, tp := range g.positions() {
		if tp.Superpeer && tp.Holder != g.self() {
			r.sps = append(r.sps, geometric.Superpeer{ID: geometric.ID(tp.Holder), Coord: tp.Coord, Load: tp.Load, RTT: g.rtt[tp.Holder]})
		}
	}
	// A lost superpeer this node left (abandon) is neither kept nor asked
	// for one attachTTL.
	if g.abandoned != "" && now.Sub(g.abandonedAt) < g.attachTTL() {
		r.sps = slices.DeleteFunc(r.sps, func(s geometric.Superpeer) bool { return s.ID == geometric.ID(g.abandoned) })
		if r.current == g.abandoned {
			r.current = ""
		}
	}
	// The cluster elected another in place of the current superpeer (see
	// election): go to it as soon as it reports the token.
	// Its claim is what counts here, believed or not yet (the lost
	// holder's report may not have expired): the election vouches for it.
	l := g.m.leaderOf(r.current)
	claims := slices.ContainsFunc(g.claims, func(tp TokenPos) bool { return tp.Holder == l && tp.Superpeer })
	if r.current != "" && l != "" && l != r.current && l != g.self() && (r.reports(l) || claims) {
		g.ask(r, askSuccessor, l)
		return
	}
	g.attachCurrent(now, r)
}

// reports says whether p reports a superpeer's token.
func (r *attachRound) reports(p peer.ID) bool {
	return slices.ContainsFunc(r.sps, func(s geometric.Superpeer) bool { return s.ID == geometric.ID(p) })
}

func (g *geoMachine) ask(r *attachRound, stage int, p peer.ID) {
	r.stage, r.asked = stage, p
	g.out.Attach = append(g.out.Attach, p)
	g.out.AttachCoord = g.client.Coordinate()
	g.out.AttachPrivate, g.out.AttachFlapping = g.m.private, g.m.el != nil && g.m.el.selfFlapping
	if d := g.nearHeld(r.now, p); d != 0 {
		if g.out.AttachNear == nil {
			g.out.AttachNear = map[peer.ID]uint64{}
		}
		g.out.AttachNear[p] = d
	}
	if rtts, ok := g.swapReport(p); ok {
		if g.out.AttachRTTs == nil {
			g.out.AttachRTTs = map[peer.ID][]time.Duration{}
		}
		g.out.AttachRTTs[p], g.swapSent = rtts, true
		g.out.AttachSecond = g.nextSuperpeer(p)
	}
}

// attachCurrent stays with the current superpeer (renewing the
// attachment once per announce interval) unless another is clearly
// nearer.
func (g *geoMachine) attachCurrent(now time.Time, r *attachRound) {
	if r.current == "" {
		g.attachBest(now, r)
		return
	}
	r.i = slices.IndexFunc(r.sps, func(s geometric.Superpeer) bool { return s.ID == geometric.ID(r.current) })
	if to := g.movedHolder(r); to != "" {
		r.moved = true
		g.note(slog.LevelInfo, "geometric: the token of our superpeer's cluster is held by another superpeer; asking it", "current", r.current, "token", g.clusterToken, "holder", to)
		g.ask(r, askSuccessor, to)
		return
	}
	stay := true
	if r.i >= 0 {
		others := slices.Delete(slices.Clone(r.sps), r.i, r.i+1)
		if best, err := geometric.Attach(r.self, others, g.tc.Capacity); err == nil {
			j := slices.IndexFunc(others, func(s geometric.Superpeer) bool { return s.ID == best })
			// Measured against measured only: coordinates estimate some
			// RTTs at a tenth of their value, and a move on such an
			// estimate is undone by the next measurement. pickPingTarget
			// measures superpeers first.
			b, c := others[j].RTT, r.sps[r.i].RTT
			stay = b <= 0 || c <= 0 || b*11/10+g.length(LiveMargin) >= c
			if !stay {
				g.note(slog.LevelInfo, "geometric: a superpeer is clearly nearer", "current", r.current, "current_rtt", c,
					"nearer", peer.ID(best), "nearer_rtt", b)
			}
		}
	}
	if !stay {
		g.attachBest(now, r)
		return
	}
	if r.i >= 0 && r.now.Sub(r.since) < g.m.cfg.AnnounceInterval {
		// Not due: renewed less than an announce interval ago. A report
		// ready goes at once all the same (geoswap.go), in a request of
		// its own at most once per announce interval: a superpeer that
		// named a new list in every answer would otherwise have its
		// members ask, and ping its candidates, at every round.
		if _, report := g.swapReport(r.current); !report || now.Sub(g.early) < g.m.cfg.AnnounceInterval {
			g.attachEnd(now)
			return
		}
		g.early = now
	}
	g.ask(r, askCurrent, r.current)
}

// moved takes tp, a report or a claim of the token of this node's
// cluster by a peer other than its lost holder, when this node's own
// election named it and found the holder lost (election): a mate of the
// cluster that holds it as a superpeer is the one the cluster elected
// before this node's election (which that one left, leading its new
// cluster) named this node. The next attachment round asks it
// (movedHolder), without waiting for the lost holder's answer. The claim
// need not be believed yet (the lost holder's report lasts three
// announce intervals, and another's claim on its token is not believed
// meanwhile): the cluster's election, which found the holder silent and
// whose member the claimer is, vouches for it, as it vouches for the
// successor that startAttach asks. A member whose election elected
// another, or is electing, takes such a claim too (election): its
// election found the holder silent as well, and the claimer is in the
// roster the holder gave it; a forger among the mates gains nothing it
// could not have before, when the elected one followed its claim and the
// others followed the elected one.
func (g *geoMachine) moved(now time.Time, tp TokenPos, holder peer.ID, members []peer.ID) {
	if !tp.Superpeer || tp.Holder == g.self() || g.attached != holder || g.movedTo == tp.Holder {
		return
	}
	if !slices.Contains(members, tp.Holder) {
		g.abandon(now, holder)
		return
	}
	g.movedTo, g.movedFrom = tp.Holder, holder
	if r := g.round; r != nil && r.stage == askCurrent && r.asked == holder {
		g.round = nil // stop waiting for the lost one's answer
	}
	g.nextAttch = now
}

// abandon leaves holder, the superpeer of this node's cluster, when the
// cluster's election no longer names it (it found the holder silent, as
// for moved) and the token of the cluster is claimed by a peer outside
// the roster holder gave this node: a mate that joined the cluster after
// this node's last renewal took it over, or a forger. The claim is not
// followed; the attachment rounds of the next attachTTL ask the nearest
// other superpeer with room instead (startAttach), and the claim is
// followed like any superpeer's once believed. Without it, a member whose
// roster lacked the successor waited for the lost holder's report to
// expire and its attachTTL: 30 s uncovered, against 3 detection timeouts
// (TestGeoCrashTakeoverOutlivedConnection, seed 0, once the search pinned
// its tokens: the crashed superpeer had taken a new member just before).
func (g *geoMachine) abandon(now time.Time, holder peer.ID) {
	if g.abandoned == holder && now.Sub(g.abandonedAt) < g.attachTTL() {
		return
	}
	g.abandoned, g.abandonedAt = holder, now
	g.note(slog.LevelInfo, "geometric: our superpeer is lost and a peer outside our roster claims its token; attaching elsewhere", "superpeer", holder)
	if r := g.round; r != nil && r.stage == askCurrent && r.asked == holder {
		g.round = nil
	}
	g.nextAttch = now
}

// movedHolder returns the mate that took over the token of the current
// superpeer, lost, as this node's election found (moved); the member
// asks it once a round. Without the rule a member whose own election
// named itself waited for the lost superpeer's attachTTL: in peer testnet
// --procs (12 nodes, bully), the elected mate took the token over and
// left the old cluster, whose election then named another member; that
// member, the token having moved on, took nothing over, and its requests
// to the killed superpeer (whose QUIC connection lasts 30 s) timed out
// until attachTTL had passed: 25 s of failover against 4 to 6 s for the
// others. (A rule on believed reports alone sent members that had
// already followed the successor back to the lost holder, whose report
// outlives it and stays believed over the successor's claim:
// TestGeoCrashTakeoverOutlivedConnection, 25.5 s.)
func (g *geoMachine) movedHolder(r *attachRound) peer.ID {
	if to := g.movedTo; !r.moved && r.current != "" && g.movedFrom == r.current && to != "" && to != r.current && to != g.self() {
		return to
	}
	return ""
}

// attachBest asks the nearest superpeer with room, up to three of them.
func (g *geoMachine) attachBest(now time.Time, r *attachRound) {
	if r.tries < 3 {
		if best, err := geometric.Attach(r.self, r.sps, g.tc.Capacity); err == nil {
			r.tries++
			g.ask(r, askBest, peer.ID(best))
			return
		}
	}
	if r.current != "" && r.now.Sub(r.since) < g.attachTTL() && r.reports(r.current) {
		g.attachEnd(now) // none better would take us: keep the current one
		return
	}
	g.attached = ""
	g.attachEnd(now)
}

// attachDone takes the answer to the round's request.
func (g *geoMachine) attachDone(now time.Time, in AttachDone) {
	r := g.round
	if r == nil || r.asked == "" || in.To != r.asked {
		return
	}
	r.asked = ""
	if in.OK {
		g.matesSent(now, in.To, in.Mates, in.Coords)
		g.mates, g.matesOf = slices.Clone(in.Mates), in.To
		clear(g.mateDemoted)
		for _, p := range in.Demoted {
			if slices.Contains(in.Mates, p) {
				g.mateDemoted[p] = true
			}
		}
		g.swapAsked(in.To, in.Candidates)
		g.relayed(now, in.To, in.Nearby, in.NearbyHeld, in.Rotated, in.Rehome)
		g.sizeHeard(in.To, in.Size, in.Mates)
	}
	switch r.stage {
	case askSuccessor:
		if in.OK {
			g.attachTo(now, in.To)
			return
		}
		g.attachCurrent(now, r)
	case askCurrent:
		if in.OK {
			g.attachOK = r.now
			g.attachEnd(now)
			return
		}
		// With an election the cluster may still elect a successor to
		// take the token over (see election): wait for it as long as
		// place does.
		if in.Err != nil && r.now.Sub(r.since) < max(g.attachTTL(), 5*g.m.Detection()) {
			g.attachEnd(now) // no answer yet, not yet a lost superpeer
			return
		}
		g.note(slog.LevelInfo, "geometric: the superpeer let us go", "superpeer", r.current, "refused", in.Err == nil, "err", in.Err,
			"reported", r.i >= 0, "last_yes_ago", r.now.Sub(r.since))
		g.attachBest(now, r)
	case askBest:
		if in.OK {
			g.attachTo(now, in.To)
			return
		}
		r.sps = slices.DeleteFunc(r.sps, func(s geometric.Superpeer) bool { return s.ID == geometric.ID(in.To) })
		if in.Err != nil {
			// No answer within the stream deadline (10 s): the list was
			// made that long ago or more, and may name others across a
			// partition whose reports have not expired. The next round
			// starts over from the feed then. Without this a cut-off node
			// asked three unreachable superpeers, one after the other,
			// and was unattached for 30 s after a superpeer on its side
			// was promoted (TestGeoPartitionSideWithoutSuperpeer, no
			// election, seed 2).
			r.tries = 3
		}
		g.attachBest(now, r)
	}
}

// attachTo ends the round attached to p, which said yes, and tells the
// superpeer the node leaves for it, if any, that it left (GeoReady.Detach).
func (g *geoMachine) attachTo(now time.Time, p peer.ID) {
	if old := g.attached; old != "" && old != p && old != g.self() {
		g.out.Detach = append(g.out.Detach, old)
		g.out.AttachCoord = g.client.Coordinate()
	}
	g.attached, g.attachOK = p, g.round.now
	g.attachEnd(now)
}

// attachEnd ends the round: the node's state, and the next round.
func (g *geoMachine) attachEnd(now time.Time) {
	g.round = nil
	g.update(now)
	g.nextAttch = now.Add(g.jittered())
}

// leaderOf returns the election's leader when it runs for the cluster
// whose first-ranked member is first (the geometric strategy's token
// holder), and "" otherwise.
func (m *Machine) leaderOf(first peer.ID) peer.ID {
	if m.el == nil || m.el.first != first {
		return ""
	}
	return peer.ID(m.el.state.Leader)
}

// Elections with the geometric strategy (Config.Election). A cluster is a
// token holder and the peers attached to it; members learn the cluster
// from the superpeer's answer to their attach requests. Its election key
// is TokenKey of the token's number, and its rank puts the holder first,
// then XOR closeness to the key: while the holder lives, the election
// names it (its heartbeats are the members' failure detector). How the two
// mechanisms hand over to each other:
//
//   - The token dynamics place the superpeers; the election follows: a
//     holder that passes its token leaves the cluster, and the members
//     attach elsewhere and rebuild their machines for the new cluster.
//   - When the holder dies (its heartbeats stop, or its connection drops),
//     the members elect the next by rank, and the winner takes over the
//     token (geometric.Holder.Takeover: above every pass counter heard, and
//     promoted at once), as long as nobody else reports the token and the
//     old holder is not connected (GeoFeed.Connected, less the Conn
//     losses since). The members then attach to it, since the election
//     names it. The token dynamics may move it on from there.
//   - A token that no cluster takes over (its holder had no members) is
//     re-homed as before, after three token intervals or five
//     failure-detection timeouts, whichever is longer (see place).
func (g *geoMachine) election(now time.Time) {
	awaiting := false // a member waiting for its elected leader's claim (await)
	defer func() {
		if !awaiting {
			g.awaitSince = time.Time{}
		}
	}()
	e := g.m.el
	if e == nil {
		return
	}
	tok, held := g.holder.Holding()
	var holder peer.ID
	var members []peer.ID
	switch {
	case held:
		holder, g.clusterToken, g.clusterOf, members = g.self(), tok.Num, g.self(), g.cluster()
	case g.attached != "" && g.matesOf == g.attached:
		holder, members = g.attached, slices.Clone(g.mates)
		for _, tp := range g.feed.Tokens {
			if tp.Holder == holder {
				g.clusterToken, g.clusterOf = tp.Token.Num, holder
			}
		}
		if g.clusterOf != holder {
			// Attached to a superpeer whose report the node has not
			// heard yet (a member hears it on its new cluster's topic,
			// at the superpeer's next republication): the token it
			// knows is its last cluster's. Keyed on it, the election
			// took the last superpeer's claim on it for a mate's
			// takeover of this cluster, and abandoned the new
			// superpeer (12 processes on loopback: members hopped
			// between two live superpeers every 15 s, and the network
			// never held still; TestGeoMoveKeepsNewCluster). No
			// election until the node knows the cluster's token.
			g.clusterToken = -1
			e.leave()
			return
		}
		if !slices.Contains(members, g.self()) {
			members = append(members, g.self())
		}
	default:
		// In no cluster (attached to no superpeer, holding no token):
		// no election either, or the node goes on leading the last
		// cluster it was in (found by nodesim's geometric mode: with more
		// nodes than the superpeers' capacity, 23 of 43 unattached nodes
		// led stale elections, 220 heartbeats a second in all).
		e.leave()
		return
	}
	num := g.clusterToken
	if num < 0 {
		return // our superpeer's token is not known yet
	}
	seen, _ := g.tokens.seen(num)
	slices.Sort(members)
	e.geoCluster(now, GeoCluster{Key: TokenKey(g.cfg.Network, num), Members: members, Holder: holder})
	leader := e.geoSP
	if r := g.round; r != nil && r.stage == askCurrent && r.asked == holder && leader != "" && leader != holder && leader != g.self() &&
		slices.ContainsFunc(g.claims, func(tp TokenPos) bool { return tp.Holder == leader && tp.Superpeer }) {
		// The cluster elected leader in place of the superpeer this
		// member is asking, and it claims a token: stop waiting for the
		// lost one's answer (up to the stream deadline, 10 s; by then
		// the successor, leading a new cluster, no longer heartbeats the
		// old one and the members elect again) and ask the successor now.
		g.round = nil
		g.nextAttch = now
	}
	t := geometric.Rehomed(num, seen)
	if el := peer.ID(e.state.Leader); el != holder && el != g.self() && !held && holder != g.self() {
		// The election no longer names the holder (it elected another
		// member, or it is electing): when a mate took the token over
		// (not necessarily the leader: the rosters of one cluster differ,
		// and two parts of it may elect two), follow it as the leader
		// does (moved). Without the rule the members of a leader that
		// had followed the token on lost their leader's heartbeats and
		// elected the next, which followed it on in turn: a chain of
		// elections, and bully candidates that waited 12 s for a
		// coordinator from mates that had left; 27 s (13.5 detection
		// timeouts) before the last of 39 members was covered
		// (TestGeoCrashTakeoverOutlivedConnection, seed 6).
		if tp, ok := g.movedClaim(num, holder, t); ok {
			g.moved(now, tp, holder, members)
			return
		}
		if el != "" {
			g.await(now)
			awaiting = true
		}
		if el == "" && !g.selfDemoted() {
			// Electing: probe the holder now (lost), so that the winner
			// has its answer, or its silence, when the election ends,
			// rather than a detection timeout after it.
			g.lost(now, holder)
		}
		return
	}
	if leader != g.self() || held || holder == g.self() || g.selfDemoted() {
		return // (a private or flapping node takes no token, not even as the cluster's leader)
	}
	if lost, at := g.lost(now, holder); !lost {
		// A probe in flight: decide when its silence counts, not at the
		// next token round, up to a token interval later.
		if !at.IsZero() {
			g.recheck = at
		}
		return
	}
	if tp, ok := g.movedClaim(num, holder, t); ok {
		g.moved(now, tp, holder, members)
		return // the token has moved on, or another took it over already: no takeover
	}
	outs, err := g.holder.Takeover(t, now)
	if err != nil {
		g.note(slog.LevelDebug, "geometric: take over the token of the lost superpeer", "token", num, "err", err)
		return
	}
	g.link, g.giver, g.placed = nil, "", &placement{num: num, at: now, replaced: holder, mates: slices.Clone(members)}
	g.attached, g.attachOK = g.self(), now
	g.note(slog.LevelInfo, "geometric: elected to take over the token of the lost superpeer", "token", num, "lost", holder)
	g.carryOut(now, outs, func(now time.Time) {
		g.publishToken()
		g.update(now)
	})
}

// await makes a member whose cluster elected a leader other than its
// lost holder look for the leader's claim on the token at every election
// tick, for two detection timeouts, rather than at its next token round:
// the claim (the leader's token report) comes by gossip a moment after the
// leader took the token over, and a token round later (up to a token
// interval, 0.6 detection timeouts at the testnet's settings) was most of
// what a member's failover waited for after the election
// (TestGeoTakeoverFollowedAtOnce).
func (g *geoMachine) await(now time.Time) {
	if g.awaitSince.IsZero() {
		g.awaitSince = now
	}
	if now.Sub(g.awaitSince) < 2*g.m.Detection() {
		g.recheck = now.Add(g.m.cfg.ElectionTick)
	}
}

// movedClaim returns a report of token num by another than its lost
// holder, believed, or a claim (not believed while the lost holder's
// report lasts) at the counter of a takeover t or above: another took it
// over already.
func (g *geoMachine) movedClaim(num int, holder peer.ID, t geometric.Token) (TokenPos, bool) {
	for _, tp := range g.feed.Tokens {
		if tp.Token.Num == num && tp.Holder != holder {
			return tp, true
		}
	}
	for _, tp := range g.claims {
		if tp.Token.Num == num && tp.Holder != holder && tp.Holder != g.self() && tp.Token.Seq >= t.Seq {
			return tp, true
		}
	}
	return TokenPos{}, false
}

// lost says whether the holder that the election replaced is lost: not
// connected, or connected and silent: it did not answer a ping within a
// detection timeout. A connection outlives a crashed peer: a QUIC
// connection to a process killed with SIGKILL stays open until its idle
// timeout (30 s in go-libp2p), and the takeover waited for it (peer
// testnet --procs, 12 nodes, bully: failover 23 s against a detection
// timeout of 1.6 s). So while the connection lasts, the machine pings the
// holder, once per detection timeout, and takes the token over when no
// answer came within one: a holder alive enough to answer keeps its token.
// The members probe it as soon as their election runs (election), not
// when it has ended: the winner then takes over at once, or a detection
// timeout after the probe, rather than a detection timeout after its win
// (TestGeoCrashTakeoverOutlivedConnection: the token held again after
// 1.1 to 2.5 detection timeouts over seeds 0 to 7, against 2.3 to 3.1).
// When the holder is not lost yet and a probe of it is in flight, at is
// when the probe's silence will count (election asks for a tick then).
func (g *geoMachine) lost(now time.Time, holder peer.ID) (lost bool, at time.Time) {
	if !g.connected[holder] {
		return true, time.Time{}
	}
	if g.lostProbe != holder {
		g.lostProbe, g.lostProbeAt, g.lostSilent = holder, time.Time{}, false
	}
	d := g.m.Detection()
	if pp := g.pings[holder]; pp != nil && pp.lost && now.Sub(g.lostProbeAt) >= d {
		g.lostSilent = true // the shell's ping deadline is longer; a detection timeout is the election's own
	}
	if g.lostSilent && now.Sub(g.lostProbeAt) < 2*d {
		return true, time.Time{}
	}
	// Silence older than that is no news: the members probe the holder
	// while they elect (election), and a ping missed then, or when the
	// member had just attached, must not decide a takeover much later
	// (TestGeoTakeover, connected and answering).
	g.lostSilent = false
	if g.lostProbeAt.IsZero() || now.Sub(g.lostProbeAt) >= d {
		g.lostProbeAt = now
		g.ping(holder).lost = true
	}
	if pp := g.pings[holder]; pp != nil && pp.lost {
		return false, g.lostProbeAt.Add(d)
	}
	return false, time.Time{}
}
