package dhtselect

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// routingTables builds, for every peer, a Kademlia routing table as kad-dht
// keeps one: for each common-prefix length, up to bucketSize peers, chosen at
// random from those with that prefix length.
func routingTables(ids []peer.ID, bucketSize int, r *rand.Rand) map[peer.ID][]peer.ID {
	rts := make(map[peer.ID][]peer.ID, len(ids))
	for _, self := range ids {
		sk := keyOf(self)
		buckets := map[int][]peer.ID{}
		for _, o := range ids {
			if o == self {
				continue
			}
			c := cpl(sk, keyOf(o))
			buckets[c] = append(buckets[c], o)
		}
		var rt []peer.ID
		for _, b := range buckets {
			r.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
			rt = append(rt, b[:min(len(b), bucketSize)]...)
		}
		rts[self] = rt
	}
	return rts
}

func cpl(a, b Key) int {
	for i := range a {
		if x := a[i] ^ b[i]; x != 0 {
			return 8*i + bits.LeadingZeros8(x)
		}
	}
	return 8 * len(a)
}

// keyCache memoises KeyOf: the brute-force tables hash each ID many times.
var keyCache sync.Map

func keyOf(id peer.ID) Key {
	if k, ok := keyCache.Load(id); ok {
		return k.(Key)
	}
	k := KeyOf(id)
	keyCache.Store(id, k)
	return k
}

func nearest(rt []peer.ID, target Key, n int) []peer.ID {
	c := slices.Clone(rt)
	slices.SortFunc(c, func(a, b peer.ID) int {
		da, db := Xor(keyOf(a), target), Xor(keyOf(b), target)
		return slices.Compare(da[:], db[:])
	})
	return c[:min(n, len(c))]
}

// runLookup drives a Lookup over in-memory routing tables; dead peers fail.
func runLookup(self peer.ID, target Key, rts map[peer.ID][]peer.ID, dead map[peer.ID]bool) (*Lookup, int) {
	l := NewLookup(target, self, nearest(rts[self], target, BucketSize), Resiliency, 3)
	queries := 0
	for !l.Done() {
		next := l.Next()
		if len(next) == 0 {
			panic("lookup neither done nor progressing")
		}
		for _, p := range next {
			queries++
			if dead[p] {
				l.Failed(p)
				continue
			}
			l.Answered(p, nearest(rts[p], target, BucketSize))
		}
	}
	return l, queries
}

// The lookup of every peer's cluster key must end at the brute-force answer.
func TestLookupMatchesBruteForce(t *testing.T) {
	sizes := []int{1, 2, 5, 32, 128, 1000}
	if testing.Short() {
		sizes = sizes[:5] // the brute-force tables of 1000 peers take a while under -race
	}
	for _, n := range sizes {
		ids := testIDs(t, n, uint64(n))
		rts := routingTables(ids, BucketSize, rand.New(rand.NewPCG(1, uint64(n))))
		for _, k := range []int{0, 2, 3, 6} {
			total := 0
			for _, a := range Assign(ids, k) {
				l, q := runLookup(a.ID, a.ClusterKey, rts, nil)
				total += q
				if got := l.Result()[0]; got != a.Superpeer {
					t.Fatalf("n=%d k=%d: lookup from %s ended at %s, brute force says %s", n, k, a.ID, got, a.Superpeer)
				}
			}
			t.Logf("n=%d k=%d: %.1f queries per lookup", n, k, float64(total)/float64(n))
		}
	}
}

// Dead peers are skipped: the lookup ends at the closest live peer.
func TestLookupSkipsDeadPeers(t *testing.T) {
	ids := testIDs(t, 200, 7)
	rts := routingTables(ids, BucketSize, rand.New(rand.NewPCG(2, 2)))
	const k = 3
	as := Assign(ids, k)
	dead := map[peer.ID]bool{}
	for _, c := range Clusters(as, k) {
		dead[c.Superpeer] = true // every superpeer dies
	}
	var live []peer.ID
	for _, id := range ids {
		if !dead[id] {
			live = append(live, id)
		}
	}
	want := Assign(live, k)
	for _, a := range want {
		l, _ := runLookup(a.ID, a.ClusterKey, rts, dead)
		if got := l.Result()[0]; got != a.Superpeer {
			t.Fatalf("from %s: ended at %s, want the new closest %s", a.ID, got, a.Superpeer)
		}
	}
}

func TestLookupAlone(t *testing.T) {
	self := testIDs(t, 1, 9)[0]
	l := NewLookup(KeyOf(self).Cluster(3), self, nil, BucketSize, 3)
	if !l.Done() || len(l.Next()) != 0 {
		t.Fatal("a lookup with no seeds must be done at once")
	}
	if r := l.Result(); len(r) != 1 || r[0] != self {
		t.Fatalf("Result = %v, want only self", r)
	}
}

func TestEstimateSize(t *testing.T) {
	ids := testIDs(t, 5000, 11)
	self := KeyOf(ids[0])
	keys := func(n int) []Key {
		ks := make([]Key, n-1)
		for i := range ks {
			ks[i] = KeyOf(ids[i+1])
		}
		return ks
	}
	// Small networks: exact from the routing table.
	for _, n := range []int{1, 2, 10, BucketSize} {
		e := EstimateSize(SizeInputs{Self: self, Routing: keys(n)})
		if e.N != n || e.Source != SourceRouting {
			t.Errorf("n=%d: %+v, want exact from the routing table", n, e)
		}
	}
	// Beyond a bucket, while no bucket is full the table is still complete:
	// the count stays exact where a lagging membership view would have
	// handed over to a guess.
	if e := EstimateSize(SizeInputs{Self: self, Members: 30, Routing: keys(32)}); e.N != 32 || e.Source != SourceRouting {
		t.Errorf("32 peers, no full bucket: %+v, want 32 from the routing table", e)
	}
	// Peers that do not count (refused: a flooded address) took room in
	// the buckets: 8 counted peers beside 32 uncounted ones that fill the
	// first bucket are no complete table, and the count is no estimate.
	var half []Key // keys in the other half of the key space: bucket 0
	for i := 1; len(half) < BucketSize+12 && i < len(ids); i++ {
		if k := KeyOf(ids[i]); k[0]>>7 != self[0]>>7 {
			half = append(half, k)
		}
	}
	if e := EstimateSize(SizeInputs{Self: self, Routing: half[:8], Uncounted: half[8:]}); e.Source == SourceRouting {
		t.Errorf("uncounted peers fill a bucket: %+v, want no count from the routing table", e)
	}
	if e := EstimateSize(SizeInputs{Self: self, Routing: half[:8], Uncounted: half[8:10]}); e.N != 9 || e.Source != SourceRouting {
		t.Errorf("two uncounted peers, no full bucket: %+v, want 9 from the routing table", e)
	}
	// The membership view wins once it has caught up with the routing table.
	if e := EstimateSize(SizeInputs{Self: self, Members: 64, Routing: keys(40)}); e.N != 64 || e.Source != SourceMembership {
		t.Errorf("membership view ignored: %+v", e)
	}
	// A lagging view is not trusted below the routing table's count.
	if e := EstimateSize(SizeInputs{Self: self, Members: 3, Routing: keys(10)}); e.N != 10 {
		t.Errorf("lagging view: %+v, want 10", e)
	}
	if e := EstimateSize(SizeInputs{Self: self, Routing: keys(100), Kad: 97.4, KadOK: true}); e.N != 100 || e.Source != SourceKad {
		t.Errorf("kad estimate below the routing table count: %+v, want 100 from kad-dht", e)
	}
	// Key spacing, given the closest keys as a routing table has them: the
	// ratio to the true size stays within a factor of two.
	for _, n := range []int{100, 1000, 5000} {
		e := EstimateSize(SizeInputs{Self: self, Routing: keys(n)})
		ratio := float64(e.N) / float64(n)
		t.Logf("n=%d: spacing estimate %d (ratio %.2f)", n, e.N, ratio)
		if e.Source != SourceSpacing || ratio < 0.5 || ratio > 2 {
			t.Errorf("n=%d: %+v, ratio %.2f", n, e, ratio)
		}
	}
}
