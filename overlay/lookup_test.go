package overlay

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// A closer answer carries the closerAnswer peers of the answering node's
// routing table closest to the key (brute force over the table), less
// the asker, who is the closest here: b asks a for the peers closest to
// b's own key, over the wire, with a's table holding b and 16 more.
func TestCloserAnswer(t *testing.T) {
	keys := keysByDistance(t, 2)
	a := oneCluster(t, keys[0])
	b := oneCluster(t, keys[1], WithBootstrapAddrs(a.P2PAddrs()...))
	waitFor(t, "b in a's routing table", func() bool { return slices.Contains(a.dht.RoutingTable().ListPeers(), b.ID()) })
	rng := rand.NewChaCha8([32]byte{7})
	for range 16 {
		_, pub, err := crypto.GenerateEd25519Key(rng)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.dht.RoutingTable().TryAddPeer(id, true, false); err != nil {
			t.Fatal(err)
		}
	}
	target := dhtselect.KeyOf(b.ID())
	got, err := b.queryCloser(context.Background(), a.ID(), target)
	if err != nil {
		t.Fatal(err)
	}
	var want []peer.ID
	for _, p := range a.dht.RoutingTable().ListPeers() {
		if p != b.ID() {
			want = append(want, p)
		}
	}
	if len(want) < closerAnswer+8 {
		t.Fatalf("a's table holds %d peers besides b, want at least %d", len(want), closerAnswer+8)
	}
	slices.SortFunc(want, func(x, y peer.ID) int {
		if dhtselect.Closer(dhtselect.KeyOf(x), dhtselect.KeyOf(y), target) {
			return -1
		}
		return 1
	})
	want = want[:closerAnswer]
	ids := make([]peer.ID, len(got))
	for i, ai := range got {
		ids[i] = ai.ID
	}
	if !slices.Equal(ids, want) {
		t.Errorf("answer %v, want the %d closest less the asker %v", ids, closerAnswer, want)
	}
}
