package gossip

import (
	"cmp"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Entry is one peer's latest accepted announcement and when it arrived.
type Entry struct {
	Announcement
	Seen time.Time
}

// View is the membership table: the latest announcement of each peer, until
// it is older than the TTL. A goodbye (Announcement.Leaving) takes its
// peer out of the view at once; the view keeps it, hidden, for the TTL, so
// that an older announcement that arrives late does not bring the peer
// back (a restart announces with a newer Seq, and does). It is pure:
// callers pass the time.
type View struct {
	ttl     time.Duration
	entries map[peer.ID]Entry
}

// NewView returns an empty view whose entries live for ttl after their last
// announcement.
func NewView(ttl time.Duration) *View {
	return &View{ttl: ttl, entries: make(map[peer.ID]Entry)}
}

// Stale reports whether a is not newer than what the view holds for its peer.
func (v *View) Stale(a Announcement) bool {
	e, ok := v.entries[a.ID]
	return ok && a.Seq <= e.Seq
}

// Apply records a at time now. It returns false, changing nothing, for a stale
// announcement. It reports in changed whether the peer is new or its role,
// cluster, reachability or addresses differ from before (a mere refresh is not a change).
func (v *View) Apply(a Announcement, now time.Time) (accepted, changed bool) {
	if v.Stale(a) {
		return false, false
	}
	old, ok := v.entries[a.ID]
	ok = ok && !old.Leaving
	v.entries[a.ID] = Entry{Announcement: a, Seen: now}
	if a.Leaving {
		return true, ok
	}
	return true, !ok || !sameSaying(old.Announcement, a)
}

// sameSaying reports whether two announcements of a peer say the same:
// role, cluster, reachability and addresses (a mere refresh is no change).
func sameSaying(a, b Announcement) bool {
	return a.Superpeer == b.Superpeer && a.K == b.K && a.ClusterKey == b.ClusterKey && a.Private == b.Private && sameAddrs(a, b)
}

func sameAddrs(a, b Announcement) bool {
	if len(a.Addrs) != len(b.Addrs) {
		return false
	}
	for i := range a.Addrs {
		if !a.Addrs[i].Equal(b.Addrs[i]) {
			return false
		}
	}
	return true
}

// Remove forgets a peer at once (it said goodbye, or it was found dead).
func (v *View) Remove(id peer.ID) bool {
	e, ok := v.entries[id]
	delete(v.entries, id)
	return ok && !e.Leaving
}

// Expire removes the entries not refreshed within the TTL before now and
// returns their peers. Entries for which keep returns true stay (nil keeps
// none): the driver keeps peers it is connected to, whose liveness it knows
// first-hand. Goodbyes older than the TTL go, whatever keep says, and are
// not returned: their peers left the view when they arrived.
func (v *View) Expire(now time.Time, keep func(peer.ID) bool) []peer.ID {
	var gone []peer.ID
	for id, e := range v.entries {
		switch {
		case now.Sub(e.Seen) <= v.ttl:
		case e.Leaving:
			delete(v.entries, id)
		case keep == nil || !keep(id):
			gone = append(gone, id)
			delete(v.entries, id)
		}
	}
	slices.Sort(gone)
	return gone
}

// Get returns a peer's entry.
func (v *View) Get(id peer.ID) (Entry, bool) {
	e, ok := v.entries[id]
	return e, ok && !e.Leaving
}

// Left reports whether the peer said goodbye within the TTL.
func (v *View) Left(id peer.ID) bool {
	e, ok := v.entries[id]
	return ok && e.Leaving
}

// Len is the number of live entries.
func (v *View) Len() int {
	n := 0
	for _, e := range v.entries {
		if !e.Leaving {
			n++
		}
	}
	return n
}

// Entries returns all live entries, sorted by peer ID.
func (v *View) Entries() []Entry {
	out := make([]Entry, 0, len(v.entries))
	for _, e := range v.entries {
		if !e.Leaving {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
