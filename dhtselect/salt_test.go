package dhtselect

import (
	"crypto/sha256"
	"testing"
)

func TestEpochSalt(t *testing.T) {
	base := EpochSalt([]byte("net"), 7, []byte("beacon"))
	if base != EpochSalt([]byte("net"), 7, []byte("beacon")) {
		t.Fatal("EpochSalt is not a function of its inputs")
	}
	for name, s := range map[string]Salt{
		"next epoch":    EpochSalt([]byte("net"), 8, []byte("beacon")),
		"other beacon":  EpochSalt([]byte("net"), 7, []byte("beacon2")),
		"other network": EpochSalt([]byte("net2"), 7, []byte("beacon")),
		"bytes moved":   EpochSalt([]byte("netb"), 7, []byte("eacon")),
		"no randomness": EpochSalt([]byte("net"), 7, nil),
		"all empty":     EpochSalt(nil, 0, nil),
	} {
		if s == base {
			t.Errorf("%s: same salt %s", name, s)
		}
	}
}

func TestSaltedKey(t *testing.T) {
	ids := testIDs(t, 2, 1)
	s1, s2 := EpochSalt(nil, 1, []byte{1}), EpochSalt(nil, 2, []byte{2})
	want := sha256.Sum256(append(s1[:], ids[0]...))
	if got := SaltedKey(ids[0], s1); got != Key(want) {
		t.Errorf("SaltedKey = %s, want SHA-256(salt ‖ id) = %x", got, want)
	}
	if SaltedKey(ids[0], s1) == KeyOf(ids[0]) || SaltedKey(ids[0], s1) == SaltedKey(ids[0], s2) || SaltedKey(ids[0], s1) == SaltedKey(ids[1], s1) {
		t.Error("salted keys do not depend on both the salt and the ID")
	}
}

// AssignSalted is the brute-force answer over the salted keys, and a new
// salt reshuffles the superpeers.
func TestAssignSalted(t *testing.T) {
	const k = 3
	ids := testIDs(t, 200, 3)
	s := EpochSalt([]byte("test"), 1, []byte("r"))
	keys := make([]Key, len(ids))
	for i, id := range ids {
		keys[i] = SaltedKey(id, s)
	}
	as := AssignSalted(ids, k, s)
	for i, a := range as {
		ck := keys[i].Cluster(k)
		if a.ID != ids[i] || a.Key != keys[i] || a.ClusterKey != ck || a.Superpeer != ids[Closest(ck, keys)] {
			t.Fatalf("peer %d: %+v, want key %s, cluster %s, superpeer %s", i, a, keys[i], ck, ids[Closest(ck, keys)])
		}
	}
	plain, salted := superpeerSet(Assign(ids, k)), superpeerSet(as)
	if len(plain) != 1<<k || len(salted) != 1<<k {
		t.Fatalf("%d and %d superpeers, want %d each", len(plain), len(salted), 1<<k)
	}
	same := 0
	for id := range salted {
		if plain[id] {
			same++
		}
	}
	// Each of the 8 salted superpeers is one of the 200 peers at random:
	// it is an unsalted one with probability 8/200.
	if same > 2 {
		t.Errorf("%d of %d superpeers the same with and without salt", same, len(salted))
	}
}

func superpeerSet(as []Assignment) map[string]bool {
	m := map[string]bool{}
	for _, a := range as {
		m[string(a.Superpeer)] = true
	}
	return m
}
