package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/stats"
	"github.com/superpeer/superpeer/testnet"
)

// LiveScaleConfig configures LiveScale.
type LiveScaleConfig struct {
	// Sizes are the numbers of nodes, each run in turn. Default 32, 64,
	// 128, 256, 512.
	Sizes []int
	// Strategy is testnet.StrategyDHT (default) or StrategyGeometric.
	Strategy string
	// PeersPerSuperpeer sets the target: S = n / PeersPerSuperpeer
	// superpeers (at least 1). Default 16.
	PeersPerSuperpeer int
	// AnnounceInterval is every node's membership period. Zero means the
	// testnet's default (testnet.DefaultAnnounceInterval): a real node's,
	// with either strategy (both memberships are cluster-scoped).
	AnnounceInterval time.Duration
	// ReevaluateInterval is every node's lookup period. Default: a real
	// node's (overlay.DefaultConfig).
	ReevaluateInterval time.Duration
	// Window is how long the steady-state traffic is measured once the
	// overlay has converged and settled (Quiet). Default 30 s; never
	// shorter than one announce interval.
	Window time.Duration
	// Quiet is how long every node's role and superpeer must stay the
	// same before the window begins (waitSettled). Default settleQuiet, a
	// minute; never shorter than one announce interval.
	Quiet time.Duration
	// Timeout bounds each size's convergence. Default 5 min, or n seconds
	// when that is longer.
	Timeout time.Duration
	// Seed derives the peer keys.
	Seed uint64
	// Step, when set, is told the start of each size.
	Step func(desc string)
	// InBubble, when set, runs each size inside it: a testing/synctest
	// bubble (synctest runs only in a test), in which mocknet, the nodes'
	// timers and the window follow a virtual clock, so that a size too
	// large for this machine's two cores still runs at the node's own
	// intervals (TestLiveScaleVirtual). The rows are then marked
	// VirtualTime, and their seconds are virtual.
	InBubble func(func())
}

// LiveScaleRow is one live testnet, measured from start to close.
type LiveScaleRow struct {
	Strategy   string `json:"strategy"`
	N          int    `json:"n"`
	Superpeers int    `json:"target_superpeers"`
	Converged  bool   `json:"converged"`
	// ConvergeS is from the start of the first node until every node's
	// view agreed with the brute-force answer (geometric: held still).
	ConvergeS float64 `json:"converge_s"`
	// SettledS is from the start of the first node until every node's
	// role and superpeer last changed before the window (waitSettled);
	// Settled is false when they still changed settleMax after
	// convergence, and the window began then.
	SettledS float64 `json:"settled_s"`
	Settled  bool    `json:"settled"`
	// PeakMemMB is the most memory the process held (MemPeak) while the
	// testnet ran, and PeakMemPerNodeMB the growth over the memory held
	// before the start, divided by N.
	PeakMemMB        float64 `json:"peak_mem_mb"`
	PeakMemPerNodeMB float64 `json:"peak_mem_per_node_mb"`
	// LiveHeapMB is the largest live heap (MemPeak.Live): what the nodes
	// really hold, whatever the GC's headroom (peer bench runs with
	// GOGC=400, which lets the memory held grow to about five times it).
	LiveHeapMB float64 `json:"live_heap_mb"`
	// AnnounceIntervalS and ReevaluateIntervalS are the periods used.
	AnnounceIntervalS   float64 `json:"announce_interval_s"`
	ReevaluateIntervalS float64 `json:"reevaluate_interval_s"`
	// WindowS is the steady-state window; BytesPerPeerPerS is what the
	// nodes wrote to their streams in it (testnet.Traffic: payload above
	// the muxer), divided by N and by the window, and ByProtocol splits
	// it: gossip (GossipSub), dht (the private kad-dht), lookup, register
	// (a member's registration with its superpeer), election, and the
	// geometric strategy's protocols.
	WindowS          float64            `json:"window_s"`
	BytesPerPeerPerS float64            `json:"bytes_per_peer_per_s"`
	ByProtocol       map[string]float64 `json:"bytes_per_peer_per_s_by_protocol"`
	// The rest splits the window's traffic by the role each node has at
	// its end: what a node wrote to and read from its streams (sent plus
	// received), per second. Ordinary is the mean over the ordinary peers,
	// OrdinaryMax the largest, OrdinaryByProtocol the mean by protocol
	// group. Superpeer is the mean over the superpeers (SuperpeersSeen of
	// them, serving MembersPerSuperpeer ordinary peers on average),
	// SuperpeerMax the largest, SuperpeerPerMember each superpeer's
	// figure divided by the ordinary peers it serves (its cluster less
	// itself, at least 1), averaged over the superpeers.
	Ordinary            float64            `json:"ordinary_bytes_per_s"`
	OrdinaryMax         float64            `json:"ordinary_max_bytes_per_s"`
	OrdinaryByProtocol  map[string]float64 `json:"ordinary_bytes_per_s_by_protocol"`
	Superpeer           float64            `json:"superpeer_bytes_per_s"`
	SuperpeerMax        float64            `json:"superpeer_max_bytes_per_s"`
	SuperpeerPerMember  float64            `json:"superpeer_bytes_per_s_per_member"`
	SuperpeerByProtocol map[string]float64 `json:"superpeer_bytes_per_s_by_protocol"`
	SuperpeersSeen      int                `json:"superpeers"`
	MembersPerSuperpeer float64            `json:"members_per_superpeer"`
	// StillConverged reports that the views still agreed with the answer
	// at the end of the window.
	StillConverged bool `json:"still_converged"`
	// EstimateErrMedian and EstimateErrMax are the relative errors of the
	// nodes' network-size estimates (State.Size.N) against n at the end of
	// the window, |estimate − n| / n: the median and the largest over the
	// nodes (issue 20 asks for 5 % at most).
	EstimateErrMedian float64 `json:"estimate_err_median"`
	EstimateErrMax    float64 `json:"estimate_err_max"`
	// VirtualTime marks a row run in a synctest bubble
	// (LiveScaleConfig.InBubble); WallS is the wall-clock time it took.
	VirtualTime bool    `json:"virtual_time,omitempty"`
	WallS       float64 `json:"wall_s"`
	Error       string  `json:"error,omitempty"`
}

func (c *LiveScaleConfig) fill() error {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{32, 64, 128, 256, 512}
	}
	if c.Strategy == "" {
		c.Strategy = testnet.StrategyDHT
	}
	if c.PeersPerSuperpeer == 0 {
		c.PeersPerSuperpeer = 16
	}
	if c.ReevaluateInterval == 0 {
		c.ReevaluateInterval = overlay.DefaultConfig().ReevaluateInterval
	}
	if c.Window == 0 {
		c.Window = 30 * time.Second
	}
	if c.Quiet == 0 {
		c.Quiet = settleQuiet
	}
	for _, n := range c.Sizes {
		if n < 1 || n > testnet.MaxNodes {
			return fmt.Errorf("%w: live size %d, want 1 to %d", ErrBench, n, testnet.MaxNodes)
		}
	}
	if c.PeersPerSuperpeer < 1 || c.AnnounceInterval < 0 || c.ReevaluateInterval < 0 || c.Window < 0 || c.Quiet < 0 || c.Timeout < 0 {
		return fmt.Errorf("%w: peers per superpeer %d, announce interval %v, re-evaluate interval %v, window %v, quiet %v, timeout %v; want a positive count and no negative duration",
			ErrBench, c.PeersPerSuperpeer, c.AnnounceInterval, c.ReevaluateInterval, c.Window, c.Quiet, c.Timeout)
	}
	return nil
}

// ErrBench reports a bad benchmark configuration.
var ErrBench = errors.New("bench: bad configuration")

// LiveScale starts an in-process testnet of each size in turn (real libp2p
// hosts on mocknet, the real DHT and GossipSub), and measures its
// convergence time, the process's peak memory and the steady-state traffic
// per peer. A size that does not converge gets a row with its error, and
// the sizes after it still run.
func LiveScale(ctx context.Context, cfg LiveScaleConfig) ([]LiveScaleRow, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	var rows []LiveScaleRow
	for _, n := range cfg.Sizes {
		if cfg.Step != nil {
			cfg.Step(fmt.Sprintf("live %s, %d nodes", cfg.Strategy, n))
		}
		var row LiveScaleRow
		var err error
		start := time.Now()
		if cfg.InBubble != nil {
			cfg.InBubble(func() {
				row, err = liveOne(ctx, cfg, n)
				// pubsub's retry of a subscription announcement sleeps up
				// to a second in a goroutine that outlives Close: the
				// bubble must not end with it asleep (see geoLiveLive).
				time.Sleep(2 * time.Second)
			})
			row.VirtualTime = true
		} else {
			row, err = liveOne(ctx, cfg, n)
		}
		row.WallS = time.Since(start).Seconds()
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// liveOne runs one size. Only a cancelled ctx is an error; a testnet
// failure is the row's Error.
func liveOne(ctx context.Context, cfg LiveScaleConfig, n int) (row LiveScaleRow, err error) {
	s := max(1, n/cfg.PeersPerSuperpeer)
	if cfg.Timeout == 0 {
		cfg.Timeout = max(5*time.Minute, time.Duration(n)*time.Second)
	}
	if cfg.AnnounceInterval == 0 {
		cfg.AnnounceInterval = testnet.DefaultAnnounceInterval(n, cfg.Strategy)
	}
	// A member registers with its superpeer once an announce interval, and
	// a superpeer gossips once one: a shorter window sees some of them and
	// not others (at 8 nodes and a 2 s window, none at all). The window is
	// at least one announce interval.
	cfg.Window = max(cfg.Window, cfg.AnnounceInterval)
	row = LiveScaleRow{Strategy: cfg.Strategy, N: n, Superpeers: s,
		AnnounceIntervalS: cfg.AnnounceInterval.Seconds(), ReevaluateIntervalS: cfg.ReevaluateInterval.Seconds(), WindowS: cfg.Window.Seconds()}
	mem := StartMemPeak()
	defer func() { // after Close
		peak := mem.Stop()
		row.PeakMemMB = float64(peak) / (1 << 20)
		row.PeakMemPerNodeMB = float64(peak-mem.Base()) / (1 << 20) / float64(n)
		row.LiveHeapMB = float64(mem.Live()) / (1 << 20)
	}()
	tn, err := testnet.Start(ctx, testnet.Config{
		N: n, Strategy: cfg.Strategy, Target: dhtselect.Target{Superpeers: s}, Seed: cfg.Seed,
		AnnounceInterval: cfg.AnnounceInterval, ReevaluateInterval: cfg.ReevaluateInterval,
	})
	if err != nil {
		row.Error = err.Error()
		return row, ctx.Err()
	}
	defer tn.Close()
	wctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	d, err := tn.WaitConverged(wctx, tn.Started())
	cancel()
	row.ConvergeS = d.Seconds()
	if err != nil {
		row.Error = err.Error()
		return row, ctx.Err()
	}
	row.Converged = true
	at, settled, err := waitSettled(ctx, tn, cfg.AnnounceInterval, max(cfg.Quiet, cfg.AnnounceInterval))
	if err != nil {
		return row, err
	}
	row.SettledS, row.Settled = (d + at).Seconds(), settled
	before := tn.Traffic().Nodes()
	if err := sleep(ctx, cfg.Window); err != nil {
		return row, err
	}
	after := tn.Traffic().Nodes()
	row.StillConverged = len(tn.Check()) == 0
	row.EstimateErrMedian, row.EstimateErrMax = estimateErrors(tn.Members(), n)
	secs := cfg.Window.Seconds()
	row.ByProtocol = map[string]float64{}
	for id, b := range after {
		for p, v := range b.Sub(before[id]).Sent {
			x := float64(v) / float64(n) / secs
			row.ByProtocol[protocolGroup(p)] += x
			row.BytesPerPeerPerS += x
		}
	}
	row.byRole(tn.Members(), before, after, secs)
	return row, nil
}

// The window of steady traffic begins once the overlay holds still:
// every node's role and superpeer the same for LiveScaleConfig.Quiet
// (settleQuiet by default), so that a row is never measured while
// members move. In the geometric rows of
// 2026-12-07 (32 to 512 nodes) nothing moved after convergence (the
// testnet's geometric convergence already waits for the placement to
// hold still): the wait was the minute itself. That minute is not
// steady: members still meet peers they had not (the search's candidates,
// the superpeers nearby in turn), and kad-dht checks each with a
// FIND_NODE of about 1 KB each way (lookupCheck). At 512 nodes kad-dht
// was 405 B/s of an ordinary peer's 1,047 in the first 30 s after
// convergence, 70 of 514 four minutes later (a scratch trace of the DHT
// streams by caller; issue 20's closing note, 2026-12-07).
const (
	settleQuiet = time.Minute
	settleMax   = 5 * time.Minute
)

// waitSettled waits, from convergence, until no node's role or superpeer
// has changed for quiet, looking every step; it gives when they last
// changed, from convergence, and false if they still changed settleMax
// after it.
func waitSettled(ctx context.Context, tn *testnet.Net, step, quiet time.Duration) (time.Duration, bool, error) {
	type place struct {
		role overlay.Role
		sp   peer.ID
	}
	look := func() map[peer.ID]place {
		m := map[peer.ID]place{}
		for _, nd := range tn.Members() {
			st := nd.State()
			m[nd.ID()] = place{st.Role, st.Superpeer.ID}
		}
		return m
	}
	start := time.Now()
	last, changed := look(), time.Duration(0)
	for {
		if err := sleep(ctx, step); err != nil {
			return 0, false, err
		}
		el := time.Since(start)
		if now := look(); !maps.Equal(now, last) {
			last, changed = now, el
		}
		switch {
		case el-changed >= quiet:
			return changed, true, nil
		case el >= settleMax:
			return changed, false, nil
		}
	}
}

// estimateErrors returns the median and the largest relative error of the
// nodes' network-size estimates against n.
func estimateErrors(nodes []testnet.Member, n int) (median, largest float64) {
	errs := make([]float64, 0, len(nodes))
	for _, m := range nodes {
		errs = append(errs, math.Abs(float64(m.State().Size.N-n))/float64(n))
	}
	if len(errs) == 0 {
		return 0, 0
	}
	s := stats.Sort(errs)
	return s.Median(), s.Max()
}

// byRole fills in the row's figures per role from the traffic of each
// node over the window (the readings before and after it), by the role the
// node has at its end.
func (row *LiveScaleRow) byRole(nodes []testnet.Member, before, after map[peer.ID]testnet.NodeBytes, secs float64) {
	row.OrdinaryByProtocol, row.SuperpeerByProtocol = map[string]float64{}, map[string]float64{}
	var ords, sups, members int
	for _, m := range nodes {
		d := after[m.ID()].Sub(before[m.ID()])
		bps := float64(d.Total()) / secs
		groups := map[string]float64{}
		for _, side := range []map[protocol.ID]uint64{d.Sent, d.Received} {
			for p, v := range side {
				groups[protocolGroup(p)] += float64(v) / secs
			}
		}
		st := m.State()
		if st.Role == overlay.RoleSuperpeer {
			served := max(1, len(st.Members)-1)
			sups++
			members += served
			row.Superpeer += bps
			row.SuperpeerMax = max(row.SuperpeerMax, bps)
			row.SuperpeerPerMember += bps / float64(served)
			for g, v := range groups {
				row.SuperpeerByProtocol[g] += v
			}
			continue
		}
		ords++
		row.Ordinary += bps
		row.OrdinaryMax = max(row.OrdinaryMax, bps)
		for g, v := range groups {
			row.OrdinaryByProtocol[g] += v
		}
	}
	if ords > 0 {
		row.Ordinary /= float64(ords)
		for g := range row.OrdinaryByProtocol {
			row.OrdinaryByProtocol[g] /= float64(ords)
		}
	}
	if sups > 0 {
		row.Superpeer /= float64(sups)
		row.SuperpeerPerMember /= float64(sups)
		row.MembersPerSuperpeer = float64(members) / float64(sups)
		for g := range row.SuperpeerByProtocol {
			row.SuperpeerByProtocol[g] /= float64(sups)
		}
	}
	row.SuperpeersSeen = sups
}

// protocolGroup names the part of the overlay a protocol belongs to.
func protocolGroup(p protocol.ID) string {
	s := string(p)
	switch {
	case strings.HasPrefix(s, "/meshsub/"), strings.HasPrefix(s, "/floodsub/"):
		return "gossip"
	case strings.Contains(s, "/kad/"):
		return "dht"
	case strings.HasPrefix(s, "/ipfs/ping/"):
		return "ping" // the RTTs to cluster members (overlay/rtt.go)
	case s == "":
		return "unknown"
	case strings.Contains(s, "/closer/"):
		return "lookup" // the cluster-key lookups of package dhtselect
	}
	// The overlay's own: /superpeer/<network>/<name>/<version>.
	if parts := strings.Split(s, "/"); len(parts) >= 4 && parts[1] == "superpeer" {
		return parts[3]
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// WriteLiveScaleTable prints rows as a table: convergence, memory, the
// bytes written per peer, then an ordinary peer's and a superpeer's bytes
// per second (sent and received), split by protocol group.
func WriteLiveScaleTable(w io.Writer, rows []LiveScaleRow) error {
	groups := liveGroups(rows)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "strategy\tn\tS\tconverged s\tsettled s\tpeak MB\tMB/node\tannounce s\twritten B/peer/s\tordinary B/s mean / max")
	for _, g := range groups {
		fmt.Fprintf(tw, "\tord %s", g)
	}
	fmt.Fprint(tw, "\tsuperpeers\tmembers each\tsuperpeer B/s\tper member")
	for _, g := range groups {
		fmt.Fprintf(tw, "\tsp %s", g)
	}
	fmt.Fprintln(tw, "\tstill converged\testimate error median / max\t")
	for _, r := range rows {
		if !r.Converged {
			fmt.Fprintf(tw, "%s\t%d\t%d\tno (%.0f s)\t\t%.0f\t%.2f\t%.0f\t", r.Strategy, r.N, r.Superpeers, r.ConvergeS, r.PeakMemMB, r.PeakMemPerNodeMB, r.AnnounceIntervalS)
			fmt.Fprint(tw, strings.Repeat("\t", 2*len(groups)+7))
			fmt.Fprintln(tw, "\t")
			continue
		}
		settled := fmt.Sprintf("%.1f", r.SettledS)
		if !r.Settled {
			settled = fmt.Sprintf("no (%.0f s)", r.SettledS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f / %.0f", r.Strategy, r.N, r.Superpeers, r.ConvergeS, settled, r.PeakMemMB, r.PeakMemPerNodeMB, r.AnnounceIntervalS, r.BytesPerPeerPerS, r.Ordinary, r.OrdinaryMax)
		for _, g := range groups {
			fmt.Fprintf(tw, "\t%.0f", r.OrdinaryByProtocol[g])
		}
		fmt.Fprintf(tw, "\t%d\t%.1f\t%.0f\t%.0f", r.SuperpeersSeen, r.MembersPerSuperpeer, r.Superpeer, r.SuperpeerPerMember)
		for _, g := range groups {
			fmt.Fprintf(tw, "\t%.0f", r.SuperpeerByProtocol[g])
		}
		fmt.Fprintf(tw, "\t%v\t%.1f %% / %.1f %%\t\n", r.StillConverged, 100*r.EstimateErrMedian, 100*r.EstimateErrMax)
	}
	return tw.Flush()
}

// liveGroups lists the protocol groups of the rows' per-role traffic,
// sorted.
func liveGroups(rows []LiveScaleRow) []string {
	var groups []string
	for _, r := range rows {
		for _, m := range []map[string]float64{r.OrdinaryByProtocol, r.SuperpeerByProtocol} {
			for g := range m {
				if !slices.Contains(groups, g) {
					groups = append(groups, g)
				}
			}
		}
	}
	slices.Sort(groups)
	return groups
}
