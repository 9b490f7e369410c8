package overlay

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// TestLoopbackRedialKeepsSource: a node that listens on a loopback
// address of its own (testnet --procs) dials over TCP from that address,
// also when the 4-tuple of its listen port and the peer's is taken: here
// by the peer's connection to it, when it dials a second connection back
// (as when two nodes dial each other at once). go-libp2p's reuseport
// dialer binds the listen port, and when that fails it dials again from a
// kernel-chosen address, which for a loopback destination is 127.0.0.1:
// the address every node's fallback dials share, whose identities the
// register protocol refuses as crowded beyond MaxPerAddr
// (transportOptions).
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
	if err := a.Host().Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()}); err != nil {
		t.Fatalf("dial: %v", err)
	}
	// Connect returns when a has the connection; b may take it a moment
	// later.
	var conns []network.Conn
	for deadline := time.Now().Add(10 * time.Second); len(conns) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		conns = b.Host().Network().ConnsToPeer(a.ID())
	}
	if len(conns) == 0 {
		t.Fatal("b has no connection from a")
	}
	for _, c := range conns {
		if ip, err := manet.ToIP(c.RemoteMultiaddr()); err != nil || ip.String() != "127.1.0.60" {
			t.Errorf("b sees a at %s, want 127.1.0.60", c.RemoteMultiaddr())
		}
	}
	// A second connection, b to a, dialed by b's TCP transport itself:
	// the swarm would reuse the first.
	at := a.Host().Addrs()[0]
	tr := b.Host().Network().(*swarm.Swarm).TransportForDialing(at)
	if tr == nil {
		t.Fatalf("b has no transport for %s", at)
	}
	c, err := tr.Dial(ctx, at, a.ID())
	if err != nil {
		t.Fatalf("dial back: %v", err)
	}
	defer c.Close()
	if ip, err := manet.ToIP(c.LocalMultiaddr()); err != nil || ip.String() != "127.1.0.61" {
		t.Errorf("b dialed a from %s, want 127.1.0.61", c.LocalMultiaddr())
	}
}

// Only a host on loopback alone, on one address of its own, dials TCP
// from it; the others keep go-libp2p's transports.
func TestTransportOptionsLoopbackOnly(t *testing.T) {
	for _, c := range []struct {
		listen []string
		pinned bool
	}{
		{[]string{"/ip4/127.1.0.5/tcp/0", "/ip4/127.1.0.5/udp/0/quic-v1"}, true},
		{[]string{"/ip4/127.1.0.5/tcp/0", "/ip4/0.0.0.0/tcp/4001"}, false},
		{[]string{"/ip4/127.1.0.5/tcp/0", "/ip6/::1/tcp/0"}, true},
		{[]string{"/ip4/127.0.0.1/tcp/0"}, false},
		{[]string{"/ip4/127.1.0.5/tcp/0", "/ip4/127.1.0.6/tcp/0"}, false},
		{[]string{"/ip4/0.0.0.0/tcp/0"}, false},
	} {
		var listen []ma.Multiaddr
		for _, a := range c.listen {
			listen = append(listen, ma.StringCast(a))
		}
		if got := transportOptions(listen, false) != nil; got != c.pinned {
			t.Errorf("transportOptions(%v): pinned %v, want %v", c.listen, got, c.pinned)
		}
	}
}
