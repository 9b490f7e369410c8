package testnet

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
)

// TestElectionFailover runs every election algorithm (and bully with
// quorum) on 16 real libp2p nodes with the DHT strategy and two clusters.
// Once the overlay agrees with the brute-force answer, the superpeer of the
// larger cluster is stopped abruptly (its links cut). Every former member
// must then name the right successor, the member closest to the cluster key
// among the live ones, both as its superpeer and as its election's leader:
// the election, not only the lookup, made the choice. (Invitation does not
// elect by rank: there the former members must agree on one live member of
// theirs.) Then the whole overlay must agree with the brute-force answer
// again.
func TestElectionFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes per algorithm")
	}
	type variant struct {
		name   string
		quorum bool
	}
	var vs []variant
	for _, a := range classic.Algorithms() {
		vs = append(vs, variant{a, false})
	}
	vs = append(vs, variant{"bully", true})
	for _, v := range vs {
		name := v.name
		if v.quorum {
			name += "+quorum"
		}
		t.Run(name, func(t *testing.T) {
			tn := startNet(t, Config{
				N: 16, Target: dhtselect.Target{Superpeers: 2}, Seed: 1,
				AnnounceInterval: time.Second, Election: v.name, Quorum: v.quorum,
			})
			waitConverged(t, tn, tn.Started())

			victim, former := largestCluster(t, tn, v.name)
			if err := tn.Stop(victim); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			_, as := tn.Expected()
			want := as[slices.IndexFunc(as, func(a dhtselect.Assignment) bool { return a.ID == former[0] })].Superpeer

			ctx, cancel := context.WithTimeout(context.Background(), convergeBound)
			defer cancel()
			took, err := waitFor(ctx, func() error {
				if !ByRank(v.name) {
					for _, n := range tn.Nodes() {
						if n.ID() == former[0] {
							want = n.State().Superpeer.ID
						}
					}
					if !slices.Contains(former, want) {
						return fmt.Errorf("%s names %s, not a live former member", former[0].ShortString(), want.ShortString())
					}
				}
				for _, n := range tn.Nodes() {
					if !slices.Contains(former, n.ID()) {
						continue
					}
					if sp := n.State().Superpeer.ID; sp != want {
						return fmt.Errorf("%s names superpeer %s, want %s", n.ID().ShortString(), sp.ShortString(), want.ShortString())
					}
					if l := n.ElectionStats().Leader; l != want {
						return fmt.Errorf("%s's election names %s, want %s", n.ID().ShortString(), l.ShortString(), want.ShortString())
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("after superpeer %s stopped: %v", victim.ShortString(), err)
			}
			t.Logf("%s: %d former members follow successor %s %v after superpeer %s stopped",
				name, len(former), want.ShortString(), took.Round(time.Millisecond), victim.ShortString())
			waitConverged(t, tn, stopped)
			var sent uint64
			for _, n := range tn.Nodes() {
				for _, c := range n.ElectionStats().Sent {
					sent += c
				}
			}
			if sent == 0 {
				t.Fatal("no election message was sent")
			}
		})
	}
}

// largestCluster returns the superpeer of the cluster with the most members
// and the other members of that cluster. With an election that elects by
// rank the superpeer must be the member closest to the cluster key.
func largestCluster(t *testing.T, tn *Net, election string) (peer.ID, []peer.ID) {
	t.Helper()
	k, as := tn.Expected()
	var best dhtselect.Cluster
	for _, c := range dhtselect.Clusters(as, k) {
		if len(c.Members) > len(best.Members) {
			best = c
		}
	}
	if len(best.Members) < 3 {
		t.Fatalf("largest cluster has %d members; the test needs a successor and a follower", len(best.Members))
	}
	var sp peer.ID
	for _, n := range tn.Nodes() {
		if slices.Contains(best.Members, n.ID()) && n.State().Role == overlay.RoleSuperpeer {
			sp = n.ID()
		}
	}
	if sp == "" || (ByRank(election) && sp != best.Superpeer) {
		t.Fatalf("superpeer of the largest cluster is %s, want %s", sp.ShortString(), best.Superpeer.ShortString())
	}
	former := slices.DeleteFunc(slices.Clone(best.Members), func(p peer.ID) bool { return p == sp })
	return sp, former
}

// waitFor polls cond every 20 ms until it returns nil, and returns how long
// that took, or cond's last error when ctx ends first.
func waitFor(ctx context.Context, cond func() error) (time.Duration, error) {
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), err
		case <-tick.C:
		}
	}
}
