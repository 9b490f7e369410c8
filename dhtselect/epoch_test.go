package dhtselect

import (
	"testing"
	"time"
)

// TestChain: each epoch's value hashes to the previous epoch's, a later
// value proves an earlier one and not the reverse, and the checkpoints
// give the same values as hashing from the seed's end.
func TestChain(t *testing.T) {
	secret := EpochSalt(nil, 1, []byte("secret"))
	c := NewChain(secret, 100, 1000)
	if _, ok := c.Value(99); ok {
		t.Error("a value before the chain's start")
	}
	if _, ok := c.Value(1101); ok {
		t.Error("a value after the chain's end")
	}
	last, _ := c.Value(1100)
	for e := uint64(1099); e >= 100; e-- {
		v, ok := c.Value(e)
		if !ok || v != ChainStep(last) {
			t.Fatalf("epoch %d: value is not the step of the next's", e)
		}
		last = v
	}
	v10, _ := c.Value(110)
	v500, _ := c.Value(500)
	if !ChainFollows(110, v10, 500, v500) || ChainFollows(500, v500, 110, v10) || ChainFollows(110, v10, 501, v500) {
		t.Error("ChainFollows does not check the chain")
	}
	if back, ok := ChainBack(500, v500, 110); !ok || back != v10 {
		t.Error("ChainBack does not find an earlier value")
	}
	other := NewChain(EpochSalt(nil, 2, nil), 100, 1000)
	o500, _ := other.Value(500)
	if ChainFollows(110, v10, 500, o500) {
		t.Error("another chain's value follows")
	}
}

// TestSaltedTarget: the target keeps the cluster's prefix, takes the rest
// from the salt, and moves with it.
func TestSaltedTarget(t *testing.T) {
	var ck Key
	ck[0] = 0b1010_0000
	s1, s2 := ClusterSalt(ck, 3, 7, EpochSalt(nil, 1, nil)), ClusterSalt(ck, 3, 7, EpochSalt(nil, 2, nil))
	t1, t2 := SaltedTarget(ck, 3, s1), SaltedTarget(ck, 3, s2)
	if t1.Cluster(3) != ck || t2.Cluster(3) != ck {
		t.Fatalf("targets %s and %s leave the cluster %s", t1, t2, ck)
	}
	if t1 == t2 || t1 == ck {
		t.Fatal("the target does not depend on the salt")
	}
	if ClusterSalt(ck, 3, 7, Salt{}) == ClusterSalt(ck, 3, 8, Salt{}) || ClusterSalt(ck, 3, 7, Salt{}) == ClusterSalt(ck, 4, 7, Salt{}) {
		t.Fatal("the salt does not depend on the epoch and k")
	}
	at := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
	e := EpochOf(at, time.Minute)
	if !EpochStart(e, time.Minute).Equal(at.Truncate(time.Minute)) || EpochOf(EpochStart(e+1, time.Minute), time.Minute) != e+1 {
		t.Fatal("EpochOf and EpochStart disagree")
	}
}
