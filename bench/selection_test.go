package bench

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/testnet/latency"
)

const planetLab = "../testdata/planetlab490/planetlab490_median18_ms.txt"

// The placement table of issue 4 on all 490 PlanetLab hosts: the geometric
// placement against random placement (100 draws) and the offline k-median,
// all attached by true RTT with capacity C = 64 (SelectionCase, as the
// selection suite runs it). Measured (seed 1) with the coordinates and
// tokens alone, before the search on measured RTTs:
//
//	S   geometric  random  k-median  random/geometric  geometric/k-median
//	10  40.9 ms    52.3    36.6      1.28              1.12
//	25  16.5       27.2    12.8      1.65              1.29
//	50  10.8       18.1     6.6      1.68              1.65
//
// and with it (Simulate's default; TestPlacementWithinOffline checks
// issue 21's tighter bounds over several seeds):
//
//	10  28.1 ms    52.3    36.6      1.86              0.77
//	25  13.0       27.2    12.8      2.09              1.02
//	50   6.9       18.1     6.6      2.62              1.05
//
// The goals are random/geometric >= 1.5 and geometric/k-median <=
// 1.15. At S = 10 even the k-median is only 1.43 times better than random on
// this matrix; at S = 50 the gap to the k-median of the coordinates alone
// is their error: a k-median computed on the coordinates themselves does
// no better. The bounds below are the first measured figures with a
// little room. (Seed 1 is one draw: over seeds 1 to 10 the geometric
// means of the coordinates alone vary by 7 to 32 %.)
func TestPlacementPlanetLab(t *testing.T) {
	m, err := latency.Load(planetLab)
	if err != nil {
		t.Fatal(err)
	}
	if m, err = m.FillMissing(); err != nil {
		t.Fatal(err)
	}
	nw, err := FromMatrix("planetlab", m)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{10, 25, 50}
	if testing.Short() {
		sizes = []int{10}
	}
	for _, s := range sizes {
		rows, err := SelectionCase{Network: nw, S: s, Seed: 1, Strategies: []Strategy{GeometricStrategy(geometric.SimConfig{})}}.Run()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := WriteSelectionTable(&b, rows); err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", b.String())
		g, random, kmedian := rows[0].Placement, rows[1].Placement, rows[2].Placement
		if rows[2].Method != OfflineKMedian || g.Superpeers != s || g.Clusters != s {
			t.Errorf("S = %d: offline %q, %d superpeers, %d clusters", s, rows[2].Method, g.Superpeers, g.Clusters)
		}
		if g.ClusterMax > 64+1 {
			t.Errorf("S = %d: a cluster of %d exceeds C = 64 plus its superpeer", s, g.ClusterMax)
		}
		if kmedian.MeanMs > random.MeanMs {
			t.Errorf("S = %d: k-median %.1f ms worse than random %.1f ms", s, kmedian.MeanMs, random.MeanMs)
		}
		bound := map[int]struct{ vsRandom, vsKMedian float64 }{10: {1.2, 1.2}, 25: {1.6, 1.3}, 50: {1.6, 1.7}}[s]
		if got := random.MeanMs / g.MeanMs; got < bound.vsRandom {
			t.Errorf("S = %d: random/geometric = %.2f, want at least %.2f", s, got, bound.vsRandom)
		}
		if got := g.MeanMs / kmedian.MeanMs; got > bound.vsKMedian {
			t.Errorf("S = %d: geometric/k-median = %.2f, want at most %.2f", s, got, bound.vsKMedian)
		}
	}
}

// Issue 21: the geometric placement within 1.10 times the offline k-median
// at every S of the selection suite, on PlanetLab and on the synthetic
// 10,000 hosts, as the suite runs it (GeometricStrategy with Simulate's
// defaults). One seed is one draw of the coordinates and the tokens, so
// PlanetLab is checked over seeds 1 to 5 (S = 10, 25) and 1 to 10
// (S = 49, where the gap was largest). Measured (placement ÷ offline):
//
//	              S = 10             25              49
//	before, 1-5   0.78 to 1.11 (4)   1.02 to 1.06    1.09 to 1.12 (3, 4)
//	after, 1-10   0.77 to 0.81       1.00 to 1.03    1.04 to 1.07
//
// and on the 10,000 hosts (seed 1, S = 100) 1.06 before, 1.01 after. The
// changes: Swap counts a member's loss only up to its next superpeer
// (SwapReport.Second) and counts the gain of the members of neighbouring
// clusters whose next superpeer it is (SwapReport.Outside), and the
// simulator's margin is 0.05 ms plus 0.1 % (SimSwapConfig). At S = 10
// the placement is also within 0.67 times random (0.52 to 0.56; before,
// 0.54 to 0.76): the offline k-median ignores capacity (C = 64 for 49
// peers a cluster) and the search does not, so it beats the baseline
// there. -short runs S = 49 with seed 6, the worst before the outsiders
// (1.12).
var placementSweep = flag.Bool("placement.sweep", false, "TestPlacementWithinOffline: every seed of the issue's table (52 s), not only the worst draws")

// scaledPlanetLab is PlanetLab with every RTT times f.
func scaledPlanetLab(t *testing.T, f float64) *Network {
	t.Helper()
	nw, err := FromMatrix(fmt.Sprintf("planetlab490x%g", f), planetLabMatrix(t).Scale(f))
	if err != nil {
		t.Fatal(err)
	}
	return nw
}

func TestPlacementWithinOffline(t *testing.T) {
	nw, err := PlanetLab()
	if err != nil {
		t.Fatal(err)
	}
	type c struct {
		nw    *Network
		s     int
		seed  uint64
		bound float64
	}
	// make test runs the draws that were worst before (S = 10 seed 4,
	// S = 49 seeds 3, 4 and 6) and one of each other kind; the whole set
	// (52 s) with -placement.sweep.
	// PlanetLab's RTTs divided by 100, a data centre's scale: the force
	// law's lengths, stated for PlanetLab's, are scaled (geometric.ScaleFor);
	// as they were, 1.16 x offline at S = 25.
	dc := scaledPlanetLab(t, 0.01)
	cases := []c{{nw, 10, 4, 1.10}, {nw, 25, 1, 1.10}, {nw, 49, 3, 1.10}, {nw, 49, 4, 1.10}, {nw, 49, 6, 1.10}, {Synthetic(10000, 1), 100, 1, 1.03}, {dc, 25, 1, 1.10}}
	if *placementSweep {
		cases = nil
		for seed := uint64(1); seed <= 10; seed++ {
			for _, s := range []int{10, 25, 49} {
				if s == 49 || seed <= 5 {
					cases = append(cases, c{nw, s, seed, 1.10})
				}
			}
		}
		cases = append(cases, c{Synthetic(10000, 1), 100, 1, 1.03}, c{dc, 25, 1, 1.10}, c{dc, 49, 3, 1.10})
	}
	if testing.Short() {
		cases = []c{{nw, 49, 6, 1.10}}
	}
	for _, k := range cases {
		rows, err := SelectionCase{Network: k.nw, S: k.s, Seed: k.seed, Strategies: []Strategy{GeometricStrategy(geometric.SimConfig{})}}.Run()
		if err != nil {
			t.Fatal(err)
		}
		g, random, offline := rows[0].Placement, rows[1].Placement, rows[2].Placement
		t.Logf("%s S = %d seed %d: placement %.2f ms, ÷ offline %.3f, ÷ random %.3f, %.0f messages per peer",
			k.nw.Name, k.s, k.seed, g.MeanMs, g.MeanMs/offline.MeanMs, g.MeanMs/random.MeanMs, rows[0].MessagesPerPeer)
		if got := g.MeanMs / offline.MeanMs; got > k.bound {
			t.Errorf("%s S = %d seed %d: placement ÷ offline = %.3f, want at most %.2f", k.nw.Name, k.s, k.seed, got, k.bound)
		}
		if got := g.MeanMs / random.MeanMs; k.s == 10 && got > 0.67 {
			t.Errorf("%s S = 10 seed %d: placement ÷ random = %.3f, want at most 0.67", k.nw.Name, k.seed, got)
		}
	}
}
