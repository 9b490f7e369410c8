package gossip

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/superpeer/superpeer/dhtselect"
)

// gossipSubNet gives n in-process hosts, each with a GossipSub router, all
// connected. The routers start before the hosts connect: a router that
// starts while a connection is open tries a stream to the peer at once, and
// if the peer's router has not registered its protocol yet, that attempt
// fails while it hides the peer's identify push (go-libp2p-pubsub v0.19
// skips a new peer with an attempt under way, and forgets a failed one), so
// the two would never exchange a message: seen as one flaky failure in a
// few hundred runs under the race detector.
func gossipSubNet(ctx context.Context, t *testing.T, n int) ([]host.Host, []*pubsub.PubSub) {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	hosts := make([]host.Host, n)
	pss := make([]*pubsub.PubSub, n)
	for i := range n {
		h, err := mn.GenPeer()
		if err != nil {
			t.Fatal(err)
		}
		hosts[i] = h
		if pss[i], err = pubsub.NewGossipSub(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		t.Fatal(err)
	}
	return hosts, pss // in pss's order, which mn.Hosts() is not
}

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
	hosts, pss := gossipSubNet(ctx, t, 6)
	cfg := MembershipConfig{Network: "test", Interval: 100 * time.Millisecond}
	ms := make([]*Membership, len(hosts))
	for i, h := range hosts {
		m, err := JoinMembership(pss[i], h.ID(), cfg)
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

// offlineMembership returns a Membership attached to no topic, whose
// messages the test hands in with offer.
func offlineMembership(t *testing.T, self peer.ID, cfg MembershipConfig) *Membership {
	t.Helper()
	m, fc, err := newMembership(self, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.attach(newFeed(fc, &announcementSpec, nil))
	return m
}

// The membership's validator and driver, without a network: a refused
// origin is ignored before its payload is read, a malformed payload is
// rejected and reported with the relay that sent it, a stale one is ignored;
// Leave turns this peer's announcement into a goodbye that every later
// publication repeats, and SetLocal changes nothing after it.
func TestMembershipDecisionsAndLeave(t *testing.T) {
	ctx := context.Background()
	self, good, banned := fakeID(t, 1), fakeID(t, 2), fakeID(t, 3)
	var rejectedFrom []peer.ID
	m := offlineMembership(t, self, MembershipConfig{
		Network: "test", Interval: time.Second,
		Refuse:   func(p peer.ID) bool { return p == banned },
		Rejected: func(from peer.ID, _ error) { rejectedFrom = append(rejectedFrom, from) },
	})
	enc := func(a Announcement) []byte {
		data, err := a.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if r := offer(m.feed, good, enc(announcement(t, good, 2, 5))); r != pubsub.ValidationAccept {
		t.Fatalf("a good announcement: %v", r)
	}
	if r := offer(m.feed, good, enc(announcement(t, good, 2, 5))); r != pubsub.ValidationIgnore {
		t.Fatalf("a repeated announcement: %v, want ignored", r)
	}
	if r := offer(m.feed, banned, enc(announcement(t, banned, 2, 1))); r != pubsub.ValidationIgnore {
		t.Fatalf("a refused origin's announcement: %v, want ignored", r)
	}
	if r := offer(m.feed, good, []byte("garbage")); r != pubsub.ValidationReject {
		t.Fatalf("a malformed announcement: %v, want rejected", r)
	}
	if len(rejectedFrom) != 1 || rejectedFrom[0] != "relay" {
		t.Fatalf("Rejected told of %v, want the relay once", rejectedFrom)
	}
	if st := m.Stats(); st.Accepted != 1 || st.Ignored != 2 || st.Rejected != 1 {
		t.Fatalf("stats %+v, want 1 accepted, 2 ignored, 1 rejected", st)
	}
	if _, ok := m.Get(banned); ok || m.Len() != 1 {
		t.Fatalf("view holds %d entries (banned peer in it: %v), want the good peer only", m.Len(), ok)
	}

	if err := m.SetLocal(ctx, announcement(t, good, 2, 0)); !errors.Is(err, ErrBadAnnouncement) {
		t.Fatalf("SetLocal of another peer's announcement: %v", err)
	}
	if err := m.SetLocal(ctx, announcement(t, self, 2, 0)); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get(self); !ok || m.Len() != 2 || m.Stats().Published != 1 {
		t.Fatalf("after SetLocal: self in the view %v, len %d, stats %+v", ok, m.Len(), m.Stats())
	}
	drain(m.Changes())
	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get(self); ok || !m.Left(self) || m.Len() != 1 || !drain(m.Changes()) {
		t.Fatalf("after Leave: self in the view %v, left %v, len %d", ok, m.Left(self), m.Len())
	}
	// The republish loop's next publication is a goodbye too.
	if err := m.publish(ctx); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	local := m.local
	m.mu.Unlock()
	if local == nil || !local.Leaving || m.Stats().Published != 3 {
		t.Fatalf("after Leave, the local announcement is %+v (published %d), want a goodbye, sent twice", local, m.Stats().Published)
	}
	b := announcement(t, self, 3, 0)
	b.Superpeer = true
	if err := m.SetLocal(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Get(self); ok || m.Stats().Published != 3 {
		t.Fatal("SetLocal after Leave brought this peer back")
	}
	// Forget drops a peer and its sequence number: an older announcement
	// brings it back.
	m.Forget(good)
	if _, ok := m.Get(good); ok {
		t.Fatal("Forget kept the peer")
	}
	if r := offer(m.feed, good, enc(announcement(t, good, 2, 4))); r != pubsub.ValidationAccept || m.Len() != 1 {
		t.Fatalf("an announcement after Forget: %v, len %d", r, m.Len())
	}
}
