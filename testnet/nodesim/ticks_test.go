package nodesim

import (
	"fmt"
	"testing"
	"time"

	"github.com/superpeer/superpeer/overlay/node"
)

// tickRun is what TestTicksWhenDue compares: the trace of every state
// change, the observer's figures, and the messages sent.
type tickRun struct {
	trace     uint64
	changes   int
	messages  uint64
	views     uint64
	regs      uint64
	backbones uint64
	coverage  float64
	failovers string
	split     time.Duration
	disagree  time.Duration
	ticks     uint64 // tick events processed
}

// runTicks starts a network of n nodes, then churns it at rate per
// minute for d under an observer; set, when not nil, sets the driver's
// options before the start (everyTick: every node ticks every tick).
func runTicks(t *testing.T, n int, election string, seed uint64, rate float64, d time.Duration, set func(*Sim)) tickRun {
	t.Helper()
	s, err := New(Config{N: n, Seed: seed, Stagger: 10 * time.Second, Node: node.Config{Election: election}})
	if err != nil {
		t.Fatal(err)
	}
	if set != nil {
		set(s)
	}
	s.Record = true
	var ticks uint64
	s.Watch = func(time.Duration, int, node.Ready) { ticks++ }
	s.RunFor(40 * time.Second) // the nodes start over 10 s; not all elections reach Converged's agreement
	o := s.Observe(100 * time.Millisecond)
	t0 := s.Now()
	s.Churn(rate, d, o)
	s.RunFor(d + 30*time.Second)
	o.Finish()
	st := s.Stats()
	return tickRun{
		trace: s.Trace(), changes: len(s.Changes), messages: st.Messages, views: st.Views, regs: st.Registrations, backbones: st.Backbones,
		coverage: o.Coverage(t0, t0+d), failovers: fmt.Sprint(o.Failovers), split: o.SplitTime(t0, t0+d), disagree: o.Disagree,
		ticks: ticks,
	}
}

// TestTicksWhenDue: ticking a node only when it is due (the default for
// the DHT strategy) decides exactly what ticking every node every tick
// does: the same trace of every state change, the same messages, views,
// registrations and backbone deliveries, and the same coverage,
// failovers, split brain and disagreement, through the start and churn
// with bully, ring and stable (whose machines skip idle ticks) and
// candidate (which is ticked every tick). And with the first three the
// machines have far fewer Readys to carry out, or nothing was skipped.
func TestTicksWhenDue(t *testing.T) {
	n, d := 300, time.Minute
	if testing.Short() {
		n, d = 100, 30*time.Second
	}
	for _, c := range []struct {
		election string
		most     float64 // the Readys when due, at most, as a fraction of those every tick
	}{{"bully", 0.5}, {"ring", 0.5}, {"stable", 0.75}, {"candidate", 1}} {
		t.Run(c.election, func(t *testing.T) {
			every := runTicks(t, n, c.election, 3, 0.2, d, func(s *Sim) { s.everyTick = true })
			due := runTicks(t, n, c.election, 3, 0.2, d, nil)
			if every.changes < n {
				t.Fatalf("only %d state changes: the run did not run", every.changes)
			}
			rd, ticks := due.ticks, every.ticks
			due.ticks, every.ticks = 0, 0
			if due != every {
				t.Fatalf("ticked when due:\n%+v\nticked every tick:\n%+v", due, every)
			}
			if float64(rd) > c.most*float64(ticks) {
				t.Errorf("%d Readys ticked when due, %d every tick: too few ticks skipped", rd, ticks)
			}
			t.Logf("%d state changes, %d Readys when due, %d every tick", every.changes, rd, ticks)
		})
	}
}
