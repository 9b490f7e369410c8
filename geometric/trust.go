package geometric

import (
	"math"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// Tolerance bounds how far the RTT that a peer's published coordinate
// predicts may stray from the RTT measured to it before the coordinate is
// disbelieved (Plausible).
//
// It answers a lying peer: one that publishes a false coordinate, say at
// the spot where a token settles with no height, so that tokens come to it
// and ordinary peers attach to it. It cannot make the RTT others measure
// to it shorter than the network makes it, so from the peers that would
// rely on the claim, those it claims to sit near, its measured RTT is far
// above the predicted one. (It can make itself look farther by delaying
// its answers; this check does not see that, and the lie gains it no
// token.)
type Tolerance struct {
	// Rel is the error allowed in proportion to the measured RTT.
	Rel float64
	// Abs is the error allowed on top of Rel·RTT, for short paths, where
	// an honest fit is off by a few milliseconds.
	Abs time.Duration
}

// DefaultTolerance returns a tolerance of 50 % plus 10 ms. Rel must stay
// below 1: with Rel ≥ 1 every claim of being nearer than measured passes.
// On PlanetLab, with coordinates fitted by Simulate (S = 25, seeds 1-5,
// bench.GeometricAttack), a claim checked by the 8 nearest honest peers
// with VetClaim fails for about 5 % of honest peers (their fit is poor;
// the mean RTT to the superpeer loses 4 % by it) and for 90 % of liars
// claiming a superpeer's spot (the others truly sit near it). Abs = 20 ms
// turns away under 1 % of honest peers but only 77 % of those liars
// (seeds 1-3).
func DefaultTolerance() Tolerance {
	return Tolerance{Rel: 0.5, Abs: 10 * time.Millisecond}
}

// Scaled returns t with Abs multiplied by f (see Config.Scaled).
func (t Tolerance) Scaled(f float64) Tolerance {
	t.Abs = ScaleLength(t.Abs, f)
	return t
}

// Plausible reports whether the coordinate claimed by a peer agrees with
// the RTT measured to it from self: |Distance(self, claimed) − measured| ≤
// Abs + Rel·measured. It reports false for an unusable input: a coordinate
// that is not valid or not of self's dimensionality, or a measured RTT
// outside (0, MaxRTT].
func Plausible(self, claimed *coordinate.Coordinate, measured time.Duration, tol Tolerance) bool {
	if self == nil || validate(self, len(self.Vec)) != nil || validate(claimed, len(self.Vec)) != nil ||
		measured <= 0 || measured > MaxRTT {
		return false
	}
	m := measured.Seconds()
	return math.Abs(Distance(self, claimed)-m) <= tol.Abs.Seconds()+tol.Rel*m
}

// TooNear reports whether the coordinate claimed by a peer puts it nearer
// to self than the RTT measured to it, by more than the tolerance:
// Distance(self, claimed) < measured − (Abs + Rel·measured). It is the
// half of Plausible that a lie needs (a peer cannot make its RTT shorter
// than the network makes it, and it claims to sit near a spot to draw
// tokens and members to it); a claim that puts a peer farther than it is
// draws nothing to it, and is where honest peers whose coordinate fits
// poorly mostly err. It reports true for an unusable input, as Plausible
// reports false.
func TooNear(self, claimed *coordinate.Coordinate, measured time.Duration, tol Tolerance) bool {
	if self == nil || validate(self, len(self.Vec)) != nil || validate(claimed, len(self.Vec)) != nil ||
		measured <= 0 || measured > MaxRTT {
		return true
	}
	m := measured.Seconds()
	return Distance(self, claimed) < m-(tol.Abs.Seconds()+tol.Rel*m)
}

// Check is one vantage point's view of a peer: the checker's own
// coordinate and the RTT it measured to the peer.
type Check struct {
	Self *coordinate.Coordinate
	RTT  time.Duration
}

// VetClaim reports whether a claimed coordinate is to be trusted, for
// holding tokens and serving as a superpeer: whether more than half of the
// checks find it Plausible. A peer with no checks is not trusted. Checks
// should come from the peers that rely on the claim (those nearest to the
// claimed coordinate), and from honest ones: a majority of colluding
// checkers vouches for anything.
func VetClaim(claimed *coordinate.Coordinate, checks []Check, tol Tolerance) bool {
	ok := 0
	for _, c := range checks {
		if Plausible(c.Self, claimed, c.RTT, tol) {
			ok++
		}
	}
	return 2*ok > len(checks)
}
