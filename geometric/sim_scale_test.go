package geometric

import (
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// synthetic returns the RTTs of n hosts placed at random in a plane of
// 200 ms × 200 ms with 5 dense regions (like continents), plus 1 ms per
// host of access delay. It is a copy of the function of the same name in
// bench/rounds_test.go, so that the figures here and there agree.
func synthetic(n int, seed uint64) func(i, j int) time.Duration {
	rng := rand.New(rand.NewPCG(seed, 3))
	type pt struct{ x, y float64 }
	centres := make([]pt, 5)
	for i := range centres {
		centres[i] = pt{rng.Float64() * 200, rng.Float64() * 200}
	}
	hosts := make([]pt, n)
	for i := range hosts {
		c := centres[rng.IntN(len(centres))]
		hosts[i] = pt{c.x + rng.NormFloat64()*15, c.y + rng.NormFloat64()*15}
	}
	return func(i, j int) time.Duration {
		if i == j {
			return 0
		}
		d := math.Hypot(hosts[i].x-hosts[j].x, hosts[i].y-hosts[j].y) + 2
		return time.Duration(d * float64(time.Millisecond))
	}
}

// peakHeap samples the bytes of live heap objects every few milliseconds
// until stop is called, which returns the largest sample. The sampler is a
// goroutine of the test, not of the package under test.
func peakHeap() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		metrics.Read(s)
		return max(peak, s[0].Value.Uint64())
	}
}

// maxRSS returns the peak resident set size of the process, in bytes (0
// where getrusage does not say).
func maxRSS() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return uint64(ru.Maxrss) * 1024 // Linux reports kilobytes
}

// scaleRun runs Simulate on a synthetic network of n hosts with S = n/100
// tokens and room for twice the ordinary peers, and reports what it took.
func scaleRun(tb testing.TB, n, coordRounds int) *SimResult {
	tb.Helper()
	s := max(1, n/100)
	rtt := synthetic(n, 1)
	cfg := SimConfig{Seed: 1, CoordRounds: coordRounds}
	cfg.Tokens = s
	cfg.Capacity = 2 * n / s
	runtime.GC()
	stop := peakHeap()
	start := time.Now()
	res, err := Simulate(n, rtt, cfg)
	wall := time.Since(start)
	peak := stop()
	if err != nil {
		tb.Fatal(err)
	}
	mean, p95 := AttachmentRTT(res.Attach, rtt)
	tb.Logf("n = %d, S = %d, coordinate rounds %d: %v wall, peak heap %.0f MB, max RSS %.0f MB; "+
		"settled %v after %d rounds, last pass %d, %d passes; mean RTT to superpeer %v, p95 %v",
		n, s, coordRounds, wall.Round(time.Millisecond), float64(peak)/1e6, float64(maxRSS())/1e6,
		res.Settled, res.Rounds, res.LastPass, res.Passes, mean.Round(10*time.Microsecond), p95.Round(100*time.Microsecond))
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
		b.ReportMetric(float64(mean)/1e6, "mean-rtt-ms")
		b.ReportMetric(float64(res.Passes), "passes")
	}
	return res
}

// TestSimulateScale is the large run, skipped unless GEOMETRIC_SCALE_N names
// the number of peers (for instance 100000); GEOMETRIC_SCALE_ROUNDS sets
// CoordRounds (0, the default, takes Simulate's default). It logs the wall
// time and the peak heap and asserts only that the run settles with S
// superpeers.
func TestSimulateScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("GEOMETRIC_SCALE_N"))
	if n <= 0 || testing.Short() {
		t.Skip("set GEOMETRIC_SCALE_N (e.g. 100000) to run; not under -short")
	}
	rounds, _ := strconv.Atoi(os.Getenv("GEOMETRIC_SCALE_ROUNDS"))
	res := scaleRun(t, n, rounds)
	if s := max(1, n/100); !res.Settled || len(res.Superpeers) != s {
		t.Errorf("settled %v with %d superpeers, want %d", res.Settled, len(res.Superpeers), s)
	}
}
