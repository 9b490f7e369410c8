package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/stats"
	"github.com/superpeer/superpeer/testnet"
	"github.com/superpeer/superpeer/testnet/latency"
	"github.com/superpeer/superpeer/testnet/nodesim"
)

// Geometric placement, live and simulated, on the same hosts: a live
// in-process testnet of N geometric nodes (mocknet, kad-dht, GossipSub,
// the overlay's shell) on the first N PlanetLab hosts, and the same node
// machines in the node simulator (testnet/nodesim), with the same
// settings: S tokens, the overlay's own defaults for a node (announce
// interval 5 s, pings and token rounds every second, which the testnet's
// defaults now are too), and the matrix's RTTs (no jitter). The live side runs inside InBubble: a testing/synctest bubble,
// in which mocknet's link delays and every timer follow the virtual
// clock, so that the RTTs the nodes measure are the matrix's whatever
// this machine's load (TestGeoLiveVirtual; synctest runs only in a test).
//
// Each side runs for Duration of virtual time from the start of the last
// node and is sampled every second. Figures: the mean matrix RTT from the
// ordinary nodes to the superpeer each names; the same superpeers with
// every ordinary node attached to the nearest with room (ideal); the mean
// of 100 random placements and the offline k-median on the same hosts
// (Baseline, computed in the run); the coordinates' median relative error
// over all pairs; and the settle time, when the superpeers and every
// node's superpeer last changed (the run is Settled when that was at
// least a minute before its end, and every node named a superpeer),
// with when the superpeers alone last changed, and the mean RTT and the
// coordinates' error at GeoLiveEarly (what a network that settled within
// it would have to show). The simulator's side runs again at SimSeeds − 1
// further seeds, for the spread of its figures.

// GeoLiveConfig configures GeoLive.
type GeoLiveConfig struct {
	// N nodes on the first N PlanetLab hosts (default 100), S tokens
	// (default 10).
	N, S int
	// Seed seeds the peer keys (live) and the simulator.
	Seed uint64
	// Duration is the virtual time each side runs. Default 5 minutes.
	Duration time.Duration
	// InBubble runs the live side (a function that returns when it is
	// done) in a testing/synctest bubble. Required.
	InBubble func(func())
	// Matrix is the RTT matrix; nil loads PlanetLab's.
	Matrix *latency.Matrix
	// Progress, when set, hears how the live side goes.
	Progress func(string)
	// Logger, when set, hears the live nodes' notes.
	Logger *slog.Logger
	// SimSeeds is how many seeds the simulator's side runs, Seed first
	// (default 8): one live run is one draw, and the simulator's spread
	// over seeds says how far one draw may fall from another.
	SimSeeds int
	// SimTokens, when set, is the token dynamics' configuration of the
	// simulator's side in place of nodesim's defaults (its Tokens is S):
	// TestGeoSimSweep measures other settings with it.
	SimTokens *geometric.Config
	// SimTrace, when set, sees the simulator's side every second of
	// virtual time: what each node names.
	SimTrace func(seed uint64, at time.Duration, m *latency.Matrix, superpeer []int)
	// Relocate turns on the relocation between clusters on both sides
	// (node.GeoConfig.Relocate).
	Relocate bool
}

// GeoLiveEarly is when GeoLive takes its early figures (GeoLiveSide's
// EarlyMs and EarlyCoordError): issue 21 asks a live geometric network of
// 100 nodes to settle within a minute.
const GeoLiveEarly = time.Minute

// GeoLiveSide is one side's figures.
type GeoLiveSide struct {
	MeanMs, IdealMs float64
	Superpeers      int
	// Empty counts the superpeers that no node names as its superpeer
	// but themselves.
	Empty      int
	Unattached int
	CoordError float64
	SettleS    float64
	Settled    bool
	// RolesS is when the set of superpeers last changed (SettleS counts
	// the attachments too).
	RolesS float64
	// EarlyMs and EarlyCoordError are MeanMs and CoordError at
	// GeoLiveEarly after the last node's start.
	EarlyMs, EarlyCoordError float64
	Swaps                    uint64
	WallS                    float64
	Error                    string `json:",omitempty"`
}

// GeoLiveRow is GeoLive's outcome: both sides and the baselines.
type GeoLiveRow struct {
	N, S      int
	DurationS float64
	Live, Sim GeoLiveSide
	// RandomMs and OfflineMs are the mean RTT to the superpeer of random
	// placement (the mean of 100) and of the offline k-median, with every
	// ordinary node attached to the nearest with room, on the N hosts.
	RandomMs, OfflineMs float64
	// SimSeeds are the simulator's side at the seeds after Seed
	// (GeoLiveConfig.SimSeeds), each against the same baselines.
	SimSeeds []GeoLiveSide `json:",omitempty"`
}

func (c *GeoLiveConfig) fill() error {
	c.N, c.S, c.SimSeeds = cmpOr(c.N, 100), cmpOr(c.S, 10), cmpOr(c.SimSeeds, 8)
	if c.Duration == 0 {
		c.Duration = 5 * time.Minute
	}
	if c.InBubble == nil {
		return fmt.Errorf("%w: GeoLive needs InBubble (a testing/synctest bubble)", ErrBench)
	}
	if c.Matrix == nil {
		path, err := findPlanetLab()
		if err != nil {
			return err
		}
		if c.Matrix, err = latency.Load(path); err != nil {
			return err
		}
	}
	if c.N < 2 || c.S < 1 || c.S >= c.N || c.N > c.Matrix.N() {
		return fmt.Errorf("%w: GeoLive: N = %d, S = %d on %d hosts", ErrBench, c.N, c.S, c.Matrix.N())
	}
	return nil
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// GeoLive runs both sides and the baselines.
func GeoLive(ctx context.Context, cfg GeoLiveConfig) (GeoLiveRow, error) {
	if err := cfg.fill(); err != nil {
		return GeoLiveRow{}, err
	}
	row := GeoLiveRow{N: cfg.N, S: cfg.S, DurationS: cfg.Duration.Seconds()}
	hosts := make([]int, cfg.N)
	for i := range hosts {
		hosts[i] = i
	}
	sub := cfg.Matrix.Sub(hosts)
	// Baselines, on the same hosts, with S superpeers.
	_, random, offline, err := Baseline(sub, cfg.N, hosts[:cfg.S], 0, cfg.Seed)
	if err != nil {
		return row, err
	}
	row.RandomMs, row.OfflineMs = random.Mean, offline.Mean
	row.Sim = geoLiveSim(cfg, sub)
	for i := 1; i < cfg.SimSeeds; i++ {
		c := cfg
		c.Seed += uint64(i)
		row.SimSeeds = append(row.SimSeeds, geoLiveSim(c, sub))
	}
	start := time.Now()
	cfg.InBubble(func() { row.Live = geoLiveLive(ctx, cfg, sub) })
	row.Live.WallS = time.Since(start).Seconds()
	return row, ctx.Err()
}

// geoSettle follows when the placement last changed, and when its
// superpeers did.
type geoSettle struct {
	last, lastRoles string
	changed, roles  time.Duration
	early           GeoLiveSide // the figures at GeoLiveEarly
}

func (s *geoSettle) see(at time.Duration, superpeer []int) {
	state, roles := geoState(superpeer)
	if state != s.last {
		s.last, s.changed = state, at
	}
	if roles != s.lastRoles {
		s.lastRoles, s.roles = roles, at
	}
}

// finish fills side's settle figures from s, for a run of duration d
// of S tokens.
func (s *geoSettle) finish(side *GeoLiveSide, d time.Duration, S int) {
	side.SettleS, side.RolesS = s.changed.Seconds(), s.roles.Seconds()
	side.EarlyMs, side.EarlyCoordError = s.early.MeanMs, s.early.CoordError
	side.Settled = d-s.changed >= time.Minute && side.Unattached == 0 && side.Superpeers == S
}

// geoLiveFigures computes a side's figures from what each node names:
// superpeer[i] is the index of node i's superpeer (i itself for a
// superpeer, -1 for none).
func geoLiveFigures(m *latency.Matrix, superpeer []int, coords []*coordinate.Coordinate) GeoLiveSide {
	var side GeoLiveSide
	var rtts []float64
	var sps []int
	for i, s := range superpeer {
		switch {
		case s == i:
			sps = append(sps, i)
		case s < 0:
			side.Unattached++
		default:
			d, _ := m.RTT(i, s)
			rtts = append(rtts, float64(d)/float64(time.Millisecond))
		}
	}
	side.Superpeers, side.MeanMs = len(sps), stats.Mean(rtts)
	served := map[int]bool{}
	for i, s := range superpeer {
		if s >= 0 && s != i {
			served[s] = true
		}
	}
	for _, s := range sps {
		if !served[s] {
			side.Empty++
		}
	}
	if len(sps) > 0 {
		if ideal, _, _, err := Baseline(m, len(superpeer), sps, 0, 1); err == nil {
			side.IdealMs = ideal.Mean
		}
	}
	var errs []float64
	for i := range coords {
		for j := i + 1; j < len(coords); j++ {
			rtt, _ := m.RTT(i, j)
			if coords[i] == nil || coords[j] == nil || rtt <= 0 {
				continue
			}
			pred := geometric.Distance(coords[i], coords[j]) * float64(time.Second)
			errs = append(errs, math.Abs(pred-float64(rtt))/float64(rtt))
		}
	}
	if len(errs) > 0 {
		side.CoordError = stats.Sort(errs).Median()
	}
	return side
}

// geoState encodes what each node names, and which nodes are
// superpeers.
func geoState(superpeer []int) (state, roles string) {
	var b, r strings.Builder
	for i, s := range superpeer {
		fmt.Fprintf(&b, "%d,", s)
		if s == i {
			fmt.Fprintf(&r, "%d,", i)
		}
	}
	return b.String(), r.String()
}

// geoLiveSim is the simulator's side.
func geoLiveSim(cfg GeoLiveConfig, m *latency.Matrix) (side GeoLiveSide) {
	tokens := geometric.Config{}
	if cfg.SimTokens != nil {
		tokens = *cfg.SimTokens
	}
	tokens.Tokens = cfg.S
	start := time.Now()
	defer func() { side.WallS = time.Since(start).Seconds() }()
	s, err := nodesim.New(nodesim.Config{N: cfg.N, Seed: cfg.Seed, Stagger: time.Second, Latency: m,
		Node: node.Config{Geometric: true, AnnounceInterval: 5 * time.Second,
			Geo: node.GeoConfig{PingInterval: time.Second, TokenInterval: time.Second, Tokens: tokens, Relocate: cfg.Relocate}}})
	if err != nil {
		side.Error = err.Error()
		return side
	}
	index := map[string]int{}
	for i := range cfg.N {
		index[string(s.ID(i))] = i
	}
	read := func() []int {
		sp := make([]int, cfg.N)
		for i := range cfg.N {
			st := s.Machine(i).GeoState()
			sp[i] = -1
			if j, ok := index[string(st.Superpeer)]; ok {
				sp[i] = j
			}
		}
		return sp
	}
	coordsNow := func() []*coordinate.Coordinate {
		coords := make([]*coordinate.Coordinate, cfg.N)
		for i := range cfg.N {
			coords[i] = s.Machine(i).GeoState().Coord
		}
		return coords
	}
	var settle geoSettle
	t0 := time.Second // the last node's start
	for at := t0; at <= t0+cfg.Duration; at += time.Second {
		s.Run(at)
		sp := read()
		settle.see(at-t0, sp)
		if cfg.SimTrace != nil {
			cfg.SimTrace(cfg.Seed, at-t0, m, sp)
		}
		if at-t0 == GeoLiveEarly {
			settle.early = geoLiveFigures(m, sp, coordsNow())
		}
	}
	for i := range cfg.N {
		side.Swaps += s.Machine(i).Swaps()
	}
	fig := geoLiveFigures(m, read(), coordsNow())
	fig.Swaps, fig.WallS = side.Swaps, side.WallS
	settle.finish(&fig, cfg.Duration, cfg.S)
	return fig
}

// geoLiveLive is the live side; it runs in the bubble.
func geoLiveLive(ctx context.Context, cfg GeoLiveConfig, m *latency.Matrix) (side GeoLiveSide) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration+10*time.Minute)
	defer cancel()
	tn, err := testnet.Start(ctx, testnet.Config{N: cfg.N, Strategy: testnet.StrategyGeometric, Target: dhtselect.Target{Superpeers: cfg.S},
		Seed: cfg.Seed, Latency: m, AnnounceInterval: 5 * time.Second, PingInterval: time.Second, TokenInterval: time.Second, Logger: cfg.Logger,
		GeoRelocate: cfg.Relocate})
	if err != nil {
		side.Error = err.Error()
		return side
	}
	// pubsub schedules a retry of a subscription announcement that did not
	// fit a peer's queue in a goroutine that sleeps up to a second
	// (PubSub.announceRetry) and outlives Close: give it that second, or
	// the bubble ends with it asleep (synctest: deadlock).
	defer time.Sleep(2 * time.Second)
	defer tn.Close()
	read := func() ([]int, []*coordinate.Coordinate, uint64) {
		r := tn.Report()
		index := map[string]int{}
		for _, n := range r.Nodes {
			index[n.ID] = n.Index
		}
		sp := make([]int, cfg.N)
		for i := range sp {
			sp[i] = -1
		}
		for _, n := range r.Nodes {
			if j, ok := index[n.Superpeer]; ok && n.Index < cfg.N {
				sp[n.Index] = j
			}
		}
		coords := make([]*coordinate.Coordinate, cfg.N)
		var swaps uint64
		for i, nd := range tn.Nodes() {
			if i < cfg.N {
				st := nd.State()
				coords[i] = st.Coord
				swaps += nd.GeoSwaps()
			}
		}
		return sp, coords, swaps
	}
	var settle geoSettle
	t0 := time.Now()
	for at := time.Second; at <= cfg.Duration; at += time.Second {
		time.Sleep(time.Until(t0.Add(at)))
		if ctx.Err() != nil {
			side.Error = ctx.Err().Error()
			return side
		}
		sp, coords, _ := read()
		settle.see(at, sp)
		if at == GeoLiveEarly {
			settle.early = geoLiveFigures(m, sp, coords)
		}
		if cfg.Progress != nil && at%(30*time.Second) == 0 {
			cfg.Progress(fmt.Sprintf("live %v: superpeers and attachment last changed at %v", at, settle.changed))
		}
	}
	sp, coords, swaps := read()
	fig := geoLiveFigures(m, sp, coords)
	fig.Swaps = swaps
	settle.finish(&fig, cfg.Duration, cfg.S)
	return fig
}

// msFig is a figure in milliseconds for a table: one decimal from 10 ms
// on, three significant digits below (a data centre's RTTs, a few tenths
// of a millisecond, would read 0.3).
func msFig(v float64) string {
	if math.Abs(v) >= 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// WriteGeoLiveTable writes rows as a Markdown table.
func WriteGeoLiveTable(w io.Writer, rows []GeoLiveRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "| N | S | side | mean RTT to superpeer ms | ideal attachment ms | ÷ random | ÷ offline | ÷ simulator | coord. median rel. error | settled at s | superpeers last changed at s | at %.0f s: mean ms (÷ random) / coord. error | swaps |\n", GeoLiveEarly.Seconds())
	fmt.Fprintln(tw, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		for _, x := range []struct {
			name string
			s    GeoLiveSide
		}{{"simulator", r.Sim}, {"live (virtual time)", r.Live}} {
			settled := fmt.Sprintf("%.0f", x.s.SettleS)
			if !x.s.Settled {
				settled += " (not settled)"
			}
			fmt.Fprintf(tw, "| %d | %d | %s | %s | %s | %.2f | %.2f | %.2f | %.3f | %s | %.0f | %s (%.2f) / %.3f | %d |\n", r.N, r.S, x.name, msFig(x.s.MeanMs), msFig(x.s.IdealMs),
				Ratio(x.s.MeanMs, r.RandomMs), Ratio(x.s.MeanMs, r.OfflineMs), Ratio(x.s.MeanMs, r.Sim.MeanMs), x.s.CoordError, settled,
				x.s.RolesS, msFig(x.s.EarlyMs), Ratio(x.s.EarlyMs, r.RandomMs), x.s.EarlyCoordError, x.s.Swaps)
		}
		if len(r.SimSeeds) > 0 {
			all := append([]GeoLiveSide{r.Sim}, r.SimSeeds...)
			span := func(f func(GeoLiveSide) float64, format string) string {
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, x := range all {
					lo, hi = min(lo, f(x)), max(hi, f(x))
				}
				if format == "ms" {
					return msFig(lo) + "–" + msFig(hi)
				}
				return fmt.Sprintf(format+"–"+format, lo, hi)
			}
			settled := 0
			for _, x := range all {
				if x.Settled {
					settled++
				}
			}
			fmt.Fprintf(tw, "| %d | %d | simulator, %d seeds (least–most) | %s | %s | %s | %s | | %s | %s (%d of %d settled) | %s | %s (%s) / %s | %s |\n", r.N, r.S, len(all),
				span(func(x GeoLiveSide) float64 { return x.MeanMs }, "ms"), span(func(x GeoLiveSide) float64 { return x.IdealMs }, "ms"),
				span(func(x GeoLiveSide) float64 { return Ratio(x.MeanMs, r.RandomMs) }, "%.2f"), span(func(x GeoLiveSide) float64 { return Ratio(x.MeanMs, r.OfflineMs) }, "%.2f"),
				span(func(x GeoLiveSide) float64 { return x.CoordError }, "%.3f"), span(func(x GeoLiveSide) float64 { return x.SettleS }, "%.0f"), settled, len(all),
				span(func(x GeoLiveSide) float64 { return x.RolesS }, "%.0f"), span(func(x GeoLiveSide) float64 { return x.EarlyMs }, "ms"),
				span(func(x GeoLiveSide) float64 { return Ratio(x.EarlyMs, r.RandomMs) }, "%.2f"), span(func(x GeoLiveSide) float64 { return x.EarlyCoordError }, "%.3f"),
				span(func(x GeoLiveSide) float64 { return float64(x.Swaps) }, "%.0f"))
		}
		fmt.Fprintf(tw, "| %d | %d | random (mean of 100) | %s | | 1.00 | %.2f | | | | | | |\n", r.N, r.S, msFig(r.RandomMs), Ratio(r.RandomMs, r.OfflineMs))
		fmt.Fprintf(tw, "| %d | %d | offline k-median | %s | | %.2f | 1.00 | | | | | | |\n", r.N, r.S, msFig(r.OfflineMs), Ratio(r.OfflineMs, r.RandomMs))
	}
	return tw.Flush()
}
