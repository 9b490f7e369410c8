package stats

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestFloatSummaries(t *testing.T) {
	for _, c := range []struct {
		name                       string
		v                          []float64
		median, p5, p50, p95, p100 float64
		min, max, mean             float64
	}{
		{name: "empty"},
		{name: "one", v: []float64{7}, median: 7, p5: 7, p50: 7, p95: 7, p100: 7, min: 7, max: 7, mean: 7},
		{name: "two: the median is the mean of both, p50 the lower", v: []float64{4, 1},
			median: 2.5, p5: 1, p50: 1, p95: 4, p100: 4, min: 1, max: 4, mean: 2.5},
		{name: "odd: the middle value", v: []float64{3, 9, 1, 5, 7},
			median: 5, p5: 1, p50: 5, p95: 9, p100: 9, min: 1, max: 9, mean: 5},
		{name: "even: the mean of the two middle values", v: []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10},
			median: 5.5, p5: 1, p50: 5, p95: 10, p100: 10, min: 1, max: 10, mean: 5.5},
		{name: "ties", v: []float64{2, 2, 2, 3},
			median: 2, p5: 2, p50: 2, p95: 3, p100: 3, min: 2, max: 3, mean: 2.25},
		{name: "twenty: p95 is the 19th", v: seq(1, 20),
			median: 10.5, p5: 1, p50: 10, p95: 19, p100: 20, min: 1, max: 20, mean: 10.5},
		{name: "hundred: p5 and p95 exact ranks", v: seq(1, 100),
			median: 50.5, p5: 5, p50: 50, p95: 95, p100: 100, min: 1, max: 100, mean: 50.5},
		{name: "negative", v: []float64{-3, -1, -2, -4},
			median: -2.5, p5: -4, p50: -3, p95: -1, p100: -1, min: -4, max: -1, mean: -2.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			orig := slices.Clone(c.v)
			s := Sort(c.v)
			if !slices.Equal(c.v, orig) {
				t.Fatal("Sort modified its argument")
			}
			got := []float64{s.Median(), s.Percentile(5), s.Percentile(50), s.Percentile(95), s.Percentile(100), s.Min(), s.Max(), Mean(c.v)}
			want := []float64{c.median, c.p5, c.p50, c.p95, c.p100, c.min, c.max, c.mean}
			names := []string{"median", "p5", "p50", "p95", "p100", "min", "max", "mean"}
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-12 {
					t.Errorf("%s = %v, want %v", names[i], got[i], want[i])
				}
			}
		})
	}
}

// Percentiles out of [0, 100] clamp to the ends; percentiles keep the
// samples' type, the median of an even count of integers keeps its half.
func TestPercentileEdgesAndTypes(t *testing.T) {
	s := Sort([]int32{4, 1, 3, 2})
	if s.Percentile(-5) != 1 || s.Percentile(0) != 1 || s.Percentile(250) != 4 {
		t.Errorf("clamping: p-5 %d, p0 %d, p250 %d; want 1, 1, 4", s.Percentile(-5), s.Percentile(0), s.Percentile(250))
	}
	if s.Percentile(25) != 1 || s.Percentile(26) != 2 || s.Percentile(99) != 4 {
		t.Errorf("p25 %d, p26 %d, p99 %d; want 1, 2, 4", s.Percentile(25), s.Percentile(26), s.Percentile(99))
	}
	if s.Median() != 2.5 {
		t.Errorf("median of 1 2 3 4 = %v, want 2.5", s.Median())
	}
	// Exact ranks where (p/100)·n would round up (7, 14, 28, 55, 56): 7 % of
	// 100 is the 7th, not the 8th.
	h := Sorted[int](seqInt(1, 100))
	for _, p := range []float64{7, 14, 28, 55, 56} {
		if got := h.Percentile(p); got != int(p) {
			t.Errorf("p%v of 1..100 = %d, want %d", p, got, int(p))
		}
	}
	d := Sort([]time.Duration{30 * time.Millisecond, 10 * time.Millisecond})
	if time.Duration(d.Median()) != 20*time.Millisecond || d.Percentile(95) != 30*time.Millisecond {
		t.Errorf("durations: median %v, p95 %v", time.Duration(d.Median()), d.Percentile(95))
	}
	if Mean([]time.Duration{time.Second, 2 * time.Second}) != float64(1500*time.Millisecond) {
		t.Error("mean of durations")
	}
}

func seq(lo, hi int) []float64 {
	var v []float64
	for i := hi; i >= lo; i-- { // in decreasing order, for Sort to sort
		v = append(v, float64(i))
	}
	return v
}

func seqInt(lo, hi int) []int {
	var v []int
	for i := lo; i <= hi; i++ {
		v = append(v, i)
	}
	return v
}
