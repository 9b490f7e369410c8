package dhtselect

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
)

// KeyBits is m, the width of the key space: 256 bits, as in kad-dht.
const KeyBits = 256

// MaxK is the largest number of reserved bits this package accepts. 2^30
// superpeers is far beyond any swarm; the limit keeps S and k in an int.
const MaxK = 30

// Key is a point in the 256-bit Kademlia key space.
type Key [KeyBits / 8]byte

// KeyOf returns the key of a peer: SHA-256 of its peer ID bytes, the same
// value as kbucket.ConvertPeerID in go-libp2p-kad-dht.
func KeyOf(id peer.ID) Key { return sha256.Sum256([]byte(id)) }

// String returns the key in hex.
func (p Key) String() string { return hex.EncodeToString(p[:]) }

// ParseKey parses a key written by Key.String.
func ParseKey(s string) (Key, error) {
	var k Key
	b, err := hex.DecodeString(s)
	if err != nil {
		return k, fmt.Errorf("dhtselect: key %q is not hex: %w", s, err)
	}
	if len(b) != len(k) {
		return k, fmt.Errorf("dhtselect: key %q has %d bytes, want %d", s, len(b), len(k))
	}
	copy(k[:], b)
	return k, nil
}

// ErrBadTarget reports an unusable superpeer target.
var ErrBadTarget = errors.New("dhtselect: bad superpeer target")

// BitsFor returns k = ⌈log₂ S⌉, the number of reserved bits for S superpeers.
// S = 1 gives k = 0: one cluster, the whole key space.
func BitsFor(s int) (int, error) {
	if s < 1 {
		return 0, fmt.Errorf("%w: S = %d, want at least 1", ErrBadTarget, s)
	}
	k := bits.Len(uint(s - 1))
	if k > MaxK {
		return 0, fmt.Errorf("%w: S = %d needs k = %d bits, more than %d", ErrBadTarget, s, k, MaxK)
	}
	return k, nil
}

// maskInto keeps the leading k bits of b and clears the rest; it works for
// any width, which lets tests use the 8-bit examples of the literature.
func maskInto(b []byte, k int) {
	for i := range b {
		switch {
		case k >= 8*(i+1):
			// whole byte kept
		case k <= 8*i:
			b[i] = 0
		default:
			b[i] &= ^byte(0xff >> uint(k-8*i))
		}
	}
}

// Mask returns the mask of k leading ones followed by zeros.
func Mask(k int) Key {
	var m Key
	for i := range m {
		m[i] = 0xff
	}
	maskInto(m[:], k)
	return m
}

// Cluster returns the cluster key p AND mask(k).
func (p Key) Cluster(k int) Key {
	maskInto(p[:], k)
	return p
}

// Prefix returns the leading k bits of p as a string of '0' and '1'
// (empty for k = 0), the human name of p's cluster.
func (p Key) Prefix(k int) string {
	var sb strings.Builder
	for i := 0; i < k; i++ {
		if p[i/8]&(0x80>>uint(i%8)) != 0 {
			sb.WriteByte('1')
		} else {
			sb.WriteByte('0')
		}
	}
	return sb.String()
}

// Xor returns the XOR distance between a and b.
func Xor(a, b Key) Key {
	var d Key
	for i := range d {
		d[i] = a[i] ^ b[i]
	}
	return d
}

// Closer reports whether a is strictly closer to target than b.
func Closer(a, b, target Key) bool {
	for i := range target {
		da, db := a[i]^target[i], b[i]^target[i]
		if da != db {
			return da < db
		}
	}
	return false
}

// Fraction returns the distance d as a fraction of the key space, in [0, 1).
func (p Key) Fraction() float64 {
	var f float64
	for i := 7; i >= 0; i-- {
		f = (f + float64(p[i])) / 256
	}
	return f
}

// Target is how many superpeers to have: a fixed count, or a fraction of the
// estimated network size. Exactly one of the two must be set.
type Target struct {
	Superpeers int     // S, when positive
	Fraction   float64 // F in (0, 1], when Superpeers is zero
}

// Validate reports a target that cannot be used.
func (t Target) Validate() error {
	switch {
	case t.Superpeers < 0:
		return fmt.Errorf("%w: --superpeers %d, want at least 1", ErrBadTarget, t.Superpeers)
	case t.Superpeers > 0 && t.Fraction != 0:
		return fmt.Errorf("%w: give --superpeers or --fraction, not both", ErrBadTarget)
	case t.Superpeers > 0:
		_, err := BitsFor(t.Superpeers)
		return err
	case math.IsNaN(t.Fraction) || t.Fraction <= 0 || t.Fraction > 1:
		return fmt.Errorf("%w: --fraction %v, want a number in (0, 1]", ErrBadTarget, t.Fraction)
	}
	return nil
}

// String describes the target as its flag would.
func (t Target) String() string {
	if t.Superpeers > 0 {
		return fmt.Sprintf("superpeers=%d", t.Superpeers)
	}
	return fmt.Sprintf("fraction=%g", t.Fraction)
}

// S returns the number of superpeers for a network of n peers: the fixed
// count, or max(1, round(F·n)).
func (t Target) S(n int) int {
	if t.Superpeers > 0 {
		return t.Superpeers
	}
	s := int(math.Round(t.Fraction * float64(n)))
	return max(s, 1)
}

// K returns the reserved bits for a network of n peers.
func (t Target) K(n int) int {
	k, err := BitsFor(t.S(n))
	if err != nil {
		return MaxK
	}
	return k
}
