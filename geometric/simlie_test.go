package geometric

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// planetLabPlacement is the tokens' placement (no search) on PlanetLab
// at S = 25, seed 1, and the RTTs.
func planetLabPlacement(t *testing.T) (*SimResult, func(i, j int) time.Duration, SimConfig) {
	t.Helper()
	coords, err := planetLabCoords()
	if err != nil {
		t.Fatalf("PlanetLab matrix (the repository copy in testdata/): %v", err)
	}
	m := loadPlanetLab(t)
	cfg := SimConfig{Seed: 1, Coords: coords, SwapRounds: -1}
	cfg.Tokens = 25
	res, err := Simulate(m.N(), measured(m), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SwapRounds = 0
	return res, measured(m), cfg
}

// Search from a placement is the search that ends Simulate.
func TestSearchIsSimulates(t *testing.T) {
	tokens, rtt, cfg := planetLabPlacement(t)
	whole, err := Simulate(len(tokens.Coords), rtt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Search(len(tokens.Coords), rtt, tokens.Coords, tokens.Superpeers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Superpeers, whole.Superpeers) || !slices.Equal(got.Attach, whole.Attach) || got.Swaps != whole.Swaps {
		t.Fatalf("Search: superpeers %v, %d swaps; Simulate's search: %v, %d swaps", got.Superpeers, got.Swaps, whole.Superpeers, whole.Swaps)
	}
	if whole.Swaps == 0 {
		t.Fatal("no swap at all: the test shows nothing")
	}
	for _, bad := range []SimConfig{{Liars: make([]bool, 3)}, {Eligible: make([]bool, 3)}} {
		bad.Config = cfg.Config
		if _, err := Search(len(tokens.Coords), rtt, tokens.Coords, tokens.Superpeers, bad); !errors.Is(err, ErrConfig) {
			t.Errorf("Search with %d liars and %d eligible for %d peers: %v, want ErrConfig", len(bad.Liars), len(bad.Eligible), len(tokens.Coords), err)
		}
	}
	for _, cs := range [][]*coordinate.Coordinate{{tokens.Coords[0], nil, tokens.Coords[2]}, {nil, tokens.Coords[1], tokens.Coords[2]}} {
		if _, err := Search(3, rtt, cs, []int{2}, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Search with a nil coordinate: %v, want ErrConfig", err)
		}
		c := SimConfig{Coords: cs}
		c.Tokens = 1
		if _, err := Simulate(3, rtt, c); !errors.Is(err, ErrConfig) {
			t.Errorf("Simulate with a nil coordinate: %v, want ErrConfig", err)
		}
	}
	if _, err := Search(3, rtt, tokens.Coords[:3], []int{5}, cfg); !errors.Is(err, ErrConfig) {
		t.Errorf("Search with a superpeer out of range: %v, want ErrConfig", err)
	}
}

// Liars in the search (SimConfig.Liars): a liar superpeer keeps its role,
// the same peers take more roles lying than reporting the truth, and an
// ineligible peer takes none.
func TestSearchLiars(t *testing.T) {
	tokens, rtt, cfg := planetLabPlacement(t)
	n := len(tokens.Coords)
	liar := make([]bool, n)
	r := rand.New(rand.NewPCG(3, 3))
	for _, i := range r.Perm(n)[:n/5] {
		liar[i] = true
	}
	held := func(sps []int) (k int) {
		for _, s := range sps {
			if liar[s] {
				k++
			}
		}
		return k
	}
	honest, err := Search(n, rtt, tokens.Coords, tokens.Superpeers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Liars = liar
	lying, err := Search(n, rtt, tokens.Coords, tokens.Superpeers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("20 %% liars: %d roles at the start, %d after the search reporting the truth, %d lying", held(tokens.Superpeers), held(honest.Superpeers), held(lying.Superpeers))
	for _, s := range tokens.Superpeers {
		if liar[s] && !slices.Contains(lying.Superpeers, s) {
			t.Errorf("liar superpeer %d gave its role away", s)
		}
	}
	if held(lying.Superpeers) <= held(honest.Superpeers) {
		t.Errorf("lying, the liars hold %d roles, reporting the truth %d: the lies do nothing", held(lying.Superpeers), held(honest.Superpeers))
	}

	// Liars that may not serve take no role.
	eligible := make([]bool, n)
	for i := range eligible {
		eligible[i] = !liar[i] || slices.Contains(tokens.Superpeers, i)
	}
	cfg.Eligible = eligible
	fenced, err := Search(n, rtt, tokens.Coords, tokens.Superpeers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range fenced.Superpeers {
		if !eligible[s] {
			t.Errorf("ineligible peer %d became a superpeer", s)
		}
	}
	if reflect.DeepEqual(fenced.Superpeers, tokens.Superpeers) {
		t.Error("the search moved no role with the liars fenced out: the test shows nothing")
	}
}
