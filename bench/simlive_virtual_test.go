package bench

import (
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"testing"

	"github.com/superpeer/superpeer/testnet"
)

var simliveOut = flag.String("simlive.out", "", "TestSimLiveVirtual: run churn as well, and write the rows as JSON to this file (make bench: peer bench --simlive)")

// TestSimLiveVirtual: the same scenario on 64 nodes, on node machines in
// the node simulator and on live in-process nodes (mocknet, kad-dht,
// GossipSub, the overlay's shell) run in a testing/synctest bubble, in
// virtual time, so that neither side's timers nor delays depend on this
// machine's load: their failover in timeouts (median) and their coverage
// agree within 10 %, because the rules are the same code. CI runs
// kill-superpeer (about a minute of wall time); make bench runs churn too
// and writes the rows for BENCHMARKS.md (-simlive.out).
func TestSimLiveVirtual(t *testing.T) {
	if testing.Short() {
		t.Skip("64 live nodes in virtual time: a minute or more")
	}
	cfg := SimLiveConfig{Scenarios: []string{testnet.ScenarioKillSuperpeer},
		InBubble: inBubble(t)}
	if *simliveOut != "" {
		cfg.Scenarios = append(cfg.Scenarios, testnet.ScenarioChurn)
	}
	rows, err := SimLive(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Logf("%s: sim %+v", r.Scenario, r.Sim)
		t.Logf("%s: live %+v", r.Scenario, r.Live)
		if r.Sim.Error != "" || r.Live.Error != "" || r.Sim.Failovers == 0 || r.Live.Failovers == 0 {
			t.Errorf("%s: a side failed or measured no failover (sim %q, %d; live %q, %d)", r.Scenario, r.Sim.Error, r.Sim.Failovers, r.Live.Error, r.Live.Failovers)
			continue
		}
		for _, c := range []struct {
			what      string
			sim, live float64
		}{{"failover median in T", r.Sim.FailoverMedianT, r.Live.FailoverMedianT}, {"coverage", r.Sim.Coverage, r.Live.Coverage}} {
			if math.Abs(Ratio(c.sim, c.live)-1) > 0.10 {
				t.Errorf("%s: %s: simulated %.4f, live %.4f: ratio %.3f, not within 10 %%", r.Scenario, c.what, c.sim, c.live, Ratio(c.sim, c.live))
			}
		}
	}
	if *simliveOut != "" {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err == nil {
			err = os.WriteFile(*simliveOut, append(b, '\n'), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
