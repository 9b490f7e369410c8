package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/bench"
)

func reportResults(messages int) *bench.Results {
	return &bench.Results{
		Command: "peer bench --suite election --sim", StartedAt: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), TookS: 6,
		Suites:   []string{bench.SuiteElection},
		Election: []bench.ElectionRow{{Algorithm: "bully", N: 8, Messages: messages, TheoryMessages: 56, Ratio: 1}},
	}
}

// --report FILE writes a fresh report where FILE does not exist; into an
// existing report it puts the new blocks and keeps the text written by hand
// between them; an existing file without markers, or with malformed ones,
// is refused and left as it is.
func TestBenchReportKeepsHandText(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "BENCHMARKS.md")
	plots := filepath.Join(dir, "docs", "bench")
	if err := writeReport(path, reportResults(56), nil, plots); err != nil {
		t.Fatal(err)
	}
	fresh, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(fresh), "| 56 |") {
		t.Fatalf("fresh report without the election table:\n%s", fresh)
	}
	if names, err := bench.GeneratedBlocks(fresh); err != nil || len(names) == 0 {
		t.Fatalf("fresh report: blocks %v, %v", names, err)
	}

	// Notes by hand after the election table, and at the end.
	note := "\n**A note by hand** (2026-12-07, `peer bench --suite election --sim`): 56 messages.\n\n"
	end := "<!-- end generated: election-table -->\n"
	i := strings.Index(string(fresh), end)
	if i < 0 {
		t.Fatalf("no election-table block:\n%s", fresh)
	}
	edited := string(fresh[:i+len(end)]) + note + string(fresh[i+len(end):]) + "Last words.\n"
	if err := os.WriteFile(path, []byte(edited), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := writeReport(path, reportResults(57), nil, plots); err != nil {
		t.Fatal(err)
	}
	merged, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(edited, "| 56 |", "| 57 |", 1)
	if string(merged) != want {
		t.Errorf("merged report:\n%s\nwant\n%s", merged, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode after the merge: %v, %v; want the file's own, 0640", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".BENCHMARKS.md.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// Refused, and left as it is: a file without markers, malformed ones.
	for _, c := range []struct{ name, text, want string }{
		{"no markers", "# Benchmarks\n\nEvery figure written by hand.\n", "would overwrite it"},
		{"unterminated", "# Benchmarks\n\n<!-- generated: election-table -->\n| bully |\n", "line 3"},
	} {
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		err := writeReport(path, reportResults(58), nil, plots)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming %s and saying %q", c.name, err, path, c.want)
		}
		if c.name == "no markers" && (!errors.Is(err, errUnmarkedReport) || !strings.Contains(err.Error(), "delete the file")) {
			t.Errorf("%s: error %v, want errUnmarkedReport saying how to proceed", c.name, err)
		}
		if b, _ := os.ReadFile(path); string(b) != c.text {
			t.Errorf("%s: the file changed:\n%s", c.name, b)
		}
	}
}

// peer bench refuses an existing --report without markers before it runs
// anything (no results.json written: the run would have written it before
// the report), and leaves the file as it is.
func TestBenchRefusesUnmarkedReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "BENCHMARKS.md")
	text := "# Benchmarks\n\nWritten by hand.\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(peerBin, "bench", "--suite", "election", "--sim", "--no-plots", "--out", filepath.Join(dir, "out"), "--report", path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "has no generated blocks") || !strings.Contains(string(out), "delete the file") {
		t.Errorf("peer bench with an unmarked report: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(path); string(b) != text {
		t.Errorf("the report changed:\n%s", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "results.json")); err == nil {
		t.Error("results.json written: the run went ahead")
	}
}

// results.json in --out keeps the figures of an earlier run that this run
// did not make, naming the run that made them; a results.json that is not
// one is refused and left as it is.
func TestBenchResultsKeepEarlier(t *testing.T) {
	dir := t.TempDir()
	earlier := &bench.Results{Command: "peer bench --suite all", StartedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Suites:    []string{bench.SuiteSelection, bench.SuiteElection},
		Selection: []bench.SelectionRow{{Network: "planetlab490", Strategy: "geometric"}},
		Election:  []bench.ElectionRow{{Algorithm: "ring", N: 8, Messages: 99}}}
	if err := writeResults(dir, earlier); err != nil {
		t.Fatal(err)
	}
	if err := writeResults(dir, reportResults(56)); err != nil {
		t.Fatal(err)
	}
	got, err := readResults(dir)
	if err != nil || got == nil {
		t.Fatalf("read back: %v, %v", got, err)
	}
	if len(got.Election) != 1 || got.Election[0].Messages != 56 || len(got.Selection) != 1 || got.Selection[0].Strategy != "geometric" {
		t.Errorf("merged: election %+v, selection %+v; want the new election, the earlier selection", got.Election, got.Selection)
	}
	if len(got.Earlier) != 1 || got.Earlier[0].Command != earlier.Command || !slices.Equal(got.Earlier[0].Kept, []string{"selection"}) {
		t.Errorf("earlier: %+v, want the selection kept from %q", got.Earlier, earlier.Command)
	}

	path := filepath.Join(dir, "results.json")
	if err := os.WriteFile(path, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeResults(dir, reportResults(57)); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another --out") {
		t.Errorf("over a file that is no results: %v, want an error naming it", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "not json\n" {
		t.Errorf("the file changed: %q", b)
	}
}
