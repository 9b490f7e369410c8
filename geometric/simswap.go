package geometric

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// swapNext is how many superpeers, the nearest by coordinate, a member
// measures to find its next superpeer after its own (SwapReport.Second).
const swapNext = 3

// simSwap runs the search of swap.go on a settled placement, as the
// superpeers would. In each round:
//
//   - every ordinary peer attaches to the nearest superpeer with room by
//     measured RTT (rtt; the peers measure the superpeers first);
//   - each superpeer in turn judges up to SwapCandidates of its members
//     not tried yet (Candidates), its members measuring their RTT to each
//     (a probe each) and reporting it with their RTT to the superpeer, and
//     hands its role to the one Swap chooses; a superpeer that swapped
//     starts a fresh list of candidates tried (its old self among them);
//   - with the attachment that follows, each superpeer summarises its
//     cluster (Summarize: its members report their next superpeer among
//     the swapNext nearest by coordinate, and their RTTs to
//     SwapCandidates OutlyingCandidates), and the relocations that
//     Relocate chooses from all summaries are made.
//
// It stops after a round in which no cluster had a candidate left to try
// and nothing was relocated, or after SwapRounds rounds. It returns the
// superpeers (in slot order), the swaps and relocations made, and the
// probes per peer.
func simSwap(n int, rtt func(i, j int) time.Duration, coords []*coordinate.Coordinate, sps []int, cfg SimConfig) ([]int, int, float64, error) {
	sps = slices.Clone(sps)
	ids := make([]ID, n)
	index := make(map[ID]int, n)
	for i := range ids {
		ids[i] = ID(fmt.Sprintf("p%d", i))
		index[ids[i]] = i
	}
	dist := func(i, j int) float64 {
		if i == j {
			return 0
		}
		if d := rtt(i, j); d > 0 {
			return float64(d)
		}
		return math.Inf(1) // not measured: never the nearest
	}
	probes := 0
	measure := func(i, j int) time.Duration {
		if i == j {
			return 0
		}
		probes++
		return max(rtt(i, j), 0)
	}
	clusters := func() (map[int][]int, error) {
		attach, err := AttachAllBy(n, dist, sps, cfg.Capacity)
		members := make(map[int][]int, len(sps))
		for i, s := range attach {
			if s >= 0 && s != i {
				members[s] = append(members[s], i)
			}
		}
		return members, err
	}
	peersOf := func(ms []int) []Peer {
		ps := make([]Peer, 0, len(ms))
		for _, m := range ms {
			ps = append(ps, Peer{ids[m], coords[m]})
		}
		return ps
	}
	tried := make([]map[ID]bool, len(sps))
	for k := range tried {
		tried[k] = map[ID]bool{}
	}
	swaps := 0
	for range cfg.SwapRounds {
		members, err := clusters()
		if err != nil {
			return nil, 0, 0, err
		}
		active := false
		for k, s := range sps {
			ms := members[s]
			cands := Candidates(ids[s], peersOf(ms), cfg.SwapCandidates, func(id ID) bool { return tried[k][id] })
			if len(cands) == 0 {
				continue
			}
			active = true
			own := make([]time.Duration, len(cands))
			for c, id := range cands {
				own[c] = measure(s, index[id])
				tried[k][id] = true
			}
			reports := make([]SwapReport, 0, len(ms))
			for _, m := range ms {
				r := SwapReport{Member: ids[m], ToSuperpeer: rtt(m, s), ToCandidate: make([]time.Duration, len(cands))}
				for c, id := range cands {
					r.ToCandidate[c] = measure(m, index[id])
				}
				reports = append(reports, r)
			}
			d, ok, err := Swap(cfg.Swap, ids[s], cands, own, reports, len(ms))
			if err != nil {
				return nil, 0, 0, err
			}
			if ok {
				sps[k] = index[d.To]
				tried[k] = map[ID]bool{ids[s]: true}
				swaps++
			}
		}
		if members, err = clusters(); err != nil {
			return nil, 0, 0, err
		}
		moves, err := simSummaries(rtt, coords, ids, sps, members, measure, cfg)
		if err != nil {
			return nil, 0, 0, err
		}
		slot := make(map[ID]int, len(sps))
		for k, s := range sps {
			slot[ids[s]] = k
		}
		for _, mv := range moves {
			k := slot[mv.From]
			tried[k] = map[ID]bool{}
			sps[k] = index[mv.To]
			swaps++
			active = true
		}
		if !active {
			break
		}
	}
	return sps, swaps, float64(probes) / float64(n), nil
}

// simSummaries has every superpeer summarise its cluster and returns the
// relocations Relocate chooses.
func simSummaries(rtt func(i, j int) time.Duration, coords []*coordinate.Coordinate, ids []ID, sps []int, members map[int][]int,
	measure func(i, j int) time.Duration, cfg SimConfig) ([]Relocation, error) {
	index := make(map[ID]int, len(sps))
	load := make(map[ID]int, len(sps))
	for _, s := range sps {
		index[ids[s]] = s
		load[ids[s]] = len(members[s])
	}
	// next returns the swapNext superpeers nearest to i by coordinate,
	// other than s.
	type near struct {
		j int
		d float64
	}
	var nearest []near
	next := func(i, s int) []near {
		best := nearest[:0]
		for _, t := range sps {
			if t == s || t == i {
				continue
			}
			x := near{t, Distance(coords[i], coords[t])}
			if len(best) == swapNext && cmp.Or(cmp.Compare(x.d, best[swapNext-1].d), cmp.Compare(x.j, best[swapNext-1].j)) >= 0 {
				continue
			}
			at := len(best)
			for at > 0 && cmp.Or(cmp.Compare(x.d, best[at-1].d), cmp.Compare(x.j, best[at-1].j)) < 0 {
				at--
			}
			best = slices.Insert(best, at, x)
			if len(best) > swapNext {
				best = best[:swapNext]
			}
		}
		nearest = best
		return best
	}
	// second measures the superpeers of next(i, s) from i and returns the
	// nearest by RTT.
	second := func(i, s int) (ID, time.Duration) {
		var best ID
		var bestD time.Duration
		for _, t := range next(i, s) {
			if d := measure(i, t.j); d > 0 && (best == "" || d < bestD) {
				best, bestD = ids[t.j], d
			}
		}
		return best, bestD
	}
	sums := make([]ClusterSummary, 0, len(sps))
	for _, s := range sps {
		ms := members[s]
		ps := make([]Peer, 0, len(ms))
		for _, m := range ms {
			ps = append(ps, Peer{ids[m], coords[m]})
		}
		at := make(map[ID]int, len(ms))
		for _, m := range ms {
			at[ids[m]] = m
		}
		toSP := func(id ID) time.Duration { return rtt(at[id], s) } // members only
		cands := OutlyingCandidates(ids[s], Peer{ids[s], coords[s]}, ps, toSP, cfg.SwapCandidates)
		own := make([]time.Duration, len(cands))
		for c, id := range cands {
			own[c] = measure(s, at[id])
		}
		reports := make([]SwapReport, 0, len(ms))
		for _, m := range ms {
			r := SwapReport{Member: ids[m], ToSuperpeer: rtt(m, s), ToCandidate: make([]time.Duration, len(cands))}
			for c, id := range cands {
				r.ToCandidate[c] = measure(m, at[id])
			}
			r.Second, r.ToSecond = second(m, s)
			reports = append(reports, r)
		}
		sec, secRTT := second(s, s)
		near := map[ID]time.Duration{}
		for _, t := range sps {
			if t != s {
				near[ids[t]] = rtt(s, t) // the superpeers measure one another
			}
		}
		sums = append(sums, Summarize(ids[s], len(ms), cands, own, reports, sec, secRTT,
			func(q ID) time.Duration { return near[q] },
			func(q ID) int { return cfg.Capacity - load[q] }))
	}
	return Relocate(cfg.Swap, sums)
}

// attachMeasured attaches every peer as AttachAllBy does, by the RTT it
// measures to the swapNext+1 superpeers nearest by coordinate and the
// estimated distance to the others.
func attachMeasured(n int, rtt func(i, j int) time.Duration, coords []*coordinate.Coordinate, sps []int, capacity int) ([]int, error) {
	measured := make([]map[int]bool, n)
	type c struct {
		j int
		d float64
	}
	cs := make([]c, 0, len(sps))
	for i := range n {
		cs = cs[:0]
		for _, s := range sps {
			cs = append(cs, c{s, Distance(coords[i], coords[s])})
		}
		slices.SortFunc(cs, func(a, b c) int { return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.j, b.j)) })
		measured[i] = make(map[int]bool, swapNext+1)
		for _, x := range cs[:min(swapNext+1, len(cs))] {
			measured[i][x.j] = true
		}
	}
	return AttachAllBy(n, func(i, j int) float64 {
		if i == j {
			return 0
		}
		if d := rtt(i, j); measured[i][j] && d > 0 {
			return d.Seconds()
		}
		return Distance(coords[i], coords[j])
	}, sps, capacity)
}
