package classic

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownAlgorithm reports an algorithm name that Algorithms does not
// list.
var ErrUnknownAlgorithm = errors.New("classic: unknown election algorithm")

// DefaultListLen is the failover list length New gives next-in-line when
// Options.ListLen is zero.
const DefaultListLen = 3

// algorithms lists the names New accepts, in the order Algorithms returns.
var algorithms = []string{"bully", "ring", "ring-max", "next-in-line", "candidate", "invitation", "echo", "stable"}

// Algorithms returns the names New accepts, as a --election flag spells
// them: bully, ring, ring-max, next-in-line, candidate, invitation, echo,
// stable. The slice is the caller's.
func Algorithms() []string { return slices.Clone(algorithms) }

// Options carries what some algorithms need beyond Config. A zero field
// takes the default given with it; a field the named algorithm does not use
// is ignored. New passes the values on and leaves their validation to the
// constructors (see each New* function).
type Options struct {
	// ListLen is next-in-line's failover list length (NewNextInLine's
	// listLen). 0 means DefaultListLen (3); a length of at least
	// len(Peers)-1 lists every other member.
	ListLen int
	// Candidates are the members that may lead under candidate
	// (NewCandidate). Empty means every member of Config.Peers.
	Candidates []ID
	// Neighbours are the processes echo's Config.ID reaches directly
	// (NewEcho). Empty means every other member of Config.Peers (a full
	// mesh).
	Neighbours []ID
	// Capacity is this process's capacity under echo (NewEcho); the largest
	// wins. 0 means 1.
	Capacity uint64
	// Quorum wraps the machine with terms and majority (NewQuorum), so that
	// at most one process leads per term and a minority side has no leader.
	Quorum bool
	// HardState is the Quorum state the driver stored before a restart
	// (zero for a fresh process). Used only with Quorum.
	HardState HardState
}

// New returns the election machine named name (one of Algorithms) for cfg,
// built by its constructor with opts' extra parameters, and wrapped with
// NewQuorum(cfg, machine, opts.HardState) when opts.Quorum is set.
//
// An unknown name gives an error wrapping ErrUnknownAlgorithm that lists the
// valid names; otherwise errors are the constructors' (ErrBadID,
// ErrBadTicks, ErrBadCandidates, ErrBadNeighbours, ErrBadOption), wrapped
// with the algorithm's name.
func New(name string, cfg Config, opts Options) (Machine, error) {
	m, err := newInner(name, cfg, opts)
	if err != nil {
		return nil, err
	}
	if !opts.Quorum {
		return m, nil
	}
	q, err := NewQuorum(cfg, m, opts.HardState)
	if err != nil {
		return nil, fmt.Errorf("election %q with quorum: %w", name, err)
	}
	q.fresh = func(c Config) (Machine, error) { return newInner(name, c, opts) }
	return q, nil
}

func newInner(name string, cfg Config, opts Options) (m Machine, err error) {
	switch name {
	case "bully":
		m, err = NewBully(cfg)
	case "ring":
		m, err = NewRing(cfg)
	case "ring-max":
		m, err = NewRingMax(cfg)
	case "next-in-line":
		listLen := opts.ListLen
		if listLen == 0 {
			listLen = DefaultListLen
		}
		m, err = NewNextInLine(cfg, listLen)
	case "candidate":
		candidates := opts.Candidates
		if len(candidates) == 0 {
			candidates = cfg.Peers
		}
		m, err = NewCandidate(cfg, candidates)
	case "invitation":
		m, err = NewInvitation(cfg)
	case "echo":
		neighbours := opts.Neighbours
		if len(neighbours) == 0 {
			neighbours = slices.DeleteFunc(slices.Clone(cfg.Peers), func(p ID) bool { return p == cfg.ID })
		}
		capacity := opts.Capacity
		if capacity == 0 {
			capacity = 1
		}
		m, err = NewEcho(cfg, neighbours, capacity)
	case "stable":
		m, err = NewStable(cfg)
	default:
		return nil, fmt.Errorf("%w: %q; choose one of %s", ErrUnknownAlgorithm, name, strings.Join(algorithms, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("election %q: %w", name, err)
	}
	return m, nil
}
