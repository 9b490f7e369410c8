package node

import (
	"testing"
	"time"
)

// redialPacer: a superpeer trimmed by its bootstrap peer, again and
// again, waits twice as long each time before it dials (from no wait up
// to the most); a failed dial, or a node with no overlay peer at all,
// dials at every retry; an ordinary peer attached to its superpeer does
// not dial unless it is alone; its own outage does not lengthen the
// wait, and a connection that lasts the most ends it.
func TestRedialPacer(t *testing.T) {
	const base, most = 5 * time.Second, 40 * time.Second
	p := redialPacer{base: base, most: most}
	at := time.Unix(0, 0)
	attached := false
	step := func(d time.Duration, alone, connected, want bool) {
		t.Helper()
		at = at.Add(d)
		if got := p.due(at, alone, attached, connected); got != want {
			t.Fatalf("at %v (alone %v, connected %v): due %v, want %v (wait %v)", at.Sub(time.Unix(0, 0)), alone, connected, got, want, p.wait)
		}
	}
	// The first dial: at once. Connected: none.
	step(0, false, false, true)
	p.dialled(at, 1)
	step(base, false, true, false)
	// Each loss: the wait from it doubles, from none at the first.
	for _, wait := range []time.Duration{0, base, 2 * base, 4 * base, 8 * base, most, most} {
		step(base, false, false, wait == 0) // the loss is seen
		for w := base; w < wait; w += base {
			step(base, false, false, false)
		}
		if wait > 0 {
			step(base, false, false, true)
		}
		p.dialled(at, 1)
		step(base, false, true, false)
	}
	// A node with no overlay peer dials at every retry, whatever the wait;
	// connected to a bootstrap peer, too (the dial refreshes its table).
	step(base, true, false, true)
	p.dialled(at, 0)
	step(base, true, true, true)
	// A failed dial: the node is cut off, and dials at every retry again.
	step(base, false, false, true)
	p.dialled(at, 0)
	step(base, false, false, true)
	p.dialled(at, 1)
	step(base, false, true, false)
	step(base, false, false, false) // trimmed once more: it waits again
	step(base, false, false, true)
	p.dialled(at, 1)
	// Attached to a superpeer: no dial however long it waits, but alone.
	attached = true
	step(base, false, true, false)
	for range 2 * most / base {
		step(base, false, false, false)
	}
	step(base, true, false, true)
	p.dialled(at, 0)
	// Its superpeer gone, it dials: the wait is long over.
	attached = false
	step(base, false, false, true)
	p.dialled(at, 1)
	// Its own outage is no trim: back from it, the wait stays.
	wait := p.wait
	step(base, false, true, false)
	step(base, true, false, true)
	p.dialled(at, 1)
	if p.wait != wait {
		t.Errorf("wait %v after an outage, want %v as before it", p.wait, wait)
	}
	// A trim makes it wait again; a connection that lasts the most ends
	// the wait.
	before := p.wait
	step(base, false, true, false)
	step(base, false, false, before == 0) // trimmed
	for w := base; w < before; w += base {
		step(base, false, false, false)
	}
	if before > 0 {
		step(base, false, false, true)
	}
	p.dialled(at, 1)
	if want := min(max(2*before, base), most); p.wait != want {
		t.Fatalf("wait %v after a trim, want %v", p.wait, want)
	}
	for range most/base + 1 {
		step(base, false, true, false)
	}
	step(base, false, false, true)
}

// TestRedialPacerDeadBootstrap: a node with peers whose dials all fail
// (its bootstrap peer died, or it is cut off) dials at every retry for
// failGrace, then twice as long apart each time, up to maxFailWait; a
// dial that gets through starts over. A node alone dials at every retry
// all the same.
func TestRedialPacerDeadBootstrap(t *testing.T) {
	const base = 5 * time.Second
	p := redialPacer{base: base, most: maxRedialWait}
	t0 := time.Unix(0, 0)
	dials := func(from time.Time, d time.Duration, alone bool, reached int) []time.Duration {
		var at []time.Duration
		for now := from; now.Sub(from) < d; now = now.Add(base) {
			if p.due(now, alone, false, false) {
				at = append(at, now.Sub(from))
				p.dialled(now, reached)
			}
		}
		return at
	}
	at := dials(t0, 10*time.Minute, false, 0)
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i]-at[i-1])
	}
	wait := time.Duration(0) // after failGrace: base, then doubling
	for i, g := range gaps {
		want := base
		if at[i] >= failGrace {
			wait = min(max(2*wait, base), maxFailWait)
			want = wait
		}
		if g != want {
			t.Fatalf("failed dials at %v: gap %d is %v, want %v", at, i, g, want)
		}
	}
	if n := len(at); n > 30 {
		t.Fatalf("%d failed dials in 10 minutes, want at most 30 (one every retry would be 120)", n)
	}
	// Through at last: the next streak of failures starts at every retry.
	p.dialled(t0.Add(11*time.Minute), 1)
	p.due(t0.Add(11*time.Minute), false, false, false) // lost again
	if at := dials(t0.Add(11*time.Minute), 30*time.Second, false, 0); len(at) != 6 {
		t.Fatalf("a new streak: dials at %v, want one every retry", at)
	}
	// Alone: every retry, however long it failed.
	if at := dials(t0.Add(20*time.Minute), 5*time.Minute, true, 0); len(at) != 60 {
		t.Fatalf("alone: %d dials in 5 minutes, want 60", len(at))
	}
}
