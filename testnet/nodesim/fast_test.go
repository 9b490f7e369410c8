package nodesim

import (
	"testing"
	"time"
)

// TestFastDecidesAsPlain: the simulator's shortcuts (plain turns them
// off: routingOf's answer kept while no peer of the table went up or
// down, and a superpeer ticked when due rather than every tick) change
// nothing that the machines decide: the same trace of every state
// change, the same messages, views, registrations and backbone
// deliveries, and the same coverage, failovers, split brain and
// disagreement, through the start and churn with bully, ring, stable and
// candidate; and the machines have no more Readys to carry out, the same
// number in two runs.
func TestFastDecidesAsPlain(t *testing.T) {
	n, d := 300, time.Minute
	if testing.Short() {
		n, d = 100, 30*time.Second
	}
	for _, election := range []string{"bully", "ring", "stable", "candidate"} {
		t.Run(election, func(t *testing.T) {
			plain := runTicks(t, n, election, 5, 0.2, d, func(s *Sim) { s.plain = true })
			fast := runTicks(t, n, election, 5, 0.2, d, nil)
			if plain.changes < n {
				t.Fatalf("only %d state changes: the run did not run", plain.changes)
			}
			rd, prd := fast.ticks, plain.ticks
			fast.ticks, plain.ticks = 0, 0
			if fast != plain {
				t.Fatalf("fast:\n%+v\nplain:\n%+v", fast, plain)
			}
			if rd > prd {
				t.Errorf("%d Readys with the shortcuts, %d without", rd, prd)
			}
			t.Logf("%d state changes, %d Readys with the shortcuts, %d without", plain.changes, rd, prd)
			if election == "bully" {
				// And the shortcuts draw nothing from a map's order: a
				// second run has the same Readys.
				fast.ticks = rd
				if again := runTicks(t, n, election, 5, 0.2, d, nil); again != fast {
					t.Errorf("a second run:\n%+v\nthe first:\n%+v", again, fast)
				}
			}
		})
	}
}
