package bench

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/testnet/latency"
)

// geoSettle tells the last change of the placement from the last change
// of its superpeers: a node that moves to another superpeer changes the
// first only; and a run is settled only with a minute of quiet, every
// node named a superpeer and S of them.
func TestGeoSettle(t *testing.T) {
	var s geoSettle
	s.see(time.Second, []int{0, 0, 0, 3})   // superpeers 0 and 3
	s.see(2*time.Second, []int{0, 0, 3, 3}) // node 2 moves to 3
	s.see(3*time.Second, []int{0, 0, 3, 3}) // nothing changes
	if s.changed != 2*time.Second || s.roles != time.Second {
		t.Fatalf("placement last changed at %v, superpeers at %v; want 2s and 1s", s.changed, s.roles)
	}
	s.see(4*time.Second, []int{1, 1, 3, 3}) // 1 takes over from 0
	if s.changed != 4*time.Second || s.roles != 4*time.Second {
		t.Fatalf("placement last changed at %v, superpeers at %v; want 4s and 4s", s.changed, s.roles)
	}
	s.early = GeoLiveSide{MeanMs: 7, CoordError: 0.5}
	for _, c := range []struct {
		d          time.Duration
		side       GeoLiveSide
		wantSettle bool
	}{
		{4*time.Second + time.Minute, GeoLiveSide{Superpeers: 2}, true},
		{4*time.Second + time.Minute - time.Second, GeoLiveSide{Superpeers: 2}, false},
		{4*time.Second + time.Minute, GeoLiveSide{Superpeers: 2, Unattached: 1}, false},
		{4*time.Second + time.Minute, GeoLiveSide{Superpeers: 1}, false},
	} {
		side := c.side
		s.finish(&side, c.d, 2)
		if side.Settled != c.wantSettle || side.SettleS != 4 || side.RolesS != 4 || side.EarlyMs != 7 || side.EarlyCoordError != 0.5 {
			t.Errorf("run of %v, %+v: got %+v, want settled %v at 4 s with the early figures", c.d, c.side, side, c.wantSettle)
		}
	}
}

// The table has the simulator's spread over its seeds, least to most.
func TestGeoLiveTableSpread(t *testing.T) {
	row := GeoLiveRow{N: 4, S: 2, RandomMs: 40, OfflineMs: 20,
		Sim:      GeoLiveSide{MeanMs: 30, SettleS: 100, Settled: true},
		Live:     GeoLiveSide{MeanMs: 33, SettleS: 120, Settled: true},
		SimSeeds: []GeoLiveSide{{MeanMs: 26, SettleS: 300}, {MeanMs: 34, SettleS: 90, Settled: true}}}
	var b strings.Builder
	if err := WriteGeoLiveTable(&b, []GeoLiveRow{row}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"simulator, 3 seeds (least–most) | 26.0–34.0 |", "| 0.65–0.85 |", "90–300 (2 of 3 settled)", "| 1.10 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	// A data centre's tenths of a millisecond keep three digits.
	row = GeoLiveRow{N: 4, S: 2, RandomMs: 0.4567, OfflineMs: 0.2, Sim: GeoLiveSide{MeanMs: 0.281}, Live: GeoLiveSide{MeanMs: 0.315}}
	b.Reset()
	if err := WriteGeoLiveTable(&b, []GeoLiveRow{row}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| simulator | 0.281 |", "| live (virtual time) | 0.315 |", "| random (mean of 100) | 0.457 |", "| offline k-median | 0.2 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

var (
	geoSweep       = flag.String("geosweep.seeds", "", "TestGeoSimSweep: run the simulator's side of GeoLive alone at these seeds (from-to, e.g. 1-8)")
	geoSweepTrace  = flag.Bool("geosweep.trace", false, "TestGeoSimSweep: also print each run's placement every 5 s up to 150 s")
	geoSweepDwell  = flag.Duration("geosweep.dwell", 0, "TestGeoSimSweep: the tokens' Dwell (0: nodesim's, five token intervals)")
	geoSweepPM     = flag.Duration("geosweep.promotedmargin", 0, "TestGeoSimSweep: the tokens' PromotedMargin (0: the default, 3 × node.LiveMargin = 15 ms)")
	geoSweepCool   = flag.Int("geosweep.cooling", 0, "TestGeoSimSweep: the tokens' Cooling (0: the overlay's, 4)")
	geoSweepMargin = flag.Duration("geosweep.margin", 0, "TestGeoSimSweep: the tokens' Margin (0: node.LiveMargin, 5 ms)")
	geoSweepHold   = flag.Duration("geosweep.minhold", 0, "TestGeoSimSweep: the tokens' MinHold (0: nodesim's, a snapshot period)")
	geoSweepN      = flag.Int("geosweep.n", 100, "TestGeoSimSweep: nodes, on the first N PlanetLab hosts")
	geoSweepS      = flag.Int("geosweep.s", 10, "TestGeoSimSweep: superpeers (tokens)")
	geoSweepFirst  = flag.Int("geosweep.first", 0, "TestGeoSimSweep: the first of the N PlanetLab hosts (they are consecutive)")
	geoSweepScale  = flag.Float64("geosweep.scale", 1, "TestGeoSimSweep: multiply every RTT of the hosts by this (latency.Matrix.Scale): the same network at another scale")
	geoSweepReloc  = flag.Bool("geosweep.relocate", false, "TestGeoSimSweep: turn on the relocation between clusters (node.GeoConfig.Relocate)")
)

// firstHosts returns 0, 1, ..., n-1.
func firstHosts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestGeoSimSweep is issue 21's cheap measure: the simulator's side of
// GeoLive alone (100 PlanetLab hosts, S = 10, or -geosweep.n and -s; 300 s, the node machines in
// nodesim), over a range of seeds, two at a time, printing each seed's
// settle time and its quality (÷ random, ÷ offline) at 60 s and at the
// end. About 50 s of wall time for seeds 1-8 on 2 shared cores. The
// figures are printed, not asserted: it runs only with -geosweep.seeds.
// -geosweep.dwell, -geosweep.minhold, -geosweep.margin,
// -geosweep.promotedmargin and -geosweep.cooling override the token
// dynamics' settings of the run. The last line gives the means over the
// seeds, the least and the most of each, and how many seeds ended above
// 0.75 × random (issue 21's live bound) or settled after 60 s.
func TestGeoSimSweep(t *testing.T) {
	if *geoSweep == "" {
		t.Skip("run with -geosweep.seeds 1-8")
	}
	lo, hi, _ := strings.Cut(*geoSweep, "-")
	a, errA := strconv.Atoi(lo)
	b, errB := strconv.Atoi(hi)
	if errA != nil || errB != nil || a < 1 || b < a {
		t.Fatalf("-geosweep.seeds %q: want from-to, 1 <= from <= to", *geoSweep)
	}
	m := planetLabMatrix(t)
	cfg := GeoLiveConfig{N: *geoSweepN, S: *geoSweepS, Duration: 5 * time.Minute, Relocate: *geoSweepReloc}
	hosts := make([]int, cfg.N)
	if *geoSweepFirst < 0 || *geoSweepFirst+cfg.N > m.N() {
		t.Fatalf("-geosweep.first %d: want 0 to %d for %d nodes", *geoSweepFirst, m.N()-cfg.N, cfg.N)
	}
	for i := range hosts {
		hosts[i] = *geoSweepFirst + i
	}
	sub := m.Sub(hosts)
	if *geoSweepScale != 1 {
		if !(*geoSweepScale > 0) {
			t.Fatalf("-geosweep.scale %v: want a positive factor", *geoSweepScale)
		}
		sub = sub.Scale(*geoSweepScale)
	}
	_, random, offline, err := Baseline(sub, cfg.N, firstHosts(cfg.S), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if *geoSweepTrace {
		var mu sync.Mutex
		cfg.SimTrace = func(seed uint64, at time.Duration, m *latency.Matrix, sp []int) {
			if at%(5*time.Second) != 0 || at > 150*time.Second {
				return
			}
			f := geoLiveFigures(m, sp, nil)
			mu.Lock()
			fmt.Fprintf(os.Stderr, "trace seed %d at %3.0f s: sp %d unatt %d mean %.1f ms (%.2f random)\n", seed, at.Seconds(), f.Superpeers, f.Unattached, f.MeanMs, f.MeanMs/random.Mean)
			mu.Unlock()
		}
	}
	if *geoSweepDwell != 0 || *geoSweepPM != 0 || *geoSweepCool != 0 || *geoSweepMargin != 0 || *geoSweepHold != 0 {
		cfg.SimTokens = &geometric.Config{Dwell: *geoSweepDwell, MinHold: *geoSweepHold, PromotedMargin: *geoSweepPM, Cooling: *geoSweepCool, Margin: *geoSweepMargin}
	}
	out := make([]GeoLiveSide, b-a+1)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for s := a; s <= b; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c := cfg
			c.Seed = uint64(s)
			out[s-a] = geoLiveSim(c, sub)
		}()
	}
	wg.Wait()
	var sumR, sumS float64
	loR, hiR, loS, hiS := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	above, late := 0, 0
	for i, s := range out {
		fmt.Fprintf(os.Stderr, "seed %d: settled %v at %.0f s (roles %.0f), %.1f ms = %.3f random %.3f offline, at 60 s %.1f ms (%.2f random) err %.3f, final err %.3f, swaps %d, sp %d (%d empty) unatt %d\n",
			a+i, s.Settled, s.SettleS, s.RolesS, s.MeanMs, s.MeanMs/random.Mean, s.MeanMs/offline.Mean, s.EarlyMs, s.EarlyMs/random.Mean, s.EarlyCoordError, s.CoordError, s.Swaps, s.Superpeers, s.Empty, s.Unattached)
		r := s.MeanMs / random.Mean
		sumR += r
		sumS += s.SettleS
		loR, hiR, loS, hiS = min(loR, r), max(hiR, r), min(loS, s.SettleS), max(hiS, s.SettleS)
		if r > 0.75 {
			above++
		}
		if !s.Settled || s.SettleS >= 60 {
			late++
		}
	}
	fmt.Fprintf(os.Stderr, "mean: %.3f random, settle %.1f s (seeds: %.3f–%.3f random, settled at %.0f–%.0f s; %d above 0.75 random, %d of %d not settled within 60 s)\n",
		sumR/float64(len(out)), sumS/float64(len(out)), loR, hiR, loS, hiS, above, late, len(out))
}

// TestGeoNodeScaleFree: the node machines in the node simulator on the
// first 100 PlanetLab hosts with every RTT divided by 100, a data
// centre's scale (S = 10, seed 1). The node takes its margins at the
// scale of the RTTs it keeps (geometric.ScaleFor); with PlanetLab's
// lengths as they were, a pass had to gain more than a cluster's whole
// cost and the repulsion outweighed the pull: 2.16 times random
// placement's mean RTT over seeds 1-16 (TestGeoSimSweep with
// -geosweep.scale 0.01), where scaled it is 0.66.
func TestGeoNodeScaleFree(t *testing.T) {
	if testing.Short() {
		t.Skip("a 100-node simulation of 3 minutes")
	}
	hosts := firstHosts(100)
	sub := planetLabMatrix(t).Sub(hosts).Scale(0.01)
	_, random, _, err := Baseline(sub, len(hosts), firstHosts(10), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := geoLiveSim(GeoLiveConfig{N: len(hosts), S: 10, Seed: 1, Duration: 3 * time.Minute}, sub)
	t.Logf("mean RTT to the superpeer %.3f ms, %.2f x random placement's %.3f ms; settled at %.0f s", s.MeanMs, s.MeanMs/random.Mean, random.Mean, s.SettleS)
	if s.Error != "" || s.Superpeers != 10 || s.Unattached > 0 {
		t.Fatalf("%+v: want 10 superpeers and every node attached", s)
	}
	if r := s.MeanMs / random.Mean; r > 0.85 {
		t.Errorf("placement %.2f x random, want at most 0.85", r)
	}
}

// TestGeoSurveySettles: the node machines in the node simulator on the
// first 100 PlanetLab hosts, S = 10, seeds 1 and 2: a new network's
// survey (overlay/node's geosurvey.go) places the tokens from measured
// RTTs and pins them, and the network settles within issue 21's minute
// of virtual time, at most 0.75 × random placement's mean RTT. Before
// the survey these seeds settled at 81 and 86 s (TestGeoSimSweep).
func TestGeoSurveySettles(t *testing.T) {
	if testing.Short() {
		t.Skip("two 100-node simulations of 2 minutes")
	}
	hosts := firstHosts(100)
	sub := planetLabMatrix(t).Sub(hosts)
	_, random, _, err := Baseline(sub, len(hosts), firstHosts(10), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{1, 2} {
		s := geoLiveSim(GeoLiveConfig{N: len(hosts), S: 10, Seed: seed, Duration: 2 * time.Minute}, sub)
		r := s.MeanMs / random.Mean
		t.Logf("seed %d: settled %v at %.0f s, %.1f ms, %.2f x random placement's %.1f ms", seed, s.Settled, s.SettleS, s.MeanMs, r, random.Mean)
		if s.Error != "" || !s.Settled || s.SettleS >= 60 || r > 0.75 {
			t.Errorf("seed %d: error %q, settled %v at %.0f s, %.2f x random; want settled within 60 s at 0.75 x random or less", seed, s.Error, s.Settled, s.SettleS, r)
		}
	}
}
