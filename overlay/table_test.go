package overlay

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"

	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/internal/bubble"
)

// TestTableFullBucket: a peer that connects joins the routing table while
// its bucket has room, and not when the bucket is full (table.go:
// hasRoom), where kad-dht would have checked it with a FIND_NODE to take
// it in place of another; a peer the table holds stays in it when kad-dht
// asks again.
func TestTableFullBucket(t *testing.T) {
	for _, full := range []bool{false, true} {
		bubble.Test(t, func(t *testing.T) {
			a, b := idlePair(t)
			rt := a.dht.RoutingTable()
			cpl := kb.CommonPrefixLen(kb.ConvertPeerID(a.ID()), kb.ConvertPeerID(b.ID()))
			// The bucket's peers: found by a query, and the last (when
			// full) by a connection, which kad-dht may replace.
			want := dhtselect.BucketSize - 1
			if full {
				want++
			}
			var filler []peer.ID
			rng := rand.NewChaCha8([32]byte{9})
			for len(filler) < want {
				sk, _, err := crypto.GenerateEd25519Key(rng)
				if err != nil {
					t.Fatal(err)
				}
				p, err := peer.IDFromPrivateKey(sk)
				if err != nil {
					t.Fatal(err)
				}
				if kb.CommonPrefixLen(kb.ConvertPeerID(a.ID()), kb.ConvertPeerID(p)) != cpl {
					continue
				}
				a.host.Peerstore().AddProtocols(p, a.closerProto) // an overlay peer, for the diversity filter
				if ok, err := rt.TryAddPeer(p, len(filler) < dhtselect.BucketSize-1, true); !ok || err != nil {
					t.Fatalf("filler %d not added: %v", len(filler), err)
				}
				filler = append(filler, p)
			}
			if err := a.host.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.host.Addrs()}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			held := slices.Contains(rt.ListPeers(), b.ID())
			if held == full {
				t.Fatalf("bucket full %v (cpl %d, %d peers): the connected peer held %v", full, cpl, rt.NPeersForCpl(uint(cpl)), held)
			}
			if !hasRoom(a.dht, kb.ConvertPeerID(a.ID()), filler[0]) {
				t.Fatal("a peer the table holds is refused")
			}
		})
	}
}
