package overlay

import (
	"context"
	"slices"
	"testing"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

// standIns starts n plain kad-dht servers (the standard protocol, as the
// public network runs it) on loopback, connected to one another: a local
// stand-in for the public DHT.
func standIns(t *testing.T, n int) []peer.AddrInfo {
	t.Helper()
	var infos []peer.AddrInfo
	for range n {
		h := plainHost(t)
		d, err := dht.New(h, dht.Mode(dht.ModeServer))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		for _, o := range infos {
			if err := h.Connect(context.Background(), o); err != nil {
				t.Fatal(err)
			}
		}
		infos = append(infos, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()})
	}
	return infos
}

// Overlay peers that know no overlay peer, only the (stand-in) public DHT,
// find each other there by rendezvous and form their overlay; the public
// peers are never members or superpeers, and a peer of another overlay
// network does not join.
func TestPublicRendezvous(t *testing.T) {
	ctx := context.Background()
	public := standIns(t, 3)
	opts := func(network string) []Option {
		return []Option{
			WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithPublic(public...), WithNetwork(network),
			WithTarget(dhtselect.Target{Superpeers: 1}), WithIntervals(200*time.Millisecond, 200*time.Millisecond),
			WithBootstrapRetry(200 * time.Millisecond), WithLogger(quiet),
		}
	}
	var nodes []*Node
	for range 3 {
		n, err := New(ctx, opts("open")...)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	other, err := New(ctx, opts("elsewhere")...)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	ids := []peer.ID{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	want := dhtselect.Assign(ids, 0)[0].Superpeer
	waitFor(t, "the three overlay peers to form one cluster under "+want.ShortString(), func() bool {
		for _, n := range nodes {
			if s := n.State(); len(s.Members) != 3 || s.Superpeer.ID != want {
				return false
			}
		}
		return true
	})
	waitFor(t, "the other network's peer to take a role alone", func() bool {
		s := other.State()
		return s.Role == RoleSuperpeer && len(s.Members) == 1
	})
	for _, n := range append(nodes, other) {
		s := n.State()
		for _, p := range public {
			if slices.Contains(s.Members, p.ID) || s.Superpeer.ID == p.ID {
				t.Errorf("%s counts the public peer %s as a member or superpeer", n.ID().ShortString(), p.ID.ShortString())
			}
		}
		if slices.Contains(s.Members, other.ID()) && n != other {
			t.Errorf("%s counts the other network's peer as a member", n.ID().ShortString())
		}
		// The node really used the public DHT: it knows stand-ins there.
		if n.public.RoutingTable().Size() == 0 {
			t.Errorf("%s: empty public routing table", n.ID().ShortString())
		}
	}
	// Host quality counts the overlay's peers alone: the other network's
	// peer, connected to public peers only, has none (an outage of its
	// own, if it had had some).
	nw := other.host.Network()
	if got, all := other.overlayPeers(), len(nw.Peers()); got != 0 || all == 0 {
		t.Errorf("the other network's peer: %d overlay peers of %d connected; want 0 of some", got, all)
	}
}
