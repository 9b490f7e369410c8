package overlay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	pstore "github.com/libp2p/go-libp2p/p2p/host/peerstore"
	"github.com/libp2p/go-libp2p/p2p/host/peerstore/pstoremem"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

// byDistance sorts ids by the XOR distance of their keys to target, by
// brute force: the oracle the answers are judged against.
func byDistance(ids []peer.ID, target dhtselect.Key) {
	slices.SortFunc(ids, func(x, y peer.ID) int {
		if dhtselect.Closer(dhtselect.KeyOf(x), dhtselect.KeyOf(y), target) {
			return -1
		}
		return 1
	})
}

// A closer answer carries the closerAnswer peers of a routing table
// closest to the key, by brute force over the table, with the addresses
// the peerstore holds, less the asker. The table is a kbucket table of
// its own, not a running DHT's: a DHT's table drops host-less peers
// whenever one of its lookups fails to dial them, which made an earlier
// form of this test, over a live node's table, flaky in CI.
func TestClosestAnswer(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{7})
	newID := func() peer.ID {
		_, pub, err := crypto.GenerateEd25519Key(rng)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	rt, err := kb.NewRoutingTable(dhtselect.BucketSize, kb.ConvertPeerID(newID()), time.Minute, pstore.NewMetrics(), time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ps, err := pstoremem.NewPeerstore()
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	asker := newID()
	for i := range 40 {
		id := asker
		if i > 0 {
			id = newID()
		}
		ps.AddAddr(id, ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 4000+i)), time.Hour)
		if _, err := rt.TryAddPeer(id, true, false); err != nil && err != kb.ErrPeerRejectedNoCapacity {
			t.Fatal(err)
		}
	}
	if !slices.Contains(rt.ListPeers(), asker) {
		t.Fatal("the asker is not in the table")
	}
	for _, target := range []dhtselect.Key{dhtselect.KeyOf(asker), dhtselect.KeyOf(newID())} {
		got := closestIn(rt, ps, target[:], asker)
		want := slices.DeleteFunc(rt.ListPeers(), func(p peer.ID) bool { return p == asker })
		if len(want) < closerAnswer+8 {
			t.Fatalf("table of %d peers besides the asker, want at least %d", len(want), closerAnswer+8)
		}
		byDistance(want, target)
		want = want[:closerAnswer]
		ids := make([]peer.ID, len(got))
		for i, ai := range got {
			ids[i] = ai.ID
			if !slices.EqualFunc(ai.Addrs, ps.Addrs(ai.ID), ma.Multiaddr.Equal) {
				t.Errorf("%s: addresses %v, want %v", ai.ID, ai.Addrs, ps.Addrs(ai.ID))
			}
		}
		if !slices.Equal(ids, want) {
			t.Errorf("answer %v, want the %d closest less the asker %v", ids, closerAnswer, want)
		}
	}
}

// Over the wire, between live nodes: b asks a for the peers closest to
// b's own key and hears the other peers of a's table, closest first,
// with addresses, and not itself.
func TestCloserAnswer(t *testing.T) {
	keys := keysByDistance(t, 4)
	a := oneCluster(t, keys[0])
	var others []*Node
	for _, k := range keys[1:] {
		others = append(others, oneCluster(t, k, WithBootstrapAddrs(a.P2PAddrs()...)))
	}
	b := others[0]
	waitFor(t, "the others in a's routing table", func() bool {
		for _, o := range others {
			if !slices.Contains(a.dht.RoutingTable().ListPeers(), o.ID()) {
				return false
			}
		}
		return true
	})
	target := dhtselect.KeyOf(b.ID())
	got, err := b.queryCloser(context.Background(), a.ID(), target)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(a.dht.RoutingTable().ListPeers(), func(p peer.ID) bool { return p == b.ID() })
	byDistance(want, target)
	want = want[:min(len(want), closerAnswer)]
	ids := make([]peer.ID, len(got))
	for i, ai := range got {
		ids[i] = ai.ID
		if len(ai.Addrs) == 0 {
			t.Errorf("%s came without addresses", ai.ID)
		}
	}
	if len(ids) != len(others)-1 || !slices.Equal(ids, want) {
		t.Errorf("answer %v, want a's table less b, closest first: %v", ids, want)
	}
}
