package node

import (
	"container/list"
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
// maxGroups groups.
//
// A new group beyond maxGroups takes the place of one remembered, chosen
// in constant time: the crowded group with the least recent record if
// none came from it for the TTL (it is crowded no more), else the group
// not crowded with the least recent record, else (every group is
// crowded) the crowded one with the least recent record. ("Least
// recent" is by the order the records came in.) Forgetting a group not
// crowded costs little: the identities it registered are the roster's
// members, and count as held. A crowded group that keeps sending records
// is forgotten only when all maxGroups are crowded, and then opens to no
// more identities than a fresh group would. Before, with none quiet for
// the TTL to forget, every new group was called crowded: once maxGroups
// address groups (4096 IPv6 /64s at the registry) had sent records
// within the TTL, no honest newcomer could register at that superpeer
// (hostile-peer audit); and each new group at the bound swept every
// group remembered.
type Crowding struct {
	perAddr   int
	maxGroups int
	ttl       time.Duration
	groups    map[string]*crowdGroup
	// The groups not crowded (calm) and crowded, each oldest first: by
	// their last record, but that a crowded group that turns calm without
	// a record, quiet for the TTL, goes to the front of calm.
	calm, crowded list.List
}

// crowdGroup is what Crowding remembers of an address group.
type crowdGroup struct {
	name    string
	seen    map[peer.ID]time.Time // the identities that sent a record, and when each last did
	last    time.Time             // its last record: while crowded, its last record while crowded
	crowded bool
	el      *list.Element // in calm or crowded, as crowded says
}

// NewCrowding returns the rule for perAddr identities per group (0: no
// accounting, nothing is ever crowded), remembering at most maxGroups
// groups, whose records count for ttl.
func NewCrowding(perAddr, maxGroups int, ttl time.Duration) *Crowding {
	return &Crowding{perAddr: perAddr, maxGroups: maxGroups, ttl: ttl, groups: map[string]*crowdGroup{}}
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
	g := c.groups[group]
	var last time.Time // the group's last record before this request
	if g != nil {
		last = g.last
	}
	if record {
		if g == nil {
			for len(c.groups) >= max(c.maxGroups, 1) {
				c.evict(now)
			}
			g = &crowdGroup{name: group, seen: map[peer.ID]time.Time{}}
			g.el = c.calm.PushBack(g)
			c.groups[group] = g
		}
		if _, ok := g.seen[from]; !ok && len(g.seen) > c.perAddr {
			var oldest peer.ID
			for p, at := range g.seen {
				if oldest == "" || at.Before(g.seen[oldest]) {
					oldest = p
				}
			}
			delete(g.seen, oldest)
		}
		g.seen[from] = now
		g.last = now
	}
	ids := map[peer.ID]bool{}
	for _, p := range held {
		ids[p] = true
	}
	if g != nil {
		for p, at := range g.seen {
			switch {
			case now.Sub(at) > c.ttl:
				delete(g.seen, p)
			case connected(p):
				ids[p] = true
			}
		}
	}
	if g == nil {
		return len(ids) > c.perAddr
	}
	if len(ids) <= c.perAddr && (!g.crowded || now.Sub(last) > c.ttl) {
		c.place(g, false, record) // not crowded, or quiet for the TTL
		return false
	}
	if record {
		c.place(g, true, true)
	}
	return true
}

// place puts g in the list of its state (crowded or not): at the back
// after a record (its last is the newest), at the front of calm when it
// turns calm without one (quiet for the TTL), else where it was.
func (c *Crowding) place(g *crowdGroup, crowded, record bool) {
	switch {
	case g.crowded != crowded:
		c.list(g.crowded).Remove(g.el)
		g.crowded = crowded
		if record {
			g.el = c.list(crowded).PushBack(g)
		} else {
			g.el = c.list(crowded).PushFront(g)
		}
	case record:
		c.list(crowded).MoveToBack(g.el)
	}
}

func (c *Crowding) list(crowded bool) *list.List {
	if crowded {
		return &c.crowded
	}
	return &c.calm
}

// evict forgets one group to make room for a new one (see Crowding).
func (c *Crowding) evict(now time.Time) {
	el := c.calm.Front()
	if f := c.crowded.Front(); f != nil && (el == nil || now.Sub(f.Value.(*crowdGroup).last) > c.ttl) {
		el = f
	}
	if el == nil {
		return
	}
	g := el.Value.(*crowdGroup)
	c.list(g.crowded).Remove(el)
	delete(c.groups, g.name)
}

// Remembered returns how many identities of group the rule remembers.
func (c *Crowding) Remembered(group string) int {
	if g := c.groups[group]; g != nil {
		return len(g.seen)
	}
	return 0
}
