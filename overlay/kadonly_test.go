package overlay

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

// Kad-only peers: hosts that speak the overlay's DHT prefix
// (/superpeer/<network>/kad/1.0.0) and none of the overlay's own
// protocols, such as a rust, js or Go client of kad-dht configured with
// the prefix, or an overlay build whose closer protocol is of another
// version (the DHT prefix is not versioned with it). They are no overlay
// peers: they must take no room in the overlay's routing tables, and no
// place in a lookup's seeds or in a closer answer.

// grindKey returns a key pair whose Kademlia key's first bit is bit.
func grindKey(t *testing.T, bit byte) crypto.PrivKey {
	t.Helper()
	for {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if key := dhtselect.KeyOf(id); key[0]>>7 == bit {
			return k
		}
	}
}

// kadOnlyHosts starts one kad-dht server with the overlay's prefix (of
// the network "default") and nothing else of the overlay for each key,
// host i on 127.3.0.(i+2) (one address each, so that no address counts
// as flooded), connected to every peer of boot; closed with the test.
// It returns their IDs and addresses.
func kadOnlyHosts(t *testing.T, keys []crypto.PrivKey, boot []peer.AddrInfo) []peer.AddrInfo {
	t.Helper()
	var out []peer.AddrInfo
	for i, sk := range keys {
		h, err := libp2p.New(libp2p.Identity(sk), libp2p.ListenAddrStrings(fmt.Sprintf("/ip4/127.3.0.%d/tcp/0", i+2)))
		if err != nil {
			t.Fatal(err)
		}
		d, err := dht.New(h, dht.Mode(dht.ModeServer), dht.ProtocolPrefix(protocol.ID("/superpeer/default")),
			dht.BootstrapPeers(boot...))
		if err != nil {
			h.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close(); h.Close() })
		for _, b := range boot {
			if err := h.Connect(context.Background(), b); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
	}
	return out
}

func infoIDs(infos []peer.AddrInfo) []peer.ID {
	out := make([]peer.ID, len(infos))
	for i, ai := range infos {
		out[i] = ai.ID
	}
	return out
}

// TestKadOnlyPeersNearClusterKey: four overlay nodes, one cluster
// (Superpeers: 1, no epoch salt: the lookup's target is the cluster key,
// all zeros), every node's key beginning with a 1; then 24 kad-only hosts
// whose keys begin with a 0, closer to the target than every node, each
// connected to every node. In a node's routing table they all fall into
// one bucket (common prefix length 0), which holds 20: they were the 20
// peers of the table nearest to the target, the lookup's seeds, every one
// skipped as a peer that does not speak the closer protocol, and the
// lookup ended at the node itself. All four nodes were superpeers of the
// one cluster (the audit's finding). Now they never enter a node's table,
// and after ten more lookups of every node the node closest to the key is
// the one superpeer, named by all.
func TestKadOnlyPeersNearClusterKey(t *testing.T) {
	const n = 4
	keys := make([]crypto.PrivKey, n)
	for i := range keys {
		keys[i] = grindKey(t, 1)
	}
	var nodes []*Node
	for i, k := range keys {
		ip := fmt.Sprintf("127.1.0.%d", i+2)
		o := []Option{WithIdentity(k),
			WithListenAddrs(ma.StringCast("/ip4/"+ip+"/tcp/0"), ma.StringCast("/ip4/"+ip+"/udp/0/quic-v1")),
			WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(quiet),
			WithTarget(dhtselect.Target{Superpeers: 1}), WithEpoch(0)}
		if i > 0 {
			o = append(o, WithBootstrapAddrs(nodes[0].P2PAddrs()...))
		}
		nd, err := New(context.Background(), o...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		nodes = append(nodes, nd)
	}
	want := nodes[0].ID()
	for _, nd := range nodes[1:] {
		if dhtselect.Closer(dhtselect.KeyOf(nd.ID()), dhtselect.KeyOf(want), dhtselect.Key{}) {
			want = nd.ID()
		}
	}
	waitFor(t, "the nodes to count each other", func() bool {
		for _, nd := range nodes {
			if st := nd.State(); st.Size.N != n || st.Superpeer.ID == "" {
				return false
			}
		}
		return true
	})

	kadKeys := make([]crypto.PrivKey, 24)
	for i := range kadKeys {
		kadKeys[i] = grindKey(t, 0)
	}
	kad := infoIDs(kadOnlyHosts(t, kadKeys, infos(nodes)))
	kadProto := protocol.ID("/superpeer/default/kad/1.0.0")
	waitFor(t, "every node to have identified every kad-only host", func() bool {
		for _, nd := range nodes {
			for _, p := range kad {
				if ps, err := nd.Host().Peerstore().SupportsProtocols(p, kadProto); err != nil || len(ps) == 0 {
					return false
				}
			}
		}
		return true
	})
	start := make([]uint64, n)
	for i, nd := range nodes {
		start[i] = nd.State().Lookups
	}
	waitFor(t, "ten more lookups of every node", func() bool {
		for i, nd := range nodes {
			if nd.State().Lookups < start[i]+10 {
				return false
			}
		}
		return true
	})

	for i, nd := range nodes {
		if in := slices.DeleteFunc(nd.dht.RoutingTable().ListPeers(), func(p peer.ID) bool { return !slices.Contains(kad, p) }); len(in) > 0 {
			t.Errorf("node %d: %d kad-only hosts in its routing table, want none", i, len(in))
		}
	}
	var superpeers []int
	for i, nd := range nodes {
		st := nd.State()
		if st.Role == RoleSuperpeer {
			superpeers = append(superpeers, i)
		}
		if st.Superpeer.ID != want {
			t.Errorf("node %d names %s its superpeer, want %s (the node closest to the cluster key)", i, st.Superpeer.ID, want)
		}
	}
	if len(superpeers) != 1 {
		t.Errorf("nodes %v are superpeers of the one cluster, want one", superpeers)
	}
}

// TestKadOnlyPeerHeardInAQuery: kad-dht adds a peer that answered one of
// its queries without asking its RoutingTableFilter (table.go). A node's
// only peer, o, speaks the closer protocol but keeps a kad-only host in
// its table (as an overlay build without the filter does); the node's
// table refreshes query o, hear of the kad-only host, and query it too.
// It answers, and must still not enter the node's table.
func TestKadOnlyPeerHeardInAQuery(t *testing.T) {
	nd := oneCluster(t, grindKey(t, 1), WithListenAddrs(ma.StringCast("/ip4/127.1.0.2/tcp/0")))
	oh, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.1.0.3/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	od, err := dht.New(oh, dht.Mode(dht.ModeServer), dht.ProtocolPrefix(protocol.ID("/superpeer/default")))
	if err != nil {
		oh.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { od.Close(); oh.Close() })
	oh.SetStreamHandler(closerProtocol("default"), func(s network.Stream) { s.Reset() })
	o := peer.AddrInfo{ID: oh.ID(), Addrs: oh.Addrs()}
	kad := kadOnlyHosts(t, []crypto.PrivKey{grindKey(t, 0)}, []peer.AddrInfo{o})[0].ID
	waitFor(t, "the kad-only host in o's table", func() bool { return od.RoutingTable().Find(kad) != "" })
	if err := nd.Host().Connect(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "o in the node's table", func() bool { return nd.dht.RoutingTable().Find(o.ID) != "" })

	kadProto := protocol.ID("/superpeer/default/kad/1.0.0")
	for round := 0; ; round++ {
		if round == 10 {
			t.Fatal("ten table refreshes of the node and none queried the kad-only host")
		}
		<-nd.dht.ForceRefresh()
		if ps, _ := nd.Host().Peerstore().SupportsProtocols(kad, kadProto); len(ps) > 0 {
			break // the node dialled it, and identify told what it speaks
		}
	}
	// One more refresh: it queries o, whose answer kad-dht's table loop
	// takes after the kad-only host's (it takes one at a time, in order).
	<-nd.dht.ForceRefresh()
	if nd.dht.RoutingTable().Find(kad) != "" {
		t.Error("the kad-only host, heard in a query, is in the node's routing table")
	}
	if nd.dht.RoutingTable().Find(o.ID) == "" {
		t.Error("o, which speaks the closer protocol, left the node's routing table")
	}
}

// TestKadOnlyBootstrapIntroduces: a bootstrap peer that speaks only the
// overlay's DHT prefix still introduces the nodes given it alone: it is
// admitted to their routing tables (as a configured bootstrap peer),
// their refreshes find each other through it, and they count two and
// name one superpeer. Refused like any such host, it left each node
// alone with an empty table, each its own superpeer. No lookup asks it
// and no closer answer names it.
func TestKadOnlyBootstrapIntroduces(t *testing.T) {
	failed := &queryFailures{byPeer: map[string]int{}}
	kad := kadOnlyHosts(t, []crypto.PrivKey{grindKey(t, 0)}, nil)[0]
	var nodes []*Node
	for i := range 2 {
		nd, err := New(context.Background(), WithListenAddrs(ma.StringCast(fmt.Sprintf("/ip4/127.1.0.%d/tcp/0", i+2))),
			WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(slog.New(failed)),
			WithTarget(dhtselect.Target{Superpeers: 1}), WithBootstrap(kad))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nd.Close() })
		nodes = append(nodes, nd)
	}
	waitFor(t, "the two nodes to count each other and name one superpeer", func() bool {
		a, b := nodes[0].State(), nodes[1].State()
		return a.Size.N == 2 && b.Size.N == 2 && a.Superpeer.ID != "" && a.Superpeer.ID == b.Superpeer.ID
	})
	for i, nd := range nodes {
		if nd.dht.RoutingTable().Find(kad.ID) == "" {
			t.Errorf("node %d: the bootstrap peer is not in its routing table", i)
		}
		for _, ai := range nd.closest(make([]byte, 32), "") {
			if ai.ID == kad.ID {
				t.Errorf("node %d: a closer answer names the bootstrap peer", i)
			}
		}
	}
	if n := failed.of(kad.ID); n > 0 {
		t.Errorf("lookups asked the bootstrap peer %d times", n)
	}
}
