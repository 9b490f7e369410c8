package overlay_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/libp2p/go-libp2p"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
)

// Two nodes on loopback: the second joins through the first, and they
// agree on one cluster with one superpeer.
func ExampleNew() {
	ctx := context.Background()
	opts := []overlay.Option{
		overlay.WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")),
		overlay.WithTarget(dhtselect.Target{Superpeers: 1}),
		overlay.WithIntervals(200*time.Millisecond, 200*time.Millisecond),
	}
	a, err := overlay.New(ctx, opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := overlay.New(ctx, append(opts, overlay.WithBootstrapAddrs(a.P2PAddrs()...))...)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		sa, sb := a.State(), b.State()
		if len(sa.Members) == 2 && len(sb.Members) == 2 && sa.Superpeer.ID == sb.Superpeer.ID && sa.Superpeer.ID != "" {
			superpeers := 0
			for _, s := range []overlay.State{sa, sb} {
				if s.Role == overlay.RoleSuperpeer {
					superpeers++
				}
			}
			fmt.Println("members:", len(sa.Members), "superpeers:", superpeers)
			return
		}
	}
	fmt.Println("no agreement within a minute")
	// Output: members: 2 superpeers: 1
}

// An application that runs its own libp2p host attaches a node to it; the
// node's Close leaves the host to the application.
func ExampleAttach() {
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	n, err := overlay.Attach(context.Background(), h, overlay.WithTarget(dhtselect.Target{Superpeers: 4}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same peer:", n.ID() == h.ID())
	if err := n.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("host still listening:", len(h.Network().ListenAddresses()) > 0)
	// Output:
	// same peer: true
	// host still listening: true
}
