package dhtselect

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/peer"
	pstore "github.com/libp2p/go-libp2p/p2p/host/peerstore"
)

// checkAgainstAssign checks a simulation against the brute-force answer
// computed from its peer IDs.
func checkAgainstAssign(t *testing.T, res *SimResult) {
	t.Helper()
	if res.Correct != res.N {
		t.Errorf("%d of %d lookups ended at the brute-force answer", res.Correct, res.N)
	}
	as := Assign(res.IDs, res.K)
	want := map[int]bool{}
	index := make(map[peer.ID]int, res.N)
	for i, id := range res.IDs {
		index[id] = i
	}
	for i, a := range as {
		if len(res.Attach) != res.N || res.Attach[i] < 0 || res.Attach[i] >= res.N {
			t.Fatalf("peer %d is not attached: Attach has %d entries", i, len(res.Attach))
		}
		if got := res.IDs[res.Attach[i]]; got != a.Superpeer {
			t.Fatalf("peer %d (%s) attached to %s, brute force says %s", i, a.ID, got, a.Superpeer)
		}
		want[index[a.Superpeer]] = true
	}
	wantSP := make([]int, 0, len(want))
	for i := range want {
		wantSP = append(wantSP, i)
	}
	slices.Sort(wantSP)
	if !slices.Equal(res.Superpeers, wantSP) {
		t.Errorf("superpeers %v, brute force %v", res.Superpeers, wantSP)
	}
	for _, s := range res.Superpeers {
		if res.Attach[s] != s {
			t.Errorf("superpeer %d attached to %d, not to itself", s, res.Attach[s])
		}
	}
	if cs := Clusters(as, res.K); res.Occupied != len(cs) || len(res.Superpeers) != len(cs) {
		t.Errorf("occupied %d, superpeers %d, brute force has %d clusters", res.Occupied, len(res.Superpeers), len(cs))
	}
	if res.ClusterSize.Total != int64(res.N) || res.Clusters != 1<<res.K {
		t.Errorf("cluster sizes sum to %d of %d peers; %d cluster keys for k=%d", res.ClusterSize.Total, res.N, res.Clusters, res.K)
	}
	if res.Load.Total != res.Messages.Total {
		t.Errorf("%d queries sent, %d answered", res.Messages.Total, res.Load.Total)
	}
}

// The simulated superpeers are the brute-force ones, for several targets,
// bucket sizes and concurrencies.
func TestSimulateMatchesAssign(t *testing.T) {
	cases := []SimConfig{
		{N: 1, Target: Target{Superpeers: 4}},
		{N: 2, Target: Target{Superpeers: 1}},
		{N: 50, Target: Target{Superpeers: 8}},
		{N: 500, Target: Target{Superpeers: 1}},
		{N: 500, Target: Target{Superpeers: 5}},
		{N: 500, Target: Target{Fraction: 0.01}},
		{N: 500, Target: Target{Fraction: 0.1}},
		{N: 500, Target: Target{Fraction: 1}},
		{N: 500, Target: Target{Superpeers: 16}, BucketSize: 4},
		{N: 500, Target: Target{Superpeers: 16}, BucketSize: 1, Alpha: 1},
		{N: 500, Target: Target{Superpeers: 16}, Alpha: 10},
		{N: 5000, Target: Target{Fraction: 0.01}},
		{N: 5000, Target: Target{Superpeers: 3}},
		{N: 5000, Target: Target{Fraction: 0.2}, BucketSize: 8},
	}
	for _, c := range cases {
		if testing.Short() && c.N > 1000 {
			continue // the brute force is slow under -race
		}
		c.Seed = uint64(c.N) + uint64(c.Target.Superpeers)
		res, err := Simulate(c)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		t.Logf("n=%d %s bucket=%d alpha=%d: k=%d, %d superpeers of %d cluster keys; messages %v; rounds %v; load max %d",
			c.N, c.Target, c.BucketSize, c.Alpha, res.K, len(res.Superpeers), res.Clusters, res.Messages, res.Rounds, res.Load.Max)
		checkAgainstAssign(t, res)
	}
}

// simTable materialises peer x's routing table, bucket by bucket.
func simTable(s *simNet, x int32) [][]int32 {
	var bs simBuckets
	s.startBuckets(x, &bs)
	s.descend(&bs, KeyBits)
	table := make([][]int32, bs.done)
	for b := range table {
		table[b] = s.appendBucket(nil, x, b, &bs)
	}
	return table
}

// The lazy tables are those of a fully refreshed kad-dht: every bucket
// holds min(BucketSize, peers at that prefix length) distinct peers at
// exactly that prefix length, the same ones each time; and the answer to
// a query is what go-libp2p-kbucket's NearestPeers gives from a real
// routing table holding the same peers.
func TestSimTablesMatchKbucket(t *testing.T) {
	const n = 3000
	for _, bucketSize := range []int{BucketSize, 5} {
		s := newSimNet(n, 42, bucketSize)
		r := rand.New(rand.NewPCG(1, uint64(bucketSize)))
		for range 25 {
			x := int32(r.IntN(n))
			table := simTable(s, x)
			if again := simTable(s, x); !reflect.DeepEqual(table, again) {
				t.Fatalf("peer %d: the table changed between two reads", x)
			}
			var count [KeyBits + 1]int
			for y := range s.keys {
				if int32(y) != x {
					count[simCPL(&s.keys[x], &s.keys[y])]++
				}
			}
			rt, err := kb.NewRoutingTable(bucketSize, kb.ConvertPeerID(s.ids[x]), time.Hour, pstore.NewMetrics(), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			var all []peer.ID
			for b := range KeyBits {
				var bucket []int32
				if b < len(table) {
					bucket = table[b]
				}
				if len(bucket) != min(bucketSize, count[b]) {
					t.Fatalf("peer %d bucket %d holds %d peers, want min(%d, %d)", x, b, len(bucket), bucketSize, count[b])
				}
				seen := map[int32]bool{}
				for _, y := range bucket {
					if seen[y] || simCPL(&s.keys[x], &s.keys[y]) != b {
						t.Fatalf("peer %d bucket %d: peer %d repeated or at the wrong prefix length", x, b, y)
					}
					seen[y] = true
					all = append(all, s.ids[y])
					if ok, err := rt.TryAddPeer(s.ids[y], true, false); !ok || err != nil {
						t.Fatalf("kbucket refused peer %d: %v", y, err)
					}
				}
			}
			if rt.Size() != len(all) {
				t.Fatalf("kbucket holds %d peers, the table %d", rt.Size(), len(all))
			}
			var bs simBuckets
			for q := range 40 {
				var target Key
				switch {
				case q < 20:
					for i := range target {
						target[i] = byte(r.Uint32())
					}
				case q < 30: // a cluster key of some peer
					target = s.keys[r.IntN(n)].Cluster(q - 20)
				default: // a key near x's
					target = s.keys[x]
					target[2+q%10] ^= 0x10
				}
				got := s.nearest(nil, x, &target, bucketSize, &bs)
				gotIDs := make([]peer.ID, len(got))
				for i, y := range got {
					gotIDs[i] = s.ids[y]
				}
				want := rt.NearestPeers(kb.ID(target[:]), bucketSize)
				slices.Sort(gotIDs)
				slices.Sort(want)
				if !slices.Equal(gotIDs, want) {
					t.Fatalf("peer %d, target %s: nearest %v, kbucket %v", x, target, gotIDs, want)
				}
			}
			_ = rt.Close()
		}
	}
}

// The driver passes on only peers a lookup has not heard of; that must not
// change the lookup. A plain driver, which hands Lookup every answer in
// full and takes answers one at a time in the order sent, like overlay's
// loop, must send the same queries and end at the same peer.
func TestSimDriverMatchesPlainDriver(t *testing.T) {
	const n = 2000
	s := newSimNet(n, 5, BucketSize)
	for _, k := range []int{0, 3, 7} {
		d := s.newDriver(k, SimAlpha, make([]int32, n))
		for x := int32(0); x < n; x += 37 {
			end, queries, rounds := d.run(x)

			target := s.keys[x].Cluster(k)
			var bs simBuckets
			ids := func(ps []int32) []peer.ID {
				var out []peer.ID
				for _, p := range ps {
					if p != x {
						out = append(out, s.ids[p])
					}
				}
				return out
			}
			l := NewLookup(target, s.ids[x], ids(s.nearest(nil, x, &target, BucketSize, &bs)), Resiliency, SimAlpha)
			type flight struct {
				p  peer.ID
				at int32
			}
			var inflight []flight
			var now, sent int32
			for !l.Done() {
				for _, p := range l.Next() {
					inflight = append(inflight, flight{p, now + 1})
					sent++
				}
				if len(inflight) == 0 {
					t.Fatal("lookup neither done nor progressing")
				}
				f := inflight[0]
				inflight = inflight[1:]
				now = f.at
				p := s.pos[simIndex(f.p)]
				l.Answered(f.p, ids(s.nearest(nil, p, &target, BucketSize, &bs)))
			}
			if got := s.ids[end]; got != l.Result()[0] || queries != sent || rounds != now {
				t.Fatalf("k=%d peer %d: driver ended at %s after %d queries, %d rounds; plain driver at %s after %d, %d",
					k, x, got, queries, rounds, l.Result()[0], sent, now)
			}
		}
	}
}

// closest descends the sorted keys to the brute-force closest key.
func TestSimNetClosest(t *testing.T) {
	for _, n := range []int{1, 2, 3, 100, 2000} {
		s := newSimNet(n, uint64(n), BucketSize)
		r := rand.New(rand.NewPCG(3, uint64(n)))
		for q := range 200 {
			var target Key
			for i := range target {
				target[i] = byte(r.Uint32())
			}
			if q%2 == 1 {
				target = target.Cluster(q % 16)
			}
			if got, want := s.closest(&target), Closest(target, s.keys); int(got) != want {
				t.Fatalf("n=%d target %s: closest %d, brute force %d", n, target, got, want)
			}
		}
	}
}

// Every simulated ID is a well-formed peer ID that names its peer.
func TestSimPeerIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, i := range []int{0, 1, 255, 65536, MaxSimPeers - 1} {
		id := simPeerID(r, i)
		if err := id.Validate(); err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Decode(id.String()); err != nil || !strings.HasPrefix(id.String(), "12D3KooW") {
			t.Fatalf("%s does not decode as an Ed25519 peer ID: %v", id, err)
		}
		if _, err := id.ExtractPublicKey(); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if got := simIndex(id); int(got) != i {
			t.Fatalf("simIndex = %d, want %d", got, i)
		}
	}
}

// The seed is the only randomness: the same seed gives the same result,
// another seed another network.
func TestSimulateDeterministic(t *testing.T) {
	cfg := SimConfig{N: 3000, Target: Target{Fraction: 0.01}, Seed: 7}
	a, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different results")
	}
	cfg.Seed = 8
	c, err := Simulate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.IDs[0] == c.IDs[0] || slices.Equal(a.Superpeers, c.Superpeers) {
		t.Fatal("another seed gave the same network")
	}
}

// Lookup cost grows like log n when S is fixed: ten times the peers adds a
// query or two, far from ten times as many. When S grows with n (a fixed
// fraction), a cluster key lies within the peer's own cluster of about 1/F
// peers, and the cost hardly grows at all.
func TestSimulateScaling(t *testing.T) {
	sizes := [2]int{1000, 10000}
	if testing.Short() {
		sizes = [2]int{500, 5000}
	}
	for _, c := range []struct {
		target   Target
		min, max float64 // bounds on the ratio of the means, big to small
	}{
		{Target{Superpeers: 1}, 1.1, 2},
		{Target{Fraction: 0.01}, 0.9, 1.25},
	} {
		var msgs, rounds [2]float64
		for i, n := range sizes {
			res, err := Simulate(SimConfig{N: n, Target: c.target, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Correct != n {
				t.Errorf("n=%d %s: %d of %d lookups correct", n, c.target, res.Correct, n)
			}
			t.Logf("n=%d %s k=%d: %d superpeers of %d cluster keys; messages %v; rounds %v; load %v",
				n, c.target, res.K, len(res.Superpeers), res.Clusters, res.Messages, res.Rounds, res.Load)
			msgs[i], rounds[i] = res.Messages.Mean, res.Rounds.Mean
		}
		if r := msgs[1] / msgs[0]; r < c.min || r > c.max {
			t.Errorf("%s: messages per peer %.2f at %d peers, %.2f at %d (ratio %.2f), want a ratio in [%g, %g]",
				c.target, msgs[0], sizes[0], msgs[1], sizes[1], r, c.min, c.max)
		}
		if r := rounds[1] / rounds[0]; r < 0.9 || r > 2 {
			t.Errorf("%s: rounds %.2f at %d peers, %.2f at %d (ratio %.2f), want log-like growth",
				c.target, rounds[0], sizes[0], rounds[1], sizes[1], r)
		}
	}
}

func TestSimulateBadConfig(t *testing.T) {
	good := Target{Superpeers: 4}
	for _, c := range []struct {
		cfg   SimConfig
		field string
	}{
		{SimConfig{N: 0, Target: good}, "SimConfig.N"},
		{SimConfig{N: -3, Target: good}, "SimConfig.N"},
		{SimConfig{N: MaxSimPeers + 1, Target: good}, "SimConfig.N"},
		{SimConfig{N: 10}, "SimConfig.Target"},
		{SimConfig{N: 10, Target: Target{Superpeers: 2, Fraction: 0.5}}, "SimConfig.Target"},
		{SimConfig{N: 10, Target: Target{Fraction: 2}}, "SimConfig.Target"},
		{SimConfig{N: 10, Target: Target{Superpeers: 1 << 31}}, "SimConfig.Target"},
		{SimConfig{N: 10, Target: good, BucketSize: -1}, "SimConfig.BucketSize"},
		{SimConfig{N: 10, Target: good, Alpha: -1}, "SimConfig.Alpha"},
	} {
		res, err := Simulate(c.cfg)
		if !errors.Is(err, ErrSimConfig) || res != nil {
			t.Errorf("%+v: got %v, %v; want an ErrSimConfig", c.cfg, res, err)
			continue
		}
		if !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: error %q does not name %s", c.cfg, err, c.field)
		}
		if c.field == "SimConfig.Target" && !errors.Is(err, ErrBadTarget) {
			t.Errorf("%+v: error %q does not wrap ErrBadTarget", c.cfg, err)
		}
	}
}

// simCPU returns the CPU time (user and system) the process has used; on a
// shared machine it is a steadier figure than the wall time.
func simCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// simCost is what a run took.
type simCost struct {
	wall, cpu time.Duration
	peak      uint64 // bytes of heap above the heap before the run
}

// simRun runs cfg and reports the wall time, the CPU time and the peak
// heap, sampled every 10 ms with runtime.ReadMemStats.
func simRun(tb testing.TB, cfg SimConfig) (*SimResult, simCost) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start, cpu := time.Now(), simCPU()
	res, err := Simulate(cfg)
	wall, cpu := time.Since(start), simCPU()-cpu
	close(stop)
	wg.Wait()
	if err != nil {
		tb.Fatal(err)
	}
	return res, simCost{wall, cpu, peak - base}
}

func simReport(tb testing.TB, res *SimResult, c simCost) {
	tb.Logf("n=%d S=%d k=%d: wall %v, CPU %v, peak heap %.1f MB; correct %d/%d; superpeers %d of %d cluster keys (occupied %d); cluster size %v",
		res.N, res.S, res.K, c.wall.Round(time.Millisecond), c.cpu.Round(time.Millisecond), float64(c.peak)/(1<<20), res.Correct, res.N,
		len(res.Superpeers), res.Clusters, res.Occupied, res.ClusterSize)
	tb.Logf("  messages/peer %v (total %d); rounds %v; load %v", res.Messages, res.Messages.Total, res.Rounds, res.Load)
}

// TestSimulateLarge runs the sizes in SUPERPEER_SIM_LARGE (for instance
// "1000,10000,100000"), with S = n/100 and with S = 1, and reports time,
// heap and costs.
func TestSimulateLarge(t *testing.T) {
	env := os.Getenv("SUPERPEER_SIM_LARGE")
	if env == "" {
		t.Skip("set SUPERPEER_SIM_LARGE=1000,10000,100000 to run")
	}
	for _, f := range strings.Split(env, ",") {
		var n int
		for _, c := range strings.TrimSpace(f) {
			if c < '0' || c > '9' {
				t.Fatalf("SUPERPEER_SIM_LARGE: %q is not a peer count", f)
			}
			n = 10*n + int(c-'0')
		}
		for _, target := range []Target{{Fraction: 0.01}, {Superpeers: 1}} {
			res, cost := simRun(t, SimConfig{N: n, Target: target, Seed: 1})
			simReport(t, res, cost)
			if res.Correct != res.N {
				t.Errorf("n=%d %s: %d lookups wrong", n, target, res.N-res.Correct)
			}
		}
	}
}

// BenchmarkSim100k simulates 100,000 peers with S = 1,000.
func BenchmarkSim100k(b *testing.B) {
	for b.Loop() {
		res, cost := simRun(b, SimConfig{N: 100_000, Target: Target{Fraction: 0.01}, Seed: 1})
		simReport(b, res, cost)
		b.ReportMetric(cost.cpu.Seconds(), "cpu-s")
		b.ReportMetric(float64(cost.peak)/(1<<20), "peak-heap-MB")
		b.ReportMetric(res.Messages.Mean, "msgs/peer")
		b.ReportMetric(res.Rounds.Mean, "rounds")
		b.ReportMetric(float64(res.Correct)/float64(res.N), "correct")
	}
}

// BenchmarkSimulate times smaller networks, with S = n/100 and with S = 1
// (every lookup crosses the whole key space to the same few peers).
func BenchmarkSimulate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, target := range []Target{{Fraction: 0.01}, {Superpeers: 1}} {
			b.Run(fmt.Sprintf("n=%d/%s", n, target), func(b *testing.B) {
				for b.Loop() {
					res, err := Simulate(SimConfig{N: n, Target: target, Seed: 1})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(res.Messages.Mean, "msgs/peer")
				}
			})
		}
	}
}
