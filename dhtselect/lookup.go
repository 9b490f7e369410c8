package dhtselect

import (
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Lookup is an iterative Kademlia lookup of a raw key as a state machine.
//
// kad-dht's GetClosestPeers hashes the key it is given (its FIND_NODE handler
// does the same), so it can only find the peers closest to SHA-256(key), never
// to a chosen point such as a cluster key. Lookup walks the same routing
// tables towards the raw point instead: the driver asks a peer for the peers
// of its routing table closest to Target, feeds the answer back, and repeats
// until the Width closest peers it has heard of have all answered.
//
// The zero value is not usable; call NewLookup.
type Lookup struct {
	target Key
	width  int
	alpha  int
	cands  []*cand
	seen   map[peer.ID]*cand
	active int
}

type candState uint8

const (
	heard candState = iota
	waiting
	answered
	failed
)

type cand struct {
	id    peer.ID
	key   Key
	state candState
}

// Resiliency is kad-dht's β: a lookup ends when this many of the closest
// peers it has heard of have answered.
const Resiliency = 3

// NewLookup starts a lookup of target from self. Self counts as answered (its
// own routing table provides the seeds). Width is the number of closest peers
// that must answer before the lookup ends (Resiliency, as in kad-dht); alpha is the
// number of queries in flight at once (kad-dht uses 10, Kademlia 3).
func NewLookup(target Key, self peer.ID, seeds []peer.ID, width, alpha int) *Lookup {
	l := &Lookup{target: target, width: max(width, 1), alpha: max(alpha, 1), seen: make(map[peer.ID]*cand)}
	l.add(self).state = answered
	l.Heard(seeds)
	return l
}

func (l *Lookup) add(id peer.ID) *cand {
	if c, ok := l.seen[id]; ok {
		return c
	}
	c := &cand{id: id, key: KeyOf(id)}
	l.seen[id] = c
	i, _ := slices.BinarySearchFunc(l.cands, c, func(a, b *cand) int {
		switch {
		case Closer(a.key, b.key, l.target):
			return -1
		case Closer(b.key, a.key, l.target):
			return 1
		}
		return 0
	})
	l.cands = slices.Insert(l.cands, i, c)
	return c
}

// Heard adds peers learned from an answer (or seeds) as candidates.
func (l *Lookup) Heard(ids []peer.ID) {
	for _, id := range ids {
		if id != "" {
			l.add(id)
		}
	}
}

// Next returns the peers to query now and marks them in flight: the closest
// not yet queried among the Width closest live candidates, up to alpha in
// flight in all.
func (l *Lookup) Next() []peer.ID {
	var out []peer.ID
	live := 0
	for _, c := range l.cands {
		if l.active >= l.alpha || live >= l.width {
			break
		}
		switch c.state {
		case failed:
			continue
		case heard:
			c.state = waiting
			l.active++
			out = append(out, c.id)
		}
		live++
	}
	return out
}

// Answered records that p answered with the given closer peers.
func (l *Lookup) Answered(p peer.ID, closer []peer.ID) {
	if c, ok := l.seen[p]; ok && c.state == waiting {
		c.state = answered
		l.active--
	}
	l.Heard(closer)
}

// Failed records that p could not be queried.
func (l *Lookup) Failed(p peer.ID) {
	if c, ok := l.seen[p]; ok && c.state == waiting {
		c.state = failed
		l.active--
	}
}

// Done reports whether the lookup has ended: no query is in flight and the
// Width closest live candidates have all answered.
func (l *Lookup) Done() bool {
	if l.active > 0 {
		return false
	}
	live := 0
	for _, c := range l.cands {
		if live >= l.width {
			break
		}
		switch c.state {
		case failed:
			continue
		case heard, waiting:
			return false
		}
		live++
	}
	return true
}

// Result returns the peers that answered, closest to the target first. The
// first is the lookup's answer: the closest live peer it found.
func (l *Lookup) Result() []peer.ID {
	var out []peer.ID
	for _, c := range l.cands {
		if c.state == answered {
			out = append(out, c.id)
		}
	}
	return out
}
