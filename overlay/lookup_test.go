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
//
// The 16 are IDs without hosts: a routing-table refresh of a's DHT that
// runs meanwhile (kad-dht's own, or the overlay's bootstrap loop) dials
// them, fails, and drops them from the table, which then no longer
// holds what the answer was made from (seen under the race detector, 2
// runs in 12: the table held 1 to 8 of them). Such a round proves
// nothing either way, and the test puts them back and asks again, up to
// five times; the answer is judged only against a table that held all of
// them before and after it.
func TestCloserAnswer(t *testing.T) {
	keys := keysByDistance(t, 2)
	a := oneCluster(t, keys[0])
	b := oneCluster(t, keys[1], WithBootstrapAddrs(a.P2PAddrs()...))
	waitFor(t, "b in a's routing table", func() bool { return slices.Contains(a.dht.RoutingTable().ListPeers(), b.ID()) })
	rng := rand.NewChaCha8([32]byte{7})
	var fakes []peer.ID
	for range 16 {
		_, pub, err := crypto.GenerateEd25519Key(rng)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		fakes = append(fakes, id)
	}
	target := dhtselect.KeyOf(b.ID())
	table := func() []peer.ID {
		var ps []peer.ID
		for _, p := range a.dht.RoutingTable().ListPeers() {
			if p != b.ID() {
				ps = append(ps, p)
			}
		}
		slices.Sort(ps)
		return ps
	}
	for round := range 5 {
		for _, id := range fakes {
			if _, err := a.dht.RoutingTable().TryAddPeer(id, true, false); err != nil {
				t.Fatal(err)
			}
		}
		before := table()
		got, err := b.queryCloser(context.Background(), a.ID(), target)
		if err != nil {
			t.Fatal(err)
		}
		want := table()
		if !slices.Equal(before, want) || len(want) < closerAnswer+8 {
			t.Logf("round %d: a's table changed while b asked (%d peers besides b before, %d after): again", round, len(before), len(want))
			continue
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
		return
	}
	t.Fatalf("a's routing table did not hold the %d peers it was given through any of 5 answers", len(fakes))
}
