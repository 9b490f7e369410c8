package gossip

import (
	"context"
	"math"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/superpeer/superpeer/dhtselect"
)

// waitFor polls cond until it holds or the deadline passes. The deadline is
// a generous bound against hangs, not a performance assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Real GossipSub over an in-process network: every peer learns every other,
// a peer that stops announcing expires, and a forged announcement is dropped.
func TestMembershipOverGossipSub(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mn, err := mocknet.FullMeshConnected(6)
	if err != nil {
		t.Fatal(err)
	}
	defer mn.Close()
	hosts := mn.Hosts()
	cfg := MembershipConfig{Network: "test", Interval: 100 * time.Millisecond}
	ms := make([]*Membership, len(hosts))
	for i, h := range hosts {
		ps, err := pubsub.NewGossipSub(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		m, err := JoinMembership(ps, h.ID(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
		if err := m.SetLocal(ctx, local(h, 1)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every peer to see all 6", func() bool {
		for _, m := range ms {
			if m.Len() != len(hosts) {
				return false
			}
		}
		return true
	})
	e, ok := ms[1].Get(hosts[0].ID())
	if !ok || len(e.Addrs) == 0 || e.ClusterKey != dhtselect.KeyOf(hosts[0].ID()).Cluster(1) {
		t.Fatalf("peer 1's entry for peer 0 = %+v, %v", e, ok)
	}

	// Peer 0 becomes a superpeer: the others see it.
	a := local(hosts[0], 1)
	a.Superpeer = true
	if err := ms[0].SetLocal(ctx, a); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the role change to spread", func() bool {
		e, ok := ms[5].Get(hosts[0].ID())
		return ok && e.Superpeer
	})

	// A forged payload (peer 5 claims peer 0's cluster key) is rejected by
	// the validator and never reaches a view. At k = MaxK the two keys'
	// prefixes differ but with probability 2^-30.
	// Its sequence number is the highest possible, so were it accepted it
	// would stick and hide the honest change below.
	forged := local(hosts[0], dhtselect.MaxK)
	forged.Seq = math.MaxUint64
	data, _ := forged.Encode()
	if err := ms[5].topic.Publish(ctx, data); err != nil {
		t.Fatal(err)
	}
	// A later, honest change from peer 5 serves as a barrier.
	b := local(hosts[5], 1)
	b.Superpeer = true
	if err := ms[5].SetLocal(ctx, b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "peer 5's honest change to spread", func() bool {
		for _, m := range ms[:5] {
			if e, _ := m.Get(hosts[5].ID()); !e.Superpeer {
				return false
			}
		}
		return true
	})
	for i, m := range ms[:5] {
		if e, _ := m.Get(hosts[5].ID()); e.K != 1 {
			t.Fatalf("peer %d accepted a forged announcement from peer 5: %+v", i, e)
		}
	}

	// Peer 3 leaves: it expires from the others' views within the TTL.
	if err := ms[3].Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "peer 3 to expire", func() bool {
		_, ok := ms[0].Get(hosts[3].ID())
		return !ok
	})
	for i, m := range ms {
		if i != 3 {
			_ = m.Close()
		}
	}
}

func local(h host.Host, k int) Announcement {
	return Announcement{ID: h.ID(), Addrs: h.Addrs(), K: k, ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(k)}
}
