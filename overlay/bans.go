package overlay

import (
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Banned returns the peers the node bans now (for sending bad messages,
// see wire.go), sorted.
func (n *Node) Banned() []peer.ID {
	g := &n.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	var out []peer.ID
	for p := range g.banned {
		if g.bannedLocked(p, now) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
