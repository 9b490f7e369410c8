package overlay

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

// lockedBuffer is a bytes.Buffer that a logger writes from many
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestForeignBootstrapWarns: a bootstrap peer that is a libp2p host like
// any other but no node of this network (a public IPFS node, a node of
// another network name) is warned of and does not count as reached. Two
// nodes given one connected to it, found their private routing tables
// empty, and each served the whole key space alone, without a word (an
// interoperability audit).
func TestForeignBootstrapWarns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain := plainHost(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n, err := New(ctx, WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithTarget(dhtselect.Target{Superpeers: 1}),
		WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(log),
		WithBootstrap(peer.AddrInfo{ID: plain.ID(), Addrs: plain.Addrs()}))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitFor(t, "a warning about the foreign bootstrap peer", func() bool {
		return strings.Contains(logs.String(), "bootstrap peer is no node of this network")
	})
	if n.bootstrapConnected() {
		t.Error("a foreign bootstrap peer counts as connected")
	}
	if c := strings.Count(logs.String(), "bootstrap peer is no node of this network"); c != 1 {
		t.Errorf("warned %d times, want once", c)
	}
}
