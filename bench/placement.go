package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/superpeer/superpeer/stats"
)

// ErrPlacement reports an impossible placement request.
var ErrPlacement = errors.New("bench: bad placement request")

// Dist is the distance between two peers (an RTT in milliseconds, say). It
// must be symmetric, non-negative and zero from a peer to itself.
type Dist func(i, j int) float64

// KMedian places k superpeers among n peers to minimise the sum of distances
// from every peer to its nearest superpeer, with the whole distance matrix
// known: the offline baseline that the distributed algorithms are measured
// against.
//
// It is local search with single swaps (Arya et al., "Local search
// heuristics for k-median and facility location problems", STOC 2001: a
// local optimum costs at most 5 times the optimum, and on real latency data
// it is usually within a few per cent of it). It runs KMedianStarts
// searches, one from the greedy placement (add the median that lowers the
// cost most, k times) and the others from random placements, and keeps the
// best. Each search, as long as swapping one median for one non-median
// lowers the cost by more than a factor 1e-9, makes the best such swap of a
// random median. rng draws the random starts and orders the search.
func KMedian(n int, d Dist, k int, rng *rand.Rand) ([]int, error) {
	if n < 1 || k < 1 || k > n {
		return nil, fmt.Errorf("%w: k-median with k = %d among n = %d peers", ErrPlacement, k, n)
	}
	best := localSearch(n, d, greedyMedians(n, d, k), rng)
	for range KMedianStarts - 1 {
		start, _ := RandomPlacement(n, k, rng)
		if m := localSearch(n, d, start, rng); Cost(n, d, m) < Cost(n, d, best) {
			best = m
		}
	}
	return best, nil
}

// KMedianStarts is the number of local searches KMedian runs.
const KMedianStarts = 8

// greedyMedians adds, k times, the median that lowers the cost most.
func greedyMedians(n int, d Dist, k int) []int {
	var medians []int
	near := make([]float64, n) // distance to the nearest median so far
	for i := range near {
		near[i] = math.Inf(1)
	}
	for range k { // greedy start
		best, _ := bestAddition(n, d, near, medians, math.Inf(1))
		medians = append(medians, best)
		for i := range n {
			near[i] = min(near[i], d(i, best))
		}
	}
	return medians
}

// bestAddition returns the non-median c that minimises Σ_i min(base[i],
// d(i, c)), the cost once c is added to medians whose nearest distances are
// base, and that cost, if it is below limit; otherwise -1.
func bestAddition(n int, d Dist, base []float64, medians []int, limit float64) (int, float64) {
	best, bestCost := -1, limit
	for c := range n {
		if slices.Contains(medians, c) {
			continue
		}
		cost := 0.0
		for i := range n {
			cost += min(base[i], d(i, c))
		}
		if cost < bestCost {
			best, bestCost = c, cost
		}
	}
	return best, bestCost
}

// localSearch improves medians by single swaps until none helps.
func localSearch(n int, d Dist, medians []int, rng *rand.Rand) []int {
	k := len(medians)
	cost := Cost(n, d, medians)
	base := make([]float64, n) // distance to the nearest median once one is removed
	for improved := true; improved; {
		improved = false
		for _, slot := range rng.Perm(k) {
			// Without medians[slot], peer i is base[i] from its nearest
			// median; a swap-in c then costs Σ min(base[i], d(i, c)).
			for i := range n {
				base[i] = math.Inf(1)
				for s, m := range medians {
					if s != slot {
						base[i] = min(base[i], d(i, m))
					}
				}
			}
			bestC, bestCost := bestAddition(n, d, base, medians, cost*(1-1e-9))
			if bestC >= 0 {
				medians[slot], cost, improved = bestC, bestCost, true
			}
		}
	}
	slices.Sort(medians)
	return medians
}

// Cost is the sum over all peers of the distance to the nearest of medians.
func Cost(n int, d Dist, medians []int) float64 {
	sum := 0.0
	for i := range n {
		best := math.Inf(1)
		for _, m := range medians {
			best = min(best, d(i, m))
		}
		sum += best
	}
	return sum
}

// RandomPlacement draws k distinct superpeers uniformly at random.
func RandomPlacement(n, k int, rng *rand.Rand) ([]int, error) {
	if n < 1 || k < 1 || k > n {
		return nil, fmt.Errorf("%w: %d random superpeers among %d peers", ErrPlacement, k, n)
	}
	sp := rng.Perm(n)[:k]
	slices.Sort(sp)
	return sp, nil
}

// Quality describes an attachment: the distances from the ordinary peers
// (those that are not superpeers) to their superpeers, and the cluster sizes
// (superpeer included).
type Quality struct {
	Mean, P95, Max  float64
	Clusters        int
	MaxCluster      int
	ClusterCV       float64 // coefficient of variation of the cluster sizes
	OrdinaryCounted int
	// Unattached counts the peers without a superpeer (attach[i] < 0, as
	// geometric.AttachAllBy leaves them when there is no room); they are
	// in no other figure.
	Unattached int
}

// Measure computes the quality of attach (attach[i] is peer i's superpeer;
// a superpeer names itself; a negative entry is a peer left unattached).
func Measure(d Dist, attach []int) Quality {
	var q Quality
	var v []float64
	size := map[int]int{}
	for i, s := range attach {
		if s < 0 {
			q.Unattached++
			continue
		}
		size[s]++
		if s != i {
			v = append(v, d(i, s))
		}
	}
	q.OrdinaryCounted, q.Clusters = len(v), len(size)
	sorted := stats.Sort(v)
	q.Mean, q.P95, q.Max = stats.Mean(v), sorted.Percentile(95), sorted.Max()
	mean := float64(len(attach)-q.Unattached) / float64(len(size))
	varsum := 0.0
	for _, c := range size {
		q.MaxCluster = max(q.MaxCluster, c)
		varsum += (float64(c) - mean) * (float64(c) - mean)
	}
	if len(size) > 0 {
		q.ClusterCV = math.Sqrt(varsum/float64(len(size))) / mean
	}
	return q
}
