package classic

import (
	"crypto/sha256"
	"slices"
	"testing"
)

// sortByRank returns ids from the highest rank down.
func sortByRank(r Rank, ids []ID) []ID {
	out := slices.Clone(ids)
	slices.SortFunc(out, func(a, b ID) int { return r.Compare(b, a) })
	return out
}

// checkTotalOrder asserts that r is antisymmetric and zero only on equal IDs.
func checkTotalOrder(t *testing.T, r Rank, ids []ID) {
	t.Helper()
	for _, a := range ids {
		for _, b := range ids {
			ab, ba := r.Compare(a, b), r.Compare(b, a)
			if (ab == 0) != (a == b) || (ab > 0) != (ba < 0) {
				t.Fatalf("Compare(%s, %s) = %d, Compare(%s, %s) = %d: not a strict total order", a, b, ab, b, a, ba)
			}
		}
	}
}

func TestXORCloseness(t *testing.T) {
	keys := map[ID][]byte{
		"a": {0b1110_0000},
		"b": {0b1100_0000},
		"c": {0b0000_0001},
		"d": {0b1110_0001},
		"e": {0b1110_0001}, // same key as d: the ID breaks the tie
		"f": {0b0000_1110},
	}
	key := func(id ID) []byte { return keys[id] }
	ids := tnSplit("a b c d e f")
	tests := []struct {
		name   string
		target []byte
		want   []ID
	}{
		// Distances to 1110_0000: a 0, d/e 1, b 0010_0000, f 1110_1110, c 1110_0001.
		{"cluster key 11100000", []byte{0b1110_0000}, tnSplit("a e d b c f")},
		// Distances to 0: the key itself.
		{"zero target", []byte{0}, tnSplit("c f b a e d")},
		// A two-byte target pads the one-byte keys with a zero byte.
		{"longer target", []byte{0b1110_0000, 0xff}, tnSplit("a e d b c f")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := XORCloseness{Target: tt.target, Key: key}
			checkTotalOrder(t, r, ids)
			if got := sortByRank(r, ids); !slices.Equal(got, tt.want) {
				t.Fatalf("ranking %v, want %v", got, tt.want)
			}
		})
	}
}

func TestXORClosenessDefaultKeyIsSHA256(t *testing.T) {
	// With Target = SHA-256("p1"), p1 is at distance 0 and ranks first.
	h := sha256.Sum256([]byte("p1"))
	r := XORCloseness{Target: h[:]}
	ids := tnSplit("p0 p1 p2 p3")
	checkTotalOrder(t, r, ids)
	if got := sortByRank(r, ids)[0]; got != "p1" {
		t.Fatalf("closest to SHA-256(p1): %s, want p1", got)
	}
}

func TestHostQuality(t *testing.T) {
	q := HostQuality{
		"big":     {Capacity: 100, UptimeTicks: 10, Flaps: 3},
		"bigcalm": {Capacity: 100, UptimeTicks: 5, Flaps: 0},
		"bigold":  {Capacity: 100, UptimeTicks: 50, Flaps: 3},
		"twin-a":  {Capacity: 10, UptimeTicks: 7, Flaps: 1},
		"twin-b":  {Capacity: 10, UptimeTicks: 7, Flaps: 1},
		"small":   {Capacity: 1, UptimeTicks: 1000, Flaps: 0},
		"nocap":   {Capacity: 0, UptimeTicks: 1},
	}
	ids := tnSplit("big bigcalm bigold twin-a twin-b small nocap unknown")
	checkTotalOrder(t, q, ids)
	want := tnSplit(
		"bigcalm bigold big " + // capacity 100: fewer flaps first, then uptime
			"twin-b twin-a " + // equal quality: larger ID
			"small nocap unknown") // a missing host is the zero Quality
	if got := sortByRank(q, ids); !slices.Equal(got, want) {
		t.Fatalf("ranking\n got %v\nwant %v", got, want)
	}
}

// TestBullyUsesConfiguredRank elects by host quality: the process with the
// most capacity wins although its ID is the lowest.
func TestBullyUsesConfiguredRank(t *testing.T) {
	ids := tnIDs(4)
	q := HostQuality{"0": {Capacity: 9}, "1": {Capacity: 1}, "2": {Capacity: 1}, "3": {Capacity: 2}}
	n := newTnet(t, ids, func(id ID) Machine {
		cfg := tnCfg(id, ids)
		cfg.Rank = q
		return tnMust[*Bully](t)(NewBully(cfg))
	})
	n.campaign("2")
	n.settle()
	n.run(10)
	n.wantLeader("by capacity", "0")
}

// TestRingUsesConfiguredRank elects by XOR closeness on both ring variants.
func TestRingUsesConfiguredRank(t *testing.T) {
	ids := tnIDs(5)
	keys := map[ID][]byte{"0": {0x10}, "1": {0x80}, "2": {0x01}, "3": {0xf0}, "4": {0x40}}
	r := XORCloseness{Target: []byte{0x81}, Key: func(id ID) []byte { return keys[id] }}
	ringVariants(t, func(t *testing.T, maxOnly bool) {
		n := newTnet(t, ids, func(id ID) Machine {
			cfg := tnCfg(id, ids)
			cfg.Rank = r
			mk := NewRing
			if maxOnly {
				mk = NewRingMax
			}
			return tnMust[*Ring](t)(mk(cfg))
		})
		n.campaign("0")
		n.settle()
		n.wantLeader("closest to 0x81", "1")
	})
}
