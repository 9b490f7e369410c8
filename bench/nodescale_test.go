package bench

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNodeScale: a small run of node machines converges, in virtual time
// after the stagger, with lookups and views but no election messages in
// DHT mode; through churn with bully the figures are sane: crashes made,
// coverage in (0, 1], failovers measured in timeouts, all repaired; the
// scoped membership's registrations and backbone deliveries are
// counted, the size estimates' errors are ordered, at convergence and
// a membership TTL later, and the CPU time until convergence and over
// the churn are parts of the run's.
func TestNodeScale(t *testing.T) {
	rows, err := NodeScale(NodeScaleConfig{Converge: []int{100}, ChurnN: 100, Rate: 0.2, Duration: time.Minute, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	c, ch := rows[0], rows[1]
	if c.Scenario != NodeScaleConverge || !c.Converged || c.ConvergeS <= 0 || c.ConvergeS < c.StaggerS/2 || c.WallS <= 0 ||
		c.PeakMemMB <= 0 || c.LiveHeapMB <= 0 || c.MessagesPerNodePerS != 0 || c.LookupsPerNodePerS <= 0 || c.ViewsPerNodePerS <= 0 ||
		c.Superpeers < 1 || c.Superpeers > c.N || c.RegistrationsPerNodePerS <= 0 ||
		c.BackbonePerSuperpeerPerS <= 0 || c.SummariesPerSuperpeerPerS < c.BackbonePerSuperpeerPerS ||
		c.SummaryChangesPerSuperpeerPerS <= 0 || c.SummaryChangesPerSuperpeerPerS > c.SummariesPerSuperpeerPerS ||
		c.SizeErrMedian < 0 || c.SizeErrMax < c.SizeErrMedian || c.SettledErrMedian < 0 || c.SettledErrMax < c.SettledErrMedian ||
		c.CPUS < 0 || c.VirtualS < c.ConvergeS+15 {
		t.Errorf("converge: %+v", c)
	}
	if ch.Scenario != NodeScaleChurn || ch.Election != "bully" || !ch.Converged || ch.Crashes == 0 || ch.TimeoutMs <= 0 ||
		!(ch.Coverage > 0 && ch.Coverage <= 1) || ch.MaxOrphans < 0 || ch.MessagesPerNodePerS <= 0 ||
		ch.VirtualS < ch.ConvergeS+ch.ChurnS || ch.SplitBrainS < 0 || ch.SplitSamples < 0 || ch.Unrepaired != 0 ||
		ch.RegistrationsPerNodePerS <= 0 || ch.BackbonePerSuperpeerPerS <= 0 ||
		ch.ConvergeCPUS < 0 || ch.ChurnCPUS < 0 || ch.ConvergeCPUS+ch.ChurnCPUS > ch.CPUS {
		t.Errorf("churn: %+v", ch)
	}
	if ch.Failovers > 0 && (ch.FailoverMedianT <= 0 || ch.FailoverMaxT < ch.FailoverMedianT || ch.FailoverMaxT > repairLimit) {
		t.Errorf("churn failovers: %+v", ch)
	}
	var b strings.Builder
	if err := WriteNodeScaleTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Count(out, "\n") != 3 || !strings.Contains(out, "bully") || !strings.Contains(out, "none") {
		t.Errorf("table:\n%s", out)
	}
}

func TestNodeScaleBadConfig(t *testing.T) {
	for _, c := range []NodeScaleConfig{{Converge: []int{0}}, {ChurnN: 1}, {Rate: 2}, {Election: "raft"}} {
		if _, err := NodeScale(c); !errors.Is(err, ErrBench) {
			t.Errorf("NodeScale(%+v) = %v, want ErrBench", c, err)
		}
	}
}

var (
	nodeScaleConverge = flag.String("nodescale.converge", "", "TestNodeScaleSizes: comma-separated sizes of the converge scenario")
	nodeScaleChurn    = flag.String("nodescale.churn", "", "TestNodeScaleSizes: comma-separated sizes of the churn scenario")
	nodeScaleDuration = flag.Duration("nodescale.duration", 0, "TestNodeScaleSizes: how long the churn lasts (0: the default, 10 minutes)")
)

// TestNodeScaleSizes runs the node machines' scale rows at the sizes
// given (the scale suite's, which peer bench --suite scale --sim runs
// with its other rows), one at a time, and prints each: for the 100,000
// rows alone. Without -nodescale.converge and -nodescale.churn it is
// skipped.
//
//	go test ./bench -run '^TestNodeScaleSizes$' -v -timeout 180m -args -nodescale.converge 1000,10000,100000 -nodescale.churn 1000,10000,100000
func TestNodeScaleSizes(t *testing.T) {
	conv, churn := sizesFlag(t, *nodeScaleConverge), sizesFlag(t, *nodeScaleChurn)
	if len(conv)+len(churn) == 0 {
		t.Skip("no sizes: -nodescale.converge and -nodescale.churn")
	}
	run := func(c NodeScaleConfig) {
		rows, err := NodeScale(c)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := WriteNodeScaleTable(&b, rows); err != nil {
			t.Fatal(err)
		}
		t.Logf("load average before: %s\n%s", loadAverage(), b.String())
		for _, r := range rows {
			js, _ := json.Marshal(r)
			t.Logf("%s", js)
		}
	}
	for _, n := range conv {
		run(NodeScaleConfig{Converge: []int{n}, ChurnN: -1})
	}
	for _, n := range churn {
		run(NodeScaleConfig{Converge: []int{}, ChurnN: n, Duration: *nodeScaleDuration})
	}
}

func sizesFlag(t *testing.T, s string) []int {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("size %q: %v", f, err)
		}
		out = append(out, n)
	}
	return out
}

// loadAverage is /proc/loadavg's first three figures, where there is one.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
