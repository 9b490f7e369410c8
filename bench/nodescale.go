package bench

import (
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/internal/cputime"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/nodesim"
)

// Node machines at scale: N instances of the node machine (overlay/node,
// the type the live node runs) in the node simulator (testnet/nodesim),
// in virtual time, on this one process. Two scenarios:
//
//   - converge: DHT mode without an election (Target: a fraction 0.1 of
//     the estimated size), the nodes starting over Stagger; the time until
//     nodesim.Converged holds (every live node has a role and is covered,
//     the nodes agree on k, and each names the live node closest to its
//     cluster key, as dhtselect.Assign would), checked every second of
//     virtual time.
//   - churn: the same with an election (bully), converged first, then a
//     fraction Rate of the nodes replaced per minute for Duration
//     (nodesim.Churn: a live node drawn at random crashes, a new one joins
//     at once) under an Observer sampling every 100 ms: coverage (the mean
//     fraction of the joined nodes served), the most orphans in a sample,
//     the failovers of the crashed superpeers in units of the machines'
//     failure-detection timeout T (the failovers still pending 30 T after
//     the churn are unrepaired), split brain (Observer.SplitTime, and the
//     sum over samples of the clusters with two claimers), and the longest
//     time a node's lookup and election named different superpeers.
//
// Membership is cluster-scoped (issue 20; nodesim's scoped.go): a member
// registers with its superpeer every announce interval and gets its
// roster and digest, and the superpeers hear each other's summaries on
// the backbone. The rows count what that costs: registrations per node,
// backbone deliveries and summaries per superpeer, per
// virtual second, and the size estimates' error at convergence and a
// membership TTL later. A node's view is its cluster, so the simulator
// pays no O(N) per view change; what grows with N is the backbone, which
// hands every superpeer every superpeer's summary (about N/10 of them).
// The machines derive what they need from it (the estimate, a cluster's
// claimers) once per backbone, which nodesim shares among a side's
// superpeers (node.NewBackbone). A node is ticked only when its machine
// or its driver needs it (nodesim's ticks when due; the decisions are
// those of a tick every 100 ms). The simulator's cost per node still
// grows with N, though slowly: to convergence 0.8 and 1.2 CPU ms a node
// at 1,000 and 10,000 nodes (1.5, 2.5 and 5.5 at 1,000, 10,000 and
// 100,000 when every node ticked every 100 ms), and through churn 25 and
// 62 CPU µs a node per virtual second (BENCHMARKS.md has the figures:
// CPU time as well as wall time, since the wall time depends on what
// else the machine runs). The scale suite runs 1,000, 10,000 and 100,000
// nodes to convergence, and 1,000 and 10,000 through churn (peer bench
// --suite scale --sim; churn at 100,000 would take hours of CPU time);
// go test runs 100 (TestNodeScale), and TestNodeScaleSizes the sizes
// asked for.

// NodeScaleConfig configures NodeScale. The zero value runs 1,000 and
// 10,000 nodes to convergence, and 1,000 nodes with bully through 10
// minutes of churn at 10 % per minute.
type NodeScaleConfig struct {
	// Converge are the sizes of the converge scenario. Nil means 1,000
	// and 10,000; empty (not nil) runs none.
	Converge []int
	// ChurnN is the size of the churn scenario: 0 means 1,000, -1 runs
	// none.
	ChurnN int
	// Election is the churn scenario's election. Empty means bully.
	Election string
	// Rate is the fraction of the nodes replaced per minute, Duration how
	// long. Zero means 10 % and 10 minutes.
	Rate     float64
	Duration time.Duration
	// Stagger spreads the nodes' starts. Zero means 10 s.
	Stagger time.Duration
	// Seed seeds the simulator.
	Seed uint64
}

// NodeScaleRow is one run of node machines.
type NodeScaleRow struct {
	// Scenario is "converge" or "churn".
	Scenario string `json:"scenario"`
	N        int    `json:"n"`
	// Election is the cluster election ("" for none), Fraction the
	// superpeer target as a fraction of the estimated size.
	Election string  `json:"election,omitempty"`
	Fraction float64 `json:"fraction"`
	StaggerS float64 `json:"stagger_s"`
	// Converged reports that nodesim.Converged held within 5 virtual
	// minutes, ConvergeS when (virtual seconds from the first start).
	Converged bool    `json:"converged"`
	ConvergeS float64 `json:"converge_s"`
	// VirtualS is the virtual time simulated in all, WallS the wall time
	// it took (building the network included).
	VirtualS float64 `json:"virtual_s"`
	WallS    float64 `json:"wall_s"`
	// CPUS is the CPU time the process used meanwhile (user and system,
	// the garbage collector's included; 0 where it cannot be read): on a
	// machine that other work shares, WallS depends on the load and CPUS
	// much less.
	CPUS float64 `json:"cpu_s"`
	// ConvergeCPUS is the part of CPUS until convergence (building the
	// network included), and ChurnCPUS (churn) the part over the churn
	// window: ChurnCPUS / ChurnS is what a virtual second of churn costs.
	ConvergeCPUS float64 `json:"converge_cpu_s"`
	ChurnCPUS    float64 `json:"churn_cpu_s,omitempty"`
	// PeakMemMB is the most memory the process held from the operating
	// system while the run went on (MemPeak: the runtime's mapped memory
	// less what it returned, that is runtime.MemStats Sys − HeapReleased,
	// sampled every 50 ms), LiveHeapMB the largest live heap.
	PeakMemMB  float64 `json:"peak_mem_mb"`
	LiveHeapMB float64 `json:"live_heap_mb"`
	// Superpeers counts the live claimers at the end.
	Superpeers int `json:"superpeers"`
	// Trace is the simulator's digest of every state change of the run
	// (nodesim.Sim.Trace): two runs with the same seed and sizes decide
	// alike exactly when their traces are equal, whatever the simulator's
	// speed.
	Trace uint64 `json:"trace"`
	// MessagesPerNodePerS, LookupsPerNodePerS and ViewsPerNodePerS are
	// the election messages sent, the cluster-key lookups asked for, and
	// the membership views delivered, per node (N) per virtual second,
	// over the measured span: from 0 to convergence (converge), the churn
	// window (churn).
	MessagesPerNodePerS float64 `json:"messages_per_node_per_s"`
	LookupsPerNodePerS  float64 `json:"lookups_per_node_per_s"`
	ViewsPerNodePerS    float64 `json:"views_per_node_per_s"`
	// What the cluster-scoped membership costs, over the same span:
	// RegistrationsPerNodePerS the registrations sent (each answered
	// with a roster, a digest or a refusal), per node;
	// BackbonePerSuperpeerPerS the backbone's deliveries to a
	// superpeer (each the list of every superpeer's summary, as the
	// machine takes it), SummaryChangesPerSuperpeerPerS the summaries in
	// them that were new or changed since the superpeer's last list
	// (what a backbone carrying each summary when it changes delivers:
	// nodesim Stats.SummaryChanges) and SummariesPerSuperpeerPerS all
	// the summaries they held, per superpeer (Superpeers at the end) per
	// virtual second.
	RegistrationsPerNodePerS       float64 `json:"registrations_per_node_per_s"`
	BackbonePerSuperpeerPerS       float64 `json:"backbone_per_superpeer_per_s"`
	SummaryChangesPerSuperpeerPerS float64 `json:"summary_changes_per_superpeer_per_s"`
	SummariesPerSuperpeerPerS      float64 `json:"summaries_per_superpeer_per_s"`
	// HubDialsPerS, HubFailedPerS and HubTrimsPerS are the dials of the
	// bootstrap peers (node 0, node 0's node 1), those that failed (the
	// peer down: churn may crash node 0), and the connections their
	// connection managers closed, in all per virtual second over the same
	// span: the load on the bootstrap peers, which every joiner dials.
	HubDialsPerS  float64 `json:"hub_dials_per_s"`
	HubFailedPerS float64 `json:"hub_failed_per_s"`
	HubTrimsPerS  float64 `json:"hub_trims_per_s"`
	// SizeErrMedian and SizeErrMax are the median and the largest
	// relative error of the nodes' network-size estimates at the end
	// (nodesim.Sim.SizeErrors: |estimate − live| / live, over the nodes
	// with a role): converge, at convergence; churn, after the repair
	// window. SettledErrMedian and SettledErrMax (converge) are the same
	// a membership TTL (three announce intervals) after convergence: a
	// node's estimate is that of its last evaluation, and the summaries
	// count registrations, which take an announce interval to come in.
	SizeErrMedian    float64 `json:"size_err_median"`
	SizeErrMax       float64 `json:"size_err_max"`
	SettledErrMedian float64 `json:"settled_err_median,omitempty"`
	SettledErrMax    float64 `json:"settled_err_max,omitempty"`

	// The churn scenario's figures (see the comment at the top of
	// nodescale.go).
	RatePerMin float64 `json:"rate_per_min,omitempty"`
	ChurnS     float64 `json:"churn_s,omitempty"`
	Crashes    int     `json:"crashes,omitempty"`
	TimeoutMs  float64 `json:"timeout_ms,omitempty"`
	Coverage   float64 `json:"coverage,omitempty"`
	MaxOrphans int     `json:"max_orphans,omitempty"`
	// Failovers counts the crashed superpeers' failovers measured;
	// FailoverMedianT and FailoverMaxT are in T (-1 with none).
	Failovers       int     `json:"failovers,omitempty"`
	FailoverMedianT float64 `json:"failover_median_t,omitempty"`
	FailoverMaxT    float64 `json:"failover_max_t,omitempty"`
	Unrepaired      int     `json:"unrepaired,omitempty"`
	// SplitBrainS is Observer.SplitTime over the window; SplitSamples the
	// sum of Sample.Split (clusters with two claimers) over its samples.
	SplitBrainS  float64 `json:"split_brain_s,omitempty"`
	SplitSamples int     `json:"split_samples,omitempty"`
	// DisagreeS is Observer.Disagree: the longest time a node's lookup
	// and election named different live superpeers.
	DisagreeS float64 `json:"disagree_s,omitempty"`
}

// Scenarios of NodeScaleRow.
const (
	NodeScaleConverge = "converge"
	NodeScaleChurn    = "churn"
)

const (
	nodeScaleFraction = 0.1
	nodeScaleLimit    = 5 * time.Minute
	nodeScaleSample   = 100 * time.Millisecond
	// nodeAnnounce is the machines' announce interval (nodesim's
	// default, the live node's).
	nodeAnnounce = 5 * time.Second
)

func (c *NodeScaleConfig) fill() error {
	if c.Converge == nil {
		c.Converge = []int{1000, 10000}
	}
	if c.ChurnN == 0 {
		c.ChurnN = 1000
	}
	if c.Election == "" {
		c.Election = "bully"
	}
	if c.Rate == 0 {
		c.Rate = 0.1
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Minute
	}
	if c.Stagger == 0 {
		c.Stagger = 10 * time.Second
	}
	for _, n := range c.Converge {
		if n < 1 {
			return fmt.Errorf("%w: node machines: size %d, want at least 1", ErrBench, n)
		}
	}
	switch {
	case c.ChurnN < -1 || c.ChurnN == 1:
		return fmt.Errorf("%w: node machines: churn size %d, want at least 2 (or -1 for none)", ErrBench, c.ChurnN)
	case c.Rate < 0 || c.Rate > 1 || c.Duration < 0 || c.Stagger < 0:
		return fmt.Errorf("%w: node machines: churn rate %v per minute for %v, stagger %v", ErrBench, c.Rate, c.Duration, c.Stagger)
	case !slices.Contains(classic.Algorithms(), c.Election):
		return fmt.Errorf("%w: node machines: election %q: use one of %v", ErrBench, c.Election, classic.Algorithms())
	}
	return nil
}

// NodeScale runs the converge scenario at each size, then the churn
// scenario (see the comment at the top of nodescale.go).
func NodeScale(cfg NodeScaleConfig) ([]NodeScaleRow, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	var rows []NodeScaleRow
	for _, n := range cfg.Converge {
		row, err := nodeConverge(cfg, n)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	if cfg.ChurnN > 0 {
		row, err := nodeChurn(cfg)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// nodeRun is what every scenario does: build the network, run it to
// convergence, and measure time and memory.
type nodeRun struct {
	s        *nodesim.Sim
	mem      *MemPeak
	start    time.Time
	cpu      time.Duration
	memLimit int64         // the soft memory limit before the run
	huge     chan struct{} // closed to stop the huge-page advice (hugePages)
}

// nodeScaleMemLimit is the soft memory limit (debug.SetMemoryLimit) of a
// run: peer bench sets GOGC=400 for its live testnets, which would let
// 100,000 node machines (a live heap of about 4 GB) hold some 20 GB;
// with the limit the collector works harder instead, past 12 GiB.
const nodeScaleMemLimit = 12 << 30

func startNodeRun(n int, election string, cfg NodeScaleConfig, row *NodeScaleRow) (*nodeRun, error) {
	r := &nodeRun{mem: StartMemPeak(), start: time.Now(), memLimit: debug.SetMemoryLimit(nodeScaleMemLimit), huge: hugePages()}
	r.cpu, _ = cputime.Self()
	s, err := nodesim.New(nodesim.Config{N: n, Seed: cfg.Seed, Stagger: cfg.Stagger,
		Node: node.Config{Target: dhtselect.Target{Fraction: nodeScaleFraction}, Election: election}})
	if err != nil {
		r.mem.Stop()
		close(r.huge)
		debug.SetMemoryLimit(r.memLimit)
		return nil, err
	}
	r.s = s
	*row = NodeScaleRow{N: n, Election: election, Fraction: nodeScaleFraction, StaggerS: cfg.Stagger.Seconds()}
	row.Converged = s.RunUntil((*nodesim.Sim).Converged, time.Second, nodeScaleLimit)
	row.ConvergeS = s.Now().Seconds()
	row.ConvergeCPUS = r.cpuSince()
	return r, nil
}

// hugePages advises huge pages for the heap (adviseHugePages) now and
// every second of wall time, as the heap grows, and merges its pages
// into huge ones every hugeCollapse, until the channel it returns is
// closed. The simulation does not see it.
func hugePages() chan struct{} {
	stop := make(chan struct{})
	adviseHugePages(false)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for k := 1; ; k++ {
			select {
			case <-stop:
				return
			case <-t.C:
				adviseHugePages(k%hugeCollapse == 0)
			}
		}
	}()
	return stop
}

// hugeCollapse is how many seconds apart hugePages merges the heap's
// pages: the heap grows fastest while the nodes join, in bursts between
// two advices that MADV_HUGEPAGE alone leaves in 4 KiB pages (at 100,000
// nodes it left 0.1 of 4.6 GB in huge pages).
const hugeCollapse = 15

// cpuSince is the CPU time the process used since the run started, in
// seconds (0 where it cannot be read).
func (r *nodeRun) cpuSince() float64 {
	if c, ok := cputime.Self(); ok {
		return (c - r.cpu).Seconds()
	}
	return 0
}

// finish fills in the time, memory and end state.
func (r *nodeRun) finish(row *NodeScaleRow) {
	row.VirtualS, row.WallS = r.s.Now().Seconds(), time.Since(r.start).Seconds()
	if c, ok := cputime.Self(); ok {
		row.CPUS = (c - r.cpu).Seconds()
	}
	peak := r.mem.Stop()
	close(r.huge)
	debug.SetMemoryLimit(r.memLimit)
	row.PeakMemMB, row.LiveHeapMB = float64(peak)/(1<<20), float64(r.mem.Live())/(1<<20)
	row.Superpeers = r.s.Take().Claimers
	row.Trace = r.s.Trace()
}

// sizeErrors returns the median and the largest of s's size-estimate
// errors (nodesim.Sim.SizeErrors).
func sizeErrors(s *nodesim.Sim) (median, worst float64) {
	e := s.SizeErrors()
	if len(e) == 0 {
		return 0, 0
	}
	return e[len(e)/2], e[len(e)-1]
}

// rates fills in the per-node rates from the counters between a and b
// over span.
func (row *NodeScaleRow) rates(a, b nodesim.Stats, span time.Duration) {
	if span <= 0 {
		return
	}
	per := float64(row.N) * span.Seconds()
	row.MessagesPerNodePerS = float64(b.Messages-a.Messages) / per
	row.LookupsPerNodePerS = float64(b.Lookups-a.Lookups) / per
	row.ViewsPerNodePerS = float64(b.Views-a.Views) / per
	row.RegistrationsPerNodePerS = float64(b.Registrations-a.Registrations) / per
	row.HubDialsPerS = float64(b.Dials-a.Dials) / span.Seconds()
	row.HubFailedPerS = float64(b.FailedDials-a.FailedDials) / span.Seconds()
	row.HubTrimsPerS = float64(b.Trims-a.Trims) / span.Seconds()
	if row.Superpeers > 0 {
		sp := float64(row.Superpeers) * span.Seconds()
		row.BackbonePerSuperpeerPerS = float64(b.Backbones-a.Backbones) / sp
		row.SummaryChangesPerSuperpeerPerS = float64(b.SummaryChanges-a.SummaryChanges) / sp
		row.SummariesPerSuperpeerPerS = float64(b.Summaries-a.Summaries) / sp
	}
}

func nodeConverge(cfg NodeScaleConfig, n int) (NodeScaleRow, error) {
	var row NodeScaleRow
	r, err := startNodeRun(n, "", cfg, &row)
	if err != nil {
		return row, err
	}
	row.Scenario = NodeScaleConverge
	at, st := r.s.Now(), r.s.Stats()
	row.SizeErrMedian, row.SizeErrMax = sizeErrors(r.s)
	if row.Converged {
		r.s.RunFor(3 * nodeAnnounce)
		row.SettledErrMedian, row.SettledErrMax = sizeErrors(r.s)
	}
	r.finish(&row)
	row.rates(nodesim.Stats{}, st, at)
	return row, nil
}

func nodeChurn(cfg NodeScaleConfig) (NodeScaleRow, error) {
	var row NodeScaleRow
	r, err := startNodeRun(cfg.ChurnN, cfg.Election, cfg, &row)
	if err != nil {
		return row, err
	}
	s := r.s
	row.Scenario, row.RatePerMin, row.ChurnS = NodeScaleChurn, cfg.Rate, cfg.Duration.Seconds()
	if !row.Converged {
		row.SizeErrMedian, row.SizeErrMax = sizeErrors(s)
		r.finish(&row)
		return row, nil
	}
	o := s.Observe(nodeScaleSample)
	t0, t1 := s.Now(), s.Now()+cfg.Duration
	a := s.Stats()
	n0 := s.N()
	s.Churn(cfg.Rate, cfg.Duration, o)
	var b nodesim.Stats
	c0 := r.cpuSince()
	s.At(t1, func(s *nodesim.Sim) { b, row.ChurnCPUS = s.Stats(), r.cpuSince()-c0 })
	s.Run(t1)
	t := detection(s)
	// The failovers of the last crashes: no crash after t1.
	s.RunFor(repairLimit * t)
	o.Finish()
	row.Crashes = s.N() - n0 // each crash is followed by one join
	row.Superpeers = s.Take().Claimers
	row.rates(a, b, cfg.Duration)
	row.TimeoutMs = durMs(t)
	row.Coverage, row.MaxOrphans = o.Coverage(t0, t1), o.MaxOrphans(t0, t1)
	row.Failovers, row.Unrepaired = len(o.Failovers), o.Unrepaired
	row.FailoverMedianT, row.FailoverMaxT = -1, -1
	if f := slices.Sorted(slices.Values(o.Failovers)); len(f) > 0 && t > 0 {
		row.FailoverMedianT, row.FailoverMaxT = float64(medianDur(f))/float64(t), float64(f[len(f)-1])/float64(t)
	}
	row.SplitBrainS = o.SplitTime(t0, t1).Seconds()
	for _, x := range o.Samples {
		if x.At >= t0 && x.At <= t1 {
			row.SplitSamples += x.Split
		}
	}
	row.DisagreeS = o.Disagree.Seconds()
	row.SizeErrMedian, row.SizeErrMax = sizeErrors(s)
	r.finish(&row)
	return row, nil
}

// WriteNodeScaleTable prints rows as a table.
func WriteNodeScaleTable(w io.Writer, rows []NodeScaleRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tn\telection\tconverged s\tvirtual s\twall s\tcpu s\tpeak MB\tlive heap MB\tmsgs/node/s\tlookups/node/s\tviews/node/s\tregs/node/s\thub dials (failed) / trims per s\tbackbone/sp/s\tchanged/sp/s\tsummaries/sp/s\tsize err median / max\tsettled\tcoverage\tmax orphans\tfailovers\tmedian / max T\tunrepaired\tsplit s\tsplit samples\tdisagree s\t")
	for _, r := range rows {
		conv := fmt.Sprintf("%.1f", r.ConvergeS)
		if !r.Converged {
			conv = "no"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%.2f\t%.3f\t%.2f\t%.3f\t%.1f (%.1f) / %.1f\t%.2f\t%.1f\t%.0f\t%.3f / %.3f\t%.3f / %.3f\t", r.Scenario, r.N, orNone(r.Election), conv,
			r.VirtualS, r.WallS, r.CPUS, r.PeakMemMB, r.LiveHeapMB, r.MessagesPerNodePerS, r.LookupsPerNodePerS, r.ViewsPerNodePerS,
			r.RegistrationsPerNodePerS, r.HubDialsPerS, r.HubFailedPerS, r.HubTrimsPerS, r.BackbonePerSuperpeerPerS, r.SummaryChangesPerSuperpeerPerS, r.SummariesPerSuperpeerPerS, r.SizeErrMedian, r.SizeErrMax, r.SettledErrMedian, r.SettledErrMax)
		if r.Scenario != NodeScaleChurn || !r.Converged {
			fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
			continue
		}
		fmt.Fprintf(tw, "%.4f\t%d\t%d\t%s / %s\t%d\t%.1f\t%d\t%.1f\t\n", r.Coverage, r.MaxOrphans, r.Failovers,
			noneOr(r.FailoverMedianT), noneOr(r.FailoverMaxT), r.Unrepaired, r.SplitBrainS, r.SplitSamples, r.DisagreeS)
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
