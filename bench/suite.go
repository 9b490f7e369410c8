package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet"
)

// The suites of Run, in the order they run.
const (
	SuiteSelection = "selection"
	SuiteElection  = "election"
	SuiteRepair    = "repair"
	SuiteScale     = "scale"
	SuiteAttack    = "attack"
)

// Suites returns the names Config.Suites accepts.
func Suites() []string {
	return []string{SuiteSelection, SuiteElection, SuiteRepair, SuiteScale, SuiteAttack}
}

// Progress is told how a Run goes: the number of steps, then each step as
// it begins (i from 0).
type Progress interface {
	Start(total int)
	Step(i int, desc string)
}

// Config configures Run.
type Config struct {
	// Suites to run (Suites names); empty means all.
	Suites []string
	// Sim and Live choose the halves: the simulator's parts of the suites
	// and the live testnet's. At least one must be set.
	Sim, Live bool
	// Seed seeds everything random.
	Seed uint64
	// Quick shrinks every size to a smoke test of seconds.
	Quick bool
	// LiveSizes, when set, are the scale suite's live testnet sizes
	// instead of its default (32, 64, 128, 256, 512).
	LiveSizes []int
	// Command is recorded in the results (the command line that ran).
	Command string
	// Progress, when set, follows the run.
	Progress Progress
	// Exec is the peer command, for the live parts whose nodes are
	// processes (the attack suite's); without it they fail.
	Exec string
	// SimLiveVirtual are side-by-side rows whose live side ran in
	// virtual time (TestSimLiveVirtual: testing/synctest runs only in a
	// test): the repair suite's live half adds them to its own.
	SimLiveVirtual []SimLiveRow
	// GeoLiveVirtual are the rows of TestGeoLiveVirtual (geometric
	// placement live in virtual time and in the node simulator): the
	// selection suite adds them.
	GeoLiveVirtual []GeoLiveRow
	// Network, when set, is the selection suite's network in place of
	// PlanetLab and the synthetic one (FromMatrix makes one of an RTT
	// matrix), with Superpeers its values of S: by default SelectionS of
	// its size.
	Network    *Network
	Superpeers []int
}

// SelectionS is the selection suite's values of S on a network of n
// hosts: about 2, 5 and 10 % of them (10, 25 and 49 on PlanetLab's 490),
// at least 1, each once.
func SelectionS(n int) []int {
	var out []int
	for _, f := range []float64{0.02, 0.05, 0.1} {
		if s := max(1, int(math.Round(f*float64(n)))); s <= n && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// step is one unit of a run, shown as one step of the progress.
type step struct {
	desc string
	run  func(ctx context.Context, r *Results) error
}

// Run runs the suites and returns what they measured. On an error it
// returns the results so far with the error; a cancelled ctx stops it
// between steps and inside live runs.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if len(cfg.Suites) == 0 {
		cfg.Suites = Suites()
	}
	for _, s := range cfg.Suites {
		if !slices.Contains(Suites(), s) {
			return nil, fmt.Errorf("%w: unknown suite %q; want one of %v", ErrBench, s, Suites())
		}
	}
	if !cfg.Sim && !cfg.Live {
		return nil, fmt.Errorf("%w: neither the simulator's nor the live half chosen", ErrBench)
	}
	if cfg.Network == nil && len(cfg.Superpeers) > 0 {
		return nil, fmt.Errorf("%w: values of S without a network of their own", ErrBench)
	}
	if nw := cfg.Network; nw != nil {
		if !slices.Equal(cfg.Suites, []string{SuiteSelection}) || !cfg.Sim {
			return nil, fmt.Errorf("%w: a network of its own is for the selection suite's simulator half", ErrBench)
		}
		if len(cfg.GeoLiveVirtual) > 0 {
			return nil, fmt.Errorf("%w: rows of PlanetLab's live placement (GeoLiveVirtual) with a network of its own", ErrBench)
		}
		for _, s := range cfg.Superpeers {
			if s < 1 || s > nw.N() {
				return nil, fmt.Errorf("%w: S = %d superpeers among the %d hosts of %s; want 1 <= S <= %d", ErrBench, s, nw.N(), nw.Name, nw.N())
			}
		}
	}
	res := &Results{Command: cfg.Command, Machine: ThisMachine(), StartedAt: time.Now().UTC().Truncate(time.Second),
		Suites: cfg.Suites, Sim: cfg.Sim, Live: cfg.Live, Seed: cfg.Seed, Quick: cfg.Quick}
	var steps []step
	for _, s := range Suites() { // in the canonical order
		if slices.Contains(cfg.Suites, s) {
			steps = append(steps, suiteSteps(s, cfg)...)
		}
	}
	if cfg.Progress != nil {
		cfg.Progress.Start(len(steps))
	}
	start := time.Now()
	defer func() { res.TookS = time.Since(start).Seconds() }()
	for i, st := range steps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if cfg.Progress != nil {
			cfg.Progress.Step(i, st.desc)
		}
		if err := st.run(ctx, res); err != nil {
			return res, fmt.Errorf("%s: %w", st.desc, err)
		}
	}
	return res, nil
}

// suiteSteps lists the steps of one suite.
func suiteSteps(suite string, cfg Config) []step {
	var steps []step
	switch suite {
	case SuiteSelection:
		if !cfg.Sim {
			break
		}
		type netCase struct {
			name  string
			net   func() (*Network, error)
			sizes []int
		}
		synthetic := func(n int) func() (*Network, error) {
			return func() (*Network, error) { return Synthetic(n, cfg.Seed), nil }
		}
		cases := []netCase{{"PlanetLab", PlanetLab, []int{10, 25, 49}}, {"synthetic 10,000", synthetic(10000), []int{100}}}
		if cfg.Quick {
			cases = []netCase{{"PlanetLab", PlanetLab, []int{10}}, {"synthetic 1,000", synthetic(1000), []int{10}}}
		}
		if nw := cfg.Network; nw != nil {
			sizes := slices.Compact(slices.Sorted(slices.Values(cfg.Superpeers)))
			if len(sizes) == 0 {
				sizes = SelectionS(nw.N())
			}
			cases = []netCase{{nw.Name, func() (*Network, error) { return nw, nil }, sizes}}
		}
		if len(cfg.GeoLiveVirtual) > 0 {
			steps = append(steps, step{"selection: geometric live in virtual time (rows of TestGeoLiveVirtual)", func(_ context.Context, r *Results) error {
				r.GeoLive = append(r.GeoLive, cfg.GeoLiveVirtual...)
				return nil
			}})
		}
		for _, c := range cases {
			var nw *Network // made by the case's first step, kept for the others
			for _, s := range c.sizes {
				steps = append(steps, step{fmt.Sprintf("selection: %s, S = %d", c.name, s), func(_ context.Context, r *Results) error {
					if nw == nil {
						var err error
						if nw, err = c.net(); err != nil {
							return err
						}
					}
					rows, err := SelectionCase{Network: nw, S: s, Seed: cfg.Seed,
						Strategies: []Strategy{GeometricStrategy(defaultGeometric()), CoordinatesOnlyStrategy(), DHTStrategy}}.Run()
					r.Selection = append(r.Selection, rows...)
					return err
				}})
			}
		}
	case SuiteElection:
		if !cfg.Sim {
			break
		}
		var sizes []int // the defaults
		if cfg.Quick {
			sizes = []int{8, 16, 32}
		}
		for _, a := range classic.Algorithms() {
			steps = append(steps, step{"election: " + a, func(_ context.Context, r *Results) error {
				rows, err := Election(ElectionConfig{Algorithms: []string{a}, Sizes: sizes, Seed: cfg.Seed})
				r.Election = append(r.Election, rows...)
				return err
			}})
		}
	case SuiteRepair:
		if cfg.Live {
			algos, lc := classic.Algorithms(), LiveRepairConfig{Seed: cfg.Seed}
			if cfg.Quick {
				algos, lc.N, lc.Kills = []string{"bully"}, 8, 1
			}
			for _, a := range algos {
				steps = append(steps, step{"repair: live testnet, " + a, func(ctx context.Context, r *Results) error {
					c := lc
					c.Algorithms = []string{a}
					rows, err := LiveRepair(ctx, c)
					r.LiveRepair = append(r.LiveRepair, rows...)
					return err
				}})
			}
		}
		if cfg.Live && !cfg.Quick {
			// The same scenarios on node machines and live, side by
			// side: two live testnets of 64 nodes, about 4 minutes (the
			// simulator's half takes seconds). Not in a quick run, which
			// the tests make.
			steps = append(steps, step{"repair: node simulator and live testnet side by side", func(ctx context.Context, r *Results) error {
				rows, err := SimLive(ctx, SimLiveConfig{Seed: cfg.Seed})
				r.SimLive = append(append(r.SimLive, cfg.SimLiveVirtual...), rows...)
				return err
			}})
		}
		if !cfg.Sim {
			break
		}
		rc := RepairConfig{Seed: cfg.Seed}
		if cfg.Quick {
			rc.Sizes, rc.Trials, rc.ChurnRates, rc.ChurnDuration = []int{8}, 3, []float64{0.1}, time.Minute
		}
		for _, a := range classic.Algorithms() {
			steps = append(steps, step{"repair: " + a, func(_ context.Context, r *Results) error {
				c := rc
				c.Algorithms = []string{a}
				rows, err := Repair(c)
				r.Repair = append(r.Repair, rows...)
				return err
			}})
		}
	case SuiteScale:
		sizes, live := []int{1000, 10000, 100000}, []int{32, 64, 128, 256, 512}
		window, quiet := 30*time.Second, time.Duration(0)
		if cfg.Quick {
			sizes, live, window, quiet = []int{500, 2000}, []int{8, 16}, 5*time.Second, 5*time.Second // one announce interval at these sizes
		}
		if len(cfg.LiveSizes) > 0 {
			live = cfg.LiveSizes
		}
		if cfg.Sim {
			for _, n := range sizes {
				for _, st := range []Strategy{GeometricStrategy(scaleGeometric()), DHTStrategy} {
					steps = append(steps, step{fmt.Sprintf("scale: simulator, %s, %d peers", st.Name, n), func(_ context.Context, r *Results) error {
						rows, err := SimScale(SimScaleConfig{Sizes: []int{n}, Strategies: []Strategy{st}, Seed: cfg.Seed})
						r.SimScale = append(r.SimScale, rows...)
						return err
					}})
				}
			}
		}
		if cfg.Sim {
			nc := NodeScaleConfig{Seed: cfg.Seed, Converge: []int{1000, 10000, 100000}}
			// Churn stops at 10,000: 10,000 took 445 CPU s, and 100,000
			// would take about 80 CPU minutes (20 s of its churn took
			// 1,354 CPU s, convergence included), more than make bench
			// can give one step.
			churn := []int{1000, 10000}
			if cfg.Quick {
				nc.Converge, churn, nc.Duration = []int{200, 1000}, []int{200}, 2*time.Minute
			}
			for _, n := range nc.Converge {
				steps = append(steps, step{fmt.Sprintf("scale: node machines, DHT, %d nodes to convergence", n), func(_ context.Context, r *Results) error {
					c := nc
					c.Converge, c.ChurnN = []int{n}, -1
					rows, err := NodeScale(c)
					r.NodeScale = append(r.NodeScale, rows...)
					return err
				}})
			}
			for _, n := range churn {
				steps = append(steps, step{fmt.Sprintf("scale: node machines, bully, %d nodes through churn", n), func(_ context.Context, r *Results) error {
					c := nc
					c.Converge, c.ChurnN = []int{}, n
					rows, err := NodeScale(c)
					r.NodeScale = append(r.NodeScale, rows...)
					return err
				}})
			}
		}
		if cfg.Sim {
			gc := GrowthConfig{Seed: cfg.Seed}
			if cfg.Quick {
				gc.Sizes = []int{120}
			}
			steps = append(steps, step{"scale: node machines, the network doubles and halves", func(_ context.Context, r *Results) error {
				rows, err := Growth(gc)
				r.Growth = append(r.Growth, rows...)
				return err
			}})
		}
		if cfg.Live {
			for _, n := range live {
				steps = append(steps, step{fmt.Sprintf("scale: live testnet, %d nodes", n), func(ctx context.Context, r *Results) error {
					rows, err := LiveScale(ctx, LiveScaleConfig{Sizes: []int{n}, Strategy: testnet.StrategyDHT, Window: window, Quiet: quiet, Seed: cfg.Seed})
					r.LiveScale = append(r.LiveScale, rows...)
					return err
				}})
			}
		}
	case SuiteAttack:
		if cfg.Live {
			lc := LiveAttackConfig{Exec: cfg.Exec, Seed: cfg.Seed}
			if cfg.Quick {
				lc.Idle, lc.Duration, lc.Recover = 3*time.Second, 5*time.Second, 20*time.Second
			}
			steps = append(steps, step{"attack: hostile clients, live processes", func(ctx context.Context, r *Results) error {
				rows, err := LiveAttack(ctx, lc)
				r.LiveAttack = append(r.LiveAttack, rows...)
				return err
			}})
		}
		if !cfg.Sim {
			break
		}
		ac := AttackConfig{S: 25, Seed: cfg.Seed}
		if cfg.Quick {
			ac.Trials, ac.Grind = 1, 1<<12
		}
		var nw *Network // loaded by the first step, kept for the other
		for _, a := range []struct {
			mode string
			run  func(AttackConfig) ([]AttackRow, error)
		}{{"geometric", GeometricAttack}, {"dht", DHTAttack}} {
			steps = append(steps, step{"attack: lying peers, " + a.mode + ", PlanetLab", func(_ context.Context, r *Results) error {
				if nw == nil {
					var err error
					if nw, err = PlanetLab(); err != nil {
						return err
					}
				}
				c := ac
				c.Network = nw
				rows, err := a.run(c)
				r.Attack = append(r.Attack, rows...)
				return err
			}})
		}
		nc := NodeAttackConfig{Seed: cfg.Seed}
		if cfg.Quick {
			nc.Trials = 1
		}
		steps = append(steps, step{"attack: liars in the live node's placement, node simulator, PlanetLab", func(_ context.Context, r *Results) error {
			rows, err := NodeAttack(nc)
			r.Attack = append(r.Attack, rows...)
			return err
		}})
	}
	return steps
}
