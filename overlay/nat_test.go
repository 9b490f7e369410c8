package overlay

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// keysByDistance returns n fresh keys sorted by their peers' keys, the
// first closest to the zero key: the cluster key of a network of one
// cluster (k = 0), so the first would be its superpeer.
func keysByDistance(t *testing.T, n int) []crypto.PrivKey {
	t.Helper()
	keys := make([]crypto.PrivKey, n)
	for i := range keys {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	key := func(k crypto.PrivKey) dhtselect.Key {
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return dhtselect.KeyOf(id)
	}
	slices.SortFunc(keys, func(a, b crypto.PrivKey) int {
		ka, kb := key(a), key(b)
		return bytes.Compare(ka[:], kb[:])
	})
	return keys
}

// TestPrivateNeverSuperpeer: a private node whose key is the closest to the
// cluster key, so that it would be the superpeer were it reachable, is an
// ordinary member, with and without an election; it holds a reservation at
// its superpeer's relay, and a peer that knows only its circuit address
// through the superpeer reaches it.
func TestPrivateNeverSuperpeer(t *testing.T) {
	for _, election := range []string{"", "bully"} {
		t.Run("election="+election, func(t *testing.T) {
			keys := keysByDistance(t, 3)
			start := func(key crypto.PrivKey, reach string, boot ...ma.Multiaddr) *Node {
				return oneCluster(t, key, WithReachability(reach), WithBootstrapAddrs(boot...), WithElection(election, false))
			}
			// a is the superpeer once c, the closest, is out.
			a := start(keys[1], ReachabilityPublic)
			b := start(keys[2], ReachabilityPublic, a.P2PAddrs()...)
			c := start(keys[0], ReachabilityPrivate, a.P2PAddrs()...)
			nodes := []*Node{a, b, c}
			waitFor(t, "every node to name a, and a alone to be superpeer", func() bool {
				for _, n := range nodes {
					s := n.State()
					if len(s.Members) != 3 || s.Superpeer.ID != a.ID() || (s.Role == RoleSuperpeer) != (n == a) {
						return false
					}
				}
				return true
			})
			if !c.Private() || a.Private() || b.Private() {
				t.Fatalf("Private(): a %v, b %v, c %v; want false, false, true", a.Private(), b.Private(), c.Private())
			}
			if e, ok := b.members.Get(c.ID()); !ok || !e.Private {
				t.Fatalf("b's view of c: %+v, %v; want an announcement that says private", e, ok)
			}
			if a.dht.RoutingTable().Find(c.ID()) != "" {
				t.Fatal("the private node is in the superpeer's routing table: it runs the DHT as a server")
			}

			// c reserves a slot at a's relay and announces the circuit
			// addresses.
			var circuit ma.Multiaddr
			waitFor(t, "c to announce a circuit address through a", func() bool {
				e, ok := b.members.Get(c.ID())
				for _, addr := range e.Addrs {
					if via, err := addr.ValueForProtocol(ma.P_P2P); ok && err == nil && via == a.ID().String() {
						circuit = addr
						return true
					}
				}
				return false
			})
			d := plainHost(t)
			dctx, cancel := context.WithTimeout(network.WithDialPeerTimeout(context.Background(), 10*time.Second), 10*time.Second)
			defer cancel()
			if err := d.Connect(dctx, peer.AddrInfo{ID: c.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
				t.Fatalf("connect to c through %s: %v", circuit, err)
			}
			// A peer of no overlay (d speaks none of its protocols) gets
			// no reservation at a's relay: the slots are the cluster's
			// private members'. The relay refuses a peer identified as
			// foreign and lets in one not identified yet (overlayOnly), so
			// the request waits until a has identified d: under make
			// test's load a's identify of d once came after it, and d got
			// a slot.
			waitFor(t, "a to identify d", func() bool {
				ps, err := a.host.Peerstore().GetProtocols(d.ID())
				return err == nil && len(ps) > 0
			})
			if _, err := client.Reserve(dctx, d, peer.AddrInfo{ID: a.ID(), Addrs: a.host.Addrs()}); err == nil {
				t.Error("a plain host reserved a slot at the superpeer's relay")
			}
			// The control: b runs no relay (it is no superpeer), so the
			// same kind of address through b fails.
			e := plainHost(t)
			viaB := b.P2PAddrs()[0].Encapsulate(ma.StringCast("/p2p-circuit"))
			if err := e.Connect(dctx, peer.AddrInfo{ID: c.ID(), Addrs: []ma.Multiaddr{viaB}}); err == nil {
				t.Fatalf("connected to c through %s, which runs no relay", viaB)
			}
		})
	}
}

// TestAutoNATPrivateStepsDown: with Reachability auto, the superpeer that
// AutoNAT finds private hands the role to the reachable member, and takes
// it back when AutoNAT finds it public again.
func TestAutoNATPrivateStepsDown(t *testing.T) {
	a, b := twoNodes(t, WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithIntervals(200*time.Millisecond, 200*time.Millisecond))
	sp := a.State().Superpeer.ID
	waitFor(t, "both to name the superpeer", func() bool {
		sp = a.State().Superpeer.ID
		return sp != "" && b.State().Superpeer.ID == sp
	})
	super, other := a, b
	if sp == b.ID() {
		super, other = b, a
	}
	// AutoNAT's verdict, as its client emits it on the host's bus.
	em, err := super.Host().EventBus().Emitter(new(event.EvtLocalReachabilityChanged), eventbus.Stateful)
	if err != nil {
		t.Fatal(err)
	}
	defer em.Close()
	if err := em.Emit(event.EvtLocalReachabilityChanged{Reachability: network.ReachabilityPrivate}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the role to move to the reachable node", func() bool {
		return super.State().Role == RoleOrdinary && other.State().Role == RoleSuperpeer && super.State().Superpeer.ID == other.ID()
	})
	if err := em.Emit(event.EvtLocalReachabilityChanged{Reachability: network.ReachabilityPublic}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the role to come back", func() bool {
		return super.State().Role == RoleSuperpeer && other.State().Superpeer.ID == super.ID()
	})
}

// TestPrivateHoldsNoToken: with the geometric strategy, three nodes and two
// tokens, the private node holds no token whichever node it is: the two
// reachable nodes are the superpeers, and the private one attaches to one
// of them.
func TestPrivateHoldsNoToken(t *testing.T) {
	for private := range 3 {
		t.Run(fmt.Sprint("private=", private), func(t *testing.T) {
			nodes := mocknetNodes(t, 3, func(i int) []Option {
				reach := ReachabilityPublic
				if i == private {
					reach = ReachabilityPrivate
				}
				return []Option{
					WithLogger(quiet), WithStrategy(StrategyGeometric), WithReachability(reach),
					WithTarget(dhtselect.Target{Superpeers: 2}), WithIntervals(300*time.Millisecond, time.Second),
					WithGeometric(geometric.Config{}, 50*time.Millisecond, 100*time.Millisecond),
				}
			})
			waitFor(t, "the two reachable nodes to hold the tokens, and the private one to attach", func() bool {
				for i, n := range nodes {
					s := n.State()
					if (i == private) != (s.Token < 0) || (i == private) != (s.Role == RoleOrdinary) || s.Superpeer.ID == "" {
						return false
					}
				}
				return true
			})
		})
	}
}

// oneCluster starts a node on loopback TCP with key, in a network of one
// cluster (one superpeer), with short intervals and opts; it is closed
// with the test.
func oneCluster(t *testing.T, key crypto.PrivKey, opts ...Option) *Node {
	t.Helper()
	n, err := New(context.Background(), append([]Option{WithIdentity(key),
		WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithTarget(dhtselect.Target{Superpeers: 1}),
		WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
