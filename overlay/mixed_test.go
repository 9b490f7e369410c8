package overlay

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

// TestMixedElections: nodes of one network configured with different
// elections (three with bully and quorum, three with none) each settle,
// and the quorum nodes say why the others are no electors. The members
// that ran no election counted in the quorum's electorate, no majority
// could form, and the quorum nodes had no superpeer for the whole run,
// with nothing in the logs (an interoperability audit: 24 s). Now each
// announces its election (Announcement.Election), and a member that runs
// another is no elector (node's sameElection).
func TestMixedElections(t *testing.T) {
	var logs lockedBuffer
	warn := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))
	var nodes []*Node
	for i := range 6 {
		ip := fmt.Sprintf("127.5.1.%d", i+2)
		o := []Option{
			WithListenAddrs(ma.StringCast("/ip4/" + ip + "/tcp/0")), WithTarget(dhtselect.Target{Superpeers: 1}),
			WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(quiet),
		}
		if i < 3 {
			o = append(o, WithElection("bully", true), WithDataDir(t.TempDir()))
			if i == 0 {
				o = append(o, WithLogger(warn))
			}
		}
		if i > 0 {
			o = append(o, WithBootstrapAddrs(nodes[0].P2PAddrs()...))
		}
		n, err := New(context.Background(), o...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	quorum := nodes[:3]
	var ids []peer.ID
	for _, n := range quorum {
		ids = append(ids, n.ID())
	}
	want := dhtselect.Assign(ids, 0)[0].Superpeer // the highest ranked of the quorum nodes
	waitFor(t, "the quorum nodes to follow "+want.ShortString(), func() bool {
		for _, n := range quorum {
			if n.State().Superpeer.ID != want {
				return false
			}
		}
		return true
	})
	waitFor(t, "an error that names the other election", func() bool {
		return strings.Contains(logs.String(), "runs another election") && strings.Contains(logs.String(), "theirs=none")
	})
}
