package bench

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/superpeer/superpeer/testnet/latency"
)

// Bad configurations of Run name the problem.
func TestRunBadConfig(t *testing.T) {
	for _, c := range []Config{
		{Suites: []string{"speed"}, Sim: true},
		{Suites: []string{SuiteElection}},
	} {
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrBench) {
			t.Errorf("Run(%+v) = %v, want ErrBench", c, err)
		}
	}
}

// A quick simulator run of the election and repair suites fills their rows,
// follows the steps in order, and draws their plots.
func TestRunQuickSim(t *testing.T) {
	var steps []string
	p := &recorder{step: func(i int, desc string) {
		if i != len(steps) {
			t.Errorf("step %d reported as %d", len(steps), i)
		}
		steps = append(steps, desc)
	}}
	r, err := Run(context.Background(), Config{Suites: []string{SuiteElection, SuiteRepair}, Sim: true, Quick: true, Seed: 1, Progress: p})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Election) == 0 || len(r.Repair) == 0 || len(r.SimScale)+len(r.LiveScale)+len(r.Selection)+len(r.LiveRepair) != 0 {
		t.Fatalf("rows: election %d, repair %d, others %d", len(r.Election), len(r.Repair), len(r.SimScale)+len(r.LiveScale)+len(r.Selection)+len(r.LiveRepair))
	}
	if len(steps) != p.total {
		t.Errorf("%d steps run, %d announced", len(steps), p.total)
	}
	figs, err := DrawPlots(r, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"election-messages.png": false, "election-time.png": false, "repair-failover.png": false, "repair-coverage.png": false}
	for _, f := range figs {
		if _, ok := want[f.File]; ok {
			want[f.File] = true
		}
	}
	for f, drawn := range want {
		if !drawn {
			t.Errorf("%s not drawn; drew %v", f, figs)
		}
	}
}

// planetLabMatrix is the PlanetLab matrix (PlanetLabFile).
func planetLabMatrix(t *testing.T) *latency.Matrix {
	t.Helper()
	path, err := findPlanetLab()
	if err != nil {
		t.Fatal(err)
	}
	m, err := latency.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recorder is a Progress that counts.
type recorder struct {
	total int
	step  func(i int, desc string)
}

func (r *recorder) Start(total int)         { r.total = total }
func (r *recorder) Step(i int, desc string) { r.step(i, desc) }

func TestLogSlope(t *testing.T) {
	b, ok := logSlope([]float64{32, 64, 128, 256}, []float64{3, 6, 12, 24})
	if !ok || math.Abs(b-1) > 1e-12 {
		t.Errorf("slope of y = 3x/32: %v, %v; want 1", b, ok)
	}
	b, ok = logSlope([]float64{10, 100}, []float64{5, 5})
	if !ok || b != 0 {
		t.Errorf("slope of a constant: %v, %v; want 0", b, ok)
	}
	if _, ok := logSlope([]float64{7, 7}, []float64{1, 2}); ok {
		t.Error("slope over one x: ok, want not ok")
	}
	var w strings.Builder
	writeTrafficGrowth(&w, []LiveScaleRow{{N: 32, Converged: true, Ordinary: 300, SuperpeerPerMember: 40}, {N: 256, Converged: false}, {N: 128, Converged: true, Ordinary: 600, SuperpeerPerMember: 160}})
	if got := w.String(); !strings.Contains(got, "from 300 B/s at n = 32 to 600 B/s at n = 128, about n^0.50") || !strings.Contains(got, "from 40 to 160 B/s, about n^1.00") {
		t.Errorf("growth statement: %q", got)
	}
}

// The selection suite runs on a network of the caller's (peer bench
// --latency) for the values of S given, or for SelectionS of its size; a
// network for another suite, or values of S out of range or without a
// network, are refused.
func TestRunOwnNetwork(t *testing.T) {
	if got := SelectionS(490); !slices.Equal(got, []int{10, 25, 49}) {
		t.Errorf("SelectionS(490) = %v, want PlanetLab's 10, 25, 49", got)
	}
	if got := SelectionS(20); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("SelectionS(20) = %v, want 1, 2", got)
	}
	m := planetLabMatrix(t)
	hosts := make([]int, 100)
	for i := range hosts {
		hosts[i] = 3 * i
	}
	nw, err := FromMatrix("every third", m.Sub(hosts))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		supers []int
		want   []int
	}{{nil, []int{2, 5, 10}}, {[]int{7, 3, 7}, []int{3, 7}}} {
		r, err := Run(context.Background(), Config{Suites: []string{SuiteSelection}, Sim: true, Seed: 1, Network: nw, Superpeers: c.supers})
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, row := range r.Selection {
			if row.Network != "every third" {
				t.Errorf("a row on %q", row.Network)
			}
			if !slices.Contains(got, row.TargetS) {
				got = append(got, row.TargetS)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Superpeers %v: rows for S = %v, want %v", c.supers, got, c.want)
		}
	}
	for _, c := range []Config{
		{Suites: []string{SuiteSelection, SuiteElection}, Sim: true, Network: nw},
		{Suites: []string{SuiteSelection}, Live: true, Network: nw},
		{Suites: []string{SuiteSelection}, Sim: true, Network: nw, Superpeers: []int{101}},
		{Suites: []string{SuiteSelection}, Sim: true, Superpeers: []int{5}},
		{Suites: []string{SuiteSelection}, Sim: true, Network: nw, GeoLiveVirtual: []GeoLiveRow{{}}},
	} {
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrBench) {
			t.Errorf("Run(suites %v, S %v, network %v) = %v, want ErrBench", c.Suites, c.Superpeers, c.Network != nil, err)
		}
	}
}
