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
