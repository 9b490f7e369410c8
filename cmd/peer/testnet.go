package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/superpeer/superpeer/bench"
	"github.com/superpeer/superpeer/testnet"
	"github.com/superpeer/superpeer/testnet/latency"
)

func newTestnetCmd() *cobra.Command {
	var (
		n        int
		strategy string
		seed     uint64
		timeout  time.Duration
		asJSON   bool
		latFile  string
		latUnit  string
		ef       electionFlags
		scenario string
		kills    int
		graceful bool
		rate     float64
		duration time.Duration
		cpuProf  string
		memProf  string
		procs    bool
		quiet    bool
		httpAddr string
		tf       targetFlags
		lf       logFlags
	)
	cmd := &cobra.Command{
		Use:   "testnet",
		Short: "Start N real libp2p nodes, in this process or one process each, and show the clusters they form",
		Long: `Start N overlay nodes (real libp2p hosts, kad-dht and GossipSub) on an
in-process network, wait until every node's view agrees with the answer
computed from the peer IDs alone, and print the clusters. Peer keys derive
from --seed, so a run can be recomputed. Exits 0 only when the overlay
converged before --timeout (2 when it did not, 1 on bad input).

With --procs every node is its own OS process on loopback TCP and QUIC,
driven by this one: a crash is SIGKILL, a cut is each node's connection
gater refusing the other side.

With --latency FILE (a matrix of RTTs, such as the PlanetLab data), node i
gets row i and every link delays by half the pair's RTT each way; the report
then gives each node's RTT to its superpeer. The values are in milliseconds
unless a header line of the file says "# unit: s" (or us), or --latency-unit
does; a matrix whose median RTT is under 1 ms or over 10 s in its unit is
refused as written in another unit, but for RTTs under 1 ms written in
microseconds in a file whose header says "# unit: us" (one data
centre; in process, scheduling delay of that size blurs them).

While it runs, a line on standard error shows the progress (the step, the
peers converged, the time elapsed) when standard error is a terminal and
--quiet is not given.

With --http ADDR it serves a page of the whole overlay on ADDR while it runs
(scenarios included): every cluster, coloured by state (stable, electing,
no superpeer, over capacity), and what changed in the last minutes. It
prints the page's address on standard error, and after the report keeps the
testnet running and the page up until interrupted (Ctrl-C, which then exits
with the run's status).`,
		Example: `  peer testnet -n 32 --superpeers 4
  peer testnet -n 64 --superpeers 8 --json
  peer testnet -n 32 --superpeers 4 --election bully --http 127.0.0.1:8080 --scenario kill-superpeer
  peer testnet -n 100 --superpeers 10 --latency testdata/planetlab490/planetlab490_median18_ms.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case timeout < 0:
				return fmt.Errorf("--timeout %v: want a positive duration", timeout)
			case timeout == 0 && strategy == testnet.StrategyGeometric:
				timeout = 10 * time.Minute // tokens settle in minutes: see README
			case timeout == 0 && procs:
				// Real transports (Noise, TLS, QUIC) and one Go runtime per
				// node: 64 processes took 81 s to converge on two cores.
				timeout = 5 * time.Minute
			case timeout == 0:
				timeout = 2 * time.Minute
			}
			if scenario != "" && !cmd.Flags().Changed("timeout") {
				// The faults' own time, and as long again to converge.
				timeout += 2 * max(duration, testnet.DefaultDuration(scenario))
			}
			if scenario != "" && !slices.Contains(testnet.Scenarios(), scenario) {
				return fmt.Errorf("--scenario %q: use one of %s", scenario, strings.Join(testnet.Scenarios(), ", "))
			}
			switch {
			case kills < 1:
				return fmt.Errorf("--kills %d: want at least 1", kills)
			case !(rate > 0 && rate <= 1):
				return fmt.Errorf("--rate %v: want a fraction of the peers per minute, above 0 and at most 1", rate)
			case duration < 0:
				return fmt.Errorf("--duration %v: want a positive duration", duration)
			case graceful && scenario != testnet.ScenarioKillSuperpeer:
				return fmt.Errorf("--graceful: for --scenario %s only", testnet.ScenarioKillSuperpeer)
			}
			target, err := tf.target(cmd.Flags())
			if err != nil {
				return err
			}
			prog := newTestnetProgress(cmd.ErrOrStderr(), !quiet)
			defer prog.finish()
			log, err := lf.loggerTo(prog.above(os.Stderr))
			if err != nil {
				return err
			}
			lat, err := loadLatency(cmd.Flags(), latFile, latUnit)
			if err != nil {
				return err
			}
			memFile, err := createProfile(memProf)
			if err != nil {
				return err
			}
			stop, err := manyNodes(cpuProf)
			if err != nil {
				return err
			}
			defer stop()
			web, err := listenOverview(httpAddr)
			if err != nil {
				return err
			}
			defer web.close()
			var exe string
			if procs {
				if lat != nil {
					return fmt.Errorf("--latency needs the in-process network: node processes (--procs) talk over loopback, which has no per-pair delays")
				}
				if exe, err = os.Executable(); err != nil {
					return fmt.Errorf("--procs: cannot find this program to start node processes: %w", err)
				}
			}
			if lat != nil {
				fmt.Fprintln(prog.above(os.Stderr), latencyNote(latFile, lat))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			cfg := testnet.Config{N: n, Strategy: strategy, Target: target, Seed: seed, Latency: lat, Logger: log,
				Election: ef.name, Quorum: ef.quorum, IgnoreFlaps: ef.ignoreFlaps, Exec: exe}
			if prog != nil {
				cfg.Progress = prog.show
			}
			tn, err := testnet.Start(ctx, cfg)
			if err != nil {
				return err
			}
			defer tn.Close()
			if web != nil {
				web.serve(tn.Overview)
				fmt.Fprintf(prog.above(cmd.ErrOrStderr()), "overlay page: %s\n", web.url())
			}
			d, waitErr := tn.WaitConverged(ctx, tn.Started())
			var sr *testnet.ScenarioReport
			if scenario != "" && waitErr == nil {
				rep, err := tn.RunScenario(ctx, testnet.ScenarioConfig{Name: scenario, Kills: kills, Seed: seed, Graceful: graceful,
					Rate: rate, Duration: duration})
				sr, waitErr = &rep, err
			}
			prog.finish()
			if memFile != nil { // while the nodes run
				if err := writeHeapProfile(memFile); err != nil {
					return err
				}
			}
			r := tn.Report()
			r.Converged, r.ConvergeMS, r.Scenario = waitErr == nil, d.Milliseconds(), sr
			if lat != nil && r.MeanRTTToSuperpeerMS != nil && scenario == "" { // stopped nodes keep their rows
				if r.Baseline, err = baseline(r, lat, seed); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else if err := r.WriteTable(out); err != nil {
				return err
			}
			interrupted := cmd.Context().Err()
			if web != nil && interrupted == nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "overlay page: %s (the testnet runs on; Ctrl-C to stop)\n", web.url())
				<-cmd.Context().Done()
			}
			if waitErr != nil {
				if interrupted != nil {
					return interrupted
				}
				return fmt.Errorf("%w (%v): %v", errNotConverged, timeout, waitErr)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVarP(&n, "nodes", "n", 32, "number of nodes")
	fs.StringVar(&strategy, "strategy", testnet.StrategyDHT, "superpeer selection strategy: dht or geometric (geometric needs --superpeers)")
	fs.Uint64Var(&seed, "seed", 1, "seed of the peer keys")
	fs.DurationVar(&timeout, "timeout", 0, "give up when not converged after this long (default 2m, 5m with --procs, 10m with --strategy geometric, plus twice a scenario's --duration)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON document instead of a table")
	fs.StringVar(&latFile, "latency", "", "RTT matrix file (tab- or space-separated, in milliseconds or --latency-unit); node i gets row i")
	fs.StringVar(&latUnit, "latency-unit", "ms", `unit of the --latency file's values: s, ms or us (default: what a "# unit: s" header line in the file says, else ms)`)
	ef.register(fs)
	fs.StringVar(&scenario, "scenario", "", "after converging, run a fault scenario and report what it measured: "+strings.Join(testnet.Scenarios(), ", "))
	fs.IntVar(&kills, "kills", 1, "kill-superpeer: how many superpeers to stop, one after another")
	fs.BoolVar(&graceful, "graceful", false, "kill-superpeer: shut the superpeers down cleanly (SIGTERM with --procs; the node says goodbye) rather than crash them (SIGKILL)")
	fs.Float64Var(&rate, "rate", 0.1, "churn: the fraction of the peers replaced per minute")
	fs.DurationVar(&duration, "duration", 0, "how long churn replaces peers (default 2m), a partition lasts (30s), or flap goes on (1m)")
	fs.BoolVar(&procs, "procs", false, "run every node as its own OS process ('peer run') on loopback TCP and QUIC; stop crashes it with SIGKILL")
	fs.StringVar(&cpuProf, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof reads it)")
	fs.StringVar(&memProf, "memprofile", "", "write a heap profile to this file once the testnet has converged (or timed out), while its nodes run (go tool pprof reads it)")
	fs.StringVar(&httpAddr, "http", "", "serve a page of the whole overlay on this address (host:port) while the testnet runs, and after the report until interrupted")
	fs.BoolVarP(&quiet, "quiet", "q", false, "no progress line on standard error (there is none when standard error is not a terminal)")
	tf.register(fs, 0.125)
	lf.register(fs, "error")
	return cmd
}

// loadLatency reads the --latency matrix, in --latency-unit when the flag is
// set and otherwise in the unit its header names (or milliseconds). It
// returns nil without --latency. The command shows latencyNote once its
// flags are checked.
func loadLatency(fs *pflag.FlagSet, file, unit string) (*latency.Matrix, error) {
	var u latency.Unit // the file's header, or ms
	if fs.Changed("latency-unit") {
		var err error
		if u, err = latency.ParseUnit(unit); err != nil {
			return nil, fmt.Errorf("--latency-unit: %w", err)
		}
		if file == "" {
			return nil, fmt.Errorf("--latency-unit %s: for a --latency file only", unit)
		}
	}
	if file == "" {
		return nil, nil
	}
	m, err := latency.LoadIn(file, u)
	if err != nil {
		return nil, fmt.Errorf("--latency: %w", err)
	}
	return m, nil
}

// latencyNote says what was read from a --latency file: its size, the unit
// its values were read in and where that came from, and its median RTT. A
// file in another unit may still look like RTTs (microseconds of a data
// centre read as milliseconds), so the user sees what was taken.
func latencyNote(file string, m *latency.Matrix) string {
	u, from := m.Unit()
	var why string
	switch from {
	case latency.UnitHeader:
		why = "its header says so"
	case latency.UnitCaller:
		why = "--latency-unit"
	default:
		why = "the default: no \"# unit:\" header"
	}
	st := m.Stats()
	return fmt.Sprintf("latency: %s: %d hosts, values read in %v (%s), median RTT %v, %d of %d pairs missing",
		file, st.N, u, why, st.Median, st.Missing, st.Pairs)
}

// manyNodes readies this process to run many nodes: it trades memory
// (plentiful) for less GC work (a quarter of the CPU at 64 nodes
// otherwise), within a soft limit of three quarters of the machine's memory
// (manyNodesMemLimit), and profiles the CPU into cpuProf, if given, until
// stop.
func manyNodes(cpuProf string) (stop func(), err error) {
	debug.SetGCPercent(400)
	meminfo, _ := os.ReadFile("/proc/meminfo") // no limit where there is none
	if limit := manyNodesMemLimit(os.Getenv("GOMEMLIMIT"), meminfo); limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	if cpuProf == "" {
		return func() {}, nil
	}
	return startCPUProfile(cpuProf)
}

// manyNodesMemLimit is the soft memory limit for a process of many nodes:
// three quarters of the machine's memory (MemTotal in meminfo, the text of
// /proc/meminfo), so that GOGC=400, which lets the process hold about five
// times its live heap, makes the collector work harder near the machine's
// end instead of running into it (1,024 nodes went past 24 GiB without a
// limit). 0, no limit, when the user set GOMEMLIMIT or meminfo does not say.
func manyNodesMemLimit(gomemlimit string, meminfo []byte) int64 {
	if gomemlimit != "" {
		return 0
	}
	for line := range strings.Lines(string(meminfo)) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb <= 0 {
				return 0
			}
			return kb << 10 / 4 * 3
		}
	}
	return 0
}

// createProfile creates the --memprofile file before the run, so that a
// bad path fails at once (nil, nil for none).
func createProfile(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--memprofile: %w", err)
	}
	return f, nil
}

// writeHeapProfile writes the heap profile (go tool pprof reads it) of the
// running process to f and closes it, after a collection so that the
// in-use figures are current.
func writeHeapProfile(f *os.File) error {
	runtime.GC()
	err := pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}

// startCPUProfile profiles the process's CPU into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// baseline judges the run's superpeers against random and k-median
// placements on the same rows of the matrix (bench.Baseline).
func baseline(r testnet.Report, lat *latency.Matrix, seed uint64) (*testnet.PlacementBaseline, error) {
	var sps []int
	n := 0
	for _, nd := range r.Nodes {
		n = max(n, nd.Index+1)
		if nd.Role == "superpeer" {
			sps = append(sps, nd.Index)
		}
	}
	if len(sps) == 0 {
		return nil, nil
	}
	full, err := lat.FillMissingAmong(n) // the rows of the nodes alone: cheap on a large matrix
	if err != nil {
		return nil, err
	}
	placed, random, km, err := bench.Baseline(full, n, sps, 0, seed)
	if err != nil {
		return nil, err
	}
	mean := *r.MeanRTTToSuperpeerMS
	return &testnet.PlacementBaseline{
		IdealMeanMS: placed.Mean, IdealP95MS: placed.P95, RandomMeanMS: random.Mean, RandomP95MS: random.P95,
		KMedianMeanMS: km.Mean, KMedianP95MS: km.P95, VsRandom: mean / random.Mean, VsKMedian: mean / km.Mean,
	}, nil
}
