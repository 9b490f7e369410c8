package stats

import (
	"math"
	"slices"
)

// Number is a type whose samples the package summarises: the integers,
// floating-point numbers, and types built on them such as time.Duration.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64
}

// Sorted is a sample in increasing order. Convert a slice that is sorted
// already (Sorted[T](v)), or make one with Sort.
type Sorted[T Number] []T

// Sort returns a sorted copy of v; v itself is not modified.
func Sort[T Number](v []T) Sorted[T] {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}

// Median returns the median of s: the middle value for an odd count, the
// mean of the two middle values for an even count (so, for integers and
// durations, possibly half-way between two of them), 0 for an empty sample.
func (s Sorted[T]) Median() float64 {
	n := len(s)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return float64(s[n/2])
	default:
		return (float64(s[n/2-1]) + float64(s[n/2])) / 2
	}
}

// Percentile returns the p-th percentile of s by nearest rank: the
// ⌈p·n/100⌉-th smallest of the n samples, the smallest for p ≤ 0 and the
// largest for p ≥ 100; 0 for an empty sample. For p = 50 and an even count
// this is the lower of the two middle values, not the Median.
func (s Sorted[T]) Percentile(p float64) T {
	n := len(s)
	if n == 0 {
		return 0
	}
	// p·n is exact for a whole p and any realistic n, and so is its
	// division by 100 wherever the quotient is a whole number: the ceiling
	// is not thrown off by rounding (0.07·100 is 7.000000000000001, 7·100/100
	// is 7).
	rank := int(math.Ceil(p * float64(n) / 100))
	return s[min(max(rank-1, 0), n-1)]
}

// Min returns the least value of s, 0 for an empty sample.
func (s Sorted[T]) Min() T {
	if len(s) == 0 {
		return 0
	}
	return s[0]
}

// Max returns the greatest value of s, 0 for an empty sample.
func (s Sorted[T]) Max() T {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// Mean returns the arithmetic mean of v (in any order), 0 for an empty
// sample. It sums in float64.
func Mean[T Number](v []T) float64 {
	if len(v) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range v {
		sum += float64(x)
	}
	return sum / float64(len(v))
}
