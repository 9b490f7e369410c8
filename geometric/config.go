package geometric

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ID identifies a peer. In the overlay it is a libp2p peer ID
// (string(peer.ID)); in the simulator and in tests any distinct strings do.
type ID string

// Sentinel errors. Each is returned wrapped with %w together with a message
// that names the offending field or value, so callers test with errors.Is.
var (
	// ErrBadRTT reports an RTT sample that is zero, negative or above MaxRTT.
	ErrBadRTT = errors.New("geometric: bad RTT sample")
	// ErrBadCoordinate reports a nil coordinate, one of the wrong
	// dimensionality, or one with a NaN, infinite, negative or absurdly large
	// component.
	ErrBadCoordinate = errors.New("geometric: bad coordinate")
	// ErrConfig reports a configuration value out of range.
	ErrConfig = errors.New("geometric: bad config")
	// ErrNoRoom reports that no superpeer has room for one more ordinary peer.
	ErrNoRoom = errors.New("geometric: no superpeer has room")
)

// Config configures the token dynamics (Holder, Simulate) and attachment.
// Zero fields take the value of DefaultConfig. The package documentation
// states the force law the fields parametrise. The defaults were chosen by
// hand on the PlanetLab matrix while the package was written (a sweep not
// kept as a test, with the repulsion then summed over the tokens): the mean
// RTT to the superpeer changed by a few percent at most for Range 1-3 ms,
// Softening 1-5 ms and Margin 0.1-3 ms, and got worse with Range 10 ms and
// more. With the repulsion averaged, Range from 1 µs to 10 ms changes the
// mean RTT on PlanetLab (S = 10, 25 and 50, seeds 1-10) by 1.5 % at most,
// and on the synthetic 10,000-host network of sim_scale_test.go by 1 %;
// 30 ms (about the old, summed strength there) loses 17 % on the latter.
// Margin matters more: 0.25 ms instead of 1 ms gains 8 % on PlanetLab at
// S = 10 (1 % either way at 25 and 50) and 4 % on the synthetic network.
type Config struct {
	// Tokens is S, the number of tokens and so of superpeers. Default 10.
	Tokens int

	// Capacity is C, the most ordinary peers one superpeer serves. Default
	// 64.
	Capacity int

	// Range is ρ, the strength of the repulsion between tokens: a token
	// that hears k other tokens, one of them at distance r (of the Vec
	// parts: heights do not count), has potential energy ρ²/(k(r+ε)) from
	// it and is pushed away with a force of ρ²/(k(r+ε)²): the repulsion is
	// the mean over the other tokens, not their sum. Default 3 ms:
	// repulsion matters only between tokens a few milliseconds apart.
	Range time.Duration

	// Softening is ε, which bounds the repulsion at zero distance: at most
	// ρ²/ε of energy and ρ²/ε² of force in all, however close the tokens
	// are (PlanetLab has hosts 0.09 ms apart). Default 1 ms.
	Softening time.Duration

	// Attraction is A, the dimensionless weight of the pull of the peers:
	// each known peer pulls the token nearest to it with a force of A·S/N
	// (N peers known, or Holder.SetPopulation's N), so a cell of average
	// size N/S pulls with at most A.
	// Zero means the default; a negative value turns attraction off, leaving
	// pure repulsion (which measures worse than random placement; see the
	// package documentation). Default 1.
	Attraction float64

	// Threshold is the magnitude of the net force (dimensionless, seconds of
	// energy per second of distance) at or below which a holder keeps its
	// token without looking for a better place. Default 0.05.
	Threshold float64

	// Margin is the least decrease of the token's potential energy that
	// justifies a pass. Every pass lowers the total energy of the system by
	// at least Margin, which is what stops tokens from oscillating between
	// nearly equal peers. Default 1 ms.
	Margin time.Duration

	// Dwell is how long a peer must hold a token without interruption before
	// it promotes itself to superpeer. Default 30 s.
	Dwell time.Duration

	// PromotedMargin replaces Margin once the holder is a superpeer: moving
	// a superpeer costs its members a new attachment and the overlay a
	// dwell time without it, so it must buy more. Default 3 × Margin. (In
	// the simulator tokens settle before anyone is promoted, so it matters
	// only where coordinates keep moving: on live nodes.)
	PromotedMargin time.Duration

	// MinHold is how long a holder keeps a token it received before it may
	// move it on. Zero (the default) lets it move at its next tick. Live
	// nodes, each deciding on its own snapshot of the coordinates, use it
	// to damp tokens bouncing between peers whose pictures differ.
	MinHold time.Duration

	// Cooling is how many passes a token makes, after it was placed, before
	// it cools: from then on every pass doubles the margin the next must
	// buy, so a token that has made p > Cooling passes moves only for a
	// gain of Margin·2^(p−Cooling) (PromotedMargin likewise). Where
	// coordinates stand still every pass lowers the total energy and tokens
	// stop long before they cool (on PlanetLab a token makes 1 to 3
	// passes); on live nodes every snapshot of the coordinates moves the
	// optimum a little and, without cooling, tokens chase it for ever.
	// Cooling bounds the passes of a token: some twenty past Cooling raise
	// the margin above any energy a token can have. A re-homed token starts
	// hot again (see Token). Default 8; negative turns cooling off.
	Cooling int
}

// DefaultConfig returns the defaults named in the fields of Config.
func DefaultConfig() Config {
	return Config{
		Tokens:         10,
		Capacity:       64,
		Range:          3 * time.Millisecond,
		Softening:      time.Millisecond,
		Attraction:     1,
		Threshold:      0.05,
		Margin:         time.Millisecond,
		Dwell:          30 * time.Second,
		PromotedMargin: 3 * time.Millisecond,
		Cooling:        8,
	}
}

// ScaleReference is the scale of the network that the lengths of Config,
// SwapConfig and Tolerance are stated for: a median RTT of 100 ms. The
// defaults were chosen on PlanetLab, whose pairs have a median RTT of
// 134 ms, and whose nodes keep RTTs (to their cluster, the superpeers
// and a few others) of 40 to 280 ms, with a median of 80 to 120 ms
// (overlay/node, at 1 to 5 minutes). On a network of another scale the
// same lengths mean something else: on PlanetLab's RTTs divided by 100 (a
// data centre's), a 5 ms margin stopped every token and every change of
// superpeer, and a 3 ms Range pushed the tokens to the edges, so the node
// placed its superpeers at 2.16 times random placement's mean RTT, where
// scaled it places them at 0.66 (TestGeoSimSweep, see BENCHMARKS.md).
const ScaleReference = 100 * time.Millisecond

// ScaleFor returns the factor the lengths apply at on a network whose
// typical RTT is l: the power of four nearest to l/ScaleReference (1 from
// 50 to 200 ms), within 4^-9 and 4^3 (0.4 µs's scale and 6.4 s's). Steps of
// four, not two: the nodes of one network keep RTTs of different
// medians (PlanetLab's from 20 to 360 ms), and with steps of two 33 to
// 79 % of PlanetLab's nodes took other lengths than the defaults' (and
// settled 6 s later, TestGeoSimSweep); Rescale keeps the defaults' for
// all of them. 1 for l of zero or less (nothing measured yet).
func ScaleFor(l time.Duration) float64 {
	if l <= 0 {
		return 1
	}
	e := math.Round(math.Log2(float64(l)/float64(ScaleReference)) / 2)
	return math.Exp2(2 * min(max(e, -9), 3))
}

// Rescale returns the scale for a network whose typical RTT is now l,
// given the scale cur taken before: cur while l stays within 4^¾ (2.8
// times) of cur·ScaleReference, a quarter of a step past the rounding
// point, so that a node whose RTTs sit at a boundary does not change its
// margins at every sample; else ScaleFor(l). From the defaults' scale
// (cur 1) it moves only past 4^1¼ (18 to 566 ms): the nodes of a network
// of PlanetLab's scale keep them, those in its dense parts included (on
// PlanetLab's 490 hosts with S = 25, nodes that took a quarter of the
// lengths below 35 ms moved their tokens more and settled 30 s later,
// 110 against 80 s over seeds 1-8). A cur of zero or less, or l of zero
// or less, gives ScaleFor(l).
func Rescale(cur float64, l time.Duration) float64 {
	if cur <= 0 || l <= 0 {
		return ScaleFor(l)
	}
	keep := 1.5
	if cur == 1 {
		keep = 2.5
	}
	if math.Abs(math.Log2(float64(l)/float64(ScaleReference))-math.Log2(cur)) <= keep {
		return cur
	}
	return ScaleFor(l)
}

// Scaled returns c with its lengths, Range, Softening, Margin and
// PromotedMargin, multiplied by f: the same dynamics on a network whose
// RTTs are all f times those c was set for. (The energy is a sum of RTTs
// and of ρ²/(r+ε), the force dimensionless, so with the lengths scaled
// every decision on the scaled network is the one on the original.)
// f of zero, below zero or not finite leaves c as it is (ScaleLength).
func (c Config) Scaled(f float64) Config {
	c.Range, c.Softening = ScaleLength(c.Range, f), ScaleLength(c.Softening, f)
	c.Margin, c.PromotedMargin = ScaleLength(c.Margin, f), ScaleLength(c.PromotedMargin, f)
	return c
}

// ScaleLength is length d at scale f: d times f, at least a nanosecond
// when d is positive, at most the longest Duration. d itself when f is
// zero, below zero or not finite, or d is not positive.
func ScaleLength(d time.Duration, f float64) time.Duration {
	if d <= 0 || f == 1 || !(f > 0) || math.IsInf(f, 0) {
		return d
	}
	v := float64(d) * f
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(time.Duration(v), 1)
}

// withDefaults fills zero fields from DefaultConfig and validates the rest.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.Tokens == 0 {
		c.Tokens = d.Tokens
	}
	if c.Capacity == 0 {
		c.Capacity = d.Capacity
	}
	if c.Range == 0 {
		c.Range = d.Range
	}
	if c.Softening == 0 {
		c.Softening = d.Softening
	}
	if c.Attraction == 0 {
		c.Attraction = d.Attraction
	}
	if c.Threshold == 0 {
		c.Threshold = d.Threshold
	}
	if c.Margin == 0 {
		c.Margin = d.Margin
	}
	if c.Dwell == 0 {
		c.Dwell = d.Dwell
	}
	if c.PromotedMargin == 0 {
		c.PromotedMargin = 3 * c.Margin
	}
	if c.Cooling == 0 {
		c.Cooling = d.Cooling
	}
	switch {
	case c.Tokens < 0:
		return c, fmt.Errorf("%w: Tokens = %d, want at least 1", ErrConfig, c.Tokens)
	case c.Capacity < 0:
		return c, fmt.Errorf("%w: Capacity = %d, want at least 1 ordinary peer per superpeer", ErrConfig, c.Capacity)
	case c.Range < 0:
		return c, fmt.Errorf("%w: Range = %v, want a positive duration", ErrConfig, c.Range)
	case c.Softening < 0:
		return c, fmt.Errorf("%w: Softening = %v, want a positive duration", ErrConfig, c.Softening)
	case c.Threshold < 0 || math.IsNaN(c.Threshold) || math.IsInf(c.Threshold, 0):
		return c, fmt.Errorf("%w: Threshold = %v, want a finite positive force", ErrConfig, c.Threshold)
	case math.IsNaN(c.Attraction) || math.IsInf(c.Attraction, 0):
		return c, fmt.Errorf("%w: Attraction = %v, want a finite weight", ErrConfig, c.Attraction)
	case c.MinHold < 0:
		return c, fmt.Errorf("%w: MinHold = %v, want a positive duration or 0", ErrConfig, c.MinHold)
	case c.Margin < 0:
		return c, fmt.Errorf("%w: Margin = %v, want a positive duration", ErrConfig, c.Margin)
	case c.PromotedMargin < 0:
		return c, fmt.Errorf("%w: PromotedMargin = %v, want a positive duration", ErrConfig, c.PromotedMargin)
	case c.Dwell < 0:
		return c, fmt.Errorf("%w: Dwell = %v, want a positive duration", ErrConfig, c.Dwell)
	}
	return c, nil
}

// Validate reports the first field of c out of range (zero fields take
// their defaults and are fine).
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// Filled returns c with the defaults in place of its zero fields.
func (c Config) Filled() (Config, error) { return c.withDefaults() }
