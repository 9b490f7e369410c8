package main

import "testing"

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
