package bench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestNodeScale: a small run of node machines converges, in virtual time
// after the stagger, with lookups and views but no election messages in
// DHT mode; through churn with bully the figures are sane: crashes made,
// coverage in (0, 1], failovers measured in timeouts, all repaired; the
// scoped membership's registrations, pushes and backbone deliveries are
// counted, and the size estimates' errors are ordered.
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
		c.Superpeers < 1 || c.Superpeers > c.N || c.RegistrationsPerNodePerS <= 0 || c.PushesPerNodePerS <= 0 ||
		c.BackbonePerSuperpeerPerS <= 0 || c.SummariesPerSuperpeerPerS < c.BackbonePerSuperpeerPerS ||
		c.SummaryChangesPerSuperpeerPerS <= 0 || c.SummaryChangesPerSuperpeerPerS > c.SummariesPerSuperpeerPerS ||
		c.SizeErrMedian < 0 || c.SizeErrMax < c.SizeErrMedian {
		t.Errorf("converge: %+v", c)
	}
	if ch.Scenario != NodeScaleChurn || ch.Election != "bully" || !ch.Converged || ch.Crashes == 0 || ch.TimeoutMs <= 0 ||
		!(ch.Coverage > 0 && ch.Coverage <= 1) || ch.MaxOrphans < 0 || ch.MessagesPerNodePerS <= 0 ||
		ch.VirtualS < ch.ConvergeS+ch.ChurnS || ch.SplitBrainS < 0 || ch.SplitSamples < 0 || ch.Unrepaired != 0 ||
		ch.RegistrationsPerNodePerS <= 0 || ch.BackbonePerSuperpeerPerS <= 0 {
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
