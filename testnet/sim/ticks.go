package sim

import (
	"cmp"
	"slices"
	"time"
)

// tickWheel schedules the periodic ticks of all nodes outside the event
// heap. Every node ticks with the same interval I, and all pending next-tick
// times lie within [t, t+I) of the earliest one t, so a ring of (time, node)
// sorted by time stays sorted when its head ticks and moves to the back with
// time+I. Taking a tick then costs O(1), and the heap holds only messages and
// actions. Crash and Restart add or remove a slot in O(n).
//
// Ties between a tick and a queued event at the same instant go to the queued
// event; ties between ticks go to the earlier-added slot.
type tickWheel struct {
	interval time.Duration
	slots    []tickSlot // a ring, sorted by at from head
	head     int
}

type tickSlot struct {
	at   time.Duration
	node int32
}

// next returns the time of the next tick, false if no node ticks.
func (w *tickWheel) next() (time.Duration, bool) {
	if len(w.slots) == 0 {
		return 0, false
	}
	return w.slots[w.head].at, true
}

// advance takes the next tick, schedules that node's following one, and
// returns the node.
func (w *tickWheel) advance() int {
	s := &w.slots[w.head]
	s.at += w.interval
	if w.head++; w.head == len(w.slots) {
		w.head = 0
	}
	return int(s.node)
}

// linearize rotates the ring in place so that its head is at index 0.
func (w *tickWheel) linearize() {
	if h := w.head; h != 0 {
		slices.Reverse(w.slots[:h])
		slices.Reverse(w.slots[h:])
		slices.Reverse(w.slots)
		w.head = 0
	}
}

// init replaces the slots: node i ticks first at first[i].
func (w *tickWheel) init(first []time.Duration) {
	w.slots = make([]tickSlot, len(first))
	for i, t := range first {
		w.slots[i] = tickSlot{at: t, node: int32(i)}
	}
	slices.SortFunc(w.slots, func(a, b tickSlot) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return int(a.node - b.node)
	})
	w.head = 0
}

// add makes node tick at time first and every interval after. first must lie
// in [now, now+interval) where now is not before any tick already taken.
func (w *tickWheel) add(node int, first time.Duration) {
	w.linearize()
	k, _ := slices.BinarySearchFunc(w.slots, first, func(s tickSlot, t time.Duration) int {
		if s.at <= t { // after equal times
			return -1
		}
		return 1
	})
	w.slots = slices.Insert(w.slots, k, tickSlot{at: first, node: int32(node)})
}

// remove stops node's ticks.
func (w *tickWheel) remove(node int) {
	w.linearize()
	w.slots = slices.DeleteFunc(w.slots, func(s tickSlot) bool { return int(s.node) == node })
}
