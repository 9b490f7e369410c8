package overlay

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// TestLoopbackRedialKeepsSource: a node that listens on a loopback
// address of its own (testnet --procs) shows that address to the peers it
// dials over TCP, also when it dials a peer again at once after closing
// its connection. The first dial binds the listen port (reuseport), the
// closed socket waits in TIME-WAIT on that 4-tuple, and go-libp2p's
// reuseport dialer then dials again from a kernel-chosen address, which
// for a loopback destination is 127.0.0.1: the address every node's
// fallback dials share, whose identities the register protocol refuses as
// crowded beyond MaxPerAddr.
func TestLoopbackRedialKeepsSource(t *testing.T) {
	start := func(ip string) *Node {
		nd, err := New(context.Background(), WithListenAddrs(ma.StringCast("/ip4/"+ip+"/tcp/0")), WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		return nd
	}
	a, b := start("127.1.0.60"), start("127.1.0.61")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 4 {
		if err := a.Host().Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()}); err != nil {
			t.Fatalf("round %d: dial: %v", round, err)
		}
		conns := b.Host().Network().ConnsToPeer(a.ID())
		if len(conns) == 0 {
			t.Fatalf("round %d: b has no connection from a", round)
		}
		for _, c := range conns {
			ip, err := manet.ToIP(c.RemoteMultiaddr())
			if err != nil || ip.String() != "127.1.0.60" {
				t.Errorf("round %d: b sees a at %s, want 127.1.0.60", round, c.RemoteMultiaddr())
			}
		}
		// b dials a too while a's connection is open: from b's listen
		// port to a's, the 4-tuple of a's connection.
		if _, err := b.Host().Network().DialPeer(network.WithForceDirectDial(ctx, "test"), a.ID()); err != nil {
			t.Fatalf("round %d: dial back: %v", round, err)
		}
		for _, c := range a.Host().Network().ConnsToPeer(b.ID()) {
			ip, err := manet.ToIP(c.RemoteMultiaddr())
			if err != nil || ip.String() != "127.1.0.61" {
				t.Errorf("round %d: a sees b at %s, want 127.1.0.61", round, c.RemoteMultiaddr())
			}
		}
		if err := a.Host().Network().ClosePeer(b.ID()); err != nil {
			t.Fatal(err)
		}
	}
}
