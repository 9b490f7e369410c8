package attack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay"
)

// TestRosterReadsLive: the two ways a hostile client once read a
// cluster's roster for nothing, against real nodes (loopback TCP), with
// this package's own wire. Three honest nodes form one cluster (S = 1,
// announce interval 2 s). A plain host in the cluster's key range (every
// key, at k = 0) says goodbye to the superpeer without having
// registered: refused as not a member, with no roster (it was answered
// with the whole roster). It registers as a private member (one read
// from scratch: a snapshot) and then asks for a snapshot in each of 20
// requests: the superpeer answers at most its budget (overlay's
// snapBurst, 3 at once, then one an announce interval: the elapsed time
// counts) with a roster and the rest too soon (each was answered with
// the whole roster); its steady round from its last answer is still
// answered, it is not banned, and the honest nodes still agree.
func TestRosterReadsLive(t *testing.T) {
	if testing.Short() {
		t.Skip("real hosts")
	}
	const interval, snapBurst = 2 * time.Second, 3
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // against hangs
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nodes := startNodes(ctx, t, 3, func(i int) []overlay.Option {
		return []overlay.Option{overlay.WithListenAddrs(ma.StringCast(fmt.Sprintf("/ip4/127.1.5.%d/tcp/0", i+2))),
			overlay.WithTarget(dhtselect.Target{Superpeers: 1}), overlay.WithIntervals(interval, 200*time.Millisecond),
			overlay.WithReachability(overlay.ReachabilityPublic), overlay.WithLogger(quiet)}
	})
	agree := func() bool {
		sp := nodes[0].State().Superpeer.ID
		for _, n := range nodes {
			if s := n.State(); sp == "" || s.Superpeer.ID != sp || len(s.Members) < len(nodes) {
				return false
			}
		}
		return true
	}
	waitFor(t, "the honest nodes to agree on a superpeer", agree)
	sp := nodes[0].State().Superpeer.ID

	h := connectedHost(ctx, t, nodes)
	ask := func(rid, ver uint64, rec []byte) RegisterReply {
		t.Helper()
		rep, err := Register(ctx, h, sp, "default", RegisterRequest(rid, ver, rec))
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	d := ask(0, 0, nil).Digest // a stranger's refresh: "record needed", and the digest

	// A stranger's goodbye.
	bye, err := seal(h, gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), K: d.K, ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(d.K),
		Seq: uint64(time.Now().UnixNano()), Leaving: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep := ask(0, 0, bye); rep.Status != RegNotMember || len(rep.Entries) != 0 {
		t.Errorf("a stranger's goodbye: %v with %d entries; want refused as not a member, no roster", rep.Status, len(rep.Entries))
	}

	// A member that asks for a snapshot in every request.
	rec, err := seal(h, gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), K: d.K, ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(d.K),
		Private: true, Seq: uint64(time.Now().UnixNano()) + 1})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	last := ask(0, 0, rec)
	if last.Status != RegSnapshot || len(last.Entries) < len(nodes) {
		t.Fatalf("the member's registration: %v with %d entries, want a snapshot of the %d nodes", last.Status, len(last.Entries), len(nodes))
	}
	rosters, soon := 1, 0
	for range 20 {
		switch rep := ask(0, 0, nil); rep.Status {
		case RegSnapshot:
			rosters++
			last = rep
		case RegTooSoon:
			soon++
		default:
			t.Fatalf("a snapshot request: %v, want a snapshot or too soon", rep.Status)
		}
	}
	elapsed := time.Since(started)
	if budget := snapBurst + int(elapsed/interval) + 1; rosters > budget {
		t.Errorf("%d of 21 snapshot requests in %v answered with the roster, want at most %d", rosters, elapsed.Round(time.Millisecond), budget)
	}
	t.Logf("21 snapshot requests in %v: %d answered with the roster, %d too soon", elapsed.Round(time.Millisecond), rosters, soon)
	if rep := ask(last.RosterID, last.Version, nil); rep.Status != RegUnchanged && rep.Status != RegDelta {
		t.Errorf("the member's steady round from its last answer: %v, want unchanged or a delta", rep.Status)
	}
	if h.Network().Connectedness(sp) != network.Connected {
		t.Error("the superpeer dropped the member")
	}
	waitFor(t, "the honest nodes to agree on a superpeer after the reads", agree)
}
