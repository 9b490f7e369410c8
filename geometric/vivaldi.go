package geometric

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// vivaldi fits the coordinates of n peers at once, for Simulate. It is
// Client (serf's coordinate.Client behind this package's checks) for every
// peer, with the same arithmetic in the same order, so that it produces
// the same coordinates to the last bit (TestVivaldiMatchesClient), but it
// keeps every peer's state in flat arrays and allocates nothing per
// sample: serf's client allocates a dozen small slices per sample, which
// made the fitting most of the cost of a large simulation.
//
// One difference in state: serf's median filter over the last
// LatencyFilterSize samples of each remote peer is not kept. Simulate's
// RTTs are fixed, so the filter would return the very sample it is given.
//
// Every peer has two coordinates: the client's own (which Client.Sample
// may nudge or reset without returning it) and the last one Sample
// returned, which the peer publishes and others sample against.
type vivaldi struct {
	cfg  *coordinate.Config
	dims int
	rng  []*rand.Rand

	// Per peer, a block of stride floats each: Vec, then Height, Error
	// and Adjustment, for the own coordinate (own) and the published one
	// (pub); a sample reads the block of a random peer, which is then one
	// or two cache lines.
	own, pub []float64
	stride   int
	adj      []float64 // adjustment samples, AdjustmentWindowSize per peer
	adjIndex []int
	resets   []int
	unit     []float64 // scratch
	origin   []float64 // zero
	nudge    []float64 // scratch
	originH  float64
	sink     float64 // keeps simCoords's early loads
}

// Offsets in a block, after the Vec.
const (
	offH = iota
	offE
	offA
	blockExtra
)

// newVivaldi returns n peers at the origin, as NewClient does, with Rand
// rngs[i] for peer i's nudges.
func newVivaldi(cfg *coordinate.Config, rngs []*rand.Rand) *vivaldi {
	n, d, w := len(rngs), int(cfg.Dimensionality), int(cfg.AdjustmentWindowSize)
	v := &vivaldi{
		cfg: cfg, dims: d, rng: rngs, stride: d + blockExtra,
		own: make([]float64, n*(d+blockExtra)), pub: make([]float64, n*(d+blockExtra)),
		adj: make([]float64, n*w), adjIndex: make([]int, n), resets: make([]int, n),
		unit: make([]float64, d), origin: make([]float64, d), nudge: make([]float64, d),
		originH: cfg.HeightMin,
	}
	for i := range n {
		v.reset(i)
		v.publish(i)
	}
	return v
}

// block returns peer i's own block: Vec, then Height, Error, Adjustment.
func (v *vivaldi) block(i int) []float64 { return v.own[i*v.stride : (i+1)*v.stride] }

// published returns peer j's published block.
func (v *vivaldi) published(j int) []float64 { return v.pub[j*v.stride : (j+1)*v.stride] }

// reset puts peer i's own coordinate at the origin (coordinate.NewCoordinate).
func (v *vivaldi) reset(i int) {
	b := v.block(i)
	clear(b[:v.dims])
	b[v.dims+offH], b[v.dims+offE], b[v.dims+offA] = v.cfg.HeightMin, v.cfg.VivaldiErrorMax, 0
}

func (v *vivaldi) publish(i int) { copy(v.published(i), v.block(i)) }

// coordinate returns peer i's published coordinate.
func (v *vivaldi) coordinate(i int) *coordinate.Coordinate {
	b := v.published(i)
	c := &coordinate.Coordinate{Vec: make([]float64, v.dims), Height: b[v.dims+offH], Error: b[v.dims+offE], Adjustment: b[v.dims+offA]}
	copy(c.Vec, b)
	return c
}

// valid is coordinate.IsValid for a block.
func (v *vivaldi) valid(b []float64) bool {
	for _, x := range b {
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return false
		}
	}
	return true
}

// acceptable is validate for a block: every component finite and within
// MaxComponent, Height and Error not negative.
func (v *vivaldi) acceptable(b []float64) bool {
	for _, x := range b {
		if !(x >= -MaxComponent && x <= MaxComponent) { // NaN fails too
			return false
		}
	}
	return b[v.dims+offH] >= 0 && b[v.dims+offE] >= 0
}

// sample is Client.Sample for peer i with the RTT rtt to peer j, whose
// published coordinate it uses; it reports whether Sample would have
// returned a coordinate (which it then publishes). Published coordinates
// are always valid (they passed validate), so the remote check of Sample
// is left out.
func (v *vivaldi) sample(i, j int, rtt time.Duration) bool {
	if rtt <= 0 || rtt > MaxRTT {
		return false // ErrBadRTT
	}
	d := v.dims
	own, remote := v.block(i), v.published(j)
	// Client.Sample's nudge away from serf's random directions. The
	// distance between own and remote is serf's first step too.
	apart := dist(own[:d], remote[:d])
	if apart <= coincide || norm(own[:d]) <= coincide {
		nudged := v.nudge
		for k := range nudged {
			nudged[k] = own[k] + (v.rng[i].Float64()-0.5)*20*coincide
		}
		for _, x := range nudged {
			if math.IsInf(x, 0) || math.IsNaN(x) {
				return false // SetCoordinate refuses it, and Sample fails
			}
		}
		copy(own, nudged)
		apart = dist(own[:d], remote[:d])
	}
	// coordinate.Client.Update: the latency filter returns the sample.
	rttSeconds := rtt.Seconds()
	v.updateVivaldi(own, remote, rttSeconds, apart)
	v.updateAdjustment(i, own, remote, rttSeconds)
	v.updateGravity(own)
	if !v.acceptable(own) {
		if !v.valid(own) {
			v.reset(i) // serf's own reset, whose result Sample returns
		} else {
			// Client.Sample's check of the result fails: reset, no result.
			v.reset(i)
			v.resets[i]++
			return false
		}
	}
	v.publish(i)
	return true
}

// serfDistance is coordinate.(*Coordinate).DistanceTo(...).Seconds(): the
// estimate truncated to whole nanoseconds, as serf computes it.
func serfDistance(raw, a1, a2 float64) float64 {
	d := raw
	if adjusted := d + a1 + a2; adjusted > 0.0 {
		d = adjusted
	}
	return time.Duration(d * 1.0e9).Seconds()
}

// rawDistance is coordinate's rawDistanceTo: magnitude(diff(a, b)) + ha + hb.
func rawDistance(a, b []float64, ha, hb float64) float64 {
	return dist(a, b) + ha + hb
}

// updateVivaldi is serf's, given apart = dist(own Vec, other Vec).
func (v *vivaldi) updateVivaldi(own, other []float64, rtt, apart float64) {
	const zeroThreshold = 1.0e-6
	d := v.dims
	dd := serfDistance(apart+own[d+offH]+other[d+offH], own[d+offA], other[d+offA])
	if rtt < zeroThreshold {
		rtt = zeroThreshold
	}
	wrongness := math.Abs(dd-rtt) / rtt
	totalError := own[d+offE] + other[d+offE]
	if totalError < zeroThreshold {
		totalError = zeroThreshold
	}
	weight := own[d+offE] / totalError
	own[d+offE] = v.cfg.VivaldiCE*weight*wrongness + own[d+offE]*(1.0-v.cfg.VivaldiCE*weight)
	if own[d+offE] > v.cfg.VivaldiErrorMax {
		own[d+offE] = v.cfg.VivaldiErrorMax
	}
	delta := v.cfg.VivaldiCC * weight
	force := delta * (rtt - dd)
	v.applyForce(own, force, other[:d], other[d+offH], apart)
}

func (v *vivaldi) updateAdjustment(i int, own, other []float64, rtt float64) {
	w := int(v.cfg.AdjustmentWindowSize)
	if w == 0 {
		return
	}
	d := v.dims
	dd := rawDistance(own[:d], other[:d], own[d+offH], other[d+offH])
	s := v.adj[i*w : (i+1)*w]
	s[v.adjIndex[i]] = rtt - dd
	v.adjIndex[i] = (v.adjIndex[i] + 1) % w
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	own[d+offA] = sum / (2.0 * float64(w))
}

func (v *vivaldi) updateGravity(own []float64) {
	d := v.dims
	apart := dist(v.origin, own[:d]) // = norm(own): (0-x)² is x²
	dd := serfDistance(apart+v.originH+own[d+offH], 0, own[d+offA])
	force := -1.0 * math.Pow(dd/v.cfg.GravityRho, 2.0)
	v.applyForce(own, force, v.origin, v.originH, apart)
}

// applyForce is coordinate's ApplyForce on a peer's own block, given
// apart = dist(own Vec, other), which is serf's magnitude of their
// difference to the bit.
func (v *vivaldi) applyForce(own []float64, force float64, other []float64, otherH, apart float64) {
	const zeroThreshold = 1.0e-6
	d := v.dims
	vec, unit := own[:d], v.unit
	for k := range unit {
		unit[k] = vec[k] - other[k]
	}
	mag := apart
	if mag > zeroThreshold {
		inv := 1.0 / mag
		for k := range unit {
			unit[k] *= inv
		}
	} else {
		// serf draws a random direction here, from the global source;
		// Client's nudges keep the coordinates away from this case. Take
		// a fixed one rather than an unrepeatable one.
		clear(unit)
		unit[0] = 1.0
		mag = 0.0
	}
	for k := range vec {
		vec[k] = vec[k] + float64(unit[k]*force) // serf: add(vec, mul(unit, force)), no fused multiply-add
	}
	if mag > zeroThreshold {
		h := &own[d+offH]
		*h = (*h+otherH)*force/mag + *h
		*h = math.Max(*h, v.cfg.HeightMin)
	}
}
