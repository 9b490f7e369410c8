package geometric

import (
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// placementDiag describes a placement of superpeers on a network, for
// TestPlacementDiagnostics. RTTs are in milliseconds, true RTTs.
type placementDiag struct {
	mean      float64 // mean RTT to the superpeer, attached by AttachAll (as Simulate does)
	ideal     float64 // the same, attached by true RTT (AttachAllBy; as bench judges)
	uncapped  float64 // attached by AttachAll without a capacity limit
	turned    float64 // share of ordinary peers not attached to their nearest superpeer
	hMed, h90 float64 // median and 90th percentile of the superpeers' heights
	cells     []int   // per superpeer, the ordinary peers nearest to it (uncapped)
}

func diagnose(t *testing.T, coords []*coordinate.Coordinate, rtt func(i, j int) time.Duration, sp []int, capacity int) placementDiag {
	t.Helper()
	n := len(coords)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	var q placementDiag
	a, err := AttachAll(coords, sp, capacity)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := AttachmentRTT(a, rtt)
	q.mean = ms(m)
	b, err := AttachAllBy(n, func(i, j int) float64 { return float64(rtt(i, j)) }, sp, capacity)
	if err != nil {
		t.Fatal(err)
	}
	m, _ = AttachmentRTT(b, rtt)
	q.ideal = ms(m)
	u, err := AttachAll(coords, sp, n)
	if err != nil {
		t.Fatal(err)
	}
	m, _ = AttachmentRTT(u, rtt)
	q.uncapped = ms(m)
	turned, ordinary := 0, 0
	cell := map[int]int{}
	for i, s := range u {
		if s == i {
			continue
		}
		ordinary++
		cell[s]++
		if a[i] != s {
			turned++
		}
	}
	q.turned = float64(turned) / float64(max(ordinary, 1))
	var hs []float64
	for _, s := range sp {
		hs = append(hs, coords[s].Height*1000)
		q.cells = append(q.cells, cell[s])
	}
	slices.Sort(hs)
	q.hMed, q.h90 = hs[len(hs)/2], hs[len(hs)*9/10]
	return q
}

// forceBalance returns, at the median over the superpeers of a settled
// run, the sum of the magnitudes of the repulsive forces on a token (what
// a height would lower the repulsion by, per unit of height, if the
// repulsion saw heights), the magnitude of their vector sum, and the pull
// A·S/N·|cell| of its cell (what a height adds to the attraction).
func forceBalance(coords []*coordinate.Coordinate, sp, cells []int, cfg Config) (magnitudes, net, pull float64) {
	c, _ := cfg.withDefaults()
	rho, eps := c.Range.Seconds(), c.Softening.Seconds()
	charge := rho * rho / float64(max(len(sp)-1, 1))
	var mag, vec, att []float64
	for k, x := range sp {
		m := 0.0
		f := make([]float64, len(coords[x].Vec))
		for _, y := range sp {
			if y != x {
				d := dist(coords[x].Vec, coords[y].Vec)
				m += charge / ((d + eps) * (d + eps))
				addUnit(f, coords[x].Vec, coords[y].Vec, charge/((d+eps)*(d+eps)))
			}
		}
		mag, vec = append(mag, m), append(vec, norm(f))
		att = append(att, c.Attraction*float64(len(sp))/float64(len(coords))*float64(cells[k]))
	}
	med := func(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
	return med(mag), med(vec), med(att)
}

// medoids returns an offline placement of k superpeers on the true RTTs:
// Voronoi iteration (assign every peer to its nearest medoid, move every
// medoid to the member that minimises the sum of RTTs to its cluster) from
// k seeded random peers, until nothing moves or 30 iterations. O(n·k) per
// iteration: fine at 10,000 and 30,000 hosts, slow at 100,000.
func medoids(n, k int, rtt func(i, j int) time.Duration, seed uint64) []int {
	med := rand.New(rand.NewPCG(seed, 0x3d)).Perm(n)[:k]
	assign := make([]int, n)
	for range 30 {
		for i := range n {
			best, bd := 0, time.Duration(math.MaxInt64)
			for c, m := range med {
				d := rtt(i, m)
				if i == m {
					d = 0
				}
				if d < bd {
					best, bd = c, d
				}
			}
			assign[i] = best
		}
		members := make([][]int, k)
		for i, c := range assign {
			members[c] = append(members[c], i)
		}
		moved := false
		for c, ms := range members {
			best, bs := med[c], time.Duration(math.MaxInt64)
			for _, x := range ms {
				var s time.Duration
				for _, y := range ms {
					s += rtt(x, y)
				}
				if s < bs {
					best, bs = x, s
				}
			}
			moved = moved || best != med[c]
			med[c] = best
		}
		if !moved {
			break
		}
	}
	slices.Sort(med)
	return med
}

// TestPlacementDiagnostics measures what the package documentation cites
// about the force law on the synthetic network of sim_scale_test.go: the
// geometric placement against random placement (20 draws) and, with
// GEOMETRIC_DIAG_MEDOIDS set, an offline k-medoids on the true RTTs, all
// attached the same way; the share of ordinary peers that capacity turns
// away from their nearest superpeer; the superpeers' heights; and the
// balance of repulsion and attraction on the settled tokens; it fails when
// the geometric placement is worse than random. It is skipped
// unless GEOMETRIC_DIAG_N names the number of hosts (10000 takes about 10
// s, 100000 several minutes); GEOMETRIC_DIAG_ROUNDS sets CoordRounds.
func TestPlacementDiagnostics(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GEOMETRIC_DIAG_N"))
	if n <= 0 || testing.Short() {
		t.Skip("set GEOMETRIC_DIAG_N (e.g. 10000) to run; not under -short")
	}
	s := max(1, n/100)
	capacity := 2 * n / s
	rtt := synthetic(n, 1)
	rounds, _ := strconv.Atoi(os.Getenv("GEOMETRIC_DIAG_ROUNDS"))
	if rounds <= 0 {
		rounds = DefaultCoordRounds(n)
	}
	coords, err := simCoords(n, rtt, SimConfig{Seed: 1, CoordRounds: rounds})
	if err != nil {
		t.Fatal(err)
	}
	var hs []float64
	for _, c := range coords {
		hs = append(hs, c.Height*1000)
	}
	slices.Sort(hs)
	t.Logf("n = %d, S = %d, C = %d, %d coordinate rounds; heights of all hosts: median %.2f ms, p90 %.2f ms",
		n, s, capacity, rounds, hs[n/2], hs[n*9/10])
	show := func(name string, q placementDiag) {
		t.Logf("%-10s mean RTT to superpeer %6.2f ms (attached by true RTT %6.2f, uncapped %6.2f); turned away %5.1f %%; superpeer heights median %.2f ms, p90 %.2f ms",
			name, q.mean, q.ideal, q.uncapped, 100*q.turned, q.hMed, q.h90)
	}

	r := rand.New(rand.NewPCG(1, 0xdead))
	var random placementDiag
	const draws = 20
	for range draws {
		q := diagnose(t, coords, rtt, r.Perm(n)[:s], capacity)
		random.mean += q.mean / draws
		random.ideal += q.ideal / draws
		random.uncapped += q.uncapped / draws
		random.turned += q.turned / draws
		random.hMed += q.hMed / draws
		random.h90 += q.h90 / draws
	}
	show("random", random)
	if os.Getenv("GEOMETRIC_DIAG_MEDOIDS") != "" {
		show("k-medoids", diagnose(t, coords, rtt, medoids(n, s, rtt, 1), capacity))
	}

	cfg := SimConfig{Seed: 1, Coords: coords}
	cfg.Tokens, cfg.Capacity = s, capacity
	res, err := Simulate(n, rtt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkSettled(t, res, n, s, capacity)
	q := diagnose(t, coords, rtt, res.Superpeers, capacity)
	show("geometric", q)
	if q.mean > random.mean {
		t.Errorf("geometric %.2f ms to the superpeer, worse than random placement's %.2f ms", q.mean, random.mean)
	}
	mag, net, pull := forceBalance(coords, res.Superpeers, q.cells, cfg.Config)
	t.Logf("geometric: last pass in round %d, %d passes; at the median token the repulsive forces sum to %.3f in magnitude, %.3f as a vector; the pull of its cell is %.3f",
		res.LastPass, res.Passes, mag, net, pull)
}
