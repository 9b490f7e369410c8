package bench

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/nodesim"
)

// repairTestConfig is a small repair suite: clusters of 8 node machines,
// three failover trials, and two churn rates (the second high enough that
// crashes happen) for two virtual minutes.
func repairTestConfig() RepairConfig {
	return RepairConfig{Sizes: []int{8}, Trials: 3, ChurnRates: []float64{0.05, 0.5}, ChurnDuration: 2 * time.Minute, Seed: 1}
}

// TestRepairEveryAlgorithm: a row per algorithm, every failover repaired in
// a positive, finite time within the limit, median <= p95 <= max, churn
// coverage in (0, 1], split brain and message rates sane.
func TestRepairEveryAlgorithm(t *testing.T) {
	cfg := repairTestConfig()
	rows, err := Repair(cfg)
	if err != nil {
		t.Fatal(err)
	}
	algos := classic.Algorithms()
	if len(rows) != len(algos) {
		t.Fatalf("%d rows, want one per algorithm (%d)", len(rows), len(algos))
	}
	crashes := 0
	for k, r := range rows {
		f := r.Failover
		if r.Error != "" {
			t.Errorf("%s: %s", r.Algorithm, r.Error)
			continue
		}
		if r.Algorithm != algos[k] || r.N != 8 || r.TimeoutMs <= r.HeartbeatMs || r.HeartbeatMs != 500 || r.TickMs != 100 {
			t.Errorf("row %d: %s n=%d, tick %v ms, heartbeat %v ms, timeout %v ms", k, r.Algorithm, r.N, r.TickMs, r.HeartbeatMs, r.TimeoutMs)
		}
		if f.Trials != 3 || f.Unrepaired != 0 || f.MedianMs <= 0 || f.P95Ms < f.MedianMs || f.MaxMs < f.P95Ms ||
			math.Abs(f.MedianTimeouts-f.MedianMs/r.TimeoutMs) > 1e-9 || f.MaxTimeouts > repairLimit || f.P95Timeouts > f.MaxTimeouts {
			t.Errorf("%s failover: %+v (timeout %v ms)", r.Algorithm, f, r.TimeoutMs)
		}
		if f.MedianMessages <= 0 {
			t.Errorf("%s failover: median %v election messages", r.Algorithm, f.MedianMessages)
		}
		if len(r.Churn) != 2 {
			t.Fatalf("%s: %d churn runs, want 2", r.Algorithm, len(r.Churn))
		}
		for i, c := range r.Churn {
			if c.RatePerMin != cfg.ChurnRates[i] || c.DurationS != 120 {
				t.Errorf("%s churn %d: rate %v for %v s", r.Algorithm, i, c.RatePerMin, c.DurationS)
			}
			if !(c.Coverage > 0 && c.Coverage <= 1) {
				t.Errorf("%s churn %v: coverage %v not in (0, 1]", r.Algorithm, c.RatePerMin, c.Coverage)
			}
			if c.SplitBrainMs < 0 || c.SplitBrainFrac > 1 || c.LeaderCrashes > c.Crashes || c.MaxOrphans > r.N ||
				c.ElectionMsgsPerMemberPerS < 0 || c.MsgsPerMemberPerS < c.ElectionMsgsPerMemberPerS ||
				c.FailoverMaxTimeouts < c.FailoverMedianTimeouts || (c.LeaderCrashes == 0) != (c.FailoverMedianTimeouts < 0 && c.Unrepaired == 0) {
				t.Errorf("%s churn %v: %+v", r.Algorithm, c.RatePerMin, c)
			}
			if r.Algorithm != "echo" && c.MsgsPerMemberPerS <= 0 {
				t.Errorf("%s churn %v: no messages at all (%+v); the leader heartbeats", r.Algorithm, c.RatePerMin, c)
			}
		}
		crashes += r.Churn[1].Crashes
	}
	if crashes == 0 {
		t.Errorf("no crash at 50 %% of 8 members per minute for 2 minutes, in any of %d runs", len(rows))
	}
}

// TestRepairEcho: echo has no failure detector of its own, and the suite
// writes none any more: the node machine is its detector (it campaigns
// when its connection to the leader drops). Every crash of the superpeer
// is repaired, within two timeouts (the machine's other rule, a campaign
// after two timeouts without a leader, would take longer than that).
func TestRepairEcho(t *testing.T) {
	rows, err := Repair(RepairConfig{Algorithms: []string{"echo"}, Sizes: []int{8, 16}, Trials: 5, ChurnRates: []float64{0.5}, ChurnDuration: 2 * time.Minute, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		f := r.Failover
		if r.Error != "" || f.Unrepaired != 0 || f.MedianMs <= 0 || f.MaxTimeouts <= 0 || f.MaxTimeouts >= 2 {
			t.Errorf("echo, n = %d: %+v %s", r.N, f, r.Error)
		}
		if c := r.Churn[0]; c.Unrepaired != 0 || c.Coverage <= 0 || c.Coverage > 1 {
			t.Errorf("echo, n = %d, churn: %+v", r.N, c)
		}
	}
}

// TestRepairDeterministic: the same config gives the same rows.
func TestRepairDeterministic(t *testing.T) {
	cfg := repairTestConfig()
	cfg.Algorithms = []string{"bully", "invitation", "echo"}
	a, err := Repair(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Repair(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs of the same config differ:\n%+v\n%+v", a, b)
	}
}

// TestRepairBadConfig: each bad field gives an error that wraps
// ErrRepairConfig and names the field.
func TestRepairBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg   RepairConfig
		field string
	}{
		{RepairConfig{Algorithms: []string{"raft"}}, "Algorithms[0]"},
		{RepairConfig{Sizes: []int{16, 2}}, "Sizes[1]"},
		{RepairConfig{Trials: -1}, "Trials"},
		{RepairConfig{ChurnRates: []float64{0.1, -0.1}}, "ChurnRates[1]"},
		{RepairConfig{ChurnRates: []float64{math.NaN()}}, "ChurnRates[0]"},
		{RepairConfig{ChurnDuration: -time.Second}, "ChurnDuration"},
		{RepairConfig{Downtime: -time.Second}, "Downtime"},
		{RepairConfig{RTT: -1}, "RTT"},
		{RepairConfig{Tick: -1}, "Tick"},
	} {
		_, err := Repair(c.cfg)
		if err == nil || !errors.Is(err, ErrRepairConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Repair(%+v) = %v; want ErrRepairConfig naming %s", c.cfg, err, c.field)
		}
	}
}

// TestWriteRepairTable prints both tables, a line per row and per churn run.
func TestWriteRepairTable(t *testing.T) {
	rows := []RepairRow{{
		Algorithm: "bully", N: 8, TimeoutMs: 1900,
		Failover: FailoverStats{Trials: 2, Unrepaired: 1, MedianMs: -1, P95Ms: -1, MaxMs: -1, MedianTimeouts: -1, P95Timeouts: -1, MaxTimeouts: -1},
		Churn: []ChurnStats{{RatePerMin: 0.05, Coverage: 0.99, FailoverMedianTimeouts: -1, FailoverMaxTimeouts: -1},
			{RatePerMin: 0.1, Coverage: 0.98, FailoverMedianTimeouts: 1.25, FailoverMaxTimeouts: 1.5}},
	}, {Algorithm: "ring", N: 64, Error: "never one superpeer"}}
	var b strings.Builder
	if err := WriteRepairTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"∞", "5%", "10%", "0.9900", "0.9800", "– / –", "1.25 / 1.50", "failed: never one superpeer"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if got := strings.Count(out, "bully"); got != 3 {
		t.Errorf("bully appears on %d lines, want 3 (failover, two churn runs):\n%s", got, out)
	}
}

// A crashed node's machine, and its count of election messages, go at the
// crash (nodesim frees it): the failover trial leaves the crashed
// superpeer's count out of the count before, and then counts what the
// others sent, as many as the simulator carried.
func TestElectionSentAcrossACrash(t *testing.T) {
	r := repairNet{algo: "bully", n: 8, rtt: nodesim.DefaultRTT, tick: 100 * time.Millisecond}
	s, _, _, err := r.start(1)
	if err != nil {
		t.Fatal(err)
	}
	if !s.RunUntil(oneSuperpeer, r.tick, repairConverge) {
		t.Fatal("no superpeer")
	}
	sp := superpeerOf(s)
	before, carried := electionSentAll(s, true)-electionSent(s, sp, true), s.Stats().Messages
	if electionSent(s, sp, true) == 0 {
		t.Fatal("the superpeer sent nothing before its crash: the test shows nothing")
	}
	s.Crash(sp)
	s.RunFor(10 * time.Second)
	if got, want := electionSentAll(s, true)-before, s.Stats().Messages-carried; got != want {
		t.Errorf("%d election messages counted after the crash, the simulator carried %d", got, want)
	}
}
