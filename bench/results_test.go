package bench

import (
	"slices"
	"testing"
	"time"
)

// WithEarlier keeps the parts of the old results the new run did not
// make, each named with the run that made it (the old one, or the one
// the old results had kept it from), and takes the new run's parts over
// the old ones.
func TestResultsWithEarlier(t *testing.T) {
	x := EarlierRun{Command: "peer bench --suite repair", StartedAt: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), Kept: []string{"repair", "live_repair"}}
	old := &Results{Command: "peer bench --suite all", StartedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Election: []ElectionRow{{Algorithm: "ring", Messages: 1}}, Attack: []AttackRow{{}},
		Repair: []RepairRow{{}}, LiveRepair: []LiveRepairRow{{}}, Earlier: []EarlierRun{x}}
	r := &Results{Command: "peer bench --suite election --sim", Election: []ElectionRow{{Algorithm: "bully", Messages: 2}},
		Selection: []SelectionRow{{}}}
	got := r.WithEarlier(old)
	if len(got.Election) != 1 || got.Election[0].Messages != 2 || len(got.Selection) != 1 {
		t.Errorf("the new run's parts: election %+v, selection %d rows", got.Election, len(got.Selection))
	}
	if len(got.Attack) != 1 || len(got.Repair) != 1 || len(got.LiveRepair) != 1 {
		t.Errorf("kept: attack %d, repair %d, live repair %d rows; want 1 each", len(got.Attack), len(got.Repair), len(got.LiveRepair))
	}
	if len(got.Earlier) != 2 || got.Earlier[0].Command != old.Command || !slices.Equal(got.Earlier[0].Kept, []string{"attack"}) ||
		got.Earlier[1].Command != x.Command || !slices.Equal(got.Earlier[1].Kept, []string{"repair", "live_repair"}) {
		t.Errorf("earlier: %+v", got.Earlier)
	}
	if r.Earlier != nil || len(r.Attack) != 0 {
		t.Errorf("r changed: %+v", r)
	}
	// Nothing to keep: no Earlier.
	if got := old.WithEarlier(&Results{Command: "x"}); len(got.Earlier) != 1 || got.Earlier[0].Command != x.Command {
		t.Errorf("old over an empty run: earlier %+v, want its own earlier run alone", got.Earlier)
	}
}
