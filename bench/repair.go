package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/sim"
)

// The repair suite: how each election algorithm of package classic keeps a
// cluster led, in the simulator of testnet/sim, in virtual time.
//
// Every process runs the algorithm as classic.New builds it with default
// Options (echo on the full mesh, every member a candidate, a failover list
// of 3), the way the overlay runs it, with the overlay's timing: a tick of
// 100 ms, a heartbeat every 5 ticks, and a failure-detection timeout T of
// 3 heartbeats plus 4 RTTs (19 ticks, 1.9 s, at an RTT of 100 ms). The
// rings' timeout is raised to two turns of the ring plus two heartbeats
// (their documented requirement; 7.4 s at n = 64), or no ring election
// could ever finish. Links have one constant RTT and lose nothing.
//
// Echo has no failure detector of its own; the bench plays the overlay's
// driver, which campaigns when it loses its connection to the leader:
// every live process that names a crashed process as its leader campaigns
// T after the crash (plus its own phase within a tick). Every other
// algorithm detects the crash by its own tick-based timeouts.
//
// Failover: a cluster elects (a random process campaigns), runs 5 T with
// its leader, and the leader crashes at a random phase of its heartbeat.
// The failover time is from the crash until the live processes agree on
// one live leader and keep agreeing until the end of the run (Record.
// TimeToElect), which goes on 3 T past the first agreement. A trial with
// no agreement within 30 T of the crash is unrepaired.
//
// Churn: after the first election and 5 T, members crash at random, a
// Poisson process of rate RatePerMin·n per minute, each a live member drawn
// uniformly (never the last live one), and each comes back Downtime later
// with a fresh machine, which campaigns (sim.Restart). Coverage is the
// fraction of the window during which the live members agree on one live
// leader (sim.AllAgree: each names it, it has role Leader, nobody else
// does); split brain is the time two or more live processes had role
// Leader (Record.SplitBrain).

// ErrRepairConfig is wrapped by every error Repair returns for a bad
// RepairConfig; the message names the field.
var ErrRepairConfig = errors.New("bench: bad repair config")

// ErrRepair reports a cluster that did not elect a first leader, or lost it
// before any fault: a bug in a machine or in the suite, not a measurement.
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
	DefaultRepairTrials   = 20
	DefaultChurnDuration  = 10 * time.Minute
	DefaultChurnDowntime  = 30 * time.Second
	DefaultRepairTick     = 100 * time.Millisecond // the overlay's ElectionTick
	DefaultHeartbeatTicks = 5                      // the overlay's heartbeatTicks
	// MaxRepairN is the largest cluster size Repair accepts.
	MaxRepairN = 4096
)

// Phases of a repair run, in failure-detection timeouts T.
const (
	repairWarm      = 5  // with a leader before the crash or the churn
	repairLimit     = 30 // from the crash to agreement, at most
	repairSettle    = 3  // after the first agreement, to see that it lasts
	repairFirstElec = 100
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
	// Seed seeds everything: the simulator, the machines, the trials'
	// crash times and the churn. The same config gives the same rows.
	Seed uint64
	// RTT is the round-trip time between every two processes. Zero means
	// sim.DefaultRTT (100 ms).
	RTT time.Duration
	// Tick is the machines' tick interval. Zero means DefaultRepairTick
	// (100 ms).
	Tick time.Duration
	// HeartbeatTicks is the leaders' heartbeat period, in ticks. Zero
	// means DefaultHeartbeatTicks (5).
	HeartbeatTicks int
	// TimeoutTicks is the failure-detection timeout T, in ticks. Zero
	// means the overlay's rule: 3·HeartbeatTicks + ⌈4·RTT/Tick⌉. The
	// rings get at least two turns of the ring plus two heartbeats,
	// ⌈n·RTT/Tick⌉ + 2·HeartbeatTicks, whatever is set here.
	TimeoutTicks int
}

// RepairRow is one algorithm at one cluster size: its failover after a
// leader crash and its behaviour under each churn rate.
type RepairRow struct {
	Algorithm string `json:"algorithm"`
	N         int    `json:"n"`
	// TickMs, HeartbeatMs and TimeoutMs are the timing used: the tick,
	// the leaders' heartbeat period and the failure-detection timeout T.
	TickMs      float64 `json:"tick_ms"`
	HeartbeatMs float64 `json:"heartbeat_ms"`
	TimeoutMs   float64 `json:"timeout_ms"`
	// Failover is the repair of one leader crash, over the trials.
	Failover FailoverStats `json:"failover"`
	// Churn has one entry per churn rate, in the order of ChurnRates.
	Churn []ChurnStats `json:"churn"`
}

// FailoverStats sums up the failover trials of one algorithm and size. An
// unrepaired trial counts as infinitely long; a median or maximum that is
// infinite is reported as -1.
type FailoverStats struct {
	Trials int `json:"trials"`
	// Unrepaired counts the trials without agreement on a live leader
	// within 30 T of the crash.
	Unrepaired int `json:"unrepaired"`
	// MedianMs and MaxMs are the time from the crash until the live
	// processes agree on a new leader for good; MedianTimeouts and
	// MaxTimeouts the same in failure-detection timeouts T.
	MedianMs       float64 `json:"median_ms"`
	MaxMs          float64 `json:"max_ms"`
	MedianTimeouts float64 `json:"median_timeouts"`
	MaxTimeouts    float64 `json:"max_timeouts"`
	// MedianMessages is the median number of election messages
	// (heartbeats left out) sent from the crash to the agreement, over the
	// repaired trials.
	MedianMessages float64 `json:"median_messages"`
}

// ChurnStats is one churn run.
type ChurnStats struct {
	// RatePerMin is the fraction of the members that crash per minute.
	RatePerMin float64 `json:"rate_per_min"`
	// DurationS is the virtual time measured.
	DurationS float64 `json:"duration_s"`
	// Crashes counts the crashes in the window, LeaderCrashes those of a
	// process with role Leader.
	Crashes       int `json:"crashes"`
	LeaderCrashes int `json:"leader_crashes"`
	// Coverage is the fraction of the window during which the live
	// members agreed on one live leader.
	Coverage float64 `json:"coverage"`
	// SplitBrainMs is the time in the window during which two or more
	// live processes had role Leader, and SplitBrainFrac that as a
	// fraction of the window.
	SplitBrainMs   float64 `json:"split_brain_ms"`
	SplitBrainFrac float64 `json:"split_brain_frac"`
	// MsgsPerMemberPerS is every message sent in the window per member
	// (n) per second; ElectionMsgsPerMemberPerS leaves out HEARTBEAT and
	// HEARTBEAT_ACK.
	MsgsPerMemberPerS         float64 `json:"msgs_per_member_per_s"`
	ElectionMsgsPerMemberPerS float64 `json:"election_msgs_per_member_per_s"`
}

// Repair runs the repair suite (see the comment at the top of repair.go)
// for each algorithm of cfg.Algorithms and each n of cfg.Sizes; rows come
// algorithm by algorithm, sizes in the given order. A bad config gives an
// error wrapping ErrRepairConfig.
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
		{"RTT", &cfg.RTT, sim.DefaultRTT},
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
	switch {
	case cfg.HeartbeatTicks < 0:
		return bad("HeartbeatTicks = %d is negative; 0 means %d", cfg.HeartbeatTicks, DefaultHeartbeatTicks)
	case cfg.HeartbeatTicks == 0:
		cfg.HeartbeatTicks = DefaultHeartbeatTicks
	}
	switch {
	case cfg.TimeoutTicks < 0:
		return bad("TimeoutTicks = %d is negative; 0 means 3·HeartbeatTicks + ⌈4·RTT/Tick⌉", cfg.TimeoutTicks)
	case cfg.TimeoutTicks == 0:
		cfg.TimeoutTicks = 3*cfg.HeartbeatTicks + int((4*cfg.RTT+cfg.Tick-1)/cfg.Tick)
	case cfg.TimeoutTicks <= cfg.HeartbeatTicks:
		return bad("TimeoutTicks = %d must exceed HeartbeatTicks = %d", cfg.TimeoutTicks, cfg.HeartbeatTicks)
	}
	return nil
}

// repairNet is the setting of one algorithm at one size.
type repairNet struct {
	algo      string
	n         int
	ids       []classic.ID
	rtt, tick time.Duration
	beat, t   int // heartbeat and timeout, in ticks
}

// timeout is T as a duration.
func (r repairNet) timeout() time.Duration { return time.Duration(r.t) * r.tick }

func repairOne(cfg RepairConfig, algo string, n int) (RepairRow, error) {
	net := repairNet{algo: algo, n: n, ids: electionIDs(n), rtt: cfg.RTT, tick: cfg.Tick, beat: cfg.HeartbeatTicks, t: cfg.TimeoutTicks}
	if algo == "ring" || algo == "ring-max" {
		net.t = max(net.t, int((time.Duration(n)*cfg.RTT+cfg.Tick-1)/cfg.Tick)+2*net.beat)
	}
	row := RepairRow{
		Algorithm: algo, N: n,
		TickMs: durMs(net.tick), HeartbeatMs: durMs(time.Duration(net.beat) * net.tick), TimeoutMs: durMs(net.timeout()),
	}
	base := cfg.Seed ^ electionAlgoHash(algo) ^ uint64(n)<<40
	var times []time.Duration // math.MaxInt64 for unrepaired
	var msgs []float64
	for trial := range cfg.Trials {
		took, k, err := net.failover(base ^ uint64(trial+1)*0x9e3779b97f4a7c15)
		if err != nil {
			return row, err
		}
		times = append(times, took)
		if took != math.MaxInt64 {
			msgs = append(msgs, float64(k))
		} else {
			row.Failover.Unrepaired++
		}
	}
	row.Failover.Trials = cfg.Trials
	slices.Sort(times)
	med, mx := medianDur(times), times[len(times)-1]
	row.Failover.MedianMs, row.Failover.MedianTimeouts = net.inMsAndTimeouts(med)
	row.Failover.MaxMs, row.Failover.MaxTimeouts = net.inMsAndTimeouts(mx)
	if len(msgs) > 0 {
		slices.Sort(msgs)
		row.Failover.MedianMessages = (msgs[(len(msgs)-1)/2] + msgs[len(msgs)/2]) / 2
	}
	for k, rate := range cfg.ChurnRates {
		c, err := net.churn(base^uint64(k+1)<<20^0xc4c4, rate, cfg.ChurnDuration, cfg.Downtime)
		if err != nil {
			return row, err
		}
		row.Churn = append(row.Churn, c)
	}
	return row, nil
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

// inMsAndTimeouts converts d to milliseconds and timeouts, -1 for
// infinite.
func (r repairNet) inMsAndTimeouts(d time.Duration) (float64, float64) {
	if d == math.MaxInt64 {
		return -1, -1
	}
	return durMs(d), float64(d) / float64(r.timeout())
}

// start builds the network and runs it through its first election and
// repairWarm timeouts with that leader.
func (r repairNet) start(seed uint64) (*sim.Sim, *rand.Rand, error) {
	s, err := newElectionSim(r.algo, r.ids, seed, r.rtt, r.tick, func(int) classic.Config {
		return classic.Config{HeartbeatTicks: r.beat, TimeoutTicks: r.t}
	}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s, n = %d: %w", ErrRepair, r.algo, r.n, err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x4e9a14))
	s.Campaign(rng.IntN(r.n))
	if !s.RunUntil(sim.AllAgree, repairFirstElec*r.timeout()) {
		_, why := s.Record().FinalLeader(classic.None, nil)
		return nil, nil, fmt.Errorf("%w: %s, n = %d, seed %d: no first leader within %v: %v",
			ErrRepair, r.algo, r.n, seed, repairFirstElec*r.timeout(), why)
	}
	s.RunFor(repairWarm * r.timeout())
	return s, rng, nil
}

// crash crashes node i now and, for echo, plays the driver's failure
// detector: every live process that names i as its leader campaigns one
// timeout later, at its own phase within a tick.
func (r repairNet) crash(s *sim.Sim, rng *rand.Rand, i int) {
	s.Crash(i)
	if r.algo != "echo" {
		return
	}
	dead := s.ID(i)
	for j := range r.n {
		if s.Alive(j) && s.State(j).Leader == dead {
			s.After(r.timeout()+time.Duration(rng.Int64N(int64(r.tick))), func(s *sim.Sim) {
				if l := s.State(j).Leader; l == dead || l == classic.None {
					s.Campaign(j)
				}
			})
		}
	}
}

// failover runs one failover trial and returns the time from the crash to
// lasting agreement (math.MaxInt64 if none) and the election messages sent
// until then.
func (r repairNet) failover(seed uint64) (time.Duration, int, error) {
	s, rng, err := r.start(seed)
	if err != nil {
		return 0, 0, err
	}
	if !s.RunUntil(sim.AllAgree, s.Now()+repairLimit*r.timeout()) {
		_, why := s.Record().FinalLeader(classic.None, nil)
		return 0, 0, fmt.Errorf("%w: %s, n = %d, seed %d: the first leader was lost before any fault: %v",
			ErrRepair, r.algo, r.n, seed, why)
	}
	leader, _ := s.Agreed()
	li, _ := s.Index(leader)
	tc := s.Now() + time.Duration(rng.Int64N(int64(r.beat)*int64(r.tick)))
	s.Run(tc)
	r.crash(s, rng, li)
	if !s.RunUntil(sim.AllAgree, tc+repairLimit*r.timeout()) {
		return math.MaxInt64, 0, nil
	}
	s.RunFor(repairSettle * r.timeout())
	took, err := s.Record().TimeToElect(tc, nil)
	if err != nil {
		return math.MaxInt64, 0, nil
	}
	return took, electionMessages(s.Record(), tc, tc+took+1), nil
}

// electionMessages counts the messages sent in [from, to), heartbeats left
// out.
func electionMessages(rec *sim.Record, from, to time.Duration) int {
	k := 0
	for typ, c := range rec.MessagesByType(from, to) {
		if typ != classic.MsgHeartbeat && typ != classic.MsgHeartbeatAck {
			k += c
		}
	}
	return k
}

// churn runs one churn run at rate for d after the first election.
func (r repairNet) churn(seed uint64, rate float64, d, downtime time.Duration) (ChurnStats, error) {
	s, rng, err := r.start(seed)
	if err != nil {
		return ChurnStats{}, err
	}
	st := ChurnStats{RatePerMin: rate, DurationS: d.Seconds()}
	t0, t1 := s.Now(), s.Now()+d
	// The crash times: a Poisson process of rate·n per minute.
	if perMin := rate * float64(r.n); perMin > 0 {
		mean := float64(time.Minute) / perMin
		for t := t0 + time.Duration(rng.ExpFloat64()*mean); t < t1; t += time.Duration(rng.ExpFloat64() * mean) {
			s.At(t, func(s *sim.Sim) {
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
				if s.State(i).Role == classic.Leader {
					st.LeaderCrashes++
				}
				r.crash(s, rng, i)
				s.After(downtime, func(s *sim.Sim) { s.Restart(i) })
			})
		}
	}
	var agreed time.Duration
	last, lastOK := t0, sim.AllAgree(s)
	s.RunUntil(func(s *sim.Sim) bool {
		if lastOK {
			agreed += s.Now() - last
		}
		last, lastOK = s.Now(), sim.AllAgree(s)
		return false
	}, t1)
	if lastOK {
		agreed += t1 - last
	}
	st.Coverage = float64(agreed) / float64(d)
	rec := s.Record()
	sb, err := rec.SplitBrain()
	if err != nil {
		return st, err
	}
	var split time.Duration
	for _, iv := range sb.Intervals {
		if from, to := max(iv.From, t0), min(iv.To, t1); to > from {
			split += to - from
		}
	}
	st.SplitBrainMs, st.SplitBrainFrac = durMs(split), float64(split)/float64(d)
	perMemberS := float64(r.n) * d.Seconds()
	st.MsgsPerMemberPerS = float64(rec.Messages(t0, t1)) / perMemberS
	st.ElectionMsgsPerMemberPerS = float64(electionMessages(rec, t0, t1)) / perMemberS
	return st, nil
}

// WriteRepairTable prints rows as two tables: the failover (median and
// maximum, in ms and in timeouts T) and, below it, the churn runs.
func WriteRepairTable(w io.Writer, rows []RepairRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "failover after a leader crash (T: the failure-detection timeout)")
	fmt.Fprintln(tw, "algorithm\tn\tT ms\ttrials\tunrepaired\tmedian ms\tmax ms\tmedian T\tmax T\tmedian msgs")
	msOrInf := func(v float64, format string) string {
		if v < 0 {
			return "∞"
		}
		return fmt.Sprintf(format, v)
	}
	for _, r := range rows {
		f := r.Failover
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%d\t%d\t%s\t%s\t%s\t%s\t%.0f\n",
			r.Algorithm, r.N, r.TimeoutMs, f.Trials, f.Unrepaired,
			msOrInf(f.MedianMs, "%.0f"), msOrInf(f.MaxMs, "%.0f"),
			msOrInf(f.MedianTimeouts, "%.2f"), msOrInf(f.MaxTimeouts, "%.2f"), f.MedianMessages)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "churn: members crash and restart (coverage: the fraction of the time the live members agree on one live leader)")
	fmt.Fprintln(tw, "algorithm\tn\trate/min\tcrashes\tleader crashes\tcoverage\tsplit brain ms\tmsgs/member/s\telection msgs/member/s")
	for _, r := range rows {
		for _, c := range r.Churn {
			fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%d\t%d\t%.4f\t%.0f\t%.2f\t%.2f\n",
				r.Algorithm, r.N, 100*c.RatePerMin, c.Crashes, c.LeaderCrashes, c.Coverage,
				c.SplitBrainMs, c.MsgsPerMemberPerS, c.ElectionMsgsPerMemberPerS)
		}
	}
	return tw.Flush()
}
