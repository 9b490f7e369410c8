package node

import (
	"math"
	"time"
)

// A driver of many machines (the node simulator) need not tick each every
// ElectionTick: most ticks of most machines only count (a follower towards
// its timeout, a leader towards its next heartbeat). NextTick says when
// the machine next needs a Tick if no input comes; the driver ticks it
// then, at the first of its ticks at or after that time, and before each
// Step or Tick makes up the ticks it skipped with Skip. The machine then
// decides exactly as if it had been ticked every tick.
//
// The driver's ticks must be ElectionTick apart from the machine's first
// Tick on (the grid the election counts in; the simulator's ticks are),
// and it asks NextTick again after every Step and Tick, since an input
// can bring the next tick forward. The live driver ticks every
// ElectionTick and uses neither.

// never is NextTick's answer when no tick is needed.
var never = time.Unix(math.MaxInt64/2, 0)

// NextTick is the earliest time at which a Tick does more than count:
// the election's next tick that acts (classic.Idler; every tick with an
// algorithm that is not one, and with the geometric strategy), the
// next evaluation (Due), and the next Links (LinksDue). The zero time
// means the next tick.
func (m *Machine) NextTick() time.Time {
	if m.geo != nil {
		return time.Time{}
	}
	next := m.linksNext()
	if next.IsZero() {
		return next
	}
	if e := m.el; e != nil {
		if e.nextTick.IsZero() {
			return time.Time{} // not ticked yet
		}
		if n := e.idle(); n < math.MaxInt {
			next = earliest(next, e.nextTick.Add(time.Duration(n)*e.period))
		}
	}
	if !m.inflight {
		next = earliest(next, m.nextEval)
		if !m.settleAt.IsZero() {
			next = earliest(next, m.settleAt)
		}
	}
	return next
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Skip stands for the n ticks the driver skipped, the last at last (each
// ElectionTick after the one before): NextTick was after them. It makes
// them exactly as n calls of Tick would have. Ticks that NextTick did not
// count idle (the driver ticked too late) are made one by one with Tick.
func (m *Machine) Skip(n int, last time.Time) {
	if n <= 0 {
		return
	}
	period := m.tick
	t := last.Add(-time.Duration(n-1) * period) // the first
	for n > 0 {
		k := n
		if e := m.el; e != nil && !e.nextTick.IsZero() {
			k = min(k, e.idle())
		}
		if !m.geometric && !m.inflight {
			at := m.nextEval
			if !m.settleAt.IsZero() {
				at = earliest(at, m.settleAt)
			}
			k = min(k, ticksBefore(t, at, period))
		}
		if k == 0 {
			m.Tick(t)
			k = 1
		} else if e := m.el; e != nil && !e.nextTick.IsZero() {
			e.skip(k, t.Add(time.Duration(k-1)*period))
		}
		t, n = t.Add(time.Duration(k)*period), n-k
	}
	if m.now.Before(last) {
		m.now = last // as Tick(last) would have set it
	}
}

// ticksBefore counts the ticks t, t+period, ... before at.
func ticksBefore(t, at time.Time, period time.Duration) int {
	if !at.After(t) {
		return 0
	}
	d := at.Sub(t)
	if d/period >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int((d + period - 1) / period)
}
