package nodesim

import (
	"fmt"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// ---- the event queue ----

// queue holds the events by (time, sequence, pri): a calendar of buckets
// of about a millisecond of virtual time each. The events of the bucket
// under way wait in a small heap (h); those of the next second in a ring
// of buckets, unordered, each made a heap when its time comes; later ones
// in a heap of their own (far). At 100,000 nodes a single heap of every
// event had a cache miss at each of its lower levels at every pop (7 % of
// the run); the bucket under way, some hundreds of events, stays in the
// cache. The order is the same as one heap's: every event of a bucket is
// before every event of a later one.
//
// An entry carries the event's small part (qEvent: what every kind uses),
// so that a pop reads no slab; an election message, a lookup's key, an
// action and a registration's answer, which only their kinds carry, wait
// in slabs of their own (an event is some 330 bytes, most of it empty: a
// tick, a third of the events, read six cache lines of it).
type queue struct {
	h      []qEntry   // the bucket under way (cur), and any event pushed for one before it: a heap
	cur    int64      // the bucket under way: h holds every event before its end
	ring   [][]qEntry // ring[b&ringMask]: the events of bucket b, for cur < b < cur+ringLen
	inRing int        // how many events the ring holds
	far    []qEntry   // the events of buckets from cur+ringLen on, when pushed: a heap
	msgs   slab[classic.Message]
	keys   slab[dhtselect.Key]
	fns    slab[func(*Sim)]
	regs   slab[regAnswer]
}

// A bucket is 2^bucketShift ns of virtual time (about a millisecond),
// and the ring holds ringLen of them (about a second).
const (
	bucketShift = 20
	ringLen     = 1 << 10
	ringMask    = ringLen - 1
)

func bucketOf(at time.Duration) int64 { return int64(at) >> bucketShift }

// qEvent is an event in the queue but for its time and sequence (in its
// qEntry) and its payload (in the slab of its kind, at pay).
type qEvent struct {
	gen                    uint64
	stamp                  time.Duration
	node, inc, other, comp int32
	pay                    int32
	kind                   evKind
	// pri orders the events of one node at one tick (the same time and
	// seq): the backbone's flip, then its first hearing, then the tick,
	// whatever the order of their pushes (a tick not due is not made:
	// idleTick).
	pri uint8
}

// regAnswer is an evRegistered's payload.
type regAnswer struct {
	ids    []int
	digest node.Digest
}

// slab holds values by index, reusing the freed places.
type slab[T any] struct {
	v    []T
	free []int32
}

func (s *slab[T]) put(x T) int32 {
	if f := len(s.free); f > 0 {
		k := s.free[f-1]
		s.free = s.free[:f-1]
		s.v[k] = x
		return k
	}
	s.v = append(s.v, x)
	return int32(len(s.v) - 1)
}

// take returns the value at k and frees its place (letting what it
// refers to go).
func (s *slab[T]) take(k int32) T {
	x := s.v[k]
	var zero T
	s.v[k] = zero
	s.free = append(s.free, k)
	return x
}

// heapArity is the heaps': a 4-ary heap is half as deep as a binary one,
// and a node's children share a cache line or two. The order is the
// same: (time, sequence) is unique but for the events of one node at one
// tick (its tick, stale ones, the backbone's flip), whose order does not
// matter (TestFastDecidesAsPlain) but for pri's.
const heapArity = 4

type qEntry struct {
	at  time.Duration
	seq uint64
	ev  qEvent
}

func (a *qEntry) before(b *qEntry) bool {
	return a.at < b.at || a.at == b.at && (a.seq < b.seq || a.seq == b.seq && a.ev.pri < b.ev.pri)
}

// priOf is an event's pri: see qEvent.
func priOf(k evKind) uint8 {
	switch k {
	case evBackbone:
		return 0
	case evHearing:
		return 1
	}
	return 2
}

// small32 is x as an int32, which holds every node index, incarnation
// and side.
func small32(x int) int32 {
	if int(int32(x)) != x {
		panic(fmt.Sprintf("nodesim: %d does not fit an event", x))
	}
	return int32(x)
}

// len is the number of events queued.
func (q *queue) len() int { return len(q.h) + q.inRing + len(q.far) }

func (q *queue) push(e event) {
	x := qEntry{at: e.at, seq: e.seq, ev: qEvent{gen: e.gen, stamp: e.stamp, node: small32(e.node), inc: small32(e.inc),
		other: small32(e.other), comp: small32(e.comp), kind: e.kind, pri: priOf(e.kind)}}
	switch e.kind {
	case evDeliver:
		x.ev.pay = q.msgs.put(e.msg)
	case evLookup:
		x.ev.pay = q.keys.put(e.key)
	case evAction:
		x.ev.pay = q.fns.put(e.fn)
	case evRegistered:
		x.ev.pay = q.regs.put(regAnswer{ids: e.ids, digest: e.digest})
	}
	switch b := bucketOf(e.at); {
	case b <= q.cur:
		q.h = heapPush(q.h, x)
	case b < q.cur+ringLen:
		if q.ring == nil {
			q.ring = make([][]qEntry, ringLen)
		}
		r := &q.ring[b&ringMask]
		*r = append(*r, x)
		q.inRing++
	default:
		q.far = heapPush(q.far, x)
	}
}

// first makes h's top the first event, and reports whether there is one.
func (q *queue) first() bool {
	for len(q.h) == 0 {
		if q.inRing == 0 && len(q.far) == 0 {
			return false
		}
		// The next bucket with events: in the ring (every event of
		// which is of a bucket after cur and before cur+ringLen), or
		// far's first if that is sooner.
		var b int64
		if q.inRing == 0 {
			b = bucketOf(q.far[0].at)
		} else {
			b = q.cur + 1
			for len(q.ring[b&ringMask]) == 0 {
				b++
			}
			if len(q.far) > 0 {
				b = min(b, bucketOf(q.far[0].at))
			}
		}
		q.cur = b
		if q.inRing > 0 {
			r := &q.ring[b&ringMask]
			q.h = append(q.h, *r...)
			q.inRing -= len(*r)
			*r = (*r)[:0]
		}
		for len(q.far) > 0 && bucketOf(q.far[0].at) == b {
			var x qEntry
			q.far, x = heapPop(q.far)
			q.h = append(q.h, x)
		}
		for k := (len(q.h) - 2) / heapArity; k >= 0; k-- {
			siftDown(q.h, k)
		}
	}
	return true
}

// peek is the first event's time (the queue is not empty: first).
func (q *queue) peek() time.Duration { return q.h[0].at }

// pop takes the first event out (the queue is not empty).
func (q *queue) pop() event {
	q.first()
	var x qEntry
	q.h, x = heapPop(q.h)
	qe := &x.ev
	e := event{at: x.at, seq: x.seq, kind: qe.kind, node: int(qe.node), inc: int(qe.inc), other: int(qe.other), gen: qe.gen, stamp: qe.stamp, comp: int(qe.comp)}
	switch qe.kind {
	case evDeliver:
		e.msg = q.msgs.take(qe.pay)
	case evLookup:
		e.key = q.keys.take(qe.pay)
	case evAction:
		e.fn = q.fns.take(qe.pay)
	case evRegistered:
		r := q.regs.take(qe.pay)
		e.ids, e.digest = r.ids, r.digest
	}
	return e
}

func heapPush(h []qEntry, x qEntry) []qEntry {
	h = append(h, x)
	k := len(h) - 1
	for k > 0 {
		p := (k - 1) / heapArity
		if !x.before(&h[p]) {
			break
		}
		h[k] = h[p]
		k = p
	}
	h[k] = x
	return h
}

// heapPop takes h's first entry out (h is not empty).
func heapPop(h []qEntry) ([]qEntry, qEntry) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	if n > 1 {
		siftDown(h, 0)
	}
	return h, top
}

// siftDown moves h[k] down to its place below.
func siftDown(h []qEntry, k int) {
	n := len(h)
	x := h[k]
	for {
		c := heapArity*k + 1
		if c >= n {
			break
		}
		for d, end := c+1, min(c+heapArity, n); d < end; d++ {
			if h[d].before(&h[c]) {
				c = d
			}
		}
		if !h[c].before(&x) {
			break
		}
		h[k] = h[c]
		k = c
	}
	h[k] = x
}
