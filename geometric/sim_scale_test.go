package geometric

import (
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"runtime/metrics"
	"slices"
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

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scaleRun runs Simulate on a synthetic network of n hosts with S = n/100
// tokens and room for twice the ordinary peers (coordRounds 0 takes the
// default), and reports what it took: wall time, CPU time (the machine
// may be shared: CPU time is the steadier figure), the peak of the live
// and not yet collected heap, and the peak resident set of the process.
func scaleRun(tb testing.TB, n, coordRounds int) *SimResult {
	tb.Helper()
	s := max(1, n/100)
	rtt := synthetic(n, 1)
	cfg := SimConfig{Seed: 1, CoordRounds: coordRounds}
	cfg.Tokens = s
	cfg.Capacity = 2 * n / s
	if coordRounds == 0 {
		coordRounds = DefaultCoordRounds(n)
	}
	runtime.GC()
	stop := peakHeap()
	start, cpu := time.Now(), cpuTime()
	res, err := Simulate(n, rtt, cfg)
	wall, cpu := time.Since(start), cpuTime()-cpu
	peak := stop()
	if err != nil {
		tb.Fatal(err)
	}
	mean, p95 := AttachmentRTT(res.Attach, rtt)
	tb.Logf("n = %d, S = %d, coordinate rounds %d: %v wall, %v CPU, peak heap %.0f MB, max RSS %.0f MB; "+
		"settled %v after %d rounds, last pass %d, %d passes; mean RTT to superpeer %v, p95 %v",
		n, s, coordRounds, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), float64(peak)/1e6, float64(maxRSS())/1e6,
		res.Settled, res.Rounds, res.LastPass, res.Passes, mean.Round(10*time.Microsecond), p95.Round(100*time.Microsecond))
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(cpu.Seconds(), "cpu-s")
		b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
		b.ReportMetric(float64(maxRSS())/1e6, "max-rss-MB")
		b.ReportMetric(float64(mean)/1e6, "mean-rtt-ms")
		b.ReportMetric(float64(res.Passes), "passes")
	}
	return res
}

// checkSettled checks what a run must end with: settled, S distinct
// promoted superpeers, every peer attached, and no cluster above C.
func checkSettled(t testing.TB, res *SimResult, n, s, capacity int) {
	t.Helper()
	if !res.Settled || len(res.Superpeers) != s {
		t.Fatalf("settled %v after %d rounds with %d superpeers, want %d", res.Settled, res.Rounds, len(res.Superpeers), s)
	}
	if !slices.IsSorted(res.Superpeers) || len(slices.Compact(slices.Clone(res.Superpeers))) != s {
		t.Fatalf("superpeers %v are not %d distinct indexes in order", res.Superpeers, s)
	}
	if len(res.Attach) != n {
		t.Fatalf("%d attachments for %d peers", len(res.Attach), n)
	}
	size := map[int]int{}
	for i, sp := range res.Attach {
		switch {
		case sp < 0:
			t.Fatalf("peer %d is not attached", i)
		case sp != i:
			size[sp]++
		}
	}
	for _, sp := range res.Superpeers {
		if res.Attach[sp] != sp {
			t.Fatalf("superpeer %d attached to %d", sp, res.Attach[sp])
		}
		if size[sp] > capacity {
			t.Fatalf("superpeer %d serves %d > C = %d", sp, size[sp], capacity)
		}
	}
}

// TestSimulate5k is the scale test cheap enough for every run: 5,000
// synthetic hosts, S = 50, C = 200, 400 coordinate rounds (a few seconds).
// It asserts that the run settles with S superpeers, attaches everyone
// within capacity and repeats exactly from its seed; it times nothing.
func TestSimulate5k(t *testing.T) {
	const n, s = 5000, 50
	rtt := synthetic(n, 1)
	cfg := SimConfig{Seed: 1, CoordRounds: 400}
	cfg.Tokens, cfg.Capacity = s, 2*n/s
	a, err := Simulate(n, rtt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkSettled(t, a, n, s, cfg.Capacity)
	mean, p95 := AttachmentRTT(a.Attach, rtt)
	t.Logf("n = %d, S = %d: settled after %d rounds, last pass %d, %d passes; mean RTT to superpeer %v, p95 %v",
		n, s, a.Rounds, a.LastPass, a.Passes, mean.Round(10*time.Microsecond), p95.Round(100*time.Microsecond))
	if testing.Short() {
		return
	}
	cfg.Coords = a.Coords // the token dynamics and attachment again
	b, err := Simulate(n, rtt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Superpeers, b.Superpeers) || !reflect.DeepEqual(a.Attach, b.Attach) || a.Passes != b.Passes {
		t.Fatalf("two runs from one seed differ: %d and %d passes", a.Passes, b.Passes)
	}
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
	s := max(1, n/100)
	checkSettled(t, res, n, s, 2*n/s)
}

// BenchmarkSimulate100k runs Simulate on 100,000 synthetic hosts, S = 1000,
// C = 200, with the default coordinate rounds (400), and reports wall and
// CPU time, peak heap and peak RSS. One iteration takes a minute or two:
//
//	go test ./geometric/ -run '^$' -bench Simulate100k -benchtime 1x
func BenchmarkSimulate100k(b *testing.B) {
	for range b.N {
		res := scaleRun(b, 100000, 0)
		checkSettled(b, res, 100000, 1000, 200)
	}
}

// BenchmarkSimulate10k is BenchmarkSimulate100k at 10,000 hosts (S = 100),
// with 200 coordinate rounds as bench's BenchmarkGeometric10k.
func BenchmarkSimulate10k(b *testing.B) {
	for range b.N {
		res := scaleRun(b, 10000, 200)
		checkSettled(b, res, 10000, 100, 200)
	}
}
