package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/nodesim"
)

// Growth and shrinkage (issue 20): node machines in the node simulator,
// DHT strategy, target S = 10 % of the estimated size, no election. A
// network of N converges; then N more nodes join over Stagger (double: k
// goes up by one, and every cluster splits in two in place), or half of
// the 2N nodes of a converged network leave with a goodbye over Stagger
// (halve: k goes down by one, and pairs of clusters merge). Measured over
// the nodes that were there before and after (the stayers), sampled every
// 100 ms until the network has converged again:
//
//   - Changed: the stayers whose superpeer at the end is not the one they
//     had before. The keys decide it (dhtselect.Assign before and after:
//     the figure is the least any run of the algorithm can reach, and a
//     converged run reaches it); about half of them for a split (the
//     members in the half of the old cluster without the old superpeer),
//     fewer for a merge (the members of the cluster whose superpeer is not
//     the merged cluster's).
//   - Switches: every change of superpeer a stayer made while the network
//     moved, counted at the samples (the superpeer named changed from one
//     sample to the next, a gap without one not counted), per stayer; the
//     least is Changed ÷ stayers, and the excess is the flapping of the
//     transition.
//   - Reconverge: virtual seconds from the first join or leave to
//     nodesim.Converged; Coverage: the mean fraction of the joined nodes
//     served over that span (nodesim.Covered: a node and its superpeer
//     must agree on k and the cluster key, so a cluster that is splitting
//     or merging counts as uncovered until its members and superpeer have
//     all moved).
type GrowthConfig struct {
	// Sizes are the N of the runs (each is doubled from N and halved from
	// 2N). Nil means 480 and 1,920: 10 % of them and of their double
	// are far from a power of two, so that an estimate a few per cent off
	// does not move k.
	Sizes []int
	// Stagger spreads the joins or leaves. Zero means 10 s.
	Stagger time.Duration
	Seed    uint64
}

// GrowthRow is one run.
type GrowthRow struct {
	// Event is "double" or "halve"; From and To the node counts.
	Event string `json:"event"`
	From  int    `json:"from"`
	To    int    `json:"to"`
	KFrom int    `json:"k_from"`
	KTo   int    `json:"k_to"`
	// Stayers are the nodes there before and after.
	Stayers int `json:"stayers"`
	// Changed is the stayers whose superpeer changed, ChangedFrac the
	// fraction; ByKeys what dhtselect.Assign says must change.
	Changed     int     `json:"changed"`
	ChangedFrac float64 `json:"changed_frac"`
	ByKeys      int     `json:"by_keys"`
	// SwitchesPerStayer is the superpeer changes per stayer over the
	// transition (see the comment on GrowthConfig).
	SwitchesPerStayer float64 `json:"switches_per_stayer"`
	Converged         bool    `json:"converged"`
	ReconvergeS       float64 `json:"reconverge_s"`
	Coverage          float64 `json:"coverage"`
	WallS             float64 `json:"wall_s"`
}

const (
	growthFraction = 0.1
	growthSample   = 100 * time.Millisecond
	growthLimit    = 5 * time.Minute
)

// Growth runs double and halve at each size.
func Growth(cfg GrowthConfig) ([]GrowthRow, error) {
	if cfg.Sizes == nil {
		cfg.Sizes = []int{480, 1920}
	}
	if cfg.Stagger == 0 {
		cfg.Stagger = 10 * time.Second
	}
	if cfg.Stagger < 0 {
		return nil, fmt.Errorf("%w: growth: stagger %v", ErrBench, cfg.Stagger)
	}
	var rows []GrowthRow
	for _, n := range cfg.Sizes {
		if n < 2 {
			return rows, fmt.Errorf("%w: growth: size %d, want at least 2", ErrBench, n)
		}
		for _, ev := range []string{"double", "halve"} {
			row, err := growth(cfg, n, ev)
			if err != nil {
				return rows, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func growth(cfg GrowthConfig, n int, event string) (GrowthRow, error) {
	start := time.Now()
	row := GrowthRow{Event: event, From: n, To: 2 * n}
	if event == "halve" {
		row.From, row.To = 2*n, n
	}
	target := dhtselect.Target{Fraction: growthFraction}
	s, err := nodesim.New(nodesim.Config{N: row.From, Seed: cfg.Seed, Stagger: cfg.Stagger, Node: node.Config{Target: target}})
	if err != nil {
		return row, err
	}
	if !s.RunUntil((*nodesim.Sim).Converged, time.Second, growthLimit) {
		return row, fmt.Errorf("%w: growth: %d nodes did not converge in %v", ErrBench, row.From, growthLimit)
	}
	before := map[peer.ID]peer.ID{}
	var ids0 []peer.ID
	for i := range s.N() {
		if s.Alive(i) {
			before[s.ID(i)] = s.State(i).Superpeer
			ids0 = append(ids0, s.ID(i))
		}
	}
	row.KFrom = s.State(0).K
	t0 := s.Now()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x9e0))
	gone := map[peer.ID]bool{}
	if event == "double" {
		for range n {
			s.At(t0+time.Duration(rng.Int64N(int64(cfg.Stagger)+1)), func(s *nodesim.Sim) { s.Add() })
		}
	} else {
		for _, i := range rng.Perm(row.From)[:n] {
			gone[s.ID(i)] = true
			s.At(t0+time.Duration(rng.Int64N(int64(cfg.Stagger)+1)), func(s *nodesim.Sim) { s.Stop(i) })
		}
	}
	// Samples: the superpeer each stayer names, and the coverage.
	last := map[peer.ID]peer.ID{}
	for p, sp := range before {
		if !gone[p] {
			last[p] = sp
		}
	}
	switches, samples := 0, 0
	var covered float64
	sample := func(s *nodesim.Sim) {
		x := s.Take()
		if x.Joined > 0 {
			covered += float64(x.Covered) / float64(x.Joined)
			samples++
		}
		for i := range s.N() {
			id := s.ID(i)
			prev, ok := last[id]
			if !ok || !s.Alive(i) {
				continue
			}
			if sp := s.State(i).Superpeer; sp != "" && sp != prev {
				switches++
				last[id] = sp
			}
		}
	}
	s.Every(growthSample, sample)
	// Converged may hold for a moment before the last join or leave:
	// wait for it from the end of the stagger on.
	s.Run(t0 + cfg.Stagger)
	row.Converged = s.RunUntil((*nodesim.Sim).Converged, growthSample, growthLimit)
	row.ReconvergeS = (s.Now() - t0).Seconds()
	if samples > 0 {
		row.Coverage = covered / float64(samples)
	}
	var ids1 []peer.ID
	for i := range s.N() {
		if s.Alive(i) {
			ids1 = append(ids1, s.ID(i))
		}
	}
	live := len(ids1)
	row.KTo = target.K(live)
	if i, ok := s.Index(ids1[0]); ok && row.Converged {
		row.KTo = s.State(i).K
	}
	a0, a1 := assignOf(ids0, row.KFrom), assignOf(ids1, row.KTo)
	for p, sp := range before {
		if gone[p] {
			continue
		}
		row.Stayers++
		if a0[p] != a1[p] {
			row.ByKeys++
		}
		i, _ := s.Index(p)
		if s.State(i).Superpeer != sp {
			row.Changed++
		}
	}
	if row.Stayers > 0 {
		row.ChangedFrac = float64(row.Changed) / float64(row.Stayers)
		row.SwitchesPerStayer = float64(switches) / float64(row.Stayers)
	}
	row.WallS = time.Since(start).Seconds()
	return row, nil
}

// assignOf is dhtselect.Assign as a map from peer to superpeer.
func assignOf(ids []peer.ID, k int) map[peer.ID]peer.ID {
	out := make(map[peer.ID]peer.ID, len(ids))
	for _, a := range dhtselect.Assign(ids, k) {
		out[a.ID] = a.Superpeer
	}
	return out
}

// WriteGrowthTable prints rows as a table.
func WriteGrowthTable(w io.Writer, rows []GrowthRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "event\tnodes\tk\tstayers\tchanged\tby the keys\tswitches/stayer\treconverged s\tcoverage\twall s\t")
	for _, r := range rows {
		conv := fmt.Sprintf("%.1f", r.ReconvergeS)
		if !r.Converged {
			conv = "no"
		}
		fmt.Fprintf(tw, "%s\t%d→%d\t%d→%d\t%d\t%d (%.2f)\t%d\t%.2f\t%s\t%.4f\t%.1f\t\n", r.Event, r.From, r.To, r.KFrom, r.KTo,
			r.Stayers, r.Changed, r.ChangedFrac, r.ByKeys, r.SwitchesPerStayer, conv, r.Coverage, r.WallS)
	}
	return tw.Flush()
}
