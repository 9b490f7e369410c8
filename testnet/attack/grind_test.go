package attack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/internal/bubble"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/overlay/node"
)

// waitFor polls cond until it holds; the minute is a bound against hangs,
// not a performance limit.

// TestGroundIDLive: issue 19's finding 5 on real libp2p hosts (mocknet),
// in virtual time (a testing/synctest bubble). Five honest nodes form one
// cluster (S = 1, bully) with 8 s epochs and wait until they are eligible
// (node.MinAge epochs). Two attackers grind Ed25519 keys: one whose
// Kademlia key is closer than every honest node's to the cluster key (the
// attack as filed: without the defence it was the superpeer half a second
// after it joined), one closer to the cluster's salted target of the
// epoch, which it reads from the members' announcements in the cluster's
// roster, as any peer of the cluster's key range can (Listen: a private
// member of the cluster, which the superpeer sends the roster;
// SaltedTarget). Both join with the overlay's own code. Until they come of
// age, no node names either superpeer, themselves included, and the honest
// nodes agree on one superpeer afterwards.
//
// On loopback TCP in real time the test failed under make test's load (8
// to 10 on two cores): an attacker's registration with its cluster was
// answered after its join wait (1.5 s), it joined alone in its view, saw no
// eligible member and so no defence, and its own machine claimed the
// cluster for a moment (no honest node named it). The node's waits are for
// a network's delays, not for a test machine's CPU; in virtual time the
// delays are the network's alone (mocknet links of 1 ms), whatever the
// load, and grinding costs no epoch time.
func TestGroundIDLive(t *testing.T) {
	bubble.Test(t, groundIDLive)
}

func groundIDLive(t *testing.T) {
	const epoch = 8 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mn := mocknet.New()
	defer mn.Close()
	// Each host on an address of its own: the nodes count at most
	// MaxPerAddr identities per address (seven here would count for
	// nothing, and each node would lead a cluster of itself).
	var hosts []host.Host
	addHost := func(sk crypto.PrivKey) host.Host {
		h, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/10.1.3.%d/tcp/4001", len(hosts)+1)))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range hosts {
			l, err := mn.LinkPeers(h.ID(), o.ID())
			if err != nil {
				t.Fatal(err)
			}
			l.SetOptions(mocknet.LinkOptions{Latency: 500 * time.Microsecond})
		}
		hosts = append(hosts, h)
		return h
	}
	seeded := func(i byte) crypto.PrivKey {
		sk, _, err := crypto.GenerateEd25519Key(rand.NewChaCha8([32]byte{'g', 'r', 'i', 'n', 'd', i}))
		if err != nil {
			t.Fatal(err)
		}
		return sk
	}
	start := func(sk crypto.PrivKey, boot ...peer.AddrInfo) *overlay.Node {
		n, err := overlay.New(ctx, overlay.WithHost(addHost(sk)),
			overlay.WithTarget(dhtselect.Target{Superpeers: 1}), overlay.WithIntervals(200*time.Millisecond, 200*time.Millisecond),
			overlay.WithLogger(quiet), overlay.WithEpoch(epoch), overlay.WithElection("bully", false),
			overlay.WithReachability(overlay.ReachabilityPublic), overlay.WithBootstrap(boot...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	var honest []*overlay.Node
	for i := range 5 {
		var boot []peer.AddrInfo
		if i > 0 {
			boot = []peer.AddrInfo{{ID: honest[0].ID(), Addrs: honest[0].Host().Addrs()}}
		}
		honest = append(honest, start(seeded(byte(i)), boot...))
	}
	started := time.Now()
	agree := func() bool {
		sp := honest[0].State().Superpeer.ID
		for _, n := range honest {
			if s := n.State(); s.Role == overlay.RoleUnknown || s.Superpeer.ID != sp || sp == "" || len(s.Members) < len(honest) {
				return false
			}
		}
		return true
	}
	waitFor(t, "the honest nodes to agree on a superpeer", agree)
	// The attacker's ears: a plain host that reads the cluster's roster
	// as a member (S = 1: every key is in the cluster), connected to the
	// nodes (whose addresses an outsider knows).
	h := addHost(seeded(100))
	for _, n := range honest {
		if err := h.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := Listen(ctx, h, "default")
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	// MinAge epochs after the last start every honest node is eligible,
	// and the cluster's target is salted.
	aged := dhtselect.EpochStart(dhtselect.EpochOf(started, epoch)+node.MinAge, epoch).Add(500 * time.Millisecond)
	time.Sleep(time.Until(aged))
	waitFor(t, "the honest nodes to agree on a superpeer again", agree)

	st := honest[0].State()
	var salted dhtselect.Key
	waitFor(t, "the members' salts", func() bool {
		var ok bool
		salted, ok = SaltedTarget(ms.Entries(), st.ClusterKey, st.K)
		return ok
	})
	var attackers []Ground
	for _, target := range []dhtselect.Key{st.ClusterKey, salted} {
		// The best of 5000 keys beats 5 random honest ones but about one
		// time in 1000 (once in a make test: the attack needs the
		// closest key, not 5000 tries): grind on, 5000 more at a time.
		// Grinding takes no virtual time.
		closest := func(g Ground) bool {
			return !slices.ContainsFunc(honest, func(n *overlay.Node) bool {
				return !dhtselect.Closer(g.KadID, dhtselect.KeyOf(n.ID()), target)
			})
		}
		var g Ground
		tries := 0
		for round := 0; round < 10 && (g.Key == nil || !closest(g)); round++ {
			more, err := Grind(ctx, target, 5000)
			if err != nil {
				t.Fatal(err)
			}
			if tries += more.Tries; g.Key == nil || dhtselect.Closer(more.KadID, g.KadID, target) {
				g = more
			}
		}
		if !closest(g) {
			t.Fatalf("the ground key (%d tries) is not closer to %s than every honest node's", tries, target)
		}
		attackers = append(attackers, g)
	}
	joined := time.Now()
	var nodes []*overlay.Node
	for _, g := range attackers {
		// The honest code with a chosen key, which is all the attack
		// needs.
		nodes = append(nodes, start(g.Key, peer.AddrInfo{ID: honest[0].ID(), Addrs: honest[0].Host().Addrs()}))
	}
	// They are first seen in joined's epoch or later: not eligible before
	// MinAge-1 epochs after it.
	comesOfAge := dhtselect.EpochStart(dhtselect.EpochOf(joined, epoch)+node.MinAge-1, epoch).Add(-100 * time.Millisecond)
	member, served := make([]bool, len(attackers)), make([]int, len(attackers))
	for time.Now().Before(comesOfAge) {
		for i, g := range attackers {
			seen := false // by an honest node, as a member of its cluster
			for _, n := range honest {
				s := n.State()
				if s.Superpeer.ID == g.ID {
					if served[i]++; served[i] <= 3 {
						t.Logf("%v after the join: the honest %s names attacker %d superpeer", time.Since(joined).Round(time.Millisecond), n.ID().ShortString(), i)
					}
				}
				seen = seen || contains(s.Members, g)
			}
			if s := nodes[i].State(); s.Role == overlay.RoleSuperpeer {
				if served[i]++; served[i] <= 3 {
					t.Logf("%v after the join: attacker %d claims the superpeer role (%d members)", time.Since(joined).Round(time.Millisecond), i, len(s.Members))
				}
			} else if s.Role == overlay.RoleOrdinary && seen {
				member[i] = true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, against := range []string{"the cluster key", "the salted target"} {
		if served[i] > 0 {
			t.Errorf("the ID ground against %s was named superpeer in %d samples before it came of age", against, served[i])
		}
		if !member[i] {
			t.Errorf("the ID ground against %s did not join within %v (before it came of age): the test shows nothing", against, comesOfAge.Sub(joined))
		}
	}
	waitFor(t, "the honest nodes to agree on a superpeer after the attack", agree)
}

func contains(members []peer.ID, g Ground) bool { return slices.Contains(members, g.ID) }
