package bench

import (
	"testing"
	"time"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/testnet/latency"
)

// How many gossip rounds the token dynamics take to stop moving, as n grows,
// with S = n/10 (seed 1; the 10,000-host figure is BenchmarkGeometric10k's):
//
//	n       S    last pass (round)  passes  passes per peer
//	100     10   3                  23      0.23
//	490     49   3                  89      0.18
//	10,000  100  2                  91      0.009   (synthetic, 200 coordinate rounds)
//
// Every token then holds still for the dwell time (30 rounds) before its
// holder is promoted. The bound asserted is generous: within 20 rounds.
func TestGeometricRounds(t *testing.T) {
	m, err := latency.Load(planetLab)
	if err != nil {
		t.Fatal(err)
	}
	if m, err = m.FillMissing(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{100, 490} {
		sub := m
		if n < m.N() {
			hosts := make([]int, n)
			for i := range hosts {
				hosts[i] = i
			}
			sub = m.Sub(hosts)
		}
		rtt := func(i, j int) time.Duration { d, _ := sub.RTT(i, j); return d }
		s := n / 10
		res, err := geometric.Simulate(n, rtt, geometric.SimConfig{Config: geometric.Config{Tokens: s}, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("n = %d, S = %d: last pass in round %d, %d passes (%.2f per peer), settled %v after %d rounds",
			n, s, res.LastPass, res.Passes, float64(res.Passes)/float64(n), res.Settled, res.Rounds)
		if !res.Settled || len(res.Superpeers) != s || res.LastPass > 20 {
			t.Errorf("n = %d: settled %v with %d superpeers, last pass in round %d", n, res.Settled, len(res.Superpeers), res.LastPass)
		}
	}
}

// BenchmarkGeometric10k runs the token dynamics on a synthetic network of
// 10,000 hosts with S = 100 (too slow for the test suite: about a minute;
// its coordinates get 200 rounds of samples rather than 1000 to keep it so).
func BenchmarkGeometric10k(b *testing.B) {
	const n, s = 10000, 100
	rtt := Synthetic(n, 1).RTT
	for range b.N {
		res, err := geometric.Simulate(n, rtt, geometric.SimConfig{Config: geometric.Config{Tokens: s, Capacity: 200}, Seed: 1, CoordRounds: 200})
		if err != nil {
			b.Fatal(err)
		}
		q := Measure(func(i, j int) float64 { return float64(rtt(i, j)) / 1e6 }, res.Attach)
		b.ReportMetric(float64(res.LastPass), "last-pass-round")
		b.ReportMetric(float64(res.Passes), "passes")
		b.ReportMetric(q.Mean, "mean-rtt-ms")
		if !res.Settled {
			b.Errorf("not settled after %d rounds", res.Rounds)
		}
	}
}
