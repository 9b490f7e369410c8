package node

import "os"

import (
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
)

// SetDbgCarry is temporary.
func SetDbgCarry(f func(self peer.ID, carried int, old, nw classic.ID)) { dbgCarry = f }

var dbgKickK = os.Getenv("DBG_KICKK") != ""
var dbgLookupFirst = os.Getenv("DBG_LOOKUPFIRST") != ""
