package overlay

import (
	"context"
	"testing"
	"time"

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
// doubles the penalty; so its redials for redialFor make a handful of
// handshakes. The honest peers on the same address (loopback) keep their
// connections and their roles, and none is banned. Over TCP, whose
// refusals the gater paces (about 60 attempts in redialFor), and over
// QUIC, where the node's socket drops the packets that would open a
// connection from the penalised address (penaltyConn): the client hears
// nothing and waits out its handshake timeout, so it makes a few
// attempts, not the 1,800 a second that quic-go's immediate refusals
// (penaltyRM alone) let it make.
func TestBannedRedial(t *testing.T) {
	for _, listen := range []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"} {
		t.Run(listen, func(t *testing.T) { testBannedRedial(t, ma.StringCast(listen)) })
	}
}

// redialFor is how long TestBannedRedial's banned peer redials.
const redialFor = 6 * time.Second

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

	rctx, cancel := context.WithTimeout(ctx, redialFor)
	r := attack.Redial(rctx, h, target, 1<<30)
	cancel()
	got := count.n() - before
	refused := a.Status().Refused["accept"]["banned"]
	t.Logf("redials for %v: %d attempts, %d connected, %d handshakes at a; a refused %v", redialFor, r.Attempts, r.Connected, got, a.Status().Refused)
	// Over QUIC a's gater does not see every handshake: quic-go makes it
	// before go-libp2p's listener takes the connection and asks the
	// gater, and the banned peer closes each connection at once; some
	// of them never reach the gater (idle: 4 or 5 attempts, 3 or 4
	// connected, 2 at a's gater; under make test's load once 7, 6 and 2,
	// which failed the bound on attempts below when only the gater's
	// count was taken as the handshakes). Why they do not reach it was
	// not traced (go-libp2p's listener.go; doubling the penalty at a
	// refused InterceptAccept, where QUIC names the peer, did not change
	// the counts). The banned peer's count of the connections it
	// completed counts them all.
	got = max(got, r.Connected)
	// The penalty doubles from a second to ten: three handshakes in
	// redialFor, 8 if the redials went on for a minute.
	if got > 8 {
		t.Errorf("a made %d handshakes with the banned peer over %d redials, want a handful", got, r.Attempts)
	}
	// Every attempt without a handshake was refused before it (QUIC
	// counts each dropped packet, and a client resends its first), but
	// the last, which the deadline may cut short.
	if refused+1 < uint64(r.Attempts-got) {
		t.Errorf("a refused %d attempts before the handshake, want the %d that made none", refused, r.Attempts-got)
	}
	// Over QUIC an attempt a drops waits out the client's handshake
	// timeout (5 s): one or two in redialFor, besides the handshakes.
	if listen.String() == "/ip4/127.0.0.1/udp/0/quic-v1" && r.Attempts > got+4 {
		t.Errorf("the banned peer made %d attempts over QUIC in %v: a answered the ones it refused", r.Attempts, redialFor)
	}
	if a.guard.Banned(b.ID()) || b.guard.Banned(a.ID()) {
		t.Error("an honest node is banned")
	}
	if a.Host().Network().Connectedness(b.ID()) != network.Connected {
		t.Error("a lost its connection to b")
	}
	waitFor(t, "a and b to agree still", agree)
}
