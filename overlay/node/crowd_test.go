package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The identities-per-address rule of the register protocol, by hand
// (the registry's tests and the live TestSybilFlood drive it through the
// shell).
func TestCrowding(t *testing.T) {
	const ttl = 15 * time.Second
	all := func(peer.ID) bool { return true }
	id := func(i int) peer.ID { return peer.ID(fmt.Sprintf("p%d", i)) }
	t.Run("limit", func(t *testing.T) {
		c := NewCrowding(2, 16, ttl)
		for i := range 2 {
			if c.Check(id(i), "g", true, t0, nil, all) {
				t.Fatalf("identity %d of a group of at most 2: crowded", i+1)
			}
		}
		if !c.Check(id(2), "g", true, t0, nil, all) {
			t.Fatal("a third identity: not crowded")
		}
		if c.Check(id(9), "h", true, t0, nil, all) {
			t.Error("another group: crowded")
		}
		if !c.Check(id(0), "g", false, t0, nil, all) {
			t.Error("a refresh from the crowded group: not crowded")
		}
		if c.Check(id(0), "", true, t0, nil, all) || NewCrowding(0, 16, ttl).Check(id(0), "g", true, t0, []peer.ID{id(1), id(2), id(3)}, all) {
			t.Error("an unknown group, or no accounting: crowded")
		}
	})
	t.Run("held members count", func(t *testing.T) {
		c := NewCrowding(2, 16, ttl)
		if !c.Check(id(0), "g", true, t0, []peer.ID{id(1), id(2)}, all) {
			t.Error("a new identity beside two members of the roster from its group: not crowded")
		}
	})
	t.Run("remembers perAddr+1", func(t *testing.T) {
		c := NewCrowding(2, 16, ttl)
		for i := range 50 {
			c.Check(id(i), "g", true, t0.Add(time.Duration(i)*time.Millisecond), nil, all)
		}
		if n := c.Remembered("g"); n != 3 {
			t.Errorf("remembers %d identities of a flood of 50, want 3", n)
		}
	})
	t.Run("stays crowded through disconnections", func(t *testing.T) {
		c := NewCrowding(2, 16, ttl)
		gone := map[peer.ID]bool{}
		conn := func(p peer.ID) bool { return !gone[p] }
		now := t0
		for i := range 3 {
			c.Check(id(i), "g", true, now, nil, conn)
		}
		for i := 3; i < 10; i++ {
			for j := range i {
				gone[id(j)] = true // every identity shown before is disconnected
			}
			now = now.Add(ttl / 4)
			if !c.Check(id(i), "g", true, now, nil, conn) {
				t.Fatalf("identity %d after the others' connections closed: not crowded", i+1)
			}
		}
		now = now.Add(ttl + time.Millisecond)
		if c.Check(id(0), "g", true, now, nil, all) {
			t.Error("quiet for the TTL, the group is still crowded")
		}
	})
	// Before, once maxGroups groups had sent records within the TTL,
	// every new group was called crowded: no honest newcomer could
	// register (hostile-peer audit: 4096 IPv6 /64s at the registry).
	t.Run("a flood of addresses locks no newcomer out", func(t *testing.T) {
		c := NewCrowding(2, 4, ttl)
		for i := range 4 {
			if c.Check(id(i), fmt.Sprint("g", i), true, t0, nil, all) {
				t.Fatalf("group %d of at most 4: crowded", i+1)
			}
		}
		if c.Check(id(4), "g4", true, t0.Add(time.Second), nil, all) {
			t.Fatal("a fifth group while four are remembered and none is quiet: crowded")
		}
		if c.Remembered("g0") != 0 || c.Remembered("g1") != 1 || c.Remembered("g4") != 1 {
			t.Error("the fifth group did not take the place of the least recent")
		}
		if c.Check(id(5), "g5", true, t0.Add(ttl+time.Millisecond), nil, all) {
			t.Error("a new group once the others are quiet for the TTL: crowded")
		}
	})
	t.Run("at the registry's scale", func(t *testing.T) {
		const groups = 4096 // the registry's 4 × maxRoster
		c := NewCrowding(4, groups, ttl)
		now := t0
		refused := 0
		for i := range 4 * groups {
			now = now.Add(ttl / (2 * groups)) // 2 × groups within the TTL
			if c.Check(id(i), fmt.Sprint("/64 number ", i), true, now, nil, all) {
				refused++
			}
		}
		if refused > 0 || len(c.groups) != groups {
			t.Errorf("%d groups, %d within the TTL: %d newcomers called crowded, %d groups remembered, want 0 and %d",
				4*groups, 2*groups, refused, len(c.groups), groups)
		}
	})
	t.Run("crowded groups outlast a flood of addresses", func(t *testing.T) {
		c := NewCrowding(2, 4, ttl)
		now := t0
		for i := range 3 {
			c.Check(id(i), "bad", true, now, nil, all)
		}
		for i := range 1000 {
			now = now.Add(time.Millisecond)
			if i%100 == 0 && !c.Check(id(0), "bad", true, now, nil, all) { // records keep coming
				t.Fatalf("after %d new groups, a crowded group that keeps sending records: not crowded", i)
			}
			if c.Check(id(10+i), fmt.Sprint("new", i), true, now, nil, all) {
				t.Fatalf("new group %d, while the others are full: crowded", i)
			}
			if len(c.groups) > 4 {
				t.Fatalf("remembers %d groups, at most 4", len(c.groups))
			}
		}
		if !c.Check(id(3), "bad", true, now, nil, all) {
			t.Error("a new identity from the crowded group after a flood of 1000 groups: not crowded")
		}
	})
	t.Run("a quiet crowded group goes first", func(t *testing.T) {
		c := NewCrowding(1, 2, ttl)
		c.Check(id(0), "a", true, t0, nil, all)
		c.Check(id(1), "a", true, t0, nil, all) // crowded
		c.Check(id(2), "b", true, t0.Add(ttl), nil, all)
		if c.Check(id(3), "c", true, t0.Add(ttl+time.Millisecond), nil, all) {
			t.Fatal("a new group: crowded")
		}
		if c.Remembered("a") != 0 || c.Remembered("b") != 1 {
			t.Error("the crowded group quiet for the TTL kept, the calm group with a record within it forgotten")
		}
	})
	t.Run("all crowded: the least recent gives way", func(t *testing.T) {
		c := NewCrowding(1, 2, ttl)
		for i, g := range []string{"a", "a", "b", "b"} {
			c.Check(id(i), g, true, t0.Add(time.Duration(i)*time.Second), nil, all)
		}
		if c.Check(id(9), "c", true, t0.Add(5*time.Second), nil, all) {
			t.Fatal("a new group while every group remembered is crowded: crowded")
		}
		if c.Remembered("a") != 0 || !c.Check(id(4), "b", true, t0.Add(6*time.Second), nil, all) {
			t.Error("not the least recent crowded group gave way")
		}
	})
	t.Run("turns calm without a record", func(t *testing.T) {
		c := NewCrowding(1, 2, ttl)
		c.Check(id(0), "a", true, t0, nil, all)
		c.Check(id(1), "a", true, t0, nil, all) // crowded
		c.Check(id(2), "b", true, t0.Add(ttl), nil, all)
		if c.Check(id(0), "a", false, t0.Add(2*ttl), nil, all) {
			t.Fatal("a refresh from a group quiet for the TTL: crowded")
		}
		c.Check(id(3), "c", true, t0.Add(2*ttl), nil, all)
		if c.Remembered("a") != 0 || c.Remembered("b") != 1 {
			t.Error("the group that turned calm, quiet for the TTL, did not go first")
		}
	})
}
