package nodesim

import (
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
