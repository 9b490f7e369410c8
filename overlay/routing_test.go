package overlay

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/internal/bubble"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestRoutingCache: the loop's Routing is built again when a connection
// opens or closes, and not while nothing changed (within routeMaxAge). In
// virtual time, on a mocknet: no time passes while the hosts connect, so
// only the change notices (the connection's, identify's, the routing
// table's size) can make the new peer show, not the cache's age.
func TestRoutingCache(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		a, b := idlePair(t)
		ctx := context.Background()
		look := func() (r node.Routing, builds uint64) {
			t.Helper()
			if !a.do(ctx, func(*node.Machine) { r, builds = a.routing(), a.route.builds }) {
				t.Fatal("the node stopped")
			}
			return r, builds
		}
		has := func(r node.Routing, p peer.ID) bool { _, ok := r.Addrs[p]; return ok }

		r1, n1 := look()
		_, n2 := look()
		if has(r1, b.ID()) || n2 != n1 {
			t.Fatalf("before any connection: b in the routing %v, builds %d then %d (want no rebuild)", has(r1, b.ID()), n1, n2)
		}
		start := time.Now()
		if _, err := a.host.Network().DialPeer(ctx, b.ID()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r, n3 := look(); !has(r, b.ID()) || n3 == n2 {
			t.Fatalf("after the connection: b in the routing %v, builds %d then %d", has(r, b.ID()), n2, n3)
		}
		if time.Since(start) >= routeMaxAge {
			t.Fatalf("%v passed: the cache may have expired by age", time.Since(start))
		}
		if err := a.host.Network().ClosePeer(b.ID()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r, _ := look(); has(r, b.ID()) {
			t.Fatal("after the connection closed: b still in the routing")
		}
	})
}

// TestConnectedPeersCache: the connected peers are listed again when a
// connection opens or closes, and not while nothing changed.
func TestConnectedPeersCache(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		a, b := idlePair(t)
		ctx := context.Background()
		look := func() (bool, uint64) {
			return slices.Contains(a.connectedPeers(), b.ID()), a.route.peerBuilds.Load()
		}
		in1, n1 := look()
		in2, n2 := look()
		if in1 || in2 || n2 != n1 {
			t.Fatalf("before any connection: b listed %v %v, lists built %d then %d (want no rebuild)", in1, in2, n1, n2)
		}
		if _, err := a.host.Network().DialPeer(ctx, b.ID()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if in, n3 := look(); !in || n3 == n2 {
			t.Fatalf("after the connection: b listed %v, lists built %d then %d", in, n2, n3)
		}
		if err := a.host.Network().ClosePeer(b.ID()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if in, _ := look(); in {
			t.Fatal("after the connection closed: b still listed")
		}
	})
}

// idlePair starts two nodes on a mocknet, not connected, whose evaluations
// and announcements wait an hour; in a bubble, once they idle.
func idlePair(t *testing.T) (a, b *Node) {
	t.Helper()
	var nodes []*Node
	for _, h := range mocknetHosts(t, 2, 0) {
		n, err := New(context.Background(), WithHost(h), WithLogger(quiet), WithTarget(dhtselect.Target{Superpeers: 1}),
			WithIntervals(time.Hour, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	synctest.Wait()
	return nodes[0], nodes[1]
}
