package geometric

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// Superpeer is a superpeer as an ordinary peer choosing where to attach sees
// it.
type Superpeer struct {
	ID    ID
	Coord *coordinate.Coordinate
	// Load is the number of ordinary peers it serves now.
	Load int
	// RTT is an RTT the caller measured to it, or 0 when none was; a
	// measured RTT takes precedence over the estimate from coordinates.
	RTT time.Duration
}

// Attach returns the superpeer an ordinary peer at self should attach to:
// the nearest one with room (Load < capacity), nearness being the measured
// RTT where the caller supplied one and the distance estimated from
// coordinates otherwise; ties go to the smaller ID. Superpeers without a
// usable coordinate or measurement are skipped. It fails with ErrConfig for
// capacity < 1 and ErrNoRoom when no superpeer has room.
func Attach(self *coordinate.Coordinate, sps []Superpeer, capacity int) (ID, error) {
	if capacity < 1 {
		return "", fmt.Errorf("%w: capacity = %d, want at least 1 ordinary peer per superpeer", ErrConfig, capacity)
	}
	var best ID
	bestD := time.Duration(-1)
	for _, sp := range sps {
		if sp.Load >= capacity {
			continue
		}
		d := sp.RTT
		if d <= 0 {
			if self == nil || validate(self, len(self.Vec)) != nil || validate(sp.Coord, len(self.Vec)) != nil {
				continue // no usable estimate (nil, NaN, absurd, other dimension)
			}
			d = time.Duration(Distance(self, sp.Coord) * float64(time.Second))
		}
		if bestD < 0 || d < bestD || (d == bestD && sp.ID < best) {
			best, bestD = sp.ID, d
		}
	}
	if bestD < 0 {
		return "", fmt.Errorf("%w: none of %d superpeers has room (capacity %d) and a usable coordinate or RTT", ErrNoRoom, len(sps), capacity)
	}
	return best, nil
}

// AttachAll computes, offline, the attachment of every peer: coords[i] is the
// coordinate of peer i and superpeers lists the indexes of the superpeers.
// Pairs (ordinary peer, superpeer) are taken in order of increasing estimated
// distance (ties by peer, then superpeer index), and a peer attaches to the
// superpeer of its first pair that still has room, so each superpeer serves
// at most capacity ordinary peers. The result maps every peer to the index
// of its superpeer; a superpeer maps to itself. It fails with ErrConfig for a
// bad capacity, a superpeer index out of range or repeated, and with
// ErrNoRoom when the ordinary peers outnumber the room (then the result is
// still returned, with -1 for the peers left out).
func AttachAll(coords []*coordinate.Coordinate, superpeers []int, capacity int) ([]int, error) {
	return AttachAllBy(len(coords), func(i, j int) float64 { return Distance(coords[i], coords[j]) }, superpeers, capacity)
}

// AttachAllBy is AttachAll for n peers with any distance: dist(i, j) is
// the distance from peer i to superpeer j (benchmarks pass the true RTT to
// judge a placement apart from the coordinates' errors).
func AttachAllBy(n int, dist func(i, j int) float64, superpeers []int, capacity int) ([]int, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("%w: capacity = %d, want at least 1 ordinary peer per superpeer", ErrConfig, capacity)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	for k, s := range superpeers {
		if s < 0 || s >= n {
			return nil, fmt.Errorf("%w: superpeers[%d] = %d is out of range for %d peers", ErrConfig, k, s, n)
		}
		if out[s] >= 0 {
			return nil, fmt.Errorf("%w: superpeers[%d] = %d is listed twice", ErrConfig, k, s)
		}
		out[s] = s
	}
	type pair struct {
		d       float64
		peer, k int
	}
	pairs := make([]pair, 0, (n-len(superpeers))*len(superpeers))
	for i := range n {
		if out[i] >= 0 {
			continue
		}
		for k, s := range superpeers {
			pairs = append(pairs, pair{dist(i, s), i, k})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.peer, b.peer), cmp.Compare(a.k, b.k))
	})
	load := make([]int, len(superpeers))
	left := n - len(superpeers)
	for _, p := range pairs {
		if left == 0 {
			break
		}
		if out[p.peer] >= 0 || load[p.k] >= capacity {
			continue
		}
		out[p.peer] = superpeers[p.k]
		load[p.k]++
		left--
	}
	if left > 0 {
		return out, fmt.Errorf("%w: %d ordinary peers but %d superpeers × capacity %d; %d left unattached",
			ErrNoRoom, n-len(superpeers), len(superpeers), capacity, left)
	}
	return out, nil
}
