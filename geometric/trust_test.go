package geometric

import (
	"math"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

func TestPlausible(t *testing.T) {
	tol := Tolerance{Rel: 0.5, Abs: 10 * time.Millisecond}
	self, claimed := at(0, 0), at(30, 0) // predicted RTT 30.02 ms (two heights of 10 µs)
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	for _, tc := range []struct {
		rtt  float64 // ms
		want bool
	}{
		{30, true},
		{14, true},    // 30.02 − 14 = 16.02 ≤ 10 + 7
		{13, false},   // 17.02 > 16.5: the claim is too close for the RTT
		{40, true},    // 10 ≤ 30
		{100, false},  // 69.98 > 60: a liar claiming to be 30 ms away, measured at 100
		{13.3, false}, // 16.72 > 16.65
	} {
		if got := Plausible(self, claimed, ms(tc.rtt), tol); got != tc.want {
			t.Errorf("claim 30 ms away, measured %v ms: Plausible = %v, want %v", tc.rtt, got, tc.want)
		}
	}
	bad := at(1, 1)
	bad.Vec[2] = math.NaN()
	other := coordinate.NewCoordinate(&coordinate.Config{Dimensionality: 2, HeightMin: 1e-5})
	for name, c := range map[string]struct {
		self, claimed *coordinate.Coordinate
		rtt           time.Duration
	}{
		"nil self":        {nil, claimed, ms(30)},
		"nil claim":       {self, nil, ms(30)},
		"NaN claim":       {self, bad, ms(30)},
		"other dimension": {self, other, ms(30)},
		"no RTT":          {self, claimed, 0},
		"RTT too long":    {self, claimed, MaxRTT + 1},
	} {
		if Plausible(c.self, c.claimed, c.rtt, tol) {
			t.Errorf("%s: Plausible, want not", name)
		}
	}
	if d := DefaultTolerance(); d.Rel <= 0 || d.Rel >= 1 || d.Abs <= 0 {
		t.Errorf("DefaultTolerance = %+v: with Rel ≥ 1 any claim of being nearer passes", d)
	}
}

// A claim passes VetClaim only with a strict majority of plausible checks.
func TestVetClaim(t *testing.T) {
	tol := DefaultTolerance()
	claimed := at(0, 0) // claims to sit on top of every checker
	near := Check{Self: at(1, 0), RTT: time.Millisecond}
	far := Check{Self: at(2, 0), RTT: 150 * time.Millisecond} // but is 150 ms from this one
	for _, tc := range []struct {
		checks []Check
		want   bool
	}{
		{nil, false},
		{[]Check{near}, true},
		{[]Check{far}, false},
		{[]Check{near, far}, false},
		{[]Check{near, near, far}, true},
		{[]Check{near, far, far}, false},
	} {
		if got := VetClaim(claimed, tc.checks, tol); got != tc.want {
			t.Errorf("%d checks, %d near: VetClaim = %v, want %v", len(tc.checks), countNear(tc.checks), got, tc.want)
		}
	}
}

func countNear(cs []Check) int {
	n := 0
	for _, c := range cs {
		if c.RTT < 10*time.Millisecond {
			n++
		}
	}
	return n
}

// TooNear is the half of Plausible a lie needs: a claim nearer than
// measured by more than the tolerance; a claim farther than measured is
// not too near, however far.
func TestTooNear(t *testing.T) {
	tol := Tolerance{Rel: 0.5, Abs: 10 * time.Millisecond}
	self, claimed := at(0, 0), at(30, 0) // predicted RTT 30.02 ms
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	for _, tc := range []struct {
		rtt  float64 // ms
		want bool
	}{
		{30, false},
		{13, false}, // farther than measured: Plausible says no, TooNear no
		{1, false},
		{80, false},  // 30.02 ≥ 80 − 50
		{100, true},  // 30.02 < 100 − 60: a liar claiming to be 30 ms away, measured at 100
		{81, true},   // 30.02 < 81 − 50.5
		{80.5, true}, // 30.02 < 80.5 − 50.25
	} {
		if got := TooNear(self, claimed, ms(tc.rtt), tol); got != tc.want {
			t.Errorf("claim 30 ms away, measured %v ms: TooNear = %v, want %v", tc.rtt, got, tc.want)
		}
	}
	if !TooNear(nil, claimed, ms(30), tol) || !TooNear(self, claimed, 0, tol) {
		t.Error("an unusable input is not too near")
	}
}
