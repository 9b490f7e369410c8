package overlay

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/superpeer/superpeer/internal/bubble"
)

// racyHost runs during once, after the first stream it was asked for
// failed and before it says so: what a peer does while the attempt's
// answer is on its way back.
type racyHost struct {
	host.Host
	once   sync.Once
	during func()
}

func (h *racyHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		h.once.Do(h.during)
	}
	return s, err
}

// Two connected nodes start their GossipSub routers together: a's first
// stream to b fails, since b's router is not up yet, and b's router starts
// (and its identify push reaches a) while that failure is on its way.
// go-libp2p-pubsub passes the push over and forgets the failed attempt, so
// nothing a publishes would reach b while they stay connected; the node's
// host (framedHost) tries again once b speaks GossipSub.
func TestPubSubPeerStartsDuringAttempt(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mn := mocknet.New()
		defer mn.Close()
		var hs [2]host.Host
		for i := range hs {
			h, err := mn.GenPeer()
			if err != nil {
				t.Fatal(err)
			}
			hs[i] = h
		}
		if err := mn.LinkAll(); err != nil {
			t.Fatal(err)
		}
		if err := mn.ConnectAllButSelf(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // identified: neither speaks GossipSub yet
		const topic = "starts-together"
		var sub *pubsub.Subscription
		startB := func() {
			ps, err := pubsub.NewGossipSub(ctx, hs[1])
			if err != nil {
				t.Error(err)
				return
			}
			tp, err := ps.Join(topic)
			if err != nil {
				t.Error(err)
				return
			}
			if sub, err = tp.Subscribe(); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Second) // b's identify push reaches a
		}
		racy := &racyHost{Host: hs[0], during: startB}
		ps, err := pubsub.NewGossipSub(ctx, framedHost{Host: racy, n: &Node{}, name: "pubsub", max: maxPubSubMessage})
		if err != nil {
			t.Fatal(err)
		}
		tp, err := ps.Join(topic)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if sub == nil {
			t.Fatal("a's router never failed a stream to b: the test shows nothing")
		}
		got := make(chan struct{})
		go func() {
			if _, err := sub.Next(ctx); err == nil {
				close(got)
			}
		}()
		for range 60 {
			if err := tp.Publish(ctx, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-got:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
		t.Fatal("nothing a published reached b in 30 s")
	})
}
