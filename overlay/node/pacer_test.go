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
	p.dialled(1)
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
		p.dialled(1)
		step(base, false, true, false)
	}
	// A node with no overlay peer dials at every retry, whatever the wait;
	// connected to a bootstrap peer, too (the dial refreshes its table).
	step(base, true, false, true)
	p.dialled(0)
	step(base, true, true, true)
	// A failed dial: the node is cut off, and dials at every retry again.
	step(base, false, false, true)
	p.dialled(0)
	step(base, false, false, true)
	p.dialled(1)
	step(base, false, true, false)
	step(base, false, false, false) // trimmed once more: it waits again
	step(base, false, false, true)
	p.dialled(1)
	// Attached to a superpeer: no dial however long it waits, but alone.
	attached = true
	step(base, false, true, false)
	for range 2 * most / base {
		step(base, false, false, false)
	}
	step(base, true, false, true)
	p.dialled(0)
	// Its superpeer gone, it dials: the wait is long over.
	attached = false
	step(base, false, false, true)
	p.dialled(1)
	// Its own outage is no trim: back from it, the wait stays.
	wait := p.wait
	step(base, false, true, false)
	step(base, true, false, true)
	p.dialled(1)
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
	p.dialled(1)
	if want := min(max(2*before, base), most); p.wait != want {
		t.Fatalf("wait %v after a trim, want %v", p.wait, want)
	}
	for range most/base + 1 {
		step(base, false, true, false)
	}
	step(base, false, false, true)
}
