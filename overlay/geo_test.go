package overlay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
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
	var nodes []*Node
	var boot peer.AddrInfo
	for i, h := range mocknetHosts(t, n, 0) {
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

// mocknetHosts starts n hosts on a fully linked mocknet whose links have
// the given latency (each way), with keys seeded by their index; the
// mocknet is closed with the test.
func mocknetHosts(t *testing.T, n int, latency time.Duration) []host.Host {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	mn.SetLinkDefaults(mocknet.LinkOptions{Latency: latency})
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
	return mn.Hosts()
}

// TestGeometricDistrustsLiar: a node checks the coordinate a peer claims
// against the RTT it measures to it (a real ping over a mocknet link of
// 40 ms each way) before it passes a token to it. A claim to sit where
// the node itself sits, 80 ms away in truth, is distrusted: no pass, no
// neighbour, a count in the status. A claim that agrees with the RTT is
// trusted, and the pass goes through. The token interval is an hour: no
// tick replaces the snapshot the test sets.
func TestGeometricDistrustsLiar(t *testing.T) {
	hs := mocknetHosts(t, 2, 40*time.Millisecond)
	if _, err := hs[0].Network().DialPeer(context.Background(), hs[1].ID()); err != nil {
		t.Fatal(err)
	}
	var nodes []*Node
	for _, h := range hs {
		n, err := New(context.Background(), WithHost(h), WithLogger(quiet), WithStrategy(StrategyGeometric),
			WithTarget(dhtselect.Target{Superpeers: 1}), WithGeometric(geometric.Config{}, time.Hour, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	a, b := nodes[0], nodes[1].ID()
	// pass makes a pass token 0 to b and reports whether b holds it then.
	pass := func() bool {
		a.geo.carryOut(context.Background(), []geometric.Output{geometric.Pass{To: geometric.ID(b), Token: geometric.Token{Num: 0, Seq: 1}}})
		bg := nodes[1].geo
		bg.mu.Lock()
		defer bg.mu.Unlock()
		_, held := bg.holder.Holding()
		return held
	}

	g := a.geo
	self := g.coordinate()
	lie := self.Clone()
	g.mu.Lock()
	g.snapshot = map[peer.ID]*coordinate.Coordinate{a.ID(): self, b: lie}
	g.mu.Unlock()
	peers := []geometric.Peer{{ID: geometric.ID(a.ID()), Coord: self}, {ID: geometric.ID(b), Coord: lie}}
	if g.vet(context.Background(), b) {
		t.Fatal("a trusted b's claim to sit at a's own coordinate, 80 ms away")
	}
	g.mu.Lock()
	rtt := g.rtt[b]
	nb := g.neighbours(self, peers)
	g.mu.Unlock()
	if rtt < 80*time.Millisecond {
		t.Fatalf("RTT to b measured %v, below the link's 80 ms", rtt)
	}
	if len(nb) != 0 {
		t.Errorf("a's neighbours %v include the distrusted b", nb)
	}
	if d := a.Status().Distrusted; d != 1 {
		t.Errorf("status distrusted = %d, want 1", d)
	}
	if pass() {
		t.Error("a passed its token to the distrusted b")
	}

	// The truth: b's coordinate at the measured RTT from a's.
	truth := self.Clone()
	truth.Vec[0] += rtt.Seconds() - geometric.Distance(self, self.Clone())
	g.mu.Lock()
	g.snapshot[b] = truth
	g.snapshotEpoch++ // the next snapshot: the distrust is over
	g.mu.Unlock()
	if !g.vet(context.Background(), b) {
		t.Fatalf("a distrusted b's true claim: predicted %v, measured %v", geometric.Distance(self, truth), rtt)
	}
	g.mu.Lock()
	nb = g.neighbours(self, []geometric.Peer{{ID: geometric.ID(a.ID()), Coord: self}, {ID: geometric.ID(b), Coord: truth}})
	g.mu.Unlock()
	if len(nb) != 1 || nb[0].ID != geometric.ID(b) {
		t.Errorf("a's neighbours = %v, want b", nb)
	}
	if !pass() {
		t.Error("a did not pass its token to the trusted b")
	}
}
