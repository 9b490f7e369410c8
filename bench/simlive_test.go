package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSimLiveSimulated: the simulated half of the side-by-side (the live
// half belongs in make bench): both scenarios measure failovers in
// timeouts and a coverage in (0, 1], and the table has the two sides and
// their ratio per scenario.
func TestSimLiveSimulated(t *testing.T) {
	rows, err := SimLive(context.Background(), SimLiveConfig{N: 16, Kills: 2, Duration: time.Minute, Rate: 0.25, Seed: 1, SimOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Scenario != "kill-superpeer" || rows[1].Scenario != "churn" {
		t.Fatalf("rows: %+v", rows)
	}
	for _, r := range rows {
		s := r.Sim
		if s.Error != "" || s.TimeoutMs <= 0 || !(s.Coverage > 0 && s.Coverage <= 1) || s.ScenarioS <= 0 || s.Orphans != 0 ||
			s.FailoverMaxMs < s.FailoverMedianMs || !(r.SimCoverage > 0 && r.SimCoverage <= 1) {
			t.Errorf("%s: %+v", r.Scenario, r)
		}
		if r.Superpeers != 2 || r.AnnounceS != 2 || r.ReevaluateS != 1 || r.TickMs != 100 || r.RTTMs != 50 {
			t.Errorf("%s settings: %+v", r.Scenario, r)
		}
	}
	// A victim that no node followed (one of two claimers of a cluster)
	// has no failover, as in testnet's scenario.
	if k := rows[0].Sim; k.Failovers < 1 || k.Failovers > 2 || k.FailoverMedianT <= 0 || k.FailoverMaxT > repairLimit {
		t.Errorf("kill-superpeer: %d failovers (want 1 or 2: one per kill of a followed superpeer), %+v", k.Failovers, k)
	}
	var b strings.Builder
	if err := WriteSimLiveTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Count(out, "sim ÷ live") != 2 || strings.Count(out, " live ") < 2 {
		t.Errorf("table:\n%s", out)
	}
}

// TestMarkdownNodeMachines: the report's tables of the node machines (the
// repair rows, one of them failed; the side-by-side, one side failed; the
// node-machine scale rows) have as many cells in every row as in their
// header.
func TestMarkdownNodeMachines(t *testing.T) {
	r := &Results{
		Repair: []RepairRow{
			{Algorithm: "bully", N: 16, TickMs: 100, HeartbeatMs: 500, TimeoutMs: 1900, Failover: FailoverStats{Trials: 2, MedianMs: 2400, P95Ms: 2500, MaxMs: 2500, MedianTimeouts: 1.26, P95Timeouts: 1.3, MaxTimeouts: 1.3},
				Churn: []ChurnStats{{RatePerMin: 0.1, Coverage: 0.99, FailoverMedianTimeouts: -1, FailoverMaxTimeouts: -1}}},
			{Algorithm: "ring", N: 64, Error: "never one superpeer"},
		},
		SimLive: []SimLiveRow{
			{Scenario: "kill-superpeer", N: 64, Superpeers: 8, Election: "bully", Kills: 3, Sim: SimLiveSide{Failovers: 3, Coverage: 0.9, ScenarioS: 6}, Live: SimLiveSide{Error: "not converged"}},
			{Scenario: "churn", N: 64, Superpeers: 8, Election: "bully", RatePerMin: 0.1, DurationS: 120, Sim: SimLiveSide{Failovers: 2, Coverage: 0.99, ScenarioS: 117}, Live: SimLiveSide{Failovers: 1, Coverage: 0.98, ScenarioS: 128}},
		},
		NodeScale: []NodeScaleRow{
			{Scenario: NodeScaleConverge, N: 1000, Converged: true, Fraction: 0.1, StaggerS: 10},
			{Scenario: NodeScaleChurn, N: 1000, Election: "bully", Converged: true, RatePerMin: 0.1, ChurnS: 600, FailoverMedianT: -1, FailoverMaxT: -1},
		},
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, r, nil, "plots"); err != nil {
		t.Fatal(err)
	}
	tables := 0
	cells := -1
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(line, "|") {
			cells = -1
			continue
		}
		n := strings.Count(line, " | ") + 1
		if cells < 0 {
			cells = n
			tables++
			continue
		}
		if !strings.HasPrefix(line, "|---") && n != cells {
			t.Errorf("%d cells, header has %d: %s", n, cells, line)
		}
	}
	if tables != 4 {
		t.Errorf("%d tables, want 4 (failover, churn, side by side, node machines)\n%s", tables, b.String())
	}
	for _, want := range []string{"failed: never one superpeer", "failed: not converged", "**simulated ÷ live**", "10 %/min × 600 s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
