package bench

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/testnet"
)

// LiveRepairConfig configures LiveRepair.
type LiveRepairConfig struct {
	// Algorithms are the elections to measure, each on its own testnet.
	Algorithms []string
	// N is the number of nodes, S = N/8 superpeers. Default 32.
	N int
	// Kills is how many superpeers kill-superpeer stops, one after
	// another. Default 3.
	Kills int
	// Timeout bounds each testnet's convergence and scenario. Default 4 min.
	Timeout time.Duration
	// Seed derives the peer keys and chooses the victims.
	Seed uint64
}

// LiveRepairRow is the kill-superpeer scenario of one election algorithm
// on a live testnet (testnet.RunScenario).
type LiveRepairRow struct {
	Algorithm string `json:"algorithm"`
	N         int    `json:"n"`
	Kills     int    `json:"kills"`
	// FailoverMedianMs and FailoverMaxMs are, over the kills, the time
	// from a superpeer's stop until every live peer that named it names
	// another live superpeer; in DetectionTimeouts when divided by
	// DetectionTimeoutMs.
	FailoverMedianMs   float64 `json:"failover_median_ms"`
	FailoverMaxMs      float64 `json:"failover_max_ms"`
	DetectionTimeoutMs float64 `json:"detection_timeout_ms"`
	Orphans            int     `json:"orphans"`
	SplitBrainMs       float64 `json:"split_brain_ms"`
	Coverage           float64 `json:"coverage"`
	// ElectionMessages counts every election message of every node over
	// the whole run (convergence included).
	ElectionMessages uint64 `json:"election_messages"`
	Error            string `json:"error,omitempty"`
}

func (c *LiveRepairConfig) fill() error {
	if c.N == 0 {
		c.N = 32
	}
	if c.Kills == 0 {
		c.Kills = 3
	}
	if c.Timeout == 0 {
		c.Timeout = 4 * time.Minute
	}
	if c.N < 2 || c.N > testnet.MaxNodes || c.Kills < 1 || c.Timeout < 0 {
		return fmt.Errorf("%w: live repair with %d nodes, %d kills, timeout %v", ErrBench, c.N, c.Kills, c.Timeout)
	}
	return nil
}

// LiveRepair runs, for every algorithm, a live testnet of N nodes that
// converges and then loses Kills superpeers one after another. A testnet
// that fails gets a row with its error; only a cancelled ctx stops the
// others.
func LiveRepair(ctx context.Context, cfg LiveRepairConfig) ([]LiveRepairRow, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	var rows []LiveRepairRow
	for _, algo := range cfg.Algorithms {
		row := LiveRepairRow{Algorithm: algo, N: cfg.N, Kills: cfg.Kills}
		if err := liveRepairOne(ctx, cfg, &row); err != nil {
			if ctx.Err() != nil {
				return rows, ctx.Err()
			}
			row.Error = err.Error()
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func liveRepairOne(ctx context.Context, cfg LiveRepairConfig, row *LiveRepairRow) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	tn, err := testnet.Start(ctx, testnet.Config{N: cfg.N, Target: dhtselect.Target{Superpeers: max(1, cfg.N/8)},
		Seed: cfg.Seed, Election: row.Algorithm})
	if err != nil {
		return err
	}
	defer tn.Close()
	if _, err := tn.WaitConverged(ctx, tn.Started()); err != nil {
		return err
	}
	rep, err := tn.RunScenario(ctx, testnet.ScenarioConfig{Name: "kill-superpeer", Kills: cfg.Kills, Seed: cfg.Seed})
	row.FailoverMedianMs, row.FailoverMaxMs = rep.FailoverMS.Median, rep.FailoverMS.Max
	row.DetectionTimeoutMs, row.Orphans = rep.DetectionTimeoutMS, rep.Orphans
	row.SplitBrainMs, row.Coverage = rep.SplitBrainMS, rep.Coverage
	for _, c := range rep.Messages {
		row.ElectionMessages += c
	}
	return err
}

// WriteLiveRepairTable prints rows as a table.
func WriteLiveRepairTable(w io.Writer, rows []LiveRepairRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "algorithm\tn\tkills\tfailover median ms\tmax ms\tT ms\torphans\tsplit brain ms\tcoverage\telection msgs\terror")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%d\t%.0f\t%.4f\t%d\t%s\n", r.Algorithm, r.N, r.Kills,
			r.FailoverMedianMs, r.FailoverMaxMs, r.DetectionTimeoutMs, r.Orphans, r.SplitBrainMs, r.Coverage, r.ElectionMessages, r.Error)
	}
	return tw.Flush()
}
