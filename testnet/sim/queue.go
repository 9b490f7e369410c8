package sim

import (
	"container/heap"
	"time"
)

// evKind is the kind of a queued event.
type evKind uint8

const (
	evDeliver     evKind = iota + 1 // a message arrives at node (from sender from)
	evUnreachable                   // a failed send is reported back to node
	evAction                        // a scheduled callback (fault injection)
)

// event is one entry of the queue. It is small and holds no pointers: the
// message and the action live in slabs of the Sim, indexed by ref.
type event struct {
	at   time.Duration
	seq  uint64 // ties at the same instant run in scheduling order
	node int32  // the node that handles the event
	from int32  // evDeliver: the sender
	inc  uint32 // node's incarnation when scheduled; a mismatch makes it stale
	finc uint32 // evDeliver: the sender's incarnation when it sent
	ref  int32  // evDeliver, evUnreachable: message slot; evAction: action slot
	kind evKind
}

// queue is a binary min-heap of events ordered by (at, seq). It implements
// heap.Interface, but push and pop bypass heap.Push and heap.Pop's boxing of
// values in interfaces, so the hot path does not allocate.
type queue struct {
	items []event
}

var _ heap.Interface = (*queue)(nil)

// Len, Less and Swap implement heap.Interface.
func (q *queue) Len() int { return len(q.items) }

func (q *queue) Less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *queue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }

// Push is part of heap.Interface; use push.
func (q *queue) Push(x any) { q.items = append(q.items, x.(event)) }

// Pop is part of heap.Interface: it drops the last item (heap.Pop has already
// moved the minimum there) and returns nil, so nothing is boxed.
func (q *queue) Pop() any {
	q.items = q.items[:len(q.items)-1]
	return nil
}

// push adds e.
func (q *queue) push(e event) {
	q.items = append(q.items, e)
	heap.Fix(q, len(q.items)-1)
}

// pop removes and returns the earliest event. The queue must not be empty.
func (q *queue) pop() event {
	e := q.items[0]
	heap.Pop(q)
	return e
}

// peek returns the earliest event without removing it.
func (q *queue) peek() *event { return &q.items[0] }
