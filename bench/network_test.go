package bench

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/testnet/latency"
)

func TestPlanetLabNetwork(t *testing.T) {
	nw, err := PlanetLab()
	if err != nil {
		t.Fatal(err)
	}
	if nw.N() != 490 || nw.Name != "planetlab490" || nw.Positions() != nil || nw.TruePositions() {
		t.Fatalf("%s: %d hosts, positions %v", nw.Name, nw.N(), nw.Positions() != nil)
	}
	// The same RTTs as the tests' own loading of the file, filled.
	m, err := latency.Load(planetLab)
	if err != nil {
		t.Fatal(err)
	}
	if m, err = m.FillMissing(); err != nil {
		t.Fatal(err)
	}
	for i := range nw.N() {
		for j := range nw.N() {
			want, _ := m.RTT(i, j)
			if got := nw.RTT(i, j); got != want || (i != j && nw.MS(i, j) <= 0) || nw.MS(i, j) != nw.MS(j, i) {
				t.Fatalf("RTT(%d, %d) = %v (%v ms), want %v, symmetric and positive", i, j, got, nw.MS(i, j), want)
			}
		}
	}
	if !strings.Contains(nw.Description(), "490 hosts") {
		t.Errorf("description %q", nw.Description())
	}
}

// PlanetLab finds the file from the repository root as from a package
// directory.
func TestPlanetLabFromRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(wd))
	if _, err := os.Stat(PlanetLabFile); err != nil {
		t.Skipf("not a checkout: %v", err)
	}
	if nw, err := PlanetLab(); err != nil || nw.N() != 490 {
		t.Errorf("from the root: %v", err)
	}
	if _, err := LoadPlanetLab("no/such/file.txt"); err == nil {
		t.Error("loading a missing file succeeded")
	}
}

func TestSyntheticNetwork(t *testing.T) {
	nw := Synthetic(500, 1)
	if nw.N() != 500 || nw.Name != "synthetic500-seed1" || !nw.TruePositions() || len(nw.Positions()) != 500 {
		t.Fatalf("%s: %d hosts, %d positions, true %v", nw.Name, nw.N(), len(nw.Positions()), nw.TruePositions())
	}
	p := nw.Positions()
	same := Synthetic(500, 1)
	other := Synthetic(500, 2)
	differs := false
	for i := range nw.N() {
		for j := range nw.N() {
			want := 0.0
			if i != j {
				want = math.Hypot(p[i][0]-p[j][0], p[i][1]-p[j][1]) + 2
			}
			if got := nw.MS(i, j); math.Abs(got-want) > 1e-9 || got != same.MS(i, j) {
				t.Fatalf("MS(%d, %d) = %v, want %v (and the same for the same seed)", i, j, got, want)
			}
			if got := nw.RTT(i, j); got != time.Duration(nw.MS(i, j)*1e6) {
				t.Fatalf("RTT(%d, %d) = %v, MS %v", i, j, got, nw.MS(i, j))
			}
			differs = differs || other.MS(i, j) != nw.MS(i, j)
		}
	}
	if !differs {
		t.Error("seeds 1 and 2 give the same network")
	}
	// Most hosts are within the 200 ms plane.
	in := 0
	for _, q := range p {
		if q[0] > -50 && q[0] < 250 && q[1] > -50 && q[1] < 250 {
			in++
		}
	}
	if in < 490 {
		t.Errorf("%d of 500 hosts within the plane and its margin", in)
	}
}

func TestNetworkPositions(t *testing.T) {
	nw, err := NewNetwork("three", 3, func(i, j int) float64 { return float64(max(i, j) - min(i, j)) })
	if err != nil {
		t.Fatal(err)
	}
	if nw.Positions() != nil || nw.TruePositions() {
		t.Error("a new network has positions")
	}
	for _, bad := range [][][2]float64{make([][2]float64, 2), {{0, 0}, {math.NaN(), 0}, {1, 1}}, {{0, 0}, {1, 1}, {math.Inf(1), 0}}} {
		if err := nw.SetPositions(bad); !errors.Is(err, ErrPlacement) {
			t.Errorf("SetPositions(%v): error %v, want ErrPlacement", bad, err)
		}
	}
	if err := nw.SetPositions([][2]float64{{0, 0}, {1, 0}, {2, 0}}); err != nil || len(nw.Positions()) != 3 || nw.TruePositions() {
		t.Errorf("SetPositions: %v, %d positions, true %v", err, len(nw.Positions()), nw.TruePositions())
	}
	syn := Synthetic(10, 1)
	if err := syn.SetPositions(make([][2]float64, 10)); err != nil || syn.TruePositions() {
		t.Errorf("fitted positions on a synthetic network: %v, true %v", err, syn.TruePositions())
	}
	if err := syn.SetPositions(nil); err != nil || syn.Positions() != nil {
		t.Errorf("SetPositions(nil): %v", err)
	}
	for _, tc := range []struct {
		n  int
		ms Dist
	}{{0, func(i, j int) float64 { return 0 }}, {3, nil}} {
		if _, err := NewNetwork("bad", tc.n, tc.ms); !errors.Is(err, ErrPlacement) {
			t.Errorf("NewNetwork(%d hosts, function %v): error %v", tc.n, tc.ms != nil, err)
		}
	}
	if _, err := FromMatrix("empty", latency.Constant(0, 0)); !errors.Is(err, ErrPlacement) {
		t.Errorf("FromMatrix of no hosts: error %v", err)
	}
}
