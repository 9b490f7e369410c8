package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/superpeer/superpeer/testnet/latency"
)

// Network is a named set of hosts with a round-trip time between every two
// of them, in milliseconds, and, optionally, a 2-D position for each host to
// draw it on a plot. A synthetic network has true positions; a measured one
// (PlanetLab) has none until the caller sets some, typically fitted network
// coordinates (SetPositions).
//
// A Network is read-only once built, apart from SetPositions, so strategies
// and baselines may share it (but not while SetPositions runs).
type Network struct {
	// Name names the network in tables and JSON ("planetlab490",
	// "synthetic10000-seed1").
	Name string

	n  int
	ms Dist
	// rtt, when not nil, gives the exact RTT (a matrix's); otherwise RTT
	// converts ms.
	rtt         func(i, j int) time.Duration
	pos         [][2]float64
	truePos     bool
	description string
}

// NewNetwork returns a network of n hosts whose RTT in milliseconds is
// ms(i, j). ms must be symmetric, non-negative, zero on the diagonal and
// defined for every pair (fill missing measurements first). It fails with
// ErrPlacement when n < 1 or ms is nil.
func NewNetwork(name string, n int, ms Dist) (*Network, error) {
	if n < 1 || ms == nil {
		return nil, fmt.Errorf("%w: network %q of %d hosts (RTT function given: %v); want at least one host and an RTT function",
			ErrPlacement, name, n, ms != nil)
	}
	return &Network{Name: name, n: n, ms: ms}, nil
}

// FromMatrix returns the network of the hosts of matrix m, its missing pairs
// estimated by latency.Matrix.FillMissing. The RTTs are copied into a dense
// table of milliseconds (8·N² bytes: 1.9 MB for 490 hosts), so lookups are
// cheap.
func FromMatrix(name string, m *latency.Matrix) (*Network, error) {
	if m == nil || m.N() < 1 {
		return nil, fmt.Errorf("%w: network %q from an empty matrix", ErrPlacement, name)
	}
	filled, err := m.FillMissing()
	if err != nil {
		return nil, fmt.Errorf("%w: network %q: filling the missing pairs: %w", ErrPlacement, name, err)
	}
	n := m.N()
	tab := make([]float64, n*n)
	for i := range n {
		for j := range n {
			d, _ := filled.RTT(i, j)
			tab[i*n+j] = float64(d) / float64(time.Millisecond)
		}
	}
	nw, err := NewNetwork(name, n, func(i, j int) float64 { return tab[i*n+j] })
	if err != nil {
		return nil, err
	}
	nw.rtt = func(i, j int) time.Duration { d, _ := filled.RTT(i, j); return d }
	nw.description = fmt.Sprintf("%d hosts, measured RTT matrix (%d of %d pairs missing, filled by two-hop estimates)",
		n, m.Missing(), n*(n-1)/2)
	return nw, nil
}

// PlanetLabFile is the path of the PlanetLab matrix (490 hosts, per-pair
// median of 18 time slices, in milliseconds) relative to the repository
// root.
const PlanetLabFile = "testdata/planetlab490/planetlab490_median18_ms.txt"

// ErrNoDataFile reports that a data file the benchmarks need was not found.
var ErrNoDataFile = errors.New("bench: data file not found")

// PlanetLab returns the network of the 490 PlanetLab hosts, its missing
// pairs filled as the tests fill them (latency.Matrix.FillMissing). It has
// no positions.
//
// The matrix file (PlanetLabFile, 1.7 MB) lives at the repository root,
// outside this package, so it cannot be embedded; PlanetLab looks for it in
// the working directory and each of its parents (so it works from the
// repository root and from any package directory), then beside this source
// file's module root (so an installed binary works on the machine that built
// it). It fails with ErrNoDataFile when neither holds it; LoadPlanetLab takes an
// explicit path.
func PlanetLab() (*Network, error) {
	path, err := findPlanetLab()
	if err != nil {
		return nil, err
	}
	return LoadPlanetLab(path)
}

// LoadPlanetLab is PlanetLab with the matrix read from path (any matrix in
// latency's text format will do; the network is named after PlanetLab
// only if path is the PlanetLab file).
func LoadPlanetLab(path string) (*Network, error) {
	m, err := latency.Load(path)
	if err != nil {
		return nil, err
	}
	name := "planetlab490"
	if filepath.Base(path) != filepath.Base(PlanetLabFile) {
		name = filepath.Base(path)
	}
	return FromMatrix(name, m)
}

// findPlanetLab returns the path of PlanetLabFile: in the working directory
// or a parent, or under the module root of this source file.
func findPlanetLab() (string, error) {
	var tried []string
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, PlanetLabFile)
			tried = append(tried, p)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", PlanetLabFile)
		tried = append(tried, p)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s is not under the working directory or its parents, nor beside the source (tried %d paths, the last %s); run from a checkout or pass the path",
		ErrNoDataFile, PlanetLabFile, len(tried), tried[len(tried)-1])
}

// Synthetic returns a network of n hosts placed at random (seeded) in a
// plane of 200 ms × 200 ms with 5 dense regions, like continents: 5 centres
// uniform in the plane, each host at a uniformly chosen centre plus a normal
// offset of 15 ms standard deviation on each axis. The RTT between two hosts
// is their Euclidean distance plus 2 ms of access delay; a host is 0 ms from
// itself. The positions are true positions. It stores 16 bytes per host, so
// n may be 100,000 or more. n < 1 is taken as 1.
//
// It draws the same hosts as the synthetic function of bench's tests
// (rounds_test.go), so figures measured on either agree.
func Synthetic(n int, seed uint64) *Network {
	n = max(n, 1)
	rng := rand.New(rand.NewPCG(seed, 3))
	type pt struct{ x, y float64 }
	centres := make([]pt, 5)
	for i := range centres {
		centres[i] = pt{rng.Float64() * 200, rng.Float64() * 200}
	}
	pos := make([][2]float64, n)
	for i := range pos {
		c := centres[rng.IntN(len(centres))]
		pos[i] = [2]float64{c.x + rng.NormFloat64()*15, c.y + rng.NormFloat64()*15}
	}
	nw := &Network{
		Name: fmt.Sprintf("synthetic%d-seed%d", n, seed),
		n:    n,
		ms: func(i, j int) float64 {
			if i == j {
				return 0
			}
			dx, dy := pos[i][0]-pos[j][0], pos[i][1]-pos[j][1]
			return math.Sqrt(dx*dx+dy*dy) + 2
		},
		pos:         pos,
		truePos:     true,
		description: fmt.Sprintf("%d hosts in a 200 ms × 200 ms plane, 5 regions (σ 15 ms), +2 ms access, seed %d", n, seed),
	}
	return nw
}

// N returns the number of hosts.
func (nw *Network) N() int { return nw.n }

// MS returns the RTT between hosts i and j in milliseconds.
func (nw *Network) MS(i, j int) float64 { return nw.ms(i, j) }

// Dist returns the RTT in milliseconds as a Dist, for KMedian, Measure and
// the rest of the package.
func (nw *Network) Dist() Dist { return nw.ms }

// RTT returns the RTT between hosts i and j as a duration, as
// geometric.Simulate and the simulators take it: a matrix's own entry for a
// network built from a matrix, otherwise MS rounded down to a nanosecond.
func (nw *Network) RTT(i, j int) time.Duration {
	if nw.rtt != nil {
		return nw.rtt(i, j)
	}
	return time.Duration(nw.ms(i, j) * float64(time.Millisecond))
}

// Description says in one line what the network is.
func (nw *Network) Description() string {
	if nw.description == "" {
		return fmt.Sprintf("%d hosts", nw.n)
	}
	return nw.description
}

// Positions returns the 2-D position of every host, in milliseconds, or nil
// when the network has none. TruePositions says whether they are the
// network's true geometry (a synthetic network) or were set by the caller.
// The slice is the network's own; do not modify it.
func (nw *Network) Positions() [][2]float64 { return nw.pos }

// TruePositions reports whether Positions are the hosts' true positions,
// from which the RTTs were computed, rather than positions set by the caller
// (fitted coordinates, say), which only approximate them.
func (nw *Network) TruePositions() bool { return nw.pos != nil && nw.truePos }

// SetPositions sets the 2-D position of every host for plotting (fitted
// network coordinates, say, or a strategy's StrategyResult.Coords); they
// do not change the RTTs. nil removes them. It fails with ErrPlacement when
// pos has not one entry per host or holds a NaN or an infinity. It must not
// run while the network is in use elsewhere.
func (nw *Network) SetPositions(pos [][2]float64) error {
	if pos == nil {
		nw.pos, nw.truePos = nil, false
		return nil
	}
	if len(pos) != nw.n {
		return fmt.Errorf("%w: %d positions for the %d hosts of network %q", ErrPlacement, len(pos), nw.n, nw.Name)
	}
	for i, p := range pos {
		for _, x := range p {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: position %d of network %q is %v", ErrPlacement, i, nw.Name, p)
			}
		}
	}
	nw.pos, nw.truePos = pos, false
	return nil
}
