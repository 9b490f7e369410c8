package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
	"github.com/superpeer/superpeer/testnet/nodesim"
)

// The repair suite: how each election algorithm of package classic keeps a
// cluster served when it runs inside the node machine (package
// overlay/node), the very code a live node runs, on the node simulator of
// testnet/nodesim, in virtual time.
//
// Each run is a nodesim network of n nodes that form one cluster
// (node.Config{Target: dhtselect.Target{Superpeers: 1}, Election: algo},
// every other field the live node's default: announce and re-evaluate
// every 5 s, an election tick of 100 ms). The machines decide everything
// themselves, failure detection included: a follower campaigns when its
// leader's heartbeats stop for one failure-detection timeout T (three
// heartbeats plus four RTTs, 1.9 s at the RTT of 100 ms: Machine.Detection),
// when its connection to the leader drops (nodesim reports it one RTT
// after the crash), and after two timeouts without a leader. Echo, which
// has no heartbeats, is repaired by the last two rules: there is no
// failure detector written for the benchmark any more. The rings' timeout
// is T as for every algorithm: the node machine does not raise it to a
// turn of the ring, so a ring whose turn takes longer than T (n·RTT/2 >
// T) may never elect; such a row carries an Error instead of figures.
//
// What nodesim stands in for (its package comment lists the oracles):
// election messages take half the RTT (one constant RTT between every two
// nodes here, no loss); membership views change a gossip delay after an
// announcement and forget a crashed node one membership TTL (three
// announce intervals) after it was last heard; connections drop one RTT
// after a crash; the DHT lookup of the cluster key is answered by an
// oracle (the live node closest to the key, after three round trips).
//
// Failover: the network converges (every node served by one superpeer that
// claims the role, no second claimer), runs 5 T, and its superpeer crashes
// at a random phase of its heartbeat (nodesim.Observer.CrashSuperpeer). The
// failover time is from the crash until every live node that named the
// crashed superpeer is covered again (Observer.Failovers: its superpeer is
// alive, claims the role and is in its cluster), sampled every 20 ms. A
// trial not repaired within 30 T of the crash is unrepaired. T is the
// machines' own Detection() at the crash.
//
// Churn: after convergence and 5 T, members crash at random, a Poisson
// process of rate RatePerMin·n per minute, each a live member drawn
// uniformly (never the last live one), and each restarts Downtime later
// with its identity and its disk (nodesim.Restart). Coverage is
// Observer.Coverage over the window: the mean, over samples every 100 ms,
// of the fraction of the joined live nodes that are covered; split brain
// is Observer.SplitTime, the time some cluster had two live claimers. The
// failovers of the superpeers crashed in the window are followed for 30 T
// past its end.
//
// Wall time: a failover trial is a few hundred thousand events; the
// default suite (8 algorithms × 2 sizes × 20 trials, and churn at 3 rates
// for 10 virtual minutes each) takes a few minutes on 2 cores.

// ErrRepairConfig is wrapped by every error Repair returns for a bad
// RepairConfig; the message names the field.
var ErrRepairConfig = errors.New("bench: bad repair config")

// ErrRepair reports a cluster that did not converge on a first superpeer
// within 5 virtual minutes: the algorithm cannot work with the node
// machine's timing (RepairRow.Error says so), or a fault in a machine or
// in the suite.
var ErrRepair = errors.New("bench: repair suite could not start")

// Defaults of RepairConfig.
var (
	// DefaultRepairSizes are the cluster sizes when RepairConfig.Sizes is
	// empty.
	DefaultRepairSizes = []int{16, 64}
	// DefaultChurnRates are the churn rates when RepairConfig.ChurnRates
	// is empty: 1 %, 5 % and 10 % of the members crash per minute.
	DefaultChurnRates = []float64{0.01, 0.05, 0.10}
)

// Defaults of RepairConfig, continued.
const (
	DefaultRepairTrials  = 20
	DefaultChurnDuration = 10 * time.Minute
	DefaultChurnDowntime = 30 * time.Second
	DefaultRepairTick    = 100 * time.Millisecond // the overlay's ElectionTick
	// MaxRepairN is the largest cluster size Repair accepts.
	MaxRepairN = 4096
)

// Phases of a repair run, in failure-detection timeouts T, and the
// observers' sample periods.
const (
	repairWarm        = 5  // with a superpeer before the crash or the churn
	repairLimit       = 30 // from the crash to the repair, at most
	repairConverge    = 5 * time.Minute
	repairSample      = 20 * time.Millisecond
	repairChurnSample = 100 * time.Millisecond
)

// RepairConfig configures Repair. The zero value runs the default suite.
type RepairConfig struct {
	// Algorithms are the algorithms to measure, named as by
	// classic.Algorithms. Empty means all of them.
	Algorithms []string
	// Sizes are the cluster sizes n, each 3 to MaxRepairN. Empty means
	// DefaultRepairSizes (16, 64).
	Sizes []int
	// Trials is the number of failover trials per algorithm and size,
	// each with its own seed. Zero means DefaultRepairTrials (20).
	Trials int
	// ChurnRates are the churn rates: the fraction of the members that
	// crash per minute, each >= 0 (0 gives a run without faults). Empty
	// means DefaultChurnRates (1 %, 5 %, 10 %).
	ChurnRates []float64
	// ChurnDuration is the virtual time each churn run is measured. Zero
	// means DefaultChurnDuration (10 min).
	ChurnDuration time.Duration
	// Downtime is how long a crashed member stays down before it
	// restarts. Zero means DefaultChurnDowntime (30 s).
	Downtime time.Duration
	// Seed seeds everything: the simulator, the trials' crash times and
	// the churn. The same config gives the same rows.
	Seed uint64
	// RTT is the round-trip time between every two nodes. Zero means
	// nodesim.DefaultRTT (100 ms).
	RTT time.Duration
	// Tick is the machines' election tick. Zero means DefaultRepairTick
	// (100 ms). The heartbeat (node.HeartbeatTicks ticks) and the
	// failure-detection timeout follow from it and from the RTT by the
	// node machine's rule.
	Tick time.Duration
}

// RepairRow is one algorithm at one cluster size: its failover after a
// superpeer crash and its behaviour under each churn rate.
type RepairRow struct {
	Algorithm string `json:"algorithm"`
	N         int    `json:"n"`
	// TickMs, HeartbeatMs and TimeoutMs are the timing: the election
	// tick, the leaders' heartbeat period and the failure-detection
	// timeout T the machines use (the largest Detection() seen at a
	// crash).
	TickMs      float64 `json:"tick_ms"`
	HeartbeatMs float64 `json:"heartbeat_ms"`
	TimeoutMs   float64 `json:"timeout_ms"`
	// Failover is the repair of one superpeer crash, over the trials.
	Failover FailoverStats `json:"failover"`
	// Churn has one entry per churn rate, in the order of ChurnRates.
	Churn []ChurnStats `json:"churn"`
	// Error, when not empty, says why the row has no figures: a run in
	// which the cluster was never served by one superpeer (ErrRepair).
	Error string `json:"error,omitempty"`
}

// FailoverStats sums up the failover trials of one algorithm and size. An
// unrepaired trial counts as infinitely long; a median, p95 or maximum
// that is infinite is reported as -1.
type FailoverStats struct {
	Trials int `json:"trials"`
	// Unrepaired counts the trials in which a follower of the crashed
	// superpeer was still not covered 30 T after the crash.
	Unrepaired int `json:"unrepaired"`
	// MedianMs, P95Ms and MaxMs are the time from the crash until every
	// follower of the crashed superpeer is covered again; MedianTimeouts,
	// P95Timeouts and MaxTimeouts the same in failure-detection timeouts T
	// (each trial's time divided by its T).
	MedianMs       float64 `json:"median_ms"`
	P95Ms          float64 `json:"p95_ms"`
	MaxMs          float64 `json:"max_ms"`
	MedianTimeouts float64 `json:"median_timeouts"`
	P95Timeouts    float64 `json:"p95_timeouts"`
	MaxTimeouts    float64 `json:"max_timeouts"`
	// MedianMessages is the median number of election messages
	// (heartbeats and their acknowledgements left out) the machines sent
	// from the crash to the repair, over the repaired trials.
	MedianMessages float64 `json:"median_messages"`
}

// ChurnStats is one churn run.
type ChurnStats struct {
	// RatePerMin is the fraction of the members that crash per minute.
	RatePerMin float64 `json:"rate_per_min"`
	// DurationS is the virtual time measured.
	DurationS float64 `json:"duration_s"`
	// Crashes counts the crashes in the window, LeaderCrashes those of a
	// node that claimed the superpeer role.
	Crashes       int `json:"crashes"`
	LeaderCrashes int `json:"leader_crashes"`
	// Coverage is the mean fraction of the joined live nodes covered
	// (nodesim.Observer.Coverage) over the window; MaxOrphans the most
	// joined nodes not covered in one sample.
	Coverage   float64 `json:"coverage"`
	MaxOrphans int     `json:"max_orphans"`
	// SplitBrainMs is the time in the window during which two or more
	// live nodes claimed the cluster (Observer.SplitTime), and
	// SplitBrainFrac that as a fraction of the window.
	SplitBrainMs   float64 `json:"split_brain_ms"`
	SplitBrainFrac float64 `json:"split_brain_frac"`
	// FailoverMedianTimeouts and FailoverMaxTimeouts are the failovers of
	// the superpeers crashed in the window, in T (-1 when none);
	// Unrepaired those not repaired 30 T after the window.
	FailoverMedianTimeouts float64 `json:"failover_median_timeouts"`
	FailoverMaxTimeouts    float64 `json:"failover_max_timeouts"`
	Unrepaired             int     `json:"unrepaired"`
	// MsgsPerMemberPerS is every election message sent in the window per
	// member (n) per second; ElectionMsgsPerMemberPerS leaves out the
	// heartbeats and their acknowledgements.
	MsgsPerMemberPerS         float64 `json:"msgs_per_member_per_s"`
	ElectionMsgsPerMemberPerS float64 `json:"election_msgs_per_member_per_s"`
}

// Repair runs the repair suite (see the comment at the top of repair.go)
// for each algorithm of cfg.Algorithms and each n of cfg.Sizes; rows come
// algorithm by algorithm, sizes in the given order. A bad config gives an
// error wrapping ErrRepairConfig. A row whose cluster never converged on
// one superpeer has its Error set, and the rows after it still run.
func Repair(cfg RepairConfig) ([]RepairRow, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	var rows []RepairRow
	for _, algo := range cfg.Algorithms {
		for _, n := range cfg.Sizes {
			row, err := repairOne(cfg, algo, n)
			if err != nil {
				return rows, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// fill checks cfg and fills in the defaults.
func (cfg *RepairConfig) fill() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrRepairConfig, fmt.Sprintf(format, args...))
	}
	var err error
	if cfg.Algorithms, err = checkAlgorithms(ErrRepairConfig, cfg.Algorithms); err != nil {
		return err
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = slices.Clone(DefaultRepairSizes)
	}
	for i, n := range cfg.Sizes {
		if n < 3 || n > MaxRepairN {
			return bad("Sizes[%d] = %d: want 3 to %d members", i, n, MaxRepairN)
		}
	}
	switch {
	case cfg.Trials < 0:
		return bad("Trials = %d is negative; 0 means %d", cfg.Trials, DefaultRepairTrials)
	case cfg.Trials == 0:
		cfg.Trials = DefaultRepairTrials
	}
	if len(cfg.ChurnRates) == 0 {
		cfg.ChurnRates = slices.Clone(DefaultChurnRates)
	}
	for i, r := range cfg.ChurnRates {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return bad("ChurnRates[%d] = %v: want a fraction of the members per minute, >= 0", i, r)
		}
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ChurnDuration", &cfg.ChurnDuration, DefaultChurnDuration},
		{"Downtime", &cfg.Downtime, DefaultChurnDowntime},
		{"RTT", &cfg.RTT, nodesim.DefaultRTT},
		{"Tick", &cfg.Tick, DefaultRepairTick},
	}
	for _, d := range durations {
		switch {
		case *d.v < 0:
			return bad("%s = %v is negative; 0 means %v", d.name, *d.v, d.def)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	return nil
}

// repairNet is the setting of one algorithm at one size.
type repairNet struct {
	algo      string
	n         int
	rtt, tick time.Duration
}

// config is the nodesim configuration of one run.
func (r repairNet) config(seed uint64) nodesim.Config {
	c := nodesim.Config{N: r.n, Seed: seed, Node: node.Config{
		Target: dhtselect.Target{Superpeers: 1}, Election: r.algo, ElectionTick: r.tick}}
	if r.rtt != nodesim.DefaultRTT {
		c.Latency = latency.Constant(r.n, r.rtt) // restarts keep their index: n hosts suffice
	}
	return c
}

func repairOne(cfg RepairConfig, algo string, n int) (RepairRow, error) {
	net := repairNet{algo: algo, n: n, rtt: cfg.RTT, tick: cfg.Tick}
	row := RepairRow{
		Algorithm: algo, N: n,
		TickMs: durMs(net.tick), HeartbeatMs: durMs(node.HeartbeatTicks * net.tick),
	}
	base := cfg.Seed ^ electionAlgoHash(algo) ^ uint64(n)<<40
	var times []time.Duration // math.MaxInt64 for unrepaired
	var inT, msgs []float64   // math.Inf(1) for unrepaired
	for trial := range cfg.Trials {
		tr, err := net.failover(base ^ uint64(trial+1)*0x9e3779b97f4a7c15)
		if err != nil {
			return row.failed(err)
		}
		row.TimeoutMs = max(row.TimeoutMs, durMs(tr.timeout))
		times = append(times, tr.took)
		if tr.took == math.MaxInt64 {
			row.Failover.Unrepaired++
			inT = append(inT, math.Inf(1))
			continue
		}
		inT = append(inT, float64(tr.took)/float64(tr.timeout))
		msgs = append(msgs, float64(tr.messages))
	}
	f := &row.Failover
	f.Trials = cfg.Trials
	slices.Sort(times)
	slices.Sort(inT)
	f.MedianMs, f.P95Ms, f.MaxMs = msOrInf(medianDur(times)), msOrInf(p95(times)), msOrInf(times[len(times)-1])
	f.MedianTimeouts, f.P95Timeouts, f.MaxTimeouts = orInf((inT[(len(inT)-1)/2]+inT[len(inT)/2])/2), orInf(p95(inT)), orInf(inT[len(inT)-1])
	if len(msgs) > 0 {
		slices.Sort(msgs)
		f.MedianMessages = (msgs[(len(msgs)-1)/2] + msgs[len(msgs)/2]) / 2
	}
	for k, rate := range cfg.ChurnRates {
		c, err := net.churn(base^uint64(k+1)<<20^0xc4c4, rate, cfg.ChurnDuration, cfg.Downtime)
		if err != nil {
			return row.failed(err)
		}
		row.Churn = append(row.Churn, c)
	}
	return row, nil
}

// failed records err, when it is ErrRepair (a cluster that never had one
// superpeer), as the row's Error with what was measured so far cleared,
// and returns the row; any other error is returned.
func (r RepairRow) failed(err error) (RepairRow, error) {
	if !errors.Is(err, ErrRepair) {
		return r, err
	}
	r.Failover, r.Churn, r.Error = FailoverStats{}, nil, err.Error()
	return r, nil
}

// medianDur is the median of sorted durations; with one of the two middle
// ones infinite (math.MaxInt64), it is infinite.
func medianDur(sorted []time.Duration) time.Duration {
	a, b := sorted[(len(sorted)-1)/2], sorted[len(sorted)/2]
	if a == math.MaxInt64 || b == math.MaxInt64 {
		return math.MaxInt64
	}
	return (a + b) / 2
}

// p95 is the 95th percentile of sorted values: the smallest value at or
// above which lie at least 5 % of them (nearest rank).
func p95[T any](sorted []T) T {
	return sorted[max(0, int(math.Ceil(0.95*float64(len(sorted))))-1)]
}

// msOrInf is d in milliseconds, -1 for infinite (math.MaxInt64).
func msOrInf(d time.Duration) float64 {
	if d == math.MaxInt64 {
		return -1
	}
	return durMs(d)
}

// orInf is x, -1 for infinite.
func orInf(x float64) float64 {
	if math.IsInf(x, 1) {
		return -1
	}
	return x
}

// oneSuperpeer reports whether every live node is covered and no cluster
// has two claimers: the cluster is served. (nodesim.Converged asks more:
// that the superpeer is the node closest to the cluster key, which stable,
// invitation and echo do not promise.)
func oneSuperpeer(s *nodesim.Sim) bool {
	x := s.Take()
	return x.Live > 0 && x.Covered == x.Live && x.Split == 0
}

// superpeerOf returns the live node that claims the superpeer role, or -1.
func superpeerOf(s *nodesim.Sim) int {
	for i := range s.N() {
		if s.Alive(i) && s.State(i).Role == node.RoleSuperpeer {
			return i
		}
	}
	return -1
}

// detection is the largest failure-detection timeout of the live machines.
func detection(s *nodesim.Sim) time.Duration {
	var t time.Duration
	for i := range s.N() {
		if s.Alive(i) && s.Machine(i) != nil {
			t = max(t, s.Machine(i).Detection())
		}
	}
	return t
}

// start builds the network, runs it until it is served by one superpeer,
// and then repairWarm timeouts more.
func (r repairNet) start(seed uint64) (*nodesim.Sim, *rand.Rand, time.Duration, error) {
	s, err := nodesim.New(r.config(seed))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("bench: repair %s, n = %d: %w", r.algo, r.n, err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x4e9a14))
	if !s.RunUntil(oneSuperpeer, r.tick, repairConverge) {
		return nil, nil, 0, fmt.Errorf("%w: %s, n = %d, seed %d: not served by one superpeer after %v: %+v",
			ErrRepair, r.algo, r.n, seed, repairConverge, s.Take())
	}
	t := detection(s)
	s.RunFor(repairWarm * t)
	return s, rng, t, nil
}

// electionSent counts the election messages the machines of s have sent
// so far, heartbeats and their acknowledgements left out (all of them
// with all): a crashed node's machine goes at the crash, and a restarted
// node's new one counts from zero, so callers take a node's count before
// they crash it.
func electionSent(s *nodesim.Sim, i int, all bool) uint64 {
	m := s.Machine(i)
	if m == nil {
		return 0
	}
	var c uint64
	for typ, k := range m.Election().Sent {
		if all || typ != classic.MsgHeartbeat.String() && typ != classic.MsgHeartbeatAck.String() {
			c += k
		}
	}
	return c
}

func electionSentAll(s *nodesim.Sim, all bool) uint64 {
	var c uint64
	for i := range s.N() {
		c += electionSent(s, i, all)
	}
	return c
}

// trial is one failover trial's outcome.
type trial struct {
	took     time.Duration // math.MaxInt64 when unrepaired
	timeout  time.Duration // T at the crash
	messages uint64        // election messages from the crash to the repair
}

// failover runs one failover trial.
func (r repairNet) failover(seed uint64) (trial, error) {
	s, rng, _, err := r.start(seed)
	if err != nil {
		return trial{}, err
	}
	if !s.RunUntil(oneSuperpeer, r.tick, repairConverge) {
		return trial{}, fmt.Errorf("%w: %s, n = %d, seed %d: the first superpeer was lost before any fault: %+v",
			ErrRepair, r.algo, r.n, seed, s.Take())
	}
	// A random phase of the leader's heartbeat.
	s.RunFor(time.Duration(rng.Int64N(int64(node.HeartbeatTicks * r.tick))))
	sp := superpeerOf(s)
	tr := trial{timeout: detection(s)}
	o := s.Observe(repairSample)
	// The superpeer's count goes with its machine at the crash: leave it
	// out of the count before, as it is out of the count after.
	sent := electionSentAll(s, false) - electionSent(s, sp, false)
	o.CrashSuperpeer(s, sp)
	if !s.RunUntil(func(s *nodesim.Sim) bool { return len(o.Failovers) > 0 }, repairSample, repairLimit*tr.timeout) {
		tr.took = math.MaxInt64
		return tr, nil
	}
	tr.took, tr.messages = o.Failovers[0], electionSentAll(s, false)-sent
	return tr, nil
}

// churn runs one churn run at rate for d after convergence.
func (r repairNet) churn(seed uint64, rate float64, d, downtime time.Duration) (ChurnStats, error) {
	s, rng, t, err := r.start(seed)
	if err != nil {
		return ChurnStats{}, err
	}
	st := ChurnStats{RatePerMin: rate, DurationS: d.Seconds()}
	o := s.Observe(repairChurnSample)
	t0, t1 := s.Now(), s.Now()+d
	var retired, retiredAll uint64 // the counts of machines replaced by restarts
	msgs0, all0 := electionSentAll(s, false), electionSentAll(s, true)
	var msgs1, all1 uint64
	// The crash times: a Poisson process of rate·n per minute.
	if perMin := rate * float64(r.n); perMin > 0 {
		mean := float64(time.Minute) / perMin
		for at := t0 + time.Duration(rng.ExpFloat64()*mean); at < t1; at += time.Duration(rng.ExpFloat64() * mean) {
			s.At(at, func(s *nodesim.Sim) {
				var live []int
				for i := range r.n {
					if s.Alive(i) {
						live = append(live, i)
					}
				}
				if len(live) < 2 {
					return
				}
				i := live[rng.IntN(len(live))]
				st.Crashes++
				if s.State(i).Role == node.RoleSuperpeer {
					st.LeaderCrashes++
				}
				// Its counters go with its machine: count them now (a
				// node that is down sends nothing).
				retired += electionSent(s, i, false)
				retiredAll += electionSent(s, i, true)
				o.CrashSuperpeer(s, i)
				s.After(downtime, func(s *nodesim.Sim) { s.Restart(i) })
			})
		}
	}
	s.At(t1, func(s *nodesim.Sim) {
		msgs1, all1 = electionSentAll(s, false)+retired, electionSentAll(s, true)+retiredAll
	})
	s.Run(t1)
	// The failovers of the last crashes: no crash after t1.
	s.RunUntil(oneSuperpeer, r.tick, repairLimit*t)
	s.RunFor(repairChurnSample)
	o.Finish()
	st.Coverage, st.MaxOrphans = o.Coverage(t0, t1), o.MaxOrphans(t0, t1)
	split := o.SplitTime(t0, t1)
	st.SplitBrainMs, st.SplitBrainFrac = durMs(split), float64(split)/float64(d)
	st.Unrepaired = o.Unrepaired
	st.FailoverMedianTimeouts, st.FailoverMaxTimeouts = -1, -1
	if f := o.Failovers; len(f) > 0 {
		slices.Sort(f)
		st.FailoverMedianTimeouts = float64(medianDur(f)) / float64(t)
		st.FailoverMaxTimeouts = float64(f[len(f)-1]) / float64(t)
	}
	perMemberS := float64(r.n) * d.Seconds()
	st.MsgsPerMemberPerS = float64(all1-all0) / perMemberS
	st.ElectionMsgsPerMemberPerS = float64(msgs1-msgs0) / perMemberS
	return st, nil
}

// WriteRepairTable prints rows as two tables: the failover (median, p95
// and maximum, in ms and in timeouts T) and, below it, the churn runs.
func WriteRepairTable(w io.Writer, rows []RepairRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "failover after a superpeer crash, node machines (T: the machines' failure-detection timeout)")
	fmt.Fprintln(tw, "algorithm\tn\tT ms\ttrials\tunrepaired\tmedian ms\tp95 ms\tmax ms\tmedian T\tp95 T\tmax T\tmedian msgs")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%d%s\tfailed: %s\n", r.Algorithm, r.N, strings.Repeat("\t–", 10), r.Error)
			continue
		}
		f := r.Failover
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\n",
			r.Algorithm, r.N, r.TimeoutMs, f.Trials, f.Unrepaired,
			infOr(f.MedianMs, "%.0f"), infOr(f.P95Ms, "%.0f"), infOr(f.MaxMs, "%.0f"),
			infOr(f.MedianTimeouts, "%.2f"), infOr(f.P95Timeouts, "%.2f"), infOr(f.MaxTimeouts, "%.2f"), f.MedianMessages)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "churn: members crash and restart (coverage: the mean fraction of the joined live nodes served by a live superpeer of their cluster)")
	fmt.Fprintln(tw, "algorithm\tn\trate/min\tcrashes\tleader crashes\tcoverage\tmax orphans\tsplit brain ms\tfailover median / max T\tunrepaired\tmsgs/member/s\telection msgs/member/s")
	for _, r := range rows {
		for _, c := range r.Churn {
			fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%d\t%d\t%.4f\t%d\t%.0f\t%s / %s\t%d\t%.2f\t%.2f\n",
				r.Algorithm, r.N, 100*c.RatePerMin, c.Crashes, c.LeaderCrashes, c.Coverage, c.MaxOrphans,
				c.SplitBrainMs, noneOr(c.FailoverMedianTimeouts), noneOr(c.FailoverMaxTimeouts),
				c.Unrepaired, c.MsgsPerMemberPerS, c.ElectionMsgsPerMemberPerS)
		}
	}
	return tw.Flush()
}

// infOr formats v, or "∞" when it is negative.
func infOr(v float64, format string) string {
	if v < 0 {
		return "∞"
	}
	return fmt.Sprintf(format, v)
}

// noneOr formats v with two decimals, or "–" (none measured) when it is
// negative.
func noneOr(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}
