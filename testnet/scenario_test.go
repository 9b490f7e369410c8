package testnet

import (
	"context"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/internal/bubble"
	"github.com/superpeer/superpeer/overlay"
)

// runScenarioVirtual is runScenario in a testing/synctest bubble: the
// links' delays, the intervals and the scenario's times are virtual, so
// this machine's load does not change them. In a bubble under load the
// flap scenario found a fault that real time hid (the flapping node won
// its cluster back a third time in 3 runs of 40, which the election's
// hushed rule fixed: overlay/node/elect.go), and the tests that stop
// nodes found mocknet streams that outlived their connections (fixed in
// the fabric: liveStreams).
func runScenarioVirtual(t *testing.T, cfg Config, sc ScenarioConfig) (r ScenarioReport) {
	t.Helper()
	bubble.Test(t, func(t *testing.T) { r = runScenario(t, cfg, sc) })
	return r
}

// runScenario starts a converged net of 16 nodes with two clusters and
// runs sc on it.
func runScenario(t *testing.T, cfg Config, sc ScenarioConfig) ScenarioReport {
	t.Helper()
	cfg.N, cfg.Target, cfg.AnnounceInterval = 16, dhtselect.Target{Superpeers: 2}, time.Second
	tn := startNet(t, cfg)
	waitConverged(t, tn, tn.Started())
	ctx, cancel := context.WithTimeout(context.Background(), convergeBound+2*sc.Duration)
	defer cancel()
	r, err := tn.RunScenario(ctx, sc)
	t.Logf("%+v", r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Orphans != 0 {
		t.Errorf("%d orphans at the end", r.Orphans)
	}
	if r.Coverage <= 0 || r.Coverage > 1 {
		t.Errorf("coverage %v, want in (0, 1]", r.Coverage)
	}
	if got := len(tn.Nodes()); got != 16 {
		t.Errorf("%d live nodes at the end, want 16", got)
	}
	return r
}

// Churn on 16 nodes: a peer replaced every 7.5 s for 30 s. Four
// replacements, and at the end every live peer (joiners included) has a
// live superpeer.
func TestChurnScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes and replaces four")
	}
	r := runScenarioVirtual(t, Config{Seed: 3, Election: "bully"},
		ScenarioConfig{Name: ScenarioChurn, Rate: 0.5, Duration: 30 * time.Second, Seed: 1})
	if len(r.Faults) != 4 {
		t.Errorf("faults %v, want 4 replacements", r.Faults)
	}
	if r.Coverage < 0.5 {
		t.Errorf("coverage %v: most peers lacked a live superpeer most of the time", r.Coverage)
	}
	// Joiners closer to a cluster key than its superpeer: the lookup names
	// them first, and the election must follow within one timeout.
	if r.DisagreeMS > r.DetectionTimeoutMS {
		t.Errorf("lookup and election disagreed for %v ms, more than one detection timeout (%v ms)", r.DisagreeMS, r.DetectionTimeoutMS)
	}
}

// A partition of a third of 16 nodes for 10 s. With quorum there is never
// a split brain, and by the heal the minority side of every cluster has
// no superpeer; without it both sides of a cut cluster elect their own
// (the split brain shows), and it ends after the heal (the run
// converges).
func TestPartitionScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes twice")
	}
	sc := ScenarioConfig{Name: ScenarioPartition, Duration: 10 * time.Second, Seed: 1}
	t.Run("quorum", func(t *testing.T) {
		r := runScenarioVirtual(t, Config{Seed: 4, Election: "bully", Quorum: true}, sc)
		if r.SplitBrainMS != 0 || r.MinorityAtHeal != 0 {
			t.Errorf("split brain %v ms, %d minority superpeers at the heal; want none with quorum", r.SplitBrainMS, r.MinorityAtHeal)
		}
	})
	t.Run("no quorum", func(t *testing.T) {
		r := runScenarioVirtual(t, Config{Seed: 4, Election: "bully"}, sc)
		if r.SplitBrainMS == 0 {
			t.Errorf("no split brain without quorum: does the cut separate a cluster?")
		}
	})
}

// Flap: the superpeer of the largest cluster goes down and up every
// FlapPeriod for three periods. With host quality it wins back its cluster
// at most twice: after its first outage, which alone is no flapping, and
// once at the end, when its outages have aged out of the window.
func TestFlapScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes and waits for a flap window")
	}
	r := runScenarioVirtual(t, Config{Seed: 5, Election: "bully"},
		ScenarioConfig{Name: ScenarioFlap, Duration: 3 * FlapPeriod, Seed: 1})
	if r.LeaderChanges == 0 {
		t.Errorf("no leader change: did the flapping node's cluster notice?")
	}
	if r.FlapperWins > 2 {
		t.Errorf("the flapping node won its cluster back %d times, want at most 2", r.FlapperWins)
	}
}

// A partition heals, and every node counts all of its cluster's members
// again. A member counts only while its node is connected to it (the
// identities per address, overlay/node's admit.go), and the cut closed the
// connections across it; after the heal nothing but chance (a bootstrap
// dial, a lookup's query) reconnected the two sides, and peers stayed
// short of members for good (peer testnet -n 16 --superpeers 2 --scenario
// partition --duration 5s: 6 of 16 knew 5 or 7 of their cluster's 9). The
// machine now asks its driver to connect to the cluster-mates it sees
// announced but not connected (Ready.Connect).
func TestPartitionHealReconnects(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes")
	}
	cfg := Config{N: 16, Target: dhtselect.Target{Superpeers: 2}, Seed: 1}
	tn := startNet(t, cfg)
	waitConverged(t, tn, tn.Started())
	sc := ScenarioConfig{Name: ScenarioPartition, Duration: 5 * time.Second, Seed: 1}
	ctx, cancel := context.WithTimeout(context.Background(), convergeBound)
	defer cancel()
	r, err := tn.RunScenario(ctx, sc)
	t.Logf("%+v", r)
	if err != nil {
		t.Fatal(err)
	}
}

// Kill-superpeer stops a superpeer that no other peer names (alone in its
// cluster): there is nothing to fail over, and the scenario goes on at
// once. It waited for that failover until its timeout (peer testnet -n 4
// --superpeers 4 --scenario kill-superpeer --seed 3; with the geometric
// strategy a superpeer with no members, seen at -n 16 --superpeers 4).
// The scenario prefers a superpeer that some peer names, so the net's
// seed is one whose four keys fall in four clusters: every superpeer is
// alone.
func TestKillLoneSuperpeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 libp2p nodes")
	}
	seed := loneSeed(t, 4)
	tn := startNet(t, Config{N: 4, Target: dhtselect.Target{Superpeers: 4}, Seed: seed})
	waitConverged(t, tn, tn.Started())
	ctx, cancel := context.WithTimeout(context.Background(), convergeBound)
	defer cancel()
	r, err := tn.RunScenario(ctx, ScenarioConfig{Name: ScenarioKillSuperpeer, Seed: 3})
	t.Logf("%+v", r)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Faults) != 1 || r.FailoverMS.N != 0 || r.Orphans != 0 {
		t.Errorf("faults %v, failovers %+v, %d orphans; want one stop, nothing to fail over, no orphan", r.Faults, r.FailoverMS, r.Orphans)
	}
}

// loneSeed returns the first seed whose n keys (as Net draws them) fall
// in n different clusters at k = log2 n.
func loneSeed(t *testing.T, n int) uint64 {
	t.Helper()
	k, err := dhtselect.BitsFor(n)
	if err != nil || 1<<k != n {
		t.Fatalf("loneSeed(%d): want a power of two", n)
	}
	for seed := uint64(1); seed < 1000; seed++ {
		keys := rand.NewChaCha8(seedBytes(seed))
		seen := map[dhtselect.Key]bool{}
		for range n {
			_, id, err := nextKey(keys)
			if err != nil {
				t.Fatal(err)
			}
			seen[dhtselect.KeyOf(id).Cluster(k)] = true
		}
		if len(seen) == n {
			return seed
		}
	}
	t.Fatalf("no seed below 1000 puts %d keys in %d clusters", n, n)
	return 0
}

// disagrees counts a lookup and an election that name different live
// superpeers, but not a lookup answer ranked last by the peer's election
// or by its own (a flapping node: TestFlap's), nor a dead one.
func TestDisagrees(t *testing.T) {
	a, b, c := peer.ID("a"), peer.ID("b"), peer.ID("c")
	live := map[peer.ID]bool{a: true, b: true}
	elections := map[peer.ID]overlay.ElectionStats{a: {}, b: {}}
	for _, tc := range []struct {
		name  string
		e     overlay.ElectionStats
		flaps bool // b ranks itself last
		want  bool
	}{
		{"agree", overlay.ElectionStats{Lookup: a, Leader: a}, false, false},
		{"differ", overlay.ElectionStats{Lookup: b, Leader: a}, false, true},
		{"dead lookup", overlay.ElectionStats{Lookup: c, Leader: a}, false, false},
		{"no leader", overlay.ElectionStats{Lookup: b}, false, false},
		{"lookup demoted here", overlay.ElectionStats{Lookup: b, Leader: a, Demoted: []peer.ID{b}}, false, false},
		{"lookup ranks itself last", overlay.ElectionStats{Lookup: b, Leader: a}, true, false},
	} {
		el := maps.Clone(elections)
		if tc.flaps {
			el[b] = overlay.ElectionStats{Demoted: []peer.ID{b}}
		}
		if got := disagrees(tc.e, live, el); got != tc.want {
			t.Errorf("%s: disagrees = %v, want %v", tc.name, got, tc.want)
		}
	}
}
