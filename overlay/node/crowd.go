package node

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Crowding is the identities-per-address rule (see admit.go) at a
// superpeer's end of the register protocol: it counts, per address group,
// the identities that register from it, and says when a group is crowded
// (more than perAddr identities). The machine applies the rule to its own
// view (admit); the shell's registry asks Crowding, for every register
// request, whether the request's group is crowded, and refuses the request
// and drops the group's members from the roster when it is. It is a pure
// piece (no clock, no I/O: the caller gives the time, the group's members
// in the roster, and which identities it is still connected to), so that
// its decisions are tested by hand and not only through live floods.
//
// A group is crowded when more than perAddr identities are the roster's
// members from it or sent a record from it within the TTL and are still
// connected (as in the machine: an identity banned and disconnected, as
// each of an election flooder's is in turn, no longer counts). A group
// found crowded stays crowded while records keep coming from it: until
// none came for the TTL. Without that, one identity of the last
// perAddr+1 remembered that lost its connection (a flood of hundreds of
// identities is trimmed by the connection manager) opened the group to
// the next identity, which entered the roster and the members' views
// until the group's next record (the live TestSybilFlood, one run in
// four). It remembers at most perAddr+1 identities per group (the most
// recent: more need not be known to call the group crowded) and at most
// maxGroups groups; beyond them, with none quiet for the TTL to forget,
// every new group is crowded (a flood of addresses takes nothing new).
type Crowding struct {
	perAddr   int
	maxGroups int
	ttl       time.Duration
	groups    map[string]map[peer.ID]time.Time // the identities that sent a record, per group, and when each last did
	crowded   map[string]time.Time             // when each group last sent a record while crowded
}

// NewCrowding returns the rule for perAddr identities per group (0: no
// accounting, nothing is ever crowded), remembering at most maxGroups
// groups, whose records count for ttl.
func NewCrowding(perAddr, maxGroups int, ttl time.Duration) *Crowding {
	return &Crowding{perAddr: perAddr, maxGroups: maxGroups, ttl: ttl,
		groups: map[string]map[peer.ID]time.Time{}, crowded: map[string]time.Time{}}
}

// Check takes a register request from the identity from, on a connection
// from the address group group ("": unknown, not counted), carrying a
// record (record: a refresh proves no new identity and is not counted),
// at now, and reports whether group is crowded. held are the identities
// the roster holds from group (they refresh without a record, and count);
// connected reports whether the caller is still connected to an
// identity.
func (c *Crowding) Check(from peer.ID, group string, record bool, now time.Time, held []peer.ID, connected func(peer.ID) bool) bool {
	if c.perAddr <= 0 || group == "" {
		return false
	}
	seen := c.groups[group]
	if record {
		if seen == nil {
			if len(c.groups) >= c.maxGroups { // forget the groups quiet for the TTL
				for g, s := range c.groups {
					if c.quiet(s, now) {
						delete(c.groups, g)
						delete(c.crowded, g)
					}
				}
			}
			if len(c.groups) >= c.maxGroups {
				return true // under a flood of addresses: take no new one
			}
			seen = map[peer.ID]time.Time{}
			c.groups[group] = seen
		}
		if _, ok := seen[from]; !ok && len(seen) > c.perAddr {
			var oldest peer.ID
			for p, at := range seen {
				if oldest == "" || at.Before(seen[oldest]) {
					oldest = p
				}
			}
			delete(seen, oldest)
		}
		seen[from] = now
	}
	ids := map[peer.ID]bool{}
	for _, p := range held {
		ids[p] = true
	}
	for p, at := range seen {
		switch {
		case now.Sub(at) > c.ttl:
			delete(seen, p)
		case connected(p):
			ids[p] = true
		}
	}
	if at, ok := c.crowded[group]; len(ids) <= c.perAddr && (!ok || now.Sub(at) > c.ttl) {
		delete(c.crowded, group) // not crowded, or quiet for the TTL
		return false
	}
	if record {
		c.crowded[group] = now
	}
	return true
}

// Remembered returns how many identities of group the rule remembers.
func (c *Crowding) Remembered(group string) int { return len(c.groups[group]) }

// quiet reports whether no identity of a group sent a record within the
// TTL.
func (c *Crowding) quiet(s map[peer.ID]time.Time, now time.Time) bool {
	for _, at := range s {
		if now.Sub(at) <= c.ttl {
			return false
		}
	}
	return true
}
