package gossip

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// A feed is one GossipSub topic on which every peer publishes, periodically
// and on change, one value of type T about itself, and a table of the latest
// value heard from every origin. It is the generic piece under the
// coordinate and token topics of Geo: join the topic with a validator
// (decode, Reject the malformed, Ignore the stale), a receive loop, a
// republish loop with expiry, and a rate limit on change-driven publication.
//
// The origin of a value is always the message's signed origin, never a field
// of the payload. Values carry a sequence number that orders one origin's
// messages; the feed remembers the last one accepted from each origin, also
// after the value itself is gone (a tombstone, until the TTL passes), so that
// a delayed older message cannot bring back what a newer one removed.

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
}

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
	rejected func(from peer.ID, err error) // GeoConfig.Rejected
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
	// the last accepted from their origin) and of our own messages relayed
	// back by others.
	Ignored uint64
	// Published is the number of messages this peer published.
	Published uint64
}

type feedCounters struct{ accepted, rejected, ignored, published atomic.Uint64 }

// record is the latest value heard from one origin.
type record[T any] struct {
	val  T
	seq  uint64
	seen time.Time
	// live is false for a tombstone: the value was withdrawn (a released
	// token, Forget, or our own Set(nil)) and the record stays only to order
	// later messages, until it expires.
	live bool
}

// table is the pure state of a feed: the latest record of every origin. It
// takes the time from its callers and does no I/O.
type table[T any] struct {
	spec *feedSpec[T]
	ttl  time.Duration
	recs map[peer.ID]record[T]
}

func newTable[T any](spec *feedSpec[T], ttl time.Duration) *table[T] {
	return &table[T]{spec: spec, ttl: ttl, recs: make(map[peer.ID]record[T])}
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
	old, ok := t.recs[origin]
	live := t.spec.live(v)
	t.recs[origin] = record[T]{val: v, seq: seq, seen: now, live: live}
	wasLive := ok && old.live && !t.expired(old, now)
	return true, wasLive != live || (live && !t.spec.same(old.val, v))
}

// put sets origin's value without the staleness check and without changing
// its sequence number; the local peer uses it for a change not yet
// published.
func (t *table[T]) put(origin peer.ID, v T, now time.Time) (changed bool) {
	old, ok := t.recs[origin]
	live := t.spec.live(v)
	t.recs[origin] = record[T]{val: v, seq: old.seq, seen: now, live: live}
	wasLive := ok && old.live && !t.expired(old, now)
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
	t.recs[origin] = r
	return true
}

func (t *table[T]) expired(r record[T], now time.Time) bool { return now.Sub(r.seen) > t.ttl }

// get returns origin's live, unexpired value.
func (t *table[T]) get(origin peer.ID, now time.Time) (T, bool) {
	r, ok := t.recs[origin]
	if !ok || !r.live || t.expired(r, now) {
		var zero T
		return zero, false
	}
	return r.val, true
}

// each calls fn for every live, unexpired value, in no particular order.
func (t *table[T]) each(now time.Time, fn func(origin peer.ID, v T)) {
	for id, r := range t.recs {
		if r.live && !t.expired(r, now) {
			fn(id, r.val)
		}
	}
}

// expire deletes the records older than the TTL, tombstones included, and
// reports whether a live one was among them.
func (t *table[T]) expire(now time.Time) (changed bool) {
	for id, r := range t.recs {
		if t.expired(r, now) {
			delete(t.recs, id)
			changed = changed || r.live
		}
	}
	return changed
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

	kick   chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// newFeed returns a feed that is not attached to any topic.
func newFeed[T any](cfg feedConfig, spec *feedSpec[T]) *feed[T] {
	return &feed[T]{cfg: cfg, spec: spec, tab: newTable(spec, cfg.ttl), kick: make(chan struct{}, 1)}
}

// joinFeed joins cfg.topic on ps with the feed's validator and starts its
// receive and republish loops.
func joinFeed[T any](ps *pubsub.PubSub, cfg feedConfig, spec *feedSpec[T]) (*feed[T], error) {
	f := newFeed(cfg, spec)
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
	stale := f.tab.stale(origin, f.spec.seq(v))
	f.mu.Unlock()
	if stale {
		f.n.ignored.Add(1)
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
			f.mu.Unlock()
			if !recent {
				f.publish(ctx)
			}
			f.mu.Lock()
			changed := f.tab.expire(f.cfg.now())
			f.mu.Unlock()
			if changed {
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
				f.publish(ctx)
			}
		}
	}
}

// publish sends the local value, if any, under a new sequence number. A
// value that is not live is sent once and then cleared.
func (f *feed[T]) publish(ctx context.Context) {
	f.mu.Lock()
	if f.local == nil {
		f.pending = false
		f.mu.Unlock()
		return
	}
	now := f.cfg.now()
	seq := max(uint64(now.UnixNano()), f.lastSeq+1)
	f.lastSeq, f.lastPub, f.pending = seq, now, false
	v := *f.local
	f.spec.setSeq(&v, seq)
	if !f.spec.live(v) {
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
		return
	}
	f.n.published.Add(1)
	if f.topic == nil {
		return
	}
	if err := f.topic.Publish(ctx, data); err != nil && ctx.Err() == nil {
		f.cfg.log.Warn("gossip: publish "+f.spec.kind, "topic", f.cfg.topic, "err", err)
	}
}

// set replaces the local value (nil: none, and our entry goes) and publishes
// it at once if it changed, unless the last publication was less than the
// minimum gap ago and the change is not urgent: then it goes out when the
// gap has passed. A value that fails to encode is refused.
func (f *feed[T]) set(ctx context.Context, v *T) error {
	if v == nil {
		f.mu.Lock()
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
	old := f.local
	if old != nil && f.spec.live(nv) && f.spec.same(*old, nv) {
		f.mu.Unlock()
		return nil // the next republication carries it
	}
	now := f.cfg.now()
	if f.spec.urgent(old, nv) || !f.spec.live(nv) || f.cfg.minGap <= 0 || now.Sub(f.lastPub) >= f.cfg.minGap {
		f.local = &nv
		f.mu.Unlock()
		f.publish(ctx)
		return nil
	}
	f.spec.setSeq(&nv, f.lastSeq)
	f.local, f.pending = &nv, true
	changed := f.tab.put(f.cfg.self, nv, now)
	f.mu.Unlock()
	if changed {
		f.cfg.changed()
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
	return nil
}

// forget withdraws p's value.
func (f *feed[T]) forget(p peer.ID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tab.remove(p)
}

func (f *feed[T]) stats() FeedStats {
	return FeedStats{Accepted: f.n.accepted.Load(), Rejected: f.n.rejected.Load(), Ignored: f.n.ignored.Load(),
		Published: f.n.published.Load()}
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
