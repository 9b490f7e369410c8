package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/latency"
)

type tick struct {
	at   time.Duration
	node int
}

func take(w *tickWheel, k int) []tick {
	var out []tick
	for range k {
		at, _ := w.next()
		out = append(out, tick{at, w.advance()})
	}
	return out
}

func TestTickWheel(t *testing.T) {
	w := tickWheel{interval: 10}
	w.init([]time.Duration{7, 2, 7, 0})
	got := take(&w, 6)
	want := []tick{{0, 3}, {2, 1}, {7, 0}, {7, 2}, {10, 3}, {12, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("ticks %v, want %v", got, want)
	}
	// Now is 12. Node 4 joins with its first tick at 13, node 5 at 21 (just
	// before node 1's tick at 22), and node 2 leaves.
	w.add(4, 13)
	w.add(5, 21)
	w.remove(2)
	got = take(&w, 8)
	want = []tick{{13, 4}, {17, 0}, {20, 3}, {21, 5}, {22, 1}, {23, 4}, {27, 0}, {30, 3}}
	if !slices.Equal(got, want) {
		t.Errorf("after add and remove: ticks %v, want %v", got, want)
	}
	// A tick added at the current instant, at the same time as a pending
	// one, goes after it.
	w.add(6, 31)
	got = take(&w, 3)
	want = []tick{{31, 5}, {31, 6}, {32, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("tie: ticks %v, want %v", got, want)
	}
	for _, n := range []int{0, 1, 3, 4, 5, 6} {
		w.remove(n)
	}
	if _, ok := w.next(); ok {
		t.Error("an empty wheel has a next tick")
	}
	w.add(9, 40)
	if got := take(&w, 2); !slices.Equal(got, []tick{{40, 9}, {50, 9}}) {
		t.Errorf("restarted wheel: %v", got)
	}
}

// TestTickPhasesAndInterval: every node ticks once per interval, from a
// phase drawn from the seed.
func TestTickPhasesAndInterval(t *testing.T) {
	s, ps := probes(t, Config{IDs: ids(50), TickInterval: 10 * ms, Seed: 5})
	last := make([]time.Duration, 50)
	for i := range last {
		last[i] = -1
	}
	phases := map[time.Duration]bool{}
	for s.Now() < time.Second {
		ev, _ := s.Step()
		if ev.Kind != Ticked {
			t.Fatalf("unexpected %v", ev.Kind)
		}
		if last[ev.Node] < 0 {
			phases[ev.At] = true
			if ev.At >= 10*ms {
				t.Errorf("node %d first ticks at %v, want within the first interval", ev.Node, ev.At)
			}
		} else if d := ev.At - last[ev.Node]; d != 10*ms {
			t.Errorf("node %d ticked %v after its previous tick", ev.Node, d)
		}
		last[ev.Node] = ev.At
	}
	if len(phases) < 45 {
		t.Errorf("only %d distinct phases among 50 nodes", len(phases))
	}
	for i, p := range ps {
		if p.ticks < 99 || p.ticks > 101 {
			t.Errorf("node %d ticked %d times in 1s", i, p.ticks)
		}
	}
}

// BenchmarkMessage measures the simulator's cost per message: send, queue,
// deliver to a passive machine.
func BenchmarkMessage(b *testing.B) {
	var ps []*probe
	s, err := New(Config{IDs: ids(100), TickInterval: -1, Latency: latency.Constant(100, 50*ms), Jitter: 10 * ms,
		Factory: func(i int, id classic.ID, _ bool) classic.Machine {
			p := &probe{id: id}
			ps = append(ps, p)
			return p
		}})
	if err != nil {
		b.Fatal(err)
	}
	m := classic.Message{Type: classic.MsgHeartbeat}
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		// Keep about 10,000 messages in flight.
		m.To = s.ID(k % 100)
		s.Send((k*7)%100, m)
		if k++; k%10000 == 0 {
			s.RunFor(30 * ms)
			for _, p := range ps {
				p.got = p.got[:0]
			}
		}
	}
}
