package dhtselect

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randKeys returns n uniform keys from r.
func randKeys(r *rand.Rand, n int) []Key {
	keys := make([]Key, n)
	for i := range keys {
		for j := range keys[i] {
			keys[i][j] = byte(r.Uint32())
		}
	}
	return keys
}

// honestSummaries returns one summary per non-empty cluster at k of the
// peers with keys, as their superpeers report them.
func honestSummaries(keys []Key, k int) []ClusterSize {
	count := make(map[Key]int)
	for _, key := range keys {
		count[key.Cluster(k)]++
	}
	out := make([]ClusterSize, 0, len(count))
	for ck, n := range count {
		out = append(out, ClusterSize{K: k, Key: ck, Size: n})
	}
	slices.SortFunc(out, func(a, b ClusterSize) int { return slices.Compare(a.Key[:], b.Key[:]) })
	return out
}

// testSizes are the network sizes the backbone tests run at: every size
// up to 100, then steps of about 12 % to 100,000.
func testSizes() []int {
	var out []int
	for n := 1; n <= 100; n++ {
		out = append(out, n)
	}
	for n := 112; n <= 100_000; n = n * 9 / 8 {
		out = append(out, n)
	}
	return append(out, 100_000)
}

// Every non-empty cluster's honest summary gives the exact size, at every
// size from 1 to 100,000 and at the k of several fractions (clusters of
// means from 1 to 100, and the empty clusters that come with small ones).
func TestEstimateFromClustersExact(t *testing.T) {
	for _, f := range []float64{1, 0.5, 0.125, 0.01} {
		tg := Target{Fraction: f}
		for _, n := range testSizes() {
			r := rand.New(rand.NewPCG(uint64(n), math.Float64bits(f)))
			keys := randKeys(r, n)
			k := tg.K(n)
			cs := honestSummaries(keys, k)
			got, ok := EstimateFromClusters(cs)
			if !ok || got.N != n {
				t.Fatalf("F = %g, n = %d, k = %d, %d clusters: estimate %+v, %v, want %d", f, n, k, len(cs), got, ok, n)
			}
			if want := SourceBackbone; len(cs) == 1<<k && got.Source != want {
				t.Fatalf("F = %g, n = %d: every cluster key covered, source %q, want %q", f, n, got.Source, want)
			}
		}
	}
}

// With a share of the summaries not heard yet, the estimate extrapolates
// by density, corrected for empty clusters: with three quarters of them
// heard it is within 5 % at 1,000 peers or more (clusters of mean 4 to
// 8); with less than half it refuses.
func TestEstimateFromClustersPartial(t *testing.T) {
	tg := Target{Fraction: 0.125}
	worst := 0.0
	for _, n := range testSizes() {
		if n < 1000 {
			continue
		}
		r := rand.New(rand.NewPCG(uint64(n), 7))
		k := tg.K(n)
		cs := honestSummaries(randKeys(r, n), k)
		r.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
		heard := cs[:len(cs)*3/4]
		got, ok := EstimateFromClusters(heard)
		if !ok || got.Source != SourceBackbonePartial {
			t.Fatalf("n = %d: %d of %d summaries: %+v, %v, want a partial estimate", n, len(heard), len(cs), got, ok)
		}
		e := math.Abs(float64(got.N-n)) / float64(n)
		worst = max(worst, e)
		if e > 0.05 {
			t.Errorf("n = %d: %d of %d summaries: estimate %d, off by %.1f %%", n, len(heard), len(cs), got.N, 100*e)
		}
		if got, ok := EstimateFromClusters(cs[:len(cs)*2/5]); ok {
			t.Errorf("n = %d: 40 %% of the summaries: estimate %+v, want a refusal", n, got)
		}
	}
	t.Logf("worst error with 3/4 of the summaries: %.2f %%", 100*worst)
	if _, ok := EstimateFromClusters(nil); ok {
		t.Error("no summaries: an estimate")
	}
	if _, ok := EstimateFromClusters([]ClusterSize{{K: -1, Size: 5}, {K: MaxK + 1, Size: 5}, {K: 2, Size: 0}}); ok {
		t.Error("only unusable summaries: an estimate")
	}
}

// The extrapolation counts the clusters not heard from as non-empty ones
// in the proportion that empty clusters leave: at a mean of 2 peers per
// cluster, 13.5 % of them are empty, and half the others heard (1,024
// peers in 443 clusters of 1,024) stand for 2,048 peers, not the 2,368 of
// the plain density extrapolation.
func TestExtrapolate(t *testing.T) {
	const c, n = 1024.0, 2048.0
	heard := (c - expectedEmpty(c, n)) / 2
	if got := extrapolate(n/2, heard, c); math.Abs(got-n) > 1 {
		t.Errorf("extrapolate = %.1f, want %.0f", got, n)
	}
	// 50 peers alone in 50 clusters of 2^20: the others are as empty as
	// expected.
	if got := extrapolate(50, 50, 1<<20); got != 50 {
		t.Errorf("50 clusters heard of 2^20 with 50 peers: %.1f, want the sum", got)
	}
}

// During a change of k, some superpeers report at k and some at k+1: the
// estimate stays exact when the summaries, of either k, cover every
// cluster, and does not count a cluster twice when a superpeer at k and
// one of its halves at k+1 both report it.
func TestEstimateFromClustersChangeOfK(t *testing.T) {
	const n, k = 4000, 8 // clusters of mean 15.6
	r := rand.New(rand.NewPCG(1, 1))
	keys := randKeys(r, n)
	old, split := honestSummaries(keys, k), honestSummaries(keys, k+1)
	for _, share := range []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1} {
		// A share of the clusters at k have split, chosen by their key.
		var cs []ClusterSize
		splitOf := func(ck Key) bool { return float64(ck[0]) < share*256 }
		for _, c := range old {
			if !splitOf(c.Key) {
				cs = append(cs, c)
			}
		}
		for _, c := range split {
			if splitOf(c.Key.Cluster(k)) {
				cs = append(cs, c)
			}
		}
		// The new superpeers of some upper halves have come up while the
		// old superpeer of their cluster still reports it whole.
		for _, c := range split {
			if !splitOf(c.Key.Cluster(k)) && c.Key[0]&1 == 0 && c.Key != c.Key.Cluster(k) {
				cs = append(cs, c)
			}
		}
		got, ok := EstimateFromClusters(cs)
		if !ok || got.N != n {
			t.Errorf("%.0f %% split: estimate %+v, %v, want %d", 100*share, got, ok, n)
		}
	}
	// Two superpeers claim one cluster (a split brain): it counts once.
	cs := append(honestSummaries(keys, k), old[0], old[1])
	if got, ok := EstimateFromClusters(cs); !ok || got.N != n {
		t.Errorf("split brain: estimate %+v, %v, want %d", got, ok, n)
	}
	// A cluster key given unmasked is masked.
	cs = honestSummaries(keys, k)
	cs[0].Key[31] ^= 1
	if got, ok := EstimateFromClusters(cs); !ok || got.N != n {
		t.Errorf("an unmasked key: estimate %+v, %v, want %d", got, ok, n)
	}
}

// One superpeer that lies about its size, whatever it claims and at
// whatever k, moves the estimate by at most two capped clusters, and k by
// at most one, among 16 honest clusters.
func TestEstimateFromClustersLiar(t *testing.T) {
	tg := Target{Fraction: 0.1}
	for n := 85; n <= 164; n++ { // k = 4: 16 clusters
		k := tg.K(n)
		if k != 4 {
			t.Fatalf("n = %d gives k = %d, want 4", n, k)
		}
		r := rand.New(rand.NewPCG(uint64(n), 3))
		keys := randKeys(r, n)
		honest := honestSummaries(keys, k)
		liarKey := keys[0]
		for _, lie := range []ClusterSize{
			{K: k, Size: 1_000_000}, {K: k - 1, Size: 1_000_000}, {K: k + 1, Size: 1_000_000},
			{K: 0, Size: 1_000_000}, {K: MaxK, Size: 1_000_000}, {K: k, Size: 1}, {K: k - 1, Size: 1},
		} {
			lie.Key = liarKey.Cluster(lie.K)
			for _, replace := range []bool{false, true} {
				// The liar is the superpeer of its cluster (its summary
				// replaces the honest one), or a second claimant.
				var cs []ClusterSize
				for _, c := range honest {
					if !replace || c.Key != liarKey.Cluster(k) {
						cs = append(cs, c)
					}
				}
				cs = append(cs, lie)
				got, ok := EstimateFromClusters(cs)
				if !ok {
					t.Fatalf("n = %d, lie %+v (replacing %v): refused", n, lie, replace)
				}
				if d := tg.K(got.N) - k; d > 1 || d < -1 {
					t.Errorf("n = %d, lie %d at k = %d (replacing %v): estimate %d, k moved by %d", n, lie.Size, lie.K, replace, got.N, d)
				}
				if float64(got.N) > float64(n)+2*max(SizeCapFloor, SizeCapMultiple*honestMedian(honest)) {
					t.Errorf("n = %d, lie %d at k = %d: estimate %d beyond the stated bound", n, lie.Size, lie.K, got.N)
				}
			}
		}
	}
}

// honestMedian is the median size of the clusters cs.
func honestMedian(cs []ClusterSize) float64 {
	s := make([]float64, len(cs))
	for i, c := range cs {
		s[i] = float64(c.Size)
	}
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// In a network of one or two clusters, a liar adds no more than the
// stated bound either, whatever k it claims: it may take the working k
// (a tie of one summary against one), but its size is capped by the
// honest summary, scaled to that k, and the estimate may be refused (then
// EstimateSize uses another source).
func TestEstimateFromClustersLiarSmall(t *testing.T) {
	refused := 0
	for _, n := range []int{1, 3, 10, 40, 100} {
		for _, k := range []int{0, 1} {
			r := rand.New(rand.NewPCG(uint64(n), uint64(k)))
			keys := randKeys(r, n)
			honest := honestSummaries(keys, k)
			for _, lk := range []int{0, 1, 2, 5, MaxK} {
				for _, size := range []int{1, 1_000_000} {
					lie := ClusterSize{K: lk, Key: keys[0].Cluster(lk), Size: size}
					got, ok := EstimateFromClusters(append(slices.Clone(honest), lie))
					if !ok {
						refused++
						continue
					}
					if bound := float64(n) + 2*max(SizeCapFloor, SizeCapMultiple*honestMedian(honest)); float64(got.N) > bound {
						t.Errorf("n = %d, k = %d, lie %d at k = %d: estimate %d, above %.0f", n, k, size, lk, got.N, bound)
					}
				}
			}
		}
	}
	t.Logf("%d of 100 lies refused", refused)
}

// EstimateSize takes a covering backbone before every other source, and a
// partial one after the exact sources but before kad-dht and the fit.
func TestEstimateSizeBackbone(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	keys := randKeys(r, 3000)
	self := keys[0]
	cover := honestSummaries(keys, 6) // 64 clusters of mean 47: all non-empty
	if len(cover) != 64 {
		t.Fatalf("%d clusters, want 64", len(cover))
	}
	// A full bucket in the routing table, so that it is no exact source.
	var full []Key
	for _, k := range keys[1:] {
		if Xor(self, k)[0]&0x80 != 0 {
			full = append(full, k)
		}
		if len(full) == BucketSize {
			break
		}
	}
	cases := []struct {
		name string
		in   SizeInputs
		want Estimate
	}{
		{"covered, over membership", SizeInputs{Self: self, Members: 100, Clusters: cover}, Estimate{3000, SourceBackbone}},
		{"covered, over routing", SizeInputs{Self: self, Routing: keys[1:5], Clusters: cover}, Estimate{3000, SourceBackbone}},
		{"partial, after membership", SizeInputs{Self: self, Members: 100, Clusters: cover[:60]}, Estimate{100, SourceMembership}},
		{"partial, after routing", SizeInputs{Self: self, Routing: keys[1:5], Clusters: cover[:60]}, Estimate{5, SourceRouting}},
		{"partial, before kad", SizeInputs{Self: self, Routing: full, Kad: 50, KadOK: true, Clusters: cover[:63]}, Estimate{0, SourceBackbonePartial}},
		{"refused, kad", SizeInputs{Self: self, Routing: full, Kad: 50, KadOK: true, Clusters: cover[:10]}, Estimate{50, SourceKad}},
	}
	for _, c := range cases {
		got := EstimateSize(c.in)
		if got.Source != c.want.Source || (c.want.N != 0 && got.N != c.want.N) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		if c.want.N == 0 && math.Abs(float64(got.N-3000)) > 150 {
			t.Errorf("%s: %+v, want about 3000", c.name, got)
		}
	}
}

// BenchmarkEstimateFromClusters: the summaries of 100,000 peers at a
// fraction of 1/8 (16,384 cluster keys, some 12,500 superpeers).
func BenchmarkEstimateFromClusters(b *testing.B) {
	const n = 100_000
	r := rand.New(rand.NewPCG(1, 2))
	cs := honestSummaries(randKeys(r, n), Target{Fraction: 0.125}.K(n))
	b.ReportAllocs()
	for b.Loop() {
		if got, ok := EstimateFromClusters(cs); !ok || got.N != n {
			b.Fatalf("estimate %+v, %v", got, ok)
		}
	}
}

// SampleEstimate extrapolates from a few clusters' summaries, where
// EstimateFromClusters refuses: a node's own cluster and a few it can
// vouch for stand for the network, within a factor of two of it (the use
// the node makes of it: overlay/node's backboneEstimate lets the whole
// backbone's estimate through up to twice the sample's). Over 2,000 seeded
// draws of 1 to 8 clusters of 512 peers at k = 5 (S = n/16, clusters of
// 16 on the mean) and of 100,000 peers at k = 12 (24 on the mean): from 2
// clusters heard every draw is within 2x, and from 1, 99 % of them (a
// lone cluster 3 standard deviations small, 10 peers where the mean is
// 24, stands for 41,000 peers of 100,000). The errors are logged.
func TestSampleEstimate(t *testing.T) {
	for _, c := range []struct{ n, k int }{{512, 5}, {100_000, 12}} {
		r := rand.New(rand.NewPCG(uint64(c.n), 11))
		cs := honestSummaries(randKeys(r, c.n), c.k)
		for heard := 1; heard <= 8; heard++ {
			const draws = 2000
			var errs []float64
			outside := 0
			for range draws {
				r.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
				got, ok := SampleEstimate(cs[:heard])
				if !ok {
					t.Fatalf("n = %d, %d summaries: refused", c.n, heard)
				}
				ratio := float64(got.N) / float64(c.n)
				errs = append(errs, math.Abs(ratio-1))
				if ratio < 0.5 || ratio > 2 {
					outside++
				}
			}
			if heard > 1 && outside > 0 || outside > draws/100 {
				t.Errorf("n = %d, %d clusters heard: %d of %d estimates not within 2x", c.n, heard, outside, draws)
			}
			slices.Sort(errs)
			t.Logf("n = %d, %d clusters heard: median error %.1f %%, 90th percentile %.1f %%, worst %.1f %%, %d not within 2x", c.n, heard, 100*errs[len(errs)/2], 100*errs[len(errs)*9/10], 100*errs[len(errs)-1], outside)
		}
	}
	if _, ok := SampleEstimate(nil); ok {
		t.Error("no summaries: an estimate")
	}
}
