package testnet

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/stats"
)

// Report is the outcome of a testnet run, in the shape of `peer testnet
// --json`.
type Report struct {
	N                int             `json:"n"`
	Strategy         string          `json:"strategy"`
	Seed             uint64          `json:"seed"`
	TargetSuperpeers int             `json:"target_superpeers"`
	K                int             `json:"k"`
	Converged        bool            `json:"converged"`
	ConvergeMS       int64           `json:"converge_ms"`
	Lookups          uint64          `json:"lookups"`
	LookupQueries    uint64          `json:"lookup_queries"`
	SizeEstimate     EstimateSummary `json:"size_estimate"`
	// MaxClusterSize is the largest cluster, its superpeer included.
	MaxClusterSize int `json:"max_cluster_size"`
	// MeanRTTToSuperpeerMS and P95RTTToSuperpeerMS summarise, over the
	// ordinary peers, the matrix RTT to the superpeer each one names; they
	// are present only when the testnet has a latency matrix.
	MeanRTTToSuperpeerMS *float64 `json:"mean_rtt_to_superpeer_ms,omitempty"`
	P95RTTToSuperpeerMS  *float64 `json:"p95_rtt_to_superpeer_ms,omitempty"`
	// CoordError (geometric, with a latency matrix) is the median, over
	// pairs of live nodes, of |predicted − true| / true RTT, predicted from
	// the nodes' coordinates at the end of the run.
	CoordError *float64        `json:"coord_median_relative_error,omitempty"`
	Nodes      []NodeReport    `json:"nodes"`
	Clusters   []ClusterReport `json:"clusters"`
	// Mismatches are the nodes that disagree with the expected answer,
	// each with what it says of its lookup, election, membership and bans.
	Mismatches []string `json:"mismatches,omitempty"`
	// Scenario is what a fault scenario measured (peer testnet --scenario).
	Scenario *ScenarioReport `json:"scenario,omitempty"`
	// Baseline, with a latency matrix, judges the run's superpeers against
	// placements computed in the same run on the same rows (filled in by
	// peer testnet with bench.Baseline).
	Baseline *PlacementBaseline `json:"baseline,omitempty"`
}

// EstimateSummary compares the nodes' network-size estimates with the true size.
type EstimateSummary struct {
	True    int            `json:"true"`
	Min     int            `json:"min"`
	Max     int            `json:"max"`
	Sources map[string]int `json:"sources"`
}

// PlacementBaseline compares, on the matrix rows of a run, mean and p95
// RTTs (ms) from ordinary peers to their superpeers: the run's superpeers
// with every peer attached to the nearest one with room by true RTT
// (Ideal), random placements (the mean of 100), and the offline k-median
// placement; and the run's own mean RTT as attached, as a ratio to the
// random and the k-median means.
type PlacementBaseline struct {
	IdealMeanMS   float64 `json:"ideal_attach_mean_ms"`
	IdealP95MS    float64 `json:"ideal_attach_p95_ms"`
	RandomMeanMS  float64 `json:"random_mean_ms"`
	RandomP95MS   float64 `json:"random_p95_ms"`
	KMedianMeanMS float64 `json:"kmedian_mean_ms"`
	KMedianP95MS  float64 `json:"kmedian_p95_ms"`
	VsRandom      float64 `json:"mean_vs_random"`
	VsKMedian     float64 `json:"mean_vs_kmedian"`
}

// NodeReport is one node's view.
type NodeReport struct {
	// Index is the node's place in start order: its row of the latency
	// matrix.
	Index        int    `json:"index"`
	ID           string `json:"id"`
	Role         string `json:"role"`
	ClusterKey   string `json:"cluster_key"`
	Prefix       string `json:"prefix"`
	Superpeer    string `json:"superpeer"`
	Members      int    `json:"members"`
	SizeEstimate int    `json:"size_estimate"`
	SizeSource   string `json:"size_source"`
	Lookups      uint64 `json:"lookups"`
	// RTTToSuperpeerMS is the matrix RTT from this node to the superpeer it
	// names (0 for a superpeer); absent without a latency matrix, or when
	// the named superpeer is not a live node.
	RTTToSuperpeerMS *float64 `json:"rtt_to_superpeer_ms,omitempty"`
}

// ClusterReport is one cluster as the nodes see it.
type ClusterReport struct {
	Prefix    string   `json:"prefix"`
	Key       string   `json:"key"`
	Superpeer string   `json:"superpeer"`
	Members   []string `json:"members"`
}

// Report describes the live nodes' views. Clusters are grouped by the
// cluster key each node reports, with the superpeer its members name.
func (t *Net) Report() Report {
	nodes := t.indexed()
	r := Report{
		N: len(nodes), Strategy: t.cfg.Strategy, Seed: t.cfg.Seed,
		TargetSuperpeers: t.cfg.Target.S(len(nodes)),
		SizeEstimate:     EstimateSummary{True: len(nodes), Sources: map[string]int{}},
	}
	geo := t.cfg.Strategy == StrategyGeometric
	if !geo {
		r.K, _ = t.Expected()
	}
	// Clusters are keyed by cluster key (DHT) or by superpeer (geometric).
	byKey := map[string]*ClusterReport{}
	ids := map[string][]peer.ID{}
	index := map[peer.ID]int{}
	for _, n := range nodes {
		index[n.ID()] = n.Index
	}
	var rtts []float64 // ordinary peers to their superpeers, ms
	for i, n := range nodes {
		s := n.State()
		nr := NodeReport{
			Index: n.Index, ID: s.Self.String(), Role: s.Role.String(), ClusterKey: s.ClusterKey.String(), Prefix: s.Prefix,
			Superpeer: s.Superpeer.ID.String(), Members: len(s.Members),
			SizeEstimate: s.Size.N, SizeSource: s.Size.Source, Lookups: s.Lookups,
		}
		if sp, ok := index[s.Superpeer.ID]; ok && t.cfg.Latency != nil {
			rtt, _ := t.cfg.Latency.RTT(n.Index, sp)
			ms := millis(rtt)
			nr.RTTToSuperpeerMS = &ms
			if s.Superpeer.ID != s.Self {
				rtts = append(rtts, ms)
			}
		}
		r.Nodes = append(r.Nodes, nr)
		r.Lookups += s.Lookups
		r.LookupQueries += s.Queries
		if i == 0 || s.Size.N < r.SizeEstimate.Min {
			r.SizeEstimate.Min = s.Size.N
		}
		r.SizeEstimate.Max = max(r.SizeEstimate.Max, s.Size.N)
		r.SizeEstimate.Sources[s.Size.Source]++
		key := s.ClusterKey.String()
		if geo {
			key = s.Superpeer.ID.String()
		}
		c := byKey[key]
		if c == nil {
			c = &ClusterReport{Prefix: s.Prefix, Key: key}
			byKey[key] = c
		}
		ids[key] = append(ids[key], s.Self)
		if s.Role == overlay.RoleSuperpeer {
			c.Superpeer = s.Self.String()
		} else if c.Superpeer == "" {
			c.Superpeer = s.Superpeer.ID.String()
		}
	}
	for key, c := range byKey {
		if geo { // the superpeer first, then by ID
			first := func(p peer.ID) int {
				if p.String() == key {
					return 0
				}
				return 1
			}
			slices.SortFunc(ids[key], func(a, b peer.ID) int { return cmp.Or(cmp.Compare(first(a), first(b)), cmp.Compare(a, b)) })
		} else {
			dhtselect.SortByKey(ids[key]) // the superpeer, smallest key, first
		}
		for _, id := range ids[key] {
			c.Members = append(c.Members, id.String())
		}
		r.Clusters = append(r.Clusters, *c)
	}
	slices.SortFunc(r.Clusters, func(a, b ClusterReport) int { return strings.Compare(a.Key, b.Key) })
	for _, c := range r.Clusters {
		r.MaxClusterSize = max(r.MaxClusterSize, len(c.Members))
	}
	if len(rtts) > 0 {
		mean, p95 := stats.Mean(rtts), stats.Sort(rtts).Percentile(95)
		r.MeanRTTToSuperpeerMS, r.P95RTTToSuperpeerMS = &mean, &p95
	}
	if geo && t.cfg.Latency != nil {
		r.CoordError = t.coordError(nodes)
	}
	r.Mismatches = t.mismatchLines(nodes, t.Check())
	return r
}

// mismatchLines are the report's lines for ms: each with what the node
// says of its election and membership (electionNote).
func (t *Net) mismatchLines(nodes []indexedNode, ms []Mismatch) []string {
	byID := map[peer.ID]Member{}
	for _, n := range nodes {
		byID[n.ID()] = n.Member // the node itself: electionNote asks it for more than a Member's methods
	}
	var out []string
	for _, m := range ms {
		line := m.String()
		if n, ok := byID[m.Node]; ok {
			line += t.electionNote(n)
		}
		out = append(out, line)
	}
	return out
}

// WriteTable prints the report as a readable table of clusters.
func (r Report) WriteTable(w io.Writer) error {
	status := "converged"
	if !r.Converged {
		status = "NOT converged"
	}
	fmt.Fprintf(w, "%d peers, strategy %s, target %d superpeers, k = %d: %s in %d ms (%d lookups, %d queries)\n",
		r.N, r.Strategy, r.TargetSuperpeers, r.K, status, r.ConvergeMS, r.Lookups, r.LookupQueries)
	fmt.Fprintf(w, "network-size estimate: true %d, nodes' estimates %d..%d %v\n\n",
		r.SizeEstimate.True, r.SizeEstimate.Min, r.SizeEstimate.Max, r.SizeEstimate.Sources)
	if r.MeanRTTToSuperpeerMS != nil {
		fmt.Fprintf(w, "RTT from ordinary peers to their superpeer: mean %.1f ms, p95 %.1f ms; largest cluster %d\n\n",
			*r.MeanRTTToSuperpeerMS, *r.P95RTTToSuperpeerMS, r.MaxClusterSize)
	}
	if r.CoordError != nil {
		fmt.Fprintf(w, "coordinates: median relative error %.3f over all pairs\n\n", *r.CoordError)
	}
	if b := r.Baseline; b != nil {
		fmt.Fprintf(w, "same rows, mean / p95 ms: these superpeers ideally attached %.1f / %.1f, random %.1f / %.1f, k-median %.1f / %.1f; mean as attached %.2f× random, %.2f× k-median\n\n",
			b.IdealMeanMS, b.IdealP95MS, b.RandomMeanMS, b.RandomP95MS, b.KMedianMeanMS, b.KMedianP95MS, b.VsRandom, b.VsKMedian)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PREFIX\tSUPERPEER\tMEMBERS\tMEMBER IDS")
	for _, c := range r.Clusters {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", orDash(c.Prefix), short(c.Superpeer), len(c.Members), shortList(c.Members, 6))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range r.Mismatches {
		fmt.Fprintln(w, "mismatch:", m)
	}
	if sc := r.Scenario; sc != nil {
		fmt.Fprintf(w, "scenario %s: %d faults, failover median %.0f ms max %.0f ms (%d), detection timeout %.0f ms, coverage %.4f, split brain %.0f ms, orphans %d, election messages %v\n",
			sc.Name, len(sc.Faults), sc.FailoverMS.Median, sc.FailoverMS.Max, sc.FailoverMS.N, sc.DetectionTimeoutMS,
			sc.Coverage, sc.SplitBrainMS, sc.Orphans, sc.Messages)
	}
	return nil
}

// millis returns d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func orDash(s string) string {
	if s == "" {
		return "(all)"
	}
	return s
}

func short(id string) string {
	if len(id) > 12 {
		return "…" + id[len(id)-8:]
	}
	return id
}

func shortList(ids []string, max int) string {
	var parts []string
	for i, id := range ids {
		if i == max {
			parts = append(parts, fmt.Sprintf("+%d more", len(ids)-max))
			break
		}
		parts = append(parts, short(id))
	}
	return strings.Join(parts, " ")
}

// coordError is the median relative error of the RTTs predicted from the
// nodes' coordinates against the matrix, over all pairs with coordinates.
func (t *Net) coordError(nodes []indexedNode) *float64 {
	coords := make([]*coordinate.Coordinate, len(nodes))
	for i, n := range nodes {
		coords[i] = n.State().Coord
	}
	var errs []float64
	for i := range nodes {
		for j := i + 1; j < len(nodes); j++ {
			rtt, _ := t.cfg.Latency.RTT(nodes[i].Index, nodes[j].Index)
			if coords[i] == nil || coords[j] == nil || rtt <= 0 {
				continue
			}
			pred := geometric.Distance(coords[i], coords[j]) * float64(time.Second)
			errs = append(errs, math.Abs(pred-float64(rtt))/float64(rtt))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	med := stats.Sort(errs).Median()
	return &med
}
