package node

import (
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
)

// SetDbgCarry is temporary.
func SetDbgCarry(f func(self peer.ID, carried int, old, nw classic.ID)) { dbgCarry = f }
