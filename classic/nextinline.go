package classic

import (
	"fmt"
	"slices"
)

// NextInLine is next-in-line failover as a Machine: the leader names its
// successors in advance, so a leader failure is usually repaired without any
// election messages.
//
// The protocol, all timing in ticks (T = TimeoutTicks, H = HeartbeatTicks):
//
//   - The leader publishes a failover list in the IDs field of its
//     COORDINATOR and of every HEARTBEAT (sent each H): the other members
//     from the highest rank down, at most listLen of them. Followers keep
//     the last list they received.
//   - A follower that hears nothing from its leader for T has noticed the
//     failure. The process at position i of the list (0-based) waits i·T
//     more and then takes over directly: it becomes leader and sends
//     COORDINATOR with its own list. Position 0 takes over at once. A
//     COORDINATOR or heartbeat from a higher-ranked process during the wait
//     stops it: someone before it took over.
//   - A process not on the list waits len(list)·T and then runs a full bully
//     election (see Bully); so does every process when no list is known yet,
//     and whenever Campaign is called (a recovered process bullies its way
//     back in this way).
//
// The waits are T apart because processes notice the failure at slightly
// different times (up to H plus a delivery apart); T must exceed that skew
// plus the delivery of the COORDINATOR, which the TimeoutTicks > round trip
// requirement already gives. Everything else (OK, bully back, heartbeats)
// is as in Bully.
type NextInLine struct {
	b Bully
}

var _ Machine = (*NextInLine)(nil)

// NewNextInLine returns a NextInLine for cfg. The leader's failover list
// holds at most listLen members; 0 means all other members. It uses the same
// Config fields and defaults as NewBully. Errors wrap ErrBadID, ErrBadTicks
// or ErrBadOption (a negative listLen).
func NewNextInLine(cfg Config, listLen int) (*NextInLine, error) {
	cfg, err := electConfig(cfg, "NewNextInLine", true)
	if err != nil {
		return nil, err
	}
	if listLen < 0 {
		return nil, fmt.Errorf("%w: NewNextInLine: listLen=%d must be 0 (all other members) or positive", ErrBadOption, listLen)
	}
	return &NextInLine{b: *newBully(cfg, true, listLen)}, nil
}

// FailoverList returns the failover list this process knows: its own when it
// leads, otherwise the last one its leader published (nil before any).
func (n *NextInLine) FailoverList() []ID { return slices.Clone(n.b.list) }

// Campaign starts a full bully election now.
func (n *NextInLine) Campaign() { n.b.Campaign() }

// Step implements Machine.
func (n *NextInLine) Step(m Message) { n.b.Step(m) }

// Tick implements Machine.
func (n *NextInLine) Tick() { n.b.Tick() }

// Ready implements Machine.
func (n *NextInLine) Ready() Ready { return n.b.Ready() }
