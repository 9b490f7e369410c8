package overlay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

func TestConfigValidation(t *testing.T) {
	bad := map[string][]Option{
		"network name":        {WithNetwork("no spaces please")},
		"empty network":       {WithNetwork("")},
		"superpeers 0":        {WithTarget(dhtselect.Target{})},
		"fraction 1.5":        {WithTarget(dhtselect.Target{Fraction: 1.5})},
		"both targets":        {WithTarget(dhtselect.Target{Superpeers: 2, Fraction: 0.5})},
		"no listen":           {WithListenAddrs()},
		"zero interval":       {WithIntervals(0, time.Second)},
		"negative retry":      {WithBootstrapRetry(-time.Second)},
		"bootstrap no p2p":    {WithBootstrapAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/4001"))},
		"bootstrap bad id":    {WithBootstrap(peer.AddrInfo{ID: "x"})},
		"bad strategy":        {WithStrategy("ring")},
		"geometric, fraction": {WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Fraction: 0.1})},
		"geometric, capacity": {WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Superpeers: 2}),
			WithGeometric(geometric.Config{Capacity: -1}, 0, 0)},
		"geometric, tokens": {WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Superpeers: 2}),
			WithGeometric(geometric.Config{Tokens: 3}, 0, 0)},
		"geometric, too many": {WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Superpeers: 5000})},
		"geometric, ping": {WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Superpeers: 2}),
			WithGeometric(geometric.Config{}, -time.Second, 0)},
		"unknown election":    {WithElection("raft", false)},
		"quorum, no election": {WithElection("", true)},
		"geometric, quorum":   {WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Superpeers: 2}), WithElection("bully", true)},
		"election tick":       {WithElection("bully", false), func(c *Config) error { c.ElectionTick = 0; return nil }},
		"psk of 16 bytes":     {WithPSK(make([]byte, 16))},
		"psk over quic":       {WithPSK(make([]byte, 32)), WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/udp/0/quic-v1"))},
		"allowlist and gater": {WithAllowlist("12D3KooWGzujq9LPr5iuaNCkSaxNtJhCfNDbUBqPNieGeoVWRxQa"), WithConnectionGater(allowlist{})},
		"allowlist bad id":    {WithAllowlist("")},
		"public and psk":      {WithPublic(), WithPSK(make([]byte, 32)), WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0"))},
		"public, interval":    {WithPublic(), func(c *Config) error { c.RendezvousInterval = 0; return nil }},
	}
	for name, opts := range bad {
		n, err := New(context.Background(), append(opts, WithLogger(quiet))...)
		if err == nil {
			_ = n.Close()
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: New() error = %v, want ErrConfig", name, err)
		}
	}
}

// Three nodes on real loopback transports (TCP for two, QUIC for one) find
// each other through bootstrap peers and agree with the brute-force answer;
// the events arrive on the subscription.
func TestLoopbackNodesAgree(t *testing.T) {
	ctx := context.Background()
	opts := func(listen string, boot ...ma.Multiaddr) []Option {
		return []Option{
			WithListenAddrs(ma.StringCast(listen)), WithBootstrapAddrs(boot...),
			WithTarget(dhtselect.Target{Superpeers: 2}),
			WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(quiet),
		}
	}
	// Subscribed before node a starts: a node without bootstrap peers
	// takes its first role at once, before a Subscribe after New could.
	h := plainHost(t)
	sub, err := h.EventBus().Subscribe(eventTypes)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	a, err := New(ctx, append(opts("/ip4/127.0.0.1/tcp/0"), WithHost(h))...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(ctx, opts("/ip4/127.0.0.1/udp/0/quic-v1", a.P2PAddrs()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := New(ctx, opts("/ip4/127.0.0.1/tcp/0", b.P2PAddrs()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nodes := []*Node{a, b, c}
	ids := []peer.ID{a.ID(), b.ID(), c.ID()}
	want := dhtselect.Assign(ids, 1)
	deadline := time.Now().Add(time.Minute) // a bound against hangs only
	for {
		ok := true
		for i, n := range nodes {
			s := n.State()
			ok = ok && s.K == 1 && s.Superpeer.ID == want[i].Superpeer && s.ClusterKey == want[i].ClusterKey &&
				(s.Role == RoleSuperpeer) == (want[i].Superpeer == ids[i]) && len(s.Superpeer.Addrs) > 0
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			for i, n := range nodes {
				t.Logf("node %d: %+v, want %+v", i, n.State(), want[i])
			}
			t.Fatal("nodes did not agree with the brute-force answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Node a's events: at least its first role and superpeer.
	var sawRole, sawSuperpeer bool
	for !sawRole || !sawSuperpeer {
		select {
		case e := <-sub.Out():
			switch e := e.(type) {
			case EvtRoleChanged:
				sawRole = sawRole || e.Old == RoleUnknown && e.New != RoleUnknown
			case EvtSuperpeerChanged:
				sawSuperpeer = sawSuperpeer || e.New.ID != ""
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("missing events: role %v, superpeer %v", sawRole, sawSuperpeer)
		}
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestCloseTwice(t *testing.T) {
	n, err := New(context.Background(), WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A node that closes says goodbye: with the cluster-scoped membership
// (DHT strategy) a member's goodbye goes to its superpeer, the registrar
// (registrar.goodbye, a Leaving record), whose registry drops it from the
// roster at once, before its registration would expire (the TTL here is
// 6 s), and passes the goodbye on to the other members with the roster's
// next delta, so that they drop it too, knowing it left (Left) rather
// than expired; the cluster is then re-evaluated without it. A goodbye
// that did not arrive would leave the member in the roster for the TTL,
// and Left false on both ends.
func TestCloseSaysGoodbye(t *testing.T) {
	keys := keysByDistance(t, 3) // keys[0] is the superpeer of k = 0
	opt := WithIntervals(2*time.Second, 200*time.Millisecond)
	sp := oneCluster(t, keys[0], opt)
	stay := oneCluster(t, keys[1], opt, WithBootstrapAddrs(sp.P2PAddrs()...))
	leave := oneCluster(t, keys[2], opt, WithBootstrapAddrs(sp.P2PAddrs()...))
	waitFor(t, "the three nodes to agree on the superpeer", func() bool {
		for _, n := range []*Node{sp, stay, leave} {
			if s := n.State(); len(s.Members) != 3 || s.Superpeer.ID != sp.ID() {
				return false
			}
		}
		return true
	})
	if err := leave.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*Node{sp, stay} {
		waitFor(t, "the goodbye to take the closed node out of the view", func() bool {
			_, known := n.members.Get(leave.ID())
			return !known && len(n.State().Members) == 2
		})
		if !n.members.Left(leave.ID()) {
			t.Errorf("the closed node left %s's view without its goodbye", n.ID().ShortString())
		}
	}
}

// TestRestartRejoins: a superpeer that stops (Close: it says goodbye) and
// starts again with the same identity rejoins under the same peer ID and
// takes its role back; the goodbye of its first life does not keep it out.
func TestRestartRejoins(t *testing.T) {
	keys := keysByDistance(t, 3) // keys[0] is the superpeer of k = 0
	start := func(key crypto.PrivKey, boot ...ma.Multiaddr) *Node {
		return oneCluster(t, key, WithBootstrapAddrs(boot...))
	}
	a := start(keys[1])
	b := start(keys[2], a.P2PAddrs()...)
	c := start(keys[0], a.P2PAddrs()...)
	agree := func(what string, sp peer.ID, nodes ...*Node) {
		t.Helper()
		waitFor(t, what, func() bool {
			for _, n := range nodes {
				if s := n.State(); len(s.Members) != len(nodes) || s.Superpeer.ID != sp {
					return false
				}
			}
			return true
		})
	}
	agree("c to be the superpeer of three", c.ID(), a, b, c)
	id := c.ID()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	agree("a to take over", a.ID(), a, b)
	c = start(keys[0], a.P2PAddrs()...)
	if c.ID() != id {
		t.Fatalf("restarted with ID %s, want %s", c.ID(), id)
	}
	agree("c to rejoin and be the superpeer again", id, a, b, c)
}
