package gossip

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A feed is one GossipSub topic on which every peer publishes, periodically
// and on change, one value of type T about itself, and a table of the latest
// value heard from every origin. It is the generic piece under the
// membership topic (Membership) and the coordinate and token topics of Geo:
// join the topic with a validator (decode, Reject the malformed, Ignore the
// stale and the refused), a receive loop, a republish loop with expiry, and
// a rate limit on change-driven publication.
//
// The origin of a value is always the message's signed origin, never a field
// of the payload. Values carry a sequence number that orders one origin's
// messages; the feed remembers the last one accepted from each origin, also
// after the value itself is gone (a tombstone, until the TTL passes), so that
// a delayed older message cannot bring back what a newer one removed. A
// value that is not live (a goodbye, a released token) is such a tombstone
// from the start.

// feedSpec describes a payload type to a feed.
type feedSpec[T any] struct {
	// kind names the payload in logs ("coordinate", "token").
	kind string
	// decode parses and checks a payload from origin.
	decode func(origin peer.ID, data []byte) (T, error)
	// encode serialises a value; it fails for a value decode would reject.
	encode func(v T) ([]byte, error)
	// seq reads, and setSeq writes, a value's sequence number.
	seq    func(v T) uint64
	setSeq func(v *T, seq uint64)
	// live reports whether a value stands for something; a value that is not
	// live (a released token) removes its origin's entry and is published
	// once.
	live func(v T) bool
	// same reports whether b only refreshes a (sequence numbers aside): a
	// refresh is not a change, and a Set call with the same value does not
	// publish at once.
	same func(a, b T) bool
	// urgent reports whether a change from old (nil: none) to v is published
	// at once even within the feed's minimum gap.
	urgent func(old *T, v T) bool
	// slot, when set, names the slot a live value takes, and perSlot
	// bounds the live values of new origins per slot; maxOrigins, when
	// above zero, bounds the origins held (tombstones included): a
	// message from a new origin past either bound is ignored (full).
	slot       func(v T) string
	perSlot    int
	maxOrigins int
	// group, when set, puts a value in a group (a token's number) whose
	// records a feed's limit bounds (see limit): unlike slot's bound, one
	// that makes room for what the limit protects.
	group func(v T) int
}

// limit bounds a table's records by group (feedSpec.group): values of a
// group at or above groups are refused (0: none is), and a group holds at
// most per records. When a group is full, a record that no longer counts
// (a tombstone, or older than the TTL) makes room for any newcomer; a
// record that counts makes room only for a newcomer that protect names,
// and only when protect does not name it (the newest of those goes
// first). So a flood of values under origins made for it fills the room
// left and no more: it evicts nothing that counts, and what protect names
// (the holders a node believes, and the passes they signed) still gets
// in. The local peer's own value is never refused.
type limit[T any] struct {
	groups, per int
	protect     func(origin peer.ID, v T) bool // nil: none
}

// refuses reports whether a value of group g is refused outright: the
// group is out of range.
func (l *limit[T]) refuses(g int) bool { return g < 0 || l.groups > 0 && g >= l.groups }

// feedConfig configures a feed.
type feedConfig struct {
	topic    string
	self     peer.ID
	interval time.Duration
	ttl      time.Duration
	minGap   time.Duration // <= 0: no limit
	now      func() time.Time
	log      *slog.Logger
	changed  func()
	rejected func(from peer.ID, err error) // GeoConfig.Rejected, MembershipConfig.Rejected
	// refuse, when set, names origins whose messages are ignored before
	// they are decoded (MembershipConfig.Refuse).
	refuse func(origin peer.ID) bool
	// vouch, when set, names origins a full slot makes room for
	// (BackboneConfig.Vouch, table.full).
	vouch func(origin peer.ID) bool
	// keep, when set, names origins whose records outlive the TTL: the
	// republish loop's expiry passes them over (MembershipConfig.Connected).
	keep func(origin peer.ID) bool
	// sweptOnly makes a record count until the republish loop's expiry
	// deletes it, rather than from the moment it is older than the TTL (see
	// table.sweptOnly).
	sweptOnly bool
}

// FeedStats counts what a topic's validator decided about messages from
// other peers (our own are not counted).
type FeedStats struct {
	// Accepted is the number of messages accepted.
	Accepted uint64
	// Rejected is the number of malformed messages (bad size, version,
	// encoding or values), and of messages without a signed origin.
	Rejected uint64
	// Ignored is the number of stale messages (sequence number not above
	// the last accepted from their origin), of our own messages relayed
	// back by others, and the Crowded ones.
	Ignored uint64
	// Crowded is the number of messages ignored because the table had no
	// room for them: the spec's bounds (the backbone's summaries of a
	// cluster, the origins held) or a limit's (a token number out of
	// range, or a token whose reports fill its room).
	Crowded uint64
	// Published is the number of messages this peer published.
	Published uint64
}

type feedCounters struct{ accepted, rejected, ignored, crowded, published atomic.Uint64 }

// record is the latest value heard from one origin.
type record[T any] struct {
	val  T
	seq  uint64
	seen time.Time
	// live is false for a tombstone: the value was withdrawn (a released
	// token, Forget, or our own Set(nil)) and the record stays only to order
	// later messages, until it expires.
	live bool
	// first is when the record's origin first had a value of its group
	// (limit: the newest give way first).
	first time.Time
}

// table is the pure state of a feed: the latest record of every origin. It
// takes the time from its callers and does no I/O.
type table[T any] struct {
	spec *feedSpec[T]
	ttl  time.Duration
	recs map[peer.ID]record[T]
	// live counts the records of recs that are live (tombstones not), shown
	// or not: with sweptOnly, those shown. Every change of recs goes through
	// set and del, which keep it.
	live int
	// slots counts the live records per spec.slot (nil without one).
	slots map[string]int
	// sweptOnly: a live record counts (is shown, and is live when a new
	// value is compared with it) until sweep deletes it, whatever its age,
	// so that sweep's keep may hold records past the TTL; the time its
	// readers pass does not matter then. Otherwise a record older than the
	// TTL is hidden at once, before sweep deletes it.
	sweptOnly bool
	// lim, when set (with spec.group), bounds the records of each group;
	// groups indexes the origins by the group of their records, and self
	// is the local peer, whose value it never refuses.
	lim    *limit[T]
	groups map[int]map[peer.ID]struct{}
	self   peer.ID
	// vouch, when set, names the origins a full slot makes room for (see
	// full): peers the node can vouch for.
	vouch func(origin peer.ID) bool
}

func newTable[T any](spec *feedSpec[T], ttl time.Duration) *table[T] {
	t := &table[T]{spec: spec, ttl: ttl, recs: make(map[peer.ID]record[T])}
	if spec.slot != nil {
		t.slots = map[string]int{}
	}
	return t
}

// set stores r as origin's record, keeping the counts of live ones and,
// under a limit, the index of groups and the time the origin first had a
// value of r's group.
func (t *table[T]) set(origin peer.ID, r record[T]) {
	old, ok := t.recs[origin]
	if ok && old.live {
		t.count(old.val, -1)
	}
	if r.live {
		t.count(r.val, 1)
	}
	if t.limited() {
		r = t.index(origin, old, ok, r)
	}
	t.recs[origin] = r
}

// del deletes origin's record, keeping the counts of live ones and the
// index of groups.
func (t *table[T]) del(origin peer.ID) {
	if old, ok := t.recs[origin]; ok {
		if old.live {
			t.count(old.val, -1)
		}
		if t.limited() {
			t.unindex(origin, old)
		}
	}
	delete(t.recs, origin)
}

// count adds d to the live records, and to v's slot's.
func (t *table[T]) count(v T, d int) {
	t.live += d
	if t.slots == nil {
		return
	}
	s := t.spec.slot(v)
	if t.slots[s] += d; t.slots[s] <= 0 {
		delete(t.slots, s)
	}
}

// full reports whether v from origin would pass the table's bounds
// (feedSpec.maxOrigins, perSlot): origin is new, and the table holds
// maxOrigins origins; or v is live and its slot holds perSlot live values,
// unless v's origin holds a live value in that slot already. An origin
// held counts against maxOrigins already, but a live value it moves into
// a slot counts against perSlot: otherwise a fresh key that first sent a
// value elsewhere (or a withdrawn one) took a full slot with its next
// (review). A full slot still takes the value of an origin that vouch
// names, in place of the latest refreshed of the slot's values whose
// origins vouch does not name (victim): a flood under fresh keys then
// fills a slot only until a peer the node can vouch for comes.
func (t *table[T]) full(origin peer.ID, v T) (victim peer.ID, full bool) {
	old, held := t.recs[origin]
	if !held && t.spec.maxOrigins > 0 && len(t.recs) >= t.spec.maxOrigins {
		return "", true
	}
	if t.slots == nil || !t.spec.live(v) {
		return "", false
	}
	s := t.spec.slot(v)
	if held && old.live && t.spec.slot(old.val) == s {
		return "", false
	}
	if t.slots[s] < t.spec.perSlot {
		return "", false
	}
	if t.vouch == nil || !t.vouch(origin) {
		return "", true
	}
	for id, r := range t.recs {
		if !r.live || t.spec.slot(r.val) != s || id == t.self || t.vouch(id) {
			continue
		}
		if victim == "" || r.seen.After(t.recs[victim].seen) || r.seen.Equal(t.recs[victim].seen) && id > victim {
			victim = id
		}
	}
	return victim, victim == ""
}

// limited reports whether the table bounds its records by group.
func (t *table[T]) limited() bool { return t.lim != nil && t.spec.group != nil }

// index files origin's new record r (its old one, if it had one: had) in
// its group, and returns r with the time the origin first had a value of
// that group.
func (t *table[T]) index(origin peer.ID, old record[T], had bool, r record[T]) record[T] {
	g := t.spec.group(r.val)
	if had && t.spec.group(old.val) == g {
		r.first = old.first
		return r
	}
	if had {
		t.unindex(origin, old)
	}
	if t.groups == nil {
		t.groups = map[int]map[peer.ID]struct{}{}
	}
	if t.groups[g] == nil {
		t.groups[g] = map[peer.ID]struct{}{}
	}
	t.groups[g][origin] = struct{}{}
	if r.first.IsZero() {
		r.first = r.seen
	}
	return r
}

func (t *table[T]) unindex(origin peer.ID, r record[T]) {
	g := t.spec.group(r.val)
	delete(t.groups[g], origin)
	if len(t.groups[g]) == 0 {
		delete(t.groups, g)
	}
}

// room reports whether v from origin may be kept at time now under the
// table's limit (see limit), and the record that must go to make room
// for it, if one must ("": none).
func (t *table[T]) room(origin peer.ID, v T, now time.Time) (victim peer.ID, ok bool) {
	if !t.limited() || origin == t.self {
		return "", true
	}
	g := t.spec.group(v)
	if t.lim.refuses(g) {
		return "", false
	}
	if old, ok := t.recs[origin]; ok && t.spec.group(old.val) == g {
		return "", true // its own record: a refresh, or a withdrawal
	}
	members := t.groups[g]
	if len(members) < t.lim.per {
		return "", true
	}
	protected := func(id peer.ID, v T) bool { return t.lim.protect != nil && t.lim.protect(id, v) }
	// A record that no longer counts goes first, the least recently seen;
	// else, for a newcomer protect names, the newest of those it does not.
	var dead, newest peer.ID
	for id := range members {
		r := t.recs[id]
		switch {
		case !t.shown(r, now):
			if dead == "" || r.seen.Before(t.recs[dead].seen) || r.seen.Equal(t.recs[dead].seen) && id < dead {
				dead = id
			}
		case !protected(id, r.val):
			if newest == "" || r.first.After(t.recs[newest].first) || r.first.Equal(t.recs[newest].first) && id > newest {
				newest = id
			}
		}
	}
	switch {
	case dead != "":
		return dead, true
	case newest != "" && t.spec.live(v) && protected(origin, v):
		return newest, true
	}
	return "", false
}

// stale reports whether a message numbered seq from origin is not newer than
// the last one accepted from it.
func (t *table[T]) stale(origin peer.ID, seq uint64) bool {
	r, ok := t.recs[origin]
	return ok && seq <= r.seq
}

// apply records v from origin at time now. It returns false, changing
// nothing, for a stale value; changed reports whether what the table shows
// changed (an entry appeared, went, or differs by more than a refresh).
func (t *table[T]) apply(origin peer.ID, v T, now time.Time) (accepted, changed bool) {
	seq := t.spec.seq(v)
	if t.stale(origin, seq) {
		return false, false
	}
	crowding, full := t.full(origin, v)
	if full {
		return false, false
	}
	victim, ok := t.room(origin, v, now)
	if !ok {
		return false, false
	}
	for _, id := range [...]peer.ID{crowding, victim} {
		if _, held := t.recs[id]; held && id != "" {
			changed = t.shown(t.recs[id], now) || changed
			t.del(id)
		}
	}
	old, ok := t.recs[origin]
	live := t.spec.live(v)
	t.set(origin, record[T]{val: v, seq: seq, seen: now, live: live})
	wasLive := ok && t.shown(old, now)
	return true, changed || wasLive != live || (live && !t.spec.same(old.val, v))
}

// admits reports whether apply would take v from origin at time now: not
// stale, and within the spec's bounds (full) and the limit (room).
func (t *table[T]) admits(origin peer.ID, v T, now time.Time) (stale, crowded bool) {
	if t.stale(origin, t.spec.seq(v)) {
		return true, false
	}
	_, ok := t.room(origin, v, now)
	_, full := t.full(origin, v)
	return false, !ok || full
}

// put sets origin's value without the staleness check and without changing
// its sequence number; the local peer uses it for a change not yet
// published.
func (t *table[T]) put(origin peer.ID, v T, now time.Time) (changed bool) {
	old, ok := t.recs[origin]
	live := t.spec.live(v)
	t.set(origin, record[T]{val: v, seq: old.seq, seen: now, live: live})
	wasLive := ok && t.shown(old, now)
	return wasLive != live || (live && !t.spec.same(old.val, v))
}

// remove withdraws origin's value, keeping its sequence number until the
// record expires. It reports whether there was a live value.
func (t *table[T]) remove(origin peer.ID) bool {
	r, ok := t.recs[origin]
	if !ok || !r.live {
		return false
	}
	r.live = false
	t.set(origin, r)
	return true
}

// drop deletes origin's record, its sequence number included, so that any
// later message from origin is taken. It reports whether there was a live
// value.
func (t *table[T]) drop(origin peer.ID) bool {
	r, ok := t.recs[origin]
	t.del(origin)
	return ok && r.live
}

func (t *table[T]) expired(r record[T], now time.Time) bool { return now.Sub(r.seen) > t.ttl }

// shown reports whether r is a value that counts at time now: live, and not
// older than the TTL (unless sweptOnly).
func (t *table[T]) shown(r record[T], now time.Time) bool {
	return r.live && (t.sweptOnly || !t.expired(r, now))
}

// lookup returns origin's record if it is shown at time now.
func (t *table[T]) lookup(origin peer.ID, now time.Time) (record[T], bool) {
	r, ok := t.recs[origin]
	if !ok || !t.shown(r, now) {
		return record[T]{}, false
	}
	return r, true
}

// get returns origin's live, unexpired value.
func (t *table[T]) get(origin peer.ID, now time.Time) (T, bool) {
	r, ok := t.lookup(origin, now)
	return r.val, ok
}

// records calls fn for every record shown at time now, in no particular
// order.
func (t *table[T]) records(now time.Time, fn func(origin peer.ID, r record[T])) {
	for id, r := range t.recs {
		if t.shown(r, now) {
			fn(id, r)
		}
	}
}

// each calls fn for every live, unexpired value, in no particular order.
func (t *table[T]) each(now time.Time, fn func(origin peer.ID, v T)) {
	t.records(now, func(id peer.ID, r record[T]) { fn(id, r.val) })
}

// withdrawn reports whether origin's last accepted value, still remembered,
// was one that is not live (a goodbye, a release).
func (t *table[T]) withdrawn(origin peer.ID) bool {
	r, ok := t.recs[origin]
	return ok && !t.spec.live(r.val)
}

// expire deletes the records older than the TTL, tombstones included, and
// reports whether a live one was among them.
func (t *table[T]) expire(now time.Time) (changed bool) {
	return len(t.sweep(now, nil)) > 0
}

// sweep deletes the records older than the TTL, except the live ones of the
// origins keep names (nil keeps none; tombstones go whatever it says), and
// returns the origins whose live records went, sorted.
func (t *table[T]) sweep(now time.Time, keep func(peer.ID) bool) []peer.ID {
	var gone []peer.ID
	for id, r := range t.recs {
		switch {
		case !t.expired(r, now):
		case !r.live:
			t.del(id)
		case keep == nil || !keep(id):
			t.del(id)
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	return gone
}

// feed drives a table from a GossipSub topic; see the comment at the top of
// this file.
type feed[T any] struct {
	cfg  feedConfig
	spec *feedSpec[T]
	ps   *pubsub.PubSub
	// topic and sub are nil in unit tests that feed messages by hand.
	topic *pubsub.Topic
	sub   *pubsub.Subscription
	n     feedCounters

	mu      sync.Mutex
	tab     *table[T]
	local   *T // republished every interval; nil: nothing to say
	lastSeq uint64
	lastPub time.Time
	pending bool // a change waits for the minimum gap to pass
	sealed  bool // seal was called: local is final, set changes nothing
	// quiet publishes only urgent changes (feedSpec.urgent) and a value
	// that is not live: no republication every interval, no change that
	// may wait (setQuiet).
	quiet bool

	kick   chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// newFeed returns a feed that is not attached to any topic, whose table
// lim bounds (nil: none).
func newFeed[T any](cfg feedConfig, spec *feedSpec[T], lim *limit[T]) *feed[T] {
	tab := newTable(spec, cfg.ttl)
	tab.sweptOnly, tab.lim, tab.self, tab.vouch = cfg.sweptOnly, lim, cfg.self, cfg.vouch
	return &feed[T]{cfg: cfg, spec: spec, tab: tab, kick: make(chan struct{}, 1)}
}

// joinFeed joins cfg.topic on ps with the feed's validator and starts its
// receive and republish loops; lim bounds its table (nil: none).
func joinFeed[T any](ps *pubsub.PubSub, cfg feedConfig, spec *feedSpec[T], lim *limit[T]) (*feed[T], error) {
	f := newFeed(cfg, spec, lim)
	f.ps = ps
	topic, sub, err := subscribe(ps, cfg.topic, f.validate)
	if err != nil {
		return nil, err
	}
	f.topic, f.sub = topic, sub
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done.Add(2)
	go f.receive(ctx)
	go f.run(ctx)
	return f, nil
}

// subscriptionBuffer is how many validated messages a subscription holds
// for its receive loop. pubsub drops what does not fit (its default is 32),
// and a dropped announcement is a peer missing from the view until its next
// interval: seen at 256 in-process nodes, where a busy receive loop lost
// half a million messages in six minutes.
const subscriptionBuffer = 1024

// subscribe registers validate on the topic name, joins it and subscribes,
// undoing what it did on failure.
func subscribe(ps *pubsub.PubSub, name string, validate pubsub.ValidatorEx) (*pubsub.Topic, *pubsub.Subscription, error) {
	if err := ps.RegisterTopicValidator(name, validate); err != nil {
		return nil, nil, fmt.Errorf("gossip: validator for %s: %w", name, err)
	}
	topic, err := ps.Join(name)
	if err != nil {
		_ = ps.UnregisterTopicValidator(name)
		return nil, nil, fmt.Errorf("gossip: join %s: %w", name, err)
	}
	sub, err := topic.Subscribe(pubsub.WithBufferSize(subscriptionBuffer))
	if err != nil {
		_ = topic.Close()
		_ = ps.UnregisterTopicValidator(name)
		return nil, nil, fmt.Errorf("gossip: subscribe %s: %w", name, err)
	}
	return topic, sub, nil
}

// validate is the topic's pubsub.ValidatorEx.
func (f *feed[T]) validate(_ context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	origin := msg.GetFrom()
	if origin == f.cfg.self {
		if from == f.cfg.self {
			return pubsub.ValidationAccept // our own, already in the table
		}
		// Ours, relayed back (or from an earlier run with our key): we know
		// our own state first-hand.
		f.n.ignored.Add(1)
		return pubsub.ValidationIgnore
	}
	if f.cfg.refuse != nil && f.cfg.refuse(origin) {
		f.n.ignored.Add(1)
		return pubsub.ValidationIgnore
	}
	v, err := f.spec.decode(origin, msg.Data)
	if err != nil {
		f.n.rejected.Add(1)
		f.cfg.log.Debug("gossip: rejected "+f.spec.kind, "topic", f.cfg.topic, "origin", origin, "via", from, "err", err)
		if f.cfg.rejected != nil {
			f.cfg.rejected(from, err)
		}
		return pubsub.ValidationReject
	}
	f.mu.Lock()
	stale, crowded := f.tab.admits(origin, v, f.cfg.now())
	f.mu.Unlock()
	if stale || crowded {
		f.n.ignored.Add(1)
		if crowded {
			f.n.crowded.Add(1)
		}
		return pubsub.ValidationIgnore
	}
	f.n.accepted.Add(1)
	msg.ValidatorData = v
	return pubsub.ValidationAccept
}

// deliver applies a message the validator accepted.
func (f *feed[T]) deliver(msg *pubsub.Message) {
	v, ok := msg.ValidatorData.(T)
	if !ok {
		return // our own message
	}
	f.mu.Lock()
	_, changed := f.tab.apply(msg.GetFrom(), v, f.cfg.now())
	f.mu.Unlock()
	if changed {
		f.cfg.changed()
	}
}

func (f *feed[T]) receive(ctx context.Context) {
	defer f.done.Done()
	for {
		msg, err := f.sub.Next(ctx)
		if err != nil {
			return // cancelled or subscription closed
		}
		f.deliver(msg)
	}
}

// run republishes the local value every interval, expires old records, and
// publishes changes that had to wait for the minimum gap.
func (f *feed[T]) run(ctx context.Context) {
	defer f.done.Done()
	tick := time.NewTicker(f.cfg.interval)
	defer tick.Stop()
	var gap *time.Timer
	var gapC <-chan time.Time
	defer func() {
		if gap != nil {
			gap.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// A value published for a change less than half an interval
			// ago needs no republication yet: the ticker and the
			// minimum-gap timer would otherwise send it twice per
			// interval, and every peer checks a signature per message.
			// The longest silence is then 1.5 intervals, within the TTL
			// (less when the TTL is shorter than that).
			f.mu.Lock()
			recent := f.local != nil && !f.pending && f.cfg.now().Sub(f.lastPub) < min(f.cfg.interval/2, f.cfg.ttl-f.cfg.interval)
			quiet := f.quiet && !f.sealed
			if quiet && f.local != nil {
				f.tab.put(f.cfg.self, *f.local, f.cfg.now()) // our own report stays in our view
			}
			f.mu.Unlock()
			if !recent && !quiet {
				_ = f.publish(ctx) // a failure is logged; the next interval retries
			}
			f.mu.Lock()
			gone := f.tab.sweep(f.cfg.now(), f.cfg.keep)
			f.mu.Unlock()
			if len(gone) > 0 {
				f.cfg.log.Debug("gossip: expired "+f.spec.kind, "topic", f.cfg.topic, "origins", len(gone), "ids", fmt.Sprint(gone))
				f.cfg.changed()
			}
		case <-f.kick:
			if gapC == nil {
				f.mu.Lock()
				wait := f.cfg.minGap - f.cfg.now().Sub(f.lastPub)
				f.mu.Unlock()
				gap = time.NewTimer(max(wait, 0))
				gapC = gap.C
			}
		case <-gapC:
			gap, gapC = nil, nil
			f.mu.Lock()
			pending := f.pending
			f.mu.Unlock()
			if pending {
				_ = f.publish(ctx)
			}
		}
	}
}

// publish sends the local value, if any, under a new sequence number
// (rising even if the clock steps back, or receivers would drop it as
// stale). A value that is not live is sent once and then cleared, unless
// the feed is sealed. It logs and returns the encoder's or pubsub's error.
func (f *feed[T]) publish(ctx context.Context) error {
	f.mu.Lock()
	if f.local == nil {
		f.pending = false
		f.mu.Unlock()
		return nil
	}
	now := f.cfg.now()
	seq := max(uint64(now.UnixNano()), f.lastSeq+1)
	f.lastSeq, f.lastPub, f.pending = seq, now, false
	v := *f.local
	f.spec.setSeq(&v, seq)
	if !f.spec.live(v) && !f.sealed {
		f.local = nil
	} else {
		f.local = &v
	}
	_, changed := f.tab.apply(f.cfg.self, v, now)
	f.mu.Unlock()
	if changed {
		f.cfg.changed()
	}
	data, err := f.spec.encode(v)
	if err != nil {
		f.cfg.log.Warn("gossip: encode "+f.spec.kind, "topic", f.cfg.topic, "err", err)
		return err
	}
	f.n.published.Add(1)
	if f.topic == nil {
		return nil
	}
	if err := f.topic.Publish(ctx, data); err != nil {
		if ctx.Err() == nil {
			f.cfg.log.Warn("gossip: publish "+f.spec.kind, "topic", f.cfg.topic, "err", err)
		}
		return err
	}
	return nil
}

// set replaces the local value (nil: none, and our entry goes) and publishes
// it at once if it changed, unless the last publication was less than the
// minimum gap ago and the change is not urgent: then it goes out when the
// gap has passed. A value that fails to encode is refused. On a sealed
// feed it changes nothing.
func (f *feed[T]) set(ctx context.Context, v *T) error {
	if v == nil {
		f.mu.Lock()
		if f.sealed {
			f.mu.Unlock()
			return nil
		}
		f.local, f.pending = nil, false
		removed := f.tab.remove(f.cfg.self)
		f.mu.Unlock()
		if removed {
			f.cfg.changed()
		}
		return nil
	}
	nv := *v
	if _, err := f.spec.encode(nv); err != nil {
		return err
	}
	f.mu.Lock()
	if f.sealed {
		f.mu.Unlock()
		return nil
	}
	old := f.local
	if old != nil && f.spec.live(nv) && f.spec.same(*old, nv) {
		f.mu.Unlock()
		return nil // the next republication carries it
	}
	now := f.cfg.now()
	urgent := f.spec.urgent(old, nv) || !f.spec.live(nv)
	if urgent || !f.quiet && (f.cfg.minGap <= 0 || now.Sub(f.lastPub) >= f.cfg.minGap) {
		f.local = &nv
		f.mu.Unlock()
		_ = f.publish(ctx) // a failure is logged; the next interval retries
		return nil
	}
	f.spec.setSeq(&nv, f.lastSeq)
	quiet := f.quiet
	f.local, f.pending = &nv, !quiet
	changed := f.tab.put(f.cfg.self, nv, now)
	f.mu.Unlock()
	if changed {
		f.cfg.changed()
	}
	if quiet {
		return nil
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
	return nil
}

// setQuiet turns quiet publication on or off (see feed.quiet); a change
// waiting for the minimum gap is then not published.
func (f *feed[T]) setQuiet(quiet bool) {
	f.mu.Lock()
	f.quiet, f.pending = quiet, f.pending && !quiet
	f.mu.Unlock()
}

// seal makes the local value final: last turns it into its last word (a
// goodbye), which is published at once and then every interval, even though
// it is not live; later set calls change nothing. Nothing is sent when there
// is no local value. It returns the publication's error.
func (f *feed[T]) seal(ctx context.Context, last func(v *T)) error {
	f.mu.Lock()
	f.sealed = true
	if f.local == nil {
		f.pending = false
		f.mu.Unlock()
		return nil
	}
	v := *f.local
	last(&v)
	f.local = &v
	f.mu.Unlock()
	return f.publish(ctx)
}

// forget withdraws p's value.
func (f *feed[T]) forget(p peer.ID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tab.remove(p)
}

func (f *feed[T]) stats() FeedStats {
	return FeedStats{Accepted: f.n.accepted.Load(), Rejected: f.n.rejected.Load(), Ignored: f.n.ignored.Load(),
		Crowded: f.n.crowded.Load(), Published: f.n.published.Load()}
}

// close stops the loops and leaves the topic.
func (f *feed[T]) close() error {
	if f.topic == nil {
		return nil
	}
	f.cancel()
	f.sub.Cancel()
	f.done.Wait()
	err := f.topic.Close()
	if uerr := f.ps.UnregisterTopicValidator(f.cfg.topic); err == nil {
		err = uerr
	}
	return err
}
