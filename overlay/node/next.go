package node

import (
	"math"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
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

// BackboneQuiet reports whether Step(now, b) would change nothing but the
// backbone table the machine holds and the time of its settled
// evaluation, whenever it comes before the machine's next input or Tick:
// the other claimers of its cluster are those of the table it holds (no
// kick, and Registrar stays), and nothing else reads the summaries
// before an input or a Tick does (no identities per address: admit reads
// them; an evaluation reads them only in a Tick or a Step). A driver of
// many machines may then give b later, just before the machine's next
// input or Tick, at the time it was heard (and make up the ticks skipped
// before and after it with Skip): the machine decides exactly as if it
// had been given b then. Until it does, next is when NextTick would be
// due for the settled evaluation the Step makes due (zero for none: one
// was due already, or a lookup is under way). The live driver gives
// every backbone at once and does not use it.
func (m *Machine) BackboneQuiet(now time.Time, b Backbone) (next time.Time, ok bool) {
	if m.geometric || !m.begun || m.cfg.MaxPerAddr > 0 || m.kick || m.moved {
		return time.Time{}, false
	}
	if !sameOthers(m.claimersOf(m.state.K, m.state.ClusterKey), tableOf(b).claimers(m.state.K, m.state.ClusterKey), m.cfg.Self) {
		return time.Time{}, false
	}
	if m.settleAt.IsZero() && !m.inflight {
		next = now.Add(m.settlePeriod())
	}
	return next, true
}

// sameOthers reports whether a and b list the same peers but self, in
// the same order (slices.Equal of what claimers makes of each).
func sameOthers(a, b []peer.ID, self peer.ID) bool {
	i, j := 0, 0
	for {
		for i < len(a) && a[i] == self {
			i++
		}
		for j < len(b) && b[j] == self {
			j++
		}
		if i == len(a) || j == len(b) {
			return i == len(a) && j == len(b)
		}
		if a[i] != b[j] {
			return false
		}
		i, j = i+1, j+1
	}
}

// RegistrarAt is what Registrar says at now, no earlier than the
// machine's last input or Tick, if no input comes before: the hint it
// follows and a claimer it found idle are followed for a membership TTL
// each, so it changes with time alone.
func (m *Machine) RegistrarAt(now time.Time) peer.ID {
	was := m.now
	m.now = now
	r := m.Registrar()
	m.now = was
	return r
}

// Quiet reports whether Ready would ask nothing of the driver: no state
// change, message, lookup, dial, refresh, announcement, note or election
// event to carry out (with the DHT strategy). A driver of many machines
// may then leave Ready uncalled: what a later Ready returns is the same.
func (m *Machine) Quiet() bool {
	if m.changed || m.readyMembers == nil || m.geo != nil || len(m.lookupReqs) > 0 || len(m.connect) > 0 || m.announce != nil ||
		len(m.notes) > 0 || m.links.dial || m.links.refresh != RefreshNone {
		return false
	}
	e := m.el
	return e == nil || len(e.out) == 0 && len(e.events) == 0 && !e.hardOut && !e.outOut && len(e.flooders) == 0
}
