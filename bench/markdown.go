package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The report's generated blocks. WriteMarkdown wraps every block it writes
// (the header, each section's heading, each table writer's paragraph and
// its table, each figure) in a pair of marker lines, HTML comments that
// Markdown does not render:
//
//	<!-- generated: selection-table -->
//	…
//	<!-- end generated: selection-table -->
//
// A name is unique within a report. MergeMarkdown replaces the blocks of
// an existing report with those of a new one and keeps the text between
// them, which is written by hand (BENCHMARKS.md's notes of experiments).
const (
	markerBegin = "<!-- generated: "
	markerEnd   = "<!-- end generated: "
	markerClose = " -->"
)

// ErrMarkers is the error of a report whose markers are malformed: a line
// that begins like a marker but is none, a block that is not terminated,
// nested or repeated, an end without its beginning.
var ErrMarkers = errors.New("malformed generated-block markers")

// mdBlocks writes a report's generated blocks, each between its markers.
type mdBlocks struct {
	w    io.Writer
	seen map[string]bool
	err  error
}

func newMDBlocks(w io.Writer) *mdBlocks { return &mdBlocks{w: w, seen: map[string]bool{}} }

// block writes what write writes, between the markers of name. A name
// that is no valid block name, or one already written, is an error of the
// report (b.err) and writes nothing.
func (b *mdBlocks) block(name string, write func(w io.Writer)) {
	switch {
	case b.err != nil:
		return
	case !validBlockName(name):
		b.err = fmt.Errorf("bench: %q is no block name (want lower-case letters and digits, in words joined by single hyphens)", name)
		return
	case b.seen[name]:
		b.err = fmt.Errorf("bench: two generated blocks named %q", name)
		return
	}
	b.seen[name] = true
	var buf bytes.Buffer
	write(&buf)
	if n := buf.Len(); n > 0 && buf.Bytes()[n-1] != '\n' {
		buf.WriteByte('\n')
	}
	_, _ = fmt.Fprintf(b.w, "%s%s%s\n%s%s%s%s\n", markerBegin, name, markerClose, buf.Bytes(), markerEnd, name, markerClose)
}

// validBlockName says whether s is lower-case letters and digits in words
// joined by single hyphens (no "--", which an HTML comment may not hold).
func validBlockName(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// blockName turns s (a figure's file name) into a valid block name.
func blockName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if n := b.Len(); n > 0 && b.String()[n-1] != '-' {
			b.WriteByte('-')
		}
	}
	return strings.TrimRight(b.String(), "-")
}

// mdSegment is a stretch of a report: text outside the blocks (name
// empty), or one block with its marker lines.
type mdSegment struct {
	name string
	line int    // the line (from 1) where it starts
	raw  []byte // every byte of it, marker lines included
}

// parseMarkdown splits a report into text and blocks. Every line that
// begins (after spaces) with "<!-- generated:" or "<!-- end generated:" must
// be a whole marker; blocks do not nest, each ends with the end marker of
// its name, and no name comes twice.
func parseMarkdown(doc []byte) ([]mdSegment, error) {
	var segs []mdSegment
	var cur *mdSegment // the block open, if any
	first := map[string]int{}
	var text bytes.Buffer
	textLine := 1
	lineNo := 0
	for rest := doc; len(rest) > 0; {
		lineNo++
		i := bytes.IndexByte(rest, '\n')
		var line []byte
		if i < 0 {
			line, rest = rest, nil
		} else {
			line, rest = rest[:i+1], rest[i+1:]
		}
		kind, name, err := markerLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrMarkers, lineNo, err)
		}
		switch {
		case kind == "" && cur != nil:
			cur.raw = append(cur.raw, line...)
		case kind == "":
			if text.Len() == 0 {
				textLine = lineNo
			}
			text.Write(line)
		case kind == "begin" && cur != nil:
			return nil, fmt.Errorf("%w: line %d: block %q begins inside block %q (begun on line %d); blocks do not nest", ErrMarkers, lineNo, name, cur.name, cur.line)
		case kind == "begin":
			if l, ok := first[name]; ok {
				return nil, fmt.Errorf("%w: line %d: a second block %q (the first begins on line %d); names are unique", ErrMarkers, lineNo, name, l)
			}
			first[name] = lineNo
			if text.Len() > 0 {
				segs = append(segs, mdSegment{line: textLine, raw: bytes.Clone(text.Bytes())})
				text.Reset()
			}
			cur = &mdSegment{name: name, line: lineNo, raw: bytes.Clone(line)}
		case cur == nil: // an end
			return nil, fmt.Errorf("%w: line %d: the end of block %q, outside any block", ErrMarkers, lineNo, name)
		case name != cur.name:
			return nil, fmt.Errorf("%w: line %d: the end of block %q inside block %q (begun on line %d)", ErrMarkers, lineNo, name, cur.name, cur.line)
		default:
			cur.raw = append(cur.raw, line...)
			segs = append(segs, *cur)
			cur = nil
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%w: line %d: block %q is not terminated (no %q line after it)", ErrMarkers, cur.line, cur.name, markerEnd+cur.name+markerClose)
	}
	if text.Len() > 0 {
		segs = append(segs, mdSegment{line: textLine, raw: bytes.Clone(text.Bytes())})
	}
	return segs, nil
}

// markerLine says whether line is a begin or end marker, and of which
// block; kind is empty for any other line. A line that looks like a marker
// but is not a valid one is an error.
func markerLine(line []byte) (kind, name string, err error) {
	s := strings.TrimSpace(string(line))
	var prefix string
	switch {
	case strings.HasPrefix(s, markerBegin[:len(markerBegin)-1]):
		kind, prefix = "begin", markerBegin
	case strings.HasPrefix(s, markerEnd[:len(markerEnd)-1]):
		kind, prefix = "end", markerEnd
	default:
		return "", "", nil
	}
	name, ok := strings.CutPrefix(s, prefix)
	if ok {
		name, ok = strings.CutSuffix(name, markerClose)
	}
	if !ok || !validBlockName(name) {
		return "", "", fmt.Errorf("malformed marker %q: want %sNAME%s or %sNAME%s, NAME lower-case letters, digits and single hyphens",
			s, markerBegin, markerClose, markerEnd, markerClose)
	}
	return kind, name, nil
}

// GeneratedBlocks returns the names of a report's generated blocks, in
// order: none for a file written by hand alone. Malformed markers are an
// error (ErrMarkers) that names the line.
func GeneratedBlocks(report []byte) ([]string, error) {
	segs, err := parseMarkdown(report)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range segs {
		if s.name != "" {
			names = append(names, s.name)
		}
	}
	return names, nil
}

// MergeMarkdown merges a newly generated report into an old one, which may
// hold text written by hand between its generated blocks:
//
//   - a block of the old report that the new one has too is replaced by
//     the new one's, where it stands;
//   - text outside the blocks is kept as it is, where it is;
//   - a block of the old report that the new one lacks (a run of some
//     suites only, or without the live half) is kept as it is;
//   - a block of the new report that the old one lacks goes in just before
//     the next block, in the new report's order, that the old one has.
//     When the old one has none of the blocks after it (the last blocks
//     of a run of some suites), it goes after the last block before it
//     that the old one has and the notes that follow that one: just
//     before the old report's next block (the next section's heading), or
//     at the end. Hand-written notes follow the block they comment on, so
//     a new block goes after them, not between a block and its notes: a
//     new table of a section goes before the section's figures, a new
//     section before the next section's heading, a new figure of a
//     section after its last.
//
// Malformed markers in either report are an error (ErrMarkers, naming the
// report and the line), and so is text outside the blocks of the new one.
// Merging a report into itself gives it back unchanged.
func MergeMarkdown(old, generated []byte) ([]byte, error) {
	oldSegs, err := parseMarkdown(old)
	if err != nil {
		return nil, fmt.Errorf("old report: %w", err)
	}
	newSegs, err := parseMarkdown(generated)
	if err != nil {
		return nil, fmt.Errorf("generated report: %w", err)
	}
	inOld := map[string]bool{}
	for _, s := range oldSegs {
		if s.name != "" {
			inOld[s.name] = true
		}
	}
	// fresh[name] are the new blocks the old report lacks that go in
	// before block name of the old one ("" for the end).
	gen := map[string][]byte{}
	fresh := map[string][][]byte{}
	var pending [][]byte
	last := "" // the last block so far of the new report that the old one has
	for _, s := range newSegs {
		if s.name == "" {
			if len(bytes.TrimSpace(s.raw)) > 0 {
				return nil, fmt.Errorf("generated report: line %d: text outside the generated blocks", s.line)
			}
			continue
		}
		gen[s.name] = s.raw
		if !inOld[s.name] {
			pending = append(pending, s.raw)
			continue
		}
		fresh[s.name], pending, last = pending, nil, s.name
	}
	at := "" // where the blocks after last go: before this block of the old report, or at the end
	if last != "" {
		seen := false
		for _, s := range oldSegs {
			if seen && s.name != "" {
				at = s.name
				break
			}
			seen = seen || s.name == last
		}
	}
	fresh[at] = append(fresh[at], pending...)

	var out bytes.Buffer
	for _, s := range oldSegs {
		if s.name == "" {
			out.Write(s.raw)
			continue
		}
		for _, b := range fresh[s.name] {
			out.Write(b)
		}
		if b, ok := gen[s.name]; ok {
			out.Write(b)
		} else {
			out.Write(s.raw)
		}
	}
	if len(fresh[""]) > 0 && out.Len() > 0 && out.Bytes()[out.Len()-1] != '\n' {
		out.WriteByte('\n')
	}
	for _, b := range fresh[""] {
		out.Write(b)
	}
	return out.Bytes(), nil
}
