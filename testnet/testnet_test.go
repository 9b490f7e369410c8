package testnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/internal/bubble"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
)

// convergeBound is a bound against hangs, generous for a loaded two-core
// machine; it is not a performance assertion.
const convergeBound = 3 * time.Minute

func startNet(t *testing.T, cfg Config) *Net {
	t.Helper()
	tn, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tn.Close() })
	return tn
}

// startConverged starts a testnet in a testing/synctest bubble (call it
// inside synctest.Test), closed when the test ends, and waits until it
// has converged (five virtual minutes at most).
func startConverged(t *testing.T, cfg Config) *Net {
	t.Helper()
	tn, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := tn.WaitConverged(ctx, tn.Started()); err != nil {
		t.Fatal(err)
	}
	return tn
}

func waitConverged(t *testing.T, tn *Net, since time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), convergeBound)
	defer cancel()
	d, err := tn.WaitConverged(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// 32 real libp2p hosts with the real kad-dht and GossipSub: every peer's
// view (k, role, cluster key, superpeer, members) equals the brute-force
// answer computed from the peer IDs alone. Then the superpeer of a cluster
// stops abruptly, and its cluster converges on the new closest peer.
func TestConvergesAndRepairs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 32 libp2p nodes")
	}
	tn := startNet(t, Config{N: 32, Target: dhtselect.Target{Superpeers: 4}, Seed: 1})
	d := waitConverged(t, tn, tn.Started())
	t.Logf("32 nodes converged in %v", d)

	k, as := tn.Expected()
	if k != 2 {
		t.Fatalf("k = %d, want 2 for S = 4", k)
	}
	clusters := dhtselect.Clusters(as, k)
	// Pick a cluster with at least two members, so it has a next superpeer.
	var victim dhtselect.Cluster
	for _, c := range clusters {
		if len(c.Members) >= 2 {
			victim = c
			break
		}
	}
	if victim.Superpeer == "" {
		t.Fatal("no cluster with two members; choose another seed")
	}
	next := victim.Members[1]
	if err := tn.Stop(victim.Superpeer); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	d = waitConverged(t, tn, stopped)
	t.Logf("cluster %s repaired in %v", victim.Prefix, d)
	for _, n := range tn.Nodes() {
		s := n.State()
		if s.ClusterKey == victim.Key && s.Superpeer.ID != next {
			t.Fatalf("%s names superpeer %s, want the new closest %s", n.ID(), s.Superpeer.ID, next)
		}
		if n.ID() == next && s.Role != overlay.RoleSuperpeer {
			t.Fatalf("the new closest peer %s has role %s", next, s.Role)
		}
	}
	r := tn.Report()
	if !r.Converged && len(r.Mismatches) > 0 {
		t.Fatalf("report shows mismatches: %v", r.Mismatches)
	}
}

// A network of one peer is its own superpeer, with S = 1 and k = 0.
func TestSinglePeer(t *testing.T) {
	tn := startNet(t, Config{N: 1, Target: dhtselect.Target{Fraction: 0.1}})
	waitConverged(t, tn, tn.Started())
	s := tn.Nodes()[0].State()
	if s.Role != overlay.RoleSuperpeer || s.K != 0 || s.Size.N != 1 {
		t.Fatalf("single peer: %+v", s)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{N: 0, Target: dhtselect.Target{Superpeers: 1}},
		{N: MaxNodes + 1, Target: dhtselect.Target{Superpeers: 1}},
		{N: 4, Target: dhtselect.Target{Superpeers: 0}},
		{N: 4, Target: dhtselect.Target{Fraction: 1.5}},
		{N: 4, Target: dhtselect.Target{Superpeers: 1}, Strategy: "nope"},
	} {
		if _, err := Start(context.Background(), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("Start(%+v) = %v, want ErrConfig", cfg, err)
		}
	}
}

// A testnet with a latency matrix: the links delay as the matrix says (a
// libp2p ping between two nodes takes at least their RTT), and the report
// gives each node its row index and the matrix RTT to its superpeer.
func TestLatencyMatrix(t *testing.T) {
	// Six hosts; hosts i and j are 10·(i+j) ms apart, except that the pair
	// {1, 4} is missing; it is filled in with the shortest two-hop path,
	// through host 0: 10·1 + 10·4 = 50 ms.
	var b strings.Builder
	for i := range 6 {
		for j := range 6 {
			v := 10 * (i + j)
			switch {
			case i == j:
				v = 0
			case i+j == 5 && i*j == 4:
				v = -1
			}
			fmt.Fprintf(&b, "%d\t", v)
		}
		b.WriteString("\n")
	}
	m, err := latency.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	tn := startNet(t, Config{N: 5, Target: dhtselect.Target{Superpeers: 2}, Seed: 3, Latency: m})
	waitConverged(t, tn, tn.Started())

	nodes := tn.Nodes()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pair := range [][2]int{{0, 3}, {2, 4}, {1, 4}} {
		a, c := nodes[pair[0]].Host(), nodes[pair[1]].Host()
		ping.NewPingService(c)
		res := <-ping.Ping(ctx, a, c.ID())
		if res.Error != nil {
			t.Fatalf("ping %v: %v", pair, res.Error)
		}
		want := 10 * time.Duration(pair[0]+pair[1]) * time.Millisecond
		if pair == [2]int{1, 4} {
			want = 50 * time.Millisecond
		}
		if res.RTT < want {
			t.Errorf("ping %d→%d took %v, less than the matrix's %v", pair[0], pair[1], res.RTT, want)
		}
	}

	r := tn.Report()
	var ordinary []float64
	for i, nr := range r.Nodes {
		if nr.Index != i {
			t.Errorf("node %d reports index %d", i, nr.Index)
		}
		sp := slices.IndexFunc(r.Nodes, func(o NodeReport) bool { return o.ID == nr.Superpeer })
		if sp < 0 || nr.RTTToSuperpeerMS == nil {
			t.Fatalf("node %d: superpeer %s not found or no RTT", i, nr.Superpeer)
		}
		rtt, _ := m.RTT(i, sp)
		if sp == 1 && i == 4 || sp == 4 && i == 1 {
			rtt = 50 * time.Millisecond
		}
		if got := *nr.RTTToSuperpeerMS; got != float64(rtt.Milliseconds()) {
			t.Errorf("node %d: rtt_to_superpeer_ms %v, want %v", i, got, rtt.Milliseconds())
		}
		if sp != i {
			ordinary = append(ordinary, *nr.RTTToSuperpeerMS)
		}
	}
	mean := 0.0
	for _, v := range ordinary {
		mean += v / float64(len(ordinary))
	}
	if r.MeanRTTToSuperpeerMS == nil || math.Abs(*r.MeanRTTToSuperpeerMS-mean) > 1e-9 {
		t.Errorf("mean_rtt_to_superpeer_ms %v, want %v", r.MeanRTTToSuperpeerMS, mean)
	}
	if r.P95RTTToSuperpeerMS == nil || *r.P95RTTToSuperpeerMS != slices.Max(ordinary) {
		t.Errorf("p95_rtt_to_superpeer_ms %v, want the largest of %v (fewer than 20 values)", r.P95RTTToSuperpeerMS, ordinary)
	}
	sizes := 0
	for _, c := range r.Clusters {
		sizes = max(sizes, len(c.Members))
	}
	if r.MaxClusterSize != sizes || sizes == 0 {
		t.Errorf("max_cluster_size %d, want %d", r.MaxClusterSize, sizes)
	}
}

func TestLatencyMatrixTooSmall(t *testing.T) {
	_, err := Start(context.Background(), Config{N: 5, Target: dhtselect.Target{Superpeers: 2}, Latency: latency.Constant(4, time.Millisecond)})
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("error %v, want ErrConfig", err)
	}
}

// planetLab loads the PlanetLab matrix of the repository's shared data.
func planetLab(t *testing.T) *latency.Matrix {
	t.Helper()
	m, err := latency.Load("../testdata/planetlab490/planetlab490_median18_ms.txt")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The geometric strategy on 16 real libp2p nodes whose links have the RTTs
// of the first 16 PlanetLab hosts: the tokens settle on exactly 3
// superpeers, every other node is attached to one of them, which lists it.
// Then a superpeer stops abruptly: its token is re-homed, and the overlay
// settles again with 3 superpeers. Intervals are short (pings every 100 ms,
// token rounds every 250 ms) to keep the test brief.
func TestGeometricConvergesAndRepairs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes")
	}
	bubble.Test(t, func(t *testing.T) {
		tn := startNet(t, Config{
			N: 16, Strategy: StrategyGeometric, Target: dhtselect.Target{Superpeers: 3}, Seed: 1,
			Latency: planetLab(t), AnnounceInterval: time.Second,
			PingInterval: 100 * time.Millisecond, TokenInterval: 250 * time.Millisecond,
		})
		d := waitConverged(t, tn, tn.Started())
		r := tn.Report()
		t.Logf("16 nodes settled in %v: mean RTT to superpeer %.1f ms, largest cluster %d",
			d, *r.MeanRTTToSuperpeerMS, r.MaxClusterSize)
		var victim peer.ID
		supers := 0
		for _, n := range tn.Nodes() {
			if n.State().Role == overlay.RoleSuperpeer {
				supers++
				victim = n.ID()
			}
		}
		if supers != 3 {
			t.Fatalf("%d superpeers after convergence, want 3", supers)
		}
		checkGeoSizes(t, tn, 16)
		stopped := time.Now() // Stop takes virtual time: it closes the host
		if err := tn.Stop(victim); err != nil {
			t.Fatal(err)
		}
		d = waitConverged(t, tn, stopped)
		t.Logf("settled again %v after superpeer %s stopped", d, victim.ShortString())
		for _, n := range tn.Nodes() {
			if s := n.State(); s.Superpeer.ID == victim {
				t.Fatalf("%s still names the stopped superpeer", n.ID())
			}
		}
		checkGeoSizes(t, tn, 15)
	})
}

// checkGeoSizes checks, three announce intervals on (the superpeers'
// reports and the members' renewals carry the loads by then), that every
// node of a settled geometric network estimates its size as n: a
// superpeer from the backbone, a member from its superpeer's yes.
func checkGeoSizes(t *testing.T, tn *Net, n int) {
	t.Helper()
	time.Sleep(3 * tn.cfg.AnnounceInterval)
	for _, nd := range tn.Nodes() {
		st := nd.State()
		want := dhtselect.Estimate{N: n, Source: node.SourceDigest}
		if st.Role == overlay.RoleSuperpeer {
			want.Source = dhtselect.SourceBackbone
		}
		if st.Size != want {
			t.Errorf("%s (%v): size estimate %+v, want %+v", nd.ID(), st.Role, st.Size, want)
		}
	}
}

// Traffic is counted on both ends of the streams the nodes' hosts open and
// serve, under each stream's protocol, and exactly: after convergence
// GossipSub, the DHT and the closer protocol have bytes counted; the counts
// keep rising while the nodes talk (every node republishes its
// announcement each AnnounceInterval); and a stream between two nodes'
// hosts that carries 5 bytes one way and 7 back counts 12 bytes, as 5
// sent and 7 received by the opener and the reverse by the other.
func TestTrafficCounted(t *testing.T) {
	tn := startNet(t, Config{N: 8, Target: dhtselect.Target{Superpeers: 2}, Seed: 3})
	waitConverged(t, tn, tn.Started())
	before := tn.Traffic().Bytes()
	// GossipSub is checked below, by its count growing: convergence does
	// not wait for gossip (8 nodes can converge on their routing tables'
	// estimate), and it failed here once with no gossip bytes yet.
	want := map[string]bool{"/superpeer/default/kad/": false, "/superpeer/default/closer/": false}
	for p, b := range before {
		for prefix := range want {
			if strings.HasPrefix(string(p), prefix) && b > 0 {
				want[prefix] = true
			}
		}
	}
	for prefix, seen := range want {
		if !seen {
			t.Errorf("no bytes counted for %s*; counted %v", prefix, before)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	gossip := func(m map[protocol.ID]uint64) (sum uint64) {
		for p, b := range m {
			if strings.HasPrefix(string(p), "/meshsub/") {
				sum += b
			}
		}
		return sum
	}
	deadline := time.Now().Add(convergeBound)
	for gossip(tn.Traffic().Bytes()) <= gossip(before) {
		if time.Now().After(deadline) {
			t.Fatalf("GossipSub's count stayed at %d bytes for %v, though the nodes announce every %v", gossip(before), convergeBound, tn.cfg.AnnounceInterval)
		}
		time.Sleep(20 * time.Millisecond)
	}

	const proto = protocol.ID("/superpeer/test/traffic/1.0.0")
	nodes := tn.Nodes()
	a, b := nodes[0].Host(), nodes[1].Host()
	served := make(chan struct{})
	b.SetStreamHandler(proto, func(s network.Stream) {
		defer close(served) // after the handler's Write returned, counted
		defer s.Close()
		if _, err := io.ReadFull(s, make([]byte, 5)); err == nil {
			_, _ = s.Write([]byte("seven!!"))
		}
	})
	defer b.RemoveStreamHandler(proto)
	ctx, cancel := context.WithTimeout(context.Background(), convergeBound)
	defer cancel()
	s, err := a.NewStream(ctx, b.ID(), proto)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("five!")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	select {
	case <-served:
	case <-ctx.Done():
		t.Fatal("the handler did not finish")
	}
	if got := tn.Traffic().Bytes()[proto]; got != 12 {
		t.Fatalf("a stream that carried 5 + 7 bytes counted %d (all counts: %v)", got, tn.Traffic().Bytes())
	}
	per := tn.Traffic().Nodes()
	for _, c := range []struct {
		who            string
		id             peer.ID
		sent, received uint64
	}{{"opener", a.ID(), 5, 7}, {"server", b.ID(), 7, 5}} {
		if got := per[c.id]; got.Sent[proto] != c.sent || got.Received[proto] != c.received {
			t.Errorf("the %s counted %d sent and %d received on the stream, want %d and %d", c.who, got.Sent[proto], got.Received[proto], c.sent, c.received)
		}
	}
}

// fakeMember is a Member with a fixed state, election and bans.
type fakeMember struct {
	id     peer.ID
	e      overlay.ElectionStats
	m      *overlay.MembershipStatus
	banned []peer.ID
}

func (f fakeMember) ID() peer.ID                                 { return f.id }
func (f fakeMember) State() overlay.State                        { return overlay.State{Self: f.id} }
func (f fakeMember) ElectionStats() overlay.ElectionStats        { return f.e }
func (f fakeMember) Banned() []peer.ID                           { return f.banned }
func (f fakeMember) MembershipStatus() *overlay.MembershipStatus { return f.m }

// A report's mismatch says what the node's election and lookup say, and
// whom it bans: a run that did not converge in CI prints only its report
// (TestProcsPartitionQuorum once left two members without a superpeer for
// six minutes, and its report could not tell why).
func TestElectionNote(t *testing.T) {
	a, b, c := peer.ID("a-peer"), peer.ID("b-peer"), peer.ID("c-peer")
	var tn Net
	got := tn.electionNote(fakeMember{id: a, e: overlay.ElectionStats{Algorithm: "bully", Lookup: b, Leader: c, Role: "candidate", Term: 7}, banned: []peer.ID{c}})
	want := fmt.Sprintf(" (lookup %s, election leader %s, candidate, term 7, bans %s)", b.ShortString(), c.ShortString(), c.ShortString())
	if got != want {
		t.Errorf("with an election: %q, want %q", got, want)
	}
	if got := tn.electionNote(fakeMember{id: a}); got != "" {
		t.Errorf("without an election or bans: %q, want nothing", got)
	}
	if got, want := tn.electionNote(fakeMember{id: a, banned: []peer.ID{b}}), fmt.Sprintf(" (bans %s)", b.ShortString()); got != want {
		t.Errorf("bans alone: %q, want %q", got, want)
	}
	m := &overlay.MembershipStatus{Registrar: "12D3KooWMPRaRU9u7ddt8Vv7pifbHkdFuS9k4yS8ocDDJ1jjDEaC", Roster: 5, Sent: map[string]uint64{"not_superpeer": 3}}
	want = ` (registrar <peer.ID 12*jjDEaC>, serving false, registry 0, roster 5, registrations sent map[not_superpeer:3], answered map[])`
	if got := tn.electionNote(fakeMember{id: a, m: m}); got != want {
		t.Errorf("with a membership: %q, want %q", got, want)
	}
	// The report's lines: its nodes are indexedNodes, whose methods are
	// a Member's alone; the note asks the node itself.
	lines := tn.mismatchLines([]indexedNode{{0, fakeMember{id: b}}, {1, fakeMember{id: a, m: m}}}, []Mismatch{{a, "superpeer none"}, {What: "a failure"}})
	if wantLines := []string{a.ShortString() + ": superpeer none" + want, "a failure"}; !slices.Equal(lines, wantLines) {
		t.Errorf("report lines %q, want %q", lines, wantLines)
	}
}
