package overlay

import (
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// Role is a peer's role in the overlay (the node machine's).
type Role = node.Role

// Roles.
const (
	RoleUnknown   = node.RoleUnknown   // not yet evaluated
	RoleOrdinary  = node.RoleOrdinary  // member of a cluster, attached to its superpeer
	RoleSuperpeer = node.RoleSuperpeer // serves its cluster
)

// EvtRoleChanged is emitted when the node becomes a superpeer or stops being one.
type EvtRoleChanged struct {
	Old, New Role
}

// EvtSuperpeerChanged is emitted when the node's superpeer changes (for a
// superpeer, its superpeer is itself).
type EvtSuperpeerChanged struct {
	Old, New peer.AddrInfo
}

// EvtClusterChanged is emitted when the node's cluster (k or key) or its
// member list changes.
type EvtClusterChanged struct {
	K          int
	ClusterKey dhtselect.Key
	Members    []peer.ID
}

// EvtSuperpeerElected is emitted when the node's cluster election (Config.
// Election) names a leader: the superpeer it elected, and the term (0
// unless the algorithm or Quorum counts terms).
type EvtSuperpeerElected struct {
	Superpeer peer.ID
	Term      uint64
}

// EvtSuperpeerLost is emitted when the node's cluster election stops
// naming the leader it named (it died, or an election started).
type EvtSuperpeerLost struct {
	Superpeer peer.ID
}

// eventTypes lists every event type the node emits.
var eventTypes = []any{new(EvtRoleChanged), new(EvtSuperpeerChanged), new(EvtClusterChanged),
	new(EvtSuperpeerElected), new(EvtSuperpeerLost)}
