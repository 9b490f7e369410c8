package node

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The token reports ride on a backbone that only superpeers and token
// holders read (issue 20: an ordinary peer's cost must follow its
// cluster, not the swarm). Before, every geometric peer read every
// holder's report: S of them, each republished every announce interval,
// which grew with the swarm when S did (an ordinary peer received 3.8,
// 6.5 and 11.3 KB/s at 32, 64 and 128 nodes with S = n/16, nearly all of
// it the tokens topic's gossip).
//
// Which reports a node hears (GeoTopics, topics):
//
//   - All, the backbone: a token holder (a superpeer, or a peer with a
//     token in transit), and a peer attached to no superpeer, or whose
//     superpeer's token it does not know: every holder's report, as
//     before.
//   - Cluster, the topic of its cluster, named by its superpeer's token
//     (as the superpeer's last yes gave it, spToken): the holder of the
//     cluster's token (its superpeer) publishes there, and so does a
//     holder in transit attached to it. A node publishes on its topics
//     and then joins and leaves topics (the driver's order), so a holder
//     in transit that is promoted says so on its old cluster's topic: its
//     mates hear of the new superpeer at once. A member hears only that topic: its superpeer's
//     report, the claims on its cluster's token when the superpeer passes
//     it on or dies and a mate takes it over (election, moved), and the
//     holders in its cluster that may pass it a token (passable).
//
// What a member took from the whole table comes from its superpeer,
// bounded, in each yes to an attach request:
//
//   - Nearby: the superpeer's own position, then the geoNearby superpeers
//     with room nearest the member's coordinate, as the superpeer
//     believes them, and geoNearbyRotate others (consecutive in ID order
//     from a point drawn for each answer): the
//     candidates of the member's next attachment
//     round, the superpeers it measures first (pickPingTarget), and
//     coordinates to sample. Relayed, not signed: they are never taken
//     as claims on a token (resolve), only as places to ask.
//   - Rehome: a token missing from the backbone that the member is to
//     take. The member of a sponsor used to find a missing token itself,
//     from the whole table, and took it when Rehome named it among its
//     superpeer's roster; now the sponsor (a superpeer, which hears the
//     backbone) finds it, probes its last holder, and names the member
//     by the same rule (place, sponsorPick), or the holder its survey named.
//
// A node that hears only its cluster re-homes nothing on its own: the
// absence of a report it cannot hear means nothing. One that just began
// to hear the backbone waits until every holder's report has been
// republished once (complete) before it takes any token for missing.

// geoNearby is how many other superpeers a yes relays by nearness
// (Nearby): the attachment round asks the best three with room.
// geoNearbyRotate more are relayed in turn (nearby): coordinates place
// some peers far from where they are, and a member measures only the
// superpeers it is told of. With the four nearest alone, a member whose
// coordinate was off never heard of the superpeer 0.3 ms from it, and
// stayed 211 ms from its own for 220 s (nodesim, 100 PlanetLab hosts, S
// = 10, seed 7); in turn, drawn anew for each answer, every member hears
// of every superpeer within some S/geoNearbyRotate renewals, and
// measures each one it hears of (pickPingTarget).
// The same, 16 seeds on the hosts 0-99 and 250-349 (÷ random placement,
// mean settle time): 4 and 2, 0.623 and 54.2 s, 0.702 and 53.9 s; 4 and
// 4, 0.626 and 51.7 s, 0.701 and 52.2 s; 6 and 2, 0.626 and 50.2 s, 0.700
// and 50.9 s; every peer reading every report (before), 0.628 and 45.1
// s, 0.694 and 45.6 s. A member learns of a superpeer at its renewals,
// once an announce interval, where it heard each promotion at once.
const (
	geoNearby       = 6
	geoNearbyRotate = 2
)

// MaxNearest is the most positions a yes relays as the nearest
// (GeoAnswer.Nearby: the superpeer's own and geoNearby), MaxRotated in
// turn (GeoAnswer.Rotated), MaxNearby both.
const (
	MaxNearest = 1 + geoNearby
	MaxRotated = geoNearbyRotate
	MaxNearby  = MaxNearest + MaxRotated
)

// rehomeOrder is a sponsor's order that member to take token.
type rehomeOrder struct {
	member peer.ID
	order  RehomeOrder
}

// topics returns the token topics this node hears now (see above).
//
// A member whose superpeer has not said yes for two announce intervals
// (it renews once per interval) hears the backbone too, while it keeps
// its cluster's topic: its superpeer may be lost, and if it was the last
// holder on its side of a partition, the member must hear that no holder
// is left, a report's TTL (complete) before it may re-home a token on its
// own (rehomer). When it began only once the attachment had expired, the
// side without a superpeer was covered 53 s after the cut, against 47 s
// when every peer read every report (nodesim,
// TestGeoPartitionSideWithoutSuperpeer).
func (g *geoMachine) topics(now time.Time) GeoTopics {
	tok, held := g.holder.Holding()
	switch {
	case held && g.holder.Superpeer():
		return GeoTopics{All: true, Cluster: tok.Num}
	case g.attached == "" || g.attached == g.self() || g.nearOf != g.attached || g.spToken < 0:
		return GeoTopics{All: true, Cluster: -1}
	}
	silent := !g.attachOK.IsZero() && now.Sub(g.attachOK) > 2*g.m.cfg.AnnounceInterval
	return GeoTopics{All: held || silent, Cluster: g.spToken}
}

// setTopics puts a change of the topics heard in the outputs; allSince is
// when the node began to hear the backbone.
func (g *geoMachine) setTopics(now time.Time) {
	t := g.topics(now)
	if g.topicsSet && t == g.heard {
		return
	}
	if t.All && (!g.topicsSet || !g.heard.All) {
		g.allSince = now
	}
	if !t.All {
		g.allSince = time.Time{}
	}
	g.topicsSet, g.heard = true, t
	g.out.Topics = &t
	g.note(slog.LevelDebug, "geometric: token topics", "all", t.All, "cluster", t.Cluster)
}

// complete reports whether this node hears every holder's report: it
// hears the backbone, and has for a report's TTL (three announce
// intervals: a live holder's report is republished at least every one and
// a half). With an announce interval and two token intervals, a node that
// took a lost superpeer's token over and so began to hear the backbone
// took a live token it had not heard yet for missing, and as its sponsor
// had it re-homed: two holders of one token, for good (a live crash test
// of the overlay, one run in twenty).
func (g *geoMachine) complete(now time.Time) bool {
	return g.heard.All && !g.allSince.IsZero() && now.Sub(g.allSince) >= g.attachTTL()
}

// nearby is what a superpeer relays to a member in its yes: its own
// position, then the geoNearby believed superpeers with room nearest to
// c, the member's coordinate (the superpeer's own when nil); and apart,
// geoNearbyRotate of the others, consecutive in ID order from a point
// drawn for each answer.
func (g *geoMachine) nearby(c *coordinate.Coordinate) (nearest, rotated []TokenPos) {
	pos, ok := g.holder.Position()
	if !ok {
		return nil, nil
	}
	nearest = []TokenPos{{Holder: g.self(), Token: pos.Token, Coord: pos.Coord, Superpeer: g.holder.Superpeer(), Load: min(g.load(), g.tc.Capacity)}}
	if c == nil {
		c = pos.Coord
	}
	type cand struct {
		tp TokenPos
		d  float64
	}
	var cs []cand
	for _, tp := range g.feed.Tokens {
		if tp.Holder == g.self() || !tp.Superpeer || tp.Load >= g.tc.Capacity || tp.Coord == nil {
			continue
		}
		d := 0.0
		if c != nil {
			d = geometric.Distance(c, tp.Coord)
		}
		cs = append(cs, cand{TokenPos{Holder: tp.Holder, Token: tp.Token, Coord: tp.Coord, Superpeer: true, Load: tp.Load}, d})
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.tp.Holder, b.tp.Holder)) })
	k := min(geoNearby, len(cs))
	for _, x := range cs[:k] {
		nearest = append(nearest, x.tp)
	}
	// Others in turn: consecutive in ID order from a point drawn for each
	// answer (one counter for all the members stepped in multiples of
	// their number, and a member could see the same two for good).
	rest := cs[k:]
	if len(rest) == 0 {
		return nearest, nil
	}
	slices.SortFunc(rest, func(a, b cand) int { return cmp.Compare(a.tp.Holder, b.tp.Holder) })
	start := g.rng.IntN(len(rest))
	for i := range min(geoNearbyRotate, len(rest)) {
		rotated = append(rotated, rest[(start+i)%len(rest)].tp)
	}
	return nearest, rotated
}

// NearDigest is the digest of a superpeer's nearest others as a yes
// relays them (GeoAnswer.Nearby after the superpeer's own position): their
// holders, tokens and whether each serves, in order; never 0, which
// stands for none (AttachAsked.Near). Their coordinates and loads are not
// in it: they change with every report, and a member takes them at its
// next full list (nearKeptFor).
func NearDigest(ps []TokenPos) uint64 {
	h := fnv.New64a()
	var b []byte
	for _, tp := range ps {
		b = binary.AppendUvarint(b, uint64(len(tp.Holder)))
		b = append(b, tp.Holder...)
		b = binary.AppendUvarint(binary.AppendUvarint(b, uint64(tp.Token.Num)), tp.Token.Seq)
		if tp.Superpeer {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	_, _ = h.Write(b)
	return max(h.Sum64(), 1)
}

// nearKeptFor is how long a member names the nearest superpeers it holds
// by their digest (AttachAsked.Near) after its superpeer last sent them in
// full: a yes leaves them out while they are the same superpeers, so their
// coordinates and loads are at most this old. The nearest six were 0.57 KB
// of each yes, once an announce interval (issue 20: an ordinary peer's
// traffic grew with S up to them).
func (g *geoMachine) nearKeptFor() time.Duration { return 6 * g.m.cfg.AnnounceInterval }

// nearHeld is the digest a request to p names (AttachAsked.Near): that of
// the nearest superpeers p last sent in full, less than nearKeptFor ago;
// 0 if none.
func (g *geoMachine) nearHeld(now time.Time, p peer.ID) uint64 {
	if p != g.nearOf || len(g.nearKept) == 0 || now.Sub(g.nearKeptAt) >= g.nearKeptFor() {
		return 0
	}
	return NearDigest(g.nearKept)
}

// heardClaims are the claims of a feed this node takes: all of them when
// it hears the backbone; else those on its cluster's token and those of
// its cluster's mates (the holders in transit attached to its superpeer,
// which publish on its topic). Anyone may publish on a cluster's topic,
// and a member does not hear the holders of the other tokens there, so
// a stranger's claim on another token (a placement at a newer epoch, as
// a superpeer, at a coordinate of its choosing) would stand unopposed:
// an attach candidate, and it would hide the relay's superpeer of that
// token (relayedPositions).
func (g *geoMachine) heardClaims(claims []TokenPos) []TokenPos {
	if g.heard.All {
		return claims
	}
	mate := func(p peer.ID) bool { return g.matesOf == g.attached && slices.Contains(g.mates, p) }
	var out []TokenPos
	for _, c := range claims {
		if c.Token.Num == g.spToken || c.Holder == g.self() || mate(c.Holder) {
			out = append(out, c)
			continue
		}
		g.ignore(c)
	}
	return out
}

// relayed takes what superpeer sp relayed in its yes: the positions
// nearby (its own first, which names the cluster's token, then its
// nearest, or with held the nearest this node kept from sp's last full
// list, then those in turn), and an order to take a missing token.
func (g *geoMachine) relayed(now time.Time, sp peer.ID, nearby []TokenPos, held bool, rotated []TokenPos, order *RehomeOrder) {
	switch {
	case len(nearby) == 0:
		g.nearKept = nil
	case held && sp == g.nearOf && len(g.nearKept) > 0:
		nearby = append(nearby[:1:1], g.nearKept...)
	case !held:
		g.nearKept, g.nearKeptAt = slices.Clone(nearby[1:]), now
	default: // held, and nothing held from sp: its own position alone
		g.nearKept = nil
	}
	nearby = append(slices.Clone(nearby), rotated...)
	g.near, g.nearOf = nil, sp
	for _, tp := range nearby[:min(len(nearby), MaxNearby)] {
		if tp.Holder == g.self() || tp.Coord == nil || geometric.Valid(tp.Coord) != nil || tp.Token.Num < 0 || tp.Token.Num >= g.tc.Tokens {
			continue
		}
		tp.Giver, tp.Summary = "", nil
		g.near = append(g.near, tp)
	}
	// The relay names the topic to hear, not the cluster's token: the
	// election keys on that as the superpeer's believed report gives it
	// (election), which a superpeer cannot set by its word alone.
	g.spToken = -1
	if len(g.near) > 0 && g.near[0].Holder == sp {
		g.spToken = g.near[0].Token.Num
	}
	if order != nil {
		g.ordered(now, sp, *order)
	}
}

// positions are the token positions this node knows: the believed
// reports of the topics it hears, then its superpeer's relay of others
// (relayedPositions: none of the same holder or token).
func (g *geoMachine) positions() []TokenPos {
	return append(slices.Clone(g.feed.Tokens), g.relayedPositions()...)
}

// relayedPositions are the positions sp relayed last (Nearby), if this
// node is still attached to sp, but for those the topics it hears speak
// of: what it hears first-hand comes first. A relayed holder or token
// that any claim this node hears names is left out, believed or not: the
// superpeer that passed its token on (a swap) is relayed as a superpeer
// until the member's next renewal, and its successor's claim, which the
// member hears on its cluster's topic, says otherwise (nodesim: 16
// members of the first cluster kept asking it for an announce interval
// after its hand-over, uncovered).
func (g *geoMachine) relayedPositions() []TokenPos {
	if g.nearOf == "" || g.nearOf != g.attached {
		return nil
	}
	var out []TokenPos
	for _, tp := range g.near {
		heard := func(c TokenPos) bool { return c.Holder == tp.Holder || c.Token.Num == tp.Token.Num }
		if !slices.ContainsFunc(g.claims, heard) && !slices.ContainsFunc(g.feed.Tokens, heard) {
			out = append(out, tp)
		}
	}
	return out
}

// ordered takes a sponsor's order to take a missing token: a member that
// holds none and is not demoted takes it as it took a token that Rehome
// named before, and pins one its superpeer's survey named.
//
// What the member checks of its superpeer's word: a token in range, a
// placement (no passes) of a newer epoch than any of the token it heard
// of (and not near the counter's end), not a token it hears a claim on,
// nor its own cluster's. The holder it replaces, if named, is the one
// whose report, should it still come a TTL later, makes this node give
// the token up (ownClaims). Whether the token is missing is the
// superpeer's word: a hostile superpeer can have a member take a live
// token it does not hear, and the two holders then stand until one
// gives way by the rules of geotokens.go (a pairing of the epoch with
// the holder named, which would have refused more, also refused the
// honest re-homing of token 0, placed at epoch 0: a crash test of the
// overlay then had one superpeer of two for good).
func (g *geoMachine) ordered(now time.Time, sp peer.ID, o RehomeOrder) {
	epoch := o.Token.Seq >> 32
	next, _ := g.tokens.seen(o.Token.Num)
	switch {
	case o.Token.Num < 0 || o.Token.Num >= g.tc.Tokens || o.Token.Passes() != 0 || epoch == 0 || epoch >= 1<<31 || o.Token.Seq < next:
		return
	case o.Token.Num == g.spToken || slices.ContainsFunc(g.claims, func(c TokenPos) bool { return c.Token.Num == o.Token.Num }):
		return
	}
	if _, held := g.holder.Holding(); held || g.selfDemoted() {
		return
	}
	if !g.receive(o.Token, now) {
		return
	}
	g.note(slog.LevelInfo, "geometric: took a missing token our superpeer named us for", "token", o.Token.Num, "superpeer", sp, "survey", o.Survey)
	if o.Survey {
		g.surveyPlaced, g.surveyHeld = g.holder.Holding()
		g.holder.Pin() // placed by measurements: the forces do not move it
	}
	g.placed = &placement{num: o.Token.Num, at: now, replaced: o.Replaced}
	g.tokens.hear(o.Token.Num, o.Token.Seq)
	g.tokens.found(o.Token.Num)
	g.publishToken()
	g.update(now)
}

// orderFor returns the order the sponsor gives member p, if any: the
// lowest-numbered token it named p for.
func (g *geoMachine) orderFor(p peer.ID) *RehomeOrder {
	for _, num := range sortedKeys(g.orders) {
		if o := g.orders[num]; o.member == p {
			r := o.order
			return &r
		}
	}
	return nil
}

// sponsorPick is the member that a sponsor names to take the missing
// token num: the holder its survey named, if the survey is recent, holds
// no token and is a member still; else the one Rehome names among its
// members that are served (not left) and not demoted. "" if none.
func (g *geoMachine) sponsorPick(now time.Time, num int, holding map[geometric.ID]bool) (peer.ID, bool) {
	served := func(p peer.ID) bool {
		_, ok := g.members[p]
		return ok && !g.memberLeft[p] && !g.memberDemoted[p]
	}
	if named := g.surveyNames(num, now); named != "" && !holding[geometric.ID(named)] && served(named) && !g.tokens.info(num).heard {
		return named, true
	}
	ids := make([]geometric.ID, 0, len(g.members))
	for p := range g.members {
		if served(p) {
			ids = append(ids, geometric.ID(p))
		}
	}
	slices.Sort(ids)
	return peer.ID(geometric.Rehome(g.seed, num, ids, holding)), false
}
