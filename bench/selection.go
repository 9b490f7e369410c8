package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/testnet/latency"
)

// PlacementConfig configures Placement.
type PlacementConfig struct {
	// Sizes are the superpeer counts S to measure.
	Sizes []int
	// Capacity is C, the most ordinary peers per superpeer, for every
	// placement. Zero means geometric's default.
	Capacity int
	// Seed seeds the geometric run, the random draws and the k-median search.
	Seed uint64
	// RandomDraws is how many random placements are averaged. Zero means 100.
	RandomDraws int
}

// PlacementRow is one line of the placement table: one S, three placements.
// All three are judged the same way: every ordinary peer attaches to the
// nearest superpeer by true RTT that has room (geometric.AttachAllBy), as a
// peer that pings the superpeers would; the RTTs are the matrix's, in
// milliseconds.
type PlacementRow struct {
	S int
	// Geometric is the token dynamics of package geometric on coordinates
	// fitted from samples of the matrix; Rounds and Passes are its gossip
	// rounds (to the last pass) and token passes.
	Geometric      Quality
	Rounds, Passes int
	Settled        bool
	// Random is the mean over RandomDraws uniformly random placements (of
	// each figure separately).
	Random Quality
	// KMedian is the offline k-median placement on the whole matrix.
	KMedian Quality
}

// Placement measures, on matrix m (which must have no missing entry; see
// latency.Matrix.FillMissing), the geometric placement against random
// placement and the offline k-median, for each S of cfg.Sizes.
func Placement(m *latency.Matrix, cfg PlacementConfig) ([]PlacementRow, error) {
	if cfg.RandomDraws == 0 {
		cfg.RandomDraws = 100
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = geometric.DefaultConfig().Capacity
	}
	if len(cfg.Sizes) == 0 || cfg.RandomDraws < 0 {
		return nil, fmt.Errorf("%w: %d sizes and %d random draws; want at least one size and draws >= 0", ErrPlacement, len(cfg.Sizes), cfg.RandomDraws)
	}
	for _, s := range cfg.Sizes {
		if s < 1 || s > m.N() {
			return nil, fmt.Errorf("%w: S = %d superpeers among %d hosts", ErrPlacement, s, m.N())
		}
	}
	if m.Missing() > 0 {
		return nil, fmt.Errorf("%w: the matrix misses %d pairs; fill them in first", ErrPlacement, m.Missing())
	}
	n := m.N()
	rtt := func(i, j int) time.Duration { d, _ := m.RTT(i, j); return d }
	j := judge{n: n, ms: func(i, j int) float64 { return float64(rtt(i, j)) / float64(time.Millisecond) }, capacity: cfg.Capacity}
	var rows []PlacementRow
	var coords []*coordinate.Coordinate
	for _, s := range cfg.Sizes {
		row := PlacementRow{S: s}
		res, err := geometric.Simulate(n, rtt, geometric.SimConfig{
			Config: geometric.Config{Tokens: s, Capacity: cfg.Capacity}, Seed: cfg.Seed, Coords: coords,
		})
		if err != nil {
			return nil, fmt.Errorf("geometric, S = %d: %w", s, err)
		}
		coords = res.Coords // one coordinate fit for every S
		row.Rounds, row.Passes, row.Settled = res.LastPass, res.Passes, res.Settled
		if row.Geometric, err = j.quality(res.Superpeers); err != nil {
			return nil, err
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(s)))
		if row.Random, row.KMedian, err = j.baselines(s, cfg.RandomDraws, rng); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// judge judges placements on n hosts: every ordinary peer attaches to the
// nearest superpeer by ms that has room.
type judge struct {
	n        int
	ms       Dist
	capacity int
}

func (j judge) quality(superpeers []int) (Quality, error) {
	a, err := geometric.AttachAllBy(j.n, j.ms, superpeers, j.capacity)
	if err != nil {
		return Quality{}, err
	}
	return Measure(j.ms, a), nil
}

// baselines returns the mean quality of draws random placements of s
// superpeers and the quality of the offline k-median placement.
func (j judge) baselines(s, draws int, rng *rand.Rand) (random, kmedian Quality, err error) {
	for range draws {
		sp, err := RandomPlacement(j.n, s, rng)
		if err != nil {
			return random, kmedian, err
		}
		q, err := j.quality(sp)
		if err != nil {
			return random, kmedian, err
		}
		random = random.add(q, 1/float64(draws))
	}
	km, err := KMedian(j.n, j.ms, s, rng)
	if err != nil {
		return random, kmedian, err
	}
	kmedian, err = j.quality(km)
	return random, kmedian, err
}

// Baseline judges a live placement on the first n hosts of matrix m (rows
// 0..n-1, as the testnet assigns them): the given superpeers with every
// peer attached ideally (nearest by true RTT with room), against the mean
// of 100 random placements and the offline k-median, for the same number
// of superpeers and capacity. The matrix must have no missing entry.
func Baseline(m *latency.Matrix, n int, superpeers []int, capacity int, seed uint64) (placed, random, kmedian Quality, err error) {
	if n < 1 || n > m.N() || len(superpeers) < 1 || len(superpeers) > n || m.Missing() > 0 {
		return placed, random, kmedian, fmt.Errorf("%w: %d superpeers among the first %d of %d hosts (%d pairs missing)",
			ErrPlacement, len(superpeers), n, m.N(), m.Missing())
	}
	if capacity == 0 {
		capacity = geometric.DefaultConfig().Capacity
	}
	j := judge{n: n, capacity: capacity, ms: func(a, b int) float64 {
		d, _ := m.RTT(a, b)
		return float64(d) / float64(time.Millisecond)
	}}
	if placed, err = j.quality(superpeers); err != nil {
		return placed, random, kmedian, err
	}
	random, kmedian, err = j.baselines(len(superpeers), 100, rand.New(rand.NewPCG(seed, uint64(len(superpeers)))))
	return placed, random, kmedian, err
}

// add returns q plus w times o, figure by figure.
func (q Quality) add(o Quality, w float64) Quality {
	q.Mean += w * o.Mean
	q.P95 += w * o.P95
	q.Max += w * o.Max
	q.ClusterCV += w * o.ClusterCV
	q.MaxCluster = max(q.MaxCluster, o.MaxCluster)
	q.Clusters, q.OrdinaryCounted = o.Clusters, o.OrdinaryCounted
	return q
}

// WritePlacementTable prints rows as a table with the two ratios that
// matter: random ÷ geometric (higher is better; the goal is 1.5) and
// geometric ÷ k-median (lower is better; the goal is 1.15).
func WritePlacementTable(w io.Writer, rows []PlacementRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "S\tgeometric mean ms\tp95 ms\trandom mean ms\tp95 ms\tk-median mean ms\tp95 ms\trandom/geometric\tgeometric/k-median\tmax cluster\trounds\tpasses\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%d\t%d\t%d\t\n",
			r.S, r.Geometric.Mean, r.Geometric.P95, r.Random.Mean, r.Random.P95, r.KMedian.Mean, r.KMedian.P95,
			r.Random.Mean/r.Geometric.Mean, r.Geometric.Mean/r.KMedian.Mean, r.Geometric.MaxCluster, r.Rounds, r.Passes)
	}
	return tw.Flush()
}
