package testnet

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// Traffic counts the bytes the nodes of an in-process testnet write to
// their streams, by protocol (GossipSub's /meshsub, the DHT's /kad, the
// overlay's election, lookup, token, attach and ping protocols). It is what
// the applications above the stream muxer send: mocknet has no encryption
// and no muxer, so a real TCP connection adds Noise and yamux framing (a few
// dozen bytes per message) and TCP/IP headers on top. Streams that
// basichost serves itself (identify) are not counted. Safe for concurrent
// use.
type Traffic struct {
	mu      sync.Mutex
	byProto map[protocol.ID]*atomic.Uint64
}

func newTraffic() *Traffic { return &Traffic{byProto: map[protocol.ID]*atomic.Uint64{}} }

// counter returns the counter of protocol p, made on first use.
func (t *Traffic) counter(p protocol.ID) *atomic.Uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byProto[p]
	if c == nil {
		c = new(atomic.Uint64)
		t.byProto[p] = c
	}
	return c
}

// Bytes returns the bytes written so far, by protocol; a stream written to
// before its protocol was known counts under "". The map is the caller's.
func (t *Traffic) Bytes() map[protocol.ID]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[protocol.ID]uint64, len(t.byProto))
	for p, c := range t.byProto {
		out[p] = c.Load()
	}
	return out
}

// countingHost is a host whose streams count what is written to them.
type countingHost struct {
	host.Host
	t *Traffic
}

func (h countingHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	return &countingStream{Stream: s, t: h.t}, nil
}

func (h countingHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, h.wrap(handler))
}

func (h countingHost) SetStreamHandlerMatch(pid protocol.ID, m func(protocol.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, m, h.wrap(handler))
}

func (h countingHost) wrap(handler network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) { handler(&countingStream{Stream: s, t: h.t}) }
}

// countingStream counts its writes under its protocol, looked up once the
// protocol is known.
type countingStream struct {
	network.Stream
	t *Traffic
	c atomic.Pointer[atomic.Uint64]
}

func (s *countingStream) Write(p []byte) (int, error) {
	n, err := s.Stream.Write(p)
	c := s.c.Load()
	if c == nil {
		pid := s.Stream.Protocol()
		c = s.t.counter(pid)
		if pid != "" {
			s.c.Store(c)
		}
	}
	c.Add(uint64(n))
	return n, err
}
