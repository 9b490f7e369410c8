package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/stats"
)

// MaxCDFPoints is the most RTT samples a Figures keeps for a CDF plot.
const MaxCDFPoints = 2000

// Distribution summarises RTT samples, in milliseconds, as package stats
// defines the figures: percentiles by nearest rank, as Measure's P95 (the
// p-th percentile of m sorted samples is the ⌈p·m/100⌉-th smallest), and
// the median of an even count the mean of the two middle samples. All
// figures are 0 when Count is 0.
type Distribution struct {
	Count    int     `json:"count"`
	MinMs    float64 `json:"min_ms"`
	P5Ms     float64 `json:"p5_ms"`
	MedianMs float64 `json:"median_ms"`
	P95Ms    float64 `json:"p95_ms"`
	MaxMs    float64 `json:"max_ms"`
	MeanMs   float64 `json:"mean_ms"`
}

// Summarise returns the distribution of samples (in milliseconds); it does
// not modify samples.
func Summarise(samples []float64) Distribution {
	return summariseSorted(stats.Sort(samples))
}

func summariseSorted(v stats.Sorted[float64]) Distribution {
	return Distribution{
		Count: len(v), MinMs: v.Min(), P5Ms: v.Percentile(5), MedianMs: v.Median(),
		P95Ms: v.Percentile(95), MaxMs: v.Max(), MeanMs: stats.Mean(v),
	}
}

// CDF returns the sorted samples for a CDF plot, at most points of them
// (points < 2 means MaxCDFPoints): all of them when they are few enough,
// otherwise points evenly spaced ranks from the smallest to the largest
// (the k-th kept is the sample of rank round(k·(m−1)/(points−1)) of m). It
// does not modify samples.
func CDF(samples []float64, points int) []float64 {
	v := slices.Clone(samples)
	slices.Sort(v)
	return downsampleSorted(v, points)
}

func downsampleSorted(v []float64, points int) []float64 {
	if points < 2 {
		points = MaxCDFPoints
	}
	if len(v) <= points {
		return v
	}
	out := make([]float64, points)
	for k := range out {
		out[k] = v[int(math.Round(float64(k)*float64(len(v)-1)/float64(points-1)))]
	}
	return out
}

// Figures are the selection figures of one set of superpeers with one
// attachment, on one network; RTTs are true RTTs in milliseconds.
type Figures struct {
	// Hosts is the number of hosts n.
	Hosts int `json:"hosts"`
	// Superpeers is the number of superpeers the strategy produced, TargetS
	// the number asked for.
	Superpeers int `json:"superpeers"`
	TargetS    int `json:"target_s"`
	// Unattached counts the ordinary peers without a superpeer; they are in
	// no figure below but NearestMeanMs.
	Unattached int `json:"unattached"`
	// Clusters is the number of non-empty clusters (a superpeer and the
	// peers attached to it, the superpeer included); ClusterMean, ClusterMax
	// and ClusterCV are their mean size, largest size and coefficient of
	// variation (population standard deviation over mean), as Measure
	// computes them.
	Clusters    int     `json:"clusters"`
	ClusterMean float64 `json:"cluster_mean"`
	ClusterMax  int     `json:"cluster_max"`
	ClusterCV   float64 `json:"cluster_cv"`
	// MeanMs, P95Ms and MaxMs describe the RTT from each attached ordinary
	// peer to its own superpeer (Measure: nearest-rank P95).
	MeanMs float64 `json:"mean_ms"`
	P95Ms  float64 `json:"p95_ms"`
	MaxMs  float64 `json:"max_ms"`
	// NearestMeanMs is the spread of the superpeers: the mean, over every
	// ordinary peer (attached or not), of the RTT to its nearest superpeer,
	// whatever the capacity. It is the k-median objective divided by the
	// ordinary peers, so it does not depend on the attachment.
	NearestMeanMs float64 `json:"nearest_mean_ms"`
	// Pairwise is the distribution of the RTTs between the Superpeers·
	// (Superpeers−1)/2 pairs of distinct superpeers: well-spread superpeers
	// have few short pairs (a high P5Ms).
	Pairwise Distribution `json:"superpeer_pairwise"`
	// CDFMs holds the RTTs from the attached ordinary peers to their
	// superpeers, sorted, for a CDF plot: all of them, or MaxCDFPoints at
	// evenly spaced ranks when there are more (see CDF).
	CDFMs []float64 `json:"cdf_ms"`
}

// SelectionFigures computes the figures of superpeers with attachment attach
// on network nw, for a target of target superpeers: attach[i] is the
// superpeer of peer i, a superpeer maps to itself and a negative entry
// marks an unattached peer.
//
// It fails with ErrPlacement, naming the problem, when nw is nil, when there
// is no superpeer, when a superpeer is out of range or listed twice, when
// attach has not one entry per host, when a superpeer is not attached to
// itself, or when a peer is attached to a host that is not a superpeer.
func SelectionFigures(nw *Network, target int, superpeers, attach []int) (Figures, error) {
	if err := checkSelection(nw, superpeers, attach); err != nil {
		return Figures{}, err
	}
	f, own := figuresFrom(nw, target, superpeers, attach)
	slices.Sort(own)
	f.CDFMs = downsampleSorted(own, MaxCDFPoints)
	return f, nil
}

// checkSelection validates superpeers and attach on nw.
func checkSelection(nw *Network, superpeers, attach []int) error {
	if nw == nil {
		return fmt.Errorf("%w: no network", ErrPlacement)
	}
	n := nw.N()
	if len(superpeers) == 0 {
		return fmt.Errorf("%w: no superpeer among the %d hosts of %s", ErrPlacement, n, nw.Name)
	}
	if len(attach) != n {
		return fmt.Errorf("%w: attach has %d entries for the %d hosts of %s; want one per host", ErrPlacement, len(attach), n, nw.Name)
	}
	isSP := make([]bool, n)
	for k, s := range superpeers {
		switch {
		case s < 0 || s >= n:
			return fmt.Errorf("%w: superpeers[%d] = %d is out of range for the %d hosts of %s", ErrPlacement, k, s, n, nw.Name)
		case isSP[s]:
			return fmt.Errorf("%w: superpeers[%d] = %d is listed twice", ErrPlacement, k, s)
		}
		isSP[s] = true
	}
	for i, s := range attach {
		switch {
		case isSP[i] && s != i:
			return fmt.Errorf("%w: superpeer %d is attached to %d; a superpeer must be attached to itself", ErrPlacement, i, s)
		case s >= n:
			return fmt.Errorf("%w: peer %d is attached to %d, out of range for the %d hosts of %s", ErrPlacement, i, s, n, nw.Name)
		case s >= 0 && !isSP[s]:
			return fmt.Errorf("%w: peer %d is attached to %d, which is not a superpeer", ErrPlacement, i, s)
		}
	}
	return nil
}

// figuresFrom computes the figures of a checked selection, all but CDFMs,
// and returns the unsorted RTTs from the attached ordinary peers to their
// superpeers.
func figuresFrom(nw *Network, target int, superpeers, attach []int) (Figures, []float64) {
	n, d := nw.N(), nw.Dist()
	q := Measure(d, attach)
	f := Figures{
		Hosts: n, Superpeers: len(superpeers), TargetS: target, Unattached: q.Unattached,
		Clusters: q.Clusters, ClusterMax: q.MaxCluster, ClusterCV: q.ClusterCV,
		MeanMs: q.Mean, P95Ms: q.P95, MaxMs: q.Max,
	}
	if q.Clusters > 0 {
		f.ClusterMean = float64(n-q.Unattached) / float64(q.Clusters)
	}
	isSP := make([]bool, n)
	for _, s := range superpeers {
		isSP[s] = true
	}
	own := make([]float64, 0, n-len(superpeers))
	sum, ordinary := 0.0, 0
	for i := range n {
		if isSP[i] {
			continue
		}
		if attach[i] >= 0 {
			own = append(own, d(i, attach[i]))
		}
		best := math.Inf(1)
		for _, s := range superpeers {
			best = min(best, d(i, s))
		}
		sum += best
		ordinary++
	}
	if ordinary > 0 {
		f.NearestMeanMs = sum / float64(ordinary)
	}
	pairs := make([]float64, 0, len(superpeers)*(len(superpeers)-1)/2)
	for a, s := range superpeers {
		for _, t := range superpeers[a+1:] {
			pairs = append(pairs, d(s, t))
		}
	}
	slices.Sort(pairs)
	f.Pairwise = summariseSorted(pairs)
	return f, own
}

// StrategyResult is what a selection strategy produced on a network.
type StrategyResult struct {
	// Superpeers lists the hosts the strategy made superpeers.
	Superpeers []int
	// Attach maps every host to its superpeer by the strategy's own rule
	// (a superpeer to itself; negative for a host left unattached).
	Attach []int
	// Rounds is the number of rounds the strategy took to converge (for
	// the geometric strategy, the round of the last token pass).
	Rounds int
	// MessagesPerPeer is the number of messages the selection cost, per
	// host; each strategy says which messages it counts.
	MessagesPerPeer float64
	// Coords optionally holds a 2-D position per host for plotting (a
	// projection of the strategy's network coordinates, in ms), or nil.
	Coords [][2]float64
}

// StrategyFunc runs a selection strategy on network nw for a target of s
// superpeers, each serving at most capacity ordinary peers, seeded by seed.
// It must be deterministic given its arguments.
type StrategyFunc func(nw *Network, s, capacity int, seed uint64) (StrategyResult, error)

// Strategy is a named StrategyFunc.
type Strategy struct {
	Name string
	Run  StrategyFunc
}

// The names and kinds of the baseline rows of a SelectionCase.
const (
	RandomName  = "random"
	OfflineName = "offline"

	KindStrategy = "strategy"
	KindRandom   = "baseline-random"
	KindOffline  = "baseline-offline"
)

// SelectionCase is one case of the selection suite: strategies against the
// random and offline baselines on one network, for one target S and
// capacity, from one seed. The baselines are measured with S superpeers and
// with every other count a strategy placed (see Run).
type SelectionCase struct {
	Network *Network
	// S is the target number of superpeers.
	S int
	// Capacity is C, the most ordinary peers per superpeer, for every
	// strategy and baseline. Zero means DefaultCapacity(n, S).
	Capacity int
	// Seed seeds the strategies (each gets Seed itself), the random draws
	// and the offline placement.
	Seed uint64
	// RandomDraws is R, the number of random placements averaged. Zero
	// means 20 when the network has more than 1000 hosts, 100 otherwise.
	RandomDraws int
	// Strategies are run in order; their names must be distinct and
	// neither RandomName nor OfflineName.
	Strategies []Strategy
}

// DefaultCapacity is the capacity a SelectionCase uses when none is given:
// geometric's default (64) when S superpeers of that capacity have room for
// the n−S ordinary peers, otherwise ⌈2n/S⌉, twice the mean cluster size.
func DefaultCapacity(n, s int) int {
	c := geometric.DefaultConfig().Capacity
	if s < 1 || s*c >= n-s {
		return c
	}
	return (2*n + s - 1) / s
}

// SelectionRow is one row of a selection case: a strategy or a baseline,
// judged twice. Own uses the strategy's own attachment; Placement uses the
// strategy's superpeers with the ideal attachment (every ordinary peer
// attached to the nearest superpeer by true RTT that has room,
// geometric.AttachAllBy, as Placement's judge does), so the placement and the
// attachment are judged apart. For the baselines, Own and Placement are the
// same (their attachment is the ideal one).
//
// The ratios divide a mean RTT to the superpeer (MeanMs) by the
// Placement.MeanMs of the same case's random or offline baseline with as
// many superpeers as the row placed (BaselineSuperpeers): the target S for
// a strategy that placed S, otherwise its own count m (the dht strategy
// places up to 2^⌈log₂ S⌉), so that a strategy is never judged against fewer or
// more superpeers than it used. Below 1 is better than the baseline. A
// ratio is 0 when the baseline's mean is 0 (no ordinary peers). All fields
// but WallMs are deterministic from the case.
type SelectionRow struct {
	Network  string `json:"network"`
	Hosts    int    `json:"hosts"`
	Strategy string `json:"strategy"`
	Kind     string `json:"kind"`
	// Method says how a baseline was computed ("mean of 100 draws", or
	// the offline algorithm: OfflineKMedian or OfflineKMedoids).
	Method   string `json:"method,omitempty"`
	TargetS  int    `json:"target_s"`
	Capacity int    `json:"capacity"`
	Seed     uint64 `json:"seed"`

	Rounds          int     `json:"rounds"`
	MessagesPerPeer float64 `json:"messages_per_peer"`

	// Own and Placement: see the type's comment. For the random baseline
	// every float figure is the mean over the draws, Unattached and
	// ClusterMax are the largest over the draws, and CDFMs is drawn from
	// the samples of all the draws pooled.
	Own       Figures `json:"own"`
	Placement Figures `json:"placement"`

	// BaselineSuperpeers is the superpeer count of the baselines the
	// ratios below were measured against: Placement.Superpeers, the count
	// the row placed.
	BaselineSuperpeers       int     `json:"baseline_superpeers"`
	OwnMeanOverRandom        float64 `json:"own_mean_over_random"`
	OwnMeanOverOffline       float64 `json:"own_mean_over_offline"`
	PlacementMeanOverRandom  float64 `json:"placement_mean_over_random"`
	PlacementMeanOverOffline float64 `json:"placement_mean_over_offline"`

	// Superpeers lists the superpeers (nil for the random baseline),
	// Attach a strategy's own attachment (nil for the baselines), and
	// Coords the strategy's 2-D positions for plotting, if it gave any.
	Superpeers []int        `json:"superpeers,omitempty"`
	Attach     []int        `json:"attach,omitempty"`
	Coords     [][2]float64 `json:"coords,omitempty"`

	// WallMs is the wall time the row took to compute (the strategy run
	// and the judging; for the random baseline, all its draws), in ms.
	WallMs float64 `json:"wall_ms"`
}

// Label names the row for a table or a plot legend: its Strategy, and for
// a baseline with another superpeer count than the target S, the count too
// ("random (16 superpeers)").
func (r SelectionRow) Label() string {
	if r.Kind != KindStrategy && r.Placement.Superpeers != r.TargetS {
		return fmt.Sprintf("%s (%d superpeers)", r.Strategy, r.Placement.Superpeers)
	}
	return r.Strategy
}

// Run runs the case: every strategy, then the random and offline baselines
// with S superpeers, then, for every other count m of superpeers that a
// strategy placed, in increasing order, the random and offline baselines
// with m superpeers (each count's baselines are computed once, whatever
// the number of strategies that placed it). It returns one row per
// strategy, in order, then the baseline rows, random before offline for
// each count, with the ratios filled in: each row's ratios are against the
// baselines with its own superpeer count (see SelectionRow). A baseline
// row's TargetS is the case's S; its figures' Superpeers and TargetS are
// its count.
//
// The random baseline with m superpeers draws RandomDraws placements from
// a generator seeded by the case's Seed and m, the offline one from a
// generator seeded by Seed and 0x0ff1 ^ m; both attach with the case's
// capacity C. With m > S there is more room than with S. With m < S the m
// superpeers may have no room for the n−m ordinary peers (m·C < n−m): the
// baselines are then judged as the strategy's placement is, with the same
// C, so m·C peers are attached in each, the others are counted in
// Unattached (for the random baseline, the most over the draws) and left
// out of the RTT figures.
//
// It fails with an error wrapping ErrPlacement when the network is missing,
// S is not within 1..n, the capacity is below 1 or leaves no room for the
// n−S ordinary peers (S·C < n−S), RandomDraws is negative, a strategy name
// is empty, repeated or a baseline's, or a strategy's result is bad (see
// SelectionFigures; or Coords not one per host); and with the strategy's
// error, named, when a strategy fails.
func (c SelectionCase) Run() ([]SelectionRow, error) {
	nw := c.Network
	if nw == nil {
		return nil, fmt.Errorf("%w: selection case without a network", ErrPlacement)
	}
	n := nw.N()
	if c.S < 1 || c.S > n {
		return nil, fmt.Errorf("%w: S = %d superpeers among the %d hosts of %s; want 1 <= S <= n", ErrPlacement, c.S, n, nw.Name)
	}
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity(n, c.S)
	}
	if c.Capacity < 1 || c.S*c.Capacity < n-c.S {
		return nil, fmt.Errorf("%w: capacity C = %d is too small: %d ordinary peers but S × C = %d × %d = %d places; want C >= %d",
			ErrPlacement, c.Capacity, n-c.S, c.S, c.Capacity, c.S*c.Capacity, max(1, (n-c.S+c.S-1)/c.S))
	}
	switch {
	case c.RandomDraws < 0:
		return nil, fmt.Errorf("%w: RandomDraws = %d; want >= 0 (0 for the default)", ErrPlacement, c.RandomDraws)
	case c.RandomDraws == 0 && n > 1000:
		c.RandomDraws = 20
	case c.RandomDraws == 0:
		c.RandomDraws = 100
	}
	seen := map[string]bool{RandomName: true, OfflineName: true}
	for k, s := range c.Strategies {
		if s.Name == "" || seen[s.Name] || s.Run == nil {
			return nil, fmt.Errorf("%w: strategy %d is named %q (with a function: %v); want a distinct name other than %q and %q, and a function",
				ErrPlacement, k, s.Name, s.Run != nil, RandomName, OfflineName)
		}
		seen[s.Name] = true
	}

	base := SelectionRow{Network: nw.Name, Hosts: n, TargetS: c.S, Capacity: c.Capacity, Seed: c.Seed}
	var rows []SelectionRow
	for _, s := range c.Strategies {
		start := time.Now()
		res, err := s.Run(nw, c.S, c.Capacity, c.Seed)
		if err != nil {
			return nil, fmt.Errorf("strategy %q on %s, S = %d: %w", s.Name, nw.Name, c.S, err)
		}
		row := base
		row.Strategy, row.Kind = s.Name, KindStrategy
		row.Rounds, row.MessagesPerPeer = res.Rounds, res.MessagesPerPeer
		row.Superpeers, row.Attach, row.Coords = slices.Clone(res.Superpeers), slices.Clone(res.Attach), res.Coords
		if res.Coords != nil && len(res.Coords) != n {
			return nil, fmt.Errorf("%w: strategy %q gave %d coordinates for %d hosts", ErrPlacement, s.Name, len(res.Coords), n)
		}
		if math.IsNaN(res.MessagesPerPeer) || math.IsInf(res.MessagesPerPeer, 0) {
			return nil, fmt.Errorf("%w: strategy %q gave %v messages per peer", ErrPlacement, s.Name, res.MessagesPerPeer)
		}
		if row.Own, err = SelectionFigures(nw, c.S, res.Superpeers, res.Attach); err != nil {
			return nil, fmt.Errorf("strategy %q on %s, S = %d: %w", s.Name, nw.Name, c.S, err)
		}
		if row.Placement, err = idealFigures(nw, c.S, res.Superpeers, c.Capacity); err != nil {
			return nil, fmt.Errorf("strategy %q on %s, S = %d: %w", s.Name, nw.Name, c.S, err)
		}
		row.BaselineSuperpeers = row.Placement.Superpeers
		row.WallMs = msSince(start)
		rows = append(rows, row)
	}

	// The baseline counts: S, then the others the strategies placed.
	counts := []int{c.S}
	for _, r := range rows {
		if !slices.Contains(counts, r.BaselineSuperpeers) {
			counts = append(counts, r.BaselineSuperpeers)
		}
	}
	slices.Sort(counts[1:])
	means := make(map[int][2]float64, len(counts)) // count -> random, offline Placement.MeanMs
	for _, m := range counts {
		random, offline, err := c.baselines(base, m)
		if err != nil {
			return nil, err
		}
		means[m] = [2]float64{random.Placement.MeanMs, offline.Placement.MeanMs}
		rows = append(rows, random, offline)
	}
	for k := range rows {
		r := &rows[k]
		rm, om := means[r.BaselineSuperpeers][0], means[r.BaselineSuperpeers][1]
		r.OwnMeanOverRandom, r.OwnMeanOverOffline = ratio(r.Own.MeanMs, rm), ratio(r.Own.MeanMs, om)
		r.PlacementMeanOverRandom, r.PlacementMeanOverOffline = ratio(r.Placement.MeanMs, rm), ratio(r.Placement.MeanMs, om)
	}
	return rows, nil
}

// baselines returns the random and offline baseline rows of the case with
// m superpeers (see Run), from base, without their ratios. The case's
// capacity and draws must be set.
func (c SelectionCase) baselines(base SelectionRow, m int) (random, offline SelectionRow, err error) {
	nw := c.Network
	start := time.Now()
	random = base
	random.Strategy, random.Kind, random.BaselineSuperpeers = RandomName, KindRandom, m
	random.Method = fmt.Sprintf("mean of %d draws", c.RandomDraws)
	if random.Placement, err = randomFigures(nw, m, c.Capacity, c.RandomDraws, rand.New(rand.NewPCG(c.Seed, uint64(m)))); err != nil {
		return random, offline, fmt.Errorf("random baseline with %d superpeers on %s: %w", m, nw.Name, err)
	}
	random.Own = random.Placement
	random.WallMs = msSince(start)

	start = time.Now()
	offline = base
	offline.Strategy, offline.Kind, offline.BaselineSuperpeers = OfflineName, KindOffline, m
	sp, method, err := OfflinePlacement(nw.N(), nw.Dist(), m, rand.New(rand.NewPCG(c.Seed, 0x0ff1^uint64(m))))
	if err != nil {
		return random, offline, fmt.Errorf("offline baseline with %d superpeers on %s: %w", m, nw.Name, err)
	}
	offline.Method, offline.Superpeers = method, sp
	if offline.Placement, err = idealFigures(nw, m, sp, c.Capacity); err != nil {
		return random, offline, fmt.Errorf("offline baseline with %d superpeers on %s: %w", m, nw.Name, err)
	}
	offline.Own = offline.Placement
	offline.WallMs = msSince(start)
	return random, offline, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func msSince(t time.Time) float64 { return float64(time.Since(t)) / float64(time.Millisecond) }

// idealAttach attaches every ordinary peer to the nearest superpeer by true
// RTT that has room (geometric.AttachAllBy). When there is not room for all
// (a strategy that made too few superpeers), the peers left out are
// unattached (-1) and no error is returned.
func idealAttach(nw *Network, superpeers []int, capacity int) ([]int, error) {
	a, err := geometric.AttachAllBy(nw.N(), nw.Dist(), superpeers, capacity)
	if err != nil && !(errors.Is(err, geometric.ErrNoRoom) && a != nil) {
		return nil, fmt.Errorf("%w: ideal attachment: %w", ErrPlacement, err)
	}
	return a, nil
}

// idealFigures returns the figures of superpeers with the ideal attachment.
func idealFigures(nw *Network, target int, superpeers []int, capacity int) (Figures, error) {
	a, err := idealAttach(nw, superpeers, capacity)
	if err != nil {
		return Figures{}, err
	}
	return SelectionFigures(nw, target, superpeers, a)
}

// randomFigures returns the mean figures of draws random placements of s
// superpeers, each attached ideally.
func randomFigures(nw *Network, s, capacity, draws int, rng *rand.Rand) (Figures, error) {
	mean := Figures{Hosts: nw.N(), Superpeers: s, TargetS: s}
	var pooled []float64
	w := 1 / float64(draws)
	for range draws {
		sp, err := RandomPlacement(nw.N(), s, rng)
		if err != nil {
			return Figures{}, err
		}
		a, err := idealAttach(nw, sp, capacity)
		if err != nil {
			return Figures{}, err
		}
		f, own := figuresFrom(nw, s, sp, a)
		pooled = append(pooled, own...)
		mean.Unattached = max(mean.Unattached, f.Unattached)
		mean.Clusters = f.Clusters
		mean.ClusterMean += w * f.ClusterMean
		mean.ClusterMax = max(mean.ClusterMax, f.ClusterMax)
		mean.ClusterCV += w * f.ClusterCV
		mean.MeanMs += w * f.MeanMs
		mean.P95Ms += w * f.P95Ms
		mean.MaxMs += w * f.MaxMs
		mean.NearestMeanMs += w * f.NearestMeanMs
		p, fp := &mean.Pairwise, f.Pairwise
		p.Count = fp.Count
		p.MinMs += w * fp.MinMs
		p.P5Ms += w * fp.P5Ms
		p.MedianMs += w * fp.MedianMs
		p.P95Ms += w * fp.P95Ms
		p.MaxMs += w * fp.MaxMs
		p.MeanMs += w * fp.MeanMs
	}
	slices.Sort(pooled)
	mean.CDFMs = downsampleSorted(pooled, MaxCDFPoints)
	return mean, nil
}

// GeometricStrategy returns the strategy "geometric": geometric.Simulate
// (coordinates fitted from sampled RTTs, then the token dynamics, then the
// search on measured RTTs: swaps inside clusters and relocations between
// them, then attachment) with cfg's settings, its Tokens, Capacity and
// Seed replaced by the case's S, capacity and seed. cfg.CoordRounds of 0
// is Simulate's default (1000); at 10,000 hosts 200 keeps a run near a
// minute with the current Simulate. CoordinatesOnlyStrategy is the same
// without the search.
//
// Its result: Attach is Simulate's own attachment (nearest with room, by
// coordinates, or with the search by the RTTs measured to the nearest few
// superpeers); Rounds is the round of the last token pass (LastPass:
// after it every token holds still for the dwell time, not counted); and
// MessagesPerPeer counts the messages a peer sends: the RTT probes of the
// coordinate fit (in each of CoordRounds rounds every peer pings one peer
// and, on average, answers one ping: 2 messages; none when cfg.Coords
// replaces the fit), the probes of the search (SwapProbes, 2 messages
// each) and the token passes, Passes/n. The gossip of token positions,
// the members' reports and the superpeers' summaries are not counted:
// the simulator assumes every holder hears every position before each
// tick. Coords are the fitted coordinates' Euclidean parts projected on
// their two principal axes, in ms (heights left out).
func GeometricStrategy(cfg geometric.SimConfig) Strategy {
	return Strategy{Name: "geometric", Run: func(nw *Network, s, capacity int, seed uint64) (StrategyResult, error) {
		c := cfg
		c.Tokens, c.Capacity, c.Seed = s, capacity, seed
		res, err := geometric.Simulate(nw.N(), nw.RTT, c)
		if err != nil {
			return StrategyResult{}, err
		}
		return StrategyResult{
			Superpeers: res.Superpeers, Attach: res.Attach, Rounds: res.LastPass,
			MessagesPerPeer: float64(2*probeRounds(c, nw.N())) + 2*res.SwapProbes + float64(res.Passes+res.Swaps)/float64(nw.N()),
			Coords:          Project2D(res.Coords),
		}, nil
	}}
}

// CoordinatesOnlyStrategy returns the strategy "geometric (coordinates)":
// GeometricStrategy without the search on measured RTTs (SwapRounds < 0),
// the placement of the coordinates and tokens alone, attached by
// coordinates.
func CoordinatesOnlyStrategy() Strategy {
	s := GeometricStrategy(geometric.SimConfig{SwapRounds: -1})
	s.Name = "geometric (coordinates)"
	return s
}

// probeRounds is the number of rounds of coordinate fitting Simulate runs
// with cfg on n peers.
func probeRounds(cfg geometric.SimConfig, n int) int {
	switch {
	case cfg.Coords != nil:
		return 0
	case cfg.CoordRounds == 0:
		return geometric.DefaultCoordRounds(n)
	}
	return cfg.CoordRounds
}

// Project2D projects the Euclidean parts (Vec, in seconds) of coordinates
// onto their two principal axes, centred on their mean, in milliseconds, for
// plotting: the 2-D picture that keeps the most of their spread. Heights and
// adjustments are left out. It returns nil for no coordinates or a nil
// one; a coordinate of fewer than 2 dimensions is padded with zeros. The
// sign of each axis is fixed so that its largest component is positive,
// which makes the result deterministic.
func Project2D(coords []*coordinate.Coordinate) [][2]float64 {
	if len(coords) == 0 {
		return nil
	}
	dim := 2
	for _, c := range coords {
		if c == nil {
			return nil
		}
		dim = max(dim, len(c.Vec))
	}
	at := func(c *coordinate.Coordinate, k int) float64 {
		if k < len(c.Vec) {
			return c.Vec[k]
		}
		return 0
	}
	mean := make([]float64, dim)
	for _, c := range coords {
		for k := range dim {
			mean[k] += at(c, k) / float64(len(coords))
		}
	}
	cov := make([][]float64, dim)
	for a := range cov {
		cov[a] = make([]float64, dim)
	}
	for _, c := range coords {
		for a := range dim {
			xa := at(c, a) - mean[a]
			for b := a; b < dim; b++ {
				cov[a][b] += xa * (at(c, b) - mean[b])
			}
		}
	}
	for a := range dim {
		for b := range a {
			cov[a][b] = cov[b][a]
		}
	}
	axes := principalAxes(cov, 2)
	out := make([][2]float64, len(coords))
	for i, c := range coords {
		for p, ax := range axes {
			x := 0.0
			for k := range dim {
				x += (at(c, k) - mean[k]) * ax[k]
			}
			out[i][p] = x * 1000
		}
	}
	return out
}

// principalAxes returns the m eigenvectors of the symmetric matrix a (which
// it overwrites) of largest eigenvalues, by cyclic Jacobi rotations.
func principalAxes(a [][]float64, m int) [][]float64 {
	dim := len(a)
	v := make([][]float64, dim) // columns are the eigenvectors
	for i := range v {
		v[i] = make([]float64, dim)
		v[i][i] = 1
	}
	for range 100 {
		off := 0.0
		for p := range dim {
			for q := p + 1; q < dim; q++ {
				off += a[p][q] * a[p][q]
			}
		}
		if off < 1e-30 {
			break
		}
		for p := range dim {
			for q := p + 1; q < dim; q++ {
				if a[p][q] == 0 {
					continue
				}
				theta := (a[q][q] - a[p][p]) / (2 * a[p][q])
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				cs := 1 / math.Sqrt(t*t+1)
				sn := t * cs
				for k := range dim { // a = a·J
					akp, akq := a[k][p], a[k][q]
					a[k][p], a[k][q] = cs*akp-sn*akq, sn*akp+cs*akq
				}
				for k := range dim { // a = Jᵀ·a
					apk, aqk := a[p][k], a[q][k]
					a[p][k], a[q][k] = cs*apk-sn*aqk, sn*apk+cs*aqk
				}
				for k := range dim { // v = v·J
					vkp, vkq := v[k][p], v[k][q]
					v[k][p], v[k][q] = cs*vkp-sn*vkq, sn*vkp+cs*vkq
				}
			}
		}
	}
	order := make([]int, dim)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(a[y][y], a[x][x]) })
	axes := make([][]float64, min(m, dim))
	for p := range axes {
		ax := make([]float64, dim)
		big := 0
		for k := range dim {
			ax[k] = v[k][order[p]]
			if math.Abs(ax[k]) > math.Abs(ax[big]) {
				big = k
			}
		}
		if ax[big] < 0 {
			for k := range ax {
				ax[k] = -ax[k]
			}
		}
		axes[p] = ax
	}
	return axes
}

// WriteSelectionTable prints rows as a table: for each row (named by its
// Label) its superpeers, the RTT to the own superpeer (mean, p95), the
// placement's RTT with the ideal attachment (mean, p95), the spread (mean
// RTT to the nearest superpeer; median and p5 of the pairwise superpeer
// RTTs), the cluster sizes, the superpeer count of the baselines the ratios
// are against, the two placement ratios and the own one, rounds, messages
// per peer and wall time.
func WriteSelectionTable(w io.Writer, rows []SelectionRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "network\tS\tC\tstrategy\tsuperpeers\town mean ms\tp95 ms\tplacement mean ms\tp95 ms\tnearest mean ms\tpair p5 ms\tpair median ms\tmax cluster\tcluster CV\tbaseline superpeers\tplacement/random\tplacement/offline\town/offline\trounds\tmsgs/peer\twall s\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%.2f\t%d\t%.2f\t%.2f\t%.2f\t%d\t%.2f\t%.2f\t\n",
			r.Network, r.TargetS, r.Capacity, r.Label(), r.Own.Superpeers, r.Own.MeanMs, r.Own.P95Ms,
			r.Placement.MeanMs, r.Placement.P95Ms, r.Placement.NearestMeanMs, r.Placement.Pairwise.P5Ms, r.Placement.Pairwise.MedianMs,
			r.Placement.ClusterMax, r.Placement.ClusterCV, r.BaselineSuperpeers, r.PlacementMeanOverRandom, r.PlacementMeanOverOffline, r.OwnMeanOverOffline,
			r.Rounds, r.MessagesPerPeer, r.WallMs/1000)
	}
	return tw.Flush()
}
