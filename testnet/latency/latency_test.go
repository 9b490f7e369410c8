package latency

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
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
		{"too many rows", "0 1\n1 0\n1 1\n", ErrNotSquare, 3, 0, "more rows than the 2 values"},
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

func TestScale(t *testing.T) {
	m := mustParse(t, "0 10 2\n10 0 -1\n2 -1 0\n")
	s := m.Scale(0.25)
	wantRTT(t, s, 0, 1, 2500*time.Microsecond, true)
	wantRTT(t, s, 0, 2, 500*time.Microsecond, true)
	wantRTT(t, s, 1, 2, 0, false) // missing stays missing
	if s.Missing() != 1 {
		t.Errorf("Missing = %d, want 1", s.Missing())
	}
	wantRTT(t, m, 0, 1, 10*ms, true) // m itself unchanged
	wantRTT(t, m.Scale(1e-9), 0, 2, time.Microsecond, true)
	dup := m.Sub([]int{0, 0}).Scale(3)
	wantRTT(t, dup, 0, 1, 0, true) // two copies of a host stay 0 apart
	wantRTT(t, Constant(3, 4*ms).Scale(10), 0, 2, 40*ms, true)
	wantRTT(t, m.Scale(1e30), 0, 1, math.MaxInt64, true) // past the longest Duration
	for _, f := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Scale(%v) did not panic", f)
				}
			}()
			m.Scale(f)
		}()
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

// shiftFile writes a copy of the matrix file src to dir/name with every
// positive value divided by div (the same RTTs in a larger unit) and head
// as its first lines.
func shiftFile(t *testing.T, src, dir, name, head string, div float64) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	out.WriteString(head)
	for _, line := range strings.Split(string(b), "\n") {
		for i, f := range strings.Fields(line) {
			if i > 0 {
				out.WriteByte('\t')
			}
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatal(err)
			}
			if v > 0 {
				f = strconv.FormatFloat(v/div, 'g', -1, 64)
			}
			out.WriteString(f)
		}
		out.WriteByte('\n')
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sameMatrix(t *testing.T, got, want *Matrix) {
	t.Helper()
	if got.N() != want.N() {
		t.Fatalf("N = %d, want %d", got.N(), want.N())
	}
	for i := range want.N() {
		for j := range want.N() {
			g, gok := got.RTT(i, j)
			w, wok := want.RTT(i, j)
			if g != w || gok != wok {
				t.Fatalf("RTT(%d, %d) = %v, %v; want %v, %v", i, j, g, gok, w, wok)
			}
		}
	}
}

// TestLoadUnits checks that the PlanetLab matrix written in seconds is
// refused as milliseconds, with an error that says how to read it, and
// loads equal to the original in seconds, by argument or by header; and
// the same for microseconds.
func TestLoadUnits(t *testing.T) {
	orig := planetLab + "planetlab490_median18_ms.txt"
	want, err := Load(orig)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := LoadIn(orig, Millisecond); err != nil {
		t.Fatalf("LoadIn(ms): %v", err)
	} else {
		sameMatrix(t, m, want)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		u   Unit
		div float64
	}{{Second, 1000}, {Microsecond, 0.001}} {
		t.Run(c.u.String(), func(t *testing.T) {
			raw := shiftFile(t, orig, dir, "raw-"+c.u.String(), "", c.div)
			_, err := Load(raw)
			var ie *ImplausibleError
			if !errors.As(err, &ie) || !errors.Is(err, ErrImplausible) {
				t.Fatalf("Load(%s file) = %v, want an *ImplausibleError", c.u, err)
			}
			if ie.Unit != Millisecond || ie.Likely != c.u {
				t.Errorf("error read in %v, suggests %v; want ms, %v", ie.Unit, ie.Likely, c.u)
			}
			for _, s := range []string{raw, "# unit: " + c.u.String(), "--latency-unit " + c.u.String(), "look like " + c.u.long()} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			t.Log(err)
			if _, err := LoadIn(raw, Millisecond); !errors.Is(err, ErrImplausible) {
				t.Errorf("LoadIn(ms) = %v, want ErrImplausible", err)
			}
			m, err := LoadIn(raw, c.u)
			if err != nil {
				t.Fatalf("LoadIn(%v): %v", c.u, err)
			}
			sameMatrix(t, m, want)

			// With a header, Load reads the unit from the file; an
			// explicit unit must agree with it.
			head := shiftFile(t, orig, dir, "head-"+c.u.String(), "# PlanetLab\n#Unit:  "+c.u.String()+" \n\n", c.div)
			if m, err = Load(head); err != nil {
				t.Fatalf("Load(header %v): %v", c.u, err)
			}
			sameMatrix(t, m, want)
			if m, err = LoadIn(head, c.u); err != nil {
				t.Fatalf("LoadIn(header %v, %v): %v", c.u, c.u, err)
			}
			sameMatrix(t, m, want)
			if _, err := LoadIn(head, Millisecond); !errors.Is(err, ErrUnit) || !strings.Contains(err.Error(), ":2:") {
				t.Errorf("LoadIn(header %v, ms) = %v, want ErrUnit at line 2", c.u, err)
			}
		})
	}
	// A matrix in seconds read as seconds is fine; the original read as
	// seconds (or as microseconds) is refused in turn.
	for _, u := range []Unit{Second, Microsecond} {
		_, err := LoadIn(orig, u)
		var ie *ImplausibleError
		if !errors.As(err, &ie) || ie.Likely != Millisecond {
			t.Errorf("LoadIn(ms file, %v) = %v, want an *ImplausibleError suggesting ms", u, err)
		}
	}
}

func TestLoadImplausibleNoUnit(t *testing.T) {
	// A median of 1e12 ms is 31 years, 31,000 s read as µs: no unit fits.
	p := filepath.Join(t.TempDir(), "huge.txt")
	if err := os.WriteFile(p, []byte("0 1e12\n1e12 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	var ie *ImplausibleError
	if !errors.As(err, &ie) || ie.Likely != 0 || !strings.Contains(err.Error(), "no unit") {
		t.Fatalf("Load = %v, want an *ImplausibleError suggesting no unit", err)
	}
	// Nothing measured: nothing to judge.
	if err := os.WriteFile(p, []byte("0 -1\n-1 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Errorf("Load(no measured pair) = %v, want nil", err)
	}
}

func TestUnitErrors(t *testing.T) {
	for _, s := range []string{"", "S", "sec", "seconds", "msec", "ns", "m", " ms"} {
		if u, err := ParseUnit(s); !errors.Is(err, ErrUnit) || !strings.Contains(err.Error(), "want s, ms or us") {
			t.Errorf("ParseUnit(%q) = %v, %v; want ErrUnit", s, u, err)
		}
	}
	for s, want := range map[string]Unit{"s": Second, "ms": Millisecond, "us": Microsecond, "µs": Microsecond} {
		if u, err := ParseUnit(s); u != want || err != nil {
			t.Errorf("ParseUnit(%q) = %v, %v; want %v", s, u, err, want)
		}
	}
	cases := []struct {
		name, in string
		u        Unit
		line     int
		contains string
	}{
		{"unknown", "# unit: minutes\n0 1\n1 0\n", 0, 1, `"minutes"`},
		{"empty", "#unit:\n0 1\n1 0\n", 0, 1, `# unit: s`},
		{"after the first row", "0 1\n# unit: s\n1 0\n", 0, 2, "before the first row"},
		{"two headers", "# unit: s\n# unit: ms\n0 1\n1 0\n", 0, 2, "the first said s"},
		{"disagrees", "# unit: s\n0 1\n1 0\n", Microsecond, 1, "read in microseconds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseIn(strings.NewReader(c.in), c.u)
			var pe *ParseError
			if !errors.Is(err, ErrUnit) || !errors.As(err, &pe) || pe.Line != c.line || !strings.Contains(err.Error(), c.contains) {
				t.Errorf("err = %v; want ErrUnit at line %d saying %q", err, c.line, c.contains)
			}
		})
	}
	if _, err := ParseIn(strings.NewReader("0 1\n1 0\n"), Unit(time.Hour)); !errors.Is(err, ErrUnit) {
		t.Errorf("ParseIn(hours) = %v, want ErrUnit", err)
	}
	// A header in agreement is fine, and Parse honours it; other comments
	// that mention units are comments.
	m := mustParse(t, "# unit: s\n# units are a matter of taste\n0 0.5\n0.5 0\n")
	wantRTT(t, m, 0, 1, 500*ms, true)
	if m, err := ParseIn(strings.NewReader("# unit: us\n0 500\n500 0\n"), Microsecond); err != nil {
		t.Fatal(err)
	} else {
		wantRTT(t, m, 0, 1, 500*time.Microsecond, true)
	}
}

// TestLoadStatedSubMillisecond: RTTs of one data centre (a median of
// about 400 µs) load from a file whose header states microseconds; not
// when only the caller says so (TestLoadUnits: the PlanetLab matrix in
// milliseconds read as microseconds looks the same), nor as milliseconds
// written under 1, refused with an error that says how to write them.
// Without a unit they read as milliseconds, 400 ms, which is plausible:
// the one mistake the check cannot see.
func TestLoadStatedSubMillisecond(t *testing.T) {
	dir := t.TempDir()
	write := func(name, head string, scale float64) string {
		var b strings.Builder
		b.WriteString(head)
		const n = 6
		for i := range n {
			for j := range n {
				v := 0.0
				if i != j {
					v = float64(300+20*(i+j)) * scale
				}
				fmt.Fprintf(&b, "%g ", v)
			}
			b.WriteString("\n")
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	check := func(m *Matrix, err error, what string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if rtt, ok := m.RTT(0, 1); !ok || rtt != 320*time.Microsecond {
			t.Errorf("%s: RTT(0, 1) = %v, %v; want 320µs", what, rtt, ok)
		}
	}
	us := write("us.txt", "# unit: us\n", 1)
	m, err := Load(us)
	check(m, err, "header us")
	m, err = LoadIn(us, Microsecond)
	check(m, err, "header us, LoadIn(us)")
	bare := write("bare.txt", "", 1)
	if _, err := LoadIn(bare, Microsecond); !errors.Is(err, ErrImplausible) || !strings.Contains(err.Error(), `begin it with the line "# unit: us"`) {
		t.Errorf("LoadIn(no header, us) = %v, want ErrImplausible that says to state the unit in the file", err)
	}
	if m, err := Load(bare); err != nil || m.Stats().Median < 300*time.Millisecond {
		t.Errorf("Load(no unit) = %v; want the values read as milliseconds", err)
	}
	ms := write("ms.txt", "# unit: ms\n", 0.001)
	_, err = Load(ms)
	var ie *ImplausibleError
	if !errors.As(err, &ie) || !ie.Stated || ie.Unit != Millisecond || !strings.Contains(err.Error(), "write them in microseconds") ||
		!strings.Contains(err.Error(), `make the file's header "# unit: s"`) || strings.Contains(err.Error(), "--latency-unit") {
		t.Errorf("Load(0.3 stated as ms) = %v, want an *ImplausibleError that says to change the header or write microseconds", err)
	}
	// Under a microsecond, even in microseconds, is no RTT.
	tiny := write("tiny.txt", "# unit: us\n", 0.001)
	if _, err := Load(tiny); !errors.Is(err, ErrImplausible) {
		t.Errorf("Load(0.3 µs) = %v, want ErrImplausible", err)
	}
}

// TestParseForeignFormats: files written by other tools, as an audit of
// the loader made them: the unit headers their authors write are read,
// and the mistakes are refused with a hint that names them, where they
// used to load silently wrong (host labels read as RTTs, a near-miss unit
// header skipped as a comment) or be refused with a misleading error.
func TestParseForeignFormats(t *testing.T) {
	const body = "0 0.3 0.4 0.5\n0.3 0 0.6 0.7\n0.4 0.6 0 0.8\n0.5 0.7 0.8 0\n"
	for _, c := range []struct {
		name, in string
		rtt01    time.Duration // when it loads
		err      error
		hint     string
	}{
		{"double hash", "## unit: s\n" + body, 300 * ms, nil, ""},
		{"units", "# units: s\n" + body, 300 * ms, nil, ""},
		{"equals", "# Unit = s\n" + body, 300 * ms, nil, ""},
		{"greek mu", "# unit: μs\n0 300 400 500\n300 0 600 700\n400 600 0 800\n500 700 800 0\n", 300 * time.Microsecond, nil, ""},
		{"unit in prose, no header", "# RTTs; unit is seconds\n" + body, 0, ErrUnit, "no unit header"},
		{"unit in prose after a header", "# unit: s\n# RTTs; unit is seconds\n" + body, 300 * ms, nil, ""},
		{"a word that contains unit", "# community data\n" + body, 300 * time.Microsecond, nil, ""},
		{"label row and column", "0 1 2 3 4\n1 0 10.5 11 12\n2 10.5 0 13 14\n3 11 13 0 15\n4 12 14 15 0\n", 0, ErrLabels, "host labels"},
		{"label row and column, sparse IDs", "0 6012 6023 10342 11021\n6012 0 10.5 11 12\n6023 10.5 0 13 14\n10342 11 13 0 15\n11021 12 14 15 0\n", 0, ErrLabels, "host labels"},
		{"label column, no diagonal", "1 101 102 103\n2 110 112 113\n3 120 121 123\n4 130 131 132\n", 0, ErrLabels, "host labels"},
		{"whole RTTs that increase", "0 10 20 35\n10 0 12 14\n20 12 0 16\n35 14 16 0\n", 10 * ms, nil, ""},
		{"empty tab cell", "0\t110\t\t40\n110\t0\t30\t20\n", 0, ErrRagged, "two tabs in a row"},
		{"decimal comma", "0\t110,5\n110,5\t0\n", 0, ErrNotNumber, "decimal comma"},
		{"lone CR", "0 1\r1 0\r", 0, ErrEncoding, "lone CR"},
		{"UTF-16", "\xff\xfe0\x00 \x001\x00\n", 0, ErrEncoding, "UTF-16"},
		{"overflow", "0 1e309\n1 0\n", 0, ErrTooLarge, ""},
		{"negative overflow", "0 -1e309\n1 0\n", 0, ErrNotNumber, ""},
		{"hexadecimal", "0 0x1p4\n0x1p4 0\n", 0, ErrNotNumber, "decimal"},
		{"underscore", "0 1_000\n1_000 0\n", 0, ErrNotNumber, "decimal"},
		{"lower triangle", "0\n10 0\n20 30 0\n", 0, ErrRagged, "lower triangle"},
		{"upper triangle", "0 10 20\n0 30\n0\n", 0, ErrRagged, "upper triangle"},
		{"count first", "3\n0 10 20\n10 0 30\n20 30 0\n", 0, ErrRagged, "count of hosts"},
		{"header row", "1 2 3\n0 10 20\n10 0 30\n20 30 0\n", 0, ErrNotSquare, "header row"},
		{"label column", "1 0 10 20\n2 10 0 30\n3 20 30 0\n", 0, ErrNotSquare, "first column of host labels"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := Parse(strings.NewReader(c.in))
			if c.err == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if rtt, ok := m.RTT(0, 1); !ok || rtt != c.rtt01 {
					t.Errorf("RTT(0, 1) = %v, %v; want %v", rtt, ok, c.rtt01)
				}
				return
			}
			if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.hint) {
				t.Errorf("Parse = %v; want %v saying %q", err, c.err, c.hint)
			}
		})
	}
}

// TestUnitSource: a parsed matrix says what unit it was read in and where
// that came from, and a unit the caller gave alone that looks wrong is
// answered with advice that works with the flag (change it), not advice
// that conflicts with it (a header).
func TestUnitSource(t *testing.T) {
	const body = "0 130 140\n130 0 150\n140 150 0\n"
	for _, c := range []struct {
		in   string
		u    Unit
		want Unit
		from UnitFrom
	}{
		{body, 0, Millisecond, UnitDefault},
		{body, Millisecond, Millisecond, UnitCaller},
		{"# unit: ms\n" + body, 0, Millisecond, UnitHeader},
		{"# unit: ms\n" + body, Millisecond, Millisecond, UnitHeader},
	} {
		m, err := ParseIn(strings.NewReader(c.in), c.u)
		if err != nil {
			t.Fatal(err)
		}
		if u, from := m.Unit(); u != c.want || from != c.from {
			t.Errorf("ParseIn(%q, %v).Unit() = %v, %v; want %v, %v", c.in[:8], c.u, u, from, c.want, c.from)
		}
	}
	// A comment that names a unit refuses a file without a header only
	// when the caller gave none either.
	if m, err := ParseIn(strings.NewReader("# RTTs, unit us\n"+body), Microsecond); err != nil {
		t.Errorf("a comment naming a unit, with the caller's: %v", err)
	} else if u, from := m.Unit(); u != Microsecond || from != UnitCaller {
		t.Errorf("Unit() = %v, %v; want us from the caller", u, from)
	}
	if u, from := Constant(3, ms).Unit(); u != 0 || from != "" {
		t.Errorf("Constant's Unit() = %v, %q; want none", u, from)
	}
	p := filepath.Join(t.TempDir(), "ms.txt")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadIn(p, Second)
	var ie *ImplausibleError
	if !errors.As(err, &ie) || !ie.Given || ie.Stated || !strings.Contains(err.Error(), "pass --latency-unit ms instead") {
		t.Errorf("LoadIn(ms file, s) = %v; want an *ImplausibleError advising --latency-unit ms", err)
	}
}

// TestFillMissingAmong fills the pairs among the first hosts alone,
// through every host, and leaves the others missing.
func TestFillMissingAmong(t *testing.T) {
	m := mustParse(t, "0 -1 10 -1\n-1 0 20 -1\n10 20 0 5\n-1 -1 5 0\n")
	f, err := m.FillMissingAmong(2)
	if err != nil {
		t.Fatal(err)
	}
	wantRTT(t, f, 0, 1, 30*ms, true) // through host 2
	if _, ok := f.RTT(0, 3); ok {
		t.Error("RTT(0, 3) filled, though host 3 is not among the first 2")
	}
	if f.Missing() != m.Missing()-1 {
		t.Errorf("Missing() = %d, want %d", f.Missing(), m.Missing()-1)
	}
	full, err := m.FillMissing()
	if err != nil {
		t.Fatal(err)
	}
	wantRTT(t, full, 0, 3, 15*ms, true)
	if full.Missing() != 0 {
		t.Errorf("FillMissing left %d pairs missing", full.Missing())
	}
}
