package overlay

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// TestVouchNoReflection (hostile-peer audit, finding A): strangers' vouch
// requests do not make a node ping the peer they name. Three identities
// that hold no token ask v, within v's per-peer rate, for the RTT it
// measures to x, a peer v knows the addresses of and has never measured
// (most of a swarm lies outside a node's bounded set of samples). v
// answers each from what it keeps (nothing: an RTT of 0) and pings x for
// none of them, so x sees no streams from v to hold against it. On the
// code before, v pinged x once per request, on a fresh stream: the audit's
// attackers, at 45 requests a second each, had x ban v after 4.1 s (250
// refusals over x's per-peer rate, 5 strikes), and here the 120 requests
// made 120 pings of x.
func TestVouchNoReflection(t *testing.T) {
	geo := func(opts ...Option) *Node {
		n, err := New(context.Background(), append([]Option{WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithLogger(quiet),
			WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Superpeers: 1}), WithIntervals(200*time.Millisecond, time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	// v samples once a minute: it has not measured x by the time it is
	// asked (the test does not depend on it: v is not connected to x, so
	// x is none of its samples).
	v, x := geo(WithGeometric(geometric.Config{}, time.Minute, 0)), geo()
	// Count the pings x receives from v.
	var pings atomic.Int64
	x.Host().SetStreamHandler(coordPingProtocol(x.cfg.Network), func(s network.Stream) {
		if s.Conn().RemotePeer() == v.ID() {
			pings.Add(1)
		}
		x.handleCoordPing(s)
	})
	// v knows x's addresses (as from the DHT), and has never measured it.
	v.Host().Peerstore().AddAddrs(x.ID(), x.Host().Addrs(), time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var attackers []host.Host
	for range 3 {
		h := plainHost(t)
		if err := h.Connect(ctx, peer.AddrInfo{ID: v.ID(), Addrs: v.Host().Addrs()}); err != nil {
			t.Fatal(err)
		}
		attackers = append(attackers, h)
	}
	const each = 40 // within v's per-peer burst: none is refused by v's rate
	var answered, zero atomic.Int64
	var wg sync.WaitGroup
	for _, h := range attackers {
		wg.Go(func() {
			for range each {
				s, err := h.NewStream(ctx, v.ID(), vouchProtocol(v.cfg.Network))
				if err != nil {
					t.Error(err)
					return
				}
				_ = writeFrame(s, frameVouch, []byte(x.ID()))
				_ = s.CloseWrite()
				resp, err := readStreamFrame(s, frameAnswer)
				s.Close()
				if err == nil {
					answered.Add(1)
					if len(resp) == 8 && binary.BigEndian.Uint64(resp) == 0 {
						zero.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	refused, _ := x.guard.Refused()
	t.Logf("%d vouch requests, %d answered (%d with no RTT); x got %d pings from v, refused %d over its rate; x banned v: %v",
		len(attackers)*each, answered.Load(), zero.Load(), pings.Load(), refused[[2]string{"ping", "rate"}], x.guard.Banned(v.ID()))
	if n := pings.Load(); n != 0 {
		t.Errorf("strangers' %d vouch requests made v ping x %d times, want none", len(attackers)*each, n)
	}
	if x.guard.Banned(v.ID()) || refused[[2]string{"ping", "rate"}] > 0 {
		t.Errorf("x refused %d of v's pings over its rate; banned v: %v", refused[[2]string{"ping", "rate"}], x.guard.Banned(v.ID()))
	}
	if a, z := answered.Load(), zero.Load(); a != int64(len(attackers)*each) || z != a {
		t.Errorf("%d of %d requests answered, %d of them with no RTT; want all, each with none (v measured nothing)", a, len(attackers)*each, z)
	}
	for _, h := range attackers {
		if v.guard.Banned(h.ID()) {
			t.Errorf("v banned %s, which asked within its rate", h.ID())
		}
	}
}
