package node

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The liar check (issue 19, finding 10: from the holder's vantage point
// alone it distrusted honest peers 10 to 45 times in a 48-node run with no
// liar).
//
// Before a pass, the holder checks the coordinate the recipient claims
// (the one the token machine decided on) against the RTT it measures to
// it, asking for a ping first when it has none. When the claim agrees
// (geometric.Plausible with DefaultTolerance at the network's scale), the pass goes ahead. When
// it does not, and Vantage > 1, the holder asks the 2·Vantage − 2 peers
// nearest the claimed coordinate in its snapshot for the RTT they measure
// to the recipient (VouchRequest; a peer answers with the RTT it keeps,
// or measures one within a budget: vouchAsked), and checks the claim from each of their coordinates,
// as geometric.Simulate's check does (bench.GeometricAttack, VetClaim).
// Each check votes against the claim when it puts the recipient nearer
// than measured (geometric.TooNear: a peer cannot make its RTT shorter
// than the network makes it, and a liar claims to sit near a spot to
// draw tokens to it); the recipient is distrusted only when at least
// min(Vantage, checks) votes are against it and they are the majority.
// A distrusted peer gets no pass (PassDone(false)), is no neighbour until
// the next snapshot, and is counted (Distrusted, out of VetChecks).
// Answers that do not come count as no check. A peer's answer is one
// vote: a majority of colluding checkers near the claimed spot vouches
// for anything (as with VetClaim).
//
// In nodesim (48 PlanetLab hosts, five minutes, TestGeoLiarCheckVantage,
// a report of make bench) the vantage points do not do what they were
// for: at seeds 1-3 the holder alone distrusted 24 of 91 honest claims it
// checked and three vantage points 14 of 70, but pooled over seeds 1-8 the
// holder alone distrusted 76 of 292 (26 %) and three vantage points 93 of
// 306 (30 %). What is distrusted are honest peers whose coordinate the
// network does not fit, which all the vantage points near the claimed
// spot find nearer than measured; and a liar that claims a stopping
// superpeer's spot was caught by 0 to 2 of 5 in most seeds. An open
// problem.

// vet checks the claim of the recipient of the pass in flight.
func (g *geoMachine) vet(now time.Time) {
	to := peer.ID(g.pass.p.To)
	if _, claimed := g.snapshot[to]; !claimed {
		g.vetted(now, true) // not in the snapshot: no claim the machine decided on
		return
	}
	if rtt := g.rtt[to]; rtt > 0 {
		g.judge(now, rtt)
		return
	}
	g.pass.vetting = true
	g.ping(to).vet = true
}

// judge takes this node's own check of the claim, with the RTT it
// measured, and asks the other vantage points when it fails.
func (g *geoMachine) judge(now time.Time, rtt time.Duration) {
	g.vetN++
	to := peer.ID(g.pass.p.To)
	self := g.client.Coordinate()
	g.pass.checks = []geometric.Check{{Self: self, RTT: rtt}}
	if geometric.Plausible(self, g.snapshot[to], rtt, geometric.DefaultTolerance().Scaled(g.scale)) {
		g.vetted(now, true)
		return
	}
	ask := g.vantagePoints(to)
	if len(ask) == 0 {
		g.decide(now)
		return
	}
	g.pass.vetting, g.pass.waiting = true, map[peer.ID]bool{}
	for _, p := range ask {
		g.pass.waiting[p] = true
		g.out.Vouch = append(g.out.Vouch, VouchRequest{To: p, Of: to})
	}
}

// vantagePoints are the peers to ask about to's claim: the 2·Vantage − 2
// nearest the claimed coordinate in the snapshot, but for this node and
// to.
func (g *geoMachine) vantagePoints(to peer.ID) []peer.ID {
	n := 2*g.cfg.Vantage - 2
	if n <= 0 {
		return nil
	}
	claimed := g.snapshot[to]
	var ids []peer.ID
	for p, c := range g.snapshot {
		if p != to && p != g.self() && c != nil && len(c.Vec) == len(claimed.Vec) {
			ids = append(ids, p)
		}
	}
	slices.SortFunc(ids, func(a, b peer.ID) int {
		return cmp.Or(cmp.Compare(geometric.Distance(claimed, g.snapshot[a]), geometric.Distance(claimed, g.snapshot[b])), cmp.Compare(a, b))
	})
	return ids[:min(n, len(ids))]
}

// The vantage point's side (hostile-peer audit, finding A: a stranger's
// vouch request made the node ping the peer it named, on a fresh stream,
// whenever the machine kept no RTT for it; three identities asking within
// the node's per-peer rate pushed it over the named peer's, which banned
// the honest node after 4.1 s, and the askers were never struck).
//
// A vantage point answers with the RTT it keeps for the peer asked about,
// to anyone: that costs one step. It measures one for the answer only
// when the asker is a holder it believes (its report is in the feed this
// machine resolved, geotokens.go): only a holder vets a pass, so only a
// holder makes a liar check, and there are S of them, not one per key an
// attacker makes; and only within a budget, so that what the node sends
// the peer named stays far inside the per-peer rate that peer enforces
// (50 streams a second, overlay/wire.go): at most one measurement of a
// peer (and one for an asker) a ping interval, and at most vouchBudget in
// all. Any other request is answered with none, which the asker counts as
// no check. Answering from the table alone would have cost the check
// half its vantage points: in nodesim (48 PlanetLab hosts, S = 5, five
// minutes, seeds 1-8, TestGeoLiarCheckVantage's runs) 14 of the 28 vouch
// requests found no RTT kept; each came from a holder the vantage point
// believed and was measured within the budget, and the runs did not
// change (0 of 32 checks distrusted, as before).
func (g *geoMachine) vouchAsked(now time.Time, in VouchAsked) {
	g.answer = GeoAnswer{RTT: g.rtt[in.Of]}
	if g.answer.RTT > 0 {
		return
	}
	g.answer.Measure = g.mayMeasure(now, in)
	if g.answer.Measure {
		g.vouchMeasured++
	} else {
		g.vouchNo++
	}
}

// vouchBudget is the most measurements a node makes for other holders'
// liar checks in a ping interval: a holder asks 2·Vantage − 2 different
// vantage points about one recipient at a time, so an honest vantage
// point is rarely asked by more than one holder at once.
const vouchBudget = 4

// mayMeasure reports whether the node measures in.Of for in.From's liar
// check (see vouchAsked), and if so takes it from the budget.
func (g *geoMachine) mayMeasure(now time.Time, in VouchAsked) bool {
	if in.From == g.self() || in.Of == g.self() || in.From == in.Of ||
		!slices.ContainsFunc(g.feed.Tokens, func(tp TokenPos) bool { return tp.Holder == in.From }) {
		return false
	}
	window := g.cfg.PingInterval
	for _, m := range []map[peer.ID]time.Time{g.vouchOf, g.vouchBy} {
		for p, at := range m {
			if !now.Before(at.Add(window)) || now.Before(at) {
				delete(m, p)
			}
		}
	}
	_, of := g.vouchOf[in.Of]
	_, by := g.vouchBy[in.From]
	if of || by || len(g.vouchOf) >= vouchBudget {
		return false
	}
	g.vouchOf[in.Of], g.vouchBy[in.From] = now, now
	return true
}

// VouchAnswers counts the vouch requests (other holders' liar checks)
// this node measured a peer for, and those it answered with no RTT: it
// kept none, and the asker was no holder it believes or the budget was
// spent (geovet.go's vouchAsked). Requests it answered from the RTTs it
// keeps are in neither.
func (m *Machine) VouchAnswers() (measured, none uint64) {
	if m.geo == nil {
		return 0, 0
	}
	return m.geo.vouchMeasured, m.geo.vouchNo
}

// vouchDone takes a vantage point's answer.
func (g *geoMachine) vouchDone(now time.Time, in VouchDone) {
	p := g.pass
	if p == nil || !p.waiting[in.From] || peer.ID(p.p.To) != in.Of {
		return
	}
	delete(p.waiting, in.From)
	if c := g.snapshot[in.From]; in.Err == nil && in.RTT > 0 && c != nil {
		p.checks = append(p.checks, geometric.Check{Self: c, RTT: in.RTT})
	}
	if len(p.waiting) == 0 {
		p.vetting = false
		g.decide(now)
	}
}

// decide distrusts the recipient when at least min(Vantage, checks) of the
// checks find its claim implausible and they are the majority; the pass
// goes ahead otherwise.
func (g *geoMachine) decide(now time.Time) {
	to := peer.ID(g.pass.p.To)
	claimed := g.snapshot[to]
	bad := 0
	for _, c := range g.pass.checks {
		if geometric.TooNear(c.Self, claimed, c.RTT, geometric.DefaultTolerance().Scaled(g.scale)) {
			bad++
		}
	}
	n := len(g.pass.checks)
	if bad < min(g.cfg.Vantage, n) || 2*bad <= n {
		g.overruled++
		g.note(slog.LevelInfo, "geometric: our check of a peer's coordinate failed, too few vantage points' did; trusted",
			"peer", to, "implausible", bad, "checks", n)
		g.vetted(now, true)
		return
	}
	g.barred[to] = g.snapshotEpoch
	g.distrustN++
	own := g.pass.checks[0]
	g.note(slog.LevelWarn, "geometric: a peer's coordinate disagrees with the RTTs measured to it; no token for it",
		"peer", to, "implausible", bad, "checks", n, "predicted_ms", geometric.Distance(own.Self, claimed)*1000,
		"measured_ms", float64(own.RTT)/float64(time.Millisecond))
	g.vetted(now, false)
}

// VetChecks counts the claims the liar check checked: the denominator of
// Distrusted. Overruled counts the checks in which this node's own found
// the claim implausible and the claim was trusted all the same (the
// votes against it too few).
func (m *Machine) VetChecks() (checks, overruled uint64) {
	if m.geo == nil {
		return 0, 0
	}
	return m.geo.vetN, m.geo.overruled
}

// pingCoord checks the coordinate a ping's answer carried, a stranger's
// claim, before the node fits its own to it: a valid coordinate
// (geometric.Valid: the dimensions, every component finite and within
// geometric.MaxComponent, the height and error not negative), with a
// height no lower than Vivaldi's floor (serf never makes one lower) and an
// error no larger than Vivaldi's largest (a new coordinate's, which serf
// never exceeds). It returns the coordinate to fit to: c, with an error
// below minPeerError raised to it.
func pingCoord(c *coordinate.Coordinate) (*coordinate.Coordinate, error) {
	if err := geometric.Valid(c); err != nil {
		return nil, err
	}
	cfg := coordinate.DefaultConfig()
	if c.Height < cfg.HeightMin {
		return nil, fmt.Errorf("%w: Height = %v below Vivaldi's floor %v", geometric.ErrBadCoordinate, c.Height, cfg.HeightMin)
	}
	if c.Error > cfg.VivaldiErrorMax {
		return nil, fmt.Errorf("%w: Error = %v above Vivaldi's largest %v", geometric.ErrBadCoordinate, c.Error, cfg.VivaldiErrorMax)
	}
	if c.Error < minPeerError {
		c = c.Clone()
		c.Error = minPeerError
	}
	return c, nil
}

// minPeerError is the least error the node takes a peer's coordinate to
// have. The error a peer claims weighs its sample against the node's own
// (serf moves its coordinate by its own error over the sum of both): a
// claim of perfect confidence, an error of 0, would move it the whole way
// to fit the peer's claim. An honest coordinate on PlanetLab has an error
// of the order of its median relative error (0.1 to 0.3).
const minPeerError = 0.05
