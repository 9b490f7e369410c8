package geometric

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Survey places the tokens of a new network from measured RTTs: a
// k-median over candidates, judged by what the members of the first
// cluster measure.
//
// The tokens of a new network start in its first cluster. Placed there
// at random (Rehome), they spread by the forces of coordinates that are
// still poor (a median relative error of 0.3 to 0.5 twenty seconds in),
// and the search on measured RTTs (Swap) then moves them a cluster and a
// round at a time: on 100 PlanetLab hosts with S = 10 the node simulator
// settled at about 65 s. So the first superpeer instead names some
// candidates (landmarks), its members measure their RTTs to each and
// report them, and Survey chooses the k − 1 candidates that, with the
// first superpeer, serve the reporting members best: the greedy k-median,
// then 1-swaps while one lowers the cost. With the true RTTs of every
// peer to 32 random landmarks, at the time of the old re-homing and with
// the tokens then pinned, the simulator settled at 49–55 s, at 0.60–0.63
// × random placement (BENCHMARKS.md).
//
// Members are strangers, and their reports are claims: each is clamped as
// Swap clamps it, by the triangle inequality and the RTT the superpeer
// measures itself. A member m's claimed RTT to candidate c counts as at
// least r(m,s) − r(s,c) and at most r(m,s) + r(s,c), where r(m,s) is m's
// claim for the superpeer s; a candidate is judged only when s measured
// it (own > 0). A liar's claims thus move its own cost term within
// 2·r(s,c) per candidate; what a group of liars can do is tilt close
// calls between candidates, as in Swap, and the superpeer's choice of
// candidates is its own, as in the search. Members that did not report
// do not count.
//
// Survey returns the chosen candidates in the order of candidates (at
// most k − 1 of them; fewer when fewer candidates were measured, none
// without a valid report), or an error for reports or RTTs of the wrong
// shape.
func Survey(self ID, candidates []ID, own []time.Duration, reports []SwapReport, k int) ([]ID, error) {
	if len(own) != len(candidates) {
		return nil, fmt.Errorf("%w: %d own RTTs for %d candidates", ErrConfig, len(own), len(candidates))
	}
	if k < 1 {
		return nil, fmt.Errorf("%w: survey for %d tokens, want at least 1", ErrConfig, k)
	}
	var usable []int // candidates judged: measured by self, not self, once each
	for i, c := range candidates {
		if own[i] > 0 && c != self && c != "" && slices.Index(candidates, c) == i {
			usable = append(usable, i)
		}
	}
	valid := validReports(self, candidates, reports)
	if len(valid) == 0 {
		return nil, nil // nothing measured: no reason to name anyone
	}
	// cost[j][u]: member j's clamped RTT to usable candidate u; base[j]
	// its RTT to self.
	base := make([]time.Duration, len(valid))
	cost := make([][]time.Duration, len(valid))
	for j, r := range valid {
		base[j] = r.ToSuperpeer
		cost[j] = make([]time.Duration, len(usable))
		for u, i := range usable {
			d, to := own[i], r.ToCandidate[i]
			switch {
			case r.Member == candidates[i]:
				to = 0
			case to <= 0:
				to = r.ToSuperpeer + d // not measured: the most it can be
			}
			cost[j][u] = min(max(to, r.ToSuperpeer-d, 0), r.ToSuperpeer+d)
		}
	}
	total := func(chosen []int) time.Duration {
		var sum time.Duration
		for j := range valid {
			best := base[j]
			for _, u := range chosen {
				best = min(best, cost[j][u])
			}
			sum += best
		}
		return sum
	}
	var chosen []int
	for len(chosen) < k-1 && len(chosen) < len(usable) {
		bu, bc := -1, time.Duration(0)
		for u := range usable {
			if slices.Contains(chosen, u) {
				continue
			}
			if c := total(append(chosen, u)); bu < 0 || c < bc {
				bu, bc = u, c
			}
		}
		chosen = append(chosen, bu)
	}
	// 1-swaps, each lowering the cost: at most as many rounds as there
	// are candidates times the tokens, which bounds the work.
	cur := total(chosen)
	for range len(usable) * len(chosen) {
		improved := false
		for x := range chosen {
			for u := range usable {
				if slices.Contains(chosen, u) {
					continue
				}
				old := chosen[x]
				chosen[x] = u
				if c := total(chosen); c < cur {
					cur, improved = c, true
				} else {
					chosen[x] = old
				}
			}
		}
		if !improved {
			break
		}
	}
	slices.SortFunc(chosen, func(a, b int) int { return cmp.Compare(usable[a], usable[b]) })
	out := make([]ID, len(chosen))
	for x, u := range chosen {
		out[x] = candidates[usable[u]]
	}
	return out, nil
}
