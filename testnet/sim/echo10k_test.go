package sim

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
)

// echoNet builds n echo-election machines on a random connected graph of
// average degree about 8 (a ring plus three random links per node), on the
// PlanetLab latencies, with seeded capacities. Each machine knows only itself
// and its neighbours, as on an ad hoc network. It returns the simulator and
// the expected winner (the highest capacity, ties to the higher ID) and the
// number of edges.
func echoNet(t testing.TB, n int, seed uint64) (s *Sim, want classic.ID, edges int) {
	t.Helper()
	pl := planetLabMatrix()
	all := ids(n)
	r := rand.New(rand.NewPCG(seed, 2))
	adj := sparseGraph(all, r)
	caps := make([]uint64, n)
	best := 0
	for i := range caps {
		caps[i] = 1 + r.Uint64N(1000)
		if caps[i] > caps[best] || caps[i] == caps[best] && all[i] > all[best] {
			best = i
		}
		edges += len(adj[i])
	}
	s, err := New(Config{
		IDs: all, Latency: pl, HostOf: func(i int) int { return i % pl.N() }, Seed: seed,
		Factory: func(i int, id classic.ID, _ bool) classic.Machine {
			m, err := classic.NewEcho(classic.Config{ID: id, Peers: append([]classic.ID{id}, adj[i]...), TimeoutTicks: 10},
				adj[i], caps[i], classic.WithElectionTimeout(100000))
			if err != nil {
				t.Fatal(err)
			}
			return m
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, all[best], edges / 2
}

// TestEcho10k runs the real echo election among 10,000 nodes on a random
// graph of average degree 8: everyone ends with the best capacity, and the
// election costs 2 messages per edge plus the winner's broadcast down the
// spanning tree (n - 1).
func TestEcho10k(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 nodes")
	}
	const n = 10000
	s, want, edges := echoNet(t, n, 1)
	s.Campaign(0)
	if !s.RunUntil(AllAgree, time.Minute) {
		t.Fatalf("no agreement by %v", s.Now())
	}
	if l, err := s.Record().FinalLeader(want, nil); err != nil {
		t.Fatalf("FinalLeader = %q, %v; want %q", l, err, want)
	}
	st := s.Stats()
	t.Logf("elected %s in %v of virtual time: %d messages (%v) for %d edges", want, s.Now(), st.Sent, st.SentByType, edges)
	if got, theory := st.Sent, uint64(2*edges+n-1); got != theory {
		t.Errorf("messages = %d, want 2·edges + (n-1) = %d", got, theory)
	}
}

func BenchmarkEcho10k(b *testing.B) {
	for b.Loop() {
		s, _, _ := echoNet(b, 10000, 1)
		s.Campaign(0)
		if !s.RunUntil(AllAgree, time.Minute) {
			b.Fatal("no agreement")
		}
	}
}
