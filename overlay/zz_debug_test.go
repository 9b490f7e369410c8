package overlay

import (
	"log/slog"
	"os"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	ma "github.com/multiformats/go-multiaddr"
)

func TestZZBackbone(t *testing.T) {
	ctx := context.Background()
	var nodes []*Node
	for i := range 8 {
		opts := []Option{WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithTarget(dhtselect.Target{Superpeers: 4}),
			WithIntervals(500*time.Millisecond, 500*time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("n", i))}
		if i > 0 {
			opts = append(opts, WithBootstrapAddrs(nodes[0].P2PAddrs()...))
		}
		n, err := New(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	time.Sleep(15 * time.Second)
	for i, n := range nodes {
		s := n.State()
		var sums int
		if n.cm.bb != nil {
			sums = len(n.cm.bb.Summaries())
		}
		fmt.Println(i, s.Role, s.K, s.Prefix, len(s.Members), s.Size, "summaries", sums, "serving", n.cm.serving, "to", n.cm.to)
	}
}
