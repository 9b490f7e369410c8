package overlay

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// Role is a peer's role in the overlay.
type Role uint8

// Roles.
const (
	RoleUnknown   Role = iota // not yet evaluated
	RoleOrdinary              // member of a cluster, attached to its superpeer
	RoleSuperpeer             // serves its cluster
)

func (r Role) String() string {
	switch r {
	case RoleOrdinary:
		return "ordinary"
	case RoleSuperpeer:
		return "superpeer"
	}
	return "unknown"
}

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

// MarshalText writes the role's name, so logs and JSON show "superpeer"
// rather than a number.
func (r Role) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a name that MarshalText wrote.
func (r *Role) UnmarshalText(b []byte) error {
	for _, x := range []Role{RoleUnknown, RoleOrdinary, RoleSuperpeer} {
		if string(b) == x.String() {
			*r = x
			return nil
		}
	}
	return fmt.Errorf("overlay: role %q: want unknown, ordinary or superpeer", b)
}
