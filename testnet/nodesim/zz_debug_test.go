package nodesim

import (
	"fmt"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

func TestZZDebug(t *testing.T) {
	s, _ := New(Config{N: 16, Seed: 0, Stagger: 3 * time.Second,
			Node: node.Config{Target: dhtselect.Target{Superpeers: 2}, Election: "bully", Quorum: true,
				AnnounceInterval: time.Second, ReevaluateInterval: time.Second}})
	s.Log = func(at time.Duration, i int, n node.Note) {
		if i == 1 && at < 20*time.Second {
			fmt.Println("LOG", at, i, n.Msg, n.Args)
		}
	}
	s.Record = true
	s.RunFor(2 * time.Minute)
	for _, c := range s.Changes {
		if c.Node == 1 && c.At < 20*time.Second {
			j, _ := s.indexOf(c.State.Superpeer)
			fmt.Println("CHG", c.At, c.State.Role, c.State.K, c.State.Prefix, j, len(c.State.Members), c.State.Size)
		}
	}
	var keys []dhtselect.Key
	for _, n := range s.nodes {
		keys = append(keys, n.key)
	}
	for i, n := range s.nodes {
		st := n.state
		w := dhtselect.Closest(n.key.Cluster(st.K), keys)
		j, _ := s.indexOf(st.Superpeer)
		fmt.Printf("%2d k=%d %s role=%v sp=%2d want=%2d members=%d est=%v leader=%v term=%d\n", i, st.K, st.Prefix, st.Role, j, w, len(st.Members), st.Size, n.m.Election().Leader, n.m.Election().Term)
	}
}
