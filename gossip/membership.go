package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// MembershipTopic is the name of the membership topic of an overlay network.
func MembershipTopic(network string) string {
	return fmt.Sprintf("/superpeer/%s/members/%d", network, AnnouncementVersion)
}

// MembershipConfig configures a Membership.
type MembershipConfig struct {
	// Network names the overlay; it keeps topics of different overlays apart.
	Network string
	// Interval is the time between two announcements of this peer.
	Interval time.Duration
	// TTL is how long an announcement stays in the view without a refresh.
	// Zero means three intervals.
	TTL time.Duration
	// Logger receives rejections; nil means slog.Default().
	Logger *slog.Logger
	// Connected, when set, reports whether this peer holds a live connection
	// to a peer; such peers do not expire (their liveness is known
	// first-hand), so departures are seen when the connection drops and the
	// announce interval can be long. Nil: expiry by TTL alone.
	Connected func(peer.ID) bool
	// Refuse, when set, names origins whose announcements are ignored
	// (neither accepted nor forwarded): peers the overlay banned. Ignored,
	// not rejected, so the honest peers that relay them are not scored
	// down.
	Refuse func(origin peer.ID) bool
	// Rejected, when set, is told of every rejected announcement and the
	// peer that sent it to us (GossipSub validates before it forwards, so
	// an honest peer sends none): the overlay counts it against that peer.
	Rejected func(from peer.ID, err error)
}

// ErrBadConfig reports an unusable configuration.
var ErrBadConfig = errors.New("gossip: bad configuration")

// Membership keeps the membership view of one overlay from its GossipSub
// topic, and announces this peer on it. It is a feed of announcements
// (feed.go) whose table is read as a View.
type Membership struct {
	*feed[Announcement]
	view    *View // the feed's table; read under the feed's lock
	changes chan struct{}
}

// JoinMembership joins the membership topic on ps, with a validator that
// rejects malformed and forged announcements and ignores stale ones. self is
// the local peer, the author of ps's messages. Call SetLocal to start
// announcing, and Close to leave.
func JoinMembership(ps *pubsub.PubSub, self peer.ID, cfg MembershipConfig) (*Membership, error) {
	m, fc, err := newMembership(self, cfg)
	if err != nil {
		return nil, err
	}
	f, err := joinFeed(ps, fc, &announcementSpec, nil)
	if err != nil {
		return nil, err
	}
	m.attach(f)
	return m, nil
}

// newMembership checks cfg and returns a Membership without its feed, and
// the feed's configuration (for JoinMembership and for tests).
func newMembership(self peer.ID, cfg MembershipConfig) (*Membership, feedConfig, error) {
	if cfg.Network == "" {
		return nil, feedConfig{}, fmt.Errorf("%w: empty network name", ErrBadConfig)
	}
	if cfg.Interval <= 0 {
		return nil, feedConfig{}, fmt.Errorf("%w: announce interval %v, want > 0", ErrBadConfig, cfg.Interval)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 3 * cfg.Interval
	}
	if cfg.TTL < cfg.Interval {
		return nil, feedConfig{}, fmt.Errorf("%w: TTL %v is shorter than the announce interval %v", ErrBadConfig, cfg.TTL, cfg.Interval)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Membership{changes: make(chan struct{}, 1)}
	// No minimum gap: every change of role, cluster or addresses goes out
	// at once. Entries stay until the republish loop's expiry, which keeps
	// the peers we are connected to.
	fc := feedConfig{
		topic: MembershipTopic(cfg.Network), self: self, interval: cfg.Interval, ttl: cfg.TTL,
		now: time.Now, log: cfg.Logger, changed: m.notify, rejected: cfg.Rejected,
		refuse: cfg.Refuse, keep: cfg.Connected, sweptOnly: true,
	}
	return m, fc, nil
}

// attach gives m its feed.
func (m *Membership) attach(f *feed[Announcement]) { m.feed, m.view = f, &View{t: f.tab} }

// Stats counts what the validator decided about other peers'
// announcements, and the announcements this peer published.
func (m *Membership) Stats() FeedStats { return m.stats() }

func (m *Membership) notify() {
	select {
	case m.changes <- struct{}{}:
	default:
	}
}

// SetLocal sets this peer's announcement and publishes it at once if its
// role, cluster, reachability or addresses changed. a.ID must be the local peer.
func (m *Membership) SetLocal(ctx context.Context, a Announcement) error {
	if a.ID != m.cfg.self {
		return fmt.Errorf("%w: announcement for %s, local peer is %s", ErrBadAnnouncement, a.ID, m.cfg.self)
	}
	return m.set(ctx, &a) // after Leave, nothing: the goodbye stands
}

// Leave publishes this peer's goodbye (Announcement.Leaving): the peers
// that hear it drop it from their views at once, rather than after the
// TTL or when its connections close. Later announcements, periodic ones
// included, are goodbyes too, and SetLocal changes nothing any more. Call
// it before closing the host, so that the goodbye goes out. It returns
// the publish's error; nothing is sent when SetLocal was never called.
func (m *Membership) Leave(ctx context.Context) error {
	return m.seal(ctx, func(a *Announcement) { a.Leaving = true })
}

// Forget drops a peer from the view at once, for instance when the overlay
// found it dead; a later announcement brings it back.
func (m *Membership) Forget(id peer.ID) {
	m.mu.Lock()
	removed := m.view.Remove(id)
	m.mu.Unlock()
	if removed {
		m.notify()
	}
}

// Entries returns the live entries, this peer's included once SetLocal was
// called, sorted by peer ID.
func (m *Membership) Entries() []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view.Entries()
}

// Get returns one peer's live entry.
func (m *Membership) Get(id peer.ID) (Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view.Get(id)
}

// Left reports whether a peer said goodbye (Leave) within the TTL.
func (m *Membership) Left(id peer.ID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view.Left(id)
}

// Len is the number of live entries.
func (m *Membership) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view.Len()
}

// Changes is signalled (coalesced) when a peer joins, leaves or changes its
// role, cluster or addresses.
func (m *Membership) Changes() <-chan struct{} { return m.changes }

// Close stops announcing and leaves the topic.
func (m *Membership) Close() error { return m.close() }
