package dhtselect

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
)

// ClusterSize is one cluster's size as its superpeer reports it on the
// backbone: the cluster at K reserved bits whose key is Key (the
// superpeer's own key masked to K), and Size members, the superpeer
// included.
type ClusterSize struct {
	K    int
	Key  Key
	Size int
}

// Bounds on what one summary can do to the backbone estimate (see
// EstimateFromClusters).
const (
	// SizeCapMultiple is the most a cluster may count for, as a multiple
	// of the median cluster: one superpeer that lies about its size adds
	// at most twice this many clusters to the estimate.
	SizeCapMultiple = 5
	// SizeCapFloor is the least the cap ever is, so that small honest
	// networks, whose clusters of a few peers vary a lot, stay exact.
	SizeCapFloor = 16
)

// emptyTail is the probability below which the number of cluster keys
// without a summary is too large to be empty clusters (see
// EstimateFromClusters).
const emptyTail = 1e-6

// EstimateFromClusters estimates the number of peers in the network from
// the superpeers' summaries of their clusters. It reports false, refusing,
// when there are none to use or when they account for less than half of
// the peers it would estimate (too little of the key space heard from to
// extrapolate). The Source of its answer is SourceBackbone when the
// summaries cover every cluster key at the working k (then N is their sum,
// exact for honest summaries), SourceBackbonePartial otherwise.
//
// It works at one k, the k the most summaries give (ties: the larger),
// since during a change of k some superpeers are at the old one and some
// at the new. Summaries at k-1 and k+1 fill what the working k leaves
// uncovered; others are ignored. One value counts per cluster key: of
// several summaries of one cluster (two superpeers that each believe they
// serve it, a split brain), the largest. Of the nested ones (a cluster at
// k and its halves at k+1), the set that covers most of the key space,
// the working k on a tie. Summaries with K outside [0, MaxK] or a size
// below 1 are ignored.
//
// Not every cluster key has a superpeer: a cluster nobody's key falls in
// is empty, and at n peers in 2^k clusters about 2^k·e^(-n/2^k) are. When
// the cluster keys without a summary are no more than the number of empty
// ones that n = Σ sizes leaves with probability 1 - 10⁻⁶ (Poisson's upper
// tail, which bounds the occupancy count's), the sum stands as it is (the
// source is then SourceBackbonePartial even so: a missing summary is
// indistinguishable from an empty cluster). Beyond that, the summaries
// heard are taken for a sample of the non-empty clusters, and N is the n
// at which 2^k clusters leave as many non-empty as the heard ones stand
// for: n = Σ·E[non-empty | n]/heard, the density extrapolation
// Σ·2^k/heard corrected for the clusters that are empty. With three
// quarters of the summaries heard, at clusters of 4 to 8 peers (a fraction
// of 1/8), that is within 5 % from 1,000 peers to 100,000
// (TestEstimateFromClustersPartial: 2.4 % at worst). With clusters of one or two
// peers (fractions of 1/2 and more) a missing summary looks like an empty
// cluster, and the estimate may fall short by as much as the share of
// summaries not heard: a caller should trust a partial answer only once
// it has listened to the backbone for a TTL, when the summaries missing
// are those of empty clusters.
//
// Members are strangers: each summary's size counts for at most
// max(SizeCapFloor, SizeCapMultiple × m) per cluster key at the working k,
// where m is the median of the other summaries, each taken as the size of
// one cluster at the working k (a summary at k+1 counts twice its size, at
// k-1 half); a lone summary is not capped. One superpeer that lies,
// whatever it claims at whatever k, therefore adds at most
// 2·max(SizeCapFloor, SizeCapMultiple·m) peers, m the honest clusters'
// median (it may claim the cluster at k-1, two keys' worth), and removes
// at most its own cluster's; with 16 honest clusters at k it cannot take
// the working k either, and moves k by at most one
// (TestEstimateFromClustersLiar). With one or two honest clusters the
// bound is the same, which is up to 11 times the true size of a network of
// one cluster, and a liar may take the working k (one summary against
// one) or have the estimate refused (TestEstimateFromClustersLiarSmall).
// Honest clusters stay below the cap (their sizes are
// binomial; tested at means from 1 to 100 and up to 100,000 peers), and
// the sum of a covering set of honest summaries is exact.
//
// It takes 3 to 7 ms (on a loaded 2-core machine) for the 12,500
// summaries of 100,000 peers at a fraction of 1/8
// (BenchmarkEstimateFromClusters): a caller computes it when the
// summaries change, at most once per tick, not per message.
func EstimateFromClusters(cs []ClusterSize) (Estimate, bool) {
	return estimateFromClusters(cs, true)
}

// SampleEstimate estimates the number of peers in the network from the
// summaries of a sample of its clusters (those a node can vouch for, say)
// as EstimateFromClusters does, but it extrapolates from however little
// of the key space they cover, where EstimateFromClusters refuses below
// half: the clusters heard are taken for a sample of the non-empty ones,
// always (where EstimateFromClusters may take the missing for empty
// clusters). It is a rough figure, for a bound rather than an estimate to
// act on (TestSampleEstimate). It reports false only when there are no
// summaries to use.
func SampleEstimate(cs []ClusterSize) (Estimate, bool) {
	return estimateFromClusters(cs, false)
}

// estimateFromClusters is EstimateFromClusters, which refuses (strict)
// below half the estimate heard, and SampleEstimate, which does not.
func estimateFromClusters(cs []ClusterSize, strict bool) (Estimate, bool) {
	k, ok := workingK(cs)
	if !ok {
		return Estimate{}, false
	}
	// Each summary's size as the density of one cluster at k, sorted: the
	// median of the others' caps each summary.
	var dens []float64
	for _, c := range cs {
		if usable(c) {
			dens = append(dens, density(c, k))
		}
	}
	slices.Sort(dens)
	// The summaries at k-1..k+1, capped, by the cluster at k-1 they fall
	// in (the root when k = 0: then there are levels 0 and 1 only). Their
	// cluster keys fit in 32 bits, since k+1 <= MaxK+1 < 32.
	top := max(k-1, 0)
	es := make([]entry, 0, len(cs))
	for _, c := range cs {
		if !usable(c) || c.K < k-1 || c.K > k+1 {
			continue
		}
		size := float64(c.Size)
		if len(dens) > 1 {
			r, _ := slices.BinarySearch(dens, density(c, k))
			limit := max(SizeCapFloor, SizeCapMultiple*medianWithout(dens, r))
			size = min(size, limit*math.Ldexp(1, k-c.K))
		}
		p := prefix32(c.Key, c.K)
		es = append(es, entry{group: mask32(p, top), prefix: p, level: c.K, size: size})
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.group, b.group) })
	var sum, covered float64 // covered: in clusters at k
	for i := 0; i < len(es); {
		g := group{k: k, top: top}
		j := i
		for ; j < len(es) && es[j].group == es[i].group; j++ {
			g.add(es[j])
		}
		c, s := g.best(0, 0)
		covered, sum = covered+c, sum+s
		i = j
	}
	if covered == 0 {
		return Estimate{}, false
	}
	clusters := math.Ldexp(1, k)
	if covered >= clusters {
		return Estimate{N: int(math.Round(sum)), Source: SourceBackbone}, true
	}
	n := sum
	if missing := clusters - covered; !strict || missing > emptyBound(expectedEmpty(clusters, sum)) {
		n = extrapolate(sum, covered, clusters)
	}
	if strict && sum < n/2 {
		return Estimate{}, false
	}
	return Estimate{N: int(math.Round(n)), Source: SourceBackbonePartial}, true
}

// usable reports whether a summary can count at all.
func usable(c ClusterSize) bool { return c.K >= 0 && c.K <= MaxK && c.Size >= 1 }

// workingK returns the k the most usable summaries give, the larger on a
// tie; false when there are none.
func workingK(cs []ClusterSize) (int, bool) {
	var count [MaxK + 1]int
	k, ok := 0, false
	for _, c := range cs {
		if !usable(c) {
			continue
		}
		count[c.K]++
		ok = true
	}
	for i, n := range count {
		if n > 0 && n >= count[k] {
			k = i
		}
	}
	return k, ok
}

// density is c's size per cluster at k: its size, over the number of
// clusters at k it covers.
func density(c ClusterSize, k int) float64 { return float64(c.Size) * math.Ldexp(1, c.K-k) }

// medianWithout returns the median of the sorted s without its r-th
// element; len(s) must be at least 2.
func medianWithout(s []float64, r int) float64 {
	at := func(j int) float64 {
		if j >= r {
			j++
		}
		return s[j]
	}
	m := len(s) - 1
	if m%2 == 1 {
		return at(m / 2)
	}
	return (at(m/2-1) + at(m/2)) / 2
}

// prefix32 returns the leading 32 bits of key masked to level bits
// (level < 32).
func prefix32(key Key, level int) uint32 {
	return mask32(binary.BigEndian.Uint32(key[:4]), level)
}

// mask32 keeps the leading level bits of p (level < 32).
func mask32(p uint32, level int) uint32 { return p &^ (math.MaxUint32 >> uint(level)) }

// entry is one capped summary: its cluster key's leading 32 bits, its
// level (k), and the key of the cluster at top it falls in.
type entry struct {
	group, prefix uint32
	level         int
	size          float64
}

// group holds the summaries within one cluster at level top: depth d
// below top, index x the d bits of the key after top's (k-1 <= top+d <=
// k+1, so d <= 2), the largest capped size of each cluster key.
type group struct {
	k, top int
	has    [3][4]bool
	size   [3][4]float64
}

func (g *group) add(e entry) {
	d := e.level - g.top
	x := (e.prefix >> uint(32-e.level)) & (1<<uint(d) - 1) // a shift by 32 gives 0
	g.has[d][x] = true
	g.size[d][x] = max(g.size[d][x], e.size)
}

// best returns the coverage, in clusters at k, and the sum of the set of
// summaries within the cluster (d, x) that covers most of it: its own
// summary, or the best sets of its halves together.
func (g *group) best(d int, x uint32) (covered, sum float64) {
	level := g.top + d
	var own, ownSum float64
	if g.has[d][x] {
		own, ownSum = math.Ldexp(1, g.k-level), g.size[d][x]
	}
	if level > g.k {
		return own, ownSum
	}
	c0, s0 := g.best(d+1, 2*x)
	c1, s1 := g.best(d+1, 2*x+1)
	// On a tie the working k wins: a cluster's own summary over its halves
	// at k+1, the halves at k over the parent at k-1.
	if own > c0+c1 || (own == c0+c1 && own > 0 && level == g.k) {
		return own, ownSum
	}
	return c0 + c1, s0 + s1
}

// expectedEmpty is the expected number of empty clusters among c when n
// peers fall uniformly among them.
func expectedEmpty(c, n float64) float64 {
	return c * math.Exp(n*math.Log1p(-1/c))
}

// emptyBound returns an m that the number of empty clusters exceeds with
// probability below emptyTail when it is Poisson of mean e (the occupancy
// count is less variable than Poisson, so the bound is safe).
func emptyBound(e float64) float64 {
	if e > 50 {
		return e + 6*math.Sqrt(e)
	}
	p := math.Exp(-e)
	cdf := p
	m := 0.0
	for 1-cdf > emptyTail {
		m++
		p *= e / m
		cdf += p
	}
	return m
}

// extrapolate returns the n (at least sum) at which c clusters leave
// non-empty as many as the covered ones, holding sum peers, stand for:
// the largest root of n = sum·(c - expectedEmpty(c, n))/covered, found by
// bisection between sum and the plain density extrapolation sum·c/covered,
// its limit.
func extrapolate(sum, covered, c float64) float64 {
	g := func(n float64) float64 { return sum*(c-expectedEmpty(c, n))/covered - n }
	lo, hi := sum, sum*c/covered
	if g(lo) <= 0 {
		return lo
	}
	for range 100 {
		mid := (lo + hi) / 2
		if g(mid) >= 0 {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 0.25 {
			break
		}
	}
	return lo
}
