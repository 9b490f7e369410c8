package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/superpeer/superpeer/testnet/latency"
)

func TestManyNodesMemLimit(t *testing.T) {
	const meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n"
	for _, c := range []struct {
		name, env, meminfo string
		want               int64
	}{
		{"three quarters of MemTotal", "", meminfo, 24576000 << 10 / 4 * 3},
		{"GOMEMLIMIT set: the user's", "8GiB", meminfo, 0},
		{"no meminfo", "", "", 0},
		{"MemTotal in other units", "", "MemTotal: 24 GB\n", 0},
		{"MemTotal not a number", "", "MemTotal: lots kB\n", 0},
		{"MemTotal zero", "", "MemTotal: 0 kB\n", 0},
	} {
		if got := manyNodesMemLimit(c.env, []byte(c.meminfo)); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestLatencyNote: peer says what it read from a --latency file, so that a
// data centre's microseconds without a header, read as plausible
// milliseconds, show as such.
func TestLatencyNote(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ head, want string }{
		{"", `3 hosts, values read in ms (the default: no "# unit:" header), median RTT 400ms, 0 of 3 pairs missing`},
		{"# unit: us\n", "3 hosts, values read in us (its header says so), median RTT 400µs, 0 of 3 pairs missing"},
	} {
		p := filepath.Join(dir, "m.txt")
		if err := os.WriteFile(p, []byte(c.head+"0 300 400\n300 0 500\n400 500 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := latency.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := latencyNote(p, m); got != "latency: "+p+": "+c.want {
			t.Errorf("latencyNote = %q, want %q", got, c.want)
		}
	}
}
