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
//     (a probe each) and reporting it with their RTT to the superpeer and
//     their next superpeer among the swapNext nearest by coordinate (a
//     probe each), the members of other clusters whose next superpeer
//     it is (found at the round's start) measuring and reporting too
//     (SwapReport.Outside), and hands its role to the one Swap chooses; a
//     superpeer that swapped starts a fresh list of candidates tried (its
//     old self among them);
//   - with the attachment that follows, each superpeer summarises its
//     cluster (Summarize: its members report their next superpeer among
//     the swapNext nearest by coordinate, and their RTTs to
//     SwapCandidates OutlyingCandidates), and the relocations that
//     Relocate chooses from all summaries are made.
//
// It stops after a round in which no cluster had a candidate left to try
// and nothing was relocated, or after SwapRounds rounds. It returns the
// superpeers (in slot order), the swaps and relocations made, and the
// probes per peer. A peer keeps the RTTs it measured during the search
// (rtt is a function: a second probe of the same peer would tell it
// nothing new), so the probes are the distinct pairs (i, j) measured by i:
// on PlanetLab (seed 1) 71, 65 and 38 per peer at S = 10, 25 and 49, and
// on the synthetic 10,000 hosts (S = 100) 219. Counting every
// measurement they are 885, 229, 141 and 588 (most of the repeats are a
// member measuring its next superpeers again in every round), and the
// search as it was before Swap heard of the next superpeers and the
// outsiders made about 194, 114, 120 and 379. A live node that did not
// keep its RTTs would pay the larger figures.
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
	// A peer keeps the RTTs it measured during the search: a second
	// measurement of the same pair is not a probe.
	probed := map[[2]int32]bool{}
	measure := func(i, j int) time.Duration {
		if i == j {
			return 0
		}
		probed[[2]int32{int32(i), int32(j)}] = true
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
	lies := &liars{liar: cfg.Liars, eligible: cfg.Eligible, ids: ids, index: index}
	tried := make([]map[ID]bool, len(sps))
	for k := range tried {
		tried[k] = map[ID]bool{}
	}
	nx := &nexts{coords: coords, ids: ids, sps: sps, measure: measure}
	swaps := 0
	for range cfg.SwapRounds {
		members, err := clusters()
		if err != nil {
			return nil, 0, 0, err
		}
		active := false
		// outside[s] are the members of other clusters whose next
		// superpeer is s, and of[m] the superpeer of member m.
		outside := map[int][]int{}
		of := map[int]int{}
		for _, s := range sps {
			for _, m := range members[s] {
				of[m] = s
				if q, _ := nx.second(m, s); q != "" {
					outside[index[q]] = append(outside[index[q]], m)
				}
			}
		}
		for k, s := range sps {
			ms := members[s]
			cands := Candidates(ids[s], peersOf(ms), cfg.SwapCandidates, func(id ID) bool { return tried[k][id] || !lies.eligibleID(id) })
			if len(cands) == 0 || lies.is(s) {
				continue // a liar never gives its role away
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
				r.Second, r.ToSecond = nx.second(m, s)
				if lies.is(m) {
					r = lies.swapClaim(r, cands, own)
				}
				reports = append(reports, r)
			}
			for _, o := range outside[s] {
				t := of[o]
				if t == s || slices.Contains(sps, o) {
					continue // attached to s since, or a superpeer now
				}
				r := SwapReport{Member: ids[o], ToSuperpeer: rtt(o, t), ToCandidate: make([]time.Duration, len(cands)), Outside: true}
				for c, id := range cands {
					r.ToCandidate[c] = measure(o, index[id])
				}
				if lies.is(o) {
					r = lies.swapClaim(r, cands, own)
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
		moves, err := simSummaries(rtt, coords, ids, sps, members, measure, cfg, lies)
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
	return sps, swaps, float64(len(probed)) / float64(n), nil
}

// simSummaries has every superpeer summarise its cluster and returns the
// relocations Relocate chooses.
func simSummaries(rtt func(i, j int) time.Duration, coords []*coordinate.Coordinate, ids []ID, sps []int, members map[int][]int,
	measure func(i, j int) time.Duration, cfg SimConfig, lies *liars) ([]Relocation, error) {
	load := make(map[ID]int, len(sps))
	for _, s := range sps {
		load[ids[s]] = len(members[s])
	}
	nx := &nexts{coords: coords, ids: ids, sps: sps, measure: measure}
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
		cands := OutlyingCandidates(ids[s], Peer{ids[s], coords[s]}, ps, toSP, len(ps))
		cands = slices.DeleteFunc(cands, func(id ID) bool { return !lies.eligibleID(id) })
		cands = cands[:min(len(cands), cfg.SwapCandidates)]
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
			r.Second, r.ToSecond = nx.second(m, s)
			if lies.is(m) {
				r = lies.summaryClaim(r, cands, own)
			}
			reports = append(reports, r)
		}
		sec, secRTT := nx.second(s, s)
		near := map[ID]time.Duration{}
		for _, t := range sps {
			if t != s {
				near[ids[t]] = rtt(s, t) // the superpeers measure one another
			}
		}
		sum := Summarize(ids[s], len(ms), cands, own, reports, sec, secRTT,
			func(q ID) time.Duration { return near[q] },
			func(q ID) int { return cfg.Capacity - load[q] })
		if lies.is(s) {
			sum = lies.ownSummary(sum, ms)
		}
		sums = append(sums, sum)
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

// nexts finds a peer's next superpeer: the nearest by measured RTT among
// the swapNext superpeers nearest to it by coordinate, other than its own.
type nexts struct {
	coords  []*coordinate.Coordinate
	ids     []ID
	sps     []int
	measure func(i, j int) time.Duration
	buf     []near
}

type near struct {
	j int
	d float64
}

// next returns the swapNext superpeers nearest to i by coordinate, other
// than s (and i).
func (x *nexts) next(i, s int) []near {
	best := x.buf[:0]
	for _, t := range x.sps {
		if t == s || t == i {
			continue
		}
		c := near{t, Distance(x.coords[i], x.coords[t])}
		if len(best) == swapNext && cmp.Or(cmp.Compare(c.d, best[swapNext-1].d), cmp.Compare(c.j, best[swapNext-1].j)) >= 0 {
			continue
		}
		at := len(best)
		for at > 0 && cmp.Or(cmp.Compare(c.d, best[at-1].d), cmp.Compare(c.j, best[at-1].j)) < 0 {
			at--
		}
		best = slices.Insert(best, at, c)
		if len(best) > swapNext {
			best = best[:swapNext]
		}
	}
	x.buf = best
	return best
}

// second measures the superpeers of next(i, s) from i and returns the
// nearest by RTT ("" if none answered).
func (x *nexts) second(i, s int) (ID, time.Duration) {
	var best ID
	var bestD time.Duration
	for _, t := range x.next(i, s) {
		if d := x.measure(i, t.j); d > 0 && (best == "" || d < bestD) {
			best, bestD = x.ids[t.j], d
		}
	}
	return best, bestD
}
