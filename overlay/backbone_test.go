package overlay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/internal/bubble"
)

// keysInHalves returns two keys seeded deterministically whose peer keys
// differ in their first bit: at k = 1 each is alone in its cluster.
func keysInHalves(t *testing.T) [2]crypto.PrivKey {
	t.Helper()
	var out [2]crypto.PrivKey
	var found [2]bool
	for seed := byte(0); !found[0] || !found[1]; seed++ {
		sk, _, err := crypto.GenerateEd25519Key(rand.NewChaCha8([32]byte{seed, 'b', 'b'}))
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPrivateKey(sk)
		if err != nil {
			t.Fatal(err)
		}
		half := dhtselect.KeyOf(id)[0] >> 7
		if !found[half] {
			out[half], found[half] = sk, true
		}
	}
	return out
}

// drainPushes takes, every tick, the identify-push tokens that target's
// host grants from's subnet: a stream of the push protocol whose message
// is refused (a length beyond identify's limit), so that no peerstore
// changes. It stands for the other peers of a testnet's subnet, whose
// pushes (each peer pushes when its protocols or addresses change) take
// the same tokens. It stops when ctx ends.
func drainPushes(ctx context.Context, t *testing.T, from host.Host, target peer.ID, tick time.Duration, wg *sync.WaitGroup) {
	push := func() {
		s, err := from.NewStream(ctx, target, identify.IDPush)
		if err != nil {
			return
		}
		_, _ = s.Write([]byte{0xff, 0xff, 0xff, 0x0f})
		_ = s.Close()
	}
	// Identify's push limit: burst 10 per IPv4 /24, then 0.2 a second.
	for range 12 {
		push()
	}
	wg.Go(func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				push()
			}
		}
	})
}

// TestGossipSubOpensBothWays: two superpeers in one IPv4 /24 (as all of an
// in-process testnet's hosts are) become GossipSub peers both ways on the
// backbone, and each hears the other's summary, although the second's
// identify push, which tells the first that it speaks GossipSub now, is
// lost to identify's rate limit. Without mendGossipSub the first never
// opened its stream to the second: it sent the second nothing (its
// summaries included), and its ListPeers on the backbone lacked the
// second (seen in a 64-node testnet: a superpeer with no backbone peer
// while connected to 60). Virtual time, on a mocknet.
func TestGossipSubOpensBothWays(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		const interval = time.Second
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mn := mocknet.New()
		defer mn.Close()
		keys := keysInHalves(t)
		var hs []host.Host
		for i, sk := range append(keys[:], nil) {
			if sk == nil { // the drainer
				var err error
				if sk, _, err = crypto.GenerateEd25519Key(rand.NewChaCha8([32]byte{'d'})); err != nil {
					t.Fatal(err)
				}
			}
			h, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1)))
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		if err := mn.LinkAll(); err != nil {
			t.Fatal(err)
		}
		d := hs[2]
		var drains sync.WaitGroup
		defer drains.Wait()
		defer cancel()
		for _, h := range hs[:2] {
			if _, err := mn.ConnectPeers(d.ID(), h.ID()); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // identified
		for _, h := range hs[:2] {
			drainPushes(ctx, t, d, h.ID(), interval/10, &drains)
		}
		start := func(h host.Host, boot ...peer.AddrInfo) *Node {
			n, err := New(context.Background(), WithHost(h), WithLogger(quiet), WithReachability(ReachabilityPublic),
				WithTarget(dhtselect.Target{Superpeers: 2}), WithIntervals(interval, interval), WithBootstrap(boot...))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		a := start(hs[0])
		defer a.Close()
		serving := func(n *Node) bool {
			n.cm.mu.Lock()
			defer n.cm.mu.Unlock()
			return n.cm.bb != nil
		}
		waitVirtual(t, "a to serve", time.Minute, func() bool { return serving(a) })
		// b joins once a runs GossipSub: a learns that b speaks it only
		// from b's push.
		b := start(hs[1], peer.AddrInfo{ID: a.ID(), Addrs: hs[0].Addrs()})
		defer b.Close()
		waitVirtual(t, "b to serve", time.Minute, func() bool { return serving(b) })

		topic := gossip.BackboneTopic(a.cfg.Network)
		lists := func(n *Node, p peer.ID) bool {
			ps, err := n.pubSub()
			return err == nil && slices.Contains(ps.ListPeers(topic), p)
		}
		hears := func(n *Node, p peer.ID) bool {
			return slices.ContainsFunc(n.backboneSummaries(), func(s gossip.Summary) bool { return s.Superpeer == p })
		}
		both := func() bool {
			return lists(a, b.ID()) && lists(b, a.ID()) && hears(a, b.ID()) && hears(b, a.ID())
		}
		// A few announce intervals: b's summary goes out at once and every
		// interval, and a's stream to b is opened within one.
		waitVirtual(t, "a and b to be backbone peers both ways and hear each other", 4*interval, both)
		a.cm.mu.Lock()
		reopened := a.cm.reopened
		a.cm.mu.Unlock()
		if reopened == 0 {
			t.Fatal("a opened no stream to b: b's push got through, and the case was not tested")
		}
		// And they stay so.
		time.Sleep(3 * interval)
		if !both() {
			t.Fatalf("a lists b %v, b lists a %v, a hears b %v, b hears a %v", lists(a, b.ID()), lists(b, a.ID()), hears(a, b.ID()), hears(b, a.ID()))
		}
	})
}

// waitVirtual waits, in a synctest bubble's virtual time, until cond holds
// or within has passed.
func waitVirtual(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	const step = 50 * time.Millisecond
	for waited := time.Duration(0); !cond(); waited += step {
		if waited >= within {
			t.Fatalf("not within %v (virtual): %s", within, what)
		}
		time.Sleep(step)
	}
}
