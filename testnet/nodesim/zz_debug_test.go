package nodesim

import (
	"fmt"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

func TestZZDebug(t *testing.T) {
	s, _ := New(Config{N: 64, Seed: 1, Stagger: 5 * time.Second, Node: node.Config{Election: "bully"}})
	s.RunFor(2 * time.Minute)
	var keys []dhtselect.Key
	for _, n := range s.nodes {
		keys = append(keys, n.key)
	}
	for i, n := range s.nodes {
		st := n.state
		w := dhtselect.Closest(n.key.Cluster(st.K), keys)
		j, _ := s.indexOf(st.Superpeer)
		fmt.Printf("%2d k=%d %s role=%v sp=%2d want=%2d members=%d est=%v\n", i, st.K, st.Prefix, st.Role, j, w, len(st.Members), st.Size)
	}
}
