package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/serf/coordinate"

	"github.com/superpeer/superpeer/geometric"
)

// line is a network of six hosts on a line at 0, 1, 3, 10, 12 and 20 ms;
// the RTT is the distance.
func line(t *testing.T) *Network {
	t.Helper()
	x := []float64{0, 1, 3, 10, 12, 20}
	nw, err := NewNetwork("line6", len(x), func(i, j int) float64 { return math.Abs(x[i] - x[j]) })
	if err != nil {
		t.Fatal(err)
	}
	return nw
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

// On the line with superpeers at hosts 0, 3 and 5 (0, 10 and 20 ms) and
// hosts 1 and 2 attached to 0, host 4 to 5:
//
//	own RTTs 1, 3, 8: mean 4, p95 8, max 8
//	clusters 3, 1, 2: mean 2, CV sqrt(2/3)/2, max 3
//	nearest superpeer: 1, 3, 2: mean 2
//	pairwise superpeer RTTs 10, 20, 10: min 10, p5 10, median 10, p95 20, max 20, mean 40/3
func TestSelectionFiguresLine(t *testing.T) {
	nw := line(t)
	f, err := SelectionFigures(nw, 4, []int{0, 3, 5}, []int{0, 0, 0, 3, 5, 5})
	if err != nil {
		t.Fatal(err)
	}
	want := Figures{
		Hosts: 6, Superpeers: 3, TargetS: 4, Clusters: 3, ClusterMean: 2, ClusterMax: 3, ClusterCV: math.Sqrt(2.0/3) / 2,
		MeanMs: 4, P95Ms: 8, MaxMs: 8, NearestMeanMs: 2,
		Pairwise: Distribution{Count: 3, MinMs: 10, P5Ms: 10, MedianMs: 10, P95Ms: 20, MaxMs: 20, MeanMs: 40.0 / 3},
		CDFMs:    []float64{1, 3, 8},
	}
	if !near(f.ClusterCV, want.ClusterCV) || !near(f.Pairwise.MeanMs, want.Pairwise.MeanMs) {
		t.Errorf("CV %v, pairwise mean %v; want %v, %v", f.ClusterCV, f.Pairwise.MeanMs, want.ClusterCV, want.Pairwise.MeanMs)
	}
	f.ClusterCV, f.Pairwise.MeanMs = want.ClusterCV, want.Pairwise.MeanMs
	if !reflect.DeepEqual(f, want) {
		t.Errorf("figures\n got %+v\nwant %+v", f, want)
	}

	// Host 4 left unattached: it is in the spread, not in the RTTs.
	f, err = SelectionFigures(nw, 3, []int{0, 3, 5}, []int{0, 0, 0, 3, -1, 5})
	if err != nil {
		t.Fatal(err)
	}
	if f.Unattached != 1 || f.MeanMs != 2 || f.NearestMeanMs != 2 || f.ClusterMean != 5.0/3 || !slices.Equal(f.CDFMs, []float64{1, 3}) {
		t.Errorf("with host 4 unattached: %+v", f)
	}
}

func TestSummariseAndCDF(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	d := Summarise(v)
	// The median of an even count is the mean of the two middle samples.
	want := Distribution{Count: 10, MinMs: 1, P5Ms: 1, MedianMs: 5.5, P95Ms: 10, MaxMs: 10, MeanMs: 5.5}
	if d != want {
		t.Errorf("Summarise = %+v, want %+v", d, want)
	}
	if v[0] != 5 {
		t.Error("Summarise sorted its argument")
	}
	if (Summarise(nil) != Distribution{}) {
		t.Error("Summarise(nil) is not zero")
	}
	if got := CDF(v, 4); !slices.Equal(got, []float64{1, 4, 7, 10}) {
		t.Errorf("CDF(v, 4) = %v, want ranks 0, 3, 6, 9", got)
	}
	if got := CDF(v, 0); len(got) != 10 || !slices.IsSorted(got) {
		t.Errorf("CDF(v, 0) = %v, want all ten sorted", got)
	}
	big := make([]float64, 10001)
	for i := range big {
		big[i] = float64(len(big) - i)
	}
	got := CDF(big, 0)
	if len(got) != MaxCDFPoints || got[0] != 1 || got[len(got)-1] != 10001 || !slices.IsSorted(got) {
		t.Errorf("CDF of 10001 samples: %d points from %v to %v", len(got), got[0], got[len(got)-1])
	}
}

func TestSelectionFiguresBadInput(t *testing.T) {
	nw := line(t)
	for _, tc := range []struct {
		name       string
		sp, attach []int
		msg        string
	}{
		{"short attach", []int{0}, []int{0, 0, 0}, "3 entries for the 6 hosts"},
		{"no superpeer", nil, []int{0, 0, 0, 0, 0, 0}, "no superpeer"},
		{"out of range", []int{6}, []int{0, 0, 0, 0, 0, 0}, "out of range"},
		{"twice", []int{0, 0}, []int{0, 0, 0, 0, 0, 0}, "listed twice"},
		{"superpeer elsewhere", []int{0, 3}, []int{3, 0, 0, 3, 3, 3}, "superpeer 0 is attached to 3"},
		{"to an ordinary peer", []int{0}, []int{0, 0, 1, 0, 0, 0}, "peer 2 is attached to 1, which is not a superpeer"},
		{"attach out of range", []int{0}, []int{0, 0, 9, 0, 0, 0}, "peer 2 is attached to 9, out of range"},
	} {
		_, err := SelectionFigures(nw, 1, tc.sp, tc.attach)
		if !errors.Is(err, ErrPlacement) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want ErrPlacement saying %q", tc.name, err, tc.msg)
		}
	}
	if _, err := SelectionFigures(nil, 1, []int{0}, []int{0}); !errors.Is(err, ErrPlacement) {
		t.Errorf("nil network: error %v", err)
	}
}

// fixed is a strategy that returns the line's superpeers 0, 3, 5 with a
// poor attachment of its own.
func fixed(nw *Network, s, capacity int, seed uint64) (StrategyResult, error) {
	return StrategyResult{Superpeers: []int{0, 3, 5}, Attach: []int{0, 0, 0, 3, 5, 5}, Rounds: 7, MessagesPerPeer: 1.5}, nil
}

// The runner on the line, S = 3, C = 2. The strategy's own attachment has
// mean 4 ms (above). With the ideal attachment its superpeers 0, 3, 5 serve
// host 1 (1 ms) and 2 (3 ms) from 0 and host 4 from 3 (2 ms): mean 2 ms. The
// offline optimum is 1, 3 or 4, 5 (cost 5): hosts 0 and 2 from 1 (1 and 2 ms),
// the third from its neighbour (2 ms): mean 5/3 ms.
func TestSelectionCaseLine(t *testing.T) {
	nw := line(t)
	c := SelectionCase{Network: nw, S: 3, Capacity: 2, Seed: 1, Strategies: []Strategy{{"fixed", fixed}}}
	rows, err := c.Run()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	s, r, o := rows[0], rows[1], rows[2]
	if s.Strategy != "fixed" || s.Kind != KindStrategy || r.Strategy != RandomName || r.Kind != KindRandom ||
		o.Strategy != OfflineName || o.Kind != KindOffline || o.Method != OfflineKMedian || r.Method != "mean of 100 draws" {
		t.Errorf("rows %q/%q, %q/%q (%q), %q/%q (%q)", s.Strategy, s.Kind, r.Strategy, r.Kind, r.Method, o.Strategy, o.Kind, o.Method)
	}
	if s.Own.MeanMs != 4 || s.Placement.MeanMs != 2 || s.Placement.ClusterMax != 3 || !near(s.Placement.ClusterCV, math.Sqrt(2.0/3)/2) {
		t.Errorf("strategy: own mean %v, placement mean %v, max cluster %d, CV %v; want 4, 2, 3, 0.41",
			s.Own.MeanMs, s.Placement.MeanMs, s.Placement.ClusterMax, s.Placement.ClusterCV)
	}
	if s.Rounds != 7 || s.MessagesPerPeer != 1.5 || s.Network != "line6" || s.Hosts != 6 || s.TargetS != 3 || s.Capacity != 2 || s.Seed != 1 || s.BaselineSuperpeers != 3 {
		t.Errorf("strategy row header: %+v", s)
	}
	if !near(o.Placement.MeanMs, 5.0/3) || !reflect.DeepEqual(o.Own, o.Placement) || len(o.Superpeers) != 3 {
		t.Errorf("offline: mean %v (want 5/3), superpeers %v", o.Placement.MeanMs, o.Superpeers)
	}
	if !near(s.PlacementMeanOverOffline, 1.2) || !near(s.OwnMeanOverOffline, 2.4) || !near(o.PlacementMeanOverOffline, 1) {
		t.Errorf("ratios to offline: placement %v (want 1.2), own %v (want 2.4), offline's own %v",
			s.PlacementMeanOverOffline, s.OwnMeanOverOffline, o.PlacementMeanOverOffline)
	}
	rm := r.Placement.MeanMs
	if rm < 5.0/3 || !near(s.PlacementMeanOverRandom, 2/rm) || !near(s.OwnMeanOverRandom, 4/rm) ||
		!near(r.PlacementMeanOverRandom, 1) || !near(o.PlacementMeanOverRandom, 5.0/3/rm) {
		t.Errorf("random mean %v; ratios to random: %v, %v, %v, %v", rm,
			s.PlacementMeanOverRandom, s.OwnMeanOverRandom, r.PlacementMeanOverRandom, o.PlacementMeanOverRandom)
	}
	if r.Superpeers != nil || r.Placement.Superpeers != 3 || r.Placement.Pairwise.Count != 3 || len(r.Placement.CDFMs) != 300 {
		t.Errorf("random row: superpeers %v, %d, %d pairs, %d CDF points (want 100 draws × 3 pooled)",
			r.Superpeers, r.Placement.Superpeers, r.Placement.Pairwise.Count, len(r.Placement.CDFMs))
	}
	if _, err := json.Marshal(rows); err != nil {
		t.Errorf("rows do not marshal: %v", err)
	}

	checkRepeatable(t, c, rows)
}

// placing returns a strategy that ignores S and places superpeers on the
// line with the attachment attach.
func placing(superpeers, attach []int) StrategyFunc {
	return func(*Network, int, int, uint64) (StrategyResult, error) {
		return StrategyResult{Superpeers: superpeers, Attach: attach}, nil
	}
}

// baselineRow returns the one row of kind with count superpeers.
func baselineRow(t *testing.T, rows []SelectionRow, kind string, count int) SelectionRow {
	t.Helper()
	var found []SelectionRow
	for _, r := range rows {
		if r.Kind == kind && r.Placement.Superpeers == count {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s rows with %d superpeers, want 1", len(found), kind, count)
	}
	return found[0]
}

// A strategy that places m ≠ S superpeers is judged against baselines with
// m superpeers, measured in the same run, once per count however many
// strategies placed it; a strategy that places S is judged against the S
// baselines. On the line, S = 2, C = 2: the 2-median is 1 and 12 ms (cost
// 1 + 2 + 2 + 8: mean 13/4 ms), the 4-median leaves out 0 or 1 ms and 10
// or 12 ms (cost 1 + 2: mean 3/2 ms).
func TestSelectionCaseOtherCount(t *testing.T) {
	nw := line(t)
	c := SelectionCase{Network: nw, S: 2, Capacity: 2, Seed: 3, Strategies: []Strategy{
		{"four", placing([]int{0, 2, 3, 5}, []int{0, 0, 2, 3, 3, 5})},
		{"four-again", placing([]int{1, 2, 4, 5}, []int{1, 1, 2, 4, 4, 5})},
		{"two", placing([]int{1, 4}, []int{1, 1, 1, 4, 4, 4})},
	}}
	rows, err := c.Run()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Label())
	}
	want := []string{"four", "four-again", "two", "random", "offline", "random (4 superpeers)", "offline (4 superpeers)"}
	if !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	r2, o2 := baselineRow(t, rows, KindRandom, 2), baselineRow(t, rows, KindOffline, 2)
	r4, o4 := baselineRow(t, rows, KindRandom, 4), baselineRow(t, rows, KindOffline, 4)
	if !near(o2.Placement.MeanMs, 13.0/4) || !near(o4.Placement.MeanMs, 1.5) || len(o4.Superpeers) != 4 {
		t.Errorf("offline means %v with 2 superpeers (want 13/4), %v with %v (want 3/2)", o2.Placement.MeanMs, o4.Placement.MeanMs, o4.Superpeers)
	}
	if r4.Placement.MeanMs >= r2.Placement.MeanMs {
		t.Errorf("random mean with 4 superpeers %v not below that with 2, %v: the test cannot tell them apart", r4.Placement.MeanMs, r2.Placement.MeanMs)
	}
	for _, r := range []SelectionRow{r2, o2, r4, o4} {
		if r.TargetS != 2 || r.Placement.TargetS != r.Placement.Superpeers || !reflect.DeepEqual(r.Own, r.Placement) {
			t.Errorf("%s: target %d, figures' target %d", r.Label(), r.TargetS, r.Placement.TargetS)
		}
	}
	// The random baselines are the draws seeded by the case's seed and
	// the count.
	for _, r := range []SelectionRow{r2, r4} {
		m := r.Placement.Superpeers
		f, err := randomFigures(nw, m, 2, 100, rand.New(rand.NewPCG(3, uint64(m))))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Placement, f) {
			t.Errorf("random baseline with %d superpeers is not the draws seeded by (3, %d)", m, m)
		}
	}
	for k, r := range rows {
		m := r.Placement.Superpeers
		rnd, off := r2, o2
		if m == 4 {
			rnd, off = r4, o4
		}
		if r.BaselineSuperpeers != m ||
			r.PlacementMeanOverRandom != r.Placement.MeanMs/rnd.Placement.MeanMs ||
			r.PlacementMeanOverOffline != r.Placement.MeanMs/off.Placement.MeanMs ||
			r.OwnMeanOverRandom != r.Own.MeanMs/rnd.Placement.MeanMs ||
			r.OwnMeanOverOffline != r.Own.MeanMs/off.Placement.MeanMs {
			t.Errorf("row %d (%s), %d superpeers: against %d; ratios placement %v, %v, own %v, %v; want against random %v ms and offline %v ms",
				k, r.Label(), m, r.BaselineSuperpeers, r.PlacementMeanOverRandom, r.PlacementMeanOverOffline,
				r.OwnMeanOverRandom, r.OwnMeanOverOffline, rnd.Placement.MeanMs, off.Placement.MeanMs)
		}
	}
	if four := rows[0]; four.PlacementMeanOverRandom == four.Placement.MeanMs/r2.Placement.MeanMs {
		t.Errorf("four's ratio to random is the one against 2 superpeers")
	}

	// The extra baselines reach the tables and the plots, labelled.
	var table, md strings.Builder
	if err := WriteSelectionTable(&table, rows); err != nil {
		t.Fatal(err)
	}
	writeSelectionMarkdown(newMDBlocks(&md), rows)
	for _, out := range []string{table.String(), md.String()} {
		if !strings.Contains(out, "random (4 superpeers)") || !strings.Contains(out, "baseline superpeers") {
			t.Errorf("table without the labelled baseline or its column:\n%s", out)
		}
	}
	figs, err := DrawPlots(&Results{Suites: []string{SuiteSelection}, Selection: rows}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 1 || figs[0].File != "selection-line6-s2-cdf.png" {
		t.Errorf("figures %v, want one CDF for the case", figs)
	}

	checkRepeatable(t, c, rows)
}

// A strategy that places fewer superpeers than S, with no room for every
// peer at capacity C, is judged against baselines with its count and the
// same C: on the line, S = 3, C = 2, one superpeer attaches two peers and
// leaves three out, in the strategy's placement and in both baselines.
func TestSelectionCaseFewerWithoutRoom(t *testing.T) {
	c := SelectionCase{Network: line(t), S: 3, Capacity: 2, Seed: 1, RandomDraws: 10,
		Strategies: []Strategy{{"one", placing([]int{2}, []int{2, 2, 2, -1, -1, -1})}}}
	rows, err := c.Run()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("%d rows, want the strategy and baselines with 3 and 1 superpeers", len(rows))
	}
	one, r1, o1 := rows[0], baselineRow(t, rows, KindRandom, 1), baselineRow(t, rows, KindOffline, 1)
	for _, r := range []SelectionRow{one, r1, o1} {
		if r.Placement.Unattached != 3 || r.BaselineSuperpeers != 1 {
			t.Errorf("%s: %d unattached, against %d superpeers; want 3 and 1", r.Label(), r.Placement.Unattached, r.BaselineSuperpeers)
		}
	}
	if one.Placement.MeanMs != 2.5 || one.PlacementMeanOverRandom != 2.5/r1.Placement.MeanMs || one.PlacementMeanOverOffline != 2.5/o1.Placement.MeanMs {
		t.Errorf("placement mean %v (want 2.5), ratios %v, %v against random %v, offline %v",
			one.Placement.MeanMs, one.PlacementMeanOverRandom, one.PlacementMeanOverOffline, r1.Placement.MeanMs, o1.Placement.MeanMs)
	}
}

func TestSelectionCaseBadInput(t *testing.T) {
	nw := line(t)
	bad := func(nw *Network, s, capacity int, seed uint64) (StrategyResult, error) {
		return StrategyResult{Superpeers: []int{0, 3, 5}, Attach: []int{0, 0, 3, 5}}, nil
	}
	badCoords := func(nw *Network, s, capacity int, seed uint64) (StrategyResult, error) {
		r, _ := fixed(nw, s, capacity, seed)
		r.Coords = make([][2]float64, 2)
		return r, nil
	}
	failing := func(nw *Network, s, capacity int, seed uint64) (StrategyResult, error) {
		return StrategyResult{}, errors.New("no luck")
	}
	for _, tc := range []struct {
		name string
		c    SelectionCase
		msg  string
	}{
		{"no network", SelectionCase{S: 1}, "without a network"},
		{"S > n", SelectionCase{Network: nw, S: 7}, "S = 7 superpeers among the 6 hosts"},
		{"S = 0", SelectionCase{Network: nw, S: 0}, "S = 0"},
		{"capacity too small", SelectionCase{Network: nw, S: 2, Capacity: 1}, "capacity C = 1 is too small: 4 ordinary peers but S × C = 2 × 1 = 2 places; want C >= 2"},
		{"negative capacity", SelectionCase{Network: nw, S: 2, Capacity: -1}, "capacity C = -1"},
		{"negative draws", SelectionCase{Network: nw, S: 2, RandomDraws: -1}, "RandomDraws = -1"},
		{"baseline name", SelectionCase{Network: nw, S: 3, Strategies: []Strategy{{"random", fixed}}}, `named "random"`},
		{"twice", SelectionCase{Network: nw, S: 3, Strategies: []Strategy{{"a", fixed}, {"a", fixed}}}, `named "a"`},
		{"no function", SelectionCase{Network: nw, S: 3, Strategies: []Strategy{{"a", nil}}}, `named "a" (with a function: false)`},
		{"short attach", SelectionCase{Network: nw, S: 3, Strategies: []Strategy{{"bad", bad}}}, `strategy "bad" on line6, S = 3: bench: bad placement request: attach has 4 entries for the 6 hosts`},
		{"coords", SelectionCase{Network: nw, S: 3, Strategies: []Strategy{{"c", badCoords}}}, "2 coordinates for 6 hosts"},
	} {
		_, err := tc.c.Run()
		if !errors.Is(err, ErrPlacement) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want ErrPlacement saying %q", tc.name, err, tc.msg)
		}
	}
	_, err := SelectionCase{Network: nw, S: 3, Strategies: []Strategy{{"f", failing}}}.Run()
	if err == nil || !strings.Contains(err.Error(), `strategy "f" on line6, S = 3: no luck`) {
		t.Errorf("failing strategy: error %v", err)
	}
}

func TestDefaultCapacity(t *testing.T) {
	for _, tc := range []struct{ n, s, want int }{{490, 10, 64}, {490, 49, 64}, {10000, 100, 200}, {1000, 10, 200}, {650, 10, 64}, {651, 10, 131}} {
		if got := DefaultCapacity(tc.n, tc.s); got != tc.want {
			t.Errorf("DefaultCapacity(%d, %d) = %d, want %d", tc.n, tc.s, got, tc.want)
		}
	}
}

// The geometric strategy on a small synthetic network, with both baselines:
// a settled run gives S superpeers, every peer attached, coordinates for a
// plot, and a placement better than random; the search on measured RTTs
// does no worse than the coordinates alone, and its probes are counted.
func TestSelectionCaseGeometric(t *testing.T) {
	nw := Synthetic(200, 1)
	coords := CoordinatesOnlyStrategy() // with 200 coordinate rounds
	coords.Run = GeometricStrategy(geometric.SimConfig{CoordRounds: 200, SwapRounds: -1}).Run
	rows, err := SelectionCase{Network: nw, S: 10, Seed: 1, RandomDraws: 20,
		Strategies: []Strategy{GeometricStrategy(geometric.SimConfig{CoordRounds: 200}), coords}}.Run()
	if err != nil {
		t.Fatal(err)
	}
	g, c, r, o := rows[0], rows[1], rows[2], rows[3]
	t.Logf("geometric %.1f ms (placement %.1f), coordinates alone %.1f (placement %.1f), random %.1f, offline %.1f; %d rounds, %.2f messages per peer (coordinates alone %.2f)",
		g.Own.MeanMs, g.Placement.MeanMs, c.Own.MeanMs, c.Placement.MeanMs, r.Placement.MeanMs, o.Placement.MeanMs, g.Rounds, g.MessagesPerPeer, c.MessagesPerPeer)
	if g.Strategy != "geometric" || g.Own.Superpeers != 10 || g.Own.Unattached != 0 || len(g.Coords) != 200 || len(g.Superpeers) != 10 {
		t.Errorf("geometric row: %q, %d superpeers, %d unattached, %d coords", g.Strategy, g.Own.Superpeers, g.Own.Unattached, len(g.Coords))
	}
	if c.Strategy != "geometric (coordinates)" || r.Strategy != RandomName || o.Strategy != OfflineName {
		t.Errorf("rows %q, %q, %q", c.Strategy, r.Strategy, o.Strategy)
	}
	if g.Capacity != 64 || o.Method != OfflineKMedian {
		t.Errorf("capacity %d, offline method %q", g.Capacity, o.Method)
	}
	for _, x := range []SelectionRow{g, c} {
		if x.PlacementMeanOverRandom >= 1 || o.PlacementMeanOverRandom >= x.PlacementMeanOverRandom {
			t.Errorf("%s: placement/random: %.2f, offline %.2f; want offline < it < 1",
				x.Strategy, x.PlacementMeanOverRandom, o.PlacementMeanOverRandom)
		}
		if x.Placement.MeanMs > x.Own.MeanMs+1e-9 {
			t.Errorf("%s: ideal attachment %.2f ms worse than the strategy's own %.2f ms", x.Strategy, x.Placement.MeanMs, x.Own.MeanMs)
		}
	}
	if g.Placement.MeanMs > c.Placement.MeanMs+1e-9 {
		t.Errorf("the search on measured RTTs made the placement worse: %.2f ms against %.2f", g.Placement.MeanMs, c.Placement.MeanMs)
	}
	// 200 coordinate rounds of a ping and an answer, then the passes: at
	// most one per token per round until the last pass. The search adds
	// its probes.
	if maxPasses := float64(10*c.Rounds) / 200; c.MessagesPerPeer < 400 || c.MessagesPerPeer > 400+maxPasses {
		t.Errorf("coordinates alone: messages per peer %.2f, want 400 probes plus at most %.2f passes", c.MessagesPerPeer, maxPasses)
	}
	if g.MessagesPerPeer <= c.MessagesPerPeer {
		t.Errorf("messages per peer %.2f with the search, %.2f without: the search's probes are not counted", g.MessagesPerPeer, c.MessagesPerPeer)
	}
}

func TestProbeRounds(t *testing.T) {
	coords := []*coordinate.Coordinate{coordinate.NewCoordinate(coordinate.DefaultConfig())}
	for _, tc := range []struct {
		cfg  geometric.SimConfig
		n    int
		want int
	}{
		{geometric.SimConfig{}, 490, geometric.DefaultCoordRounds(490)},
		{geometric.SimConfig{}, 100000, geometric.DefaultCoordRounds(100000)},
		{geometric.SimConfig{CoordRounds: 50}, 490, 50},
		{geometric.SimConfig{CoordRounds: 50, Coords: coords}, 1, 0},
	} {
		if got := probeRounds(tc.cfg, tc.n); got != tc.want {
			t.Errorf("probeRounds(CoordRounds %d, coords %v, n %d) = %d, want %d", tc.cfg.CoordRounds, tc.cfg.Coords != nil, tc.n, got, tc.want)
		}
	}
}

// Project2D recovers a planar layout embedded in 8 dimensions (up to a
// rotation or reflection, the distances in the plane are kept), in ms.
func TestProject2D(t *testing.T) {
	pts := [][2]float64{{0, 0}, {3, 0}, {0, 1}, {3, 1}, {1.5, 0.5}}
	coords := make([]*coordinate.Coordinate, len(pts))
	for i, p := range pts {
		v := make([]float64, 8)
		// the plane spanned by (1,1,0,...)/√2 and (0,0,1,0,...), in seconds
		v[0], v[1], v[2] = p[0]/math.Sqrt2/1000, p[0]/math.Sqrt2/1000, p[1]/1000
		v[5] = 0.5 // a constant offset
		coords[i] = &coordinate.Coordinate{Vec: v}
	}
	got := Project2D(coords)
	for a := range pts {
		for b := range pts {
			want := math.Hypot(pts[a][0]-pts[b][0], pts[a][1]-pts[b][1])
			if d := math.Hypot(got[a][0]-got[b][0], got[a][1]-got[b][1]); !near(d, want) {
				t.Errorf("distance %d-%d = %v ms, want %v", a, b, d, want)
			}
		}
	}
	// The long axis (3 ms) comes first.
	if spread := math.Abs(got[1][0] - got[0][0]); !near(spread, 3) {
		t.Errorf("first axis spread %v, want 3: %v", spread, got)
	}
	if Project2D(nil) != nil || Project2D([]*coordinate.Coordinate{nil}) != nil {
		t.Error("Project2D of nothing is not nil")
	}
}

// The selection suite's figures on PlanetLab, S = 10, 25, 49, and on 10,000
// synthetic hosts, S = 100: the geometric strategy against random and
// offline placement (too slow for the test suite: the 10,000-host case
// takes minutes). Run with
//
//	go test -run XXX -bench BenchmarkSelection -benchtime 1x ./bench/
func BenchmarkSelectionPlanetLab(b *testing.B) {
	nw, err := PlanetLab()
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		benchSelection(b, nw, []int{10, 25, 49}, geometric.SimConfig{})
	}
}

func BenchmarkSelection10k(b *testing.B) {
	nw := Synthetic(10000, 1)
	for range b.N {
		benchSelection(b, nw, []int{100}, geometric.SimConfig{CoordRounds: 200})
	}
}

func benchSelection(b *testing.B, nw *Network, sizes []int, cfg geometric.SimConfig) {
	var all []SelectionRow
	for _, s := range sizes {
		rows, err := SelectionCase{Network: nw, S: s, Seed: 1, Strategies: []Strategy{GeometricStrategy(cfg)}}.Run()
		if err != nil {
			b.Fatal(err)
		}
		all = append(all, rows...)
	}
	var sb strings.Builder
	if err := WriteSelectionTable(&sb, all); err != nil {
		b.Fatal(err)
	}
	fmt.Print(sb.String()) // b.Log would truncate the table
}

// checkRepeatable runs c again and fails t unless it gives rows, wall
// times aside: a case is deterministic from its seed.
func checkRepeatable(t *testing.T, c SelectionCase, rows []SelectionRow) {
	t.Helper()
	again, err := c.Run()
	if err != nil {
		t.Fatal(err)
	}
	for k := range rows {
		rows[k].WallMs, again[k].WallMs = 0, 0
	}
	if !reflect.DeepEqual(rows, again) {
		t.Error("two runs of the same case differ")
	}
}
