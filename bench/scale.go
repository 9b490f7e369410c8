package bench

import (
	"github.com/superpeer/superpeer/geometric"

	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// SimScaleConfig configures SimScale.
type SimScaleConfig struct {
	// Sizes are the numbers of peers. Default 1,000, 10,000, 100,000.
	Sizes []int
	// Strategies are run at every size. Default GeometricStrategy with
	// its defaults, and DHTStrategy.
	Strategies []Strategy
	// PeersPerSuperpeer sets the target: S = n / PeersPerSuperpeer.
	// Default 100.
	PeersPerSuperpeer int
	// Seed seeds the synthetic networks and the strategies.
	Seed uint64
	// Step, when set, is told the start of each run.
	Step func(desc string)
}

// SimScaleRow is one strategy on one synthetic network (Synthetic(N)).
type SimScaleRow struct {
	Strategy   string `json:"strategy"`
	N          int    `json:"n"`
	TargetS    int    `json:"target_s"`
	Superpeers int    `json:"superpeers"`
	// WallS is the wall time of the whole selection (for geometric, the
	// coordinate fit included), PeakMemMB the most memory the process held
	// meanwhile (MemPeak; the network itself included), and LiveHeapMB
	// the largest live heap.
	WallS      float64 `json:"wall_s"`
	PeakMemMB  float64 `json:"peak_mem_mb"`
	LiveHeapMB float64 `json:"live_heap_mb"`
	// Rounds and MessagesPerPeer are the strategy's (StrategyResult).
	Rounds          int     `json:"rounds"`
	MessagesPerPeer float64 `json:"messages_per_peer"`
	Unattached      int     `json:"unattached"`
}

func (c *SimScaleConfig) fill() error {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{1000, 10000, 100000}
	}
	if len(c.Strategies) == 0 {
		c.Strategies = []Strategy{GeometricStrategy(scaleGeometric()), DHTStrategy}
	}
	if c.PeersPerSuperpeer == 0 {
		c.PeersPerSuperpeer = 100
	}
	for _, n := range c.Sizes {
		if n < 2 {
			return fmt.Errorf("%w: simulator size %d, want at least 2 peers", ErrBench, n)
		}
	}
	if c.PeersPerSuperpeer < 1 {
		return fmt.Errorf("%w: %d peers per superpeer, want at least 1", ErrBench, c.PeersPerSuperpeer)
	}
	return nil
}

// SimScale runs every strategy at every size on a synthetic network, and
// measures its wall time and the process's peak memory.
func SimScale(cfg SimScaleConfig) ([]SimScaleRow, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	var rows []SimScaleRow
	for _, n := range cfg.Sizes {
		for _, st := range cfg.Strategies {
			if cfg.Step != nil {
				cfg.Step(fmt.Sprintf("simulator %s, %d peers", st.Name, n))
			}
			s := max(1, n/cfg.PeersPerSuperpeer)
			mem := StartMemPeak()
			start := time.Now()
			nw := Synthetic(n, cfg.Seed)
			r, err := st.Run(nw, s, DefaultCapacity(n, s), cfg.Seed)
			wall := time.Since(start)
			peak := mem.Stop()
			if err != nil {
				return rows, fmt.Errorf("%s on %d peers: %w", st.Name, n, err)
			}
			row := SimScaleRow{Strategy: st.Name, N: n, TargetS: s, Superpeers: len(r.Superpeers),
				WallS: wall.Seconds(), PeakMemMB: float64(peak) / (1 << 20), LiveHeapMB: float64(mem.Live()) / (1 << 20), Rounds: r.Rounds, MessagesPerPeer: r.MessagesPerPeer}
			for _, a := range r.Attach {
				if a < 0 {
					row.Unattached++
				}
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// WriteSimScaleTable prints rows as a table.
func WriteSimScaleTable(w io.Writer, rows []SimScaleRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tn\ttarget S\tsuperpeers\twall s\tpeak MB\tlive heap MB\trounds\tmessages/peer\tunattached\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%.0f\t%.0f\t%d\t%.2f\t%d\t\n",
			r.Strategy, r.N, r.TargetS, r.Superpeers, r.WallS, r.PeakMemMB, r.LiveHeapMB, r.Rounds, r.MessagesPerPeer, r.Unattached)
	}
	return tw.Flush()
}

// defaultGeometric is the simulator configuration of the geometric
// strategy in every suite: Simulate's defaults.
func defaultGeometric() geometric.SimConfig { return geometric.SimConfig{} }

// scaleGeometric is the scale suite's: the coordinates and tokens alone
// (SwapRounds < 0). The simulator's search on measured RTTs attaches all
// n peers to all S superpeers in each of its rounds, O(n·S) a round, which
// at 100,000 hosts and S = 1000 would take the run's time from a minute
// to hours; a node in the search measures and reports for its own
// cluster only.
func scaleGeometric() geometric.SimConfig { return geometric.SimConfig{SwapRounds: -1} }
