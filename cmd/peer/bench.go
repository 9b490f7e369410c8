package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/superpeer/superpeer/bench"
)

func newBenchCmd() *cobra.Command {
	var (
		suite     string
		simOnly   bool
		liveOnly  bool
		out       string
		report    string
		simlive   string
		geolive   string
		asJSON    bool
		seed      uint64
		quick     bool
		cpuProf   string
		noPlots   bool
		showProgr bool
		liveSizes []int
		latFile   string
		latUnit   string
		supers    []int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure superpeer placement, elections, repair and scale against baselines measured in the same run",
		Long: `Run the benchmark suites and report every figure next to a baseline
measured in the same run:

  selection  both strategies on the PlanetLab matrix (490 hosts) and a
             synthetic network of 10,000 hosts: superpeers, cluster sizes,
             RTT to the superpeer and spread, against random placement and
             an offline placement that knows every RTT
  election   messages and time to elect, per algorithm, n = 8 … 4,096,
             against the textbook message count
  repair     failover time and coverage under superpeer crashes and churn,
             per algorithm, on node machines in the node simulator; live
             testnets, and one scenario on both side by side
  scale      time, memory and messages per peer as n grows: the selection
             simulators up to 100,000 peers, node machines up to 10,000
             (convergence, churn with bully, and the network doubling and
             halving: clusters split and merge), the live testnet up to
             512 nodes with a real node's intervals (--live-sizes)
  attack     lying peers (false coordinates, ground IDs), f = 1, 5, 20 %:
             the superpeer roles they take and the latency damage, without
             and with the defences (simulator); live, hostile clients
             (testnet/attack) against 4 node processes: the victim's CPU,
             memory and goroutines, roles held, honest peers banned

--sim runs only the simulator's parts, --live only the live testnet's;
the default runs both. Tables go to standard output (one JSON document with
--json); results.json and PNG plots go to --out; --report writes a
Markdown report (make bench writes BENCHMARKS.md). Every part of the report
is a block between marker lines (<!-- generated: NAME --> and
<!-- end generated: NAME -->); into an existing report --report puts only
the blocks this run made, in place of the old ones, and keeps the text
between the blocks, written by hand, and the blocks this run did not make.
It refuses an existing file without markers, all of which would be
hand-written text.

With --latency FILE (an RTT matrix, as peer testnet reads it) the selection
suite runs on that network instead, for --superpeers values of S (default
about 2, 5 and 10 % of its hosts); it implies --suite selection --sim.`,
		Example: `  peer bench --suite election --sim
  peer bench --latency king.txt --superpeers 20,50
  peer bench --suite all --out docs/bench --report BENCHMARKS.md
  peer bench --suite scale --live --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if simOnly && liveOnly {
				return fmt.Errorf("give --sim or --live, not both (neither runs both halves)")
			}
			suites, err := parseSuites(suite)
			if err != nil {
				return err
			}
			fs := cmd.Flags()
			m, err := loadLatency(fs, latFile, latUnit)
			if err != nil {
				return err
			}
			var nw *bench.Network
			switch {
			case m != nil:
				if fs.Changed("suite") && (len(suites) != 1 || suites[0] != bench.SuiteSelection) || liveOnly {
					return fmt.Errorf("--latency: for the selection suite's simulator half only (--suite selection --sim)")
				}
				for _, f := range []string{"geolive", "simlive", "live-sizes", "quick"} {
					if fs.Changed(f) {
						return fmt.Errorf("--%s: not with --latency, which runs the selection suite on that network alone", f)
					}
				}
				suites, simOnly = []string{bench.SuiteSelection}, true
				if nw, err = bench.FromMatrix(filepath.Base(latFile), m); err != nil {
					return fmt.Errorf("--latency: %w", err)
				}
				for _, s := range supers {
					if s < 1 || s > nw.N() {
						return fmt.Errorf("--superpeers %d: want 1 to %d, the hosts of %s", s, nw.N(), latFile)
					}
				}
			case len(supers) > 0:
				return fmt.Errorf("--superpeers: for a --latency network only")
			}
			if out == "" {
				return fmt.Errorf("--out: want a folder for results.json and the plots")
			}
			if report != "" { // before the run, which may take an hour
				if err := checkReport(report); err != nil {
					return err
				}
			}
			if _, err := readResults(out); err != nil {
				return err
			}
			if m != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), latencyNote(latFile, m))
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			stop, err := manyNodes(cpuProf) // live testnets of up to 1,024 nodes
			if err != nil {
				return err
			}
			defer stop()
			exe, err := os.Executable() // the attack suite's nodes are processes of this command
			if err != nil {
				return err
			}
			var virtual []bench.SimLiveRow
			if simlive != "" {
				b, err := os.ReadFile(simlive)
				if err == nil {
					err = json.Unmarshal(b, &virtual)
				}
				if err != nil {
					return fmt.Errorf("--simlive: %w", err)
				}
			}
			var geoVirtual []bench.GeoLiveRow
			if geolive != "" {
				b, err := os.ReadFile(geolive)
				if err == nil {
					err = json.Unmarshal(b, &geoVirtual)
				}
				if err != nil {
					return fmt.Errorf("--geolive: %w", err)
				}
			}
			prog := newProgress(cmd.ErrOrStderr(), showProgr && !asJSON)
			res, runErr := bench.Run(cmd.Context(), bench.Config{
				Suites: suites, Sim: !liveOnly, Live: !simOnly, Seed: seed, Quick: quick, LiveSizes: liveSizes,
				Command: "peer " + strings.Join(os.Args[1:], " "), Progress: prog, Exec: exe,
				SimLiveVirtual: virtual, GeoLiveVirtual: geoVirtual, Network: nw, Superpeers: supers,
			})
			prog.finish()
			if res == nil {
				return runErr
			}
			if err := writeResults(out, res); err != nil {
				return err
			}
			var figs []bench.Figure
			if !noPlots {
				if figs, err = bench.DrawPlots(res, out); err != nil {
					return err
				}
			}
			if report != "" {
				if err := writeReport(report, res, figs, out); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else if err := bench.WriteTables(w, res); err != nil {
				return err
			}
			return runErr
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&suite, "suite", "all", "suites to run, comma-separated: "+strings.Join(bench.Suites(), ", ")+", or all")
	fs.BoolVar(&simOnly, "sim", false, "run only the simulator's parts")
	fs.BoolVar(&liveOnly, "live", false, "run only the live testnet's parts (real libp2p nodes in this process)")
	fs.StringVar(&out, "out", "bench-out", "folder for results.json (which keeps the figures of an earlier run there that this run does not make) and the PNG plots")
	fs.StringVar(&report, "report", "", "also write a Markdown report to this file, with the plots linked from --out; into an existing report, only its generated blocks are replaced and the text written by hand between them is kept")
	fs.StringVar(&geolive, "geolive", "", "rows of the selection suite's geometric placement live in virtual time and in the node simulator, as `go test ./bench -run TestGeoLiveVirtual -args -geolive.out FILE` writes them (make bench does): added to the results and the report")
	fs.StringVar(&simlive, "simlive", "", "rows of the repair suite's simulated-and-live side by side whose live side ran in virtual time, as `go test ./bench -run TestSimLiveVirtual -args -simlive.out FILE` writes them (make bench does): added to the results and the report")
	fs.BoolVar(&asJSON, "json", false, "print one JSON document instead of tables")
	fs.Uint64Var(&seed, "seed", 1, "seed of every random choice (peer keys, networks, faults)")
	fs.IntSliceVar(&liveSizes, "live-sizes", nil, "the scale suite's live testnet sizes, comma-separated (default 32,64,128,256,512; at most 1024)")
	fs.BoolVar(&quick, "quick", false, "small sizes only (seconds, not minutes): a smoke test of the suites, not a measurement")
	fs.BoolVar(&noPlots, "no-plots", false, "skip the PNG plots")
	fs.BoolVar(&showProgr, "progress", true, "show progress on standard error")
	fs.StringVar(&cpuProf, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	fs.StringVar(&latFile, "latency", "", `run the selection suite on this RTT matrix instead of PlanetLab and the synthetic network (as peer testnet reads it: tab- or space-separated, in milliseconds unless a header line "# unit: s" (or us) before the first row or --latency-unit says otherwise)`)
	fs.StringVar(&latUnit, "latency-unit", "ms", `unit of the --latency file's values: s, ms or us (default: what a "# unit: s" header line in the file says, else ms)`)
	fs.IntSliceVar(&supers, "superpeers", nil, "the values of S on the --latency network, comma-separated (default about 2, 5 and 10 % of its hosts)")
	return cmd
}

// parseSuites reads --suite.
func parseSuites(s string) ([]string, error) {
	if s == "all" {
		return bench.Suites(), nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(bench.Suites(), name) {
			return nil, fmt.Errorf("--suite %q: unknown suite %q; use %s, or all", s, name, strings.Join(bench.Suites(), ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// errUnmarkedReport is the error of a --report file that exists but has
// no generated blocks.
var errUnmarkedReport = errors.New("has no generated blocks")

// readReport reads an existing --report file and checks its markers: it
// returns nil and no error for a file that does not exist.
func readReport(path string) ([]byte, error) {
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("--report: %w", err)
	}
	names, err := bench.GeneratedBlocks(old)
	if err != nil {
		return nil, fmt.Errorf("--report %s: %w; fix the marker on that line (the file is left as it is)", path, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("--report %s: the file %w (no line <!-- generated: NAME --> … <!-- end generated: NAME -->), so all of it would be text written by hand, and writing the report would overwrite it; "+
			"delete the file (or give another) to write a fresh report, or mark the parts that the report generates first (the file is left as it is)", path, errUnmarkedReport)
	}
	return old, nil
}

// readResults reads the results.json that an earlier run left in dir:
// nil when there is none; an error when it is not one, which would
// otherwise be overwritten.
func readResults(dir string) (*bench.Results, error) {
	path := filepath.Join(dir, "results.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	var old bench.Results
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, fmt.Errorf("--out: %s is not a peer bench results file (%v): move it away or choose another --out, rather than lose it", path, err)
	}
	return &old, nil
}

// writeResults writes res to dir's results.json, with the figures of the
// results.json an earlier run left there that this run did not make (a
// run of some suites, or of one half: bench.Results.WithEarlier), so that
// the folder's file keeps every figure its report shows. The file is
// replaced at once.
func writeResults(dir string, res *bench.Results) error {
	old, err := readResults(dir) // read again: it may have changed during the run
	if err != nil {
		return err
	}
	if old != nil {
		res = res.WithEarlier(old)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, "results.json"), append(b, '\n'))
}

// checkReport checks, before a run, that --report can be written: the file
// does not exist, or has well-formed generated blocks.
func checkReport(path string) error {
	_, err := readReport(path)
	return err
}

// writeReport writes the Markdown report to path, with the figures in dir
// linked relative to the report. If path exists, the new report's blocks
// are merged into it (bench.MergeMarkdown): the text written by hand
// between its generated blocks, and the blocks this run did not make,
// stay. The file is replaced at once (a temporary file in its folder,
// renamed), and left as it is on any error.
func writeReport(path string, res *bench.Results, figs []bench.Figure, dir string) error {
	rel, err := filepath.Rel(filepath.Dir(path), dir)
	if err != nil {
		rel = dir
	}
	var gen bytes.Buffer
	if err := bench.WriteMarkdown(&gen, res, figs, filepath.ToSlash(rel)); err != nil {
		return err
	}
	old, err := readReport(path) // read again: it may have been edited during the run
	if err != nil {
		return err
	}
	out := gen.Bytes()
	if old != nil {
		if out, err = bench.MergeMarkdown(old, out); err != nil {
			return fmt.Errorf("--report %s: %w (the file is left as it is)", path, err)
		}
	}
	return writeFileAtomic(path, out)
}

// writeFileAtomic writes b to path through a temporary file in the same
// folder renamed over it, so that path holds either its old content or
// all of b. A new file gets mode 0644, an existing one keeps its mode.
func writeFileAtomic(path string, b []byte) (err error) {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
			err = fmt.Errorf("--report: %w", err)
		}
	}()
	if _, err = f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Chmod(mode); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// progress shows the run's steps: a bar on a terminal, one line per step
// otherwise (make bench piped to a file), nothing when off.
type progress struct {
	w   io.Writer
	on  bool
	bar *progressbar.ProgressBar
}

func newProgress(w io.Writer, on bool) *progress {
	p := &progress{w: w, on: on}
	if on && onTerminal(w) {
		p.bar = progressbar.NewOptions(1, progressbar.OptionSetWriter(w), progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true), progressbar.OptionSetPredictTime(false),
			progressbar.OptionFullWidth(), progressbar.OptionClearOnFinish())
	}
	return p
}

// Start is told the number of steps.
func (p *progress) Start(total int) {
	if p.bar != nil {
		p.bar.ChangeMax(total)
	}
}

// Step is told each step as it begins.
func (p *progress) Step(i int, desc string) {
	switch {
	case p.bar != nil:
		p.bar.Describe(desc)
		_ = p.bar.Set(i)
	case p.on:
		fmt.Fprintf(p.w, "bench: step %d: %s\n", i+1, desc)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
