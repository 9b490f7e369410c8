package dhtselect

import "testing"

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
