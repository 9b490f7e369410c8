package attack

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// WireVersion is the version byte of the overlay's stream frames
// (overlay/wire.go).
const WireVersion = 1

// Frame types of the overlay's stream protocols (overlay/wire.go).
const (
	FrameCloser = 1 // closer request: a 32-byte key
	FramePeers  = 2 // closer response
	FrameToken  = 3 // token pass: number and sequence, 8 bytes each
	FrameAttach = 4 // attach request: empty
	FrameAnswer = 5 // token and attach response
)

// Protocol is the stream protocol named name ("closer", "token",
// "attach", "election" or "vouch") of the overlay on a network.
func Protocol(network, name string) protocol.ID {
	v := map[string]string{"closer": "2.0.0", "token": "3.0.0", "attach": "3.0.0", "election": "1.0.0", "vouch": "1.0.0"}[name]
	return protocol.ID(fmt.Sprintf("/superpeer/%s/%s/%s", network, name, v))
}

// Frame is one frame of the overlay's wire: the length (uvarint) of what
// follows, the version, the type, the payload.
func Frame(version, typ byte, payload []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(payload)+2))
	return append(append(b, version, typ), payload...)
}

// NewHost is a plain libp2p host on a loopback TCP port: the attacker's
// own, which the overlay knows nothing of. Close it when done.
func NewHost(opts ...libp2p.Option) (host.Host, error) {
	return libp2p.New(append([]libp2p.Option{libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0")}, opts...)...)
}

// Send opens a stream from h to p on proto, writes data, closes its
// write side and waits (at most wait) for the answer or the reset; the
// answer's first byte is returned if there was one. An error means the
// stream did not open (refused, banned, disconnected).
func Send(ctx context.Context, h host.Host, p peer.ID, proto protocol.ID, data []byte, wait time.Duration) ([]byte, error) {
	s, err := h.NewStream(ctx, p, proto)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	_, _ = s.Write(data)
	_ = s.CloseWrite()
	_ = s.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 1)
	n, _ := s.Read(buf)
	return buf[:n], nil
}
