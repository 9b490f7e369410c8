package classic

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestIdleSkipEqualsTicks: for every algorithm that implements Idler, a
// cluster whose every process has a twin, ticked only when the twin
// needs it. Each round the processes tick and the messages of the round
// before are delivered (1 to 41 % lost); processes crash and come back
// campaigning, and campaign at random. A twin gets the same inputs, but
// its ticks are made up with one Skip when an input comes, when its own
// process's tick did something (sent a message or changed its State),
// and at random. Then it must equal its process (reflect.DeepEqual, the
// counters included) and have sent the same messages; and the tick that
// did something must be one that Idle did not count idle. The twins
// skip most ticks (checked), so the test would fail on an Idle that
// counts a heartbeat, a timeout or a bully prod as idle, or on a Skip
// whose counters differ from the ticks'. With passive, every process but
// the highest starts passive (Passive), and processes are made passive or
// active at random.
func TestIdleSkipEqualsTicks(t *testing.T) {
	mk := map[string]func(id ID, ids []ID) Machine{}
	for _, name := range Algorithms() {
		probe, err := New(name, tnCfg("0", tnIDs(3)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := probe.(Idler); !ok {
			continue
		}
		mk[name] = func(id ID, ids []ID) Machine {
			m, err := New(name, tnCfg(id, ids), Options{})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	for _, name := range []string{"bully", "ring", "ring-max", "next-in-line", "stable"} {
		if mk[name] == nil {
			t.Fatalf("%s does not implement Idler", name)
		}
	}
	for name, f := range mk {
		for _, passive := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/passive=%v", name, passive), func(t *testing.T) {
				var skipped, ticks, acted int
				for seed := range uint64(20) {
					s, k, a := idleTwins(t, seed, f, passive)
					skipped, ticks, acted = skipped+s, ticks+k, acted+a
				}
				// Heartbeats every 2 ticks of 10: most ticks of a follower are idle.
				if skipped < ticks/2 || acted == 0 {
					t.Fatalf("%d ticks jumped of %d, %d acted: the twins did not skip", skipped, ticks, acted)
				}
			})
		}
	}
}

// idleTwins runs one seeded cluster (see TestIdleSkipEqualsTicks) and
// returns the ticks the twins made up at once (within Idle), all the
// ticks, and those that acted.
func idleTwins(t *testing.T, seed uint64, mk func(id ID, ids []ID) Machine, passive bool) (skipped, ticks, acted int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 42))
	ids := tnIDs(5)
	type proc struct {
		ref, twin Machine
		pending   int // ticks the twin has not had
		idle      int // the twin's Idle when it last caught up
		sent      []Message
		lastState State
		down      bool
	}
	ps := map[ID]*proc{}
	fresh := func(id ID) *proc {
		p := &proc{ref: mk(id, ids), twin: mk(id, ids)}
		if passive && id != ids[len(ids)-1] {
			p.ref.(Passive).SetPassive(true)
			p.twin.(Passive).SetPassive(true)
		}
		p.idle = p.twin.(Idler).Idle()
		return p
	}
	for _, id := range ids {
		ps[id] = fresh(id)
	}
	catchUp := func(id ID, round int) {
		p := ps[id]
		tw := p.twin.(Idler)
		skipped += min(p.pending, tw.Idle())
		tw.Skip(p.pending)
		p.pending = 0
		got := p.twin.Ready()
		if !slices.EqualFunc(got.Messages, p.sent, func(a, b Message) bool { return reflect.DeepEqual(a, b) }) || got.State != p.lastState {
			t.Fatalf("seed %d round %d %s: the twin sent %v (state %+v), its process %v (state %+v)", seed, round, id, got.Messages, got.State, p.sent, p.lastState)
		}
		p.sent = nil
		if !reflect.DeepEqual(p.ref, p.twin) {
			t.Fatalf("seed %d round %d %s: the twin differs from its process:\n%s", seed, round, id, diffMachines(p.ref, p.twin))
		}
		p.idle = tw.Idle()
	}
	// input gives both a process and its twin (caught up first) the same input.
	input := func(id ID, round int, f func(Machine)) {
		p := ps[id]
		catchUp(id, round)
		f(p.ref)
		f(p.twin)
		rd := p.ref.Ready()
		p.sent, p.lastState = append(p.sent, rd.Messages...), rd.State
		catchUp(id, round)
	}
	loss := 1 + int(seed%5)*10 // percent: long silences make bully's prods
	var inflight []Message
	for round := range 300 {
		// Faults: a crash, a restart (campaigning), a campaign.
		if id := ids[rng.IntN(len(ids))]; rng.IntN(40) == 0 {
			ps[id].down = !ps[id].down
			if !ps[id].down {
				ps[id] = fresh(id)
				input(id, round, Machine.Campaign)
			}
		}
		if id := ids[rng.IntN(len(ids))]; rng.IntN(30) == 0 && !ps[id].down {
			input(id, round, Machine.Campaign)
		}
		if id := ids[rng.IntN(len(ids))]; passive && rng.IntN(20) == 0 && !ps[id].down {
			on := rng.IntN(2) == 0
			input(id, round, func(m Machine) { m.(Passive).SetPassive(on) })
		}
		// The messages of the round before.
		msgs := inflight
		inflight = nil
		for _, m := range msgs {
			if ps[m.To].down || rng.IntN(100) < loss {
				continue
			}
			input(m.To, round, func(x Machine) { x.Step(m) })
		}
		// The tick.
		for _, id := range ids {
			p := ps[id]
			if p.down {
				continue
			}
			p.ref.Tick()
			ticks++
			p.pending++
			rd := p.ref.Ready()
			did := len(rd.Messages) > 0 || rd.State != p.lastState
			p.sent, p.lastState = append(p.sent, rd.Messages...), rd.State
			if did {
				acted++
				if p.pending <= p.idle {
					t.Fatalf("seed %d round %d %s: tick %d after catching up acted (%v, state %+v), but Idle was %d", seed, round, id, p.pending, rd.Messages, rd.State, p.idle)
				}
			}
			if did || rng.IntN(8) == 0 {
				catchUp(id, round)
			}
			inflight = append(inflight, rd.Messages...)
		}
	}
	return skipped, ticks, acted
}

// diffMachines prints two machines for a failure message.
func diffMachines(a, b Machine) string { return fmt.Sprintf("process %+v\ntwin    %+v", a, b) }
