package overlay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
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
// closest to the key that speak the closer protocol, by brute force over
// the table, with the addresses the peerstore holds, less the asker. The
// table is a kbucket table of its own, not a running DHT's: a DHT's table
// drops host-less peers whenever one of its lookups fails to dial them,
// which made an earlier form of this test, over a live node's table,
// flaky in CI. One peer in three speaks only the DHT (the live table
// takes no such peer, table.go; the answer does not rely on it): the
// answer leaves them out and is still full (it named them, and a lookup
// whose answers were such peers alone ended at its own node).
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
	proto := closerProtocol("default")
	asker := newID()
	for i := range 60 {
		id := asker
		if i > 0 {
			id = newID()
		}
		ps.AddAddr(id, ma.StringCast(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 4000+i)), time.Hour)
		if i%3 != 1 {
			if err := ps.AddProtocols(id, proto); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rt.TryAddPeer(id, true, false); err != nil && err != kb.ErrPeerRejectedNoCapacity {
			t.Fatal(err)
		}
	}
	if !slices.Contains(rt.ListPeers(), asker) {
		t.Fatal("the asker is not in the table")
	}
	for _, target := range []dhtselect.Key{dhtselect.KeyOf(asker), dhtselect.KeyOf(newID())} {
		got := closestIn(rt, ps, proto, target[:], asker)
		want := slices.DeleteFunc(rt.ListPeers(), func(p peer.ID) bool {
			sp, _ := ps.SupportsProtocols(p, proto)
			return p == asker || len(sp) == 0
		})
		if len(want) < closerAnswer+8 {
			t.Fatalf("table of %d peers that speak closer besides the asker, want at least %d", len(want), closerAnswer+8)
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
			t.Errorf("answer %v, want the %d closest that speak closer, less the asker %v", ids, closerAnswer, want)
		}
		// The lookup's seeds: the BucketSize nearest that pass, over a
		// table whose nearest BucketSize do not all pass, and the whole
		// table when fewer pass.
		seeds := nearestWhere(rt, target[:], dhtselect.BucketSize, func(p peer.ID) bool { return slices.Contains(want, p) })
		if !slices.Equal(seeds, want) {
			t.Errorf("seeds %v, want the %d that pass, nearest first: %v", seeds, len(want), want)
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

// TestWalkSkips: a lookup's walk counts a peer it may not ask as failed
// and asks the next. The seed answers with the three peers nearest to the
// key, which the walk may not ask (lookupAlpha of them), and a fourth it
// may: the fourth is asked and is the answer. A skipped peer left in
// flight held one of the lookupAlpha places for good, and with three the
// walk ended at the seed without asking the fourth.
func TestWalkSkips(t *testing.T) {
	var target dhtselect.Key
	var all []peer.ID
	for i := range 16 {
		all = append(all, peer.ID(fmt.Sprintf("peer-%02d", i)))
	}
	byDistance(all, target)
	skip, fourth, seed, self := all[:lookupAlpha], all[lookupAlpha], all[lookupAlpha+1], all[len(all)-1]
	answers := map[peer.ID][]peer.ID{seed: append(slices.Clone(skip), fourth), fourth: nil}
	var asked []peer.ID
	l := dhtselect.NewLookup(target, self, []peer.ID{seed}, dhtselect.Resiliency, lookupAlpha)
	queries := walk(context.Background(), l, func(p peer.ID) bool { return !slices.Contains(skip, p) },
		func(_ context.Context, p peer.ID) ([]peer.ID, error) {
			asked = append(asked, p) // one query at a time here: the seed's answer comes first
			return answers[p], nil
		})
	if !slices.Equal(asked, []peer.ID{seed, fourth}) || queries != 2 {
		t.Errorf("asked %v (%d queries), want the seed then the fourth %v", asked, queries, []peer.ID{seed, fourth})
	}
	if r := l.Result(); len(r) == 0 || r[0] != fourth {
		t.Errorf("result %v, want the fourth nearest, %s, first", r, fourth)
	}
	if !l.Done() {
		t.Error("the walk returned before the lookup was done")
	}
}

// TestReadInfosSkipsUnknownAddrs: a closer answer that lists an address
// go-multiaddr cannot parse (another implementation's transport) keeps
// the peer and its other addresses; the whole answer was refused, a
// strike against its sender (an interoperability audit).
func TestReadInfosSkipsUnknownAddrs(t *testing.T) {
	id := keysByDistance(t, 1)[0]
	pid, err := peer.IDFromPrivateKey(id)
	if err != nil {
		t.Fatal(err)
	}
	good := ma.StringCast("/ip4/192.0.2.1/tcp/4001")
	buf := binary.AppendUvarint(nil, 1)
	buf = appendField(buf, []byte(pid))
	buf = binary.AppendUvarint(buf, 2)
	buf = appendField(buf, []byte{0xff, 0xff, 0x03, 0x01}) // no protocol of that code
	buf = appendField(buf, good.Bytes())
	infos, err := readInfos(bufio.NewReader(bytes.NewReader(buf)))
	if err != nil {
		t.Fatalf("readInfos: %v", err)
	}
	if len(infos) != 1 || infos[0].ID != pid || len(infos[0].Addrs) != 1 || !infos[0].Addrs[0].Equal(good) {
		t.Errorf("infos %v, want %s with %s alone", infos, pid, good)
	}
}
