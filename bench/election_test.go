package bench

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/superpeer/superpeer/classic"
)

// electionTestSizes are small enough for the suite to run in about a second.
var electionTestSizes = []int{8, 16, 32}

// TestElectionMatchesTheory runs every algorithm at small sizes: every row
// is there, measured, elects the scenario's leader, and every count equals
// its textbook formula exactly, as TestMessageCounts asserts for the cases
// it shares.
func TestElectionMatchesTheory(t *testing.T) {
	rows, err := Election(ElectionConfig{Sizes: electionTestSizes, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	algos := classic.Algorithms()
	if len(rows) != len(algos)*len(electionTestSizes) {
		t.Fatalf("%d rows, want %d algorithms × %d sizes", len(rows), len(algos), len(electionTestSizes))
	}
	for k, r := range rows {
		algo, n := algos[k/len(electionTestSizes)], electionTestSizes[k%len(electionTestSizes)]
		if r.Algorithm != algo || r.N != n {
			t.Errorf("row %d is %s n=%d, want %s n=%d", k, r.Algorithm, r.N, algo, n)
			continue
		}
		if r.Skipped {
			t.Errorf("%s n=%d skipped: %s", algo, n, r.SkipReason)
			continue
		}
		if r.Messages != r.TheoryMessages || r.Ratio != 1 || r.TheoryMessages <= 0 {
			t.Errorf("%s n=%d: measured %d messages (%v), theory %s = %d, ratio %v",
				algo, n, r.Messages, r.MessagesByType, r.Formula, r.TheoryMessages, r.Ratio)
		}
		sum := 0
		for _, k := range r.MessagesByType {
			sum += k
		}
		if sum != r.Messages {
			t.Errorf("%s n=%d: by type %v sums to %d, not %d", algo, n, r.MessagesByType, sum, r.Messages)
		}
		// The crashed leader is n-1, so a crash elects n-2; a cold start n-1.
		want := electionIDs(n)[n-1]
		if r.Start == "leader-crash" {
			want = electionIDs(n)[n-2]
		} else if r.Start != "cold-start" {
			t.Errorf("%s n=%d: Start = %q", algo, n, r.Start)
		}
		if r.Leader != string(want) || r.TimeMs <= 0 {
			t.Errorf("%s n=%d: leader %q after %v ms, want %q after a positive time", algo, n, r.Leader, r.TimeMs, want)
		}
	}
}

// TestElectionEchoFullMesh runs echo on the full mesh: n²-1 messages, a
// quadratic row.
func TestElectionEchoFullMesh(t *testing.T) {
	rows, err := Election(ElectionConfig{Algorithms: []string{"echo"}, Sizes: []int{8, 16}, EchoFullMesh: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if want := r.N*r.N - 1; r.Messages != want || r.TheoryMessages != want || !r.Quadratic {
			t.Errorf("echo full mesh n=%d: %d messages, theory %d, quadratic %v; want %d, quadratic",
				r.N, r.Messages, r.TheoryMessages, r.Quadratic, want)
		}
	}
}

// TestElectionSkipsQuadratic caps the Θ(n²) rows: they come back skipped,
// with their theoretical count and the reason, and the others are measured.
func TestElectionSkipsQuadratic(t *testing.T) {
	rows, err := Election(ElectionConfig{Algorithms: []string{"bully", "ring"}, Sizes: []int{8, 16}, MaxQuadraticN: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for _, r := range rows {
		skip := r.Algorithm == "bully" && r.N == 16
		if r.Skipped != skip {
			t.Errorf("%s n=%d: Skipped = %v, want %v", r.Algorithm, r.N, r.Skipped, skip)
		}
		if skip && (r.TheoryMessages != 240 || r.Messages != 0 || !strings.Contains(r.SkipReason, "MaxQuadraticN = 8")) {
			t.Errorf("skipped row %+v: want theory 240, nothing measured, the cap in the reason", r)
		}
		if !skip && r.Messages != r.TheoryMessages {
			t.Errorf("%s n=%d: %d messages, theory %d", r.Algorithm, r.N, r.Messages, r.TheoryMessages)
		}
	}
}

// TestElectionDeterministic: the same config gives the same rows.
func TestElectionDeterministic(t *testing.T) {
	cfg := ElectionConfig{Sizes: []int{8, 16}, Seed: 7}
	a, err := Election(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Election(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs of the same config differ:\n%+v\n%+v", a, b)
	}
}

// TestElectionBadConfig: each bad field gives an error that wraps
// ErrElectionConfig and names the field.
func TestElectionBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg   ElectionConfig
		field string
	}{
		{ElectionConfig{Algorithms: []string{"bully", "paxos"}}, "Algorithms[1]"},
		{ElectionConfig{Sizes: []int{8, 2}}, "Sizes[1]"},
		{ElectionConfig{Sizes: []int{MaxElectionN + 1}}, "Sizes[0]"},
		{ElectionConfig{RTT: -1}, "RTT"},
	} {
		_, err := Election(c.cfg)
		if err == nil || !errors.Is(err, ErrElectionConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("Election(%+v) = %v; want ErrElectionConfig naming %s", c.cfg, err, c.field)
		} else if c.field == "Algorithms[1]" && !errors.Is(err, classic.ErrUnknownAlgorithm) {
			t.Errorf("unknown algorithm: %v does not wrap classic.ErrUnknownAlgorithm", err)
		}
	}
}

// TestWriteElectionTable prints a header and one line per row.
func TestWriteElectionTable(t *testing.T) {
	rows, err := Election(ElectionConfig{Algorithms: []string{"bully", "stable"}, Sizes: []int{8, 16}, MaxQuadraticN: 8})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteElectionTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 1+len(rows) || !strings.HasPrefix(lines[0], "algorithm") {
		t.Fatalf("table of %d rows has %d lines:\n%s", len(rows), len(lines), b.String())
	}
	if !strings.Contains(lines[2], "skipped") || !strings.Contains(lines[1], "56") {
		t.Errorf("want bully n=8 measured (56) and n=16 skipped:\n%s", b.String())
	}
}
