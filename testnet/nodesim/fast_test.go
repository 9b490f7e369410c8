package nodesim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
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

// TestTraceText: the text the trace hashes is what fmt's
// "%x %d %d %s %s %d %x" writes of the change (the trace as it was
// computed before traceText), for states with and without a superpeer.
func TestTraceText(t *testing.T) {
	for _, c := range []struct {
		trace uint64
		now   time.Duration
		i     int
		st    node.State
	}{
		{0, 0, 0, node.State{}},
		{0xfedcba9876543210, 1234567890123, 42, node.State{Superpeer: nodeID(7), Role: node.RoleSuperpeer, K: 9, ClusterKey: dhtselect.KeyOf(nodeID(7))}},
		{1, time.Hour, 99999, node.State{Superpeer: "12D3KooWexample", Role: node.RoleOrdinary, K: 0, ClusterKey: dhtselect.Key{0, 0x0a, 0xff, 1}}},
	} {
		want := fmt.Sprintf("%x %d %d %s %s %d %x", c.trace, c.now, c.i, c.st.Superpeer, c.st.Role, c.st.K, c.st.ClusterKey[:4])
		got := string(traceText(nil, c.trace, c.now, c.i, c.st.Superpeer.String(), c.st.Role.String(), c.st.K, c.st.ClusterKey))
		if got != want {
			t.Errorf("traceText = %q, want %q", got, want)
		}
		h := fnv.New64a()
		h.Write([]byte(want))
		s := &Sim{trace: c.trace, now: c.now, idx: &simIndex{names: make([]int, c.i+1)}}
		s.idx.names[c.i] = -1
		if got := s.traceOf(c.i, c.st); got != h.Sum64() {
			t.Errorf("traceOf = %x, want hash/fnv's %x", got, h.Sum64())
		}
	}
}

// TestQueueOrder: the queue gives its events back by time, then
// sequence, however they were pushed and popped in between: in one
// bucket of its calendar, across its ring, and past it.
func TestQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q queue
	var want []qEntry
	popped := 0
	var now time.Duration
	check := func() {
		slices.SortFunc(want, func(a, b qEntry) int {
			if a.before(&b) {
				return -1
			}
			if b.before(&a) {
				return 1
			}
			return 0
		})
		e := q.pop()
		now = e.at
		if e.at != want[0].at || e.seq != want[0].seq {
			t.Fatalf("pop %d: (%v, %d), want (%v, %d)", popped, e.at, e.seq, want[0].at, want[0].seq)
		}
		want = want[1:]
		popped++
	}
	for k := range 5000 {
		// Ties in one bucket, and times across the ring and past it.
		at := now + time.Duration(rng.IntN(300))
		switch rng.IntN(4) {
		case 0:
			at = now + time.Duration(rng.Int64N(int64(3*time.Second)))
		case 1:
			at = now + time.Duration(rng.Int64N(int64(30*time.Millisecond)))
		}
		if rng.IntN(5) == 0 {
			q.first() // as Run peeks: the calendar may move past now
		}
		e := event{at: at, seq: rng.Uint64N(1 << 40), node: k}
		q.push(e)
		want = append(want, qEntry{at: e.at, seq: e.seq})
		if rng.IntN(3) == 0 {
			check()
		}
	}
	for len(want) > 0 {
		check()
	}
	if popped != 5000 || q.len() != 0 || q.first() {
		t.Errorf("%d popped, %d left", popped, q.len())
	}
}
