package overlay

import (
	"context"
	"errors"
	"io"
	"math"
	"testing"
	"time"

	coreconnmgr "github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// TestCoordPing: the geometric strategy's ping (rtt.go) measures the RTT
// over a mocknet link of 20 ms each way and carries the answerer's
// coordinate, none before it has one; an answerer echoes at most
// maxCoordPings pings a stream; an answer whose coordinate is not a valid
// one is an error and a strike against its sender.
func TestCoordPing(t *testing.T) {
	hs := mocknetHosts(t, 3, 20*time.Millisecond)
	var nodes []*Node
	for _, h := range hs[:2] {
		n, err := New(context.Background(), WithHost(h), WithLogger(quiet), WithStrategy(StrategyGeometric),
			WithTarget(dhtselect.Target{Superpeers: 1}), WithGeometric(geometric.Config{}, 1000*time.Hour, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	a, b := nodes[0], nodes[1]
	ctx := context.Background()

	b.mu.Lock()
	b.state.Coord = nil
	b.mu.Unlock()
	rtt, c, err := pingCoord(ctx, a, b.self, 3)
	if err != nil || c != nil || rtt < 40*time.Millisecond {
		t.Fatalf("ping of a node without a coordinate: %v, %+v, %v; want 40 ms or more, none, no error", rtt, c, err)
	}

	client, err := geometric.NewClient(geometric.DefaultCoordConfig())
	if err != nil {
		t.Fatal(err)
	}
	co := client.Coordinate()
	co.Vec[0], co.Vec[5], co.Error, co.Height = 0.031, -0.002, 0.3, 0.004
	b.mu.Lock()
	b.state.Coord = co.Clone()
	b.mu.Unlock()
	rtt, c, err = pingCoord(ctx, a, b.self, 3)
	if err != nil || !sameCoordinate(c, onWire(co)) || rtt < 40*time.Millisecond {
		t.Fatalf("ping: %v, %+v, %v; want 40 ms or more, %+v, no error", rtt, c, err, co)
	}

	// The answerer's bound: one ping more than maxCoordPings is not
	// echoed; the stream ends.
	s, err := hs[0].NewStream(ctx, b.self, coordPingProtocol(a.cfg.Network))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, coordPingSize)
	echoed := 0
	for i := range maxCoordPings + 1 {
		if _, err := s.Write(buf); err != nil {
			break
		}
		n := coordPingSize
		if i == 0 {
			n += len(appendPingCoord(nil, co))
		}
		if _, err := io.ReadFull(s, make([]byte, n)); err != nil {
			break
		}
		echoed++
	}
	_ = s.Close()
	if echoed != maxCoordPings {
		t.Errorf("%d pings echoed on one stream, want %d", echoed, maxCoordPings)
	}

	// A forger's answer: a NaN component.
	bad := co.Clone()
	bad.Vec[3] = math.NaN()
	hs[2].SetStreamHandler(coordPingProtocol(a.cfg.Network), func(s network.Stream) {
		defer s.Close()
		buf := make([]byte, coordPingSize)
		if _, err := io.ReadFull(s, buf); err == nil {
			_, _ = s.Write(append(buf, appendCoord(nil, bad)...))
		}
	})
	if _, c, err := pingCoord(ctx, a, hs[2].ID(), 3); !errors.Is(err, errWire) || c != nil {
		t.Errorf("ping of a forger: %+v, %v; want a wire error", c, err)
	}
	if k := a.guard.strikesOf(hs[2].ID()); k != 1 {
		t.Errorf("%d strikes against the forger, want 1", k)
	}
}

// Live coordinates fit to the ping answers' coordinates: three geometric
// nodes on mocknet, 20 ms each way on every link, come to predict each
// other's RTT (40 ms) within a quarter. With the height rounded to the
// nearest float32 on the wire, a fresh coordinate's height (Vivaldi's
// floor) read as below it, every answer's coordinate was refused, and the
// coordinates stayed at the origin, predicting 0 (TestGeoLiveVirtual's
// coordinates' error was 1.000).
func TestCoordPingFitsLive(t *testing.T) {
	nodes := mocknetNodesOn(t, mocknetHosts(t, 3, 20*time.Millisecond), func(int) []Option {
		return []Option{
			WithLogger(quiet), WithStrategy(StrategyGeometric),
			WithTarget(dhtselect.Target{Superpeers: 1}), WithIntervals(300*time.Millisecond, time.Second),
			WithGeometric(geometric.Config{}, 50*time.Millisecond, 100*time.Millisecond),
		}
	})
	fitted := func() bool {
		for i, a := range nodes {
			for _, b := range nodes[i+1:] {
				ca, cb := a.State().Coord, b.State().Coord
				if ca == nil || cb == nil {
					return false
				}
				if d := geometric.Distance(ca, cb); d < 0.030 || d > 0.050 {
					return false
				}
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute) // against hangs only
	for !fitted() {
		if time.Now().After(deadline) {
			for _, n := range nodes {
				t.Logf("%s: %+v", n.ID().ShortString(), n.State().Coord)
			}
			t.Fatal("the coordinates do not predict the 40 ms RTTs within a quarter")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connManagedHost is a host with its own connection manager, as a libp2p
// host built with libp2p.ConnectionManager has (mocknet's have none).
type connManagedHost struct {
	host.Host
	cm *connmgr.BasicConnMgr
}

func (h connManagedHost) ConnManager() coreconnmgr.ConnManager { return h.cm }

// TestGeoKeepOutranksTable: the connections to the peers the machine pings
// (GeoState.Keep, tagged by keep) outlast those to kad-dht's routing-table
// peers (tagged 5 by kad-dht) when the connection manager trims, and a
// peer that left the set is untagged; a trimmed target was dialled again
// at its next ping, and kad-dht checked it again (a FIND_NODE) as a peer
// connected anew.
func TestGeoKeepOutranksTable(t *testing.T) {
	hs := mocknetHosts(t, 7, 0)
	cm, err := connmgr.NewConnManager(2, 3, connmgr.WithGracePeriod(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cm.Close() })
	a := connManagedHost{hs[0], cm}
	a.Network().Notify(cm.Notifee())
	ctx := context.Background()
	for _, h := range hs[1:] {
		if err := a.Connect(ctx, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range hs[1:4] {
		cm.TagPeer(h.ID(), "kbucket", 5) // kad-dht's tag of a table peer (its baseConnMgrScore)
	}
	g := &geo{n: &Node{host: a}}
	g.keep([]peer.ID{hs[5].ID(), hs[6].ID()})
	g.keep([]peer.ID{hs[4].ID(), hs[6].ID()}) // hs[5] left the set
	if ti := cm.GetTagInfo(hs[5].ID()); ti != nil && ti.Tags[keepTag] != 0 {
		t.Fatalf("a peer that left the set is still tagged: %v", ti.Tags)
	}
	cm.TrimOpenConns(ctx)
	for i, h := range hs[1:] {
		want := i+1 == 4 || i+1 == 6
		if got := a.Network().Connectedness(h.ID()) == network.Connected; got != want {
			t.Errorf("host %d connected %v after the trim, want %v", i+1, got, want)
		}
	}
}
