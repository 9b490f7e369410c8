package bench

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/latency"
	"github.com/superpeer/superpeer/testnet/sim"
)

// The election suite: the message count and the time of one election of
// each algorithm of package classic, run on its real machine in the
// simulator of testnet/sim, against the textbook count (the formulas of
// sim.BullyMessages and its neighbours, which TestMessageCounts shares).
//
// What is counted is what TestMessageCounts counts: every message a machine
// sends from the start of the election (the crash, or the first Campaign of
// a cold start) until the live nodes agree on the expected leader and
// electionSettle more virtual time has passed, HEARTBEAT and HEARTBEAT_ACK
// left out (they are reported apart). Every run is loss-free with one
// constant RTT between all pairs, so each formula is exact for its
// scenario: measured equals theory, and a ratio other than 1 means the
// machine sends what the textbook does not.
//
// Timing, in ticks of sim.DefaultTickInterval (10 ms): a process that must
// notice the failure has a fast timeout F = 2·RTT/tick (20 ticks at 100 ms);
// the processes that must not notice have 50·F (10 s), so that only one
// process acts, as the textbook counts assume (TestMessageCounts does the
// same for bully). The leader heartbeats every 2 ticks, except in the rings
// (see electionScenarios).

// ErrElectionConfig is wrapped by every error Election returns for a bad
// ElectionConfig; the message names the field.
var ErrElectionConfig = errors.New("bench: bad election config")

// ErrElection reports an election of the suite that did not end as its
// scenario must (no agreement, or another leader): a bug in a machine or in
// the scenario, not a measurement.
var ErrElection = errors.New("bench: election did not complete")

// DefaultElectionSizes are the cluster sizes of the election suite when
// ElectionConfig.Sizes is empty: 8, 16, 32, ..., 4096.
var DefaultElectionSizes = []int{8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}

// DefaultMaxQuadraticN is the largest n at which the election suite runs a
// Θ(n²) scenario (bully, and echo with EchoFullMesh) when
// ElectionConfig.MaxQuadraticN is zero. Measured on a shared 2-core
// machine: bully at n = 2048 (4.2 million messages) takes 18 to 36 s of
// wall time, at n = 4096 (16.8 million) 85 to 127 s and 6 GB of memory
// (half the messages are in flight at once), so n = 4096 is skipped by
// default. Echo on the full mesh is costlier still: 5 s at n = 512, 31 s
// at n = 1024.
const DefaultMaxQuadraticN = 2048

// MaxElectionN is the largest cluster size the election suite accepts.
const MaxElectionN = 1 << 16

// ElectionConfig configures Election. The zero value runs the default suite.
type ElectionConfig struct {
	// Algorithms are the algorithms to measure, named as by
	// classic.Algorithms. Empty means all of them, in that order.
	Algorithms []string
	// Sizes are the cluster sizes n, each at least 3 (a leader to crash,
	// one process that notices, and one more) and at most MaxElectionN.
	// Empty means DefaultElectionSizes.
	Sizes []int
	// Seed seeds the simulator (the tick phases) and the machines'
	// randomness. The same config gives the same rows.
	Seed uint64
	// RTT is the round-trip time between every two processes. Zero means
	// sim.DefaultRTT (100 ms).
	RTT time.Duration
	// MaxQuadraticN is the largest n at which a Θ(n²) scenario is run;
	// rows above it come back with Skipped set (and their theoretical
	// count) instead of being measured. Zero means DefaultMaxQuadraticN;
	// a negative value runs every size.
	MaxQuadraticN int
	// EchoFullMesh runs echo on the full mesh that classic.New gives it
	// when no neighbours are set, as the overlay runs it: n²-1 messages,
	// Θ(n²), subject to MaxQuadraticN, and slow (the machine scans its
	// neighbour list for every message and its constructor checks the
	// list for repeats in O(n²): n = 1024 took 31 s here, n = 2048 would
	// take minutes). By
	// default echo runs on a sparse random graph, its ad hoc setting, as
	// TestMessageCounts runs it: a ring plus three random links per
	// process (average degree about 8), Θ(n) messages.
	EchoFullMesh bool
}

// ElectionRow is one election: one algorithm at one cluster size.
type ElectionRow struct {
	Algorithm string `json:"algorithm"`
	N         int    `json:"n"`
	// Start is "leader-crash" (a stable network whose leader n-1 crashes
	// at the start) or "cold-start" (no leader yet; one process
	// campaigns at the start). Scenario says who does what.
	Start    string `json:"start"`
	Scenario string `json:"scenario"`
	// Formula is the textbook count as a formula of n, and
	// TheoryMessages its value at N.
	Formula        string `json:"formula"`
	TheoryMessages int    `json:"theory_messages"`
	// Quadratic marks a Θ(n²) scenario, subject to MaxQuadraticN.
	Quadratic bool `json:"quadratic"`
	// Skipped is set when the row was not run; SkipReason says why.
	// Nothing below is measured then.
	Skipped    bool   `json:"skipped,omitempty"`
	SkipReason string `json:"skip_reason,omitempty"`
	// Messages is the measured count, election messages only, and
	// MessagesByType splits it by message type. Ratio is Messages ÷
	// TheoryMessages.
	Messages       int            `json:"messages"`
	MessagesByType map[string]int `json:"messages_by_type,omitempty"`
	Ratio          float64        `json:"ratio"`
	// Heartbeats counts HEARTBEAT and HEARTBEAT_ACK sent in the same
	// window; they are not part of Messages.
	Heartbeats int `json:"heartbeats"`
	// TimeMs is the virtual time from the start to the instant the live
	// processes agree on the leader. For next-in-line it includes the
	// failure detection (the heartbeat timeout, 2·RTT); in every other
	// scenario the process that acts campaigns at the start.
	TimeMs float64 `json:"time_ms"`
	// Leader is the leader elected.
	Leader string `json:"leader"`
}

// Timing of the suite; see the comment at the top of this file.
const (
	electionTick = sim.DefaultTickInterval
	// electionSlowFactor makes the timeout of a process that must not
	// notice the failure this many times the fast one.
	electionSlowFactor = 50
	// invitationQuietTicks is the invitation timeout of every process:
	// each one's first invitation round comes 1 + rand(T) ticks after the
	// start, so with T = 2^40 no process but the campaigner invites
	// anyone during the run.
	invitationQuietTicks = 1 << 40
)

// electionScenario is how one algorithm is run.
type electionScenario struct {
	start, scenario, formula string
	quadratic                bool
	theory                   func(n int) int
	// prepare builds the network of n processes and brings it to the
	// instant before the election.
	prepare func(p electionParams) (*electionRun, error)
}

// electionParams are what a scenario builds its network from.
type electionParams struct {
	algo string
	n    int
	ids  []classic.ID
	seed uint64
	rtt  time.Duration
	fast int // the fast timeout F, in ticks
	// echoMesh runs echo on the full mesh (ElectionConfig.EchoFullMesh).
	echoMesh bool
}

func (p electionParams) slow() int { return electionSlowFactor * p.fast }

// electionRun is a prepared network: start begins the election at s.Now(),
// and it must end with want as leader. theory and scenario, when set,
// replace the scenario's (echo's count depends on its graph).
type electionRun struct {
	s        *sim.Sim
	start    func(s *sim.Sim)
	want     classic.ID
	theory   int
	scenario string
}

// electionScenarios are the scenarios of the suite, by algorithm.
//
//   - bully: TestMessageCounts' Θ(n²) case. n-1 led and heartbeat for a
//     round trip; it crashes and process 0 campaigns in the same instant.
//     n-2 has the fast timeout (it wins when no OK comes from n-1), the
//     others the slow one.
//   - ring, ring-max: TestMessageCounts' cold starts. Ring order 0..n-1,
//     IDs increasing, no leader yet; process 0 campaigns. The timeout is
//     two turns of the ring (n·RTT) plus two heartbeat periods, and the
//     leader heartbeats every 10 RTT: an ID-list heartbeat carries the
//     whole ring, and the max-only leader leads during the whole
//     COORDINATOR turn. They tick coarser at large n (see ringTick).
//     ring-max with 0 initiating is its worst single initiator (d = n-1
//     hops to the highest).
//   - next-in-line: n-1 led (its failover list n-2, n-3, n-4) and crashes;
//     nobody campaigns: every process has the fast timeout, notices the
//     missing heartbeats, and n-2, first on the list, takes over at once.
//   - candidate: every process a candidate (classic.New's default). n-1
//     led and crashes; n-2 campaigns in the same instant: it waits its δ =
//     2F, queries, and announces after F more (the dead n-1 never
//     answers). n-1 and n-2 have the fast timeout, the others the slow one.
//   - invitation: a cold start, every process the leader of its own
//     group, as every member is once its leader's failure has been
//     noticed. n-1 campaigns, and its round is the only one of the run
//     (invitationQuietTicks); as it outranks every singleton, each yields.
//   - echo: a cold start, capacities equal (so the highest ID wins);
//     process 0 campaigns. Echo has no failure detector of its own (the
//     driver's campaign starts it). The graph is a ring plus three random
//     links per process (average degree about 8), drawn from the seed, or
//     with ElectionConfig.EchoFullMesh the full mesh classic.New gives echo
//     without neighbours (the echo row is then Θ(n²)).
//   - stable: a cold start; process 0 campaigns, with the fast timeout,
//     the others the slow one. A crash scenario is not counted: a stable
//     process that has not itself noticed the failure vouches for the dead
//     leader in its VOTE, so the election would keep the dead leader, and
//     once every process notices, all of them run elections at once.
func electionScenarios() map[string]electionScenario {
	return map[string]electionScenario{
		"bully": {
			start: "leader-crash", formula: "n(n-1)", quadratic: true,
			scenario: "n-1 crashed; 0 notices and campaigns (only it notices)",
			theory:   func(n int) int { return sim.BullyMessages(n, 0) },
			prepare: func(p electionParams) (*electionRun, error) {
				return crashRun(p, func(i int) classic.Config {
					return classic.Config{TimeoutTicks: p.timeoutUnless(i == p.n-2)}
				}, 0)
			},
		},
		"ring": {
			start: "cold-start", formula: "2n",
			scenario: "no leader; 0 campaigns (ring order = ID order)",
			theory:   sim.RingMessages,
			prepare:  ringRun,
		},
		"ring-max": {
			start: "cold-start", formula: "3n-1",
			scenario: "no leader; 0 campaigns, n-1 hops before the highest",
			theory:   func(n int) int { return sim.RingMaxMessages(n, n-1) },
			prepare:  ringRun,
		},
		"next-in-line": {
			start: "leader-crash", formula: "n-1",
			scenario: "n-1 crashed; n-2, first on its list, notices the missing heartbeats and takes over",
			theory:   sim.NextInLineMessages,
			prepare: func(p electionParams) (*electionRun, error) {
				return crashRun(p, func(int) classic.Config { return classic.Config{TimeoutTicks: p.fast} }, -1)
			},
		},
		"candidate": {
			start: "leader-crash", formula: "3n-4",
			scenario: "all candidates; n-1 crashed; n-2 notices and campaigns (only it notices)",
			theory:   func(n int) int { return sim.CandidateMessages(n, n) },
			prepare: func(p electionParams) (*electionRun, error) {
				return crashRun(p, func(i int) classic.Config {
					return classic.Config{TimeoutTicks: p.timeoutUnless(i >= p.n-2)}
				}, p.n-2)
			},
		},
		"invitation": {
			start: "cold-start", formula: "3(n-1)",
			scenario: "n singleton groups; n-1 runs the only invitation round",
			theory:   sim.InvitationMessages,
			prepare: func(p electionParams) (*electionRun, error) {
				return coldRun(p, func(int) classic.Config { return classic.Config{TimeoutTicks: invitationQuietTicks} }, nil, p.n-1)
			},
		},
		"echo": {
			start: "cold-start", formula: "2|E|+n-1",
			scenario: "random graph (ring + 3 links each), equal capacities; 0 campaigns",
			// The graph is drawn in prepare, which sets the count.
			theory:  func(n int) int { return 0 },
			prepare: echoRun,
		},
		"stable": {
			start: "cold-start", formula: "3(n-1)",
			scenario: "no leader; 0 notices and campaigns (only it notices)",
			theory:   sim.StableMessages,
			prepare: func(p electionParams) (*electionRun, error) {
				return coldRun(p, func(i int) classic.Config {
					return classic.Config{TimeoutTicks: p.timeoutUnless(i == 0)}
				}, nil, 0)
			},
		},
	}
}

// timeoutUnless returns the fast timeout when fast is set, else the slow one.
func (p electionParams) timeoutUnless(fast bool) int {
	if fast {
		return p.fast
	}
	return p.slow()
}

// Election runs the election suite: for each algorithm of cfg.Algorithms
// and each n of cfg.Sizes, one election in the simulator (see
// electionScenarios for each algorithm's scenario), measured against its
// textbook count. Rows come algorithm by algorithm, sizes in the given
// order. A Θ(n²) scenario above cfg.MaxQuadraticN gives a row with Skipped
// set. A bad config gives an error wrapping ErrElectionConfig; an election
// that does not end as it must, one wrapping ErrElection.
func Election(cfg ElectionConfig) ([]ElectionRow, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	scenarios := electionScenarios()
	if cfg.EchoFullMesh {
		sc := scenarios["echo"]
		sc.formula, sc.quadratic = "n²-1 (2|E|+n-1, full mesh)", true
		sc.scenario = "full mesh, equal capacities; 0 campaigns"
		sc.theory = func(n int) int { return sim.EchoMessages(n, n*(n-1)/2) }
		scenarios["echo"] = sc
	}
	var rows []ElectionRow
	for _, algo := range cfg.Algorithms {
		sc := scenarios[algo]
		for _, n := range cfg.Sizes {
			row := ElectionRow{
				Algorithm: algo, N: n, Start: sc.start, Scenario: sc.scenario,
				Formula: sc.formula, TheoryMessages: sc.theory(n), Quadratic: sc.quadratic,
			}
			if sc.quadratic && cfg.MaxQuadraticN >= 0 && n > cfg.MaxQuadraticN {
				row.Skipped = true
				row.SkipReason = fmt.Sprintf("Θ(n²): %d messages expected; n > MaxQuadraticN = %d", row.TheoryMessages, cfg.MaxQuadraticN)
			} else if err := measureElection(&row, sc, cfg); err != nil {
				return rows, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// checkAlgorithms returns algos, or all of classic.Algorithms when it is
// empty, or an error wrapping sentinel and classic.ErrUnknownAlgorithm
// that names the first unknown one.
func checkAlgorithms(sentinel error, algos []string) ([]string, error) {
	if len(algos) == 0 {
		return classic.Algorithms(), nil
	}
	for i, a := range algos {
		if !slices.Contains(classic.Algorithms(), a) {
			return nil, fmt.Errorf("%w: Algorithms[%d] = %q: %w; choose from %s",
				sentinel, i, a, classic.ErrUnknownAlgorithm, strings.Join(classic.Algorithms(), ", "))
		}
	}
	return algos, nil
}

// fill checks cfg and fills in the defaults.
func (cfg *ElectionConfig) fill() error {
	var err error
	if cfg.Algorithms, err = checkAlgorithms(ErrElectionConfig, cfg.Algorithms); err != nil {
		return err
	}
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = slices.Clone(DefaultElectionSizes)
	}
	for i, n := range cfg.Sizes {
		if n < 3 || n > MaxElectionN {
			return fmt.Errorf("%w: Sizes[%d] = %d: want 3 to %d processes (a leader to crash, one that notices, and one more)",
				ErrElectionConfig, i, n, MaxElectionN)
		}
	}
	if cfg.RTT < 0 {
		return fmt.Errorf("%w: RTT = %v is negative; 0 means %v", ErrElectionConfig, cfg.RTT, sim.DefaultRTT)
	}
	if cfg.RTT == 0 {
		cfg.RTT = sim.DefaultRTT
	}
	if cfg.MaxQuadraticN == 0 {
		cfg.MaxQuadraticN = DefaultMaxQuadraticN
	}
	return nil
}

// electionSettle is how long a run goes on after agreement before the count
// is taken, in round trips, so that stragglers are counted.
const electionSettle = 10

// measureElection runs the election of row.Algorithm at row.N and fills in
// the measured figures.
func measureElection(row *ElectionRow, sc electionScenario, cfg ElectionConfig) error {
	n := row.N
	p := electionParams{
		algo: row.Algorithm, n: n, ids: electionIDs(n), rtt: cfg.RTT,
		seed:     cfg.Seed ^ uint64(n)<<32 ^ electionAlgoHash(row.Algorithm),
		fast:     max(2, 2*int((cfg.RTT+electionTick-1)/electionTick)),
		echoMesh: cfg.EchoFullMesh,
	}
	run, err := sc.prepare(p)
	if err != nil {
		return fmt.Errorf("%w: %s, n = %d: %w", ErrElection, row.Algorithm, n, err)
	}
	if run.theory > 0 {
		row.TheoryMessages = run.theory
	}
	if run.scenario != "" {
		row.Scenario = run.scenario
	}
	s := run.s
	t0 := s.Now()
	run.start(s)
	// A ring election takes up to 3n-1 hops; the others a few round trips
	// and a few timeouts.
	limit := t0 + 2*time.Duration(n)*cfg.RTT + time.Duration(10*p.slow())*electionTick
	if !s.RunUntil(sim.AllAgree, limit) {
		_, why := s.Record().FinalLeader(run.want, nil)
		return fmt.Errorf("%w: %s, n = %d: no agreement %v after the start: %v", ErrElection, row.Algorithm, n, limit-t0, why)
	}
	elect := s.Now() - t0
	s.RunFor(electionSettle * cfg.RTT)
	leader, err := s.Record().FinalLeader(run.want, nil)
	if err != nil {
		return fmt.Errorf("%w: %s, n = %d: %w", ErrElection, row.Algorithm, n, err)
	}
	row.Leader, row.TimeMs = string(leader), durMs(elect)
	row.MessagesByType = map[string]int{}
	for typ, k := range s.Record().MessagesByType(t0, s.Now()+1) {
		switch typ {
		case classic.MsgHeartbeat, classic.MsgHeartbeatAck:
			row.Heartbeats += k
		default:
			row.MessagesByType[typ.String()] += k
			row.Messages += k
		}
	}
	row.Ratio = float64(row.Messages) / float64(row.TheoryMessages)
	return nil
}

// crashRun builds a network whose processes have the configs of cfgOf, lets
// n-1 win (it campaigns and, being the highest, leads), runs a round trip of
// heartbeats, and returns a run that crashes n-1 and (if initiator >= 0)
// makes initiator campaign in the same instant. n-2 must win.
func crashRun(p electionParams, cfgOf func(i int) classic.Config, initiator int) (*electionRun, error) {
	s, err := newElectionSim(p.algo, p.ids, p.seed, p.rtt, electionTick, cfgOf, nil)
	if err != nil {
		return nil, err
	}
	top := p.n - 1
	s.Campaign(top)
	if !s.RunUntil(sim.AllAgree, time.Duration(10*p.slow())*electionTick) {
		return nil, fmt.Errorf("%s not elected before the crash", p.ids[top])
	}
	if l, _ := s.Agreed(); l != p.ids[top] {
		return nil, fmt.Errorf("%s elected before the crash, want %s", l, p.ids[top])
	}
	s.RunFor(p.rtt) // a few heartbeats
	return &electionRun{
		s: s, want: p.ids[p.n-2],
		start: func(s *sim.Sim) {
			s.Crash(top)
			if initiator >= 0 {
				s.Campaign(initiator)
			}
		},
	}, nil
}

// coldRun builds a fresh network whose processes have the configs of cfgOf
// (and the options of optsOf, if not nil) and returns a run that makes
// initiator campaign. n-1 must win.
func coldRun(p electionParams, cfgOf func(i int) classic.Config, optsOf func(i int) classic.Options, initiator int) (*electionRun, error) {
	s, err := newElectionSim(p.algo, p.ids, p.seed, p.rtt, electionTick, cfgOf, optsOf)
	if err != nil {
		return nil, err
	}
	return &electionRun{s: s, want: p.ids[p.n-1], start: func(s *sim.Sim) { s.Campaign(initiator) }}, nil
}

// echoRun is coldRun for echo, on its graph: the full mesh or a ring plus
// three random links per process, with its count.
func echoRun(p electionParams) (*electionRun, error) {
	cfgOf := func(int) classic.Config { return classic.Config{TimeoutTicks: p.fast} }
	if p.echoMesh {
		return coldRun(p, cfgOf, nil, 0)
	}
	adj, edges := electionSparseGraph(p.ids, rand.New(rand.NewPCG(p.seed, 0xec40)))
	run, err := coldRun(p, cfgOf, func(i int) classic.Options { return classic.Options{Neighbours: adj[i]} }, 0)
	if err != nil {
		return nil, err
	}
	run.theory = sim.EchoMessages(p.n, edges)
	run.scenario = fmt.Sprintf("random graph (ring + 3 links each, |E| = %d, avg degree %.1f), equal capacities; 0 campaigns",
		edges, 2*float64(edges)/float64(p.n))
	return run, nil
}

// electionSparseGraph links each of ids to its successor on a ring and to
// three random others (duplicates and self-links skipped), as
// TestMessageCounts' echo graph, and returns the neighbour lists and the
// number of edges.
func electionSparseGraph(ids []classic.ID, r *rand.Rand) ([][]classic.ID, int) {
	n := len(ids)
	adj := make([][]classic.ID, n)
	edges := 0
	link := func(a, b int) {
		if a != b && !slices.Contains(adj[a], ids[b]) {
			adj[a] = append(adj[a], ids[b])
			adj[b] = append(adj[b], ids[a])
			edges++
		}
	}
	for i := range n {
		link(i, (i+1)%n)
		for range 3 {
			link(i, r.IntN(n))
		}
	}
	return adj, edges
}

// ringRun is coldRun for the rings, with their tick, timeout and heartbeat:
// see ringTick.
func ringRun(p electionParams) (*electionRun, error) {
	tick := ringTick(p.n, p.rtt)
	beat := max(2, int((10*p.rtt+tick-1)/tick))
	turns := int((time.Duration(p.n)*p.rtt + tick - 1) / tick) // two turns: 2n hops of RTT/2
	cfgOf := func(int) classic.Config { return classic.Config{HeartbeatTicks: beat, TimeoutTicks: turns + 2*beat} }
	s, err := newElectionSim(p.algo, p.ids, p.seed, p.rtt, tick, cfgOf, nil)
	if err != nil {
		return nil, err
	}
	return &electionRun{s: s, want: p.ids[p.n-1], start: func(s *sim.Sim) { s.Campaign(0) }}, nil
}

// ringTick is the tick interval of the ring scenarios: electionTick, or a
// multiple of it that keeps a run to about 500 ticks per process (n·RTT/500,
// 820 ms at n = 4096). A ring election lasts 2n to 3n hops of RTT/2, and n
// processes ticking through it cost the simulator Θ(n²) ticks, minutes at
// n = 4096; no timer fires in these loss-free runs (the timeout is two turns
// of the ring, the election starts with Campaign and every hop is a
// message), so the tick changes neither the count nor the time to elect.
func ringTick(n int, rtt time.Duration) time.Duration {
	k := (time.Duration(n)*rtt + 500*electionTick - 1) / (500 * electionTick)
	return max(1, k) * electionTick
}

// newElectionSim builds a simulator of len(ids) processes running algo as
// classic.New builds it, each with the Config of cfgOf (ID, Peers and Rand
// are set here) and the Options of optsOf (nil: the defaults), on a
// constant RTT. A restarted process gets a fresh machine with fresh
// randomness.
func newElectionSim(algo string, ids []classic.ID, seed uint64, rtt, tick time.Duration,
	cfgOf func(i int) classic.Config, optsOf func(i int) classic.Options) (*sim.Sim, error) {
	n := len(ids)
	restarts := make([]uint64, n)
	var buildErr error
	factory := func(i int, id classic.ID, restarted bool) classic.Machine {
		if restarted {
			restarts[i]++
		}
		c := cfgOf(i)
		c.ID, c.Peers = id, ids
		c.Rand = rand.New(rand.NewPCG(seed, uint64(i)<<32|restarts[i]))
		var opts classic.Options
		if optsOf != nil {
			opts = optsOf(i)
		}
		m, err := classic.New(algo, c, opts)
		if err != nil {
			buildErr = err
			return nil
		}
		return m
	}
	s, err := sim.New(sim.Config{IDs: ids, Factory: factory, Seed: seed, Latency: latency.Constant(n, rtt), TickInterval: tick})
	if buildErr != nil {
		return nil, buildErr
	}
	return s, err
}

// electionIDs names n processes so that the order of IDs is the order of
// indices: process n-1 has the highest ID.
func electionIDs(n int) []classic.ID {
	width := len(strconv.Itoa(n - 1))
	out := make([]classic.ID, n)
	for i := range out {
		out[i] = classic.ID(fmt.Sprintf("p%0*d", width, i))
	}
	return out
}

// electionAlgoHash derives a per-algorithm seed component from its name.
func electionAlgoHash(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return h
}

// durMs converts a duration to milliseconds.
func durMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WriteElectionTable prints rows as a table: measured and theoretical
// counts, their ratio, the time to elect, and the split by message type.
// Skipped rows say so, with their theoretical count.
func WriteElectionTable(w io.Writer, rows []ElectionRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "algorithm\tstart\tn\tmessages\ttheory\tratio\tformula\ttime ms\theartbeats\tleader\tby type")
	for _, r := range rows {
		if r.Skipped {
			fmt.Fprintf(tw, "%s\t%s\t%d\tskipped\t%d\t\t%s\t\t\t\t%s\n",
				r.Algorithm, r.Start, r.N, r.TheoryMessages, r.Formula, r.SkipReason)
			continue
		}
		var types []string
		for _, t := range slices.Sorted(maps.Keys(r.MessagesByType)) {
			types = append(types, fmt.Sprintf("%s %d", t, r.MessagesByType[t]))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.3f\t%s\t%.0f\t%d\t%s\t%s\n",
			r.Algorithm, r.Start, r.N, r.Messages, r.TheoryMessages, r.Ratio, r.Formula,
			r.TimeMs, r.Heartbeats, r.Leader, strings.Join(types, ", "))
	}
	return tw.Flush()
}
