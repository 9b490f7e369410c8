package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Figure is one PNG that DrawPlots wrote.
type Figure struct {
	Suite string `json:"suite"`
	File  string `json:"file"` // the name in the output folder
	Title string `json:"title"`
}

// plotter draws one figure of one suite, from the results, to a path.
type figureFunc struct {
	suite, file, title string
	draw               func(r *Results, title, path string) error
	has                func(r *Results) bool
}

// figures lists every figure DrawPlots knows, in report order.
func figures() []figureFunc {
	return []figureFunc{
		{SuiteElection, "election-messages.png", "Messages to elect a leader, measured (solid) and textbook (dashed)", drawElectionMessages, hasElection},
		{SuiteElection, "election-time.png", "Time to elect a leader (simulator, RTT 100 ms)", drawElectionTime, hasElection},
		{SuiteRepair, "repair-failover.png", "Failover after a leader crash (simulator)", drawFailover, hasRepair},
		{SuiteRepair, "repair-coverage.png", "Coverage under churn (simulator)", drawCoverage, hasRepair},
		{SuiteRepair, "repair-live-failover.png", "Failover after superpeer kills (live testnet)", drawLiveFailover, hasLiveRepair},
		{SuiteScale, "scale-sim-time.png", "Selection simulators: wall time of one selection",
			simScaleChart(func(r SimScaleRow) float64 { return r.WallS }, "wall time (s)"), hasSimScale},
		{SuiteScale, "scale-sim-memory.png", "Selection simulators: peak memory of one selection",
			simScaleChart(func(r SimScaleRow) float64 { return r.PeakMemMB }, "peak memory (MB)"), hasSimScale},
		{SuiteScale, "scale-live-converge.png", "Live testnet: time to converge",
			liveScaleChart(func(r LiveScaleRow) float64 { return r.ConvergeS }, "time to converge (s)"), hasLiveScale},
		{SuiteScale, "scale-live-memory.png", "Live testnet: peak memory per node",
			liveScaleChart(func(r LiveScaleRow) float64 { return r.PeakMemPerNodeMB }, "peak memory per node (MB)"), hasLiveScale},
		{SuiteScale, "scale-live-traffic.png", "Live testnet: steady-state traffic per node, by role", drawLiveTraffic, hasLiveScale},
	}
}

// DrawPlots draws every figure the results have data for into dir, and
// returns them in report order.
func DrawPlots(r *Results, dir string) ([]Figure, error) {
	var out []Figure
	for _, f := range append(selectionFigures(r), figures()...) {
		if !slices.Contains(r.Suites, f.suite) || !f.has(r) {
			continue
		}
		switch err := f.draw(r, f.title, filepath.Join(dir, f.file)); {
		case errors.Is(err, errNoData):
			continue // e.g. no live size converged
		case err != nil:
			return out, err
		}
		out = append(out, Figure{Suite: f.suite, File: f.file, Title: f.title})
	}
	return out, nil
}

// selectionCase is the rows of one SelectionCase: one network, one S.
type selectionCase struct {
	network string
	s       int
	rows    []SelectionRow
}

func selectionCases(rows []SelectionRow) []selectionCase {
	var out []selectionCase
	for _, r := range rows {
		if n := len(out); n > 0 && out[n-1].network == r.Network && out[n-1].s == r.TargetS {
			out[n-1].rows = append(out[n-1].rows, r)
			continue
		}
		out = append(out, selectionCase{r.Network, r.TargetS, []SelectionRow{r}})
	}
	return out
}

// fileSafe turns a network's name into a file name part.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}

// selectionFigures are, for every case of the selection suite, the CDF of
// RTT to the superpeer for the strategies and baselines (every baseline
// count, each labelled by SelectionRow.Label), and a map of each strategy
// that gave coordinates.
func selectionFigures(r *Results) []figureFunc {
	var out []figureFunc
	always := func(*Results) bool { return true }
	for _, c := range selectionCases(r.Selection) {
		base := fmt.Sprintf("selection-%s-s%d", fileSafe(c.network), c.s)
		out = append(out, figureFunc{SuiteSelection, base + "-cdf.png",
			fmt.Sprintf("RTT to the superpeer, %s, S = %d", c.network, c.s),
			func(_ *Results, title, path string) error {
				var names []string
				var samples [][]float64
				for _, row := range c.rows {
					names, samples = append(names, row.Label()), append(samples, row.Own.CDFMs)
				}
				ch := CDFChart(title, "RTT from an ordinary peer to its superpeer (ms)", names, samples)
				ch.LogX = true
				return ch.Save(path)
			}, always})
		for _, row := range c.rows {
			if row.Coords == nil || row.Attach == nil {
				continue
			}
			out = append(out, figureFunc{SuiteSelection, fmt.Sprintf("%s-%s-map.png", base, fileSafe(row.Strategy)),
				fmt.Sprintf("%s superpeers in network coordinates, %s, S = %d", row.Strategy, c.network, c.s),
				func(_ *Results, title, path string) error {
					return MapPlot{Title: title, X: "coordinate, 1st principal axis (ms)", Y: "coordinate, 2nd principal axis (ms)",
						Pos: row.Coords, Superpeers: row.Superpeers, Attach: row.Attach}.Save(path)
				}, always})
		}
	}
	return out
}

func hasElection(r *Results) bool { return len(r.Election) > 0 }
func hasRepair(r *Results) bool   { return len(r.Repair) > 0 }
func hasLiveRepair(r *Results) bool {
	for _, x := range r.LiveRepair {
		if x.Error == "" {
			return true
		}
	}
	return false
}

// drawLiveFailover draws the live failover median and maximum, in
// detection timeouts, per algorithm.
func drawLiveFailover(r *Results, title, path string) error {
	var groups, names []string
	var xs, ys []float64
	for _, row := range r.LiveRepair {
		if row.Error != "" || row.DetectionTimeoutMs <= 0 {
			continue
		}
		groups = append(groups, row.Algorithm)
		g := float64(len(groups) - 1)
		names, xs, ys = append(names, "median"), append(xs, g), append(ys, row.FailoverMedianMs/row.DetectionTimeoutMs)
		names, xs, ys = append(names, "max"), append(xs, g), append(ys, row.FailoverMaxMs/row.DetectionTimeoutMs)
	}
	return BarChart{Title: title, Y: "failover (failure-detection timeouts T)", Groups: groups, Series: byName(names, xs, ys)}.Save(path)
}

// drawElectionMessages draws, per algorithm, the messages measured and
// the textbook count against n, log-log.
func drawElectionMessages(r *Results, title, path string) error {
	var series []Series
	for _, algo := range algorithmsIn(r.Election) {
		meas, theory := Series{Name: algo}, Series{Dashed: true}
		for _, row := range r.Election {
			if row.Algorithm != algo {
				continue
			}
			theory.X, theory.Y = append(theory.X, float64(row.N)), append(theory.Y, float64(row.TheoryMessages))
			if !row.Skipped {
				meas.X, meas.Y = append(meas.X, float64(row.N)), append(meas.Y, float64(row.Messages))
			}
		}
		series = append(series, meas, theory)
	}
	return Chart{Title: title, X: "cluster size n", Y: "messages per election", LogX: true, LogY: true, Series: series}.Save(path)
}

func drawElectionTime(r *Results, title, path string) error {
	var names []string
	var xs, ys []float64
	for _, row := range r.Election {
		if !row.Skipped {
			names, xs, ys = append(names, row.Algorithm), append(xs, float64(row.N)), append(ys, row.TimeMs)
		}
	}
	return Chart{Title: title, X: "cluster size n", Y: "time to elect (virtual ms)", LogX: true, LogY: true, Series: byName(names, xs, ys)}.Save(path)
}

// drawFailover draws the median failover time, in detection timeouts,
// per algorithm (x) and cluster size (one series each).
func drawFailover(r *Results, title, path string) error {
	algos := distinct(r.Repair, func(r RepairRow) string { return r.Algorithm })
	var names []string
	var xs, ys []float64
	for _, row := range r.Repair {
		if row.Error != "" || row.Failover.MedianTimeouts < 0 {
			continue
		}
		names = append(names, fmt.Sprintf("n = %d", row.N))
		xs = append(xs, float64(slices.Index(algos, row.Algorithm)))
		ys = append(ys, row.Failover.MedianTimeouts)
	}
	return BarChart{Title: title, Y: "median failover (failure-detection timeouts T)", Groups: algos, Series: byName(names, xs, ys)}.Save(path)
}

// drawCoverage draws coverage against the churn rate, per algorithm, for
// the largest cluster size.
func drawCoverage(r *Results, title, path string) error {
	n := 0
	for _, row := range r.Repair {
		n = max(n, row.N)
	}
	var names []string
	var xs, ys []float64
	for _, row := range r.Repair {
		if row.N != n {
			continue
		}
		for _, c := range row.Churn {
			names, xs, ys = append(names, row.Algorithm), append(xs, 100*c.RatePerMin), append(ys, c.Coverage)
		}
	}
	return Chart{Title: fmt.Sprintf("%s, n = %d", title, n), X: "members crashing and restarting (% per minute)", Y: "coverage (fraction of time with one live leader)", Series: byName(names, xs, ys)}.Save(path)
}

// distinct lists key(r) for the rows, each once, in first-seen order.
func distinct[R any](rows []R, key func(R) string) []string {
	var out []string
	for _, r := range rows {
		if k := key(r); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func algorithmsIn(rows []ElectionRow) []string {
	return distinct(rows, func(r ElectionRow) string { return r.Algorithm })
}

func hasSimScale(r *Results) bool  { return len(r.SimScale) > 0 }
func hasLiveScale(r *Results) bool { return len(r.LiveScale) > 0 }

// byName groups points (x, y) into one series per name, in first-seen
// order.
func byName(names []string, xs, ys []float64) []Series {
	var out []Series
	for i, name := range names {
		j := slices.IndexFunc(out, func(s Series) bool { return s.Name == name })
		if j < 0 {
			out = append(out, Series{Name: name})
			j = len(out) - 1
		}
		out[j].X = append(out[j].X, xs[i])
		out[j].Y = append(out[j].Y, ys[i])
	}
	return out
}

func simScaleChart(y func(SimScaleRow) float64, label string) func(*Results, string, string) error {
	return func(r *Results, title, path string) error {
		var names []string
		var xs, ys []float64
		for _, row := range r.SimScale {
			names, xs, ys = append(names, row.Strategy), append(xs, float64(row.N)), append(ys, y(row))
		}
		return Chart{Title: title, X: "peers (n)", Y: label, LogX: true, LogY: true, Series: byName(names, xs, ys)}.Save(path)
	}
}

func liveScaleChart(y func(LiveScaleRow) float64, label string) func(*Results, string, string) error {
	return func(r *Results, title, path string) error {
		var names []string
		var xs, ys []float64
		for _, row := range r.LiveScale {
			if row.Converged {
				names, xs, ys = append(names, row.Strategy), append(xs, float64(row.N)), append(ys, y(row))
			}
		}
		return Chart{Title: title, X: "nodes (n)", Y: label, LogX: true, LogY: true, Series: byName(names, xs, ys)}.Save(path)
	}
}

// drawLiveTraffic draws bytes per second against n: an ordinary peer's
// (mean and max), a superpeer's (mean, and per member served), and what
// each peer writes on average.
func drawLiveTraffic(r *Results, title, path string) error {
	var names []string
	var xs, ys []float64
	for _, row := range r.LiveScale {
		if !row.Converged {
			continue
		}
		for _, v := range []struct {
			name string
			y    float64
		}{{"ordinary (mean)", row.Ordinary}, {"ordinary (max)", row.OrdinaryMax}, {"superpeer (mean)", row.Superpeer},
			{"superpeer per member", row.SuperpeerPerMember}, {"written per peer", row.BytesPerPeerPerS}} {
			if v.y > 0 {
				names, xs, ys = append(names, v.name), append(xs, float64(row.N)), append(ys, v.y)
			}
		}
	}
	return Chart{Title: title, X: "nodes (n)", Y: "bytes per second (sent + received)", LogX: true, LogY: true, Series: byName(names, xs, ys)}.Save(path)
}

// WriteTables prints every suite's tables.
func WriteTables(w io.Writer, r *Results) error {
	if len(r.Selection) > 0 {
		fmt.Fprintln(w, "\nSelection, simulator (placement: the superpeers with every peer attached to the nearest with room by true RTT; ratios against the baselines with the row's superpeer count):")
		if err := WriteSelectionTable(w, r.Selection); err != nil {
			return err
		}
	}
	if len(r.Election) > 0 {
		fmt.Fprintln(w, "\nElection, simulator (one election; heartbeats not counted):")
		if err := WriteElectionTable(w, r.Election); err != nil {
			return err
		}
	}
	if len(r.Repair) > 0 {
		fmt.Fprintln(w, "\nRepair, simulator:")
		if err := WriteRepairTable(w, r.Repair); err != nil {
			return err
		}
	}
	if len(r.LiveRepair) > 0 {
		fmt.Fprintln(w, "\nRepair, live testnet (kill-superpeer scenario):")
		if err := WriteLiveRepairTable(w, r.LiveRepair); err != nil {
			return err
		}
	}
	if len(r.GeoLive) > 0 {
		fmt.Fprintln(w, "\nSelection, geometric placement live (virtual time) and in the node simulator on the same hosts:")
		if err := WriteGeoLiveTable(w, r.GeoLive); err != nil {
			return err
		}
	}
	if len(r.SimLive) > 0 {
		fmt.Fprintln(w, "\nRepair, node simulator and live testnet side by side (same scenario and settings; T: failure-detection timeout):")
		if err := WriteSimLiveTable(w, r.SimLive); err != nil {
			return err
		}
	}
	if len(r.SimScale) > 0 {
		fmt.Fprintln(w, "\nScale, selection simulators (dhtselect.Simulate, geometric.Simulate; not node machines), synthetic network, S = n/100:")
		if err := WriteSimScaleTable(w, r.SimScale); err != nil {
			return err
		}
	}
	if len(r.NodeScale) > 0 {
		fmt.Fprintln(w, "\nScale, node machines (testnet/nodesim; virtual time, wall time and memory of this process):")
		if err := WriteNodeScaleTable(w, r.NodeScale); err != nil {
			return err
		}
	}
	if len(r.Growth) > 0 {
		fmt.Fprintln(w, "\nScale, node machines, the network doubles or halves (k changes: clusters split or merge):")
		if err := WriteGrowthTable(w, r.Growth); err != nil {
			return err
		}
	}
	if len(r.LiveScale) > 0 {
		fmt.Fprintln(w, "\nScale, live testnet (in-process libp2p nodes, a real node's intervals; traffic in bytes per second, sent + received, by role):")
		if err := WriteLiveScaleTable(w, r.LiveScale); err != nil {
			return err
		}
		var growth strings.Builder
		writeTrafficGrowth(&growth, r.LiveScale)
		if growth.Len() > 0 {
			fmt.Fprint(w, "\n"+growth.String())
		}
	}
	if len(r.LiveAttack) > 0 {
		fmt.Fprintln(w, "\nAttacks, live (hostile clients against node processes on loopback; the victim is a superpeer):")
		if err := WriteLiveAttackTable(w, r.LiveAttack); err != nil {
			return err
		}
	}
	if len(r.Attack) > 0 {
		fmt.Fprintln(w, "\nLying peers, simulator (share of the superpeer roles the liars hold; damage: honest peers' mean RTT to their superpeer over the run without liars):")
		if err := WriteAttackTable(w, r.Attack); err != nil {
			return err
		}
	}
	return nil
}

// mdTable writes a Markdown table.
func mdTable(w io.Writer, header []string, rows [][]string) {
	fmt.Fprintf(w, "| %s |\n|", strings.Join(header, " | "))
	for range header {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
}

func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string { return fmt.Sprintf("%.2f", x) }
func f0(x float64) string { return fmt.Sprintf("%.0f", x) }
func d(x int) string      { return fmt.Sprint(x) }

// WriteMarkdown writes the report: how it was made, then every suite's
// tables and figures (linked in dir, relative to the report). Every part of
// it is a generated block between marker lines (see MergeMarkdown, which
// puts a new report into an old one and keeps its hand-written text): the
// header, each section's heading, each table's paragraph and the table
// itself, each figure. A part whose rows the results lack (a suite or a
// half that did not run) is not written at all, so that a merge keeps the
// old one.
func WriteMarkdown(w io.Writer, r *Results, figs []Figure, dir string) error {
	b := newMDBlocks(w)
	b.block("header", func(w io.Writer) {
		fmt.Fprintf(w, "# Benchmarks\n\n")
		fmt.Fprintf(w, "`make bench` regenerates the marked blocks of this file (each between the lines `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`, which do not show when rendered), its plots in `%s/` and `%s/results.json` (every figure); a run of some suites (`peer bench --suite S --report FILE`) regenerates theirs alone. Under each section's heading is the run its blocks come from, and the machine. The text between the blocks is written by hand, notes of experiments, each with its command and date, and regeneration keeps it. Every ratio compares figures measured in one run.\n\n", dir, dir)
	})
	// Each section names its run: a run of some suites merged into a
	// report (MergeMarkdown) replaces those sections' blocks alone.
	heading := func(name, title string) {
		b.block("section-"+name, func(w io.Writer) {
			fmt.Fprintf(w, "## %s\n\n", title)
			m := r.Machine
			fmt.Fprintf(w, "*From `%s` on %s (the run took %.1f minutes); %s/%s, %d CPUs (%s), %d GiB, %s.*\n\n",
				r.Command, r.StartedAt.Format(time.DateOnly), r.TookS/60, m.OS, m.Arch, m.CPUs, orUnknown(m.CPUModel), m.MemoryGiB, m.Go)
			if r.Quick {
				fmt.Fprintf(w, "**Quick run: small sizes only, a smoke test, not a measurement.**\n\n")
			}
		})
	}
	figure := func(suite string) {
		for _, f := range figs {
			if f.Suite == suite {
				b.block("figure-"+blockName(strings.TrimSuffix(f.File, ".png")), func(w io.Writer) {
					fmt.Fprintf(w, "![%s](%s/%s)\n\n", f.Title, dir, f.File)
				})
			}
		}
	}
	if len(r.Selection) > 0 {
		heading("selection", "Selection")
		writeSelectionMarkdown(b, r.Selection)
		writeGeoLiveMarkdown(b, r.GeoLive)
		figure(SuiteSelection)
	}
	if len(r.Election) > 0 {
		heading("election", "Election")
		writeElectionMarkdown(b, r.Election)
		figure(SuiteElection)
	}
	if len(r.Repair) > 0 || len(r.LiveRepair) > 0 || len(r.SimLive) > 0 {
		heading("repair", "Repair")
		writeRepairMarkdown(b, r.Repair)
		writeLiveRepairMarkdown(b, r.LiveRepair)
		writeSimLiveMarkdown(b, r.SimLive)
		figure(SuiteRepair)
	}
	if len(r.SimScale) > 0 || len(r.LiveScale) > 0 || len(r.NodeScale) > 0 || len(r.Growth) > 0 {
		heading("scale", "Scale")
		writeScaleMarkdown(b, r)
		figure(SuiteScale)
	}
	if len(r.Attack) > 0 || len(r.LiveAttack) > 0 {
		heading("attack", "Lying peers and hostile clients")
	}
	if len(r.Attack) > 0 {
		writeAttackMarkdown(b, r.Attack)
	}
	if len(r.LiveAttack) > 0 {
		writeLiveAttackMarkdown(b, r.LiveAttack)
	}
	return b.err
}

func orUnknown(s string) string {
	if s == "" {
		return "model unknown"
	}
	return s
}

func writeScaleMarkdown(b *mdBlocks, r *Results) {
	if len(r.SimScale) > 0 {
		b.block("sim-scale-about", func(w io.Writer) {
			fmt.Fprintf(w, "**Selection simulators** (dhtselect.Simulate and geometric.Simulate: the selection alone, not the node machines; node machines at scale are the next table), one selection on a synthetic network of n hosts (5 dense regions in a 200 × 200 ms plane), S = n/100. Wall time includes building the network and, for geometric, the coordinate fit. *Peak MB held* is the most memory the process held from the operating system during the run (heap, stacks, runtime), after returning all it could before the run; *live heap* the largest heap the garbage collector found reachable. Messages per peer are those a peer sends: dht counts FIND_NODE queries; geometric its RTT probes for the coordinates (2 per coordinate round) plus its token passes.\n\n")
		})
		b.block("sim-scale-table", func(w io.Writer) {
			var rows [][]string
			for _, x := range r.SimScale {
				rows = append(rows, []string{x.Strategy, d(x.N), d(x.TargetS), d(x.Superpeers), f1(x.WallS), f0(x.PeakMemMB), f0(x.LiveHeapMB), d(x.Rounds), f2(x.MessagesPerPeer), d(x.Unattached)})
			}
			mdTable(w, []string{"strategy", "n", "target S", "superpeers", "wall s", "peak MB held", "live heap MB", "rounds", "messages/peer", "unattached"}, rows)
		})
	}
	writeNodeScaleMarkdown(b, r.NodeScale)
	writeGrowthMarkdown(b, r.Growth)
	if len(r.LiveScale) > 0 {
		b.block("live-scale-about", func(w io.Writer) {
			fmt.Fprintf(w, "Live testnet: n real libp2p hosts (mocknet, kad-dht, GossipSub) in one process, S = n/16, a real node's intervals with the DHT strategy (announce %s s, re-evaluate %s s, as overlay.DefaultConfig has them: membership is cluster-scoped, a member registers with its superpeer and only superpeers gossip, on the backbone; GossipSub runs with the overlay's gossip factor of 0, as a real node does), measured over a window after convergence. Traffic is the payload the nodes write to and read from their streams (no encryption or muxer framing), per second. *Written B/peer/s* is what all nodes wrote divided by n. *Ordinary* is an ordinary peer's bytes sent plus received (mean / max over the ordinary peers), *superpeer* a superpeer's (mean over the superpeers), *per member* each superpeer's divided by the ordinary peers it serves; *ord* and *sp* columns split the means by protocol group, roles as they stood at the end of the window. *MB/node* is the growth of the memory the process held, at its peak, divided by n. *Size estimate error* is |estimate − n| / n over the nodes at the end of the window.\n\n",
				f0(r.LiveScale[0].AnnounceIntervalS), f0(r.LiveScale[0].ReevaluateIntervalS))
		})
		b.block("live-scale-table", func(w io.Writer) {
			groups := liveGroups(r.LiveScale)
			header := []string{"strategy", "n", "converged (s)", "peak MB", "MB/node", "live heap MB", "announce / re-evaluate s", "window s", "written B/peer/s", "ordinary B/s mean / max"}
			for _, g := range groups {
				header = append(header, "ord "+g)
			}
			header = append(header, "superpeers (members each)", "superpeer B/s", "per member B/s")
			for _, g := range groups {
				header = append(header, "sp "+g)
			}
			header = append(header, "still converged", "size estimate error median / max")
			var rows [][]string
			for _, x := range r.LiveScale {
				conv := f1(x.ConvergeS)
				if !x.Converged {
					conv = "no (" + f0(x.ConvergeS) + ")"
				}
				row := []string{x.Strategy, d(x.N), conv, f0(x.PeakMemMB), f2(x.PeakMemPerNodeMB), f0(x.LiveHeapMB), f0(x.AnnounceIntervalS) + " / " + f0(x.ReevaluateIntervalS), f0(x.WindowS)}
				if !x.Converged { // no window measured
					rows = append(rows, append(row, make([]string, len(header)-len(row))...))
					continue
				}
				row = append(row, f0(x.BytesPerPeerPerS), f0(x.Ordinary)+" / "+f0(x.OrdinaryMax))
				for _, g := range groups {
					row = append(row, f0(x.OrdinaryByProtocol[g]))
				}
				row = append(row, d(x.SuperpeersSeen)+" ("+f1(x.MembersPerSuperpeer)+")", f0(x.Superpeer), f0(x.SuperpeerPerMember))
				for _, g := range groups {
					row = append(row, f0(x.SuperpeerByProtocol[g]))
				}
				rows = append(rows, append(row, fmt.Sprint(x.StillConverged), f1(100*x.EstimateErrMedian)+" % / "+f1(100*x.EstimateErrMax)+" %"))
			}
			mdTable(w, header, rows)
		})
		b.block("live-scale-growth", func(w io.Writer) { writeTrafficGrowth(w, r.LiveScale) })
	}
}

func writeNodeScaleMarkdown(b *mdBlocks, rows []NodeScaleRow) {
	if len(rows) == 0 {
		return
	}
	b.block("node-scale-about", func(w io.Writer) {
		fmt.Fprintf(w, "**Node machines** (package overlay/node, the type the live node runs) in the node simulator (testnet/nodesim), in virtual time on this one process, the nodes starting over %.0f s, target S = %.0f %% of the estimated size. *converge*: DHT mode without an election, until nodesim.Converged (every node served, k agreed, each naming the node closest to its cluster key). *churn*: with the election named, converged first, then a fraction of the nodes replaced per minute (a random live node crashes, a new one joins), sampled every 100 ms: coverage is the mean fraction of the joined nodes served, failover is per crashed superpeer until its followers are served again, in units of the machines' failure-detection timeout T (pending 30 T after the churn: unrepaired), split brain the time and the cluster-samples with two claimers, disagree the longest time a node's lookup and election named different superpeers. *Peak MB* is the most memory the process held from the operating system (runtime.MemStats Sys − HeapReleased, sampled every 50 ms; peer bench runs with GOGC=400, which lets it grow to about five times the live heap, but a run sets a soft memory limit of 12 GiB, debug.SetMemoryLimit, past which the collector works harder instead); messages are election messages, lookups the cluster-key lookups, views the membership views delivered, per node per virtual second (converge: up to convergence; churn: over the churn). Membership is cluster-scoped (issue 20), as in the live overlay: a member registers with its superpeer every announce interval, and learns of changes to its cluster's roster then (registrations per node per s), and every superpeer hears every superpeer's summary on the backbone (per superpeer per s: the deliveries of the whole list as the machine takes it, the summaries in them new or changed since the superpeer's last list, which is what a backbone carrying each summary when it changes delivers, and all the summaries they held). The size estimate's error is |estimate − live| / live over the nodes at the end (converge: at convergence, and *settled* a membership TTL, three announce intervals, later: a node's estimate is its last evaluation's, and the summaries count registrations, which take an announce interval to come in). *Wall s* depends on the machine's load (say the load when quoting it); *cpu s* is the process's CPU time, user and system, the garbage collector's included.\n\n",
			rows[0].StaggerS, 100*rows[0].Fraction)
	})
	b.block("node-scale-table", func(w io.Writer) {
		var out [][]string
		for _, x := range rows {
			conv := f1(x.ConvergeS)
			if !x.Converged {
				conv = "no"
			}
			row := []string{x.Scenario, d(x.N), orNone(x.Election), conv, f0(x.VirtualS), f1(x.WallS), f1(x.CPUS), f0(x.PeakMemMB), f0(x.LiveHeapMB),
				f2(x.MessagesPerNodePerS) + " / " + fmt.Sprintf("%.3f", x.LookupsPerNodePerS) + " / " + f2(x.ViewsPerNodePerS),
				fmt.Sprintf("%.3f", x.RegistrationsPerNodePerS),
				fmt.Sprintf("%s / %s / %.0f", f2(x.BackbonePerSuperpeerPerS), f1(x.SummaryChangesPerSuperpeerPerS), x.SummariesPerSuperpeerPerS),
				fmt.Sprintf("%.1f %% / %.1f %%", 100*x.SizeErrMedian, 100*x.SizeErrMax), ""}
			if x.Scenario == NodeScaleConverge && x.Converged {
				row[len(row)-1] = fmt.Sprintf("%.1f %% / %.1f %%", 100*x.SettledErrMedian, 100*x.SettledErrMax)
			}
			if x.Scenario == NodeScaleChurn && x.Converged {
				row = append(row, fmt.Sprintf("%.0f %%/min × %.0f s (%d)", 100*x.RatePerMin, x.ChurnS, x.Crashes), fmt.Sprintf("%.4f", x.Coverage), d(x.MaxOrphans),
					fmt.Sprintf("%s / %s (%d, T = %.0f ms)", noneOr(x.FailoverMedianT), noneOr(x.FailoverMaxT), x.Failovers, x.TimeoutMs), d(x.Unrepaired),
					fmt.Sprintf("%.1f s, %d", x.SplitBrainS, x.SplitSamples), f1(x.DisagreeS))
			} else {
				row = append(row, "", "", "", "", "", "", "")
			}
			out = append(out, row)
		}
		mdTable(w, []string{"scenario", "n", "election", "converged (virtual s)", "virtual s", "wall s", "cpu s", "peak MB", "live heap MB", "msgs / lookups / views per node per s",
			"registrations per node per s", "backbone deliveries / summaries changed / summaries held per superpeer per s", "size estimate error median / max",
			"settled (a TTL later)", "churn (crashes)", "coverage", "max orphans", "failover median / max in T (count)", "unrepaired", "split brain (time, cluster-samples)", "disagree s"}, out)
	})
}

func writeGrowthMarkdown(b *mdBlocks, rows []GrowthRow) {
	if len(rows) == 0 {
		return
	}
	b.block("growth-about", func(w io.Writer) {
		fmt.Fprintf(w, "**Growth and shrinkage** (bench.Growth): node machines in the node simulator, DHT strategy, target S = 10 %% of the estimated size, no election. A converged network of n doubles (n nodes join over 10 s: k goes up by one and every cluster splits in place) or halves (half of 2n leave with a goodbye over 10 s: k goes down by one and pairs of clusters merge). Over the nodes there before and after (*stayers*): *changed* is those whose superpeer at the end differs (and the fraction); *by the keys* what dhtselect.Assign before and after says must change, the least any run can reach (about ¾ for a doubling: the half of a cluster without the old superpeer moves, and in the other half the old superpeer stays closest only against half the newcomers); *switches per stayer* every change of superpeer at the 100 ms samples, of which the excess over the changed fraction is the transition's flapping; *reconverged* the virtual time from the first join or leave to nodesim.Converged; *coverage* the mean fraction of the joined nodes served meanwhile (a node and its superpeer must agree on k, so a cluster that is splitting counts as uncovered until all of it has moved).\n\n")
	})
	b.block("growth-table", func(w io.Writer) {
		var out [][]string
		for _, x := range rows {
			conv := f1(x.ReconvergeS)
			if !x.Converged {
				conv = "no"
			}
			out = append(out, []string{x.Event, d(x.From) + " → " + d(x.To), d(x.KFrom) + " → " + d(x.KTo), d(x.Stayers),
				fmt.Sprintf("%d (%.2f)", x.Changed, x.ChangedFrac), d(x.ByKeys), f2(x.SwitchesPerStayer), conv, fmt.Sprintf("%.4f", x.Coverage), f1(x.WallS)})
		}
		mdTable(w, []string{"event", "nodes", "k", "stayers", "changed", "by the keys", "switches per stayer", "reconverged (virtual s)", "coverage", "wall s"}, out)
	})
}

func writeSimLiveMarkdown(b *mdBlocks, rows []SimLiveRow) {
	if len(rows) == 0 {
		return
	}
	r0 := rows[0]
	b.block("simlive-about", func(w io.Writer) {
		fmt.Fprintf(w, "**Simulated and live, side by side.** The same scenario on %d nodes (S = %d, %s): node machines in the node simulator, and real libp2p nodes in one process (the overlay's shell around the same machine), with the same settings: announce every %.0f s, re-evaluate every %.0f s, election tick %.0f ms, an RTT of %.0f ms between every two nodes (a latency matrix on both sides). *kill-superpeer* crashes %d superpeers one after another, each once the last one's followers name a live superpeer; *churn* replaces %.0f %% of the nodes per minute (one every %.1f s) for %.0f s. Both sides are measured alike, sampled every 20 ms from the first fault until convergence after the last: failover per crashed superpeer until its followers name another live superpeer, coverage the fraction of (live node, sample) pairs naming a live superpeer, T the largest failure-detection timeout at the end. Where the two differ by more than 10 %%, look first at what nodesim models by oracles (testnet/nodesim's package comment): T itself (the live nodes' RTT estimates include this process's CPU contention, capped at 1 s, while the simulator's are the matrix's: compare failovers in ms as well as in T), the lookup that a follower makes when its connection to the superpeer drops (the simulator's oracle is set to the in-process network's: one round of queries, as the live side's queries per lookup show, and a query to a dead node failing after one RTT, since a dial to a dead mocknet peer fails at once; nodesim's defaults, for a real network, wait out T), membership by gossip delay and TTL, and the length of the window (coverage is over the scenario, which ends at convergence: *uncovered node·s*, (1 − coverage) × n × the scenario's length, does not depend on it). "+
			"Rows marked *virtual time* ran the live side in a testing/synctest bubble (`go test ./bench -run TestSimLiveVirtual`, which make bench runs first): the live nodes' timers and the mocknet's delays then follow a virtual clock that does not move while any of them has work to do, so this machine's load does not enter the figures; rows marked *wall clock* ran it as `peer bench` does, on this machine's clock and two cores.\n\n",
			r0.N, r0.Superpeers, r0.Election, r0.AnnounceS, r0.ReevaluateS, r0.TickMs, r0.RTTMs, max(r0.Kills, rows[len(rows)-1].Kills),
			100*rows[len(rows)-1].RatePerMin, 60/(rows[len(rows)-1].RatePerMin*float64(r0.N)), rows[len(rows)-1].DurationS)
	})
	b.block("simlive-table", func(w io.Writer) {
		var out [][]string
		for _, r := range rows {
			for _, x := range []struct {
				name string
				s    SimLiveSide
			}{{"simulated", r.Sim}, {"live", r.Live}} {
				if x.s.Error != "" && x.s.Failovers == 0 {
					out = append(out, []string{r.scenarioClock(), x.name, "failed: " + x.s.Error, "", "", "", "", "", "", ""})
					continue
				}
				out = append(out, []string{r.scenarioClock(), x.name, f0(x.s.TimeoutMs), fmt.Sprintf("%s / %s (%d)", f0(x.s.FailoverMedianMs), f0(x.s.FailoverMaxMs), x.s.Failovers),
					f2(x.s.FailoverMedianT) + " / " + f2(x.s.FailoverMaxT), fmt.Sprintf("%.4f", x.s.Coverage), f1(x.s.UncoveredNodeS(r.N)),
					f0(x.s.SplitBrainMs), f1(x.s.ScenarioS), f1(x.s.WallS)})
			}
			out = append(out, []string{r.scenarioClock(), "**simulated ÷ live**", f2(Ratio(r.Sim.TimeoutMs, r.Live.TimeoutMs)),
				f2(Ratio(r.Sim.FailoverMedianMs, r.Live.FailoverMedianMs)) + " / " + f2(Ratio(r.Sim.FailoverMaxMs, r.Live.FailoverMaxMs)),
				f2(Ratio(r.Sim.FailoverMedianT, r.Live.FailoverMedianT)) + " / " + f2(Ratio(r.Sim.FailoverMaxT, r.Live.FailoverMaxT)),
				fmt.Sprintf("%.3f", Ratio(r.Sim.Coverage, r.Live.Coverage)), f2(Ratio(r.Sim.UncoveredNodeS(r.N), r.Live.UncoveredNodeS(r.N))), "", "", ""})
		}
		mdTable(w, []string{"scenario", "side", "T ms", "failover median / max ms (count)", "median / max in T", "coverage", "uncovered node·s", "split brain ms", "scenario s", "wall s"}, out)
		fmt.Fprintf(w, "Live queries per lookup:")
		for _, r := range rows {
			fmt.Fprintf(w, " %s %.1f;", r.Scenario, r.Live.QueriesPerLookup)
		}
		fmt.Fprintf(w, " the simulator's lookups take %d round.\n\n", simLookupRTTs)
		fmt.Fprintf(w, "The simulated side by nodesim's own, stricter measures (a node is served only when its superpeer claims the role in its cluster):")
		for _, r := range rows {
			fmt.Fprintf(w, " %s: coverage %.4f, failover median / max %s / %s T;", r.Scenario, r.SimCoverage, f2(r.SimFailoverMedianT), f2(r.SimFailoverMaxT))
		}
		fmt.Fprintf(w, "\n\n")
	})
}

func writeSelectionMarkdown(b *mdBlocks, rows []SelectionRow) {
	b.block("selection-about", func(w io.Writer) {
		fmt.Fprintf(w, `Both strategies in the simulator, against two baselines computed in the same run on the same network, capacity and number of superpeers: **random** (the mean of many uniformly random placements) and **offline** (k-median local search under 1,000 hosts, k-medoids above: a placement that knows every RTT). Each row's ratios are against the baselines with as many superpeers as it placed (*baseline superpeers*): S for a strategy that placed S, otherwise its own count, whose baselines are listed as extra rows (e.g. *random (16 superpeers)*), so that no strategy is flattered by placing more superpeers than the baselines. A strategy that placed fewer than S superpeers may leave peers without room at capacity C; its baselines then do too, with the same C, and the RTT figures cover the attached peers only. A strategy is judged twice: as it attaches its peers (**own**), and as a **placement** (its superpeers, every ordinary peer attached to the nearest one with room by true RTT, as the baselines are). Ratios below 1 beat the baseline. *Nearest* is the mean RTT from every peer to its nearest superpeer regardless of capacity; *pairs* is the distribution of RTTs between superpeers. The dht strategy knows no RTT and no capacity: for a target S it makes up to 2^⌈log₂ S⌉ clusters, and is judged against baselines with as many. Messages per peer are those a peer sends: dht counts its FIND_NODE queries; geometric its RTT probes for the coordinates (a ping and an answer per coordinate round: 2 × 1,000 at 490 hosts), the probes of its search on measured RTTs (2 messages each) and its token passes and hand-overs, and not the gossip of token positions, the members' reports or the superpeers' summaries. **geometric** is the coordinates and tokens followed by the search on measured RTTs (swaps of a superpeer's role inside its cluster, relocations of a token between clusters: geometric/swap.go); **geometric (coordinates)** is the coordinates and tokens alone.

`)
	})
	b.block("selection-table", func(w io.Writer) {
		header := []string{"network", "S", "C", "strategy", "superpeers", "own mean / p95 ms", "placement mean / p95 ms", "baseline superpeers", "placement ÷ random", "placement ÷ offline", "own ÷ offline", "nearest mean ms", "pairs p5 / median ms", "max cluster", "cluster CV", "rounds", "msgs/peer"}
		var out [][]string
		for _, r := range rows {
			out = append(out, []string{r.Network, d(r.TargetS), d(r.Capacity), r.Label(), d(r.Own.Superpeers),
				f1(r.Own.MeanMs) + " / " + f1(r.Own.P95Ms), f1(r.Placement.MeanMs) + " / " + f1(r.Placement.P95Ms),
				d(r.BaselineSuperpeers), f2(r.PlacementMeanOverRandom), f2(r.PlacementMeanOverOffline), f2(r.OwnMeanOverOffline),
				f1(r.Placement.NearestMeanMs), f1(r.Placement.Pairwise.P5Ms) + " / " + f1(r.Placement.Pairwise.MedianMs),
				d(r.Own.ClusterMax), f2(r.Own.ClusterCV), d(r.Rounds), f2(r.MessagesPerPeer)})
		}
		mdTable(w, header, out)
	})
}

func writeElectionMarkdown(b *mdBlocks, rows []ElectionRow) {
	b.block("election-about", func(w io.Writer) {
		fmt.Fprintf(w, "One election per algorithm and cluster size n in the simulator (the machines of package classic, RTT 100 ms between every pair), counted from its start until the live members agree on the expected leader (plus 1 s for stragglers); heartbeats are not counted. *Measured ÷ theory* compares with the textbook count for the same scenario; *start* says whether the election follows a leader crash or a cold start. Rows marked skipped were too slow to simulate here (their theoretical count is given).\n\n")
	})
	b.block("election-table", func(w io.Writer) {
		sizes := []int{}
		for _, r := range rows {
			if !slices.Contains(sizes, r.N) {
				sizes = append(sizes, r.N)
			}
		}
		slices.Sort(sizes)
		header := []string{"algorithm", "start", "formula"}
		for _, n := range sizes {
			header = append(header, "n = "+d(n))
		}
		header = append(header, "measured ÷ theory", "time to elect, smallest → largest n (ms)")
		var out [][]string
		for _, a := range algorithmsIn(rows) {
			cells := make([]string, len(sizes))
			lo, hi := 0.0, 0.0
			var first, last float64
			seen := false
			for _, r := range rows {
				if r.Algorithm != a {
					continue
				}
				i := slices.Index(sizes, r.N)
				if r.Skipped {
					cells[i] = "skipped (" + d(r.TheoryMessages) + ")"
					continue
				}
				cells[i] = d(r.Messages)
				if !seen {
					lo, hi, first, seen = r.Ratio, r.Ratio, r.TimeMs, true
				}
				lo, hi, last = min(lo, r.Ratio), max(hi, r.Ratio), r.TimeMs
			}
			var start, formula string
			for _, r := range rows {
				if r.Algorithm == a {
					start, formula = r.Start, r.Formula
					break
				}
			}
			ratio := fmt.Sprintf("%.3f", lo)
			if hi != lo {
				ratio = fmt.Sprintf("%.3f – %.3f", lo, hi)
			}
			row := append([]string{a, start, formula}, cells...)
			out = append(out, append(row, ratio, f0(first)+" → "+f0(last)))
		}
		mdTable(w, header, out)
	})
}

func writeRepairMarkdown(b *mdBlocks, rows []RepairRow) {
	if len(rows) == 0 {
		return
	}
	trials := 0
	var churn []ChurnStats
	for _, r := range rows {
		trials = max(trials, r.Failover.Trials)
		if len(churn) == 0 {
			churn = r.Churn
		}
	}
	b.block("repair-about", func(w io.Writer) {
		fmt.Fprintf(w, "Node machines (package overlay/node, the code the live node runs) in the node simulator (testnet/nodesim), one cluster of n nodes, RTT 100 ms, the live node's timing (election tick %.0f ms, heartbeat %.0f ms; T is the machines' failure-detection timeout, Detection()). The machines detect failures themselves: heartbeats, the lost connection to the leader, two timeouts without a leader; no detector is written for the benchmark. **Failover**: the superpeer crashes at a random moment; the time until every node that followed it is served again by a live superpeer of its cluster, over %d trials; unrepaired after 30 T. A follower that loses its connection to the superpeer looks the cluster key up again, and nodesim's lookup oracle answers only once the query to the dead node has timed out (T); while the election runs the lookup's answer names the superpeer, so the failover is about T for every algorithm whose election does not finish sooner (bully waits out its timeout for an answer from the dead node; echo, whose campaign needs no answer from it, repairs in 0.16 T). In process a dial to a dead mocknet peer fails at once, and the live failover is shorter (see the side-by-side table). **Churn**: members crash at random (a Poisson process at the rate given) and restart %s later with their identity and disk; *coverage* is the mean fraction of the joined live nodes served (nodesim Observer.Coverage), split brain the time two nodes claimed the cluster (Observer.SplitTime).\n\n",
			rows[0].TickMs, rows[0].HeartbeatMs, trials, time.Duration(DefaultChurnDowntime))
	})
	b.block("repair-table", func(w io.Writer) {
		inf := func(v float64, s string) string {
			if v < 0 {
				return "∞"
			}
			return s
		}
		var out [][]string
		for _, r := range rows {
			if r.Error != "" {
				out = append(out, []string{r.Algorithm, d(r.N), "–", "failed: " + r.Error, "", "", ""})
				continue
			}
			f := r.Failover
			out = append(out, []string{r.Algorithm, d(r.N), f0(r.TimeoutMs), d(f.Unrepaired),
				inf(f.MedianMs, f0(f.MedianMs)) + " / " + inf(f.P95Ms, f0(f.P95Ms)) + " / " + inf(f.MaxMs, f0(f.MaxMs)),
				inf(f.MedianTimeouts, f2(f.MedianTimeouts)) + " / " + inf(f.P95Timeouts, f2(f.P95Timeouts)) + " / " + inf(f.MaxTimeouts, f2(f.MaxTimeouts)),
				f0(f.MedianMessages)})
		}
		mdTable(w, []string{"algorithm", "n", "T ms", "unrepaired", "failover median / p95 / max ms", "median / p95 / max in T", "median messages"}, out)
		header := []string{"algorithm", "n"}
		for _, c := range churn {
			header = append(header, fmt.Sprintf("%.0f %%/min: coverage, max orphans, split brain ms, failover median / max T, msgs/member/s", 100*c.RatePerMin))
		}
		out = nil
		for _, r := range rows {
			if r.Error != "" {
				continue
			}
			row := []string{r.Algorithm, d(r.N)}
			for _, c := range r.Churn {
				row = append(row, fmt.Sprintf("%.4f, %d, %.0f, %s / %s, %.2f", c.Coverage, c.MaxOrphans, c.SplitBrainMs,
					noneOr(c.FailoverMedianTimeouts), noneOr(c.FailoverMaxTimeouts), c.MsgsPerMemberPerS))
			}
			out = append(out, row)
		}
		mdTable(w, header, out)
	})
}

func writeLiveRepairMarkdown(b *mdBlocks, rows []LiveRepairRow) {
	if len(rows) == 0 {
		return
	}
	b.block("live-repair-about", func(w io.Writer) {
		fmt.Fprintf(w, "Live testnet: %d real libp2p nodes in one process per algorithm (S = n/8), converged, then %d superpeers stopped one after another (`peer testnet --scenario kill-superpeer`). Failover is from a stop until every peer that named the dead superpeer names a live one; T is the nodes' failure-detection timeout; coverage the fraction of (peer, sample) pairs naming a live superpeer from the first kill on.\n\n",
			rows[0].N, rows[0].Kills)
	})
	b.block("live-repair-table", func(w io.Writer) {
		var out [][]string
		for _, r := range rows {
			if r.Error != "" {
				out = append(out, []string{r.Algorithm, d(r.N), "failed: " + r.Error, "", "", "", "", ""})
				continue
			}
			inT := "–"
			if r.DetectionTimeoutMs > 0 {
				inT = f2(r.FailoverMedianMs/r.DetectionTimeoutMs) + " / " + f2(r.FailoverMaxMs/r.DetectionTimeoutMs)
			}
			out = append(out, []string{r.Algorithm, d(r.N), f0(r.FailoverMedianMs) + " / " + f0(r.FailoverMaxMs), inT,
				d(r.Orphans), f0(r.SplitBrainMs), fmt.Sprintf("%.4f", r.Coverage), fmt.Sprint(r.ElectionMessages)})
		}
		mdTable(w, []string{"algorithm", "n", "failover median / max ms", "median / max in T", "orphans", "split brain ms", "coverage", "election messages"}, out)
	})
}

// writeTrafficGrowth states how an ordinary peer's traffic grows with n,
// from the converged rows: its mean bytes per second, with the exponent of
// n fitted by least squares on the logs, and a superpeer's per member.
func writeTrafficGrowth(w io.Writer, rows []LiveScaleRow) {
	var ns, ords []float64
	for _, x := range rows {
		if x.Converged && x.Ordinary > 0 {
			ns, ords = append(ns, float64(x.N)), append(ords, x.Ordinary)
		}
	}
	if len(ns) < 2 {
		return
	}
	e, ok := logSlope(ns, ords)
	if !ok {
		return
	}
	fmt.Fprintf(w, "How the overhead grows: an ordinary peer's traffic (sent plus received) went from %s B/s at n = %s to %s B/s at n = %s, about n^%.2f (fitted on the logs over the converged sizes).",
		f0(ords[0]), f0(ns[0]), f0(ords[len(ords)-1]), f0(ns[len(ns)-1]), e)
	var ps []float64
	for _, x := range rows {
		if x.Converged && x.Ordinary > 0 && x.SuperpeerPerMember > 0 {
			ps = append(ps, x.SuperpeerPerMember)
		}
	}
	if len(ps) == len(ns) {
		if es, ok := logSlope(ns, ps); ok {
			fmt.Fprintf(w, " A superpeer's per member served went from %s to %s B/s, about n^%.2f.", f0(ps[0]), f0(ps[len(ps)-1]), es)
		}
	}
	fmt.Fprint(w, "\n\n")
}

// logSlope fits log y = a + b log x by least squares and returns b; ok is
// false when the xs do not vary.
func logSlope(xs, ys []float64) (b float64, ok bool) {
	var sx, sy, sxx, sxy float64
	for i := range xs {
		lx, ly := math.Log(xs[i]), math.Log(ys[i])
		sx, sy, sxx, sxy = sx+lx, sy+ly, sxx+lx*lx, sxy+lx*ly
	}
	n := float64(len(xs))
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, false
	}
	return (n*sxy - sx*sy) / den, true
}

// writeGeoLiveMarkdown writes the rows of TestGeoLiveVirtual.
func writeGeoLiveMarkdown(b *mdBlocks, rows []GeoLiveRow) {
	if len(rows) == 0 {
		return
	}
	r0 := rows[0]
	b.block("geolive-about", func(w io.Writer) {
		fmt.Fprintf(w, "**Geometric placement, live and simulated, on the same hosts** (`go test ./bench -run TestGeoLiveVirtual`, which make bench runs first). %d nodes on the first %d PlanetLab hosts, S = %d, for %.0f s of virtual time: a live in-process testnet (mocknet, kad-dht, GossipSub, the overlay's shell) in a testing/synctest bubble, whose timers and link delays follow a virtual clock, so that the RTTs the nodes measure are the matrix's whatever this machine's load; and the same node machines in the node simulator, with the same settings (the overlay's defaults: announce every 5 s, pings and token rounds every second). *Mean* is the matrix RTT from the ordinary nodes to the superpeer each names at the end; *ideal* the same superpeers with every ordinary node attached to the nearest with room; random (the mean of 100 placements) and the offline k-median are computed in the same run on the same hosts. *Coord. error* is the median relative error of the RTTs predicted by the nodes' coordinates, over all pairs. *Settled at* is when the superpeers and every node's superpeer last changed, *superpeers last changed at* when the set of superpeers did; *at %.0f s* the mean RTT to the superpeer and the coordinates' error that long after the last node's start (issue 21 asks a network of 100 to settle within a minute); *swaps* counts the hand-overs of the search on measured RTTs. The simulator's side runs at further seeds too: one run is one draw, and its *least–most* row shows how far draws fall apart.\n\n",
			r0.N, r0.N, r0.S, r0.DurationS, GeoLiveEarly.Seconds())
	})
	b.block("geolive-table", func(w io.Writer) {
		_ = WriteGeoLiveTable(w, rows)
		fmt.Fprintln(w)
	})
}
