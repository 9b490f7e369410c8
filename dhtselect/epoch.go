package dhtselect

import (
	"crypto/sha256"
	"time"
)

// The live defence against ID grinding: salted targets inside unsalted
// clusters, an unpredictable salt per cluster and epoch, and a minimum age.
//
// The live DHT routes on unsalted Kademlia keys (KeyOf), so salting every
// peer's key as AssignSalted does would break the lookups that find a
// superpeer. The live node keeps clusters by their unsalted k-bit prefix P
// and salts only the target inside each cluster: in epoch e the superpeer
// of P is the eligible member closest to SaltedTarget(P, k, salt), P's prefix
// followed by bits drawn from the salt instead of zeros. A lookup of that
// point still ends in the cluster on the real DHT.
//
// The salt of P in epoch e (ClusterSalt) is made from a value of the hash
// chain of the peer that served P at the end of epoch e-1. Every peer
// commits to its chain (Chain) when it starts: the value for epoch x is
// the one before the value for x-1 in the chain, so announcing it reveals
// nothing of later epochs, and a peer cannot choose its values once others
// have seen one. A peer reveals its value for the next epoch in each
// announcement (Beacon.Reveal), so the salt of epoch e is known to all
// during epoch e-1, and to no one before (unless the superpeer of e-1 is the
// attacker: its chain was fixed when it started, before it could know which
// epoch it would serve, so it cannot pick a value that keeps it superpeer).
//
// A peer is eligible in epoch e only if it was first seen before epoch e-1
// started (Eligible): an ID ground once the salt of epoch e was revealed
// cannot serve in e, and one ground earlier lands at a random place
// relative to the target. Age is counted in whole epochs from the epoch a
// peer says it started in (Beacon.Since), which its observers bound by the
// epoch they first saw it in (see overlay/node).
//
// The salt's value differs with the superpeer each node names at the end of
// an epoch; the nodes converge on the salt announced by most eligible
// members of the cluster (Beacon.Salt), so a failover at the boundary costs
// at most one hand-over.

// ChainStep is one step of a hash chain: the value for epoch x-1 is
// ChainStep of the value for epoch x.
func ChainStep(v Salt) Salt {
	h := sha256.New()
	h.Write([]byte("superpeer/dhtselect/chain/v1"))
	h.Write(v[:])
	var out Salt
	h.Sum(out[:0])
	return out
}

// chainCheckpoint is the spacing of the values a Chain keeps.
const chainCheckpoint = 256

// Chain is a peer's hash chain of salt values, one per epoch from Start to
// Start+Len: Value(Start+Len) is derived from the secret, and each earlier
// value is ChainStep of the next. It keeps every chainCheckpoint-th value,
// so a value costs at most that many hashes.
type Chain struct {
	start, n uint64
	checks   []Salt // checks[i] = Value(start + n - i*chainCheckpoint)
}

// NewChain builds the chain of a peer that starts in epoch start, with
// values for n epochs after it.
func NewChain(secret Salt, start uint64, n int) *Chain {
	c := &Chain{start: start, n: uint64(max(n, 1))}
	v := EpochSalt([]byte("superpeer/dhtselect/chain-seed/v1"), c.n, secret[:])
	for i := uint64(0); ; i++ {
		if i%chainCheckpoint == 0 {
			c.checks = append(c.checks, v)
		}
		if i == c.n {
			break
		}
		v = ChainStep(v)
	}
	return c
}

// Value returns the chain's value for epoch e, false outside
// [Start, Start+n].
func (c *Chain) Value(e uint64) (Salt, bool) {
	if e < c.start || e-c.start > c.n {
		return Salt{}, false
	}
	back := c.n - (e - c.start) // steps from the seed's end
	v := c.checks[back/chainCheckpoint]
	for range back % chainCheckpoint {
		v = ChainStep(v)
	}
	return v, true
}

// MaxChainGap bounds the epochs between two values ChainFollows checks, so
// that a peer cannot make its observers hash without end.
const MaxChainGap = 1 << 12

// ChainFollows reports whether later (the value for epoch le) is a chain
// value after earlier (for epoch ee): ChainStep applied le-ee times gives
// earlier. Gaps above MaxChainGap, or le before ee, are refused.
func ChainFollows(ee uint64, earlier Salt, le uint64, later Salt) bool {
	if le < ee || le-ee > MaxChainGap {
		return false
	}
	for range le - ee {
		later = ChainStep(later)
	}
	return later == earlier
}

// ChainBack returns the value for epoch e from the value v for epoch ve
// (e <= ve, at most MaxChainGap before).
func ChainBack(ve uint64, v Salt, e uint64) (Salt, bool) {
	if e > ve || ve-e > MaxChainGap {
		return Salt{}, false
	}
	for range ve - e {
		v = ChainStep(v)
	}
	return v, true
}

// EpochOf returns the number of the epoch of length length that t is in
// (epochs count from the Unix epoch).
func EpochOf(t time.Time, length time.Duration) uint64 {
	return uint64(t.UnixNano() / int64(length))
}

// EpochStart returns when epoch e starts.
func EpochStart(e uint64, length time.Duration) time.Time {
	return time.Unix(0, int64(e)*int64(length))
}

// ClusterSalt is the salt of the cluster with key ck (k reserved bits) in
// epoch e, from the chain value reveal of its superpeer at the end of e-1;
// a zero reveal (none known) gives a salt that anyone can compute.
func ClusterSalt(ck Key, k int, e uint64, reveal Salt) Salt {
	var r []byte
	if reveal != (Salt{}) {
		r = reveal[:]
	}
	return EpochSalt(append(ck[:], byte(k)), e, r)
}

// SaltedTarget returns the point a cluster's superpeer is closest to under salt
// s: the leading k bits of ck, then bits of SHA-256 of the salt.
func SaltedTarget(ck Key, k int, s Salt) Key {
	h := sha256.New()
	h.Write([]byte("superpeer/dhtselect/target/v1"))
	h.Write(s[:])
	var t Key
	h.Sum(t[:0])
	mask := Mask(k)
	for i := range t {
		t[i] = ck[i]&mask[i] | t[i]&^mask[i]
	}
	return t
}

// Beacon is what a peer says of itself for the defence, in its membership
// announcement: the epoch it started in, its chain value for the next
// epoch, and the salt it uses for its cluster (K, Cluster) in SaltEpoch.
type Beacon struct {
	Since     uint64
	Next      uint64
	Reveal    Salt
	SaltEpoch uint64
	K         int
	Cluster   Key
	Salt      Salt
}
