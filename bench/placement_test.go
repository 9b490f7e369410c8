package bench

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/superpeer/superpeer/geometric"
)

// points returns n random points in the unit square and their Euclidean
// distance.
func points(n int, seed uint64) Dist {
	rng := rand.New(rand.NewPCG(seed, 1))
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range n {
		xs[i], ys[i] = rng.Float64(), rng.Float64()
	}
	return func(i, j int) float64 { return math.Hypot(xs[i]-xs[j], ys[i]-ys[j]) }
}

// bruteKMedian tries every set of k medians.
func bruteKMedian(n, k int, d Dist) float64 {
	best := math.Inf(1)
	set := make([]int, k)
	var rec func(pos, from int)
	rec = func(pos, from int) {
		if pos == k {
			best = min(best, Cost(n, d, set))
			return
		}
		for c := from; c < n; c++ {
			set[pos] = c
			rec(pos+1, c+1)
		}
	}
	rec(0, 0)
	return best
}

// On 20 seeded instances of 14 points and k = 3, checked by brute force, the
// restarted local search finds the optimum (one start alone, from the greedy
// placement, stopped at 1.08× on one of them); it must stay within 1 %.
func TestKMedianAgainstBruteForce(t *testing.T) {
	worst := 1.0
	for seed := range uint64(20) {
		n, k := 14, 3
		d := points(n, seed)
		got, err := KMedian(n, d, k, rand.New(rand.NewPCG(seed, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != k {
			t.Fatalf("seed %d: %d medians, want %d", seed, len(got), k)
		}
		ratio := Cost(n, d, got) / bruteKMedian(n, k, d)
		worst = max(worst, ratio)
		if ratio > 1.01 {
			t.Errorf("seed %d: local search costs %.3f× the optimum", seed, ratio)
		}
	}
	t.Logf("worst ratio to the optimum over 20 instances: %.4f", worst)
}

// On clustered points the k-median beats random placement by far.
func TestKMedianBeatsRandom(t *testing.T) {
	n, k := 300, 10
	d := points(n, 7)
	rng := rand.New(rand.NewPCG(7, 7))
	km, err := KMedian(n, d, k, rng)
	if err != nil {
		t.Fatal(err)
	}
	best := Cost(n, d, km)
	var rnd float64
	for range 50 {
		sp, _ := RandomPlacement(n, k, rng)
		rnd += Cost(n, d, sp) / 50
	}
	t.Logf("k-median %.2f, random placement %.2f (mean of 50)", best, rnd)
	if best >= rnd {
		t.Errorf("k-median %.2f not below random %.2f", best, rnd)
	}
}

func TestPlacementErrors(t *testing.T) {
	d := points(5, 1)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, k := range []int{0, 6, -1} {
		if _, err := KMedian(5, d, k, rng); err == nil {
			t.Errorf("KMedian k=%d: no error", k)
		}
		if _, err := RandomPlacement(5, k, rng); err == nil {
			t.Errorf("RandomPlacement k=%d: no error", k)
		}
	}
}

func TestMeasure(t *testing.T) {
	// Peers 0..4 on a line at 0, 1, 2, 10, 11; superpeers 1 and 10.
	pos := []float64{0, 1, 2, 10, 11}
	d := func(i, j int) float64 { return math.Abs(pos[i] - pos[j]) }
	attach, err := geometric.AttachAllBy(5, d, []int{1, 3}, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 1, 1, 3, 3}
	for i := range want {
		if attach[i] != want[i] {
			t.Fatalf("AttachAllBy = %v, want %v", attach, want)
		}
	}
	q := Measure(d, attach)
	if q.Mean != 1 || q.Max != 1 || q.Clusters != 2 || q.MaxCluster != 3 || q.OrdinaryCounted != 3 {
		t.Fatalf("Measure = %+v", q)
	}
	if math.Abs(q.ClusterCV-0.2) > 1e-9 { // sizes 3 and 2: mean 2.5, sd 0.5
		t.Fatalf("ClusterCV = %v, want 0.2", q.ClusterCV)
	}
}

// Peers left without a superpeer (-1) are counted apart, not measured.
func TestMeasureUnattached(t *testing.T) {
	pos := []float64{0, 1, 5}
	d := func(i, j int) float64 { return math.Abs(pos[i] - pos[j]) }
	q := Measure(d, []int{0, 0, -1})
	if q.Unattached != 1 || q.Clusters != 1 || q.MaxCluster != 2 || q.Mean != 1 {
		t.Fatalf("Measure = %+v, want one unattached peer and one cluster of 2 at mean 1", q)
	}
}
