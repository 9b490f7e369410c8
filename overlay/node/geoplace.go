package node

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// place takes a token this node should hold and nobody reports, or, at a
// superpeer, names the member that takes it, by rules that need no view
// of the swarm, only lists every node (or every member of a cluster)
// agrees on:
//
//   - Token 0, when no token was ever heard of, once the warm-up is over,
//     goes to the node that started the network (it has no bootstrap
//     peer). Should no token be heard of for three warm-ups more (the
//     starter is gone), it goes to the first of InitialHolders over this
//     node and the peers it is connected to.
//   - Every other token, never heard of or reported and then missing, is
//     re-homed by the cluster of its sponsor: of the superpeers that
//     report members (a superpeer's load), the one with the least
//     Score(seed^token) (the backbone's reports, which every superpeer
//     hears, name the same ones). The sponsor, which hears every report,
//     finds the token missing, checks that its last holder is gone, and
//     names the member that Rehome names among the members it serves, less
//     those that said they are private or flapping (a private member
//     refuses a token, and one named would leave the token missing for
//     good; TestGeoRehomeSkipsDemoted), in its next yes to that member
//     (GeoAnswer.Rehome; geobackbone.go); the member takes
//     it (ordered). In a new network the first superpeer surveys its
//     members first (geosurvey.go): while it does, it names nobody, and
//     then names the members its placement chose (for surveyWait after
//     the placement; then Rehome again). When no holder at all is heard
//     of (all were lost, or a side of a partition has none), a node that
//     hears the backbone (attached to no superpeer) and was in a cluster
//     re-homes a token on its own, from its last roster less the
//     superpeer and the mates it is no longer connected to (rehomer,
//     TestGeoPartitionSideWithoutSuperpeer); the others follow from the
//     new holders' clusters, as in a new network.
//
// A node that hears only its cluster's topic, or heard the backbone for
// less than a republication, takes nothing for missing (complete).
//
// Two nodes that took the same placement settle it as yieldsTo says.
func (g *geoMachine) place(now time.Time) {
	// Remember every token heard of, our own included, before anything
	// else: a token we held and passed on is not ours to place again.
	reported := map[int]bool{}
	holding := map[geometric.ID]bool{}
	for _, tp := range g.feed.Tokens {
		reported[tp.Token.Num] = true
		g.tokens.report(tp.Token.Num, tp.Token.Seq, tp.Holder)
		holding[geometric.ID(tp.Holder)] = true
	}
	// A token that anyone claims is not missing, even when the claims
	// conflict and none is believed (see geotokens.go): re-homing it would
	// only add a claim.
	for _, tp := range g.claims {
		reported[tp.Token.Num] = true
	}
	t, held := g.holder.Holding()
	if held {
		reported[t.Num] = true
	}
	maps.DeleteFunc(g.orders, func(num int, _ rehomeOrder) bool { return reported[num] })
	sponsor := held && g.holder.Superpeer()
	if !sponsor {
		clear(g.orders)
	}
	if held {
		g.tokens.hear(t.Num, t.Seq)
		if !sponsor {
			return
		}
	} else if g.selfDemoted() {
		return // a private or flapping node holds no token
	}
	// Not before every report republished (each AnnounceInterval) has had
	// one TTL to arrive, and the coordinates some samples; and not while
	// this node cannot hear every report.
	warm := max(geoWarmups*g.cfg.TokenInterval, 3*g.m.cfg.AnnounceInterval)
	if now.Sub(g.started) < warm || !g.complete(now) {
		// A token's absence counts only while the node hears every
		// report: a holder that passed its token on, then left the
		// backbone for a while (attached to a superpeer), counted the
		// recipient's report missing across that while, and re-homed the
		// token a wait after it heard the backbone again, before the
		// report came in: two holders of one token for good (the live
		// crash test of the overlay's cluster topics, about one run in
		// fifty).
		for _, t := range g.tokens {
			if t.missing && t.since.Before(now) {
				t.since = now
			}
		}
		return
	}
	if len(reported) == 0 && !g.anyHeard() {
		// No token heard of yet: the network starts.
		if !g.m.cfg.Bootstrap || now.Sub(g.started) >= 4*warm && g.firstOfConnected() {
			g.receive(geometric.Token{Num: 0}, now)
		}
		return
	}
	for num := range g.tc.Tokens {
		if reported[num] {
			g.tokens.found(num)
			continue
		}
		t := g.tokens.info(num)
		if !t.missing {
			t.missFrom(now)
			continue
		}
		// A token report is republished every announce interval and
		// expires after three. One that was reported has been silent that
		// long before it shows here as missing.
		//
		// Gossip under load loses messages, and a false re-homing takes
		// the token from its true holder (the higher Seq wins) and starts
		// it hot somewhere else. So before it re-homes a token that was
		// reported, the node checks that the last reported holder is gone:
		// one that answers a ping is alive and still holds the token, or
		// passed it on and the new holder's report is late; the wait
		// starts again. After
		// maxPostpones such checks the token is re-homed all the same (its
		// holder may have passed it to a peer that crashed).
		// With an election the cluster of a lost holder takes its token
		// over (see election): give it five failure-detection timeouts
		// first, as long as candidate needs (detection, two timeouts of
		// delay for the second in rank, a query round).
		wait := max(3*g.cfg.TokenInterval, 5*g.m.Detection())
		last, seen := t.next, t.heard
		if !seen {
			// A token never heard of has no holder whose report may be
			// late but the member of its sponsor that took it, which
			// publishes at once: one announce interval (with three, the
			// tokens of a new network spread from its first cluster
			// some 20 s later, and nodesim's placement four minutes in
			// was 0.79 of random placement's on seeds 1-7, against 0.74).
			wait = max(3*g.cfg.TokenInterval, g.m.cfg.AnnounceInterval)
		}
		if sponsor && !seen && g.search != nil && g.search.survey {
			continue // surveying: its placement names the holder
		}
		if now.Sub(t.since) < wait {
			continue
		}
		var who peer.ID
		var survey bool
		if sponsor {
			if g.sponsor(num) != g.self() {
				continue
			}
			who, survey = g.sponsorPick(now, num, holding)
		} else {
			who = peer.ID(g.rehomer(num))
		}
		if who == "" || !sponsor && who != g.self() {
			continue
		}
		// Hearing no holder at all, with the last one no longer
		// connected (a side of a partition, cut off from it), the node
		// does not wait for a ping of it to time out.
		cutOff := len(g.feed.Tokens) == 0 && !g.connected[t.reporter]
		if rep := t.reporter; seen && rep != "" && rep != g.self() && t.postponed < maxPostpones && !cutOff {
			if !t.probing {
				t.probing = true
				pp := g.ping(rep)
				pp.probes = append(pp.probes, num)
			}
			continue
		}
		// Above every pass counter heard, or the holder machine (which
		// remembers the last holder) refuses it; and hot again, to find
		// its place.
		tok := geometric.Rehomed(num, last)
		if sponsor {
			if o, ok := g.orders[num]; !ok || o.member != who || o.order.Token != tok {
				g.note(slog.LevelInfo, "geometric: naming a member to take a missing token", "token", num, "member", who, "survey", survey)
			}
			g.orders[num] = rehomeOrder{member: who, order: RehomeOrder{Token: tok, Replaced: t.reporter, Survey: survey}}
			// Missing again from now: named again (perhaps another
			// member) if nobody reports it after another wait.
			g.tokens.found(num)
			continue
		}
		if g.receive(tok, now) {
			g.placed = &placement{num: num, at: now, replaced: t.reporter}
		}
		g.tokens.found(num)
		return
	}
}

// anyHeard reports whether any token was ever heard of.
func (g *geoMachine) anyHeard() bool {
	for _, t := range g.tokens {
		if t.heard {
			return true
		}
	}
	return false
}

// firstOfConnected reports whether this node is the first of
// InitialHolders over itself and the peers it is connected to: who takes
// token 0 when the network's starter is gone before it placed it.
func (g *geoMachine) firstOfConnected() bool {
	ids := []geometric.ID{geometric.ID(g.self())}
	for p := range g.connected {
		ids = append(ids, geometric.ID(p))
	}
	first, err := geometric.InitialHolders(g.seed, ids, 1)
	return err == nil && first[0] == geometric.ID(g.self())
}

// sponsor is the superpeer whose cluster re-homes token num: of the
// believed holders that report members (a superpeer's load), the one with
// the least Score(seed^num), "" if none.
func (g *geoMachine) sponsor(num int) peer.ID {
	var best peer.ID
	var bestScore uint64
	sps := slices.DeleteFunc(slices.Clone(g.feed.Tokens), func(tp TokenPos) bool { return tp.Holder == g.self() })
	if g.holder.Superpeer() {
		// This node as it knows itself, whether or not its own report is
		// in the feed yet.
		sps = append(sps, TokenPos{Holder: g.self(), Superpeer: true, Load: g.load()})
	}
	for _, tp := range sps {
		if !tp.Superpeer || tp.Load <= 0 {
			continue
		}
		s := geometric.Score(g.seed^uint64(num), geometric.ID(tp.Holder))
		if best == "" || s < bestScore || s == bestScore && tp.Holder < best {
			best, bestScore = tp.Holder, s
		}
	}
	return best
}

// rehomer is the peer that takes the missing token num when no holder at
// all is heard of (all were lost, or this is a side of a partition that
// has none): the one Rehome names among the last cluster any superpeer
// named to this node, less that superpeer, the mates it demotes and the
// mates it is no longer connected to (they are on the other side, or
// gone), itself kept: the fragments of one cluster agree on it, and the
// placements of two fragments, or of two clusters, are settled as
// duplicates (yieldsTo). "" otherwise: while any superpeer is heard of,
// the sponsor names the holder (place).
func (g *geoMachine) rehomer(num int) geometric.ID {
	if g.matesOf == "" || len(g.feed.Tokens) > 0 {
		return ""
	}
	ids := make([]geometric.ID, 0, len(g.mates))
	for _, p := range g.mates {
		if p != g.matesOf && !g.demotes(p) && (p == g.self() || g.connected[p]) {
			ids = append(ids, geometric.ID(p))
		}
	}
	return geometric.Rehome(g.seed, num, ids, nil)
}

// probed takes the ping of the last reported holder of the missing token
// num: the re-homing is postponed when it answered, or done at the next
// round when it did not.
func (g *geoMachine) probed(now time.Time, num int, in PingDone) {
	t := g.tokens.info(num)
	t.probing = false
	if in.Err != nil {
		t.postponed = maxPostpones // gone: re-home at the next round
		g.note(slog.LevelInfo, "geometric: last holder of a missing token is gone", "token", num, "holder", in.Peer, "err", in.Err)
		return
	}
	if t.missing {
		t.since = now
		t.postponed++
	}
}

// receive takes token t without a pass (a placement), and reports
// whether it did.
func (g *geoMachine) receive(t geometric.Token, now time.Time) bool {
	if err := g.holder.Receive(t, now); err != nil {
		g.note(slog.LevelDebug, "geometric: take token", "token", t.Num, "err", err)
		return false
	}
	g.link, g.giver, g.placed = nil, "", nil
	g.note(slog.LevelInfo, "took token", "token", t.Num, "seq", t.Seq)
	return true
}

// tokenBook is what the node knows of each token, by token number: the
// bookkeeping with which place decides whether a token is missing and
// whether to re-home it.
type tokenBook map[int]*tokenInfo

// tokenInfo is what the node knows of one token. The zero value is a
// token never heard of and not missing.
type tokenInfo struct {
	// heard: the token has been reported, or held by this node; next is
	// one above the highest pass counter (Seq) heard of it.
	heard bool
	next  uint64
	// reporter is the holder named in the newest report.
	reporter peer.ID
	// missing: nobody reports the token; since is when that began to
	// count (after this node passed the token on, a time ahead: the
	// recipient's report has one TTL to arrive).
	missing bool
	since   time.Time
	// probing: the last reporter is being pinged (probed).
	probing bool
	// postponed counts the re-homings postponed because the last
	// reporter was alive.
	postponed int
}

// info returns num's entry, made (never heard of, not missing) if there
// is none.
func (b tokenBook) info(num int) *tokenInfo {
	t := b[num]
	if t == nil {
		t = &tokenInfo{}
		b[num] = t
	}
	return t
}

// seen returns one above the highest pass counter heard of num, and
// whether num was heard of at all.
func (b tokenBook) seen(num int) (uint64, bool) {
	if t := b[num]; t != nil && t.heard {
		return t.next, true
	}
	return 0, false
}

// hear notes the pass counter seq of num, reported or held by this node.
func (b tokenBook) hear(num int, seq uint64) {
	t := b.info(num)
	t.next, t.heard = max(t.next, seq+1), true
}

// report notes a report of num at pass counter seq by holder: the newest
// report names the reporter.
func (b tokenBook) report(num int, seq uint64, holder peer.ID) {
	if t := b.info(num); seq+1 >= t.next {
		t.reporter = holder
	}
	b.hear(num, seq)
}

// missFrom counts the token as missing from at.
func (t *tokenInfo) missFrom(at time.Time) { t.missing, t.since = true, at }

// found notes that num is reported (or re-homed here): it is not missing,
// and no re-homing of it is postponed.
func (b tokenBook) found(num int) {
	if t := b[num]; t != nil {
		t.missing, t.since, t.postponed = false, time.Time{}, 0
	}
}
