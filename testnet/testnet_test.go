package testnet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
)

// convergeBound is a bound against hangs, generous for a loaded two-core
// machine; it is not a performance assertion.
const convergeBound = 3 * time.Minute

func startNet(t *testing.T, cfg Config) *Net {
	t.Helper()
	tn, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tn.Close() })
	return tn
}

func waitConverged(t *testing.T, tn *Net, since time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), convergeBound)
	defer cancel()
	d, err := tn.WaitConverged(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// 32 real libp2p hosts with the real kad-dht and GossipSub: every peer's
// view (k, role, cluster key, superpeer, members) equals the brute-force
// answer computed from the peer IDs alone. Then the superpeer of a cluster
// stops abruptly, and its cluster converges on the new closest peer.
func TestConvergesAndRepairs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 32 libp2p nodes")
	}
	tn := startNet(t, Config{N: 32, Target: dhtselect.Target{Superpeers: 4}, Seed: 1})
	d := waitConverged(t, tn, tn.Started())
	t.Logf("32 nodes converged in %v", d)

	k, as := tn.Expected()
	if k != 2 {
		t.Fatalf("k = %d, want 2 for S = 4", k)
	}
	clusters := dhtselect.Clusters(as, k)
	// Pick a cluster with at least two members, so it has a next superpeer.
	var victim dhtselect.Cluster
	for _, c := range clusters {
		if len(c.Members) >= 2 {
			victim = c
			break
		}
	}
	if victim.Superpeer == "" {
		t.Fatal("no cluster with two members; choose another seed")
	}
	next := victim.Members[1]
	if err := tn.Stop(victim.Superpeer); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	d = waitConverged(t, tn, stopped)
	t.Logf("cluster %s repaired in %v", victim.Prefix, d)
	for _, n := range tn.Nodes() {
		s := n.State()
		if s.ClusterKey == victim.Key && s.Superpeer.ID != next {
			t.Fatalf("%s names superpeer %s, want the new closest %s", n.ID(), s.Superpeer.ID, next)
		}
		if n.ID() == next && s.Role != overlay.RoleSuperpeer {
			t.Fatalf("the new closest peer %s has role %s", next, s.Role)
		}
	}
	r := tn.Report()
	if !r.Converged && len(r.Mismatches) > 0 {
		t.Fatalf("report shows mismatches: %v", r.Mismatches)
	}
}

// A network of one peer is its own superpeer, with S = 1 and k = 0.
func TestSinglePeer(t *testing.T) {
	tn := startNet(t, Config{N: 1, Target: dhtselect.Target{Fraction: 0.1}})
	waitConverged(t, tn, tn.Started())
	s := tn.Nodes()[0].State()
	if s.Role != overlay.RoleSuperpeer || s.K != 0 || s.Size.N != 1 {
		t.Fatalf("single peer: %+v", s)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{N: 0, Target: dhtselect.Target{Superpeers: 1}},
		{N: MaxNodes + 1, Target: dhtselect.Target{Superpeers: 1}},
		{N: 4, Target: dhtselect.Target{Superpeers: 0}},
		{N: 4, Target: dhtselect.Target{Fraction: 1.5}},
		{N: 4, Target: dhtselect.Target{Superpeers: 1}, Strategy: "nope"},
	} {
		if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Start(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}
