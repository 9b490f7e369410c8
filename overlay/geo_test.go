package overlay

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/attack"
)

// Four nodes on mocknet, geometric strategy, two tokens, capacity one: two
// nodes become superpeers, and each of the other two attaches to a
// different one, because a superpeer refuses a second ordinary peer. The
// intervals are short; the test runs in -short (and with -race).
func TestGeometricCapacity(t *testing.T) {
	nodes := mocknetNodes(t, 4, func(int) []Option {
		return []Option{
			WithLogger(quiet), WithStrategy(StrategyGeometric),
			WithTarget(dhtselect.Target{Superpeers: 2}), WithIntervals(300*time.Millisecond, time.Second),
			WithGeometric(geometric.Config{Capacity: 1}, 50*time.Millisecond, 100*time.Millisecond),
		}
	})
	settled := func() bool {
		var supers, attached []peer.ID
		for _, n := range nodes {
			s := n.State()
			switch {
			case s.Role == RoleSuperpeer:
				if len(s.Members) > 2 {
					t.Fatalf("%s serves %d ordinary peers, capacity 1", n.ID(), len(s.Members)-1)
				}
				supers = append(supers, n.ID())
			case s.Superpeer.ID != "":
				attached = append(attached, s.Superpeer.ID)
			}
		}
		slices.Sort(supers)
		slices.Sort(attached)
		return len(supers) == 2 && slices.Equal(supers, attached)
	}
	deadline := time.Now().Add(2 * time.Minute) // against hangs only
	for !settled() {
		if time.Now().After(deadline) {
			for _, n := range nodes {
				s := n.State()
				t.Logf("%s: %s, superpeer %s, members %d, token %d", n.ID().ShortString(), s.Role, s.Superpeer.ID.ShortString(), len(s.Members), s.Token)
			}
			t.Fatal("not settled: want two superpeers, each serving one of the others")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mocknetNodes starts n nodes on a fully linked mocknet, with keys seeded
// by their index, each with opts(i) and the first as bootstrap peer of the
// others; all are closed with the test.
func mocknetNodes(t *testing.T, n int, opts func(i int) []Option) []*Node {
	t.Helper()
	return mocknetNodesOn(t, mocknetHosts(t, n, 0), opts)
}

// mocknetNodesOn is mocknetNodes on the hosts given.
func mocknetNodesOn(t *testing.T, hosts []host.Host, opts func(i int) []Option) []*Node {
	t.Helper()
	var nodes []*Node
	var boot peer.AddrInfo
	for i, h := range hosts {
		o := append(opts(i), WithHost(h))
		if i > 0 {
			o = append(o, WithBootstrap(boot))
		}
		nd, err := New(context.Background(), o...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nd.Close() })
		if i == 0 {
			boot = peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}
		}
		nodes = append(nodes, nd)
	}
	return nodes
}

// mocknetHosts starts n hosts on a fully linked mocknet whose links have
// the given latency (each way), with keys seeded by their index; the
// mocknet is closed with the test.
func mocknetHosts(t *testing.T, n int, latency time.Duration) []host.Host {
	t.Helper()
	return mocknetHostsWith(t, n, func(int, int) time.Duration { return latency })
}

// mocknetHostsWith is mocknetHosts with the latency (each way) of the
// link between hosts i and j given by latency(i, j), i < j; the hosts are
// in the order of their seeds.
func mocknetHostsWith(t *testing.T, n int, latency func(i, j int) time.Duration) []host.Host {
	t.Helper()
	_, hs := mocknetWith(t, n, latency)
	return hs
}

// mocknetWith is mocknetHostsWith that returns the mocknet too.
func mocknetWith(t *testing.T, n int, latency func(i, j int) time.Duration) (mocknet.Mocknet, []host.Host) {
	t.Helper()
	mn := mocknet.New()
	t.Cleanup(func() { _ = mn.Close() })
	hs := make([]host.Host, n)
	for i := range n {
		sk, _, err := crypto.GenerateEd25519Key(rand.NewChaCha8([32]byte{byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		if hs[i], err = mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/10.0.0.%d/tcp/4001", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			l, err := mn.LinkPeers(hs[i].ID(), hs[j].ID())
			if err != nil {
				t.Fatal(err)
			}
			l.SetOptions(mocknet.LinkOptions{Latency: latency(i, j)})
		}
	}
	return mn, hs
}

// TestGeometricDistrustsLiar: a node checks the coordinate a peer claims
// against the RTT it measures to it (a real ping over a mocknet link of
// 40 ms each way) before it passes a token to it. A claim to sit where
// the node itself sits, 80 ms away in truth, is distrusted: no pass, a
// count in the status. A claim that agrees with the RTT (measured in a
// sample, which the check then uses, as the old test used the RTT it had
// measured) is trusted, and the pass goes through to the live recipient,
// whose machine takes the token. The decisions are the node machines'
// (overlay/node's TestGeoVet pins them); this test drives the real
// machines of three nodes (on their loops, through Node.do, with virtual
// times ahead of the clock) with the shell's own ping and pass. The
// intervals are so long that nothing happens unasked.
func TestGeometricDistrustsLiar(t *testing.T) {
	hs := mocknetHosts(t, 3, 40*time.Millisecond)
	for _, h := range hs[1:] {
		if _, err := h.Network().DialPeer(context.Background(), hs[0].ID()); err != nil {
			t.Fatal(err)
		}
	}
	var nodes []*Node
	for _, h := range hs {
		n, err := New(context.Background(), WithHost(h), WithLogger(quiet), WithStrategy(StrategyGeometric),
			WithTarget(dhtselect.Target{Superpeers: 1}), WithGeometric(geometric.Config{}, 1000*time.Hour, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	b, a, c := nodes[0], nodes[1], nodes[2]
	client, err := geometric.NewClient(geometric.DefaultCoordConfig())
	if err != nil {
		t.Fatal(err)
	}
	origin := client.Coordinate() // every node's coordinate before its first sample

	// leave has x, holding token tok, promoted, hear from b, a member that
	// attaches to it, that b sits at claim, leave, and vet b with the
	// shell's ping; it returns the RTT measured, whether x passed the
	// token to b (with the shell's pass), and x's count of distrusted
	// claims.
	leave := func(x *Node, tok geometric.Token, claim *coordinate.Coordinate) (time.Duration, bool, uint64) {
		var measured time.Duration
		var passed bool
		var distrusted uint64
		ok := x.do(context.Background(), func(m *node.Machine) {
			now := time.Now()
			// b holds tok one pass below, as far as x knows: a machine
			// takes a pass only from the holder it knows.
			m.Step(now, node.GeoFeed{Tokens: []node.TokenPos{{Holder: b.ID(), Token: geometric.Token{Num: tok.Num, Seq: tok.Seq - 1}, Coord: origin}}})
			m.Step(now, node.TokenOffered{From: b.ID(), Token: tok})
			if !m.GeoAnswer().Yes {
				t.Fatalf("%s refused token %v", x.ID(), tok)
			}
			m.Step(now, node.GeoFeed{})
			later := now.Add(6 * time.Hour) // a token round, promoted (the dwell is 5 h), not yet a sample
			m.Tick(later)
			m.Ready()
			if m.GeoState().Role != node.RoleSuperpeer {
				t.Fatalf("%s not promoted", x.ID())
			}
			m.Step(later, node.AttachAsked{From: b.ID(), Coord: claim})
			if !m.GeoAnswer().Yes {
				t.Fatalf("%s refused b", x.ID())
			}
			m.Ready()
			later = later.Add(2 * time.Hour) // a token round: b in the snapshot
			m.Tick(later)
			m.Ready()
			m.Step(later, node.GeoLeave{})
			rd := m.Ready()
			if len(rd.Geo.Passes) != 0 {
				t.Fatalf("%s passes before it measured the RTT to b: %+v", x.ID(), rd.Geo.Passes)
			}
			if !slices.Equal(rd.Geo.Pings, []peer.ID{b.ID()}) {
				t.Fatalf("%s asks for pings of %v, want b", x.ID(), rd.Geo.Pings)
			}
			var err error
			if measured, _, err = x.geo.ping(context.Background(), b.ID()); err != nil {
				t.Fatal(err)
			}
			m.Step(later, node.PingDone{Peer: b.ID(), RTT: measured})
			rd = m.Ready()
			for _, p := range rd.Geo.Passes {
				ok := x.geo.pass(context.Background(), p.To, p.Token)
				passed = passed || ok
				m.Step(later, node.PassDone{To: p.To, Token: p.Token, OK: ok})
			}
			m.Ready()
			distrusted = m.Distrusted()
		})
		if !ok {
			t.Fatal("the node stopped")
		}
		return measured, passed, distrusted
	}

	rtt, passed, distrusted := leave(a, geometric.Token{Num: 0, Seq: 1}, origin.Clone())
	if rtt < 80*time.Millisecond {
		t.Fatalf("RTT to b measured %v, below the link's 80 ms", rtt)
	}
	if passed {
		t.Error("a passed its token to b, whose claim to sit at a's own coordinate, 80 ms away, it should distrust")
	}
	if distrusted != 1 {
		t.Errorf("a distrusted %d claims, want 1", distrusted)
	}
	waitFor(t, "a's status to count the distrusted claim", func() bool { return a.Status().Distrusted == 1 })

	// The truth: b's coordinate at the RTT c measured to b, in a sample
	// (which moves c's own coordinate), and which the check then uses.
	passed, distrusted = false, 0
	if !c.do(context.Background(), func(m *node.Machine) {
		now := time.Now()
		m.Step(now, node.GeoFeed{Tokens: []node.TokenPos{{Holder: b.ID(), Token: geometric.Token{Num: 0, Seq: 4}, Coord: origin}}})
		m.Step(now, node.TokenOffered{From: b.ID(), Token: geometric.Token{Num: 0, Seq: 5}})
		if !m.GeoAnswer().Yes {
			t.Fatal("c refused the token")
		}
		m.Step(now, node.GeoFeed{})
		later := now.Add(6 * time.Hour) // promoted, not yet a sample
		m.Tick(later)
		m.Ready()
		m.Step(later, node.AttachAsked{From: b.ID(), Coord: origin}) // b attaches
		if !m.GeoAnswer().Yes {
			t.Fatal("c refused b")
		}
		m.Ready()
		later = now.Add(201 * time.Hour) // the first sample, of b
		m.Tick(later)
		rd := m.Ready()
		if !slices.Equal(rd.Geo.Pings, []peer.ID{b.ID()}) {
			t.Fatalf("c asks for pings of %v, want b", rd.Geo.Pings)
		}
		measured, _, err := c.geo.ping(context.Background(), b.ID())
		if err != nil {
			t.Fatal(err)
		}
		m.Step(later, node.PingDone{Peer: b.ID(), RTT: measured})
		m.Ready()
		self := m.GeoState().Coord
		truth := self.Clone()
		truth.Vec[0] += measured.Seconds() - geometric.Distance(self, self.Clone())
		// b's next request, with its coordinate at the RTT measured.
		m.Step(later, node.AttachAsked{From: b.ID(), Coord: truth})
		later = later.Add(10 * time.Hour) // a token round on a new snapshot
		m.Tick(later)
		m.Ready()
		m.Step(later, node.GeoLeave{})
		rd = m.Ready()
		if len(rd.Geo.Pings) != 0 {
			t.Fatalf("c pings %v again", rd.Geo.Pings)
		}
		// b hears c's report of the token (published through gossip in a
		// running node; this test takes c's Ready itself).
		if !b.do(context.Background(), func(bm *node.Machine) {
			bm.Step(time.Now(), node.GeoFeed{Tokens: []node.TokenPos{{Holder: c.ID(), Token: geometric.Token{Num: 0, Seq: 5}, Coord: origin}}})
		}) {
			t.Fatal("b stopped")
		}
		for _, p := range rd.Geo.Passes {
			ok := c.geo.pass(context.Background(), p.To, p.Token)
			passed = passed || ok && p.To == b.ID()
			m.Step(later, node.PassDone{To: p.To, Token: p.Token, OK: ok})
		}
		m.Ready()
		distrusted = m.Distrusted()
	}) {
		t.Fatal("c stopped")
	}
	if !passed {
		t.Errorf("c did not pass its token to b, whose claim agrees with the RTT")
	}
	if distrusted != 0 {
		t.Errorf("c distrusted %d claims, want 0", distrusted)
	}
	var st node.GeoState
	if !b.do(context.Background(), func(m *node.Machine) { st = m.GeoState() }) || st.Token != 0 {
		t.Errorf("b holds token %d, want 0", st.Token)
	}
}

// TestGeometricForgedTokensLive (issue 19, finding 3) on real hosts: four
// nodes on loopback TCP, geometric, two tokens, settle on two superpeers;
// then attack.TokenForger (a plain libp2p client) claims every token one
// pass above its holder's on the token topic, as a superpeer, with a
// valid link by a sybil of its own, and passes every token one pass above
// its holder's to the victim, an ordinary node, for ten seconds. Every
// sample (every 100 ms) has a superpeer (the holders kept their tokens),
// no node names the attacker its superpeer, no pass is taken, the victim
// bans the forger for its forged passes (it comes back under fresh
// identities), and no node bans an honest one. The intervals are short;
// the waits are bounded against hangs only.
func TestGeometricForgedTokensLive(t *testing.T) {
	if testing.Short() {
		t.Skip("four libp2p nodes on loopback for half a minute")
	}
	var nodes []*Node
	var boot peer.AddrInfo
	for i := range 4 {
		sk, _, err := crypto.GenerateEd25519Key(rand.NewChaCha8([32]byte{byte(40 + i)}))
		if err != nil {
			t.Fatal(err)
		}
		o := []Option{WithIdentity(sk), WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithLogger(quiet),
			WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Superpeers: 2}), WithIntervals(300*time.Millisecond, time.Second),
			WithGeometric(geometric.Config{Capacity: 2}, 50*time.Millisecond, 100*time.Millisecond)}
		if i > 0 {
			o = append(o, WithBootstrap(boot))
		}
		n, err := New(context.Background(), o...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		if i == 0 {
			boot = peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()}
		}
		nodes = append(nodes, n)
	}
	honest := map[peer.ID]bool{}
	for _, n := range nodes {
		honest[n.ID()] = true
	}
	settled := func() bool {
		supers, attached := 0, 0
		for _, n := range nodes {
			switch s := n.State(); {
			case s.Role == RoleSuperpeer:
				supers++
			case honest[s.Superpeer.ID]:
				attached++
			}
		}
		return supers == 2 && attached == 2
	}
	waitFor(t, "two superpeers, each ordinary node attached", settled)
	var victim *Node
	for _, n := range nodes {
		if n.State().Role != RoleSuperpeer {
			victim = n
			break
		}
	}
	target := attack.Target{Network: "default", Victim: peer.AddrInfo{ID: victim.ID(), Addrs: victim.Host().Addrs()}}
	for _, n := range nodes {
		target.Nodes = append(target.Nodes, peer.AddrInfo{ID: n.ID(), Addrs: n.Host().Addrs()})
	}
	f := &attack.TokenForger{Period: 200 * time.Millisecond}
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, target) }()
	samples, nobody, byAttacker := 0, 0, 0
	for ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		samples++
		supers := 0
		for _, n := range nodes {
			s := n.State()
			if s.Role == RoleSuperpeer {
				supers++
			}
			if id := s.Superpeer.ID; id != "" && !honest[id] {
				byAttacker++
			}
		}
		if supers == 0 {
			nobody++
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := f.Stats()
	banned := 0
	for _, n := range nodes {
		for _, p := range n.Banned() {
			if honest[p] {
				t.Errorf("%s bans the honest %s", n.ID(), p)
			} else {
				banned++
			}
		}
	}
	t.Logf("forger: %+v; %d samples, %d without a superpeer, %d node-samples served by the attacker; %d bans of the forger's identities; victim refused %v",
		st, samples, nobody, byAttacker, banned, victim.Status().Refused)
	if st.Claims == 0 || st.Passes == 0 {
		t.Fatalf("no attack: %+v", st)
	}
	if st.Taken > 0 {
		t.Errorf("%d forged passes taken", st.Taken)
	}
	if nobody > 0 || byAttacker > 0 {
		t.Errorf("%d samples without a superpeer, %d node-samples served by the attacker", nobody, byAttacker)
	}
	if banned == 0 || st.Identities < 2 {
		t.Errorf("the forger was not banned (%d bans, %d identities)", banned, st.Identities)
	}
	if !settled() {
		t.Error("not settled after the attack")
	}
}

// The token feed's Protect (hostile-peer audit, finding B): the reports
// kept first when a token's room is full are those of the holders the
// machine believed at its last feed, and the passes they or this node
// signed; a ghost's report, or a pass a ghost signed, is not.
func TestGeoProtect(t *testing.T) {
	g := &geo{n: &Node{self: "s"}}
	if g.protect("a", "") || !g.protect("k", "s") {
		t.Fatal("before any feed: want only this node's passes protected")
	}
	g.believed.Store(&map[peer.ID]bool{"a": true, "s": true})
	for _, c := range []struct {
		holder, giver peer.ID
		want          bool
	}{{"a", "", true}, {"k", "a", true}, {"k", "s", true}, {"x", "", false}, {"y", "x", false}, {"y", "", false}} {
		if got := g.protect(c.holder, c.giver); got != c.want {
			t.Errorf("protect(%s, %q) = %v, want %v", c.holder, c.giver, got, c.want)
		}
	}
}

// TestGeometricSurveyLive: a new network of eight nodes on mocknet with
// three tokens. The first superpeer surveys its members over the real
// attach protocol (landmarks in its answers, the members' reports in
// their requests), orders the members its survey named to take tokens 1
// and 2 in its answers (GeoAnswer.Rehome, Survey set), and they take
// them: the order goes through the wire and the shell to the members'
// machines.
func TestGeometricSurveyLive(t *testing.T) {
	notes := &noteCounter{want: []string{"geometric: survey done; naming the tokens' holders", "geometric: took a missing token our superpeer named us for"}}
	nodes := mocknetNodes(t, 8, func(int) []Option {
		return []Option{
			WithLogger(slog.New(notes)), WithStrategy(StrategyGeometric),
			WithTarget(dhtselect.Target{Superpeers: 3}), WithIntervals(300*time.Millisecond, time.Second),
			WithGeometric(geometric.Config{}, 50*time.Millisecond, 100*time.Millisecond),
		}
	})
	deadline := time.Now().Add(2 * time.Minute) // against hangs only
	for notes.count(notes.want[0]) == 0 || notes.count(notes.want[1]+surveyNamed) < 2 {
		if time.Now().After(deadline) {
			for _, n := range nodes {
				s := n.State()
				t.Logf("%s: %s, token %d", n.ID().ShortString(), s.Role, s.Token)
			}
			t.Fatalf("surveys done %d, tokens taken as the survey named %d; want 1 and 2", notes.count(notes.want[0]), notes.count(notes.want[1]+surveyNamed))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestGeometricDetachLive: eight nodes on a line of links (4 ms each way
// per step), two tokens. Members that move to a nearer superpeer tell the
// one they left, over the real attach protocol (the leaving flag), and
// that one lets them go at once (its machine notes it), not an
// attachment's TTL later.
func TestGeometricDetachLive(t *testing.T) {
	notes := &noteCounter{want: []string{"geometric: a member left for another superpeer"}}
	hosts := mocknetHostsWith(t, 8, func(i, j int) time.Duration { return time.Duration(j-i) * 4 * time.Millisecond })
	nodes := mocknetNodesOn(t, hosts, func(int) []Option {
		return []Option{
			WithLogger(slog.New(notes)), WithStrategy(StrategyGeometric),
			WithTarget(dhtselect.Target{Superpeers: 2}), WithIntervals(300*time.Millisecond, time.Second),
			WithGeometric(geometric.Config{}, 50*time.Millisecond, 100*time.Millisecond),
		}
	})
	deadline := time.Now().Add(2 * time.Minute) // against hangs only
	for notes.count(notes.want[0]) == 0 {
		if time.Now().After(deadline) {
			for _, n := range nodes {
				s := n.State()
				t.Logf("%s: %s, superpeer %s, token %d", n.ID().ShortString(), s.Role, s.Superpeer.ID.ShortString(), s.Token)
			}
			t.Fatal("no superpeer heard that a member left it")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noteCounter is a slog handler that counts the records whose message is
// one of want; those with an attribute "survey" that is true are counted
// under the message followed by surveyNamed too.
type noteCounter struct {
	want []string
	mu   sync.Mutex
	seen map[string]int
}

func (c *noteCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *noteCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *noteCounter) WithGroup(string) slog.Handler            { return c }
func (c *noteCounter) Handle(_ context.Context, r slog.Record) error {
	if slices.Contains(c.want, r.Message) {
		survey := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "survey" && a.Value.Kind() == slog.KindBool && a.Value.Bool() {
				survey = true
			}
			return true
		})
		c.mu.Lock()
		if c.seen == nil {
			c.seen = map[string]int{}
		}
		c.seen[r.Message]++
		if survey {
			c.seen[r.Message+surveyNamed]++
		}
		c.mu.Unlock()
	}
	return nil
}

// surveyNamed follows a message in noteCounter's counts of the records
// whose "survey" attribute is true.
const surveyNamed = " (survey)"

func (c *noteCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[msg]
}
