// Package latency holds round-trip-time matrices for network simulations.
//
// A Matrix gives, for every pair of hosts i and j in 0..N()-1, the round-trip
// time between them, or reports that the measurement is missing. The
// simulator in testnet/sim takes a Matrix as its network: a message from i to
// j takes RTT(i, j)/2 of virtual time.
//
// Matrices come from text files such as the PlanetLab data set in
// testdata/planetlab490 at the repository's root (Load or LoadIn; Parse or
// ParseIn for a reader), or are built in code (Constant for a uniform
// network, Sub to pick some hosts of a larger one):
//
//	m, err := latency.Load("planetlab490_median18_ms.txt")
//	if err != nil {
//		return err // e.g. "latency: x.txt:7:12: not a number: ..."
//	}
//	rtt, ok := m.RTT(3, 17) // ok is false when the entry is missing
//
// # File format
//
// One row per line, values separated by tabs or spaces (a run of them is
// one separator, so an empty value cannot be written: write -1); row i
// column j is the RTT measured from host i to host j, as a decimal number
// (digits, a point, an exponent). Blank lines and lines whose first
// non-blank character is '#' are skipped; a '#' later in a row is an
// error. The matrix must be square and hold the RTTs alone: no header row
// or column of host names or numbers (a first row or column that counts up
// in whole numbers, or the same increasing whole numbers in both, is
// refused with ErrLabels), no CSV (commas, quotes), no NA or NaN, and
// not triples of host, host and RTT (a 3-host file of triples would load
// as a matrix). UTF-16 text and lines ended by a lone carriage return are
// refused (ErrEncoding). Missing measurements are
// written as -1, or as 0 off the diagonal (a real RTT is never exactly
// zero; the PlanetLab data has co-located hosts at 0.09 ms, not 0). The
// diagonal is read and checked like any other entry but ignored: the RTT
// from a host to itself is always 0.
//
// # Units
//
// Values are in milliseconds unless a header line before the first row
// names another unit:
//
//	# unit: s
//
// The unit is s, ms or us (also µs, with the micro sign or the Greek mu);
// the key may be "unit" or "units" in any case, after one '#' or more,
// followed by ':' or '=', with any spaces ("## Units = s" will do). A
// comment before the first row that names a unit in another form ("#
// values in microseconds, unit us") is an error (ErrUnit) when no header
// came before the first row: skipped, it would leave the values in
// milliseconds. A caller may name the unit instead (LoadIn,
// ParseIn; peer's --latency-unit); a header that names another unit is then
// an error (ErrUnit), as is an unknown unit, a second header that differs,
// or one after the first row.
//
// A file read in the wrong unit is 1000 times off, and Load and LoadIn
// refuse it when that shows: the median RTT of the measured pairs, read in the file's unit,
// must lie between MinMedian (1 ms) and MaxMedian (10 s), or the load
// fails with an *ImplausibleError (ErrImplausible) that names the unit the
// values look like and how to say so. The PlanetLab matrices have medians
// of 130-140 ms; the same values in seconds read as milliseconds give
// 0.13 ms, and in microseconds 134,000 ms. A network whose median RTT is
// truly under 1 ms (one data centre, one host) loads when the file's own
// header states its unit and its values as written are at least 1 in it:
// microseconds ("# unit: us"), down to a median of MinStatedMedian (1 µs).
// A caller's unit alone (peer's --latency-unit us) does not do: the
// PlanetLab matrix read as microseconds has the same median as a data
// centre's. Values under 1 stated as milliseconds (0.13) are refused: they
// are more likely seconds with the wrong header. The check cannot see
// every mistake: a data centre's RTTs in microseconds (a median of 400)
// read as milliseconds, or a slow network's in seconds (a median of 1.4)
// read as milliseconds, look like RTTs; Matrix.Unit says what unit was
// used and why, and peer prints it with the median when it loads a file.
// Parse and ParseIn take values as written, for matrices written in code.
//
// Malformed input gives a *ParseError naming the line and column (the 1-based
// position of the value in its row) and wrapping one of the sentinel errors
// ErrRagged, ErrNotNumber, ErrNegative, ErrTooLarge, ErrNotSquare, ErrEmpty,
// ErrUnit, ErrLabels or ErrEncoding, so callers can test with errors.Is;
// its hint names the likely cause (a header row, a triangle, an empty
// value, a decimal comma).
//
// # Asymmetric input
//
// A Matrix is always symmetric: RTT(i, j) == RTT(j, i). When the input gives
// both directions of a pair and they differ, the RTT is their mean (in
// nanoseconds, rounded down). When only one direction is present, that one is
// used. When neither is, the pair is missing. Stats reports how many pairs
// were averaged and how many were one-sided, so a loader's caller can tell
// how much the input was repaired.
//
// FillMissing returns a copy in which every missing pair has an estimate: the
// shortest two-hop path through a third host, or the median RTT when no such
// path exists; FillMissingAmong does so for the first n hosts alone.
package latency
