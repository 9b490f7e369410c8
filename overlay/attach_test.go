package overlay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

// ours lists the protocols of h that a node adds: the overlay's own and
// GossipSub's.
func ours(h host.Host) []protocol.ID {
	var out []protocol.ID
	for _, p := range h.Mux().Protocols() {
		if strings.HasPrefix(string(p), "/superpeer/") || slices.Contains(pubsub.GossipSubDefaultProtocols, p) {
			out = append(out, p)
		}
	}
	return out
}

// A node attached to an application's host (sharing its GossipSub, or
// with its own) joins the overlay; its Close leaves the host running,
// without the node's protocols, and the application's GossipSub working.
func TestAttach(t *testing.T) {
	for _, shared := range []bool{true, false} {
		name := map[bool]string{true: "shared gossipsub", false: "own gossipsub"}[shared]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h := plainHost(t)
			var opts []Option
			var appPS *pubsub.PubSub
			if shared {
				var err error
				if appPS, err = pubsub.NewGossipSub(t.Context(), h); err != nil {
					t.Fatal(err)
				}
				opts = append(opts, WithPubSub(appPS))
			}
			common := []Option{WithTarget(dhtselect.Target{Superpeers: 1}), WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(quiet)}
			a, err := Attach(ctx, h, append(opts, common...)...)
			if err != nil {
				t.Fatal(err)
			}
			if a.ID() != h.ID() {
				t.Errorf("attached node %s on host %s", a.ID(), h.ID())
			}
			b, err := New(ctx, append(common, WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithBootstrapAddrs(a.P2PAddrs()...))...)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			waitFor(t, "the attached node and the other to know each other", func() bool {
				return len(a.State().Members)+len(b.State().Members) == 4
			})
			if len(ours(h)) == 0 {
				t.Fatal("no overlay protocols on the host while attached")
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if left := ours(h); !shared && len(left) > 0 || shared && slices.ContainsFunc(left, func(p protocol.ID) bool { return strings.HasPrefix(string(p), "/superpeer/") }) {
				t.Errorf("protocols left on the host after Close: %v", left)
			}
			// The host lives on: another host connects to it.
			c := plainHost(t)
			if err := c.Connect(ctx, peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
				t.Errorf("the host after Close: %v", err)
			}
			if shared {
				if _, err := appPS.Join("app"); err != nil {
					t.Errorf("the application's GossipSub after Close: %v", err)
				}
			}
		})
	}
	if _, err := Attach(context.Background(), nil); !errors.Is(err, ErrConfig) {
		t.Errorf("Attach(nil): %v, want ErrConfig", err)
	}
}
