package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
// topic, and announces this peer on it.
type Membership struct {
	cfg   MembershipConfig
	ps    *pubsub.PubSub
	topic *pubsub.Topic
	sub   *pubsub.Subscription
	self  peer.ID
	log   *slog.Logger

	mu      sync.Mutex
	view    *View
	local   Announcement
	left    bool // Leave was called: SetLocal changes nothing any more
	changes chan struct{}
	n       feedCounters

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// JoinMembership joins the membership topic on ps, with a validator that
// rejects malformed and forged announcements and ignores stale ones. self is
// the local peer, the author of ps's messages. Call SetLocal to start
// announcing, and Close to leave.
func JoinMembership(ps *pubsub.PubSub, self peer.ID, cfg MembershipConfig) (*Membership, error) {
	if cfg.Network == "" {
		return nil, fmt.Errorf("%w: empty network name", ErrBadConfig)
	}
	if cfg.Interval <= 0 {
		return nil, fmt.Errorf("%w: announce interval %v, want > 0", ErrBadConfig, cfg.Interval)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 3 * cfg.Interval
	}
	if cfg.TTL < cfg.Interval {
		return nil, fmt.Errorf("%w: TTL %v is shorter than the announce interval %v", ErrBadConfig, cfg.TTL, cfg.Interval)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Membership{
		cfg: cfg, ps: ps, self: self, log: cfg.Logger,
		view:    NewView(cfg.TTL),
		changes: make(chan struct{}, 1),
	}
	topic, sub, err := subscribe(ps, MembershipTopic(cfg.Network), m.validate)
	if err != nil {
		return nil, err
	}
	m.topic, m.sub = topic, sub
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.done.Add(2)
	go m.receive(ctx)
	go m.announce(ctx)
	return m, nil
}

func (m *Membership) validate(_ context.Context, from peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	origin := msg.GetFrom()
	if origin == m.self && from == m.self {
		return pubsub.ValidationAccept // our own, already in the view
	}
	if m.cfg.Refuse != nil && m.cfg.Refuse(origin) {
		m.n.ignored.Add(1)
		return pubsub.ValidationIgnore
	}
	a, err := DecodeAnnouncement(origin, msg.Data)
	if err != nil {
		m.log.Debug("membership: rejected announcement", "origin", origin, "via", from, "err", err)
		m.n.rejected.Add(1)
		if m.cfg.Rejected != nil {
			m.cfg.Rejected(from, err)
		}
		return pubsub.ValidationReject
	}
	m.mu.Lock()
	stale := m.view.Stale(a)
	m.mu.Unlock()
	if stale {
		m.n.ignored.Add(1)
		return pubsub.ValidationIgnore
	}
	msg.ValidatorData = a
	m.n.accepted.Add(1)
	return pubsub.ValidationAccept
}

// Stats counts what the validator decided about other peers'
// announcements (Published stays 0).
func (m *Membership) Stats() FeedStats {
	return FeedStats{Accepted: m.n.accepted.Load(), Rejected: m.n.rejected.Load(), Ignored: m.n.ignored.Load()}
}

func (m *Membership) receive(ctx context.Context) {
	defer m.done.Done()
	for {
		msg, err := m.sub.Next(ctx)
		if err != nil {
			return // cancelled or subscription closed
		}
		a, ok := msg.ValidatorData.(Announcement)
		if !ok {
			continue // our own message
		}
		m.mu.Lock()
		_, changed := m.view.Apply(a, time.Now())
		m.mu.Unlock()
		if changed {
			m.notify()
		}
	}
}

// announce publishes the local announcement every interval and expires stale
// entries.
func (m *Membership) announce(ctx context.Context) {
	defer m.done.Done()
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = m.publish(ctx) // a failure is logged; the next interval retries
		m.mu.Lock()
		gone := m.view.Expire(time.Now(), m.cfg.Connected)
		m.mu.Unlock()
		if len(gone) > 0 {
			m.log.Debug("membership: expired", "peers", len(gone), "ids", fmt.Sprint(gone))
			m.notify()
		}
	}
}

func (m *Membership) publish(ctx context.Context) error {
	m.mu.Lock()
	a := m.local
	if a.ID == "" {
		m.mu.Unlock()
		return nil // nothing to say yet
	}
	// Rising even if the clock steps back, or receivers drop it as stale.
	a.Seq = max(uint64(time.Now().UnixNano()), m.local.Seq+1)
	m.local.Seq = a.Seq
	m.view.Apply(a, time.Now())
	m.mu.Unlock()
	data, err := a.Encode()
	if err != nil {
		m.log.Warn("membership: encode", "err", err)
		return err
	}
	if err := m.topic.Publish(ctx, data); err != nil {
		if ctx.Err() == nil {
			m.log.Warn("membership: publish", "err", err)
		}
		return err
	}
	return nil
}

func (m *Membership) notify() {
	select {
	case m.changes <- struct{}{}:
	default:
	}
}

// SetLocal sets this peer's announcement and publishes it at once if its
// role, cluster, reachability or addresses changed. a.ID must be the local peer.
func (m *Membership) SetLocal(ctx context.Context, a Announcement) error {
	if a.ID != m.self {
		return fmt.Errorf("%w: announcement for %s, local peer is %s", ErrBadAnnouncement, a.ID, m.self)
	}
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return nil // saying goodbye: the goodbye stands
	}
	old := m.local
	m.local = a
	m.local.Seq = old.Seq
	same := old.ID != "" && sameSaying(old, a)
	m.mu.Unlock()
	if !same {
		_ = m.publish(ctx) // a failure is logged; the next interval retries
		m.notify()
	}
	return nil
}

// Leave publishes this peer's goodbye (Announcement.Leaving): the peers
// that hear it drop it from their views at once, rather than after the
// TTL or when its connections close. Later announcements, periodic ones
// included, are goodbyes too, and SetLocal changes nothing any more. Call
// it before closing the host, so that the goodbye goes out. It returns
// the publish's error; nothing is sent when SetLocal was never called.
func (m *Membership) Leave(ctx context.Context) error {
	m.mu.Lock()
	m.left = true
	m.local.Leaving = true
	m.mu.Unlock()
	return m.publish(ctx)
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
func (m *Membership) Close() error {
	m.cancel()
	m.sub.Cancel()
	m.done.Wait()
	err := m.topic.Close()
	if uerr := m.ps.UnregisterTopicValidator(MembershipTopic(m.cfg.Network)); err == nil {
		err = uerr
	}
	return err
}
