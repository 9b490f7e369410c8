package bench

import (
	"testing"
	"time"
)

// TestGrowth: 120 node machines double to 240 (k 4 → 5) and 240 halve to
// 120 (k 5 → 4); both converge again, and the stayers whose superpeer
// changed are exactly those the keys say (dhtselect.Assign before and
// after), each having switched at least once.
func TestGrowth(t *testing.T) {
	rows, err := Growth(GrowthConfig{Sizes: []int{120}, Stagger: 5 * time.Second, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for _, r := range rows {
		t.Logf("%+v", r)
		wantK := map[string][2]int{"double": {4, 5}, "halve": {5, 4}}[r.Event]
		switch {
		case !r.Converged:
			t.Errorf("%s: did not converge again", r.Event)
		case r.KFrom != wantK[0] || r.KTo != wantK[1]:
			t.Errorf("%s: k %d → %d, want %d → %d", r.Event, r.KFrom, r.KTo, wantK[0], wantK[1])
		case r.Stayers != 120:
			t.Errorf("%s: %d stayers, want 120", r.Event, r.Stayers)
		case r.Changed != r.ByKeys || r.Changed == 0:
			t.Errorf("%s: %d stayers changed superpeer, the keys say %d", r.Event, r.Changed, r.ByKeys)
		case r.SwitchesPerStayer < r.ChangedFrac:
			t.Errorf("%s: %.2f switches per stayer, fewer than the %.2f that changed", r.Event, r.SwitchesPerStayer, r.ChangedFrac)
		case r.Coverage <= 0 || r.Coverage > 1:
			t.Errorf("%s: coverage %v", r.Event, r.Coverage)
		}
	}
}

func TestGrowthConfig(t *testing.T) {
	for _, c := range []GrowthConfig{{Sizes: []int{1}}, {Stagger: -time.Second}} {
		if _, err := Growth(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
