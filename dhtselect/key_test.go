package dhtselect

import (
	"crypto/sha256"
	"errors"
	"math"
	"testing"

	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The seed's example: m = 8 bits, k = 3, mask 11100000.
func TestMaskEightBitExample(t *testing.T) {
	tests := []struct {
		k       int
		p, want byte
	}{
		{k: 3, p: 0b11111111, want: 0b11100000}, // the mask itself
		{k: 3, p: 0b10110101, want: 0b10100000},
		{k: 3, p: 0b00011111, want: 0b00000000},
		{k: 0, p: 0b10110101, want: 0},
		{k: 1, p: 0b10110101, want: 0b10000000},
		{k: 8, p: 0b10110101, want: 0b10110101},
	}
	for _, tc := range tests {
		b := []byte{tc.p}
		maskInto(b, tc.k)
		if b[0] != tc.want {
			t.Errorf("m=8 k=%d: %08b AND mask = %08b, want %08b", tc.k, tc.p, b[0], tc.want)
		}
	}
}

func TestMaskAndCluster(t *testing.T) {
	tests := []struct {
		k    int
		head []byte // leading bytes of Mask(k); the rest must be zero
	}{
		{0, nil},
		{3, []byte{0xe0}},
		{8, []byte{0xff}},
		{9, []byte{0xff, 0x80}},
		{17, []byte{0xff, 0xff, 0x80}},
	}
	for _, tc := range tests {
		m := Mask(tc.k)
		for i, b := range m {
			want := byte(0)
			if i < len(tc.head) {
				want = tc.head[i]
			}
			if b != want {
				t.Fatalf("Mask(%d) byte %d = %08b, want %08b", tc.k, i, b, want)
			}
		}
		var p Key
		for i := range p {
			p[i] = 0xa5
		}
		c := p.Cluster(tc.k)
		for i := range c {
			if c[i] != p[i]&m[i] {
				t.Fatalf("Cluster(%d) byte %d = %x, want p AND mask = %x", tc.k, i, c[i], p[i]&m[i])
			}
		}
		if got := c.Prefix(tc.k); got != p.Prefix(tc.k) || len(got) != tc.k {
			t.Fatalf("Prefix(%d) = %q, cluster and key disagree or wrong length", tc.k, got)
		}
	}
	var p Key
	p[0] = 0b10110101
	if got := p.Prefix(3); got != "101" {
		t.Errorf("Prefix(3) of 10110101... = %q, want 101", got)
	}
}

func TestBitsFor(t *testing.T) {
	tests := []struct{ s, k int }{
		{1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {9, 4}, {1000, 10}, {1 << 20, 20},
	}
	for _, tc := range tests {
		got, err := BitsFor(tc.s)
		if err != nil || got != tc.k {
			t.Errorf("BitsFor(%d) = %d, %v; want %d", tc.s, got, err, tc.k)
		}
		if want := int(math.Ceil(math.Log2(float64(tc.s)))); got != want {
			t.Errorf("BitsFor(%d) = %d, but ceil(log2 S) = %d", tc.s, got, want)
		}
	}
	for _, s := range []int{0, -1, 1<<MaxK + 1} {
		if _, err := BitsFor(s); !errors.Is(err, ErrBadTarget) {
			t.Errorf("BitsFor(%d) error = %v, want ErrBadTarget", s, err)
		}
	}
}

func TestTarget(t *testing.T) {
	bad := []Target{{}, {Superpeers: -1}, {Fraction: 1.5}, {Fraction: -0.1}, {Fraction: math.NaN()}, {Superpeers: 4, Fraction: 0.1}}
	for _, tg := range bad {
		if err := tg.Validate(); !errors.Is(err, ErrBadTarget) {
			t.Errorf("%+v.Validate() = %v, want ErrBadTarget", tg, err)
		}
	}
	tests := []struct {
		t    Target
		n, s int
	}{
		{Target{Superpeers: 4}, 1000, 4},
		{Target{Fraction: 0.125}, 64, 8},
		{Target{Fraction: 0.1}, 1, 1}, // never fewer than one
		{Target{Fraction: 1}, 5, 5},
	}
	for _, tc := range tests {
		if err := tc.t.Validate(); err != nil {
			t.Fatalf("%v: %v", tc.t, err)
		}
		if got := tc.t.S(tc.n); got != tc.s {
			t.Errorf("%v.S(%d) = %d, want %d", tc.t, tc.n, got, tc.s)
		}
	}
}

// KeyOf must be exactly kad-dht's key of a peer, or the lookup would walk a
// different space from the routing tables.
func TestKeyOfMatchesKadDHT(t *testing.T) {
	for _, id := range testIDs(t, 16, 1) {
		k := KeyOf(id)
		if string(kb.ConvertPeerID(id)) != string(k[:]) {
			t.Fatalf("KeyOf(%s) differs from kbucket.ConvertPeerID", id)
		}
		if k != sha256.Sum256([]byte(id)) {
			t.Fatalf("KeyOf is not SHA-256 of the ID bytes")
		}
		back, err := ParseKey(k.String())
		if err != nil || back != k {
			t.Fatalf("ParseKey(String()) = %v, %v", back, err)
		}
	}
	if _, err := ParseKey("abc"); err == nil {
		t.Error("ParseKey accepted odd-length hex")
	}
}

func TestAssignSuperpeerIsSmallestKeyOfCluster(t *testing.T) {
	ids := testIDs(t, 200, 2)
	for _, k := range []int{0, 1, 3, 5} {
		as := Assign(ids, k)
		for _, c := range Clusters(as, k) {
			if c.Members[0] != c.Superpeer {
				t.Fatalf("k=%d cluster %s: superpeer %s is not its smallest-key member %s", k, c.Prefix, c.Superpeer, c.Members[0])
			}
			for _, m := range c.Members {
				if KeyOf(m).Prefix(k) != c.Prefix {
					t.Fatalf("k=%d: member %s has prefix %s, cluster %s", k, m, KeyOf(m).Prefix(k), c.Prefix)
				}
			}
		}
		if k == 0 && len(Clusters(as, k)) != 1 {
			t.Fatalf("k=0 must give one cluster")
		}
	}
}

func testIDs(t testing.TB, n int, seed uint64) []peer.ID {
	t.Helper()
	ids := make([]peer.ID, n)
	for i := range ids {
		var b [8]byte
		for j := range b {
			b[j] = byte((seed*1_000_003 + uint64(i)) >> (8 * j))
		}
		h := sha256.Sum256(b[:])
		id, err := peer.IDFromBytes(append([]byte{0x00, 0x20}, h[:]...)) // identity multihash of 32 bytes
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}
