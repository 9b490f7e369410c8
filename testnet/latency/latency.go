package latency

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/superpeer/superpeer/stats"
)

// Sentinel errors wrapped by a *ParseError (or returned directly), for use
// with errors.Is.
var (
	// ErrEmpty means the input holds no rows.
	ErrEmpty = errors.New("empty matrix")
	// ErrRagged means a row has a different number of values than the first.
	ErrRagged = errors.New("ragged row")
	// ErrNotNumber means a value is not a finite decimal number (digits,
	// a point, an exponent: no hexadecimal, no underscores).
	ErrNotNumber = errors.New("not a number")
	// ErrNegative means a value is negative and not the missing marker -1.
	ErrNegative = errors.New("negative RTT")
	// ErrTooLarge means a value is 73 years or more (a quarter of what a
	// time.Duration holds, so that two of them add up).
	ErrTooLarge = errors.New("RTT too large")
	// ErrNotSquare means the number of rows differs from the number of columns.
	ErrNotSquare = errors.New("matrix is not square")
	// ErrNoData means FillMissing found no measured pair to estimate from.
	ErrNoData = errors.New("latency: no measured pair to estimate missing entries from")
	// ErrUnit means a unit is unknown, a "# unit:" header is malformed or
	// misplaced, or it disagrees with the unit the caller asked for.
	ErrUnit = errors.New("bad unit")
	// ErrLabels means the first row and column look like host labels
	// rather than RTTs (see the package documentation).
	ErrLabels = errors.New("host labels, not RTTs")
	// ErrEncoding means the text is not one line of ASCII or UTF-8 per
	// row: UTF-16 (NUL bytes), or lines ended by a lone carriage return.
	ErrEncoding = errors.New("unreadable text")
	// ErrImplausible means a file's median RTT, read in its unit, lies
	// outside [MinMedian, MaxMedian]: the values are most likely written in
	// another unit. Load wraps it in an *ImplausibleError.
	ErrImplausible = errors.New("implausible RTTs")
)

// Unit is the time unit a matrix's values are written in. The zero value
// means "the unit the input's header names, or milliseconds without one".
type Unit time.Duration

// The units a matrix may be written in.
const (
	Second      = Unit(time.Second)
	Millisecond = Unit(time.Millisecond)
	Microsecond = Unit(time.Microsecond)
)

type unitInfo struct {
	u     Unit
	names []string // the first is the canonical one
	long  string
}

// units lists the units by name, in the order ImplausibleError tries them.
var units = []unitInfo{
	{Second, []string{"s"}, "seconds"},
	{Millisecond, []string{"ms"}, "milliseconds"},
	{Microsecond, []string{"us", "µs", "μs"}, "microseconds"},
}

// ParseUnit reads a unit name: "s", "ms", or "us" (also "µs", with the
// micro sign or the Greek letter mu).
func ParseUnit(s string) (Unit, error) {
	for _, x := range units {
		if slices.Contains(x.names, s) {
			return x.u, nil
		}
	}
	return 0, fmt.Errorf("%w %q: want s, ms or us", ErrUnit, s)
}

// String returns the unit's name as ParseUnit reads it ("s", "ms", "us"),
// or "default" for the zero Unit.
func (u Unit) String() string {
	for _, x := range units {
		if x.u == u {
			return x.names[0]
		}
	}
	if u == 0 {
		return "default"
	}
	return fmt.Sprintf("Unit(%d)", int64(u))
}

func (u Unit) long() string {
	for _, x := range units {
		if x.u == u {
			return x.long
		}
	}
	return u.String()
}

func (u Unit) valid() bool {
	return slices.ContainsFunc(units, func(x unitInfo) bool { return x.u == u })
}

// ParseError describes malformed input: where it is and what is wrong.
type ParseError struct {
	// File is the file name when the input came from Load, else empty.
	File string
	// Line is the 1-based line number in the input.
	Line int
	// Column is the 1-based position of the value in its row, or 0 when the
	// error concerns the whole input (ErrEmpty, too few rows).
	Column int
	// Text is the offending value as written, if any.
	Text string
	// Err is one of the sentinel errors of this package.
	Err error
	// Hint says what was expected.
	Hint string
}

// Error formats the error as "latency: file:line:column: problem: text; hint".
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("latency: ")
	switch {
	case e.File != "" && e.Column > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	case e.File != "":
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.Column > 0:
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	default:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	b.WriteString(e.Err.Error())
	if e.Text != "" {
		fmt.Fprintf(&b, " %q", e.Text)
	}
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Unwrap returns the sentinel error.
func (e *ParseError) Unwrap() error { return e.Err }

// missing marks an absent entry in Matrix.rtt.
const missing = time.Duration(-1)

// Matrix is a symmetric matrix of round-trip times between N hosts. It is
// immutable once built, so it may be shared between goroutines and
// simulations.
type Matrix struct {
	n int
	// rtt holds n*n entries, row-major, missing for an absent pair. It is
	// nil for a constant matrix.
	rtt      []time.Duration
	constant time.Duration
	// Counters from construction, reported by Stats.
	nMissing, nAveraged, nOneSided int
	// unit and from: how a parsed matrix's values were read (Unit).
	unit Unit
	from UnitFrom
}

// UnitFrom says where the unit a matrix was read in came from.
type UnitFrom string

// The sources of a parsed matrix's unit (Matrix.Unit).
const (
	// UnitDefault: no header and no unit from the caller, so
	// milliseconds.
	UnitDefault UnitFrom = "default"
	// UnitHeader: the input's "# unit:" header (the caller's unit, if
	// any, agreed with it).
	UnitHeader UnitFrom = "header"
	// UnitCaller: the caller's (LoadIn's or ParseIn's u; peer's
	// --latency-unit), the input naming none.
	UnitCaller UnitFrom = "caller"
)

// Unit returns the unit a parsed matrix's values were read in and where
// that unit came from; 0 and "" for a matrix built in code (Constant, Sub,
// FillMissing's copy keeps its source's). A file in another unit than the
// one it was read in may still look like RTTs (microseconds of a data
// centre read as milliseconds): a caller should show the user what was
// read (peer prints it with the median).
func (m *Matrix) Unit() (Unit, UnitFrom) { return m.unit, m.from }

// N returns the number of hosts.
func (m *Matrix) N() int { return m.n }

// RTT returns the round-trip time between hosts i and j, or 0 and false when
// that measurement is missing. RTT(i, i) is 0. It panics if i or j is out of
// range, like a slice index.
func (m *Matrix) RTT(i, j int) (time.Duration, bool) {
	if uint(i) >= uint(m.n) || uint(j) >= uint(m.n) {
		panic(fmt.Sprintf("latency: RTT(%d, %d) out of range for %d hosts", i, j, m.n))
	}
	if i == j {
		return 0, true
	}
	if m.rtt == nil {
		return m.constant, true
	}
	d := m.rtt[i*m.n+j]
	if d == missing {
		return 0, false
	}
	return d, true
}

// Missing returns the number of unordered pairs {i, j}, i != j, whose RTT is
// missing.
func (m *Matrix) Missing() int { return m.nMissing }

// Constant returns a matrix of n hosts in which every pair of distinct hosts
// is rtt apart. It stores no per-pair data, so n may be large. It panics if n
// or rtt is negative.
func Constant(n int, rtt time.Duration) *Matrix {
	if n < 0 || rtt < 0 {
		panic(fmt.Sprintf("latency: Constant(%d, %v): negative argument", n, rtt))
	}
	return &Matrix{n: n, constant: rtt}
}

// MinMedian and MaxMedian bound the median RTT that Load accepts. The
// PlanetLab matrices have medians of 130-140 ms, and a network wide enough
// to need a latency matrix has one of a few ms to a few hundred; the same
// values read in the wrong unit are 1000 times off: seconds read as
// milliseconds give a median under 1 ms, microseconds read as milliseconds
// (or milliseconds as seconds) one over 10 s.
const (
	MinMedian = time.Millisecond
	MaxMedian = 10 * time.Second
)

// MinStatedMedian bounds the median RTT that Load accepts below MinMedian
// from a file whose own header states its unit: a network in one data
// centre or on one host, whose RTTs are tens to hundreds of microseconds.
// Below MinMedian the median as written must also be at least 1 in the
// stated unit: values of 0.134 stated as milliseconds are more likely
// mislabelled seconds than RTTs of a data centre, which would be written
// in microseconds. A unit named by the caller alone (LoadIn's, peer's
// --latency-unit) does not do: the PlanetLab matrix, in milliseconds,
// read as microseconds has a median of 134 µs too, and a wrong flag for
// someone else's file is a likelier mistake than a wrong header written
// with the data.
const MinStatedMedian = time.Microsecond

// ImplausibleError reports a file whose median RTT, read in Unit, lies
// outside [MinMedian, MaxMedian]. It wraps ErrImplausible.
type ImplausibleError struct {
	// File is the file name.
	File string
	// Unit is the unit the values were read in.
	Unit Unit
	// Median is the median RTT of the measured pairs, read in Unit.
	Median time.Duration
	// Likely is the unit in which the median would be plausible, or 0 if
	// none is.
	Likely Unit
	// Stated is whether the file's own header named Unit, Given whether
	// the caller did (and the file named none).
	Stated, Given bool
}

// Error says what is wrong and how to fix it: the unit the values look
// like, and how to say so (a header to begin the file with, or to change
// when the file has one); and for a median under MinMedian that would be
// a plausible RTT of one data centre, how to load it (microseconds, stated
// in the file's header).
func (e *ImplausibleError) Error() string {
	var b strings.Builder
	v := strconv.FormatFloat(float64(e.Median)/float64(e.Unit), 'g', 4, 64)
	fmt.Fprintf(&b, "latency: %s: %v: the median RTT, %s read in %s, is %v, ", e.File, ErrImplausible, v, e.Unit.long(), e.Median)
	if e.Median < MinMedian {
		fmt.Fprintf(&b, "below %v", MinMedian)
	} else {
		fmt.Fprintf(&b, "above %v", MaxMedian)
	}
	switch {
	case e.Likely == 0:
		fmt.Fprintf(&b, ", and would be in no unit between s and us: check the file (want one RTT per pair, with a median between %v and %v)", MinMedian, MaxMedian)
	case e.Stated:
		fmt.Fprintf(&b, ": the values look like %s; if they are, make the file's header \"# unit: %s\"", e.Likely.long(), e.Likely)
	case e.Given:
		fmt.Fprintf(&b, ": the values look like %s; if they are, pass --latency-unit %s instead (or drop the flag and begin the file with the line \"# unit: %s\")",
			e.Likely.long(), e.Likely, e.Likely)
	default:
		fmt.Fprintf(&b, ": the values look like %s; if they are, begin the file with the line \"# unit: %s\" (or pass --latency-unit %s to peer)",
			e.Likely.long(), e.Likely, e.Likely)
	}
	if e.Median >= MinStatedMedian && e.Median < MinMedian {
		us := strconv.FormatFloat(float64(e.Median)/float64(time.Microsecond), 'g', 4, 64)
		switch {
		case e.Unit == Microsecond && !e.Stated:
			b.WriteString("; if they are RTTs under 1ms in microseconds, say so in the file: begin it with the line \"# unit: us\" (a unit passed alone does not do under 1ms)")
		case e.Unit != Microsecond:
			fmt.Fprintf(&b, "; if they are RTTs under 1ms, write them in microseconds (the median would read %s), with \"# unit: us\" as the file's header", us)
		}
	}
	return b.String()
}

// Unwrap returns ErrImplausible.
func (e *ImplausibleError) Unwrap() error { return ErrImplausible }

// Load reads a matrix from the named file in the unit its header names, or
// in milliseconds without one; it is LoadIn(path, 0).
func Load(path string) (*Matrix, error) { return LoadIn(path, 0) }

// LoadIn reads a matrix from the named file, its values in unit u; see the
// package documentation for the format. With u == 0 the unit is the one
// the file's "# unit:" header names, or milliseconds; a header that names
// another unit than a non-zero u is an error (ErrUnit). A format error is
// a *ParseError carrying the file name. Unlike Parse, LoadIn also judges
// the values: a matrix whose median measured RTT, read in its unit, lies
// outside [MinMedian, MaxMedian] is refused with an *ImplausibleError that
// names the unit the values look like; but a median under MinMedian is
// accepted from a file whose own header states its unit, down to
// MinStatedMedian, when its values as written are at least 1 (RTTs of one
// data centre, written in microseconds).
func LoadIn(path string, u Unit) (*Matrix, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("latency: %w", err)
	}
	defer f.Close()
	given := u != 0
	m, u, stated, err := parse(f, u)
	if err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.File = path
			return nil, pe
		}
		return nil, fmt.Errorf("latency: reading %s: %w", path, err)
	}
	med := m.Stats().Median
	if med == 0 || (med >= MinMedian && med <= MaxMedian) { // 0: nothing measured, nothing to judge
		return m, nil
	}
	// Sub-millisecond RTTs in the unit the file states: only microseconds
	// can write them as values of at least 1.
	if stated && u == Microsecond && med >= MinStatedMedian && med < MinMedian {
		return m, nil
	}
	e := &ImplausibleError{File: path, Unit: u, Median: med, Stated: stated, Given: given && !stated}
	for _, x := range units {
		// The same numbers read in x.u.
		if d := time.Duration(float64(med) / float64(u) * float64(x.u)); x.u != u && d >= MinMedian && d <= MaxMedian {
			e.Likely = x.u
			break
		}
	}
	return nil, e
}

// Parse reads a matrix in the text format described in the package
// documentation, in the unit its header names or in milliseconds; it is
// ParseIn(r, 0).
func Parse(r io.Reader) (*Matrix, error) { return ParseIn(r, 0) }

// ParseIn reads a matrix in the text format described in the package
// documentation, its values in unit u (0: the unit the header names, or
// milliseconds). A format error is a *ParseError; an error from r is
// returned wrapped. It takes the values as they are written: a matrix for
// a test may hold nanoseconds. Files should go through Load, which also
// checks that the values look like RTTs in their unit.
func ParseIn(r io.Reader, u Unit) (*Matrix, error) {
	m, _, _, err := parse(r, u)
	return m, err
}

// parse is ParseIn; it also returns the unit the values were read in and
// whether the file's header named it.
func parse(r io.Reader, u Unit) (*Matrix, Unit, bool, error) {
	if u != 0 && !u.valid() {
		return nil, 0, false, fmt.Errorf("latency: %w %v: want Second, Millisecond or Microsecond", ErrUnit, u)
	}
	given := u != 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<30)
	var (
		raw      []time.Duration // rows appended as read
		n        = -1            // columns, from the first row
		rows     int
		line     int
		first    int // the first row's line
		gap      int // the line of the first row that has two tabs in a row, if any
		fields   []string
		header   Unit // from a "# unit:" line
		stated   bool // the header named the unit
		near     int  // the line of the first comment before the first row that names a unit
		nearText string
	)
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			text = strings.TrimPrefix(text, "\ufeff") // a byte-order mark from some editors
		}
		if err := readable(text); err != nil {
			err.Line = line
			return nil, 0, false, err
		}
		if h, ok := unitHeader(text); ok {
			hu, err := ParseUnit(h)
			switch {
			case err != nil:
				return nil, 0, false, &ParseError{Line: line, Err: ErrUnit, Text: h, Hint: "want \"# unit: s\", \"# unit: ms\" or \"# unit: us\""}
			case n >= 0:
				return nil, 0, false, &ParseError{Line: line, Err: ErrUnit, Hint: "a \"# unit:\" header must come before the first row"}
			case header != 0 && hu != header:
				return nil, 0, false, &ParseError{Line: line, Err: ErrUnit, Text: h, Hint: fmt.Sprintf("a second header, the first said %v", header)}
			case u != 0 && hu != u:
				return nil, 0, false, &ParseError{Line: line, Err: ErrUnit, Text: h,
					Hint: fmt.Sprintf("the header says the values are in %s, but they are to be read in %s: drop one or make them agree", hu.long(), u.long())}
			}
			header = hu
			continue
		}
		fields = splitFields(text, fields[:0])
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			if n < 0 && near == 0 && mentionsUnit(text) {
				near, nearText = line, strings.TrimSpace(text)
			}
			continue
		}
		if n < 0 && header == 0 && !given && near > 0 {
			// A header the author meant, in a form unitHeader does not
			// read: skipped as a comment, it would leave the values in
			// milliseconds, silently.
			return nil, 0, false, &ParseError{Line: near, Err: ErrUnit, Text: nearText,
				Hint: "a comment before the first row names a unit, but there is no unit header: write it \"# unit: s\", \"# unit: ms\" or \"# unit: us\""}
		}
		if gap == 0 && strings.Contains(text, "\t\t") {
			gap = line
		}
		if n < 0 {
			n, first = len(fields), line
			raw = make([]time.Duration, 0, n*n)
			stated = header != 0
			if u == 0 {
				u = cmp.Or(header, Millisecond)
			}
		}
		if len(fields) != n || rows == n {
			return nil, 0, false, shapeError(line, rows, n, fields, gap)
		}
		for j, f := range fields {
			d, err := parseValue(f, u)
			if err != nil {
				err.Line, err.Column = line, j+1
				return nil, 0, false, err
			}
			raw = append(raw, d)
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return nil, 0, false, fmt.Errorf("latency: reading input: %w", err)
	}
	if n < 0 {
		return nil, 0, false, &ParseError{Line: max(line, 1), Err: ErrEmpty, Hint: "want one row of RTTs per line"}
	}
	if rows != n {
		hint := fmt.Sprintf("found %d rows of %d values; an N-host matrix has N rows of N values", rows, n)
		if rows == n-1 {
			hint += " (a first column of host labels? the file holds the RTTs alone)"
		}
		return nil, 0, false, &ParseError{Line: line, Err: ErrNotSquare, Hint: hint}
	}
	if err := labels(n, raw, u); err != nil {
		err.Line = first
		return nil, 0, false, err
	}
	m := fromRaw(n, raw)
	m.unit, m.from = u, UnitDefault
	switch {
	case stated:
		m.from = UnitHeader
	case given:
		m.from = UnitCaller
	}
	return m, u, stated, nil
}

// shapeError explains a row of the wrong length (or one row too many): row
// rows+1, on line, has fields where the first had n. gap is the line of a
// row with two tabs in a row (an empty value, which splitFields drops), if
// any. Files from elsewhere go wrong in a few familiar ways, and the hint
// names the likely one.
func shapeError(line, rows, n int, fields []string, gap int) *ParseError {
	if rows == n && len(fields) == n {
		return &ParseError{Line: line, Err: ErrNotSquare,
			Hint: fmt.Sprintf("more rows than the %d values of the first (a header row of host labels? the file holds the RTTs alone)", n)}
	}
	pe := &ParseError{Line: line, Column: min(len(fields), n) + 1, Err: ErrRagged,
		Hint: fmt.Sprintf("row %d has %d values, want %d like the first row", rows+1, len(fields), n)}
	if len(fields) > n {
		pe.Text = fields[n]
	}
	switch {
	case gap > 0:
		pe.Hint += fmt.Sprintf(" (line %d has two tabs in a row: an empty value? write -1 for a missing RTT)", gap)
	case n == 1 && rows == 1 && len(fields) == 2:
		pe.Hint += " (the lower triangle only? write the whole N×N matrix, -1 for a missing RTT)"
	case n == 1 && rows == 1:
		pe.Hint += " (a count of hosts on the first line? the file holds the RTTs alone)"
	case rows == 1 && len(fields) == n+1:
		pe.Hint += " (a header row of host names or numbers over a first column of them? the file holds the RTTs alone)"
	case rows == 1 && len(fields) == n-1:
		pe.Hint += " (the upper triangle only? write the whole N×N matrix, -1 for a missing RTT)"
	}
	return pe
}

// readable refuses a line that cannot be a row of text: NUL bytes (UTF-16,
// as some spreadsheets export "Unicode text") or a carriage return inside
// it (lines ended by a lone CR, which the scanner does not split).
func readable(text string) *ParseError {
	switch {
	case strings.IndexByte(text, 0) >= 0:
		return &ParseError{Err: ErrEncoding, Hint: "NUL bytes: UTF-16 text? save the file as UTF-8 or ASCII"}
	case strings.IndexByte(strings.TrimSuffix(text, "\r"), '\r') >= 0:
		return &ParseError{Err: ErrEncoding, Hint: "a carriage return inside a line: lines ended by a lone CR? end them with a newline (LF or CRLF)"}
	}
	return nil
}

// labels refuses a matrix whose first row or first column holds host
// labels rather than RTTs (a table exported with its index): either of
// them counts up one by one in whole numbers (in the unit u; 1 2 3 4 …),
// or the two hold the same strictly increasing whole numbers while some
// other value is not whole. RTTs that are whole and increase along both
// the first row and column by other steps are taken as RTTs.
func labels(n int, raw []time.Duration, u Unit) *ParseError {
	if n < 4 {
		return nil
	}
	whole := func(d time.Duration) bool { return d >= 0 && d%time.Duration(u) == 0 }
	counts := func(at func(int) time.Duration) bool {
		for j := range n {
			if !whole(at(j)) || j > 0 && at(j)-at(j-1) != time.Duration(u) {
				return false
			}
		}
		return true
	}
	row := func(j int) time.Duration { return raw[j] }
	col := func(i int) time.Duration { return raw[i*n] }
	same := true
	for j := 1; j < n; j++ {
		if r := row(j); r != col(j) || !whole(r) || j > 1 && r <= row(j-1) {
			same = false
			break
		}
	}
	if !counts(row) && !counts(col) &&
		!(same && slices.ContainsFunc(raw[n:], func(d time.Duration) bool { return d > 0 && !whole(d) })) {
		return nil
	}
	v := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/float64(u), 'g', -1, 64) }
	at := row
	if !counts(row) && !same {
		at = col
	}
	return &ParseError{Err: ErrLabels, Text: fmt.Sprintf("%s %s %s %s …", v(at(0)), v(at(1)), v(at(2)), v(at(3))),
		Hint: "the first row or column holds increasing whole numbers: host labels? remove them; the file holds the N×N RTTs alone"}
}

// unitHeader returns the unit named by a "# unit: X" line, and whether the
// line is one: any number of '#', the key "unit" or "units" in any case,
// ':' or '=', and any spaces around the parts.
func unitHeader(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
	if !ok {
		return "", false
	}
	rest = strings.TrimLeft(rest, "#")
	i := strings.IndexAny(rest, ":=")
	if i < 0 {
		return "", false
	}
	if key := strings.TrimSpace(rest[:i]); !strings.EqualFold(key, "unit") && !strings.EqualFold(key, "units") {
		return "", false
	}
	return strings.TrimSpace(rest[i+1:]), true
}

// mentionsUnit reports whether a comment line holds the word "unit" or
// "units" (any case).
func mentionsUnit(line string) bool {
	words := strings.FieldsFunc(line, func(r rune) bool { return !unicode.IsLetter(r) })
	return slices.ContainsFunc(words, func(w string) bool { return strings.EqualFold(w, "unit") || strings.EqualFold(w, "units") })
}

// splitFields splits s at runs of spaces and tabs (and a trailing '\r'),
// appending to dst.
func splitFields(s string, dst []string) []string {
	start := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\r' {
			if start >= 0 {
				dst = append(dst, s[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		dst = append(dst, s[start:])
	}
	return dst
}

// parseValue converts one value in unit u; missing becomes -1 (0 is left as
// 0 and treated as missing off the diagonal by fromRaw).
func parseValue(f string, u Unit) (time.Duration, *ParseError) {
	v, err := strconv.ParseFloat(f, 64)
	if err == nil && strings.ContainsAny(f, "_xXpP") {
		err = strconv.ErrSyntax // hexadecimal or underscores: Go's syntax, not a data file's
	}
	if math.IsInf(v, 1) && errors.Is(err, strconv.ErrRange) {
		return 0, &ParseError{Text: f, Err: ErrTooLarge, Hint: fmt.Sprintf("want an RTT in %s, below about 73 years", u.long())}
	}
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		pe := &ParseError{Text: f, Err: ErrNotNumber,
			Hint: fmt.Sprintf("want a finite decimal RTT in %s, or -1 for a missing entry", u.long())}
		switch {
		case decimalComma(f):
			pe.Hint = "a decimal comma? write the value with a point (110.673), values separated by tabs or spaces"
		case strings.ContainsAny(f, ",;"):
			pe.Hint = "values must be separated by tabs or spaces"
		case strings.Contains(f, "\u00a0"):
			pe.Hint = "a no-break space (U+00A0) in the value: separate values by tabs or plain spaces"
		}
		return 0, pe
	}
	if v == -1 {
		return missing, nil
	}
	if v < 0 {
		return 0, &ParseError{Text: f, Err: ErrNegative,
			Hint: fmt.Sprintf("want an RTT >= 0 in %s; write -1 (or 0) for a missing entry", u.long())}
	}
	ns := math.Round(v * float64(u))
	if ns >= math.MaxInt64/4 { // leaves room to add two RTTs in FillMissing
		return 0, &ParseError{Text: f, Err: ErrTooLarge, Hint: fmt.Sprintf("want an RTT in %s, below about 73 years", u.long())}
	}
	return time.Duration(ns), nil
}

// decimalComma reports whether f is digits, one comma, digits (110,673):
// a number written with a decimal comma, or a thousands separator.
func decimalComma(f string) bool {
	a, b, ok := strings.Cut(strings.TrimPrefix(f, "-"), ",")
	digits := func(s string) bool {
		return s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0
	}
	return ok && digits(a) && digits(b)
}

// fromRaw symmetrises an n*n row-major matrix in place (0 off the diagonal
// and -1 both mean missing) and wraps it.
func fromRaw(n int, raw []time.Duration) *Matrix {
	m := &Matrix{n: n, rtt: raw}
	for i := 0; i < n; i++ {
		raw[i*n+i] = 0
		for j := i + 1; j < n; j++ {
			a, b := raw[i*n+j], raw[j*n+i]
			if a == 0 {
				a = missing
			}
			if b == 0 {
				b = missing
			}
			var v time.Duration
			switch {
			case a != missing && b != missing:
				v = a/2 + b/2 + (a%2+b%2)/2 // mean, without overflow
				if a != b {
					m.nAveraged++
				}
			case a != missing:
				v = a
				m.nOneSided++
			case b != missing:
				v = b
				m.nOneSided++
			default:
				v = missing
				m.nMissing++
			}
			raw[i*n+j], raw[j*n+i] = v, v
		}
	}
	return m
}

// Sub returns the matrix of the given hosts: host k of the result is host
// hosts[k] of m. Hosts may repeat; two copies of one host are 0 apart. It
// panics if a host is out of range.
func (m *Matrix) Sub(hosts []int) *Matrix {
	k := len(hosts)
	for _, h := range hosts {
		if uint(h) >= uint(m.n) {
			panic(fmt.Sprintf("latency: Sub: host %d out of range for %d hosts", h, m.n))
		}
	}
	out := &Matrix{n: k, rtt: make([]time.Duration, k*k)}
	for a, i := range hosts {
		for b, j := range hosts {
			d, ok := m.RTT(i, j)
			if !ok {
				d = missing
				if a < b {
					out.nMissing++
				}
			}
			out.rtt[a*k+b] = d
		}
	}
	return out
}

// Scale returns a copy of m with every measured RTT multiplied by f (a
// missing pair stays missing): the same network's shape at another scale,
// a data centre's (f of 0.01) or a satellite link's (f of 10), with which
// a caller checks that what it measures does not depend on the scale of
// one data set. An RTT that f would bring below a microsecond is a
// microsecond (a zero would read as missing), and one it would bring past
// the longest Duration is that. It panics if f is not positive and finite.
func (m *Matrix) Scale(f float64) *Matrix {
	if !(f > 0) || math.IsInf(f, 0) {
		panic(fmt.Sprintf("latency: Scale(%v): want a positive finite factor", f))
	}
	out := &Matrix{n: m.n, nMissing: m.nMissing, constant: scaled(m.constant, f)}
	if m.rtt != nil {
		out.rtt = make([]time.Duration, len(m.rtt))
		for i, d := range m.rtt {
			if d != missing && d != 0 {
				d = scaled(d, f)
			}
			out.rtt[i] = d
		}
	}
	return out
}

// scaled is d times f, at least a microsecond when d is positive, at
// most the longest Duration (a float beyond it converts to no defined
// value).
func scaled(d time.Duration, f float64) time.Duration {
	if d <= 0 {
		return d
	}
	v := float64(d) * f
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(time.Duration(v), time.Microsecond)
}

// FillMissing returns a copy of m in which every missing pair {i, j} holds an
// estimate: the shortest two-hop path min over k of RTT(i,k)+RTT(k,j) through
// measured pairs, or, when no such path exists, the median measured RTT. It
// returns m itself when nothing is missing, and ErrNoData when no pair at all
// is measured. It is FillMissingAmong(N()).
func (m *Matrix) FillMissing() (*Matrix, error) { return m.FillMissingAmong(m.n) }

// FillMissingAmong is FillMissing for the pairs among the first n hosts
// alone (their two-hop paths still go through every host); the missing
// pairs with a host beyond them stay missing. A network of n nodes on a
// larger matrix needs no more: filling all of a 3,000-host matrix with
// 30 % of its pairs missing takes some 40 s, against the O(n²·N) here. It
// panics if n is out of range.
func (m *Matrix) FillMissingAmong(n int) (*Matrix, error) {
	if n < 0 || n > m.n {
		panic(fmt.Sprintf("latency: FillMissingAmong(%d) out of range for %d hosts", n, m.n))
	}
	if m.nMissing == 0 {
		return m, nil
	}
	st := m.Stats()
	if st.Pairs == st.Missing {
		return nil, ErrNoData
	}
	N := m.n
	out := &Matrix{n: N, rtt: slices.Clone(m.rtt), nMissing: m.nMissing, nAveraged: m.nAveraged, nOneSided: m.nOneSided, unit: m.unit, from: m.from}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if m.rtt[i*N+j] != missing {
				continue
			}
			best := time.Duration(math.MaxInt64)
			ri, rj := m.rtt[i*N:i*N+N], m.rtt[j*N:j*N+N]
			for k := 0; k < N; k++ {
				if k == i || k == j || ri[k] == missing || rj[k] == missing {
					continue
				}
				if d := ri[k] + rj[k]; d < best {
					best = d
				}
			}
			if best == math.MaxInt64 {
				best = st.Median
			}
			out.rtt[i*N+j], out.rtt[j*N+i] = best, best
			out.nMissing--
		}
	}
	return out, nil
}

// Stats summarises a matrix over its unordered pairs of distinct hosts.
type Stats struct {
	N     int // hosts
	Pairs int // unordered pairs of distinct hosts, N(N-1)/2
	// Missing is the number of pairs without a measurement.
	Missing int
	// Averaged is the number of pairs whose two directions differed in the
	// input and were replaced by their mean.
	Averaged int
	// OneSided is the number of pairs measured in one direction only.
	OneSided int
	// Min, Median, P95, Max and Mean describe the measured pairs, as
	// package stats defines them (the median of an even count is the mean
	// of the two middle RTTs; P95 is by nearest rank); all are 0 when none
	// is measured.
	Min, Median, P95, Max, Mean time.Duration
}

// Stats computes summary statistics. It costs O(N² log N) for a stored
// matrix and O(1) for a constant one.
func (m *Matrix) Stats() Stats {
	s := Stats{N: m.n, Pairs: m.n * (m.n - 1) / 2, Missing: m.nMissing,
		Averaged: m.nAveraged, OneSided: m.nOneSided}
	if m.rtt == nil {
		if s.Pairs > 0 {
			c := m.constant
			s.Min, s.Median, s.P95, s.Max, s.Mean = c, c, c, c, c
		}
		return s
	}
	v := make([]time.Duration, 0, s.Pairs-s.Missing)
	for i := 0; i < m.n; i++ {
		for j := i + 1; j < m.n; j++ {
			if d := m.rtt[i*m.n+j]; d != missing {
				v = append(v, d)
			}
		}
	}
	sorted := stats.Sort(v)
	s.Min, s.Max = sorted.Min(), sorted.Max()
	s.Median = time.Duration(sorted.Median())
	s.P95 = sorted.Percentile(95)
	s.Mean = time.Duration(stats.Mean(v))
	return s
}
