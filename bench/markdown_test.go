package bench

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// blk is a generated block as WriteMarkdown writes it.
func blk(name, body string) string {
	return "<!-- generated: " + name + " -->\n" + body + "<!-- end generated: " + name + " -->\n"
}

// MergeMarkdown replaces the old report's blocks by the new ones, keeps
// the text between them where it is, keeps the blocks the new report lacks,
// and puts a new block before the next block the old report has.
func TestMergeMarkdown(t *testing.T) {
	hand0 := "A note before everything.\n\n"
	hand1 := "**A note on table a** (2026-12-07, `peer bench --suite a`): it was 3.\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n"
	hand2 := "The last note, without a newline at the end."
	old := hand0 + blk("a", "table a, old\n\n") + hand1 + blk("c", "figure c, old\n\n") + blk("d", "table d, old\n\n") + hand2
	cases := []struct {
		name      string
		generated string
		want      string
	}{
		{"replace", blk("a", "table a, new\n\n") + blk("c", "figure c, new\n\n") + blk("d", "table d, new\n\n"),
			hand0 + blk("a", "table a, new\n\n") + hand1 + blk("c", "figure c, new\n\n") + blk("d", "table d, new\n\n") + hand2},
		{"keep a block not regenerated", blk("a", "table a, new\n\n") + blk("d", "table d, new\n\n"),
			hand0 + blk("a", "table a, new\n\n") + hand1 + blk("c", "figure c, old\n\n") + blk("d", "table d, new\n\n") + hand2},
		{"keep every block, none regenerated", "", old},
		{"a new block goes before the next block the old report has, after the notes of the one before",
			blk("a", "table a, new\n\n") + blk("b", "table b, new\n\n") + blk("c", "figure c, new\n\n"),
			hand0 + blk("a", "table a, new\n\n") + hand1 + blk("b", "table b, new\n\n") + blk("c", "figure c, new\n\n") + blk("d", "table d, old\n\n") + hand2},
		{"new blocks first, in the new report's order", blk("y", "y\n") + blk("z", "z\n") + blk("a", "table a, new\n\n"),
			hand0 + blk("y", "y\n") + blk("z", "z\n") + blk("a", "table a, new\n\n") + hand1 + blk("c", "figure c, old\n\n") + blk("d", "table d, old\n\n") + hand2},
		{"a new block after every block the old report has goes at the end", blk("d", "table d, new\n\n") + blk("e", "section e\n\n"),
			hand0 + blk("a", "table a, old\n\n") + hand1 + blk("c", "figure c, old\n\n") + blk("d", "table d, new\n\n") + hand2 + "\n" + blk("e", "section e\n\n")},
		{"a new last block of a partial run goes after the notes of the block before it, not at the end",
			blk("a", "table a, new\n\n") + blk("b", "figure b, new\n\n"),
			hand0 + blk("a", "table a, new\n\n") + hand1 + blk("b", "figure b, new\n\n") + blk("c", "figure c, old\n\n") + blk("d", "table d, old\n\n") + hand2},
		{"an empty block replaces", blk("c", ""),
			hand0 + blk("a", "table a, old\n\n") + hand1 + blk("c", "") + blk("d", "table d, old\n\n") + hand2},
	}
	for _, c := range cases {
		got, err := MergeMarkdown([]byte(old), []byte(c.generated))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s: merged\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
	// Into a report without blocks, everything goes at the end; into an
	// empty one, the new report is the result.
	if got, _ := MergeMarkdown([]byte("hand\n"), []byte(blk("a", "x\n"))); string(got) != "hand\n"+blk("a", "x\n") {
		t.Errorf("into a report without blocks: %q", got)
	}
	if got, _ := MergeMarkdown(nil, []byte(blk("a", "x\n"))); string(got) != blk("a", "x\n") {
		t.Errorf("into nothing: %q", got)
	}
}

// Malformed markers, in the old report or the new, are an error that
// names the line, and no merge.
func TestMergeMarkdownMalformed(t *testing.T) {
	good := blk("a", "x\n")
	cases := []struct {
		name, old, want string
	}{
		{"unterminated", "hand\n\n<!-- generated: a -->\ntable\n", "line 3: block \"a\" is not terminated"},
		{"nested", "<!-- generated: a -->\n<!-- generated: b -->\nx\n<!-- end generated: b -->\n<!-- end generated: a -->\n", "line 2: block \"b\" begins inside block \"a\" (begun on line 1)"},
		{"duplicated", blk("a", "x\n") + "hand\n" + blk("a", "y\n"), "line 5: a second block \"a\" (the first begins on line 1)"},
		{"end of another block", "<!-- generated: a -->\nx\n<!-- end generated: b -->\n", "line 3: the end of block \"b\" inside block \"a\""},
		{"end without a beginning", "hand\n<!-- end generated: a -->\n", "line 2: the end of block \"a\", outside any block"},
		{"malformed marker", "hand\n\n<!-- generated: Selection table -->\nx\n", "line 3: malformed marker"},
		{"marker without its close", "<!-- generated: a\nx\n", "line 1: malformed marker"},
	}
	for _, c := range cases {
		got, err := MergeMarkdown([]byte(c.old), []byte(good))
		if !errors.Is(err, ErrMarkers) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "old report") || got != nil {
			t.Errorf("%s: merged %q, error %v; want none, and ErrMarkers with %q", c.name, got, err, c.want)
		}
		if _, err := MergeMarkdown([]byte(good), []byte(c.old)); !errors.Is(err, ErrMarkers) || !strings.Contains(err.Error(), "generated report") {
			t.Errorf("%s, in the generated report: error %v", c.name, err)
		}
		if _, err := GeneratedBlocks([]byte(c.old)); !errors.Is(err, ErrMarkers) {
			t.Errorf("%s: GeneratedBlocks gave %v", c.name, err)
		}
	}
	if _, err := MergeMarkdown([]byte(good), []byte("text\n"+good)); err == nil || !strings.Contains(err.Error(), "line 1: text outside the generated blocks") {
		t.Errorf("generated report with text outside its blocks: %v", err)
	}
}

// everyResults has a row of every kind, so that WriteMarkdown writes
// every block it knows.
func everyResults() *Results {
	return &Results{
		Command: "peer bench", StartedAt: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), TookS: 60,
		Suites:     Suites(),
		Selection:  []SelectionRow{{Network: "planetlab490", TargetS: 10, Capacity: 64, Strategy: "geometric"}, {Network: "planetlab490", TargetS: 10, Capacity: 64, Strategy: "random", Kind: KindRandom}},
		GeoLive:    []GeoLiveRow{{N: 100, S: 10, DurationS: 300}},
		Election:   []ElectionRow{{Algorithm: "bully", N: 8, Messages: 56, TheoryMessages: 56, Ratio: 1}},
		Repair:     []RepairRow{{Algorithm: "bully", N: 16, Churn: []ChurnStats{{RatePerMin: 0.01}}}},
		LiveRepair: []LiveRepairRow{{Algorithm: "bully", N: 32, Kills: 3}},
		SimLive:    []SimLiveRow{{Scenario: "churn", N: 64, Superpeers: 8, Election: "bully", RatePerMin: 0.1}},
		SimScale:   []SimScaleRow{{Strategy: "dht", N: 1000}},
		NodeScale:  []NodeScaleRow{{Scenario: NodeScaleConverge, N: 1000, Converged: true}},
		Growth:     []GrowthRow{{Event: "double", From: 480, To: 960}},
		LiveScale: []LiveScaleRow{{Strategy: "dht", N: 32, Converged: true, Ordinary: 600, SuperpeerPerMember: 40},
			{Strategy: "dht", N: 64, Converged: true, Ordinary: 650, SuperpeerPerMember: 80}},
		Attack:     []AttackRow{{Network: "planetlab490", S: 25, Hosts: 490, Trials: 5}},
		LiveAttack: []LiveAttackRow{{Attack: "none", N: 4}},
	}
}

func everyFigure() []Figure {
	return []Figure{
		{Suite: SuiteSelection, File: "selection-planetlab490-s10-cdf.png", Title: "RTT to the superpeer"},
		{Suite: SuiteElection, File: "election-messages.png", Title: "Messages"},
		{Suite: SuiteRepair, File: "repair-failover.png", Title: "Failover"},
		{Suite: SuiteScale, File: "scale-live-traffic.png", Title: "Traffic"},
	}
}

// WriteMarkdown writes nothing outside its blocks, no name twice, and
// merged into itself a report is itself.
func TestWriteMarkdownMergesIntoItself(t *testing.T) {
	var md bytes.Buffer
	if err := WriteMarkdown(&md, everyResults(), everyFigure(), "docs/bench"); err != nil {
		t.Fatal(err)
	}
	names, err := GeneratedBlocks(md.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"header", "section-selection", "selection-about", "selection-table", "geolive-table", "figure-selection-planetlab490-s10-cdf",
		"section-repair", "simlive-table", "node-scale-about", "node-scale-table", "growth-table", "live-scale-table", "live-scale-growth", "section-attack", "live-attack-table"} {
		if !slices.Contains(names, want) {
			t.Errorf("no block %q among %v", want, names)
		}
	}
	got, err := MergeMarkdown(md.Bytes(), md.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, md.Bytes()) {
		t.Errorf("merged into itself:\n%s\nwant\n%s", got, md.Bytes())
	}
	// Nothing is written outside the blocks: merged into nothing, the
	// report is itself too.
	if got, err := MergeMarkdown(nil, md.Bytes()); err != nil || !bytes.Equal(got, md.Bytes()) {
		t.Errorf("merged into nothing: %v\n%s", err, got)
	}
	// A block name given twice is an error, not a report.
	if err := WriteMarkdown(&md, everyResults(), append(everyFigure(), everyFigure()[0]), "docs/bench"); err == nil {
		t.Error("two figures of one name: no error")
	}
}

// Merged into BENCHMARKS.md, a report generated now keeps every line of
// its text written by hand, where it was, and every block that WriteMarkdown
// generates is marked there under a name that WriteMarkdown writes.
func TestMergeMarkdownKeepsBENCHMARKS(t *testing.T) {
	old, err := os.ReadFile("../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	oldSegs, err := parseMarkdown(old)
	if err != nil {
		t.Fatalf("BENCHMARKS.md: %v", err)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, everyResults(), everyFigure(), "docs/bench"); err != nil {
		t.Fatal(err)
	}
	known, _ := GeneratedBlocks(md.Bytes())
	oldNames, _ := GeneratedBlocks(old)
	for _, n := range oldNames {
		if !slices.Contains(known, n) && !strings.HasPrefix(n, "figure-") {
			t.Errorf("BENCHMARKS.md has a block %q that WriteMarkdown never writes", n)
		}
	}
	for _, n := range known {
		if !slices.Contains(oldNames, n) && !strings.HasPrefix(n, "figure-") && !strings.HasPrefix(n, "geolive-") && n != "growth-table" && n != "growth-about" {
			t.Errorf("BENCHMARKS.md has no block %q", n)
		}
	}
	// Each block of BENCHMARKS.md is made as WriteMarkdown makes the block
	// of its name (the same headings, paragraphs, tables and figures, in
	// order), so that no hand-written paragraph is inside a block.
	newSegs, _ := parseMarkdown(md.Bytes())
	shapes := map[string]string{}
	for _, s := range newSegs {
		shapes[s.name] = mdShape(s.raw)
	}
	for _, s := range oldSegs {
		want, ok := shapes[s.name]
		if strings.HasPrefix(s.name, "figure-") {
			want, ok = "figure", true
		}
		if got := mdShape(s.raw); s.name != "" && ok && got != want {
			t.Errorf("BENCHMARKS.md, line %d: block %q is %s; WriteMarkdown writes %s", s.line, s.name, got, want)
		}
	}
	merged, err := MergeMarkdown(old, md.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	segs, err := parseMarkdown(merged)
	if err != nil {
		t.Fatal(err)
	}
	// The hand-written text, segment by segment, is the old one.
	hand := func(segs []mdSegment) []string {
		var out []string
		for _, s := range segs {
			if s.name == "" {
				out = append(out, string(s.raw))
			}
		}
		return out
	}
	if h, oh := hand(segs), hand(oldSegs); !slices.Equal(h, oh) {
		t.Errorf("the text outside the blocks changed: %d stretches, want %d", len(h), len(oh))
		for i := range min(len(h), len(oh)) {
			if h[i] != oh[i] {
				t.Errorf("first difference:\n%.400s\nwant\n%.400s", h[i], oh[i])
				break
			}
		}
	}
	// Every line outside the old blocks is in the merged report, in order.
	lines := strings.Split(string(merged), "\n")
	j, handLines := 0, 0
	for _, s := range oldSegs {
		if s.name != "" {
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(s.raw), "\n"), "\n") {
			handLines++
			for j < len(lines) && lines[j] != l {
				j++
			}
			if j == len(lines) {
				t.Fatalf("hand-written line lost: %.200s", l)
			}
			j++
		}
	}
	if handLines < 300 {
		t.Errorf("only %d lines of BENCHMARKS.md outside its blocks", handLines)
	}
	// The old figures this report does not draw stay; the generated blocks
	// are the new report's.
	for _, s := range segs {
		switch {
		case s.name == "":
		case slices.Contains(known, s.name):
			if !bytes.Contains(md.Bytes(), s.raw) {
				t.Errorf("block %q is not the new report's", s.name)
			}
		case !bytes.Contains(old, s.raw):
			t.Errorf("block %q is neither the new report's nor the old one's", s.name)
		}
	}
	if !bytes.Contains(merged, []byte("![Coverage under churn (simulator)](docs/bench/repair-coverage.png)")) {
		t.Error("a figure the new report does not draw was dropped")
	}
	if again, _ := MergeMarkdown(merged, md.Bytes()); !bytes.Equal(again, merged) {
		t.Error("a second merge of the same report changed the result")
	}
}

// mdShape describes a block by the kinds of its chunks between blank
// lines: heading, paragraph, table or figure.
func mdShape(raw []byte) string {
	var kinds []string
	for _, chunk := range strings.Split(string(raw), "\n\n") {
		var lines []string
		for _, l := range strings.Split(chunk, "\n") {
			if l != "" && !strings.HasPrefix(l, "<!-- ") {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 {
			continue
		}
		switch l := lines[0]; {
		case strings.HasPrefix(l, "#"):
			kinds = append(kinds, "heading")
		case strings.HasPrefix(l, "|"):
			kinds = append(kinds, "table")
		case strings.HasPrefix(l, "!["):
			kinds = append(kinds, "figure")
		default:
			kinds = append(kinds, "paragraph")
		}
	}
	return strings.Join(kinds, ", ")
}
