package overlay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// Four nodes on mocknet, geometric strategy, two tokens, capacity one: two
// nodes become superpeers, and each of the other two attaches to a
// different one, because a superpeer refuses a second ordinary peer. The
// intervals are short; the test runs in -short (and with -race).
func TestGeometricCapacity(t *testing.T) {
	nodes := mocknetNodes(t, 4, func(int) []Option {
		return []Option{
			WithLogger(quiet), WithStrategy(StrategyGeometric),
			WithTarget(dhtselect.Target{Superpeers: 2}), WithIntervals(300*time.Millisecond, time.Second),
			WithGeometric(geometric.Config{Capacity: 1}, 50*time.Millisecond, 100*time.Millisecond),
		}
	})
	settled := func() bool {
		var supers, attached []peer.ID
		for _, n := range nodes {
			s := n.State()
			switch {
			case s.Role == RoleSuperpeer:
				if len(s.Members) > 2 {
					t.Fatalf("%s serves %d ordinary peers, capacity 1", n.ID(), len(s.Members)-1)
				}
				supers = append(supers, n.ID())
			case s.Superpeer.ID != "":
				attached = append(attached, s.Superpeer.ID)
			}
		}
		slices.Sort(supers)
		slices.Sort(attached)
		return len(supers) == 2 && slices.Equal(supers, attached)
	}
	deadline := time.Now().Add(2 * time.Minute) // against hangs only
	for !settled() {
		if time.Now().After(deadline) {
			for _, n := range nodes {
				s := n.State()
				t.Logf("%s: %s, superpeer %s, members %d, token %d", n.ID().ShortString(), s.Role, s.Superpeer.ID.ShortString(), len(s.Members), s.Token)
			}
			t.Fatal("not settled: want two superpeers, each serving one of the others")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mocknetNodes starts n nodes on a fully linked mocknet, with keys seeded
// by their index, each with opts(i) and the first as bootstrap peer of the
// others; all are closed with the test.
func mocknetNodes(t *testing.T, n int, opts func(i int) []Option) []*Node {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	for i := range n {
		sk, _, err := crypto.GenerateEd25519Key(rand.NewChaCha8([32]byte{byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	var nodes []*Node
	var boot peer.AddrInfo
	for i, h := range mn.Hosts() {
		o := append(opts(i), WithHost(h))
		if i > 0 {
			o = append(o, WithBootstrap(boot))
		}
		nd, err := New(context.Background(), o...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nd.Close() })
		if i == 0 {
			boot = peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}
		}
		nodes = append(nodes, nd)
	}
	return nodes
}
