package overlay

import (
	"context"
	"errors"
	"io"
	"math"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

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
