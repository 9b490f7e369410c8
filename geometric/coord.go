package geometric

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// Bounds on what Sample and Valid accept.
const (
	// MaxRTT is the largest RTT sample accepted: 10 s, the bound serf's own
	// client enforces. Anything longer is a broken measurement or a peer that
	// is gone, not a path worth fitting.
	MaxRTT = 10 * time.Second

	// MaxComponent is the largest absolute value, in seconds, accepted for any
	// component of a coordinate (each Vec entry, Height, Adjustment): the
	// distance a single component can stand for is then at most one MaxRTT.
	// No honest fit on Earth gets anywhere near it (the PlanetLab fit stays
	// below 0.3 s); a larger value is corrupt or forged.
	MaxComponent = 10.0

	// Dimensions is the dimensionality of serf's default configuration (8
	// Euclidean dimensions, plus a height), which Valid expects.
	Dimensions = 8
)

// coincide is serf's zeroThreshold (seconds): below this distance serf treats
// two coordinates as one point and draws a random direction from the global
// math/rand source. Client keeps its coordinate away from that case so that
// every run is reproducible.
const coincide = 1e-6

// CoordConfig configures a Client.
type CoordConfig struct {
	// Vivaldi holds serf's tuning parameters (Dabek et al. 2004, Ledlie et
	// al. 2007): 8 dimensions plus height, a median filter over the last 3
	// samples per peer, an adjustment window of 20 samples and gravity ρ of
	// 150 s. Nil means coordinate.DefaultConfig().
	Vivaldi *coordinate.Config

	// Rand supplies the small deterministic nudges that keep the coordinate
	// off the points where serf would use global randomness. Nil means a
	// source with a fixed seed, the same for every Client: give each peer
	// a source of its own, or all of them leave the origin in the same
	// direction, microseconds apart, where serf's height step (which
	// divides by that distance) throws heights to seconds.
	Rand *rand.Rand
}

// DefaultCoordConfig returns serf's defaults and a fixed-seed Rand.
func DefaultCoordConfig() CoordConfig {
	return CoordConfig{Vivaldi: coordinate.DefaultConfig()}
}

// Client fits this peer's network coordinate from RTT samples. It is a thin
// wrapper over serf's coordinate.Client that rejects bad input instead of
// folding it in, and that never lets serf draw from the global random source
// (which would make runs unrepeatable). It is not safe for concurrent use
// without a lock of the caller's.
type Client struct {
	cfg    CoordConfig
	vc     *coordinate.Client
	resets int
}

// NewClient returns a Client at the origin of the coordinate space.
func NewClient(cfg CoordConfig) (*Client, error) {
	if cfg.Vivaldi == nil {
		cfg.Vivaldi = coordinate.DefaultConfig()
	}
	if cfg.Vivaldi.Dimensionality == 0 {
		return nil, fmt.Errorf("%w: CoordConfig.Vivaldi.Dimensionality is 0; use coordinate.DefaultConfig() (8)", ErrConfig)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(0x6e0, 0x5eed))
	}
	vc, err := coordinate.NewClient(cfg.Vivaldi)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return &Client{cfg: cfg, vc: vc}, nil
}

// Coordinate returns a copy of the current coordinate.
func (c *Client) Coordinate() *coordinate.Coordinate { return c.vc.GetCoordinate() }

// DistanceTo returns the RTT estimated between this peer and other, which
// must have the Client's dimensionality.
func (c *Client) DistanceTo(other *coordinate.Coordinate) time.Duration {
	return c.vc.DistanceTo(other)
}

// Forget drops the RTT filter state kept for peer, for instance when it
// leaves.
func (c *Client) Forget(peer ID) { c.vc.ForgetNode(string(peer)) }

// Sample folds one RTT measurement to peer, whose coordinate is remote, into
// this peer's coordinate and returns the updated coordinate. It rejects,
// without changing any state, an RTT that is zero, negative or above MaxRTT
// (ErrBadRTT) and a remote coordinate that fails validation (ErrBadCoordinate).
func (c *Client) Sample(peer ID, remote *coordinate.Coordinate, rtt time.Duration) (*coordinate.Coordinate, error) {
	if rtt <= 0 || rtt > MaxRTT {
		return nil, fmt.Errorf("%w: rtt %v to peer %q is outside (0, %v]", ErrBadRTT, rtt, peer, MaxRTT)
	}
	if err := validate(remote, int(c.cfg.Vivaldi.Dimensionality)); err != nil {
		return nil, fmt.Errorf("coordinate of peer %q: %w", peer, err)
	}
	// Keep serf away from the two points where it would use global
	// randomness: our Vec on the remote's, and our Vec on the origin (the
	// gravity step).
	own := c.vc.GetCoordinate()
	if dist(own.Vec, remote.Vec) <= coincide || norm(own.Vec) <= coincide {
		if err := c.nudge(own, remote); err != nil {
			return nil, err
		}
	}
	out, err := c.vc.Update(string(peer), remote, rtt)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCoordinate, err)
	}
	// The gravity step runs on the coordinate after the Vivaldi step, which
	// the check above cannot see: when that step lands on the origin, serf
	// pushes along a direction drawn from the global source. Seen in
	// nodesim (a 100-node geometric replay diverged at 22.9 virtual s).
	// Such a draw moves Vec by at most the gravity force, so an output
	// within that bound of the origin may carry it: replace it with a
	// deterministic nudge off the origin. Height, Error and Adjustment are not
	// touched by a draw.
	if norm(out.Vec) <= gravityDrawBound(out, c.cfg.Vivaldi) {
		clear(out.Vec)
		if err := c.nudge(out, remote); err != nil {
			return nil, err
		}
		out = c.vc.GetCoordinate()
	}
	if err := validate(out, int(c.cfg.Vivaldi.Dimensionality)); err != nil {
		// Seen live (100 nodes on two loaded cores, RTTs inflated by
		// scheduling): serf's coordinate ran off to 1e11 s. A coordinate
		// nobody would accept is worth less than none: start again.
		if rerr := c.vc.SetCoordinate(coordinate.NewCoordinate(c.cfg.Vivaldi)); rerr != nil {
			return nil, fmt.Errorf("geometric: resetting a diverged coordinate: %w", rerr)
		}
		c.resets++
		return nil, fmt.Errorf("own coordinate diverged after a sample from %q, reset to the origin: %w", peer, err)
	}
	return out, nil
}

// nudge moves own's Vec to a small deterministic offset from where it is,
// clear of the origin and of remote's Vec, and makes it the Client's
// coordinate.
func (c *Client) nudge(own, remote *coordinate.Coordinate) error {
	base := append([]float64(nil), own.Vec...)
	for {
		for i := range own.Vec {
			own.Vec[i] = base[i] + (c.cfg.Rand.Float64()-0.5)*20*coincide
		}
		if norm(own.Vec) > coincide && dist(own.Vec, remote.Vec) > coincide {
			break
		}
	}
	if err := c.vc.SetCoordinate(own); err != nil {
		return fmt.Errorf("geometric: nudging own coordinate: %w", err)
	}
	return nil
}

// gravityDrawBound is the largest |Vec| that serf's gravity step can leave
// behind when it drew its direction at random: the step starts within
// coincide of the origin and moves by (d/ρ)², where d, the distance to the
// origin then, is at most coincide plus both heights plus the positive part
// of the adjustment (gravity changes neither). The small factor covers
// rounding.
func gravityDrawBound(out *coordinate.Coordinate, cfg *coordinate.Config) float64 {
	d := coincide + out.Height + cfg.HeightMin + math.Max(out.Adjustment, 0)
	return coincide + math.Pow(d/cfg.GravityRho, 2)*1.001 + 1e-12
}

// Resets counts the times the coordinate diverged and was reset.
func (c *Client) Resets() int { return c.resets }

// RTTFromSeconds converts an RTT measured in seconds as a float, as some
// transports report it, to a time.Duration. It fails with ErrBadRTT for NaN,
// infinite, zero, negative or too large values (a time.Duration itself can be
// neither NaN nor infinite, so Sample checks only the range).
func RTTFromSeconds(s float64) (time.Duration, error) {
	if math.IsNaN(s) || math.IsInf(s, 0) || s <= 0 || s > MaxRTT.Seconds() {
		return 0, fmt.Errorf("%w: %v s is not a finite RTT in (0, %v]", ErrBadRTT, s, MaxRTT)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// Valid reports whether c is a usable coordinate of serf's default
// dimensionality (Dimensions): non-nil, every component finite and no larger
// in absolute value than MaxComponent seconds, Height and Error not negative.
// Gossip validators use it to reject malformed or forged coordinates. The
// error wraps ErrBadCoordinate and names the offending field.
func Valid(c *coordinate.Coordinate) error { return validate(c, Dimensions) }

func validate(c *coordinate.Coordinate, dims int) error {
	if c == nil {
		return fmt.Errorf("%w: nil coordinate", ErrBadCoordinate)
	}
	if len(c.Vec) != dims {
		return fmt.Errorf("%w: Vec has %d dimensions, want %d", ErrBadCoordinate, len(c.Vec), dims)
	}
	// The happy path allocates nothing: validate runs for every gossiped
	// position and every sample, and the field names are formatted only
	// for the error.
	for i, v := range c.Vec {
		if err := checkComponent(v, "Vec", i); err != nil {
			return err
		}
	}
	if err := checkComponent(c.Height, "Height", -1); err != nil {
		return err
	}
	if err := checkComponent(c.Adjustment, "Adjustment", -1); err != nil {
		return err
	}
	if err := checkComponent(c.Error, "Error", -1); err != nil {
		return err
	}
	if c.Height < 0 {
		return fmt.Errorf("%w: Height = %v is negative", ErrBadCoordinate, c.Height)
	}
	if c.Error < 0 {
		return fmt.Errorf("%w: Error = %v is negative", ErrBadCoordinate, c.Error)
	}
	return nil
}

// checkComponent checks one component of a coordinate: finite and at most
// MaxComponent in absolute value. The name is name, or name[i] for i >= 0.
func checkComponent(v float64, name string, i int) error {
	if !math.IsNaN(v) && math.Abs(v) <= MaxComponent {
		return nil // finite too: MaxComponent is
	}
	if i >= 0 {
		name = fmt.Sprintf("%s[%d]", name, i)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %s = %v is not finite", ErrBadCoordinate, name, v)
	}
	return fmt.Errorf("%w: |%s| = %v s exceeds %v s", ErrBadCoordinate, name, math.Abs(v), MaxComponent)
}

// Distance returns the RTT that coordinates a and b predict, exactly as
// serf's Coordinate.DistanceTo (Euclidean distance of Vec, plus both heights,
// plus both adjustments unless that would make it negative), in seconds and
// without allocating. a and b must have the same dimensionality.
func Distance(a, b *coordinate.Coordinate) float64 {
	d := dist(a.Vec, b.Vec) + a.Height + b.Height
	if adj := d + a.Adjustment + b.Adjustment; adj > 0 {
		return adj
	}
	return d
}

func dist(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		d := a[i] - b[i]
		s += d * d
	}
	return math.Sqrt(s)
}

func norm(a []float64) float64 {
	s := 0.0
	for _, v := range a {
		s += v * v
	}
	return math.Sqrt(s)
}

// SameCoord reports whether a and b are the same coordinate, every field
// alike (both nil is the same; one nil is not): what a token report's
// coordinate must keep for the report to count as unchanged.
func SameCoord(a, b *coordinate.Coordinate) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error == b.Error && a.Adjustment == b.Adjustment && a.Height == b.Height && slices.Equal(a.Vec, b.Vec)
}
