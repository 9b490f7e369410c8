package node

import (
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// place takes a token this node should hold and nobody reports: an initial
// token never heard of, once the warm-up is over, or a token that was
// reported and then missing for three token intervals. ids are the peers
// that may hold a token, sorted.
func (g *geoMachine) place(now time.Time, ids []geometric.ID) {
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
	if t, held := g.holder.Holding(); held {
		g.tokens.hear(t.Num, t.Seq)
		return
	}
	if len(ids) != g.viewSize {
		g.viewSize, g.viewSince = len(ids), now
	}
	// Act only on a membership view that has held still for the warm-up,
	// and not before every report republished (each AnnounceInterval,
	// membership and token positions alike) has had one TTL to arrive:
	// peers that place or re-home tokens from views that differ take the
	// same token twice (Observe settles it, but the tokens churn).
	warm := geoWarmups * g.cfg.TokenInterval
	if now.Sub(g.started) < max(warm, 3*g.m.cfg.AnnounceInterval) || now.Sub(g.viewSince) < warm {
		return
	}
	// A token never heard of starts on its initial holder.
	if first, err := geometric.InitialHolders(g.seed, ids, min(g.tc.Tokens, len(ids))); err == nil {
		for num, id := range first {
			if _, seen := g.tokens.seen(num); id == geometric.ID(g.self()) && !seen {
				g.receive(geometric.Token{Num: num}, now)
				return
			}
		}
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
		// long before it shows here as missing; one never heard of may
		// still be on its way from its first holder for as long.
		//
		// Gossip under load loses messages, and a false re-homing takes
		// the token from its true holder (the higher Seq wins) and starts
		// it hot somewhere else. So before it re-homes a token that was
		// reported, the peer checks that the last reported holder is gone:
		// one still in the membership view, or that answers a ping, is
		// alive and still holds the token, or passed it on and the new
		// holder's report is late; the wait starts again. After
		// maxPostpones such checks the token is re-homed all the same (its
		// holder may have passed it to a peer that crashed).
		// With an election the cluster of a lost holder takes its token
		// over (see election): give it five failure-detection timeouts
		// first, as long as candidate needs (detection, two timeouts of
		// delay for the second in rank, a query round).
		wait := max(3*g.cfg.TokenInterval, 5*g.m.Detection())
		last, seen := t.next, t.heard
		if !seen {
			wait = 3 * g.m.cfg.AnnounceInterval
		}
		if now.Sub(t.since) < wait || geometric.Rehome(g.seed, num, ids, holding) != geometric.ID(g.self()) {
			continue
		}
		if rep := t.reporter; seen && rep != "" && rep != g.self() && t.postponed < maxPostpones {
			if _, alive := g.m.member(rep); alive {
				t.since = now.Add(3*g.m.cfg.AnnounceInterval - wait) // wait one TTL more
				t.postponed++
				continue
			}
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
		if g.receive(geometric.Rehomed(num, last), now) {
			g.placed = &placement{num: num, at: now, replaced: t.reporter}
		}
		g.tokens.found(num)
		return
	}
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
