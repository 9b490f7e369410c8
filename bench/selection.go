package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/testnet/latency"
)

// judge judges placements on n hosts: every ordinary peer attaches to the
// nearest superpeer by ms that has room.
type judge struct {
	n        int
	ms       Dist
	capacity int
}

func (j judge) quality(superpeers []int) (Quality, error) {
	a, err := geometric.AttachAllBy(j.n, j.ms, superpeers, j.capacity)
	if err != nil {
		return Quality{}, err
	}
	return Measure(j.ms, a), nil
}

// baselines returns the mean quality of draws random placements of s
// superpeers and the quality of the offline k-median placement.
func (j judge) baselines(s, draws int, rng *rand.Rand) (random, kmedian Quality, err error) {
	for range draws {
		sp, err := RandomPlacement(j.n, s, rng)
		if err != nil {
			return random, kmedian, err
		}
		q, err := j.quality(sp)
		if err != nil {
			return random, kmedian, err
		}
		random = random.add(q, 1/float64(draws))
	}
	km, err := KMedian(j.n, j.ms, s, rng)
	if err != nil {
		return random, kmedian, err
	}
	kmedian, err = j.quality(km)
	return random, kmedian, err
}

// Baseline judges a live placement on the first n hosts of matrix m (rows
// 0..n-1, as the testnet assigns them): the given superpeers with every
// peer attached ideally (nearest by true RTT with room), against the mean
// of 100 random placements and the offline k-median, for the same number
// of superpeers and capacity. The matrix must have no missing entry.
func Baseline(m *latency.Matrix, n int, superpeers []int, capacity int, seed uint64) (placed, random, kmedian Quality, err error) {
	if n < 1 || n > m.N() || len(superpeers) < 1 || len(superpeers) > n || m.Missing() > 0 {
		return placed, random, kmedian, fmt.Errorf("%w: %d superpeers among the first %d of %d hosts (%d pairs missing)",
			ErrPlacement, len(superpeers), n, m.N(), m.Missing())
	}
	if capacity == 0 {
		capacity = geometric.DefaultConfig().Capacity
	}
	j := judge{n: n, capacity: capacity, ms: func(a, b int) float64 {
		d, _ := m.RTT(a, b)
		return float64(d) / float64(time.Millisecond)
	}}
	if placed, err = j.quality(superpeers); err != nil {
		return placed, random, kmedian, err
	}
	random, kmedian, err = j.baselines(len(superpeers), 100, rand.New(rand.NewPCG(seed, uint64(len(superpeers)))))
	return placed, random, kmedian, err
}

// add returns q plus w times o, figure by figure.
func (q Quality) add(o Quality, w float64) Quality {
	q.Mean += w * o.Mean
	q.P95 += w * o.P95
	q.Max += w * o.Max
	q.ClusterCV += w * o.ClusterCV
	q.MaxCluster = max(q.MaxCluster, o.MaxCluster)
	q.Clusters, q.OrdinaryCounted = o.Clusters, o.OrdinaryCounted
	return q
}
