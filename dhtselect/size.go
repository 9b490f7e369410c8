package dhtselect

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// BucketSize is kad-dht's default bucket size (K = 20). Below it, a peer's
// routing table holds every overlay peer it has met, and kad-dht's own
// NetworkSize estimator refuses to answer.
const BucketSize = 20

// Size sources, in the order EstimateSize prefers them.
const (
	SourceBackbone        = "backbone"         // sum of the superpeers' summaries, covering every cluster key
	SourceMembership      = "membership"       // count of live announcements on the membership topic
	SourceRouting         = "routing-table"    // exact count of a routing table smaller than a bucket
	SourceBackbonePartial = "backbone-partial" // the summaries of some cluster keys, the rest empty or extrapolated
	SourceKad             = "kad-dht"          // (*IpfsDHT).NetworkSize
	SourceSpacing         = "key-spacing"      // fit of the distances to the closest known keys
)

// SizeInputs is what a peer knows that bears on the size of the network.
type SizeInputs struct {
	// Self is this peer's key.
	Self Key
	// Members is the number of peers, this one included, with a live
	// announcement on the membership topic; zero if unknown.
	Members int
	// Routing holds the keys of the peers in the routing table.
	Routing []Key
	// Uncounted holds the keys of the peers in the routing table that do
	// not count (refused: an address flooded with identities; not the
	// overlay's: no closer protocol and no membership; not connected).
	// They are no part of the estimate, but they took room in the
	// buckets: a table whose buckets they fill does not hold every peer
	// met.
	Uncounted []Key
	// Kad is kad-dht's estimate, valid when KadOK.
	Kad   float64
	KadOK bool
	// Clusters holds the superpeers' summaries of their clusters heard on
	// the backbone (EstimateFromClusters); nil if none.
	Clusters []ClusterSize
}

// Estimate is a network-size estimate and where it came from.
type Estimate struct {
	N      int
	Source string
}

// Exact reports whether e is a count rather than a guess: the whole
// backbone, the membership view, a routing table of a network smaller
// than a bucket. A larger table none of whose buckets is full is taken
// as the count (EstimateSize), but it is a guess: after many peers left
// at once, buckets that held BucketSize peers each hold fewer until the
// table refills, and a node that took such a count as exact over a
// backbone missing the departed clusters' summaries had k fall from 9 to
// 3 and 4 (found by the node simulator: 3,840 nodes halving, which then
// did not settle in 5 minutes).
func (e Estimate) Exact() bool {
	switch e.Source {
	case SourceBackbone, SourceMembership:
		return true
	case SourceRouting:
		return e.N <= BucketSize
	}
	return false
}

// Within reports whether another source's estimate n is one that e does
// not rule out: at least half of e where e is an exact count (Exact) or
// a partial backbone, at least a quarter where it is a guess (kad-dht's
// NetworkSize, the keys' spacing, a large routing table), whose error
// reaches a factor of two. The node's own estimate checks what its
// superpeer's digest and the backbone say with it: a sum of registrations
// that undercounts for good (a superpeer elected while the swarm started,
// which counts only those registered with it) is refused, but not the
// true size against a guess that overshoots (found by the node simulator:
// at 1,920 nodes, 21 members whose keys' spacing said 3,870 to 4,240
// refused their superpeer's 1,900, kept k one above it and were never
// served).
func (e Estimate) Within(n int) bool {
	if e.Exact() || e.Source == SourceBackbonePartial {
		return 2*n >= e.N
	}
	return 4*n >= e.N
}

// EstimateSize estimates the number of peers in the network, this one
// included. It works from one peer up, by choosing among six sources:
//
//  1. the backbone, when the superpeers' summaries cover every cluster
//     key (EstimateFromClusters with SourceBackbone): their sum is exact
//     whatever the size of the network, and every superpeer that hears
//     them all agrees;
//  2. the membership view, when it counts at least as many peers as the
//     routing table knows: gossip reaches every peer, so once it has caught
//     up it is exact, and all peers share it, so they agree on k;
//  3. the routing table's size plus one, while none of its buckets is full
//     (fewer than BucketSize peers share each common-prefix length with
//     this peer, the peers that do not count taken in: they take room
//     too): then the table had room for every peer this one has met,
//     which in an overlay that gossips its membership is every peer (a
//     network of up to about 40 peers, and any network smaller than a
//     bucket);
//  4. the backbone when its summaries do not cover every cluster key
//     (SourceBackbonePartial: some clusters are empty, or not heard from
//     yet), if EstimateFromClusters does not refuse them, and no less
//     than the routing table: after the exact sources, since a cluster
//     not heard from is then counted as empty or as an average one, but
//     before the fits, since it counts most of the network's peers where
//     they sample the keys near this one;
//  5. kad-dht's NetworkSize, once it answers (20 peers and enough lookups);
//  6. otherwise a fit of the XOR distances to the closest known keys: the
//     i-th closest of N uniform keys lies at about i/N of the key space, so
//     N ≈ Σi² / Σ i·dᵢ over the BucketSize closest.
func EstimateSize(in SizeInputs) Estimate {
	rt := len(in.Routing) + 1
	bb, bbOK := EstimateFromClusters(in.Clusters)
	switch {
	case bbOK && bb.Source == SourceBackbone:
		return bb
	case in.Members >= rt:
		return Estimate{N: in.Members, Source: SourceMembership}
	case !fullBucket(in.Self, in.Routing, in.Uncounted):
		return Estimate{N: rt, Source: SourceRouting}
	case bbOK:
		return Estimate{N: max(bb.N, rt), Source: SourceBackbonePartial}
	case in.KadOK && in.Kad >= 1 && !math.IsInf(in.Kad, 0):
		return Estimate{N: max(int(math.Round(in.Kad)), rt), Source: SourceKad}
	}
	return Estimate{N: max(spacingEstimate(in.Self, in.Routing), rt), Source: SourceSpacing}
}

// fullBucket reports whether BucketSize or more of keys and more share
// the same common-prefix length with self (kad-dht's buckets, which hold
// BucketSize peers each).
func fullBucket(self Key, keys, more []Key) bool {
	var count [KeyBits + 1]int
	for _, ks := range [2][]Key{keys, more} {
		for _, k := range ks {
			d := Xor(self, k)
			cpl := 0
			for _, b := range d {
				if b != 0 {
					cpl += bits.LeadingZeros8(b)
					break
				}
				cpl += 8
			}
			count[cpl]++
			if count[cpl] >= BucketSize {
				return true
			}
		}
	}
	return false
}

// spacingEstimate fits d_i ≈ i/N to the distances of the BucketSize keys
// closest to self.
func spacingEstimate(self Key, keys []Key) int {
	near, n := spacingNear(self, keys)
	return spacingFit(near[:n], len(keys))
}

// spacingNear returns the BucketSize smallest distances from self to keys
// (Xor(self, k).Fraction()), in order, and how many there are. They are
// kept by insertion, since most keys of a table are farther than the
// nearest BucketSize (a sort of every distance was most of an
// evaluation's cost in the node simulator at 100,000 nodes); and the keys
// are visited from the last, since a routing table lists its buckets from
// the farthest: once BucketSize are kept, a key whose distance's first 64
// bits are not below those of the farthest kept is passed over without
// its Fraction (which those bits give, and which cannot be smaller: it is
// monotone in them). The order of the visit does not change the
// distances kept.
func spacingNear(self Key, keys []Key) (near [BucketSize]float64, n int) {
	var top [BucketSize]uint64 // the first 64 bits of each distance kept
	s := binary.BigEndian.Uint64(self[:8])
	for i := len(keys) - 1; i >= 0; i-- {
		x := s ^ binary.BigEndian.Uint64(keys[i][:8])
		if n == BucketSize && x >= top[n-1] {
			continue
		}
		f := fraction64(x)
		if n == BucketSize && f >= near[n-1] {
			continue
		}
		j := min(n, BucketSize-1)
		for ; j > 0 && near[j-1] > f; j-- {
			near[j], top[j] = near[j-1], top[j-1]
		}
		near[j], top[j] = f, x
		n = min(n+1, BucketSize)
	}
	return near, n
}

// fraction64 is Key.Fraction of a key whose first eight bytes are x (big
// endian), computed alike.
func fraction64(x uint64) float64 {
	var f float64
	for i := 7; i >= 0; i-- {
		f = (f + float64(byte(x>>(56-8*i)))) / 256
	}
	return f
}

// spacingFit fits d_i ≈ i/N to the sorted distances near, of count keys
// in all (the estimate when near fits nothing: count + 1).
func spacingFit(near []float64, count int) int {
	var num, den float64
	for i, di := range near {
		r := float64(i + 1)
		num += r * r
		den += r * di
	}
	if den <= 0 {
		return count + 1
	}
	return int(math.Round(num / den))
}
