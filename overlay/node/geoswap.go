package node

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The search on measured RTTs (geometric's swap.go), inside a cluster.
// Coordinates put a token in the neighbourhood of a good superpeer; the
// superpeer then asks its members which of a few candidates of its
// cluster would serve them better, by the RTTs they measure:
//
//   - A superpeer that has held its token for swapWarm (since it took
//     it, the dwell before its promotion included) starts
//     a search round (searchRound, at its attachment rounds): up to
//     GeoConfig.SwapCandidates members, the most central by coordinate
//     and not tried yet (geometric.Candidates), which it pings itself, and names
//     in its answers to attach requests (GeoAnswer.Candidates).
//   - A member that hears candidates from its superpeer (AttachDone)
//     pings those whose RTT it does not keep, and sends its report
//     (GeoReady.AttachRTTs: its RTT to the superpeer, then to each
//     candidate), once per candidate list, in an attach request as soon
//     as it has measured them all (attachCurrent), not with its next
//     renewal an announce interval later: a round then takes about half
//     an announce interval for the members to be told and a token
//     interval or two to hear them, not two announce intervals. (A
//     superpeer that crashed after it named candidates costs a member one
//     request more; TestGeoCrashTakeoverOutlivedConnection, which a
//     separate report request once pushed past its bound, holds.)
//   - When a majority of the members reported, or swapWait after the
//     round began, the superpeer asks geometric.Swap, and hands its token
//     to the candidate it names (Holder.Handover: promoted at once, and
//     too cool for the coordinates' forces to move it again). The
//     candidates are tried; the next round takes others. A member that
//     took the token so searches after one announce interval, the time
//     its new members take to attach, not swapWarm: the forces no
//     longer move a handed-over token. A round that a
//     majority reported on and that hands over to nobody pins the token
//     (Holder.Pin): the forces, on coordinates, no longer move it from a
//     peer the measurements kept. (Without the pin, a token the search
//     had kept was moved by the forces when a neighbour's hand-over
//     changed its field, and its cluster went without a superpeer for a
//     dwell; nodesim, 100 PlanetLab hosts, S = 10, seeds 1-8: 3 runs of 8
//     still changing at 300 s, mean settle 211 s; with it all settled,
//     mean 120 s, at 0.616 of random placement against 0.590.)
//   - A member's report also names its next superpeer and its RTT to it
//     (nextSuperpeer, AttachAsked.Second), which geometric.Swap counts as
//     the most a swap can cost that member.
//
// A member's claims (its next superpeer's among them) are bounded as
// geometric.Swap says: clamped by the RTT the superpeer measures to the
// candidate. The candidates are the superpeer's choice and a hand-over is
// a token pass like any other, vetted (vet) before it is made. A majority
// of lying members, which could stop a swap before, can now also pin
// their superpeer's token against the forces; the forces move it on
// coordinates, which they can lie about too. Measured in the node
// simulator (bench.NodeAttack: 100 PlanetLab hosts, S = 10, a fifth of
// the nodes liars with honest coordinates, 8 seeds), before the survey
// of a new network (geosurvey.go): liars that lie in their reports held
// 4.8 of the 10 roles at the end, 0.9 when honest; liars that never pass
// a token they hold, 3.2; both, 5.0; the honest nodes' RTT to their
// superpeer was 0.98 to 1.25 times that of the honest run. Since the
// survey, whose tokens are pinned and searched with a larger margin
// (surveyMargin), see BENCHMARKS.md for what the same liars hold.
//
// Cost: per round, a member pings at most DefaultSwapCandidates peers and
// sends one request with its report; the superpeer keeps one report per
// member, with at most one next superpeer. With GeoConfig.Relocate, once
// the search is done with the central candidates, its rounds alternate
// with summary rounds for the relocation between clusters
// (georelocate.go).

// DefaultSwapCandidates is the default GeoConfig.SwapCandidates, and the
// most a member measures per round: 8, as in the simulator
// (geometric.SimConfig). With 4 a cluster of 36 took nine rounds to try
// every member, and the best was often among the last (nodesim, 100
// PlanetLab hosts, S = 10, seeds 1-8, both with the early report: 4 gave
// 0.708 of random placement, settled at 99 s on average; 8 gave 0.669,
// 79 s). A member of an older version, which measures at most 4, sends
// no report when 8 are named: its report would not match the list.
const DefaultSwapCandidates = 8

// swapSearch is a superpeer's search: the token it searches for, the
// candidates of the round in flight and their reports, and the
// candidates tried.
type swapSearch struct {
	token   geometric.Token
	since   time.Time // when this node took the token, as far as the search knows
	cands   []peer.ID
	started time.Time
	reports map[peer.ID]geometric.SwapReport
	told    map[peer.ID]bool // members answered with cands: only their reports are about them
	tried   map[peer.ID]bool
	// summary says the round in flight judges outlying candidates for the
	// cluster's summary (georelocate.go), not central ones for a swap;
	// exhausted, that no central candidate is left to try; and last are
	// the last summary round's candidates and reports, which a round on
	// the same candidates starts from (a member reports once per list).
	summary, exhausted bool
	// survey says the round in flight is the survey of a new network
	// (geosurvey.go).
	survey      bool
	quiet       int            // summary rounds in a row that moved no token (summaryRounds)
	heard       []geometric.ID // the superpeers summaries came from at the last one (summarySources)
	last        []peer.ID
	lastReports map[peer.ID]geometric.SwapReport
}

// swapWarm is how long a superpeer holds its token before it searches:
// one snapshot period from when it took it, MinHold, after which the
// coordinates' forces move it if they will. (Counted from its promotion,
// a dwell later, it held every search back by the dwell: five token
// intervals per token placed or moved by the forces.)
func (g *geoMachine) swapWarm() time.Duration { return SnapshotTicks * g.cfg.TokenInterval }

// swapWait is how long a search round waits for its reports at most: a
// member hears the candidates with its renewal and reports with the next
// (once per announce interval each), so three announce intervals. (With
// one, every round ended before its reports came: no hand-over at all in
// four minutes on 100 nodes.)
func (g *geoMachine) swapWait() time.Duration {
	return max(5*g.cfg.TokenInterval, 3*g.m.cfg.AnnounceInterval)
}

// searchRound advances the superpeer's search (at its attachment round).
func (g *geoMachine) searchRound(now time.Time) {
	tok, held := g.holder.Holding()
	if !held || !g.holder.Superpeer() || g.cfg.SwapCandidates < 0 {
		g.search, g.summary = nil, nil
		return
	}
	if g.pass != nil {
		return // a pass in flight: the token may be leaving
	}
	s := g.search
	if s == nil || s.token != tok {
		since, _ := g.holder.Since()
		s = &swapSearch{token: tok, since: since, tried: map[peer.ID]bool{}}
		g.search, g.summary = s, nil
	}
	if g.surveyDue(tok) {
		g.surveyRound(now, s, tok)
		return
	}
	if s.survey { // the survey was overtaken (another token was heard of): drop its round
		s.cands, s.reports, s.told, s.started, s.survey = nil, nil, nil, time.Time{}, false
	}
	warm := g.swapWarm()
	if tok.Passes() >= geometric.Settled {
		warm = g.m.cfg.AnnounceInterval // handed over: the forces do not move it
	}
	if now.Sub(s.since) < warm || g.load() == 0 && now.Sub(s.since) < warm+g.attachTTL() {
		return // (a superpeer without members: not before its members had time to attach)
	}
	if s.started.IsZero() && s.quiet >= summaryRounds && !slices.Equal(s.heard, summarySources(g.feedSummaries())) {
		s.quiet = 0 // other clusters' summaries changed: summarise again
	}
	if s.started.IsZero() {
		var ps []geometric.Peer
		for p := range g.members {
			if c, ok := g.memberCoord[p]; ok && !g.memberLeft[p] {
				ps = append(ps, geometric.Peer{ID: geometric.ID(p), Coord: c})
			}
		}
		slices.SortFunc(ps, func(a, b geometric.Peer) int { return cmp.Compare(a.ID, b.ID) })
		k := min(cmp.Or(g.cfg.SwapCandidates, DefaultSwapCandidates), DefaultSwapCandidates)
		var cands []geometric.ID
		due := g.summaryDue(s)
		if !due {
			cands = geometric.Candidates(geometric.ID(g.self()), ps, k, func(id geometric.ID) bool { return s.tried[peer.ID(id)] })
			s.exhausted = len(cands) == 0
			due = s.exhausted && g.summaryDue(s)
			if s.exhausted && !due {
				return // no candidate left, and no summary due (summaryRounds)
			}
		}
		s.summary = due
		if s.summary {
			cands = g.outlying(ps, k)
		}
		for _, c := range cands {
			s.cands = append(s.cands, peer.ID(c))
			if g.rtt[peer.ID(c)] <= 0 {
				g.ping(peer.ID(c)).measure = true
			}
		}
		s.started, s.reports, s.told = now, map[peer.ID]geometric.SwapReport{}, map[peer.ID]bool{}
		if s.summary && slices.Equal(s.cands, s.last) {
			for p, r := range s.lastReports {
				if _, member := g.members[p]; member && !g.memberLeft[p] {
					s.reports[p], s.told[p] = r, true
				}
			}
		}
		if g.load() > 0 {
			return
		}
		// No member: nobody to wait for.
	}
	if (g.load() > 0 || !s.summary) && 2*len(s.reports) <= g.load() && now.Sub(s.started) < g.swapWait() {
		return
	}
	started := s.started
	cands := make([]geometric.ID, len(s.cands))
	own := make([]time.Duration, len(s.cands))
	for i, c := range s.cands {
		cands[i], own[i] = geometric.ID(c), g.rtt[c]
		if !s.summary {
			s.tried[c] = true
		}
	}
	reports := make([]geometric.SwapReport, 0, len(s.reports))
	for _, p := range slices.Sorted(maps.Keys(s.reports)) {
		if _, member := g.members[p]; member && !g.memberLeft[p] {
			reports = append(reports, s.reports[p])
		}
	}
	told := len(s.told)
	if s.summary {
		s.last, s.lastReports = s.cands, s.reports
	}
	s.cands, s.reports, s.told, s.started = nil, nil, nil, time.Time{}
	if s.summary {
		g.summarize(now, tok, cands, own, reports)
		return
	}
	sc := swapConfig(tok)
	if g.bySurvey(tok) {
		sc.Fraction *= surveyMargin
	}
	d, ok, err := geometric.Swap(sc.Scaled(g.scale), geometric.ID(g.self()), cands, own, reports, g.load())
	g.note(slog.LevelDebug, "geometric: search round ended", "token", tok.Num, "members", g.load(), "told", told,
		"reports", len(reports), "took", now.Sub(started), "swap", ok, "error", err)
	if err != nil || !ok {
		if err == nil && 2*len(reports) > g.load() {
			// A majority measured this node the best of the round: the
			// coordinates' forces no longer move its token (Pin).
			g.holder.Pin()
		}
		return
	}
	outs := g.holder.Handover(d.To)
	if len(outs) == 0 {
		return
	}
	g.swaps++
	g.note(slog.LevelInfo, "geometric: handing the superpeer's role to a member that serves the cluster better, by measured RTTs",
		"token", tok.Num, "to", peer.ID(d.To), "gain", d.Gain, "mean", d.Mean, "reports", d.Reports)
	g.carryOut(now, outs, func(now time.Time) {
		g.publishToken()
		g.update(now)
	})
}

// swapConfig is the search's margin for token tok: geometric's default
// (0.5 ms plus 2 % of the cluster's mean RTT), its relative part doubled
// for each hand-over the token has had (Passes / geometric.Settled). A
// hand-over changes which members are nearest to the cluster's
// superpeer, and so the neighbours' clusters, whose searches then find
// swaps of their own: a token went back and forth between the same
// members (nodesim, 100 PlanetLab hosts, S = 10, seed 9: token 9 from
// node 32 to 46, back to 32 and on to 49, gains of 1.2 to 4 ms, the
// last at 106 s). The doubling ends such a chain: after five hand-overs a
// swap must lower the cluster's mean by 64 %. Seeds 1-16: settled
// at 71.8 s on average, 0.647 x random placement, against 76.9 s and
// 0.642 with a constant margin; 490 hosts, S = 25, seeds 1-4: 94.5 s,
// 0.614, against 95.2 s and 0.649.
func swapConfig(tok geometric.Token) geometric.SwapConfig {
	c := geometric.DefaultSwapConfig()
	c.Fraction *= float64(uint64(1) << min(tok.Passes()/geometric.Settled, 10))
	return c
}

// swapReported takes a member's report with its attach request (its RTTs
// and its next superpeer): only from a member told this round's
// candidates before (a report is about the candidates it was told), and
// its answer names them (candidates).
func (g *geoMachine) swapReported(from peer.ID, rtts []time.Duration, second PeerRTT) []peer.ID {
	s := g.search
	if s == nil || len(s.cands) == 0 {
		return nil
	}
	if s.told[from] && len(rtts) == len(s.cands)+1 {
		r := geometric.SwapReport{Member: geometric.ID(from), ToSuperpeer: rtts[0], ToCandidate: slices.Clone(rtts[1:])}
		if second.Peer != "" && second.Peer != from && second.RTT > 0 {
			r.Second, r.ToSecond = geometric.ID(second.Peer), second.RTT
		}
		s.reports[from] = r
	}
	s.told[from] = true
	return slices.Clone(s.cands)
}

// swapAsked takes the candidates a member's superpeer named: the member
// measures them, to report.
func (g *geoMachine) swapAsked(sp peer.ID, cands []peer.ID) {
	if len(cands) > SurveyLandmarks {
		cands = cands[:SurveyLandmarks]
	}
	if sp == g.swapOf && slices.Equal(cands, g.swapAsk) || len(cands) == 0 && len(g.swapAsk) == 0 {
		return
	}
	g.swapOf, g.swapAsk, g.swapSent = sp, slices.Clone(cands), false
	for _, c := range append([]peer.ID{sp}, cands...) {
		if c != g.self() && g.rtt[c] <= 0 {
			g.ping(c).measure = true
		}
	}
}

// swapReport is the member's report for its superpeer sp, when it has
// one to send: its RTT to sp, then to each candidate.
func (g *geoMachine) swapReport(sp peer.ID) ([]time.Duration, bool) {
	if g.swapSent || len(g.swapAsk) == 0 || sp != g.swapOf || g.rtt[sp] <= 0 {
		return nil, false
	}
	out := []time.Duration{g.rtt[sp]}
	for _, c := range g.swapAsk {
		d := g.rtt[c]
		if c == g.self() {
			d = time.Nanosecond // itself: the superpeer counts it as 0
		} else if d <= 0 {
			return nil, false
		}
		out = append(out, d)
	}
	return out, true
}

// nextSuperpeer is what a member of sp reports as its next superpeer:
// of the superpeers other than sp with room that it believes, the one it
// measures nearest, and the RTT (zero when it measured none). Swap counts
// a member's loss from a swap as at most what going to that one costs it;
// without it, a superpeer on the edge between two clusters kept its role
// for the members on the far side, who would in fact go to their next
// superpeer (nodesim, 100 PlanetLab hosts, S = 10, seeds 1-8: 0.645 of
// random placement without, 0.590 with; 490 hosts, S = 25, seeds 1-4:
// 0.915 without, 0.698 with).
func (g *geoMachine) nextSuperpeer(sp peer.ID) PeerRTT {
	var best PeerRTT
	for _, tp := range g.positions() {
		if !tp.Superpeer || tp.Holder == sp || tp.Holder == g.self() || g.tc.Capacity > 0 && tp.Load >= g.tc.Capacity {
			continue
		}
		if d := g.rtt[tp.Holder]; d > 0 && (best.Peer == "" || d < best.RTT) {
			best = PeerRTT{tp.Holder, d}
		}
	}
	return best
}

// Swaps counts the hand-overs this node made by the search on measured
// RTTs.
func (m *Machine) Swaps() uint64 {
	if m.geo == nil {
		return 0
	}
	return m.geo.swaps
}
