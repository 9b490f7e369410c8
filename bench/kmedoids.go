package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// KMedoids places k superpeers among n peers to make the sum of distances
// from every peer to its nearest superpeer small, like KMedian, but in time
// that scales to 10,000 hosts: R·I·(n·k + Σ|cluster|²) distance evaluations
// for R = KMedoidsRestarts restarts of I Voronoi iterations (I is typically
// 5 to 30), then a few rounds of n² for the swaps, against KMedian's
// O(k·n²) per pass of every local search. Measured on 10,000 synthetic
// hosts with k = 100: 7 to 11 s on a shared 2-core machine.
//
// It is a heuristic, a proxy for the offline optimum and not the optimum
// itself: the figure it gives is an upper bound on the best placement's
// cost, within 1.5 % of KMedian's local search (and often equal) on the
// instances where both were run (PlanetLab with k = 5 to 49, synthetic
// networks of 200 to 490 hosts), and it carries no worst-case guarantee.
//
// Two stages. First Voronoi iteration (the "alternate" k-medoids of Park
// and Jun, "A simple and fast algorithm for K-medoids clustering", Expert
// Systems with Applications 36, 2009; also Hastie et al.'s k-medoids):
// assign every peer to its nearest medoid, then move every medoid to the
// member of its cluster that minimises the sum of distances to the other
// members, and repeat until no medoid moves (at most kMedoidsMaxIter
// times); the cost never increases. Each of the restarts is seeded by D¹
// sampling, k-means++ with distances rather than squared distances (Arthur
// and Vassilvitskii, SODA 2007): the first medoid uniformly at random, each
// next one with probability proportional to its distance to the nearest
// medoid chosen so far. Voronoi iteration alone stops up to 33 % above
// KMedian (PlanetLab, k = 49), so, second, the restart of least Cost is
// improved by eager single swaps (eagerSwaps, FasterPAM). rng draws the
// seeds; the result is sorted.
func KMedoids(n int, d Dist, k int, rng *rand.Rand) ([]int, error) {
	if n < 1 || k < 1 || k > n {
		return nil, fmt.Errorf("%w: k-medoids with k = %d among n = %d peers", ErrPlacement, k, n)
	}
	var best []int
	bestCost := math.Inf(1)
	for range KMedoidsRestarts {
		m, cost := voronoiIteration(n, d, seedD1(n, d, k, rng))
		if cost < bestCost {
			best, bestCost = m, cost
		}
	}
	best, _ = eagerSwaps(n, d, best)
	slices.Sort(best)
	return best, nil
}

// eagerSwaps improves medoids (modified in place and returned) by single
// swaps, taken eagerly, as FasterPAM does (Schubert and Rousseeuw, "Fast and
// eager k-medoids clustering", Information Systems 101, 2021): for each
// non-medoid c in turn, it finds in O(n) the medoid whose replacement by c
// lowers the cost most, using every peer's nearest and second-nearest
// medoid, and makes that swap at once if it lowers the cost by more than a
// factor 1e-9. It stops after a round over all candidates that lowered the
// cost by less than a factor kMedoidsRoundGain (on 10,000 synthetic hosts
// and k = 100 the first round gains 2 %, the second 0.1 %, later ones
// less, and each costs n² distances), or after kMedoidsMaxSwapRounds
// rounds. It returns the medoids and their Cost.
func eagerSwaps(n int, d Dist, medoids []int) ([]int, float64) {
	k := len(medoids)
	if k == 1 || k == n { // Voronoi iteration already found the 1-median
		return medoids, Cost(n, d, medoids)
	}
	near, second := make([]int, n), make([]int, n) // slots
	dNear, dSecond := make([]float64, n), make([]float64, n)
	isMedoid := make([]bool, n)
	for _, m := range medoids {
		isMedoid[m] = true
	}
	// nearest2 sets near, second and their distances for peer o from scratch.
	nearest2 := func(o int) {
		near[o], second[o], dNear[o], dSecond[o] = -1, -1, math.Inf(1), math.Inf(1)
		for s, m := range medoids {
			x := d(o, m)
			if m == o {
				x = -1 // a medoid is its own nearest, whatever the distances
			}
			switch {
			case x < dNear[o]:
				second[o], dSecond[o] = near[o], dNear[o]
				near[o], dNear[o] = s, x
			case x < dSecond[o]:
				second[o], dSecond[o] = s, x
			}
		}
		if dNear[o] < 0 {
			dNear[o] = 0
		}
	}
	// secondOnly recomputes the second-nearest of o, its nearest unchanged.
	secondOnly := func(o int) {
		second[o], dSecond[o] = -1, math.Inf(1)
		for s, m := range medoids {
			if s == near[o] {
				continue
			}
			if x := d(o, m); x < dSecond[o] {
				second[o], dSecond[o] = s, x
			}
		}
	}
	cost := 0.0
	for o := range n {
		nearest2(o)
		cost += dNear[o]
	}
	removal := make([]float64, k) // the cost of removing each medoid
	computeRemoval := func() {
		clear(removal)
		for o := range n {
			removal[near[o]] += dSecond[o] - dNear[o]
		}
	}
	computeRemoval()
	delta := make([]float64, k)
	for range kMedoidsMaxSwapRounds {
		start, swapped := cost, false
		for c := range n {
			if isMedoid[c] {
				continue
			}
			copy(delta, removal)
			add := 0.0 // the change common to every choice of medoid to remove
			for o := range n {
				x := d(o, c)
				if o == c {
					x = 0
				}
				switch {
				case x < dNear[o]:
					add += x - dNear[o]
					delta[near[o]] += dNear[o] - dSecond[o]
				case x < dSecond[o]:
					delta[near[o]] += x - dSecond[o]
				}
			}
			slot := 0
			for s := range delta {
				if delta[s] < delta[slot] {
					slot = s
				}
			}
			if delta[slot]+add >= -1e-9*cost {
				continue
			}
			// Swap medoids[slot] for c and update the caches: O(1) for a
			// peer that keeps its nearest and second-nearest medoids, O(k)
			// for one that lost either.
			isMedoid[medoids[slot]], isMedoid[c] = false, true
			medoids[slot] = c
			swapped = true
			cost = 0
			for o := range n {
				x := d(o, c)
				switch {
				case o == c:
					nearest2(o)
				case near[o] == slot:
					if x <= dSecond[o] {
						dNear[o] = x
					} else {
						nearest2(o)
					}
				case x < dNear[o]:
					second[o], dSecond[o] = near[o], dNear[o]
					near[o], dNear[o] = slot, x
				case second[o] == slot:
					if x <= dSecond[o] {
						dSecond[o] = x
					} else {
						secondOnly(o)
					}
				case x < dSecond[o]:
					second[o], dSecond[o] = slot, x
				}
				cost += dNear[o]
			}
			computeRemoval()
		}
		if !swapped || start-cost < kMedoidsRoundGain*start {
			break
		}
	}
	return medoids, Cost(n, d, medoids)
}

// kMedoidsMaxSwapRounds bounds the rounds over all candidates eagerSwaps
// makes.
const kMedoidsMaxSwapRounds = 50

// kMedoidsRoundGain is the least relative gain of a round of eagerSwaps
// for another round to follow.
const kMedoidsRoundGain = 1e-3

// KMedoidsRestarts is the number of seeded restarts KMedoids runs.
const KMedoidsRestarts = 10

// kMedoidsMaxIter bounds the iterations of one Voronoi iteration run.
const kMedoidsMaxIter = 100

// seedD1 draws k distinct medoids: the first uniformly, each next one with
// probability proportional to its distance from the nearest medoid so far
// (uniformly among the non-medoids when every peer is at distance 0).
func seedD1(n int, d Dist, k int, rng *rand.Rand) []int {
	medoids := make([]int, 0, k)
	isMedoid := make([]bool, n)
	near := make([]float64, n)
	add := func(c int) {
		medoids = append(medoids, c)
		isMedoid[c] = true
		for i := range n {
			if len(medoids) == 1 {
				near[i] = d(i, c)
			} else {
				near[i] = min(near[i], d(i, c))
			}
		}
	}
	add(rng.IntN(n))
	for len(medoids) < k {
		total := 0.0
		for i, x := range near {
			if !isMedoid[i] {
				total += x
			}
		}
		next := -1
		if total > 0 {
			r := rng.Float64() * total
			for i, x := range near {
				if isMedoid[i] || x <= 0 {
					continue
				}
				next = i // the last candidate, should rounding leave r > 0
				if r -= x; r < 0 {
					break
				}
			}
		}
		if next < 0 { // every non-medoid is at distance 0: any will do
			r := rng.IntN(n - len(medoids))
			for i := range n {
				if isMedoid[i] {
					continue
				}
				if r == 0 {
					next = i
					break
				}
				r--
			}
		}
		add(next)
	}
	return medoids
}

// voronoiIteration improves medoids (modified in place and returned) by
// alternating assignment and medoid update until no medoid moves, and
// returns them with their Cost.
func voronoiIteration(n int, d Dist, medoids []int) ([]int, float64) {
	k := len(medoids)
	owner := make([]int, n) // slot of the nearest medoid
	members := make([][]int, k)
	sums := []float64{}
	for range kMedoidsMaxIter {
		// Assignment: nearest medoid, ties to the lower slot; a medoid
		// always owns itself (it may be 0 from another host).
		for s := range members {
			members[s] = members[s][:0]
		}
		slotOf := make(map[int]int, k)
		for s, m := range medoids {
			slotOf[m] = s
		}
		for i := range n {
			best, bestD := 0, math.Inf(1)
			if s, ok := slotOf[i]; ok {
				best, bestD = s, 0
			} else {
				for s, m := range medoids {
					if x := d(i, m); x < bestD {
						best, bestD = s, x
					}
				}
			}
			owner[i] = best
			members[best] = append(members[best], i)
		}
		// Update: each medoid moves to the member of least total distance
		// to its cluster, staying put on a tie (so the run cannot cycle).
		moved := false
		for s, ms := range members {
			sums = slices.Grow(sums[:0], len(ms))[:len(ms)]
			clear(sums)
			for a := range ms {
				for b := a + 1; b < len(ms); b++ {
					x := d(ms[a], ms[b])
					sums[a] += x
					sums[b] += x
				}
			}
			cur := slices.Index(ms, medoids[s])
			best := cur
			for a := range ms {
				if sums[a] < sums[best]*(1-1e-12) {
					best = a
				}
			}
			if best != cur {
				medoids[s] = ms[best]
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	return medoids, Cost(n, d, medoids)
}

// OfflineKMedianMaxHosts is the largest n for which OfflinePlacement runs
// KMedian's local search; above it, KMedoids.
const OfflineKMedianMaxHosts = 1000

// Names of the methods OfflinePlacement reports.
const (
	OfflineKMedian  = "k-median local search"
	OfflineKMedoids = "k-medoids (Voronoi iteration)"
)

// OfflinePlacement is the offline baseline: a placement of k superpeers
// among n peers, computed knowing every distance, that makes the sum of
// distances to the nearest superpeer small. For n <= OfflineKMedianMaxHosts
// it is KMedian (local search with single swaps, several starts); above
// that, KMedoids (Voronoi iteration, several seeded restarts), which is
// faster but usually a little worse. Neither is the true optimum; both are
// proxies for it. method names the one used (OfflineKMedian or
// OfflineKMedoids).
func OfflinePlacement(n int, d Dist, k int, rng *rand.Rand) (superpeers []int, method string, err error) {
	if n <= OfflineKMedianMaxHosts {
		sp, err := KMedian(n, d, k, rng)
		return sp, OfflineKMedian, err
	}
	sp, err := KMedoids(n, d, k, rng)
	return sp, OfflineKMedoids, err
}
