package overlay

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/testnet/attack"
)

// The memory budget (issue 19, finding 6): an attacker on each of the
// filed vectors, against a node with the least budget, MinMemoryBudget
// (128 MiB). The bound asserted is on the growth of the test process's
// heap at its peak during the attack: half the budget, 64 MiB, against
// 128 MiB or more that each attack took before (the numbers are in each
// test), and what the node accounts and refuses.

const testBudget = MinMemoryBudget

// heapWatch samples the process's heap in use until stop.
type heapWatch struct {
	base, peak uint64
	mu         sync.Mutex
	stop, done chan struct{}
	// service is the peak of the node's service memory (rcmgr), when n
	// is set.
	service int64
}

func watchHeap(n *Node) *heapWatch {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w := &heapWatch{base: m.HeapInuse, peak: m.HeapInuse, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			var svc int64
			if n != nil {
				_ = n.Host().Network().ResourceManager().ViewService(serviceName, func(s network.ServiceScope) error {
					svc = s.Stat().Memory
					return nil
				})
			}
			w.mu.Lock()
			w.peak = max(w.peak, m.HeapInuse)
			w.service = max(w.service, svc)
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// grown is the peak growth of the heap so far.
func (w *heapWatch) grown() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak - w.base
}

func (w *heapWatch) end() {
	close(w.stop)
	<-w.done
}

// hosts are n attacker hosts (fresh identities), set up by each of
// setup, then connected to p. A connection refused before its handshake
// (p's penalty on the address of the peers it banned: loopback's) is
// retried.
func hosts(t *testing.T, n int, p *Node, setup ...func(host.Host)) []host.Host {
	t.Helper()
	hs := make([]host.Host, n)
	for i := range hs {
		hs[i] = plainHost(t)
		for _, f := range setup {
			f(hs[i])
		}
		hs[i].Peerstore().AddAddrs(p.ID(), p.Host().Addrs(), time.Hour)
		ctx := network.WithForceDirectDial(context.Background(), "test")
		waitFor(t, "an attacker to connect", func() bool {
			_, err := hs[i].Network().DialPeer(ctx, p.ID())
			return err == nil
		})
	}
	return hs
}

// waitOr is waitFor that also ends when the heap has grown past the
// bound: the attack has won, and the assertions after it say so.
func waitOr(t *testing.T, w *heapWatch, bound uint64, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, func() bool { return cond() || w.grown() > bound })
}

func budgetNode(t *testing.T, opts ...Option) *Node {
	t.Helper()
	keys := keysByDistance(t, 1)
	return oneCluster(t, keys[0], append([]Option{WithReachability(ReachabilityPublic), WithMemoryBudget(testBudget)}, opts...)...)
}

// TestMemoryDHTStall: streams on the overlay's DHT protocol that announce
// a 4 MiB message and stall. kad-dht allocated the 4 MiB before reading
// it: 2 attackers' 32 streams each took 256 MiB of heap. Now a message
// above maxDHTMessage is refused before kad-dht reads its length, a
// strike each: the attackers are banned at their fifth.
func TestMemoryDHTStall(t *testing.T) {
	a := budgetNode(t)
	hs := hosts(t, 2, a)
	w := watchHeap(nil)
	defer w.end()
	stalled := attack.StallDHT(context.Background(), hs, a.ID(), "default", 32)
	defer stalled.Close()
	const bound = testBudget / 2
	waitOr(t, w, bound, "a to ban the attackers", func() bool { return a.guard.Banned(hs[0].ID()) && a.guard.Banned(hs[1].ID()) })
	if g := w.grown(); g > bound {
		t.Fatalf("the heap grew by %d MiB under %d stalled DHT streams, bound %d MiB", g>>20, stalled.Opened, bound>>20)
	}
	if r := a.Status().Refused["dht"]; r["size"] < 2*banStrikes {
		t.Errorf("a refused %v DHT messages, want at least %d oversized", r, 2*banStrikes)
	}
	t.Logf("heap grew by %.1f MiB at most; %d streams opened, %d refused", float64(w.grown())/(1<<20), stalled.Opened, stalled.Failed)
}

// TestMemoryElection: election messages from strangers. Large valid
// messages from no member (classic/pb's 190 KiB of IDs) were read whole
// and dropped, no strike; streams that announced 256 KiB and stalled
// held 256 KiB each until their deadline: 16 fresh identities' 32 each,
// 128 MiB. Now an election frame above maxElectionFrame is refused
// before it is allocated, a strike; and what is within it is reserved in
// the service's memory, which refuses (reason "limit") past B/8.
func TestMemoryElection(t *testing.T) {
	c := budgetNode(t, WithElection("bully", false))
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("c refused %v", c.Status().Refused)
		}
	})

	big := hosts(t, 1, c)
	attack.LargeElections(ctx, big, c.ID(), "default", 8, 190<<10)
	waitFor(t, "c to ban the sender of large messages", func() bool { return c.guard.Banned(big[0].ID()) })

	hs := hosts(t, 16, c)
	w := watchHeap(c)
	defer w.end()
	stalled := attack.StallElection(ctx, hs, c.ID(), "default", 32)
	defer stalled.Close()
	const bound = testBudget / 2
	// Each is banned at its fifth oversized message, or has its streams
	// refused: by the resource manager (the budget's system memory holds
	// 256 streams' windows) or after a ban.
	waitOr(t, w, bound, "c to refuse the fresh identities' streams", func() bool {
		for _, h := range hs {
			if !c.guard.Banned(h.ID()) && openStreams(c, h.ID()) > 0 {
				return false
			}
		}
		return true
	})
	if g := w.grown(); g > bound {
		t.Fatalf("the heap grew by %d MiB under %d stalled election streams, bound %d MiB", g>>20, stalled.Opened, bound>>20)
	}
	t.Logf("stalled at 256 KiB: heap grew by %.1f MiB at most; %d streams opened", float64(w.grown())/(1<<20), stalled.Opened)

	// Within the frame's limit: one fresh identity's 40 streams that
	// announce a full frame each hold it, reserved, up to the service's
	// per-peer limits; the rest are refused, counted, no strike.
	one := hosts(t, 1, c)
	held := attack.Stall(ctx, one, c.ID(), attack.Protocol("default", "election"), 40, attack.Announce(maxElectionFrame, 1<<10))
	defer held.Close()
	waitFor(t, "c to refuse the streams over its limits", func() bool { return c.Status().Refused["election"]["limit"] > 0 })
	w.mu.Lock()
	svc := w.service
	w.mu.Unlock()
	if svc > testBudget/8 {
		t.Errorf("the service's memory reached %d bytes, limit %d", svc, testBudget/8)
	}
	if r := c.Status().Refused["election"]; r["size"] < 2*banStrikes {
		t.Errorf("c refused %v election messages, want at least %d oversized", r, 2*banStrikes)
	}
}

// TestMemorySubscriptions: GossipSub subscriptions to made-up topics.
// GossipSub kept every peer's subscription to any topic: 20 RPCs of 2000
// made 40000 topics with one peer each. Now the node's router tracks the
// overlay's topics only, and an RPC of more than maxSubscriptions
// subscriptions is refused whole, a strike.
func TestMemorySubscriptions(t *testing.T) {
	b := budgetNode(t)
	// A node starts GossipSub when it first serves its cluster (an
	// ordinary peer runs none, and so has no subscriptions to flood);
	// this one is alone and serves soon, but the attack needs the router
	// now.
	ps, err := b.pubSub()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hs := hosts(t, 2, b, attack.SpeakGossipSub)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("b refused %v; its GossipSub peers %v, attackers %v", b.Status().Refused, ps.ListPeers(""), []peer.ID{hs[0].ID(), hs[1].ID()})
		}
	})
	w := watchHeap(nil)
	defer w.end()
	// Many per RPC from one: refused whole, and a ban at the fifth.
	many, _ := attack.SubscriptionFlood(ctx, hs[0], b.ID(), 20, 2000)
	defer many.Close()
	// Few per RPC from the other: within the limit, but none is one of
	// the overlay's topics; its last RPC subscribes to the membership
	// topic, which shows when b has read them all.
	members := gossip.MembershipTopic("default")
	few, err := attack.SubscriptionFlood(ctx, hs[1], b.ID(), 200, maxSubscriptions, members)
	if err != nil {
		t.Fatal(err)
	}
	defer few.Close()
	const bound = testBudget / 2
	waitOr(t, w, bound, "b to ban the first", func() bool {
		return b.guard.Banned(hs[0].ID()) || len(ps.ListPeers("/attack/19/1999")) > 0
	})
	waitOr(t, w, bound, "b to read the second's RPCs", func() bool { return slices.Contains(ps.ListPeers(members), hs[1].ID()) })
	for _, topic := range []string{"/attack/0/0", "/attack/19/1999", "/attack/199/0", "/attack/199/63"} {
		if p := ps.ListPeers(topic); len(p) > 0 {
			t.Errorf("b tracks %v on the made-up topic %s", p, topic)
		}
	}
	if !b.guard.Banned(hs[0].ID()) {
		t.Errorf("b did not ban the peer of 2000 subscriptions an RPC; refused %v", b.Status().Refused)
	}
	if b.guard.Banned(hs[1].ID()) {
		t.Error("b banned the peer of few subscriptions an RPC")
	}
	if g := w.grown(); g > bound {
		t.Fatalf("the heap grew by %d MiB, bound %d MiB", g>>20, bound>>20)
	}
}

// handshakes is a connection gater that counts the handshakes made with
// one peer (InterceptSecured), and lets everything through.
type handshakes struct {
	mu    sync.Mutex
	of    peer.ID
	count int
}

func (h *handshakes) InterceptPeerDial(peer.ID) bool               { return true }
func (h *handshakes) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }
func (h *handshakes) InterceptAccept(network.ConnMultiaddrs) bool  { return true }
func (h *handshakes) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) {
	return true, 0
}
func (h *handshakes) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p == h.of {
		h.count++
	}
	return true
}

func (h *handshakes) n() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// openStreams counts the streams n has open with p.
func openStreams(n *Node, p peer.ID) int {
	k := 0
	for _, c := range n.Host().Network().ConnsToPeer(p) {
		k += len(c.GetStreams())
	}
	return k
}

// TestMemoryDHTWithinLimit: stalled DHT streams whose messages are within
// maxDHTMessage (60 KiB announced, 1 KiB sent). Each holds its buffer,
// reserved in the DHT protocol's scope, until frameDeadline; a peer holds
// at most 16 such streams (the rest are refused by the resource manager),
// so 40 from one peer hold 16 × 60 KiB. Before, kad-dht kept all 40, and
// their buffers were nobody's account.
func TestMemoryDHTWithinLimit(t *testing.T) {
	a := budgetNode(t)
	hs := hosts(t, 1, a)
	stalled := attack.Stall(context.Background(), hs, a.ID(), attack.DHTProtocol("default"), 40, attack.Announce(60<<10, 1<<10))
	defer stalled.Close()
	var st network.ScopeStat
	view := func() network.ScopeStat {
		_ = a.Host().Network().ResourceManager().ViewProtocol(dhtProtocol("default"), func(s network.ProtocolScope) error {
			st = s.Stat()
			return nil
		})
		return st
	}
	waitFor(t, "a to hold the stalled streams' buffers", func() bool {
		st := view()
		return st.Memory >= 16*(60<<10) || st.NumStreamsInbound > 16
	})
	// rcmgr's SetProtocol reserves a stream in the protocol's scope
	// before the protocol-peer scope refuses it (go-libp2p's rcmgr.go),
	// so one read can count a refused stream for that instant (under make
	// test's race stage once 17 streams and 16 buffers); a stream held
	// over the limit is in every read. The least of ten reads counts.
	least := view()
	for range 10 {
		time.Sleep(10 * time.Millisecond)
		s := view()
		least.NumStreamsInbound, least.Memory = min(least.NumStreamsInbound, s.NumStreamsInbound), min(least.Memory, s.Memory)
	}
	if least.NumStreamsInbound > 16 || least.Memory > 16*(60<<10) {
		t.Errorf("a's DHT scope holds %d inbound streams and %d bytes, want at most 16 and %d", least.NumStreamsInbound, least.Memory, 16*(60<<10))
	}
	if a.guard.Banned(hs[0].ID()) {
		t.Error("a banned a peer whose DHT messages were within the limit")
	}
}
