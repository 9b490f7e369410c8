package sim_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/latency"
	"github.com/superpeer/superpeer/testnet/sim"
)

// partitionRun runs bully on five nodes n0..n4 (RTT 20 ms, ticks of 10 ms,
// timeout 10 ticks), with or without terms and majority: n4 is elected, at
// 1 s the network splits into {n0, n1, n2} and {n3, n4}, at 3 s it heals,
// and the run ends at 5 s.
func partitionRun(t *testing.T, quorum bool) *sim.Record {
	t.Helper()
	ids := make([]classic.ID, 5)
	for i := range ids {
		ids[i] = classic.ID(fmt.Sprintf("n%d", i))
	}
	factory := func(i int, id classic.ID, _ bool) classic.Machine {
		cfg := classic.Config{ID: id, Peers: ids, TimeoutTicks: 10}
		b, err := classic.NewBully(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !quorum {
			return b
		}
		q, err := classic.NewQuorum(cfg, b, classic.HardState{})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	s, err := sim.New(sim.Config{IDs: ids, Factory: factory, Seed: 1, Latency: latency.Constant(5, 20*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	s.Campaign(0)
	s.At(time.Second, func(s *sim.Sim) { s.Partition([]int{0, 1, 2}, []int{3, 4}) })
	s.At(3*time.Second, func(s *sim.Sim) { s.Heal() })
	s.Run(5 * time.Second)
	return s.Record()
}

// TestTextbookSplitBrainDetected: plain bully elects n2 on the majority side
// while n4 still leads its own: the checker reports one split-brain interval
// with both leaders, lasting from n2's election until shortly after the heal.
func TestTextbookSplitBrainDetected(t *testing.T) {
	rec := partitionRun(t, false)
	sb, err := rec.SplitBrain()
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Intervals) != 1 {
		t.Fatalf("split-brain intervals %+v, want one", sb.Intervals)
	}
	iv := sb.Intervals[0]
	t.Logf("split brain: %v from %v to %v, leaders %v", sb.Total, iv.From, iv.To, iv.Leaders)
	if !slices.Equal(iv.Leaders, []classic.ID{"n2", "n4"}) {
		t.Errorf("leaders %v, want n2 and n4", iv.Leaders)
	}
	// n2 is elected a timeout or two after the split; the heal ends it
	// within a heartbeat and a round trip.
	if iv.From <= time.Second || iv.From > 1500*time.Millisecond || iv.To < 3*time.Second || iv.To > 3200*time.Millisecond {
		t.Errorf("interval [%v, %v), want from just after 1 s to just after 3 s", iv.From, iv.To)
	}
	if leader, err := rec.FinalLeader("n4", nil); err != nil {
		t.Errorf("after the heal: %q, %v", leader, err)
	}
}

// TestQuorumPreventsSplitBrain: the same run with terms and majority. n4
// loses its lease within 120 ms of the split, n2 leads the majority side in
// a higher term, the minority side never has a leader after that, no two
// leaders ever overlap, and n4 leads again after the heal in a higher term
// still. (n4 raises its term once a lease on the minority side, where its
// claims fail: about 20 terms in the 2 s of the split.)
func TestQuorumPreventsSplitBrain(t *testing.T) {
	rec := partitionRun(t, true)
	sb, err := rec.SplitBrain()
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Intervals) != 0 || len(sb.SameTerm) != 0 {
		t.Fatalf("split brain with quorum: %+v", sb)
	}
	lease := (10 + classic.PromiseMargin) * sim.DefaultTickInterval
	for i, name := range []string{"n0", "n1", "n2", "n3", "n4"} {
		spans, err := rec.Leading(i)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range spans {
			t.Logf("%s leads term %d during [%v, %v)", name, sp.Term, sp.From, sp.To)
			if i >= 3 && sp.To > time.Second+lease && sp.From < 3*time.Second {
				t.Errorf("%s leads on the minority side during [%v, %v)", name, sp.From, sp.To)
			}
		}
	}
	if leader, err := rec.FinalLeader("n4", nil); err != nil {
		t.Errorf("after the heal: %q, %v", leader, err)
	}
	n2, err := rec.Leading(2)
	if err != nil || len(n2) == 0 || n2[0].From > 1500*time.Millisecond {
		t.Fatalf("n2 leads %+v (%v), want a term starting within 0.5 s of the split", n2, err)
	}
	n4, err := rec.Leading(4)
	if err != nil {
		t.Fatal(err)
	}
	if len(n4) < 2 || n4[len(n4)-1].Term <= n2[0].Term {
		t.Errorf("n4 leads %+v, want a term above n2's after the heal", n4)
	}
}
