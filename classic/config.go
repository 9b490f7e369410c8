package classic

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// Errors returned by the constructors of every algorithm. Each is wrapped with %w together with a message that names
// the offending value, so callers test them with errors.Is.
var (
	// ErrBadID reports a Config.ID or Config.Peers entry that is empty,
	// duplicated, or (for Config.ID) not one of Config.Peers.
	ErrBadID = errors.New("classic: bad process ID")
	// ErrBadTicks reports a HeartbeatTicks or TimeoutTicks value that is
	// negative, or a TimeoutTicks that does not exceed HeartbeatTicks.
	ErrBadTicks = errors.New("classic: bad tick setting")
	// ErrBadCandidates reports an empty, duplicated or unknown candidate set.
	ErrBadCandidates = errors.New("classic: bad candidate set")
	// ErrBadNeighbours reports an unusable echo neighbour set.
	ErrBadNeighbours = errors.New("classic: bad neighbour set")
	// ErrBadOption reports an option value out of range.
	ErrBadOption = errors.New("classic: bad option")
	// ErrRebuild reports a change that a machine cannot take in place
	// (Reconfigurer): the driver builds a new machine instead.
	ErrRebuild = errors.New("classic: the change needs a new machine")
)

// Defaults applied by every constructor when a tick field of Config is zero.
const (
	electDefaultHeartbeatTicks = 2
	electDefaultTimeoutTicks   = 10
)

// maxTerm bounds the terms and election sequence numbers a machine takes
// from a message; one above it is dropped. Honest processes count up by one
// per election and never get near it, but a term of 2^64-1 from a hostile or
// broken peer would make the next term "one above" wrap round to 0.
const maxTerm = math.MaxUint64 / 2

// missedTicks is how long a follower's leader has been silent when it
// has missed a heartbeat: two heartbeat periods, or half a timeout if that
// is shorter (Bully.missed, CandidateElection.missed).
func (c Config) missedTicks() int { return min(2*c.HeartbeatTicks, c.TimeoutTicks/2) }

// reconfigConfig checks cfg, a new configuration for the process that cur
// configures (Reconfigurer), as its constructor would: the same ID
// (ErrBadID otherwise: a new machine is built for another process), a nil
// Rand keeps cur's source, and the defaults apply.
func reconfigConfig(cur, cfg Config, algo string) (Config, error) {
	if cfg.ID != cur.ID {
		return cfg, fmt.Errorf("%w: %s: Config.ID %q is not this process %q; build a new machine instead", ErrBadID, algo, cfg.ID, cur.ID)
	}
	if cfg.Rand == nil {
		cfg.Rand = cur.Rand
	}
	return electConfig(cfg, algo, true)
}

// electConfig validates cfg for the algorithm named algo, fills in defaults
// (Rank, Rand, tick counts) and returns the completed copy. When heartbeats is
// true the algorithm uses HeartbeatTicks and TimeoutTicks must exceed it.
func electConfig(cfg Config, algo string, heartbeats bool) (Config, error) {
	if cfg.ID == None {
		return cfg, fmt.Errorf("%w: %s: Config.ID is empty; set it to this process's ID", ErrBadID, algo)
	}
	if len(cfg.Peers) == 0 {
		return cfg, fmt.Errorf("%w: %s: Config.Peers is empty; list every cluster member, %q included", ErrBadID, algo, cfg.ID)
	}
	seen := make(map[ID]bool, len(cfg.Peers))
	for i, p := range cfg.Peers {
		if p == None {
			return cfg, fmt.Errorf("%w: %s: Config.Peers[%d] is empty", ErrBadID, algo, i)
		}
		if seen[p] {
			return cfg, fmt.Errorf("%w: %s: Config.Peers lists %q twice (again at index %d)", ErrBadID, algo, p, i)
		}
		seen[p] = true
	}
	if !seen[cfg.ID] {
		return cfg, fmt.Errorf("%w: %s: Config.ID %q is not in Config.Peers %v; the process must list itself", ErrBadID, algo, cfg.ID, cfg.Peers)
	}
	if cfg.HeartbeatTicks < 0 || cfg.TimeoutTicks < 0 {
		return cfg, fmt.Errorf("%w: %s: HeartbeatTicks=%d, TimeoutTicks=%d; ticks must be positive (0 selects the default)",
			ErrBadTicks, algo, cfg.HeartbeatTicks, cfg.TimeoutTicks)
	}
	if cfg.HeartbeatTicks == 0 {
		cfg.HeartbeatTicks = electDefaultHeartbeatTicks
	}
	if cfg.TimeoutTicks == 0 {
		cfg.TimeoutTicks = max(electDefaultTimeoutTicks, 2*cfg.HeartbeatTicks+1)
	}
	if heartbeats && cfg.TimeoutTicks <= cfg.HeartbeatTicks {
		return cfg, fmt.Errorf("%w: %s: TimeoutTicks=%d must exceed HeartbeatTicks=%d, or every follower suspects a live leader",
			ErrBadTicks, algo, cfg.TimeoutTicks, cfg.HeartbeatTicks)
	}
	if cfg.Rank == nil {
		cfg.Rank = HighestID{}
	}
	if cfg.Rand == nil {
		cfg.Rand = electSeededRand(cfg.ID)
	}
	cfg.Peers = slices.Clone(cfg.Peers)
	return cfg, nil
}

// electSeededRand returns the fixed-seed source used when Config.Rand is nil.
// The seed is derived from the ID so that processes do not all draw the same
// numbers, yet every run is reproducible.
func electSeededRand(id ID) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(id))
	return rand.New(rand.NewPCG(h.Sum64(), 0x5eed))
}

// electByRank returns ids sorted from the highest to the lowest rank.
func electByRank(r Rank, ids []ID) []ID {
	out := slices.Clone(ids)
	slices.SortStableFunc(out, func(a, b ID) int { return r.Compare(b, a) })
	return out
}

// electBest returns the highest-ranked of ids, or None when ids is empty.
func electBest(r Rank, ids []ID) ID {
	best := None
	for _, id := range ids {
		if best == None || r.Compare(id, best) > 0 {
			best = id
		}
	}
	return best
}

// outbox holds a machine's outgoing messages until Ready takes them. Every
// machine embeds one; it stamps the sender and fans out broadcasts.
type outbox struct {
	self  ID
	peers []ID // the cluster, in Config.Peers order
	msgs  []Message
}

func newOutbox(cfg Config) outbox { return outbox{self: cfg.ID, peers: cfg.Peers} }

func (o *outbox) send(m Message) {
	m.From = o.self
	o.msgs = append(o.msgs, m)
}

// broadcast sends a copy of m to every other member, in Peers order.
func (o *outbox) broadcast(m Message) {
	o.msgs = slices.Grow(o.msgs, len(o.peers))
	for _, p := range o.peers {
		if p != o.self {
			m.To = p
			if m.IDs != nil {
				m.IDs = slices.Clone(m.IDs) // receivers must not share a slice
			}
			o.send(m)
		}
	}
}

// take returns the pending messages and clears them.
func (o *outbox) take() []Message {
	m := o.msgs
	o.msgs = nil
	return m
}
