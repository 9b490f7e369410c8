package attack

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The redial of issue 19's finding 8: a banned client that redials the
// moment it is disconnected.

// Provoke sends h's target p five bad frames on the overlay's closer
// protocol (an unknown version, each a strike): enough for a ban.
func Provoke(ctx context.Context, h host.Host, p peer.ID, network string) {
	for range 5 {
		_, _ = Send(ctx, h, p, Protocol(network, "closer"), Frame(WireVersion+1, FrameCloser, make([]byte, 32)), 5*time.Second)
	}
}

// Redialed counts a redial's attempts.
type Redialed struct {
	// Attempts counts the dials made; Connected those that came through
	// (the target took the connection, if only to close it).
	Attempts, Connected int
}

// Redial dials p from h n times (or until ctx ends), each time a new
// connection, without the dial backoff a polite client keeps, and closes
// each that opens: a banned client redialling as fast as it can.
func Redial(ctx context.Context, h host.Host, p peer.AddrInfo, n int) Redialed {
	h.Peerstore().AddAddrs(p.ID, p.Addrs, time.Hour)
	var r Redialed
	for range n {
		if ctx.Err() != nil {
			break
		}
		r.Attempts++
		dctx, cancel := context.WithTimeout(network.WithForceDirectDial(ctx, "attack"), 10*time.Second)
		c, err := h.Network().DialPeer(dctx, p.ID)
		cancel()
		if err == nil && c != nil {
			r.Connected++
		}
		_ = h.Network().ClosePeer(p.ID)
	}
	return r
}
