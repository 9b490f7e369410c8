package classic

import (
	"maps"
	"slices"
)

// Idler is implemented by the machines that can tell how long they will
// idle: a driver of many machines (the node simulator) ticks one only
// when it needs it, and makes up the ticks in between at once. A
// follower only counts ticks towards its timeout, a leader towards its
// next heartbeat; those ticks send nothing and change no State.
//
// Of the algorithms, Bully, NextInLine, Ring (both variants) and Stable
// implement it; the others (candidate, invitation, echo, and any machine
// wrapped by Quorum) are ticked every tick.
type Idler interface {
	// Idle is how many of the next Ticks, with no input in between, send
	// no message and leave Ready's State as it is: only counters move.
	Idle() int
	// Skip is exactly n calls of Tick: the first Idle of them at once,
	// any beyond one by one.
	Skip(n int)
}

var (
	_ Idler = (*Bully)(nil)
	_ Idler = (*NextInLine)(nil)
	_ Idler = (*Ring)(nil)
	_ Idler = (*Stable)(nil)
)

// skipTicks is Skip for a machine whose idle ticks jump does at once: n
// calls of tick, those within idle() jumped over.
func skipTicks(n int, idle func() int, jump func(int), tick func()) {
	for n > 0 {
		if k := min(n, idle()); k > 0 {
			jump(k)
			n -= k
			continue
		}
		tick()
		n--
	}
}

// firstFiring is the number of idle ticks before the tick at which a
// counter at c, counting up by one a tick, reaches limit (the tick that
// acts): limit-c-1, and none when it has already.
func firstFiring(c, limit int) int { return max(limit-c-1, 0) }

// Idle implements Idler: see Tick for what each role counts.
func (b *Bully) Idle() int {
	t := b.c.cfg.TimeoutTicks
	switch {
	case b.c.role == Leader:
		return firstFiring(b.beat, b.c.cfg.HeartbeatTicks)
	case b.phase == bullyAwaitOK:
		return firstFiring(b.elapsed, t)
	case b.phase == bullyAwaitCoord:
		return firstFiring(b.elapsed, 2*t)
	case b.phase == bullyAwaitFailover:
		return firstFiring(b.elapsed, b.wait)
	}
	n := firstFiring(b.heard, t)
	if b.prodPending {
		// The k-th tick doubts the leader once heard+k reaches the
		// missed ticks and now+k is a timeout past the last prod.
		k := max(b.c.cfg.missedTicks()-b.heard, t-(b.now-b.prodded), 1)
		n = min(n, k-1)
	}
	return n
}

// Skip implements Idler.
func (b *Bully) Skip(n int) { skipTicks(n, b.Idle, b.jump, b.Tick) }

// jump makes n idle ticks (n at most Idle).
func (b *Bully) jump(n int) {
	b.now += n
	switch {
	case b.c.role == Leader:
		b.beat += n
	case b.phase != bullyIdle:
		b.elapsed += n
	default:
		b.heard += n
	}
}

// Idle implements Idler.
func (n *NextInLine) Idle() int { return n.b.Idle() }

// Skip implements Idler.
func (n *NextInLine) Skip(k int) { n.b.Skip(k) }

// Idle implements Idler: see Tick.
func (r *Ring) Idle() int {
	switch {
	case r.participating:
		return firstFiring(r.elapsed, r.c.cfg.TimeoutTicks)
	case r.c.role == Leader:
		return firstFiring(r.beat, r.c.cfg.HeartbeatTicks)
	}
	return firstFiring(r.heard, r.c.cfg.TimeoutTicks)
}

// Skip implements Idler.
func (r *Ring) Skip(n int) { skipTicks(n, r.Idle, r.jump, r.Tick) }

// jump makes n idle ticks (n at most Idle). What Tick forgets as the
// clock passes (the ring messages sent and the COORDINATOR rounds seen,
// each after its span) it forgets here once: the spans are measured
// from the same clock.
func (r *Ring) jump(n int) {
	r.now += uint64(n)
	t := uint64(r.c.cfg.TimeoutTicks)
	r.recent = slices.DeleteFunc(r.recent, func(s ringSent) bool { return r.now-s.at > t })
	maps.DeleteFunc(r.seenCoord, func(_ ElectionID, at uint64) bool { return r.now-at > 2*t })
	switch {
	case r.participating:
		r.elapsed += n
	case r.c.role == Leader:
		r.beat += n
	default:
		r.heard += n
	}
}

// Idle implements Idler: see Tick.
func (s *Stable) Idle() int {
	switch s.role {
	case Leader:
		return firstFiring(s.elapsed, s.cfg.HeartbeatTicks)
	case Candidate:
		return max(s.left-1, 0)
	}
	return firstFiring(s.elapsed, s.cfg.TimeoutTicks)
}

// Skip implements Idler.
func (s *Stable) Skip(n int) { skipTicks(n, s.Idle, s.jump, s.Tick) }

// jump makes n idle ticks (n at most Idle).
func (s *Stable) jump(n int) {
	s.now += n
	if s.role == Candidate {
		s.left -= n
	} else {
		s.elapsed += n
	}
}
