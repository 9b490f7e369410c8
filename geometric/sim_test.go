package geometric

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/superpeer/superpeer/testnet/latency"
)

// planetLabCoords fits the PlanetLab coordinates once for the accuracy and
// placement tests: seed 1, 200 rounds of one sample per host.
var planetLabCoords = sync.OnceValues(func() ([]*coordinate.Coordinate, error) {
	m, err := latency.Load(planetlab)
	if err != nil {
		return nil, err
	}
	return simCoords(m.N(), measured(m), SimConfig{Seed: 1, CoordRounds: 200})
})

// randomPlacement returns the mean RTT from ordinary peers to their
// superpeer, averaged over draws placements of s uniformly random
// superpeers, attached with the same capacity rule as the algorithm.
func randomPlacement(t *testing.T, coords []*coordinate.Coordinate, rtt func(i, j int) time.Duration, s, capacity, draws int, seed uint64) time.Duration {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0xdead))
	var sum time.Duration
	for k := 0; k < draws; k++ {
		a, err := AttachAll(coords, r.Perm(len(coords))[:s], capacity)
		if err != nil {
			t.Fatal(err)
		}
		mean, _ := AttachmentRTT(a, rtt)
		sum += mean
	}
	return sum / time.Duration(draws)
}

// clusterSizes returns the number of ordinary peers attached to each
// superpeer.
func clusterSizes(attach []int) map[int]int {
	sizes := map[int]int{}
	for i, s := range attach {
		if s != i {
			sizes[s]++
		}
	}
	return sizes
}

// TestPlacementPlanetLab runs the token dynamics on the 490 PlanetLab hosts
// with the defaults and compares the mean RTT from ordinary peers to their
// superpeer with random placement (20 draws of S random superpeers, same
// coordinates, same capacity rule). It checks that there are exactly S
// distinct superpeers, all promoted, and that no cluster exceeds C = 64.
//
// Measured (seed 1; "last pass" is the last round in which a token moved;
// every holder is promoted Dwell = 30 rounds later):
//
//	S    geometric mean / p95   random mean   random / geometric   last pass   passes
//	10   41.0 ms / 156 ms       64.5 ms       1.57                 2           20
//	22   28.1 ms /  77 ms       38.8 ms       1.38                 3           42
//
// Over seeds 1..5 (each with its own coordinate fit) the ratio averages 1.60
// for S = 10, 1.52 for S = 22 and 1.42 for S = 50, with means of 38.6, 26.0
// and 22.8 ms. (With the repulsion summed over the tokens and measured with
// the heights, see the package documentation: 42.8 and 29.6 ms for seed 1;
// 1.45, 1.50 and 1.43, 44.4, 26.4 and 22.7 ms over seeds 1..5.) For comparison, one single-swap k-median local search from a
// random start, with full knowledge of the true matrix, reaches about 45 ms
// (S = 10) and 27 ms (S = 22): on this data the dynamics is about as good as
// an offline k-median, and even that is only 1.3-1.45 times better than
// random. The bound asserted below (1.2) leaves room for the seed.
func TestPlacementPlanetLab(t *testing.T) {
	coords, err := planetLabCoords()
	if err != nil {
		t.Fatalf("PlanetLab matrix (the repository copy in testdata/): %v", err)
	}
	m := loadPlanetLab(t)
	rtt := measured(m)
	n := m.N()
	for _, tc := range []struct {
		s        int
		minRatio float64
	}{{10, 1.2}, {22, 1.2}} {
		cfg := SimConfig{Seed: 1, Coords: coords}
		cfg.Tokens = tc.s
		res, err := Simulate(n, rtt, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Settled {
			t.Fatalf("S=%d: not settled after %d rounds", tc.s, res.Rounds)
		}
		if len(res.Superpeers) != tc.s || !slices.IsSorted(res.Superpeers) || len(slices.Compact(slices.Clone(res.Superpeers))) != tc.s {
			t.Fatalf("S=%d: superpeers %v, want %d distinct", tc.s, res.Superpeers, tc.s)
		}
		for s, size := range clusterSizes(res.Attach) {
			if size > DefaultConfig().Capacity {
				t.Errorf("S=%d: superpeer %d serves %d > C = %d", tc.s, s, size, DefaultConfig().Capacity)
			}
		}
		mean, p95 := AttachmentRTT(res.Attach, rtt)
		random := randomPlacement(t, coords, rtt, tc.s, DefaultConfig().Capacity, 20, 1)
		ratio := float64(random) / float64(mean)
		t.Logf("S=%d: geometric mean %v p95 %v; random mean %v; ratio %.2f; last pass in round %d, settled in %d, %d passes",
			tc.s, mean.Round(100*time.Microsecond), p95.Round(time.Millisecond), random.Round(100*time.Microsecond), ratio, res.LastPass, res.Rounds, res.Passes)
		if ratio < tc.minRatio {
			t.Errorf("S=%d: random/geometric = %.2f, want >= %.2f", tc.s, ratio, tc.minRatio)
		}
	}
}

// TestPureRepulsionIsWorse records why the force law has an attractive
// term: with repulsion alone (Attraction < 0) the tokens leave the peers for
// the rim of the point cloud and the mean RTT to the superpeer is worse than
// random placement.
func TestPureRepulsionIsWorse(t *testing.T) {
	coords, err := planetLabCoords()
	if err != nil {
		t.Fatalf("PlanetLab matrix (the repository copy in testdata/): %v", err)
	}
	m := loadPlanetLab(t)
	rtt := measured(m)
	// The force law alone: the search on measured RTTs (SwapRounds)
	// repairs even this placement.
	cfg := SimConfig{Seed: 1, Coords: coords, SwapRounds: -1}
	cfg.Tokens = 10
	cfg.Attraction = -1
	cfg.Range = 20 * time.Millisecond
	res, err := Simulate(m.N(), rtt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mean, _ := AttachmentRTT(res.Attach, rtt)
	random := randomPlacement(t, coords, rtt, 10, DefaultConfig().Capacity, 20, 1)
	t.Logf("pure repulsion (ρ = 20 ms), S=10: mean %v, random %v, ratio %.2f", mean.Round(100*time.Microsecond), random.Round(100*time.Microsecond), float64(mean)/float64(random))
	if mean <= random {
		t.Errorf("pure repulsion mean %v is not worse than random %v; revisit the package documentation", mean, random)
	}
}

// TestSimulateClusters is the walkthrough: three groups of 30 peers, 100 ms
// apart, and S = 3. Wherever the hash puts the tokens, they end one per
// group, and every peer attaches inside its group.
func TestSimulateClusters(t *testing.T) {
	const per = 30
	centre := [][2]float64{{0, 0}, {100, 0}, {50, 87}}
	r := rand.New(rand.NewPCG(5, 5))
	var pts [][2]float64
	for _, c := range centre {
		for k := 0; k < per; k++ {
			pts = append(pts, [2]float64{c[0] + r.NormFloat64()*3, c[1] + r.NormFloat64()*3})
		}
	}
	rtt := func(i, j int) time.Duration {
		dx, dy := pts[i][0]-pts[j][0], pts[i][1]-pts[j][1]
		return time.Duration((1 + math.Hypot(dx, dy)) * float64(time.Millisecond))
	}
	seeds := uint64(5)
	if testing.Short() {
		seeds = 2
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		cfg := SimConfig{Seed: seed}
		cfg.Tokens = 3
		cfg.Capacity = per
		res, err := Simulate(len(pts), rtt, cfg)
		if err != nil {
			t.Fatal(err)
		}
		groups := map[int]bool{}
		for _, s := range res.Superpeers {
			groups[s/per] = true
		}
		if !res.Settled || len(groups) != 3 {
			t.Errorf("seed %d: superpeers %v (settled %v), want one in each group", seed, res.Superpeers, res.Settled)
		}
		for i, s := range res.Attach {
			if s/per != i/per {
				t.Errorf("seed %d: peer %d of group %d attached to %d of group %d", seed, i, i/per, s, s/per)
			}
		}
	}
}

// tallHosts is a dense network with exact coordinates: n hosts in 5
// regions (σ 3 ms, centres within 60 ms × 60 ms) of a plane, every host
// behind an access link of 0.5 ms but every tenth one behind 2.5 ms (its
// height). The RTT is the distance in the plane plus both heights, and the
// coordinates say exactly that.
func tallHosts(n int, seed uint64) ([]*coordinate.Coordinate, func(i, j int) time.Duration) {
	r := rand.New(rand.NewPCG(seed, 0x7a11))
	var centres [5][2]float64
	for k := range centres {
		centres[k] = [2]float64{r.Float64() * 60, r.Float64() * 60}
	}
	coords := make([]*coordinate.Coordinate, n)
	for i := range coords {
		c := centres[r.IntN(len(centres))]
		coords[i] = at(c[0]+r.NormFloat64()*3, c[1]+r.NormFloat64()*3)
		coords[i].Height = 0.0005
		if i%10 == 0 {
			coords[i].Height = 0.0025
		}
	}
	return coords, func(i, j int) time.Duration {
		if i == j {
			return 0
		}
		return time.Duration(Distance(coords[i], coords[j]) * float64(time.Second))
	}
}

// TestSimulateDenseTokens is the regression test for a force law whose
// repulsion outgrew the attraction as S grew (the sum, not the mean, over
// the other tokens) and was lowered by a host's height. On the network of
// tallHosts with n = 2000 and S = 40 (tokens a few ms apart, as on the
// synthetic 100,000-host network of sim_scale_test.go) it spread the tokens
// evenly rather than with the peers, overloading the superpeers of the
// dense regions, and put them on the tall hosts. The run must beat random
// placement (20 draws, same attachment) by a clear margin, and hold no more
// of its superpeers on tall hosts than their share of the hosts.
//
// Measured (seeds 1, 2, 3): random/geometric 1.17, 1.20 and 1.26, with 2, 1
// and 0 of the 40 superpeers on tall hosts. With the repulsion summed and
// measured with the heights: 1.05, 1.02 and 1.01, with 8, 11 and 9 on tall
// hosts; with it summed but without heights: 1.08 to 1.10, at the bound,
// none on tall hosts (TestRepulsionIgnoresHeight checks the heights alone).
func TestSimulateDenseTokens(t *testing.T) {
	const n, s, capacity = 2000, 40, 100
	for seed := uint64(1); seed <= 3; seed++ {
		coords, rtt := tallHosts(n, seed)
		cfg := SimConfig{Seed: seed, Coords: coords}
		cfg.Tokens, cfg.Capacity = s, capacity
		res, err := Simulate(n, rtt, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkSettled(t, res, n, s, capacity)
		tall := 0
		for _, sp := range res.Superpeers {
			if sp%10 == 0 {
				tall++
			}
		}
		mean, _ := AttachmentRTT(res.Attach, rtt)
		random := randomPlacement(t, coords, rtt, s, capacity, 20, seed)
		ratio := float64(random) / float64(mean)
		t.Logf("seed %d: mean RTT to superpeer %v, random %v, ratio %.2f; %d of %d superpeers on tall hosts; %d passes",
			seed, mean.Round(10*time.Microsecond), random.Round(10*time.Microsecond), ratio, tall, s, res.Passes)
		if ratio < 1.1 {
			t.Errorf("seed %d: random/geometric = %.2f, want >= 1.1", seed, ratio)
		}
		if tall > s/10 {
			t.Errorf("seed %d: %d of %d superpeers on tall hosts, want at most %d (their share of the hosts)", seed, tall, s, s/10)
		}
	}
}

// line returns an RTT function for n peers on a line, 1 ms apart.
func line(n int) func(i, j int) time.Duration {
	return func(i, j int) time.Duration {
		d := i - j
		if d < 0 {
			d = -d
		}
		return time.Duration(d) * time.Millisecond
	}
}

func TestSimulateDeterministic(t *testing.T) {
	cfg := SimConfig{Seed: 9, CoordRounds: 50}
	cfg.Tokens = 4
	a, err := Simulate(40, line(40), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Simulate(40, line(40), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs with one seed differ:\n%+v\n%+v", a, b)
	}
}

func TestSimulateEdgeCases(t *testing.T) {
	t.Run("one peer", func(t *testing.T) {
		cfg := SimConfig{}
		cfg.Tokens = 1
		res, err := Simulate(1, line(1), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Settled || !slices.Equal(res.Superpeers, []int{0}) || !slices.Equal(res.Attach, []int{0}) || res.Passes != 0 {
			t.Fatalf("n=1: %+v", res)
		}
	})
	t.Run("S equals n", func(t *testing.T) {
		cfg := SimConfig{CoordRounds: 20}
		cfg.Tokens = 5
		res, err := Simulate(5, line(5), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Settled || !slices.Equal(res.Superpeers, []int{0, 1, 2, 3, 4}) || res.Passes != 0 {
			t.Fatalf("S=n: %+v", res)
		}
	})
	bad := func(mod func(*SimConfig), n int) error {
		cfg := SimConfig{CoordRounds: 10}
		mod(&cfg)
		_, err := Simulate(n, line(max(n, 1)), cfg)
		return err
	}
	for _, tc := range []struct {
		name string
		n    int
		mod  func(*SimConfig)
	}{
		{"no peers", 0, func(c *SimConfig) {}},
		{"S above n", 3, func(c *SimConfig) { c.Tokens = 4 }},
		{"negative S", 3, func(c *SimConfig) { c.Tokens = -1 }},
		{"capacity too small", 100, func(c *SimConfig) { c.Tokens = 2; c.Capacity = 10 }},
		{"negative capacity", 10, func(c *SimConfig) { c.Capacity = -1 }},
		{"negative dwell", 10, func(c *SimConfig) { c.Dwell = -time.Second }},
		{"negative threshold", 10, func(c *SimConfig) { c.Threshold = -1 }},
		{"NaN attraction", 10, func(c *SimConfig) { c.Attraction = math.NaN() }},
		{"negative rounds", 10, func(c *SimConfig) { c.MaxRounds = -1 }},
		{"coords of wrong length", 10, func(c *SimConfig) { c.Coords = make([]*coordinate.Coordinate, 3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := bad(tc.mod, tc.n)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
			t.Log(err)
		})
	}
}

func TestNearest(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	var peers []Peer
	for i := 0; i < 50; i++ {
		peers = append(peers, Peer{ID(fmt.Sprint(i)), at(float64(r.IntN(20)), float64(r.IntN(20)))}) // with ties
	}
	for _, k := range []int{0, 1, 8, 49, 60} {
		got := nearest(7, peers, k)
		want := slices.Clone(peers)
		want = slices.Delete(want, 7, 8)
		slices.SortStableFunc(want, func(a, b Peer) int {
			return cmp.Compare(Distance(peers[7].Coord, a.Coord), Distance(peers[7].Coord, b.Coord))
		})
		want = want[:min(k, len(want))]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("nearest(k=%d) = %v, want %v", k, got, want)
		}
	}
}
