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

// announcementSpec describes announcements to a feed: a goodbye
// (Announcement.Leaving) is a value that is not live, and a change of role,
// cluster, reachability or addresses goes out at once.
var announcementSpec = feedSpec[Announcement]{
	kind:   "announcement",
	decode: DecodeAnnouncement,
	encode: Announcement.Encode,
	seq:    func(a Announcement) uint64 { return a.Seq },
	setSeq: func(a *Announcement, s uint64) { a.Seq = s },
	live:   func(a Announcement) bool { return !a.Leaving },
	same:   sameSaying,
	urgent: func(*Announcement, Announcement) bool { return true },
}

// View is the membership table: the latest announcement of each peer, until
// it is older than the TTL. A goodbye (Announcement.Leaving) takes its
// peer out of the view at once; the view keeps it, hidden, for the TTL, so
// that an older announcement that arrives late does not bring the peer
// back (a restart announces with a newer Seq, and does). It is pure:
// callers pass the time.
//
// It is the feed table of announcements (feed.go), in the mode where an
// entry stays until Expire removes it, so that Expire may keep peers past
// the TTL.
type View struct {
	t *table[Announcement]
}

// NewView returns an empty view whose entries live for ttl after their last
// announcement.
func NewView(ttl time.Duration) *View {
	t := newTable(&announcementSpec, ttl)
	t.sweptOnly = true
	return &View{t: t}
}

// anyTime stands for the time of the view's reads: entries count until
// Expire removes them (table.sweptOnly), so the time does not matter.
var anyTime time.Time

// Stale reports whether a is not newer than what the view holds for its peer.
func (v *View) Stale(a Announcement) bool { return v.t.stale(a.ID, a.Seq) }

// Apply records a at time now. It returns false, changing nothing, for a stale
// announcement. It reports in changed whether the peer is new or its role,
// cluster, reachability or addresses differ from before (a mere refresh is not a change).
func (v *View) Apply(a Announcement, now time.Time) (accepted, changed bool) {
	return v.t.apply(a.ID, a, now)
}

// sameSaying reports whether two announcements of a peer say the same:
// role, cluster, reachability and addresses (a mere refresh is no change).
func sameSaying(a, b Announcement) bool {
	return a.Superpeer == b.Superpeer && a.K == b.K && a.ClusterKey == b.ClusterKey && a.Private == b.Private && a.Flapping == b.Flapping && a.Beacon == b.Beacon && a.Election == b.Election && sameAddrs(a, b)
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

// Remove forgets a peer at once (it said goodbye, or it was found dead),
// its sequence number included: any later announcement brings it back. It
// reports whether the peer was in the view.
func (v *View) Remove(id peer.ID) bool { return v.t.drop(id) }

// Expire removes the entries not refreshed within the TTL before now and
// returns their peers. Entries for which keep returns true stay (nil keeps
// none): the driver keeps peers it is connected to, whose liveness it knows
// first-hand. Goodbyes older than the TTL go, whatever keep says, and are
// not returned: their peers left the view when they arrived.
func (v *View) Expire(now time.Time, keep func(peer.ID) bool) []peer.ID {
	return v.t.sweep(now, keep)
}

// Get returns a peer's entry.
func (v *View) Get(id peer.ID) (Entry, bool) {
	r, ok := v.t.lookup(id, anyTime)
	if !ok {
		return Entry{}, false
	}
	return Entry{Announcement: r.val, Seen: r.seen}, true
}

// Left reports whether the peer said goodbye within the TTL.
func (v *View) Left(id peer.ID) bool { return v.t.withdrawn(id) }

// Len is the number of live entries. It takes constant time: the table
// counts its live records as they change (a registrar asks for it for
// every roster entry it takes).
func (v *View) Len() int { return v.t.live }

// Entries returns all live entries, sorted by peer ID.
func (v *View) Entries() []Entry {
	out := make([]Entry, 0, len(v.t.recs))
	v.t.records(anyTime, func(_ peer.ID, r record[Announcement]) {
		out = append(out, Entry{Announcement: r.val, Seen: r.seen})
	})
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
