package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/superpeer/superpeer/bench"
	"github.com/superpeer/superpeer/testnet/attack"
)

// peer bench --quick runs every suite end to end on small sizes, as make
// bench does on the full ones: results.json holds rows of every suite, the
// plots are PNG files, and the report links each of them.
func TestBenchQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every suite, and live testnets")
	}
	dir := t.TempDir()
	report := filepath.Join(dir, "BENCHMARKS.md")
	out, err := exec.Command(peerBin, "bench", "--quick", "--out", filepath.Join(dir, "plots"), "--report", report).CombinedOutput()
	if err != nil {
		t.Fatalf("peer bench --quick: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "plots", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r bench.Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Quick || !r.Sim || !r.Live || len(r.Suites) != len(bench.Suites()) {
		t.Errorf("results describe the wrong run: quick %v, sim %v, live %v, suites %v", r.Quick, r.Sim, r.Live, r.Suites)
	}
	if len(r.SimScale) == 0 || len(r.LiveScale) == 0 {
		t.Errorf("scale rows: %d simulator, %d live", len(r.SimScale), len(r.LiveScale))
	}
	for _, row := range r.LiveScale {
		if !row.Converged || row.BytesPerPeerPerS <= 0 || row.PeakMemMB <= 0 {
			t.Errorf("live row %+v: want converged, with traffic and memory", row)
		}
	}
	// The live attack suite: every attack ran on its swarm, and none of
	// them made an honest peer banned, an attacker superpeer, or a swarm
	// that did not recover.
	if len(r.LiveAttack) != len(attack.All()) {
		t.Errorf("%d live attack rows, want one per attack (%d)", len(r.LiveAttack), len(attack.All()))
	}
	for _, row := range r.LiveAttack {
		if row.Error != "" || row.Samples == 0 || row.PeakRSSMB <= 0 || row.IdleCPU <= 0 {
			t.Errorf("live attack %s: error %q, %d samples, peak RSS %.0f MB, idle CPU %.3f: want a measured run", row.Attack, row.Error, row.Samples, row.PeakRSSMB, row.IdleCPU)
		}
		if row.HonestBans > 0 || row.AttackerShare > 0 || row.RecoverMs < 0 {
			t.Errorf("live attack %s: %d honest peers banned, attacker superpeer in %.1f %% of samples, recovered after %.0f ms (-1: not)",
				row.Attack, row.HonestBans, 100*row.AttackerShare, row.RecoverMs)
		}
	}
	md, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "plots", "*.png"))
	if len(pngs) == 0 {
		t.Fatal("no plots drawn")
	}
	for _, p := range pngs {
		if !strings.Contains(string(md), "plots/"+filepath.Base(p)) {
			t.Errorf("the report does not link %s", filepath.Base(p))
		}
		if b, err := os.ReadFile(p); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
			t.Errorf("%s is not a PNG (%v)", p, err)
		}
	}
}
