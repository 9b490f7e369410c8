package overlay

import (
	"context"
	"testing"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/testnet/attack"
)

// TestBannedRedial (issue 19, finding 8): a banned peer that redials as
// fast as it can. Each of its connections went through a full security
// handshake before the node closed it: 50 redials, 50 handshakes. Now
// the connection gater refuses it once its handshake names it, and
// penalises its address: the connections from it are refused before the
// handshake while the penalty lasts, and each handshake it gets through
// doubles the penalty; so 50 redials make a handful of handshakes. The
// honest peers on the same address (loopback) keep their connections and
// their roles, and none is banned. Over TCP and over QUIC, which asks the
// gater only after its handshake: there the resource manager refuses
// first (penaltyRM; without it, 50 redials over QUIC made 50 handshakes).
func TestBannedRedial(t *testing.T) {
	for _, listen := range []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"} {
		t.Run(listen, func(t *testing.T) { testBannedRedial(t, ma.StringCast(listen)) })
	}
}

func testBannedRedial(t *testing.T, listen ma.Multiaddr) {
	ctx := context.Background()
	keys := keysByDistance(t, 2)
	count := &handshakes{}
	a := oneCluster(t, keys[0], WithReachability(ReachabilityPublic), WithConnectionGater(count), WithListenAddrs(listen))
	b := oneCluster(t, keys[1], WithReachability(ReachabilityPublic), WithBootstrapAddrs(a.P2PAddrs()...), WithListenAddrs(listen))
	agree := func() bool {
		return len(a.State().Members) == 2 && len(b.State().Members) == 2 && b.State().Superpeer.ID == a.ID() && a.State().Role == RoleSuperpeer
	}
	waitFor(t, "a and b to agree", agree)

	h := plainHost(t)
	count.mu.Lock()
	count.of = h.ID()
	count.mu.Unlock()
	target := peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()}
	if err := h.Connect(ctx, target); err != nil {
		t.Fatal(err)
	}
	attack.Provoke(ctx, h, a.ID(), "default")
	waitFor(t, "a to ban h", func() bool { return a.guard.Banned(h.ID()) })
	waitFor(t, "a to disconnect h", func() bool { return h.Network().Connectedness(a.ID()) != network.Connected })
	before := count.n()

	const redials = 50
	r := attack.Redial(ctx, h, target, redials)
	got := count.n() - before
	t.Logf("%d redials: %d connected, %d handshakes at a; a refused %v", r.Attempts, r.Connected, got, a.Status().Refused)
	// The penalty doubles from a second to ten: a few handshakes while
	// the redials take their 5 s (refusalPace each), 8 if they took a
	// minute.
	if got > 8 {
		t.Errorf("a made %d handshakes with the banned peer over %d redials, want a handful", got, redials)
	}
	if r := a.Status().Refused; r["accept"]["banned"] < redials-8 {
		t.Errorf("a refused %d connections before the handshake, want nearly all %d", r["accept"]["banned"], redials)
	}
	if a.guard.Banned(b.ID()) || b.guard.Banned(a.ID()) {
		t.Error("an honest node is banned")
	}
	if a.Host().Network().Connectedness(b.ID()) != network.Connected {
		t.Error("a lost its connection to b")
	}
	waitFor(t, "a and b to agree still", agree)
}
