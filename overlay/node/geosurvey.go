package node

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The survey: how a new network places its tokens from measured RTTs
// (geometric.Survey).
//
//   - The first superpeer (it holds token 0, never passed, and no other
//     token was ever heard of) names SurveyLandmarks landmarks in its
//     answers to attach requests, as a search round names its candidates
//     (GeoAnswer.Candidates). The landmarks are peers it is connected to or
//     serves, the lowest by Score(seed ^ surveySalt): no choice of its own
//     beyond whom it knows. It pings each itself.
//   - A member measures each landmark and reports as it reports to a
//     search (swapAsked, swapReport).
//   - An announce interval after it began, when a majority of its
//     members reported (or surveyWait after it began), the superpeer asks
//     geometric.Survey for the holders of the other tokens and pins its
//     own token. Its own search starts a snapshot period later, with a
//     larger margin (surveyMargin). While it surveys it names nobody for
//     a missing token (place).
//   - As the sponsor of the tokens never heard of (the only superpeer with
//     members), it then names the holder its placement chose for each, in
//     its next yes to that member (GeoAnswer.Rehome, with Survey set;
//     geobackbone.go), for surveyWait after the placement; the member
//     takes it, pinned: the forces of coordinates do not move what
//     measurements placed; its search needs a larger gain
//     (surveyMargin). A token the placement does not name, or whose
//     holder does not take it within surveyWait, is re-homed by the hash
//     as before (Rehome).
//
// Cost: once per new network, a member of the first cluster pings up to
// SurveyLandmarks peers and sends one report.

// SurveyLandmarks is how many landmarks the first superpeer names, the
// cluster's default capacity (geometric.Config.Capacity): the node
// simulator (100 PlanetLab hosts, S = 10, seeds 1-16) placed at 0.709 of
// random placement's mean RTT with 32, at 0.642 with 64, both settled at
// 46-48 s on average. It is also the most candidates a member measures.
const SurveyLandmarks = 64

// surveySalt is mixed into the network's seed for the landmarks' scores,
// so that they are not the peers the tokens' own scores favour.
const surveySalt = 0x5375727665790000 // "Survey"

// surveyDue reports whether this node, a superpeer holding tok, places
// the network's tokens by a survey: tok is token 0, never passed, no
// other token was ever heard of, and the survey was not done.
func (g *geoMachine) surveyDue(tok geometric.Token) bool {
	if g.surveyed || tok.Num != 0 || tok.Seq != 0 || g.tc.Tokens < 2 || g.cfg.SwapCandidates < 0 {
		return false
	}
	for num, t := range g.tokens {
		if num != 0 && t.heard {
			return false
		}
	}
	for _, tp := range g.feed.Tokens {
		if tp.Token.Num != 0 {
			return false
		}
	}
	return !slices.ContainsFunc(g.claims, func(tp TokenPos) bool { return tp.Token.Num != 0 })
}

// surveyMargin multiplies the relative margin (geometric.SwapConfig's
// Fraction) of a search by a holder the survey placed: a swap must
// beat the survey's k-median on measurements by more than 0.5 ms and 16 %
// of the cluster's mean RTT, the margin of a token handed over three
// times (swapConfig). The survey's reporters are the first members to
// attach, nearer the first superpeer than the rest, so its placement
// serves the far peers worse, and the search mends that cluster by
// cluster; with the default margin it makes small swaps until late.
// Node simulator, 100 PlanetLab hosts, S = 10, seeds 1-16, on the hosts
// 0-99 and 250-349: no search after the survey placed at 0.642 and 0.753
// of random placement's mean RTT, settled at 47.7 and 44.5 s on average;
// the default margin 0.605 and 0.658, 58.6 and 55.4 s; 4 times it 0.620
// and 0.674, 54.8 and 51.0 s; 10 times 0.630 and 0.695, 49.5 and 47.7 s.
const surveyMargin = 8

// surveyWait is how long a survey waits for its reports at most, and a
// member for its superpeer's placement.
func (g *geoMachine) surveyWait() time.Duration { return g.swapWait() }

// surveyRound advances the first superpeer's survey (searchRound's, at
// its attachment rounds).
func (g *geoMachine) surveyRound(now time.Time, s *swapSearch, tok geometric.Token) {
	if s.started.IsZero() {
		pool := map[peer.ID]bool{}
		for p := range g.members {
			if !g.memberDemoted[p] {
				pool[p] = true
			}
		}
		for p, ok := range g.connected {
			if ok {
				pool[p] = true
			}
		}
		delete(pool, g.self())
		if len(pool) == 0 {
			return // nobody known yet
		}
		ids := make([]geometric.ID, 0, len(pool))
		for p := range pool {
			ids = append(ids, geometric.ID(p))
		}
		// The lowest scores, ties by ID: the choice of InitialHolders.
		landmarks, err := geometric.InitialHolders(g.seed^surveySalt, ids, min(len(ids), SurveyLandmarks))
		if err != nil {
			return
		}
		for _, l := range landmarks {
			s.cands = append(s.cands, peer.ID(l))
		}
		for _, c := range s.cands {
			if g.rtt[c] <= 0 {
				g.ping(c).measure = true
			}
		}
		s.survey, s.summary = true, false
		g.holder.Pin() // the forces must not move the token while its holder surveys
		s.started, s.reports, s.told = now, map[peer.ID]geometric.SwapReport{}, map[peer.ID]bool{}
		g.note(slog.LevelInfo, "geometric: surveying the new network's members", "landmarks", len(s.cands))
		return
	}
	long := now.Sub(s.started)
	if long < g.m.cfg.AnnounceInterval || 2*len(s.reports) <= g.load() && long < g.surveyWait() {
		return
	}
	cands := make([]geometric.ID, len(s.cands))
	own := make([]time.Duration, len(s.cands))
	for i, c := range s.cands {
		cands[i] = geometric.ID(c)
		if _, member := g.members[c]; member && !g.memberDemoted[c] && !g.memberLeft[c] {
			own[i] = g.rtt[c] // a holder it names must be a member: only they hear the placement
		}
	}
	reports := make([]geometric.SwapReport, 0, len(s.reports))
	for _, p := range slices.Sorted(maps.Keys(s.reports)) {
		if _, member := g.members[p]; member {
			reports = append(reports, s.reports[p])
		}
	}
	s.cands, s.reports, s.told, s.started, s.survey = nil, nil, nil, time.Time{}, false
	s.since = now // its own search: a snapshot period from now
	g.surveyed, g.surveyPlaced, g.surveyHeld = true, tok, true
	chosen, err := geometric.Survey(geometric.ID(g.self()), cands, own, reports, g.tc.Tokens)
	if err != nil {
		g.note(slog.LevelWarn, "geometric: survey", "err", err)
		return
	}
	g.placement, g.placementAt = make([]peer.ID, g.tc.Tokens), now
	g.placement[tok.Num] = g.self()
	for i, c := range chosen {
		g.placement[i+1] = peer.ID(c)
	}
	g.note(slog.LevelInfo, "geometric: survey done; naming the tokens' holders", "reports", len(reports), "members", g.load(), "holders", len(chosen))
}

// bySurvey reports whether the survey placed tok here.
func (g *geoMachine) bySurvey(tok geometric.Token) bool {
	return g.surveyHeld && g.surveyPlaced == tok
}

// surveyNames is the holder the first superpeer's placement names for
// token num, "" if none, or if the placement is surveyWait old or older:
// a named holder that is gone, or refuses the token, leaves it to the
// hash (Rehome).
func (g *geoMachine) surveyNames(num int, now time.Time) peer.ID {
	if num >= len(g.placement) || now.Sub(g.placementAt) >= g.surveyWait() {
		return ""
	}
	return g.placement[num]
}
