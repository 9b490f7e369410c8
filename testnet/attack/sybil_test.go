package attack

import (
	"context"
	"fmt"
	"github.com/superpeer/superpeer/overlay/node"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
)

// TestSybilsScoped: issue 19's finding 7 against the DHT strategy's
// cluster-scoped membership, on real hosts over loopback. Four honest
// nodes, each on a loopback address of its own (127.1.4.x), --fraction
// 0.5; 20 identities from 127.0.0.1 (Sybils), each on a host of its own,
// register with their cluster's superpeer as superpeers at k = 0 and
// publish a backbone summary each (or, one-connection, only the
// summaries, relayed by one host). Once every identity has been answered
// by a superpeer (one-each: taken, or refused since its address is
// crowded, and at most MaxPerAddr taken by each superpeer), sampled over ten evaluations of every node: no sybil is a
// member of a node's cluster or its superpeer, k moves by one at most,
// and no honest peer is banned.
func TestSybilsScoped(t *testing.T) {
	if testing.Short() {
		t.Skip("real hosts")
	}
	// first: how many of the 20 sybils are in the first cluster. Half is
	// more than MaxPerAddr in each cluster; MaxPerAddr in one (drawn at
	// random, one run in a hundred did that) is a number its superpeer's
	// registry alone would take, as it would take as many honest peers
	// behind one address; but the superpeer's machine sees all 20 on the
	// backbone, and the registry refuses what the machine refuses (CI,
	// 2026-12-03, before it did: 4 of 20 taken, in every sample of node
	// 1's members).
	for _, c := range []struct {
		oneConnection bool
		first         int
	}{{false, 10}, {false, node.DefaultMaxPerAddr}, {true, 10}} {
		t.Run(fmt.Sprintf("one-connection=%v/first=%d", c.oneConnection, c.first), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // against hangs
			defer cancel()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			// Two nodes in each cluster at k = 1, so that every sybil's
			// cluster has a superpeer to register with.
			nodes := startNodes(ctx, t, 4, func(i int) []overlay.Option {
				key := keyWhere(t, func(b byte) bool { return b < 0x80 == (i < 2) })
				return []overlay.Option{overlay.WithIdentity(key), overlay.WithListenAddrs(ma.StringCast(fmt.Sprintf("/ip4/127.1.4.%d/tcp/0", i+2))),
					overlay.WithTarget(dhtselect.Target{Fraction: 0.5}), overlay.WithIntervals(time.Second, 200*time.Millisecond),
					overlay.WithReachability(overlay.ReachabilityPublic), overlay.WithLogger(quiet)}
			})
			waitFor(t, "the 4 honest nodes to count each other", func() bool {
				for _, n := range nodes {
					if st := n.State(); st.Size.N != 4 || st.Superpeer.ID == "" {
						return false
					}
				}
				return true
			})
			k0 := nodes[0].State().K
			var infos []peer.AddrInfo
			for _, n := range nodes {
				infos = append(infos, peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()})
			}
			const n = 20
			keys := make([]crypto.PrivKey, n)
			for i := range keys {
				keys[i] = keyWhere(t, func(b byte) bool { return b < 0x80 == (i < c.first) })
			}
			syb, err := StartSybils(ctx, SybilConfig{Network: "default", N: n, Keys: keys, Bootstrap: infos, Interval: 300 * time.Millisecond,
				OneConnection: c.oneConnection})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syb.Close() })
			sybil := map[peer.ID]bool{}
			for _, p := range syb.IDs() {
				sybil[p] = true
			}
			if !c.oneConnection {
				// The registry takes at most MaxPerAddr identities of an
				// address, and refuses the others (crowded): every
				// sybil is answered, at most MaxPerAddr per superpeer
				// are taken.
				waitFor(t, "every sybil to be answered by a superpeer", func() bool { return syb.Answered() == n })
				if r := syb.Registered(); r > 2*node.DefaultMaxPerAddr {
					t.Errorf("%d of %d sybils from one address registered with the 2 superpeers, want at most %d each", r, n, node.DefaultMaxPerAddr)
				}
			}
			waitFor(t, "the superpeers on the backbone topic, where the sybils publish", func() bool { return len(syb.BackbonePeers()) > 0 })
			// Twenty evaluations of every node (four of its announce
			// intervals): each registered since the last sybil did, and
			// holds the whole flood in its view; and a sybil that a
			// roster held before its address was found crowded has left
			// the registrar's former entries too, which last the
			// membership's TTL (three announce intervals) after the
			// registrar moves to another superpeer (with ten
			// evaluations, two intervals, one node in one run of three
			// still held one). Until then a member's view may hold up to
			// MaxPerAddr of the sybils, which count as any MaxPerAddr
			// peers joining would (overlay/node's admit.go).
			evaluations := func(n int) func() bool {
				start := make([]uint64, len(nodes))
				for i, nd := range nodes {
					start[i] = nd.State().Evaluations
				}
				return func() bool {
					for i, nd := range nodes {
						if nd.State().Evaluations < start[i]+uint64(n) {
							return false
						}
					}
					return true
				}
			}
			waitFor(t, "twenty evaluations of every node with the sybils registered", evaluations(20))
			began := time.Now()
			sampled := evaluations(10)
			samples, maxK, member, superpeer := 0, k0, 0, 0
			waitFor(t, "ten evaluations of every node under the sybils", func() bool {
				samples++
				for i, nd := range nodes {
					st := nd.State()
					maxK = max(maxK, st.K)
					if sybil[st.Superpeer.ID] {
						superpeer++
					}
					if c := countIf(st.Members, func(p peer.ID) bool { return sybil[p] }); c > 0 {
						if member++; member <= 5 {
							conns := countIf(nd.Host().Network().Peers(), func(p peer.ID) bool { return sybil[p] })
							t.Logf("sample %d (%v in): node %d (%s, superpeer %s, k %d) has %d sybils among its %d members; connected to %d sybils",
								samples, time.Since(began).Round(time.Millisecond), i, st.Role, st.Superpeer.ID.ShortString(), st.K, c, len(st.Members), conns)
						}
					}
					for _, o := range nodes {
						if slices.Contains(nd.Banned(), o.ID()) {
							t.Fatalf("node %d banned the honest %s", i, o.ID())
						}
					}
				}
				return sampled()
			})
			t.Logf("%d samples; k %d before, at most %d; %d of %d sybils registered, %d superpeers on the backbone",
				samples, k0, maxK, syb.Registered(), n, len(syb.BackbonePeers()))
			if member > 0 || superpeer > 0 {
				t.Errorf("a sybil was in a node's cluster in %d node samples, and its superpeer in %d, of %d", member, superpeer, samples*len(nodes))
			}
			if maxK > k0+1 {
				t.Errorf("k went from %d to %d under the sybils, want at most %d", k0, maxK, k0+1)
			}
		})
	}
}

func countIf(ps []peer.ID, f func(peer.ID) bool) int {
	n := 0
	for _, p := range ps {
		if f(p) {
			n++
		}
	}
	return n
}
