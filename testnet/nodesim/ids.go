package nodesim

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"
)

// AddID adds a node with the given ID that joins the network now, and
// returns its index: an ID ground by an attacker (see grind_test.go). The
// ID must be new, and should sort after every ID in use (as "x…" sorts
// after the nodes' own "n…"), or the views lose their cheap order.
func (s *Sim) AddID(id peer.ID) (int, error) {
	if _, ok := s.index[id]; ok || id == "" {
		return 0, fmt.Errorf("%w: ID %q is empty or in use", ErrConfig, id)
	}
	return s.addNodeID(s.now, id), nil
}
