package bench

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// KMedoids against KMedian's local search on instances small enough for
// both: within 3 % of its cost (measured, seed 1: at most 1.4 % worse, on
// PlanetLab at S = 49; often equal), and far below random placement.
func TestKMedoidsAgainstKMedian(t *testing.T) {
	type inst struct {
		nw *Network
		k  int
	}
	cases := []inst{{Synthetic(200, 2), 5}, {Synthetic(200, 2), 20}, {Synthetic(300, 3), 10}}
	if !testing.Short() {
		pl, err := PlanetLab()
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, inst{pl, 10})
	}
	for _, c := range cases {
		n, d := c.nw.N(), c.nw.Dist()
		km, err := KMedian(n, d, c.k, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		kd, err := KMedoids(n, d, c.k, rand.New(rand.NewPCG(1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if len(kd) != c.k || !slices.IsSorted(kd) || len(slices.Compact(slices.Clone(kd))) != c.k {
			t.Errorf("%s, k = %d: medoids %v are not %d distinct sorted hosts", c.nw.Name, c.k, kd, c.k)
		}
		random := 0.0
		rng := rand.New(rand.NewPCG(1, 2))
		for range 20 {
			sp, _ := RandomPlacement(n, c.k, rng)
			random += Cost(n, d, sp) / 20
		}
		med, loc := Cost(n, d, kd), Cost(n, d, km)
		t.Logf("%s, k = %d: k-medoids %.0f, k-median %.0f (ratio %.3f), random %.0f", c.nw.Name, c.k, med, loc, med/loc, random)
		if med > 1.03*loc {
			t.Errorf("%s, k = %d: k-medoids cost %.0f is more than 3 %% above k-median's %.0f", c.nw.Name, c.k, med, loc)
		}
		if med > 0.8*random {
			t.Errorf("%s, k = %d: k-medoids cost %.0f is not well below random's %.0f", c.nw.Name, c.k, med, random)
		}
	}
}

// For k = 1 the answer is the exact 1-median; for k = n every host.
func TestKMedoidsEdges(t *testing.T) {
	nw := Synthetic(60, 4)
	n, d := nw.N(), nw.Dist()
	best, bestCost := -1, math.Inf(1)
	for c := range n {
		if cost := Cost(n, d, []int{c}); cost < bestCost {
			best, bestCost = c, cost
		}
	}
	if got, err := KMedoids(n, d, 1, rand.New(rand.NewPCG(1, 1))); err != nil || !slices.Equal(got, []int{best}) {
		t.Errorf("k = 1: %v, %v; want [%d]", got, err, best)
	}
	got, err := KMedoids(n, d, n, rand.New(rand.NewPCG(1, 1)))
	if err != nil || len(got) != n || Cost(n, d, got) != 0 {
		t.Errorf("k = n: %d medoids, cost %v, %v", len(got), Cost(n, d, got), err)
	}
	for _, k := range []int{0, -1, n + 1} {
		if _, err := KMedoids(n, d, k, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrPlacement) {
			t.Errorf("k = %d: error %v, want ErrPlacement", k, err)
		}
	}
}

// Hosts at distance 0 from each other (duplicates) still give k distinct
// medoids.
func TestKMedoidsDuplicates(t *testing.T) {
	// 30 hosts in 3 groups of 10 identical hosts each.
	d := func(i, j int) float64 {
		if i/10 == j/10 {
			return 0
		}
		return 50
	}
	for _, k := range []int{2, 3, 5, 30} {
		got, err := KMedoids(30, d, k, rand.New(rand.NewPCG(1, uint64(k))))
		if err != nil || len(got) != k || len(slices.Compact(slices.Clone(got))) != k {
			t.Errorf("k = %d: medoids %v, %v; want %d distinct", k, got, err, k)
		}
		if want := float64(max(0, 3-k) * 10 * 50); k <= 3 && Cost(30, d, got) != want {
			t.Errorf("k = %d: cost %v, want %v", k, Cost(30, d, got), want)
		}
	}
}

// Deterministic from the rng; eager swaps never make a placement worse.
func TestKMedoidsDeterministic(t *testing.T) {
	nw := Synthetic(300, 5)
	n, d := nw.N(), nw.Dist()
	a, _ := KMedoids(n, d, 12, rand.New(rand.NewPCG(7, 7)))
	b, _ := KMedoids(n, d, 12, rand.New(rand.NewPCG(7, 7)))
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different medoids: %v and %v", a, b)
	}
	start, cost := voronoiIteration(n, d, seedD1(n, d, 12, rand.New(rand.NewPCG(1, 1))))
	if _, after := eagerSwaps(n, d, slices.Clone(start)); after > cost {
		t.Errorf("eager swaps raised the cost from %v to %v", cost, after)
	}
}

func TestOfflinePlacementMethod(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{OfflineKMedianMaxHosts, OfflineKMedian}, {OfflineKMedianMaxHosts + 1, OfflineKMedoids}} {
		// A cheap distance: hosts on a line.
		d := func(i, j int) float64 { return math.Abs(float64(i - j)) }
		k := 2
		if tc.want == OfflineKMedian {
			k = 1 // KMedian's local search is O(k·n²) per pass
		}
		sp, method, err := OfflinePlacement(tc.n, d, k, rand.New(rand.NewPCG(1, 1)))
		if err != nil || method != tc.want || len(sp) != k {
			t.Errorf("n = %d: %v, %q, %v; want %d superpeers by %q", tc.n, sp, method, err, k, tc.want)
		}
	}
	if _, _, err := OfflinePlacement(10, func(i, j int) float64 { return 1 }, 11, rand.New(rand.NewPCG(1, 1))); !errors.Is(err, ErrPlacement) {
		t.Errorf("k > n: error %v", err)
	}
}
