package node

import (
	"log/slog"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// Relocation between clusters (geometric.Relocate), as the simulator's
// search runs it (geometric's simswap.go). A swap inside a cluster cannot
// move a superpeer to a region that has none, nor away from one that
// needs none: a superpeer on an outlying host, which no peer is nearer to
// than to its own superpeer, keeps its token and serves nobody (nodesim,
// 100 PlanetLab hosts, S = 10: 16, 0, 19 and 2 of 160 superpeers empty at
// the end of 16 seeds on each of four host sets).
//
//   - Once its search is done with the central candidates (the token
//     pinned, or none left to try), a superpeer's rounds alternate
//     between a swap round and a summary round, whose candidates are the
//     members that would gain most as a second superpeer of the cluster
//     (geometric.OutlyingCandidates). The members measure and report
//     them as for a swap; a superpeer without members summarises at once.
//   - From the reports it computes its cluster's summary
//     (geometric.Summarize: what its members would lose if it gave its
//     role up, going to their next superpeers; what they would gain from
//     a second superpeer at its best outlying candidate) and publishes it
//     with its token report (TokenReport.Summary).
//   - Then it runs geometric.Relocate on its own summary and those of the
//     other superpeers it hears (feedSummaries), and when Relocate moves
//     its own token, it hands it to the other cluster's candidate
//     (Holder.Handover, vetted as every pass).
//   - After summaryRounds summary rounds in a row that moved nothing it
//     stops, until the set of superpeers it hears changes.
//
// Every superpeer decides only for its own token, on the summaries it
// hears; two that heard different summaries may both pick one candidate,
// and the second pass is refused (a peer holds one token).
//
// It is off unless GeoConfig.Relocate is set. Members are strangers, and
// a summary is another superpeer's claim that no receiver can check: it
// is clamped to what the receiver can see (feedSummaries: no more members
// than the load in the same report, no gain above the cluster's cost, no
// candidate that holds a token), but a liar superpeer that claims the
// most the wire allows draws the honest superpeers' tokens to its fellow
// liars, one relocation after another. In the node simulator
// (bench.NodeAttack, 100 PlanetLab hosts, S = 10, a fifth of the nodes
// liars, 8 seeds) liars that lie in the search and in their summaries
// held 9.0 of the 10 roles with relocation, 5.0 without; a cap at the
// median of the claimed gains left them 8.9 and cost the honest
// placement most of its gain. Relocation so serves swarms whose
// superpeers trust one another; the open question is a summary a
// receiver can check (the members' own signed reports, say).

// summaryDue says whether the search's next round is a summary round:
// when the search is done with the central candidates (pinned, or none
// left), every other round, and every round once none are left; none
// after summaryRounds in a row that moved no token.
func (g *geoMachine) summaryDue(s *swapSearch) bool {
	if !g.cfg.Relocate || s.quiet >= summaryRounds {
		return false
	}
	if s.exhausted || g.load() == 0 {
		return true
	}
	return g.holder.Pinned() && !s.summary
}

// summaryRounds is how many summary rounds in a row that move no token a
// superpeer makes before it stops, until the superpeers it hears
// summaries from change (summarySources) or its token moves. Without the
// bound a superpeer summarised its cluster every other round for good, its members measuring the candidates each
// time, and late relocations on gains that had grown slowly kept the
// placement moving for minutes (nodesim, PlanetLab hosts 390-489, S = 10,
// seed 15: the last relocation at 281 s).
const summaryRounds = 3

// outlying returns the summary round's candidates: up to k members that
// would save the cluster most as a second superpeer (by coordinate, from
// the RTT this node measures to each).
func (g *geoMachine) outlying(ps []geometric.Peer, k int) []geometric.ID {
	self := geometric.Peer{ID: geometric.ID(g.self()), Coord: g.client.Coordinate()}
	return geometric.OutlyingCandidates(self.ID, self, ps, func(id geometric.ID) time.Duration { return g.rtt[peer.ID(id)] }, k)
}

// summarize computes the cluster's summary from a summary round's
// candidates and reports, publishes it, and relocates the token if
// Relocate says so.
func (g *geoMachine) summarize(now time.Time, tok geometric.Token, cands []geometric.ID, own []time.Duration, reports []geometric.SwapReport) {
	next := g.nextSuperpeer(g.self())
	sum := geometric.Summarize(geometric.ID(g.self()), g.load(), cands, own, reports, geometric.ID(next.Peer), next.RTT,
		func(q geometric.ID) time.Duration { return g.rtt[peer.ID(q)] },
		func(q geometric.ID) int { return g.room(peer.ID(q)) })
	sum.Members = min(sum.Members, g.tc.Capacity) // as the load: no more than it serves
	g.summary = &sum
	g.publishToken()
	others := g.feedSummaries()
	if s := g.search; s != nil {
		if h := summarySources(others); !slices.Equal(h, s.heard) {
			s.heard, s.quiet = h, 0
		}
	}
	sums := append([]geometric.ClusterSummary{sum}, others...)
	moves, err := geometric.Relocate(swapConfig(tok).Scaled(g.scale), sums)
	g.note(slog.LevelDebug, "geometric: cluster summarised", "token", tok.Num, "members", sum.Members, "reports", len(reports),
		"remove", sum.Remove, "full", sum.Full, "candidate", peer.ID(sum.Candidate), "gain", sum.Gain, "summaries", len(sums), "err", err)
	if err != nil {
		return
	}
	i := slices.IndexFunc(moves, func(mv geometric.Relocation) bool { return mv.From == sum.Superpeer })
	if i < 0 {
		if g.search != nil {
			g.search.quiet++
		}
		return
	}
	mv := moves[i]
	outs := g.holder.Handover(mv.To)
	if len(outs) == 0 {
		return
	}
	g.relocations++
	g.note(slog.LevelInfo, "geometric: handing the superpeer's role to another cluster's member that serves the swarm better",
		"token", tok.Num, "to", peer.ID(mv.To), "net", mv.Net, "remove", sum.Remove)
	g.carryOut(now, outs, func(now time.Time) {
		g.publishToken()
		g.update(now)
	})
}

// summarySources are the superpeers that summaries come from, sorted. A
// superpeer new or gone (a hand-over, a relocation, a crash) is news that
// a relocation may follow; the gains and candidates are not: they move a
// little with every round's measurements (nodesim, PlanetLab hosts
// 390-489, seed 14: with the candidates counted as news, the superpeers
// summarised for good and the last relocation came at 284 s).
func summarySources(sums []geometric.ClusterSummary) []geometric.ID {
	ids := make([]geometric.ID, len(sums))
	for i, s := range sums {
		ids[i] = s.Superpeer
	}
	slices.Sort(ids)
	return ids
}

// room is how many more ordinary peers superpeer p takes, by its last
// report (0 when it reports none).
func (g *geoMachine) room(p peer.ID) int {
	for _, tp := range g.feed.Tokens {
		if tp.Holder == p && tp.Superpeer {
			return max(g.tc.Capacity-tp.Load, 0)
		}
	}
	return 0
}

// feedSummaries are the summaries of the other superpeers this node
// believes (geotokens.go), clamped to what it can see: the superpeer is the report's holder; no
// more members than the report's load; a gain no larger than the
// cluster's cost (a second superpeer cannot save the members more than
// all of their RTTs to the first); no candidate that holds or claims a
// token (a summary made before a relocation to it).
func (g *geoMachine) feedSummaries() []geometric.ClusterSummary {
	holds := map[geometric.ID]bool{geometric.ID(g.self()): true}
	for _, tp := range g.claims {
		holds[geometric.ID(tp.Holder)] = true
	}
	for _, tp := range g.feed.Tokens {
		holds[geometric.ID(tp.Holder)] = true
	}
	var out []geometric.ClusterSummary
	for _, tp := range g.feed.Tokens {
		if k, ok := g.known[tp.Token.Num]; tp.Holder == g.self() || !tp.Superpeer || tp.Summary == nil || !ok || k.Holder != tp.Holder {
			continue // (only the holder this node believes)
		}
		s := *tp.Summary
		s.Superpeer = geometric.ID(tp.Holder)
		s.Members = min(max(s.Members, 0), tp.Load)
		s.Cost, s.Remove, s.Gain = max(s.Cost, 0), max(s.Remove, 0), min(max(s.Gain, 0), max(s.Cost, 0))
		if holds[s.Candidate] {
			s.Candidate, s.Gain = "", 0
		}
		out = append(out, s)
	}
	return out
}

// Relocations counts the hand-overs this node made to another cluster's
// member (georelocate.go).
func (m *Machine) Relocations() uint64 {
	if m.geo == nil {
		return 0
	}
	return m.geo.relocations
}
