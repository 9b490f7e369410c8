package nodesim

import (
	"errors"
	"testing"
	"time"

	"github.com/superpeer/superpeer/overlay/node"
)

func TestConverges(t *testing.T) {
	for _, election := range []string{"", "bully"} {
		t.Run("election="+election, func(t *testing.T) {
			s, err := New(Config{N: 64, Seed: 1, Stagger: 5 * time.Second, Node: node.Config{Election: election}})
			if err != nil {
				t.Fatal(err)
			}
			if !s.RunUntil((*Sim).Converged, time.Second, 2*time.Minute) {
				x := s.Take()
				t.Fatalf("not converged after 2 virtual minutes: %+v", x)
			}
			t.Logf("converged at %v: %+v, stats %+v", s.Now(), s.Take(), s.Stats())
		})
	}
}

// TestSeedReplays: a seed replays a run exactly, faults included: the
// same trace of every state change twice; another seed gives another.
func TestSeedReplays(t *testing.T) {
	run := func(seed uint64) (uint64, int) {
		s, err := New(Config{N: 48, Seed: seed, Stagger: 5 * time.Second, Jitter: 10 * time.Millisecond, Loss: 0.01,
			Node: node.Config{Election: "bully"}})
		if err != nil {
			t.Fatal(err)
		}
		s.Record = true
		s.RunFor(30 * time.Second)
		s.Churn(0.2, time.Minute, nil)
		s.After(20*time.Second, func(s *Sim) { s.Partition([]int{1, 2, 3, 4, 5}) })
		s.After(40*time.Second, func(s *Sim) { s.Heal() })
		s.RunFor(90 * time.Second)
		return s.Trace(), len(s.Changes)
	}
	a, na := run(7)
	b, nb := run(7)
	if a != b || na != nb {
		t.Fatalf("seed 7 twice: traces %x (%d changes) and %x (%d changes)", a, na, b, nb)
	}
	if c, _ := run(8); c == a {
		t.Fatalf("seeds 7 and 8 gave the same trace %x: the trace does not depend on the run", a)
	}
	if na < 48 {
		t.Fatalf("only %d state changes: the run did not run", na)
	}
}

// TestConfigErrors: bad settings are refused with ErrConfig, not run.
func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{N: 0},
		{N: 4, Loss: 1},
		{N: 4, Jitter: -1},
		{N: 4, GossipDelay: -time.Second},
		{N: 4, QueryTimeout: -1},
		{N: 4, GeoTimeout: -1},
		{N: 4, LookupRTTs: -1},
		{N: 4, ConnHigh: -1},
		{N: 4, ConnGrace: -time.Second},
		{N: 4, ConnLow: 200}, // above the default high watermark
		{N: 4, ConnLow: 10, ConnHigh: 5},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v): err = %v, want ErrConfig", c, err)
		}
	}
}
