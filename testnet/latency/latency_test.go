package latency

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

func mustParse(t *testing.T, s string) *Matrix {
	t.Helper()
	m, err := Parse(strings.NewReader(s))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

func wantRTT(t *testing.T, m *Matrix, i, j int, want time.Duration, wantOK bool) {
	t.Helper()
	for _, p := range [][2]int{{i, j}, {j, i}} {
		got, ok := m.RTT(p[0], p[1])
		if got != want || ok != wantOK {
			t.Errorf("RTT(%d, %d) = %v, %v; want %v, %v", p[0], p[1], got, ok, want, wantOK)
		}
	}
}

func TestParseSymmetric(t *testing.T) {
	// Tabs, spaces, CRLF, a comment and blank lines are all accepted.
	m := mustParse(t, "\ufeff# three hosts\n0\t10\t20.5\r\n\n10 0 0.25\n20.5  0.25   0\n\n")
	if m.N() != 3 {
		t.Fatalf("N = %d, want 3", m.N())
	}
	wantRTT(t, m, 0, 0, 0, true)
	wantRTT(t, m, 0, 1, 10*ms, true)
	wantRTT(t, m, 0, 2, 20500*time.Microsecond, true)
	wantRTT(t, m, 1, 2, 250*time.Microsecond, true)
	if s := m.Stats(); s.Missing != 0 || s.Averaged != 0 || s.OneSided != 0 || s.Pairs != 3 {
		t.Errorf("Stats = %+v, want 3 pairs, none repaired", s)
	}
}

func TestParseMissingAndAsymmetric(t *testing.T) {
	// (0,1): 10 and 30 -> mean 20. (0,2): 0 and 40 -> one-sided 40.
	// (0,3): -1 and -1 -> missing. (1,2): -1 and 7 -> one-sided 7.
	// (1,3): 0 and 0 -> missing. (2,3): 5 and 5 -> 5.
	// The diagonal value 9 is ignored.
	m := mustParse(t, `
0   10  0   -1
30  0   -1  0
40  7   9   5
-1  0   5   0
`)
	wantRTT(t, m, 0, 1, 20*ms, true)
	wantRTT(t, m, 0, 2, 40*ms, true)
	wantRTT(t, m, 0, 3, 0, false)
	wantRTT(t, m, 1, 2, 7*ms, true)
	wantRTT(t, m, 1, 3, 0, false)
	wantRTT(t, m, 2, 3, 5*ms, true)
	wantRTT(t, m, 2, 2, 0, true)
	s := m.Stats()
	// Measured: 5 7 20 40; the median of an even count is the mean of the
	// two middle RTTs, 7 and 20.
	want := Stats{N: 4, Pairs: 6, Missing: 2, Averaged: 1, OneSided: 2,
		Min: 5 * ms, Median: 13500 * time.Microsecond, P95: 40 * ms, Max: 40 * ms, Mean: 18 * ms}
	if s != want {
		t.Errorf("Stats =\n %+v, want\n %+v", s, want)
	}
	if m.Missing() != 2 {
		t.Errorf("Missing = %d, want 2", m.Missing())
	}
}

func TestParseMeanRoundsDown(t *testing.T) {
	m := mustParse(t, "0 0.000001\n0.000002 0\n") // 1 ns and 2 ns
	wantRTT(t, m, 0, 1, 1, true)
	m = mustParse(t, "0 0.000003\n0.000002 0\n")
	wantRTT(t, m, 0, 1, 2, true)
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, in  string
		err       error
		line, col int
		contains  string
	}{
		{"ragged short", "0 1 2\n1 0\n2 1 0\n", ErrRagged, 2, 3, "row 2 has 2 values, want 3"},
		{"ragged long", "0 1\n1 0 7\n", ErrRagged, 2, 3, `"7"`},
		{"not a number", "0 1 2\n1 0 x3\n2 1 0\n", ErrNotNumber, 2, 3, `"x3"`},
		{"comma separated", "0,1\n1,0\n", ErrNotNumber, 1, 1, "separated by tabs or spaces"},
		{"NaN", "0 NaN\n1 0\n", ErrNotNumber, 1, 2, "finite"},
		{"Inf", "0 1\n+Inf 0\n", ErrNotNumber, 2, 1, ""},
		{"negative", "# c\n0 1\n-2.5 0\n", ErrNegative, 3, 1, `"-2.5"`},
		{"too large", "0 1e300\n1 0\n", ErrTooLarge, 1, 2, ""},
		{"too few rows", "0 1 2\n1 0 2\n", ErrNotSquare, 2, 0, "2 rows of 3 values"},
		{"too many rows", "0 1\n1 0\n1 1\n", ErrNotSquare, 3, 0, "more than 2 rows"},
		{"empty", "\n# nothing\n  \n", ErrEmpty, 3, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.in))
			if !errors.Is(err, c.err) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err %v is not a *ParseError", err)
			}
			if pe.Line != c.line || pe.Column != c.col {
				t.Errorf("at line %d column %d, want %d, %d (%v)", pe.Line, pe.Column, c.line, c.col, err)
			}
			if !strings.Contains(err.Error(), c.contains) {
				t.Errorf("error %q does not contain %q", err, c.contains)
			}
		})
	}
}

func TestLoadErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/bad.txt"
	if err := os.WriteFile(p, []byte("0 1\n1 oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if !errors.Is(err, ErrNotNumber) {
		t.Fatalf("Load: err = %v, want ErrNotNumber", err)
	}
	if want := p + ":2:2: not a number"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	if _, err := Load(dir + "/absent.txt"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(absent): err = %v, want os.ErrNotExist", err)
	}
}

func TestConstant(t *testing.T) {
	m := Constant(100000, 80*ms) // no per-pair storage, so this is cheap
	if m.N() != 100000 {
		t.Fatalf("N = %d", m.N())
	}
	wantRTT(t, m, 3, 99999, 80*ms, true)
	wantRTT(t, m, 7, 7, 0, true)
	if s := m.Stats(); s.Median != 80*ms || s.Missing != 0 {
		t.Errorf("Stats = %+v", s)
	}
	if f, err := m.FillMissing(); err != nil || f != m {
		t.Errorf("FillMissing on a full matrix = %p, %v; want the matrix itself", f, err)
	}
}

func TestRTTPanicsOutOfRange(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("RTT(0, 2) on a 2-host matrix did not panic")
		}
	}()
	Constant(2, ms).RTT(0, 2)
}

func TestFillMissing(t *testing.T) {
	// (0,3) is missing; paths 0-1-3 = 10+30 = 40, 0-2-3 = 20+5 = 25.
	// (4,x) is missing for all x: no two-hop path, so the median of the
	// measured pairs is used.
	m := mustParse(t, `
0  10 20 -1 -1
10 0  15 30 -1
20 15 0  5  -1
-1 30 5  0  -1
-1 -1 -1 -1 0
`)
	if m.Missing() != 5 {
		t.Fatalf("Missing = %d, want 5", m.Missing())
	}
	f, err := m.FillMissing()
	if err != nil {
		t.Fatal(err)
	}
	if f.Missing() != 0 {
		t.Errorf("after FillMissing, Missing = %d", f.Missing())
	}
	wantRTT(t, f, 0, 3, 25*ms, true)
	median := m.Stats().Median // measured: 5 10 15 20 30 -> 15
	if median != 15*ms {
		t.Fatalf("median = %v, want 15ms", median)
	}
	for j := 0; j < 4; j++ {
		wantRTT(t, f, 4, j, median, true)
	}
	wantRTT(t, f, 1, 2, 15*ms, true) // measured pairs unchanged
	wantRTT(t, m, 0, 3, 0, false)    // the original is unchanged

	none := mustParse(t, "0 -1\n-1 0\n")
	if _, err := none.FillMissing(); !errors.Is(err, ErrNoData) {
		t.Errorf("FillMissing with no data: err = %v, want ErrNoData", err)
	}
}

func TestSub(t *testing.T) {
	m := mustParse(t, "0 1 2\n1 0 -1\n2 -1 0\n")
	s := m.Sub([]int{2, 0, 2, 1})
	if s.N() != 4 {
		t.Fatalf("N = %d", s.N())
	}
	wantRTT(t, s, 0, 1, 2*ms, true)
	wantRTT(t, s, 0, 2, 0, true) // two copies of host 2
	wantRTT(t, s, 0, 3, 0, false)
	wantRTT(t, s, 1, 3, 1*ms, true)
	if s.Missing() != 2 {
		t.Errorf("Missing = %d, want 2 (pairs {0,3} and {2,3})", s.Missing())
	}
}

// planetLab is the repository's copy of the PlanetLab median matrix.
const planetLab = "../../testdata/planetlab490/"

func TestLoadPlanetLab(t *testing.T) {
	for _, name := range []string{"planetlab490_median18_ms.txt"} {
		t.Run(name, func(t *testing.T) {
			path := planetLab + name
			m, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			s := m.Stats()
			t.Logf("%s: %+v", name, s)
			if s.N != 490 || s.Pairs != 490*489/2 {
				t.Errorf("N = %d, pairs = %d; want 490, %d", s.N, s.Pairs, 490*489/2)
			}
			if s.Missing != 0 || s.Averaged != 0 || s.OneSided != 0 {
				t.Errorf("the PlanetLab matrices are complete and symmetric, got %+v", s)
			}
			// The data README: median about 134 ms, 95th percentile about
			// 326 ms, co-located hosts under 1 ms.
			if s.Median < 120*ms || s.Median > 150*ms {
				t.Errorf("median = %v, want about 134ms", s.Median)
			}
			if s.P95 < 300*ms || s.P95 > 350*ms {
				t.Errorf("p95 = %v, want about 326ms", s.P95)
			}
			if s.Min <= 0 || s.Min > ms {
				t.Errorf("min = %v, want a co-located pair under 1ms", s.Min)
			}
			if s.Max > 10*time.Second {
				t.Errorf("max = %v, want under 10s", s.Max)
			}
			if s.Mean < s.Median || s.Mean > s.P95 {
				t.Errorf("mean = %v, want between the median and p95 (long tail)", s.Mean)
			}
		})
	}
	// One known entry of the median file: row 1, column 4 is 121.65 ms.
	if m, err := Load(planetLab + "planetlab490_median18_ms.txt"); err == nil {
		wantRTT(t, m, 0, 3, 121650*time.Microsecond, true)
	}
}

func BenchmarkLoadPlanetLab(b *testing.B) {
	path := planetLab + "planetlab490_median18_ms.txt"
	if _, err := os.Stat(path); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}
