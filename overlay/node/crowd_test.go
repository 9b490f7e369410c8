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
	t.Run("a flood of addresses", func(t *testing.T) {
		c := NewCrowding(2, 4, ttl)
		for i := range 4 {
			if c.Check(id(i), fmt.Sprint("g", i), true, t0, nil, all) {
				t.Fatalf("group %d of at most 4: crowded", i+1)
			}
		}
		if !c.Check(id(4), "g4", true, t0, nil, all) {
			t.Error("a fifth group while four are remembered and none is quiet: not crowded")
		}
		if c.Check(id(5), "g5", true, t0.Add(ttl+time.Millisecond), nil, all) {
			t.Error("a new group once the others are quiet for the TTL: crowded")
		}
	})
}
