package dhtselect

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEstimateWithin: an exact count rules out less than half of it, a
// guess less than a quarter.
func TestEstimateWithin(t *testing.T) {
	for _, c := range []struct {
		e    Estimate
		n    int
		want bool
	}{
		{Estimate{N: 20, Source: SourceRouting}, 10, true},
		{Estimate{N: 20, Source: SourceRouting}, 9, false},
		{Estimate{N: 100, Source: SourceRouting}, 25, true}, // more than a bucket: a guess
		{Estimate{N: 100, Source: SourceRouting}, 24, false},
		{Estimate{N: 100, Source: SourceMembership}, 49, false},
		{Estimate{N: 100, Source: SourceBackbone}, 49, false},
		{Estimate{N: 4000, Source: SourceSpacing}, 1900, true},
		{Estimate{N: 4000, Source: SourceSpacing}, 999, false},
		{Estimate{N: 4000, Source: SourceKad}, 1000, true},
		{Estimate{N: 4000, Source: SourceKad}, 999, false},
		{Estimate{N: 100, Source: SourceBackbonePartial}, 49, false},
	} {
		if got := c.e.Within(c.n); got != c.want {
			t.Errorf("%+v.Within(%d) = %v, want %v", c.e, c.n, got, c.want)
		}
	}
}

func TestEstimateExact(t *testing.T) {
	for src, want := range map[string]bool{SourceBackbone: true, SourceMembership: true, SourceRouting: true,
		SourceBackbonePartial: false, SourceKad: false, SourceSpacing: false} {
		if got := (Estimate{N: 1, Source: src}).Exact(); got != want {
			t.Errorf("%s: Exact %v, want %v", src, got, want)
		}
	}
	// A routing table's count is exact only for a network smaller than a
	// bucket.
	if (Estimate{N: BucketSize + 1, Source: SourceRouting}).Exact() || !(Estimate{N: BucketSize, Source: SourceRouting}).Exact() {
		t.Errorf("routing table: Exact wrong about the bucket's size")
	}
}

// TestSpacingEstimateKeepsTheNearest: the BucketSize nearest keys, kept
// by insertion, are those a sort of every distance gives, whatever the
// keys' order and number (duplicates included).
func TestSpacingEstimateKeepsTheNearest(t *testing.T) {
	bySort := func(self Key, keys []Key) int {
		d := make([]float64, len(keys))
		for i, k := range keys {
			d[i] = Xor(self, k).Fraction()
		}
		slices.Sort(d)
		return spacingFit(d[:min(len(d), BucketSize)], len(keys))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 2000 {
		self := randomKey(rng)
		keys := make([]Key, rng.IntN(200))
		for i := range keys {
			keys[i] = randomKey(rng, self)
			if i > 0 && rng.IntN(10) == 0 {
				keys[i] = keys[rng.IntN(i)]
			}
		}
		if got, want := spacingEstimate(self, keys), bySort(self, keys); got != want {
			t.Fatalf("trial %d, %d keys: %d, want %d", trial, len(keys), got, want)
		}
	}
}

// TestSpacingNearExact: the distances spacingNear keeps are, bit for bit,
// the BucketSize smallest Fractions of the keys' distances in order, for
// keys in a routing table's order (its buckets from the farthest), in a
// random order, and with keys that share their first 64 bits or more
// (whose Fractions are equal); and fraction64 is Key.Fraction.
func TestSpacingNearExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for trial := range 3000 {
		self := randomKey(rng)
		keys := make([]Key, rng.IntN(300))
		for i := range keys {
			keys[i] = randomKey(rng, self)
			switch r := rng.IntN(10); {
			case i > 0 && r == 0:
				keys[i] = keys[rng.IntN(i)]
			case i > 0 && r == 1:
				keys[i] = keys[rng.IntN(i)]
				keys[i][8+rng.IntN(24)] ^= byte(1 + rng.IntN(255)) // the same first 64 bits
			case r == 2:
				copy(keys[i][:4+rng.IntN(5)], self[:]) // near self
			}
		}
		if trial%2 == 0 {
			// A routing table's order: the farthest first.
			slices.SortFunc(keys, func(a, b Key) int {
				if Closer(a, b, self) {
					return 1
				}
				if Closer(b, a, self) {
					return -1
				}
				return 0
			})
		}
		d := make([]float64, len(keys))
		for i, k := range keys {
			x := Xor(self, k)
			d[i] = x.Fraction()
			if f := fraction64(binary.BigEndian.Uint64(x[:8])); f != d[i] {
				t.Fatalf("fraction64 = %v, Fraction %v", f, d[i])
			}
		}
		slices.Sort(d)
		want := d[:min(len(d), BucketSize)]
		near, n := spacingNear(self, keys)
		if !slices.Equal(near[:n], want) {
			t.Fatalf("trial %d, %d keys: kept %v, want %v", trial, len(keys), near[:n], want)
		}
	}
}

// randomKey is a random key, sharing a random prefix with near when given.
func randomKey(rng *rand.Rand, near ...Key) Key {
	var k Key
	for i := range k {
		k[i] = byte(rng.UintN(256))
	}
	if len(near) > 0 {
		copy(k[:rng.IntN(4)], near[0][:])
	}
	return k
}
