package overlay

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/testnet/attack"
)

// Issue 19, findings 7 and 9, on real hosts over loopback: honest nodes
// each on its own loopback address (127.1.0.x), attackers on 127.0.0.1.

// honestLoopback starts n nodes, node i on 127.1.0.(i+2) over TCP and
// QUIC, bootstrapped from node 0, closed with the test, and waits until
// each counts all n.
func honestLoopback(t *testing.T, n int, opts ...Option) []*Node {
	t.Helper()
	var nodes []*Node
	for i := range n {
		ip := fmt.Sprintf("127.1.0.%d", i+2)
		o := append([]Option{
			WithListenAddrs(ma.StringCast("/ip4/"+ip+"/tcp/0"), ma.StringCast("/ip4/"+ip+"/udp/0/quic-v1")),
			WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(quiet),
		}, opts...)
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
	waitFor(t, fmt.Sprintf("the %d honest nodes to count each other", n), func() bool {
		for _, nd := range nodes {
			if st := nd.State(); st.Size.N != n || st.Superpeer.ID == "" {
				return false
			}
		}
		return true
	})
	return nodes
}

func infos(nodes []*Node) []peer.AddrInfo {
	var out []peer.AddrInfo
	for _, nd := range nodes {
		out = append(out, peer.AddrInfo{ID: nd.ID(), Addrs: nd.Host().Addrs()})
	}
	return out
}

// registeringSybils is issue 19's finding 7 on the register protocol:
// many identities from one address, each a bare host of its own (TCP, no
// protocols but libp2p's) connected to every honest node, each
// registering itself with a valid sealed announcement that claims a
// superpeer, with every superpeer of the swarm, every interval. (An
// identity registers on a stream of its own, whose peer is
// authenticated: one host cannot register the others' records, which is
// a bad record and a strike (TestHostilePeer), so the flood needs a
// connection per identity.) Each registers with every node it is
// connected to, as one that does not know the superpeers yet does: those
// that serve a cluster answer, the others name their superpeer.
type registeringSybils struct {
	hosts  []host.Host
	ids    []peer.ID
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startRegisteringSybils(t *testing.T, ctx context.Context, n int, listen string, nodes []*Node, interval time.Duration) *registeringSybils {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	s := &registeringSybils{cancel: cancel}
	t.Cleanup(s.close)
	proto := registerProtocol("default")
	for range n {
		key, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/"+listen+"/tcp/0"),
			libp2p.Transport(tcp.NewTCPTransport), libp2p.ResourceManager(&network.NullResourceManager{}), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		s.hosts = append(s.hosts, h)
		s.ids = append(s.ids, h.ID())
		for _, nd := range nodes {
			for {
				err := h.Connect(ctx, peer.AddrInfo{ID: nd.ID(), Addrs: nd.Host().Addrs()})
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("sybil %s to %s: %v", h.ID(), nd.ID(), err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		s.wg.Go(func() {
			sealed := map[int][]byte{} // by k: the same record, so that a repeat is a refresh
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				for _, sp := range nodes {
					k := sp.State().K
					if sealed[k] == nil {
						a := gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), Superpeer: true, K: k,
							ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(k), Seq: uint64(time.Now().UnixNano())}
						if sealed[k], err = gossip.SealAnnouncement(a, key); err != nil {
							return
						}
					}
					rctx, cancel := context.WithTimeout(runCtx, 5*time.Second)
					if st, err := h.NewStream(rctx, sp.ID(), proto); err == nil {
						_ = st.SetDeadline(time.Now().Add(5 * time.Second))
						if writeFrame(st, frameRegister, appendRequest(nil, 0, 0, sealed[k])) == nil {
							_, _ = readStreamFrame(st, frameRoster)
						}
						_ = st.Close()
					}
					cancel()
				}
				select {
				case <-runCtx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	return s
}

func (s *registeringSybils) close() {
	s.cancel()
	s.wg.Wait()
	for _, h := range s.hosts {
		_ = h.Close()
	}
	s.hosts = nil
}

// TestSybilFlood: 200 identities from 127.0.0.1, each a host of its own
// with a valid signed announcement that claims a superpeer, register
// with the superpeers of a swarm of 4 with --fraction 0.5 (the filed
// attack, on the global membership topic: the estimate went from 4 to
// 204, k from 1 to 7, and with --quorum clusters went without a
// superpeer for 35 s). Under the cluster-scoped membership the flood
// goes where membership now lives, the register protocol, and the
// identities-per-address rule (MaxPerAddr) holds there: a superpeer's
// registry counts 127.0.0.1 as crowded, refuses its identities
// (regCrowded) and holds none of them, and remembers at most
// MaxPerAddr+1 of them; a node that starts serving (k moves, a superpeer
// changes) counted the flood before, and takes none of it either. Sampled over ten evaluations of every node once
// each superpeer has refused 600 of the sybils' registrations: k moves
// by at most one, no sybil is a superpeer, a cluster member or in a
// superpeer's roster, every node names a superpeer within one failover,
// and no honest peer is banned.
//
// The filed attack's "one-connection" variant (one host relaying every
// identity's announcement on the membership topic) has no counterpart in
// DHT mode: a registration is made on a stream of the identity's own, so
// one host can register only itself, and another identity's record is a
// bad record and a strike (TestHostilePeer).
func TestSybilFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 200 attacking hosts")
	}
	for _, c := range []struct {
		name   string
		quorum bool
	}{{"one-each", false}, {"one-each-quorum", true}} {
		t.Run(c.name, func(t *testing.T) {
			opts := []Option{WithTarget(dhtselect.Target{Fraction: 0.5}), WithIntervals(time.Second, 200*time.Millisecond)}
			if c.quorum {
				opts = append(opts, WithElection("bully", true))
			}
			nodes := honestLoopback(t, 4, opts...)
			k0 := nodes[0].State().K
			// The loopback addresses are what the nodes see of each
			// other, QUIC included (quicOptions).
			for _, nd := range nodes {
				for p, g := range nd.connAddrs() {
					if i := slices.IndexFunc(nodes, func(o *Node) bool { return o.ID() == p }); i >= 0 && g != fmt.Sprintf("127.1.0.%d", i+2) {
						t.Errorf("node %s sees node %d from %s", nd.ID().ShortString(), i, g)
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // against hangs
			defer cancel()
			crowded := func(nd *Node) uint64 {
				return nd.cm.reg.stats().Answered[regCrowded]
			}
			refused := make([]uint64, len(nodes))
			for i, nd := range nodes {
				refused[i] = crowded(nd)
			}
			syb := startRegisteringSybils(t, ctx, 200, "127.0.0.1", nodes, time.Second)
			sybil := map[peer.ID]bool{}
			for _, p := range syb.ids {
				sybil[p] = true
			}
			waitFor(t, "every superpeer to refuse 600 of the sybils' registrations", func() bool {
				n := 0
				for i, nd := range nodes {
					if nd.State().Role != RoleSuperpeer {
						continue
					}
					if crowded(nd) < refused[i]+600 {
						return false
					}
					n++
				}
				return n > 0
			})
			start := make([]uint64, len(nodes))
			for i, nd := range nodes {
				start[i] = nd.State().Evaluations
			}
			samples, maxK, maxN, sybilSuperpeer, sybilMember, sybilRoster, maxRemembered := 0, 0, 0, 0, 0, 0, 0
			// The longest time each node went without a superpeer, and
			// one failover: the election's failure detection, then a
			// re-evaluation and its lookup (whose queries wait the
			// detection time at most; see queryCloser).
			lost, longest := make([]time.Time, len(nodes)), make([]time.Duration, len(nodes))
			nodes[0].mu.RLock()
			d := nodes[0].detection
			nodes[0].mu.RUnlock()
			failover := nodes[0].cfg.ReevaluateInterval + nodes[0].cfg.QueryTimeout
			if d > 0 {
				failover = d + nodes[0].cfg.ReevaluateInterval + min(d, nodes[0].cfg.QueryTimeout)
			}
			waitFor(t, "ten evaluations of every node under the flood", func() bool {
				samples++
				done := true
				for i, nd := range nodes {
					st := nd.State()
					maxK, maxN = max(maxK, st.K), max(maxN, st.Size.N)
					if sybil[st.Superpeer.ID] {
						sybilSuperpeer++
					}
					switch now := time.Now(); {
					case st.Superpeer.ID != "":
						lost[i] = time.Time{}
					case lost[i].IsZero():
						lost[i] = now
					default:
						longest[i] = max(longest[i], now.Sub(lost[i]))
					}
					if slices.ContainsFunc(st.Members, func(p peer.ID) bool { return sybil[p] }) {
						sybilMember++
					}
					if slices.ContainsFunc(nd.members.Entries(), func(e gossip.Entry) bool { return sybil[e.ID] }) {
						sybilRoster++
					}
					reg := nd.cm.reg
					reg.mu.Lock()
					maxRemembered = max(maxRemembered, reg.crowd.Remembered("127.0.0.1"))
					reg.mu.Unlock()
					for _, o := range nodes {
						if nd.guard.Banned(o.ID()) {
							t.Fatalf("node %d banned the honest %s", i, o.ID())
						}
					}
					done = done && st.Evaluations >= start[i]+10
				}
				return done
			})
			t.Logf("%d samples: k %d before, at most %d under the flood; estimate at most %d; longest without a superpeer %v (one failover %v); at most %d sybils remembered by a registry",
				samples, k0, maxK, maxN, slices.Max(longest), failover, maxRemembered)
			if sybilSuperpeer > 0 || sybilMember > 0 || sybilRoster > 0 {
				t.Errorf("a sybil was a node's superpeer in %d node samples, in its cluster in %d and in its roster in %d, of %d",
					sybilSuperpeer, sybilMember, sybilRoster, samples*len(nodes))
			}
			if maxRemembered > nodes[0].cfg.MaxPerAddr+1 {
				t.Errorf("a registry remembered %d identities of 127.0.0.1, want at most MaxPerAddr+1 = %d", maxRemembered, nodes[0].cfg.MaxPerAddr+1)
			}
			if slices.Max(longest) > failover {
				t.Errorf("a node went %v without a superpeer, longer than one failover (%v)", slices.Max(longest), failover)
			}
			if maxK > k0+1 {
				t.Errorf("k went from %d to %d under the flood, want at most %d", k0, maxK, k0+1)
			}
		})
	}
}

// queryFailures is a slog handler that counts, by peer, the lookup
// queries that failed ("lookup: query failed").
type queryFailures struct {
	mu     sync.Mutex
	byPeer map[string]int
}

func (c *queryFailures) Enabled(context.Context, slog.Level) bool { return true }
func (c *queryFailures) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *queryFailures) WithGroup(string) slog.Handler            { return c }
func (c *queryFailures) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "lookup: query failed" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "peer" {
			c.mu.Lock()
			c.byPeer[a.Value.String()]++
			c.mu.Unlock()
		}
		return true
	})
	return nil
}

func (c *queryFailures) of(p peer.ID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byPeer[p.String()]
}

// TestDHTOnlyPeerNotCounted (finding 9): a host that speaks only the
// overlay's DHT prefix joins a swarm of 3; over ten evaluations of each
// node it counts in no size estimate, no lookup asks it (the filed
// symptom: every lookup did, and failed with "protocols not supported"),
// and it is in no node's routing table (table.go: it entered them all,
// until the tables took only peers that speak the closer protocol).
func TestDHTOnlyPeerNotCounted(t *testing.T) {
	failed := &queryFailures{byPeer: map[string]int{}}
	nodes := honestLoopback(t, 3, WithTarget(dhtselect.Target{Superpeers: 2}), WithLogger(slog.New(failed)))
	kad, err := attack.StartDHTOnly(context.Background(), "default", "127.0.0.1", infos(nodes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kad.Close() })
	kadProto := protocol.ID("/superpeer/default/kad/1.0.0")
	waitFor(t, "every node to have identified the DHT-only host", func() bool {
		for _, nd := range nodes {
			if ps, err := nd.Host().Peerstore().SupportsProtocols(kad.Host.ID(), kadProto); err != nil || len(ps) == 0 {
				return false
			}
		}
		return true
	})
	start := make([]uint64, len(nodes))
	for i, nd := range nodes {
		start[i] = nd.State().Lookups
	}
	wrong := 0
	waitFor(t, "ten lookups of every node", func() bool {
		done := true
		for i, nd := range nodes {
			st := nd.State()
			if st.Size.N != 3 {
				if wrong++; wrong == 1 {
					t.Errorf("node %d estimates %d (%s) with the DHT-only host in its table, want 3", i, st.Size.N, st.Size.Source)
				}
			}
			done = done && st.Lookups >= start[i]+10
		}
		return done
	})
	if n := failed.of(kad.Host.ID()); n > 0 {
		t.Errorf("lookups asked the DHT-only host %d times", n)
	}
	for i, nd := range nodes {
		if nd.dht.RoutingTable().Find(kad.Host.ID()) != "" {
			t.Errorf("node %d: the DHT-only host is in its routing table", i)
		}
	}
}
