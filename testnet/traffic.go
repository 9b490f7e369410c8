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

// Traffic counts the bytes the nodes of an in-process testnet write to and
// read from their streams, by node and by protocol (GossipSub's /meshsub,
// the DHT's /kad, the overlay's election, lookup, register, token, attach
// and ping protocols). It is what the applications above the stream muxer
// send: mocknet has no encryption and no muxer, so a real TCP connection
// adds Noise and yamux framing (a few dozen bytes per message) and TCP/IP
// headers on top. Streams that basichost serves itself (identify) are not
// counted. Every byte written by one node is read by another, so the
// network's sent and received totals agree but for what is in flight and
// what a reader dropped unread. Safe for concurrent use.
type Traffic struct {
	mu     sync.Mutex
	byNode map[peer.ID]*nodeTraffic
}

// nodeTraffic is one node's counters: sent and received, by protocol.
type nodeTraffic struct {
	t          *Traffic
	sent, recv map[protocol.ID]*atomic.Uint64
}

func newTraffic() *Traffic { return &Traffic{byNode: map[peer.ID]*nodeTraffic{}} }

// node returns the counters of node id, made on first use.
func (t *Traffic) node(id peer.ID) *nodeTraffic {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.byNode[id]
	if n == nil {
		n = &nodeTraffic{t: t, sent: map[protocol.ID]*atomic.Uint64{}, recv: map[protocol.ID]*atomic.Uint64{}}
		t.byNode[id] = n
	}
	return n
}

// counter returns the counter of protocol p in m (one of n's maps), made
// on first use.
func (n *nodeTraffic) counter(m map[protocol.ID]*atomic.Uint64, p protocol.ID) *atomic.Uint64 {
	n.t.mu.Lock()
	defer n.t.mu.Unlock()
	c := m[p]
	if c == nil {
		c = new(atomic.Uint64)
		m[p] = c
	}
	return c
}

// NodeBytes is one node's traffic so far, by protocol: what it wrote to
// its streams and what it read from them.
type NodeBytes struct {
	Sent, Received map[protocol.ID]uint64
}

// Total is the node's bytes sent and received, all protocols.
func (b NodeBytes) Total() uint64 {
	var sum uint64
	for _, v := range b.Sent {
		sum += v
	}
	for _, v := range b.Received {
		sum += v
	}
	return sum
}

// Sub returns b less an earlier reading a, protocol by protocol.
func (b NodeBytes) Sub(a NodeBytes) NodeBytes {
	d := NodeBytes{Sent: map[protocol.ID]uint64{}, Received: map[protocol.ID]uint64{}}
	for p, v := range b.Sent {
		d.Sent[p] = v - a.Sent[p]
	}
	for p, v := range b.Received {
		d.Received[p] = v - a.Received[p]
	}
	return d
}

// Bytes returns the bytes written so far by all nodes, by protocol; a
// stream written to before its protocol was known counts under "". The
// map is the caller's.
func (t *Traffic) Bytes() map[protocol.ID]uint64 {
	out := map[protocol.ID]uint64{}
	for _, b := range t.Nodes() {
		for p, v := range b.Sent {
			out[p] += v
		}
	}
	return out
}

// Nodes returns every node's traffic so far, sent and received by
// protocol, stopped nodes included (until they stopped). The maps are the
// caller's.
func (t *Traffic) Nodes() map[peer.ID]NodeBytes {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[peer.ID]NodeBytes, len(t.byNode))
	for id, n := range t.byNode {
		b := NodeBytes{Sent: make(map[protocol.ID]uint64, len(n.sent)), Received: make(map[protocol.ID]uint64, len(n.recv))}
		for p, c := range n.sent {
			b.Sent[p] = c.Load()
		}
		for p, c := range n.recv {
			b.Received[p] = c.Load()
		}
		out[id] = b
	}
	return out
}

// countingHost is a host whose streams count what is written to and read
// from them, as node n's traffic.
type countingHost struct {
	host.Host
	n    *nodeTraffic
	live *liveStreams // nil: not tracked
}

func (h countingHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	return h.live.add(&countingStream{Stream: s, n: h.n, live: h.live}), nil
}

func (h countingHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, h.wrap(handler))
}

func (h countingHost) SetStreamHandlerMatch(pid protocol.ID, m func(protocol.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, m, h.wrap(handler))
}

func (h countingHost) wrap(handler network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) { handler(h.live.add(&countingStream{Stream: s, n: h.n, live: h.live})) }
}

// countingStream counts its writes and reads under its protocol, looked up
// once the protocol is known.
type countingStream struct {
	network.Stream
	n    *nodeTraffic
	live *liveStreams
	w, r atomic.Pointer[atomic.Uint64]
}

func (s *countingStream) Close() error {
	s.live.remove(s)
	return s.Stream.Close()
}

func (s *countingStream) Reset() error {
	s.live.remove(s)
	return s.Stream.Reset()
}

func (s *countingStream) ResetWithError(code network.StreamErrorCode) error {
	s.live.remove(s)
	return s.Stream.ResetWithError(code)
}

// liveStreams holds a node's streams that it has neither closed nor
// reset, by remote peer, so that the fabric can reset them when it cuts
// the node's links or stops the node. A mocknet stream opened while its
// connection closes joins the connection after the close has reset the
// connection's streams (mocknet's openStream adds both ends
// asynchronously), and lives on between its two owners, who see no
// error: seen as a GossipSub stream whose two ends were still reading at
// the end of a test, which a synctest bubble fails on ("blocked
// goroutines remain"), and it could carry messages across a partition. A
// real transport closes every stream of a closed connection; this does
// the same. A stream that arrives on a closed connection, or after the
// node stopped (reset of all), is reset at once. The methods of a nil
// *liveStreams do nothing.
type liveStreams struct {
	mu      sync.Mutex
	by      map[peer.ID]map[*countingStream]struct{}
	stopped bool
}

func (l *liveStreams) add(s *countingStream) *countingStream {
	if l == nil {
		return s
	}
	c := s.Conn()
	l.mu.Lock()
	late := l.stopped || c.IsClosed()
	if !late {
		if l.by == nil {
			l.by = map[peer.ID]map[*countingStream]struct{}{}
		}
		p := c.RemotePeer()
		if l.by[p] == nil {
			l.by[p] = map[*countingStream]struct{}{}
		}
		l.by[p][s] = struct{}{}
	}
	l.mu.Unlock()
	if late {
		_ = s.Stream.Reset()
	}
	return s
}

func (l *liveStreams) remove(s *countingStream) {
	if l == nil {
		return
	}
	p := s.Conn().RemotePeer()
	l.mu.Lock()
	delete(l.by[p], s)
	if len(l.by[p]) == 0 {
		delete(l.by, p)
	}
	l.mu.Unlock()
}

// reset resets the streams still held to peer p; with p empty, every
// stream, and every stream added later (the node stopped).
func (l *liveStreams) reset(p peer.ID) {
	if l == nil {
		return
	}
	var ss []*countingStream
	l.mu.Lock()
	take := func(q peer.ID) {
		for s := range l.by[q] {
			ss = append(ss, s)
		}
		delete(l.by, q)
	}
	if p != "" {
		take(p)
	} else {
		for q := range l.by {
			take(q)
		}
		l.stopped = true
	}
	l.mu.Unlock()
	for _, s := range ss {
		_ = s.Stream.Reset()
	}
}

func (s *countingStream) Write(p []byte) (int, error) {
	n, err := s.Stream.Write(p)
	s.count(&s.w, s.n.sent, n)
	return n, err
}

func (s *countingStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	if n > 0 {
		s.count(&s.r, s.n.recv, n)
	}
	return n, err
}

// count adds n bytes to the stream's counter in m, cached in c once the
// stream's protocol is known.
func (s *countingStream) count(c *atomic.Pointer[atomic.Uint64], m map[protocol.ID]*atomic.Uint64, n int) {
	ctr := c.Load()
	if ctr == nil {
		pid := s.Stream.Protocol()
		ctr = s.n.counter(m, pid)
		if pid != "" {
			c.Store(ctr)
		}
	}
	ctr.Add(uint64(n))
}
