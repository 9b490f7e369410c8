package attack

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// TestLive runs one attack against a node outside the test, for
// measuring it by hand (RSS, CPU): ATTACK_TARGET is the node's multiaddr
// (ending in /p2p/<ID>), ATTACK one of redial, dht, election, subs, and
// ATTACK_SECONDS how long (default 10). Skipped without ATTACK_TARGET.
//
//	ATTACK_TARGET=/ip4/127.0.0.1/tcp/4001/p2p/12D3KooW… ATTACK=redial go test ./testnet/attack -run TestLive -v
func TestLive(t *testing.T) {
	target := os.Getenv("ATTACK_TARGET")
	if target == "" {
		t.Skip("ATTACK_TARGET not set")
	}
	info, err := peer.AddrInfoFromP2pAddr(ma.StringCast(target))
	if err != nil {
		t.Fatal(err)
	}
	secs, _ := strconv.Atoi(os.Getenv("ATTACK_SECONDS"))
	if secs <= 0 {
		secs = 10
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
	defer cancel()
	fresh := func(n int) []host.Host {
		hs := make([]host.Host, n)
		for i := range hs {
			h, err := NewHost()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Close() })
			SpeakGossipSub(h)
			_ = h.Connect(ctx, *info)
			hs[i] = h
		}
		return hs
	}
	switch os.Getenv("ATTACK") {
	case "redial":
		h := fresh(1)[0]
		Provoke(ctx, h, info.ID, "default")
		r := Redial(ctx, h, *info, 1<<30)
		t.Logf("%d redials, %d connected", r.Attempts, r.Connected)
	case "dht":
		// Fresh identities, each stalling 64 DHT streams, until the end.
		for ctx.Err() == nil {
			s := StallDHT(ctx, fresh(4), info.ID, "default", 64)
			t.Logf("DHT: %d streams opened, %d failed (%v)", s.Opened, s.Failed, s.Err)
			defer s.Close()
		}
	case "election":
		for ctx.Err() == nil {
			hs := fresh(4)
			ElectionFlood(ctx, hs[:1], info.ID, "default", 16, 190<<10)
			s := StallElection(ctx, hs[1:], info.ID, "default", 64)
			t.Logf("election: %d streams opened, %d failed (%v)", s.Opened, s.Failed, s.Err)
			defer s.Close()
		}
	case "subs":
		for ctx.Err() == nil {
			hs := fresh(2)
			for _, h := range hs {
				s, err := SubscriptionFlood(ctx, h, info.ID, 400, 2000)
				t.Logf("subscriptions: %v", err)
				defer s.Close()
			}
		}
	default:
		t.Fatalf("ATTACK=%q: want redial, dht, election or subs", os.Getenv("ATTACK"))
	}
	<-ctx.Done()
}
