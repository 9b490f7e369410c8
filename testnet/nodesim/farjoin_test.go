package nodesim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
)

// TestFarJoinerUnderDefence: a node joins a cluster whose members are of
// age (S = 1, five nodes 10 ms apart, the defence against ID grinding
// on, 200 ms announce intervals, bully) from a host 10, 300 or 500 ms
// away from all of them, with an ID ground against the cluster key (the
// closest to it of all) or an ordinary one. It runs the honest code.
// Before it came of age (two epochs), no machine, its own included, may
// name it superpeer; it must become an ordinary member of the cluster,
// and every node name the same superpeer at the end.
//
// Found here, and live (testnet/attack's TestGroundIDLive, once in CI):
// the joiner took a role an announce interval after its first contact,
// before any registration had answered (500 ms: the digest came 2.1 s
// after the join), alone in its view; seeing no member eligible, it
// dropped the defence and claimed the cluster, for good (the members
// its view gathered afterwards were all new to it, so none was
// eligible); and a view that shrank to itself for a moment (a member
// whose registrar changed) dropped the defence again. Before the fix, at
// 500 ms, the ground joiner claimed the role through the whole two
// epochs and was never an ordinary member.
//
// Not farther: with an RTT above the membership TTL (three 200 ms
// announce intervals) registrations expire before they are renewed and
// the views flap. At 700 ms the joiner took no role for over 16 s
// (before digestWait it claimed the role at 2.6 s), and at 900 ms an
// ordinary joiner was no member within two epochs on one seed of three.
// That is the join by a digest (joinVia) at an RTT the intervals do not
// allow, not the defence.
func TestFarJoinerUnderDefence(t *testing.T) {
	const (
		n     = 5
		epoch = 8 * time.Second
	)
	for _, far := range []time.Duration{10 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond} {
		for _, ground := range []bool{true, false} {
			for seed := uint64(1); seed <= 3; seed++ {
				t.Run(fmt.Sprintf("%v/ground=%v/seed=%d", far, ground, seed), func(t *testing.T) {
					s, err := New(Config{N: n, Seed: seed, Stagger: time.Second, Latency: farMatrix(t, n, far),
						Node: node.Config{Target: dhtselect.Target{Superpeers: 1}, Election: "bully",
							AnnounceInterval: 200 * time.Millisecond, ReevaluateInterval: 200 * time.Millisecond,
							Epoch: node.EpochConfig{Length: epoch, Chain: 4096}}})
					if err != nil {
						t.Fatal(err)
					}
					// Every member is of age MinAge epochs after the one it
					// started in.
					s.Run(dhtselect.EpochStart(dhtselect.EpochOf(s.wall(), epoch)+node.MinAge+1, epoch).Sub(Epoch) + time.Second)
					ck := s.State(0).ClusterKey
					id := grindID(1, ck, 2000)
					if !ground {
						id = grindID(int(seed)+1, ck, 1)
					}
					j, err := s.AddID(id) // on host n: far from every member
					if err != nil {
						t.Fatal(err)
					}
					joined := s.Now()
					claimed, named, member := time.Duration(-1), time.Duration(-1), time.Duration(-1)
					s.Every(100*time.Millisecond, func(s *Sim) {
						since := s.Now() - joined
						if since >= 2*epoch {
							return // of age from here on, at the earliest
						}
						switch s.State(j).Role {
						case node.RoleSuperpeer:
							if claimed < 0 {
								claimed = since
							}
						case node.RoleOrdinary:
							if member < 0 {
								member = since
							}
						}
						for i := range n {
							if s.State(i).Superpeer == s.ID(j) && named < 0 {
								named = since
							}
						}
					})
					// The end: a second before the epoch's end, when the
					// hand-over at its start is over (it took 5 s to a
					// superpeer 900 ms away, in a run not kept).
					s.Run(dhtselect.EpochStart(dhtselect.EpochOf(s.wall(), epoch)+4, epoch).Sub(Epoch) - time.Second)
					if claimed >= 0 {
						t.Errorf("the joiner claimed the superpeer role %v after it joined, before it came of age", claimed)
					}
					if named >= 0 {
						t.Errorf("an honest member named the joiner superpeer %v after it joined, before it came of age", named)
					}
					if member < 0 {
						t.Errorf("the joiner was no ordinary member within two epochs")
					}
					sp := s.State(0).Superpeer
					for i := range n + 1 {
						if x := s.State(i); x.Superpeer != sp || sp == "" {
							t.Errorf("at the end node %d names %s superpeer, node 0 %s", i, x.Superpeer, sp)
						}
					}
				})
			}
		}
	}
}

// farMatrix is n hosts 10 ms apart and one more, host n, far from all.
func farMatrix(t *testing.T, n int, far time.Duration) *latency.Matrix {
	t.Helper()
	var b strings.Builder
	for i := range n + 1 {
		for j := range n + 1 {
			v := 10 * time.Millisecond
			switch {
			case i == j:
				v = 0
			case i == n || j == n:
				v = far
			}
			fmt.Fprintf(&b, "%g ", float64(v)/float64(time.Millisecond))
		}
		b.WriteString("\n")
	}
	m, err := latency.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
