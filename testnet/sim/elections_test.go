package sim_test

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/latency"
	"github.com/superpeer/superpeer/testnet/sim"
)

// The property tests of this file run the real election machines of package
// classic on the simulator under random fault schedules. Each schedule comes
// from one seed (see newSchedule): 3–9 nodes, a constant RTT of 2–20 ms with
// an optional jitter of up to 5 ms, a loss probability in [0, 0.1), and
// during a fault window of faultWindow: random crashes and restarts, one
// partition that heals, and sometimes a cut link. At the end of the window
// every partition and cut heals; no node is restarted afterwards (crashed
// nodes may stay down). Loss is a property of the simulated network and
// stays on for the whole run.
//
// After settle more virtual time the live nodes must have converged: they
// are connected, exactly one of them has role Leader, every live node names
// it, and it is the node the algorithm's rule picks among the live nodes.
// Because loss stays on, a heartbeat-driven machine can be caught in a
// transient suspicion at any single instant; the check therefore allows a
// short grace period (RunUntil(AllAgree)) after settle before it reads the
// final state with Record.FinalLeader.
//
// A failure prints the algorithm and the seed; replay one schedule with
//
//	go test ./testnet/sim -run 'TestElectionProperties/<algo>' -seed <seed> -v
//
// (the -seed flag restricts the subtests to that one seed).

const (
	faultWindow = 2 * time.Second
	settle      = 6 * time.Second
	grace       = 2 * time.Second
	// detectEvery is how often the failure detector of a driver without
	// heartbeats (kick) looks for live nodes that follow a crashed leader.
	detectEvery = 500 * time.Millisecond
)

var seedFlag = flag.Uint64("seed", 0, "run only this seed of TestElectionProperties (0: all)")

// schedule is one random run, drawn from a seed.
type schedule struct {
	seed   uint64
	n      int
	ids    []classic.ID // ring order is the order of ids
	rtt    time.Duration
	jitter time.Duration
	loss   float64
	caps   []uint64 // echo capacities
}

func (sc schedule) String() string {
	return fmt.Sprintf("seed=%d n=%d ids=%v rtt=%v jitter=%v loss=%.3f caps=%v",
		sc.seed, sc.n, sc.ids, sc.rtt, sc.jitter, sc.loss, sc.caps)
}

// algo describes one election algorithm under test.
type algo struct {
	name string
	// timeoutTicks is Config.TimeoutTicks; it must exceed what the
	// algorithm's documentation asks of it for the schedules drawn here.
	timeoutTicks int
	// build returns the machine of node i.
	build func(sc schedule, cfg classic.Config, i int) (classic.Machine, error)
	// expect returns the leader the algorithm must end with among the live
	// nodes, or classic.None when only agreement on one live leader is
	// required.
	expect func(sc schedule, alive []bool) classic.ID
	// keepAlive reports whether the crash of node i is allowed when alive
	// says who is up; nil allows any crash that leaves a live node.
	keepAlive func(sc schedule, alive []bool, i int) bool
	// kick, when set, makes the driver campaign a live node when the faults
	// end, and then any follower that stays without a live leader: the
	// algorithm has no failure detector of its own.
	kick bool
}

// highestLive is the textbook rule: the live node with the highest ID.
func highestLive(sc schedule, alive []bool) classic.ID {
	best := classic.None
	for i, id := range sc.ids {
		if alive[i] && id > best {
			best = id
		}
	}
	return best
}

// candidates is the top half of the IDs (rounded up): the nodes that may lead.
func candidates(sc schedule) []classic.ID {
	byRank := slices.Clone(sc.ids)
	slices.Sort(byRank)
	slices.Reverse(byRank)
	return byRank[:(sc.n+1)/2]
}

func algos() []algo {
	return []algo{
		{
			name: "Bully", timeoutTicks: 10,
			build: func(_ schedule, cfg classic.Config, _ int) (classic.Machine, error) {
				return classic.NewBully(cfg)
			},
			expect: highestLive,
		},
		{
			// A message goes round the ring twice in at most 2·9 hops of
			// (10 ms + 5 ms jitter) = 270 ms = 27 ticks; 40 ticks exceed it.
			name: "Ring", timeoutTicks: 40,
			build: func(_ schedule, cfg classic.Config, _ int) (classic.Machine, error) {
				return classic.NewRing(cfg)
			},
			expect: highestLive,
		},
		{
			name: "RingMax", timeoutTicks: 40,
			build: func(_ schedule, cfg classic.Config, _ int) (classic.Machine, error) {
				return classic.NewRingMax(cfg)
			},
			expect: highestLive,
		},
		{
			name: "NextInLine", timeoutTicks: 10,
			build: func(_ schedule, cfg classic.Config, _ int) (classic.Machine, error) {
				return classic.NewNextInLine(cfg, 0)
			},
			expect: highestLive,
		},
		{
			name: "Candidate", timeoutTicks: 10,
			build: func(sc schedule, cfg classic.Config, _ int) (classic.Machine, error) {
				return classic.NewCandidate(cfg, candidates(sc))
			},
			// The best live candidate.
			expect: func(sc schedule, alive []bool) classic.ID {
				cs := candidates(sc)
				for _, c := range cs { // highest first
					if alive[slices.Index(sc.ids, c)] {
						return c
					}
				}
				return classic.None
			},
			// Keep at least one candidate up, or nobody may lead.
			keepAlive: func(sc schedule, alive []bool, i int) bool {
				for _, c := range candidates(sc) {
					if j := slices.Index(sc.ids, c); j != i && alive[j] {
						return true
					}
				}
				return false
			},
		},
		{
			// The invitation algorithm merges groups under the leader of the
			// larger group (rank only breaks ties between equal sizes), so
			// which live node ends up leading depends on the history of the
			// merges, not only on who is alive: assert one agreed live
			// leader.
			name: "Invitation", timeoutTicks: 10,
			build: func(_ schedule, cfg classic.Config, _ int) (classic.Machine, error) {
				return classic.NewInvitation(cfg)
			},
			expect: func(schedule, []bool) classic.ID { return classic.None },
		},
		{
			// A stable leader is never replaced while it is live and
			// reachable, however well a restarted node ranks, and flap
			// counts pass over nodes that lost the leadership: which live
			// node leads depends on the history. Assert one agreed live
			// leader.
			name: "Stable", timeoutTicks: 10,
			build: func(_ schedule, cfg classic.Config, _ int) (classic.Machine, error) {
				return classic.NewStable(cfg)
			},
			expect: func(schedule, []bool) classic.ID { return classic.None },
		},
		{
			// Full mesh; the winner is the live node of largest capacity,
			// equal capacities going to the higher ID. Echo has no failure
			// detector, so the driver campaigns a live node when the faults
			// end (the package doc leaves failure detection to the driver).
			name: "Echo", timeoutTicks: 10, kick: true,
			build: func(sc schedule, cfg classic.Config, i int) (classic.Machine, error) {
				var nbs []classic.ID
				for _, id := range sc.ids {
					if id != cfg.ID {
						nbs = append(nbs, id)
					}
				}
				return classic.NewEcho(cfg, nbs, sc.caps[i])
			},
			expect: bestCapacity,
		},
		{
			// Echo on a sparse graph: a ring with one random chord per
			// node (average degree about 4), so most messages travel
			// through other nodes and the spanning tree is deep. A crash
			// that would split the live nodes is not drawn: echo elects
			// within a connected graph.
			name: "EchoSparse", timeoutTicks: 10, kick: true,
			build: func(sc schedule, cfg classic.Config, i int) (classic.Machine, error) {
				return classic.NewEcho(cfg, sparseNeighbours(sc)[cfg.ID], sc.caps[i])
			},
			expect: bestCapacity,
			keepAlive: func(sc schedule, alive []bool, i int) bool {
				up := slices.Clone(alive)
				up[i] = false
				return connected(sc, sparseNeighbours(sc), up)
			},
		},
	}
}

// bestCapacity is echo's rule: the live node of largest capacity, equal
// capacities going to the higher ID.
func bestCapacity(sc schedule, alive []bool) classic.ID {
	best, bestCap := classic.None, uint64(0)
	for i, id := range sc.ids {
		if !alive[i] {
			continue
		}
		if best == classic.None || sc.caps[i] > bestCap || (sc.caps[i] == bestCap && id > best) {
			best, bestCap = id, sc.caps[i]
		}
	}
	return best
}

// sparseNeighbours is the graph of EchoSparse, drawn from the seed: the ring
// of sc.ids plus one chord from each node to a random other node.
func sparseNeighbours(sc schedule) map[classic.ID][]classic.ID {
	rng := rand.New(rand.NewPCG(sc.seed, 0xc40d))
	adj := map[classic.ID][]classic.ID{}
	link := func(a, b classic.ID) {
		if a != b && !slices.Contains(adj[a], b) {
			adj[a] = append(adj[a], b)
			adj[b] = append(adj[b], a)
		}
	}
	for i, id := range sc.ids {
		link(id, sc.ids[(i+1)%sc.n])
		link(id, sc.ids[rng.IntN(sc.n)])
	}
	return adj
}

// connected reports whether the live nodes form one connected graph.
func connected(sc schedule, adj map[classic.ID][]classic.ID, alive []bool) bool {
	index := map[classic.ID]int{}
	for i, id := range sc.ids {
		index[id] = i
	}
	seen := make([]bool, sc.n)
	var stack []int
	live := 0
	for i := range sc.n {
		if alive[i] {
			live++
			if stack == nil {
				stack, seen[i] = []int{i}, true
			}
		}
	}
	reached := 0
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		reached++
		for _, nb := range adj[sc.ids[i]] {
			if j := index[nb]; alive[j] && !seen[j] {
				seen[j] = true
				stack = append(stack, j)
			}
		}
	}
	return reached == live
}

// newSchedule draws the network of one run from seed.
func newSchedule(seed uint64) schedule {
	rng := rand.New(rand.NewPCG(seed, 0x5c4ed))
	sc := schedule{seed: seed, n: 3 + rng.IntN(7)}
	// Random distinct IDs in a random ring order, so that rank and ring
	// position are unrelated.
	for _, v := range rng.Perm(100)[:sc.n] {
		sc.ids = append(sc.ids, classic.ID(fmt.Sprintf("p%02d", v)))
	}
	sc.rtt = time.Duration(2+rng.IntN(19)) * time.Millisecond
	if rng.IntN(2) == 0 {
		sc.jitter = time.Duration(1+rng.IntN(5)) * time.Millisecond
	}
	sc.loss = rng.Float64() * 0.1
	for range sc.n {
		sc.caps = append(sc.caps, 1+rng.Uint64N(4)) // few values: ties happen
	}
	return sc
}

// runSchedule runs algorithm a on the schedule of seed and returns an error
// if the property does not hold at the end.
//
// With quorum set every machine is wrapped with classic.NewQuorum (its
// HardState survives restarts, as a driver must keep it), crashes never leave
// fewer than a majority of the nodes up, and two more properties are checked
// over the whole run: no two live leaders ever share a term, and no node on
// the minority side of the partition is leader once a lease has passed.
func runSchedule(a algo, seed uint64, quorum bool) error {
	sc := newSchedule(seed)
	// The faults come from a generator of their own, so that the network
	// of a seed is the same for every algorithm.
	h := fnv.New64a()
	h.Write([]byte(a.name))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))

	restarts := make([]uint64, sc.n)
	machines := make([]classic.Machine, sc.n) // the last machine of each node: its "disk"
	var buildErr error
	factory := func(i int, id classic.ID, restarted bool) classic.Machine {
		if restarted {
			restarts[i]++
		}
		cfg := classic.Config{
			ID:           id,
			Peers:        sc.ids,
			TimeoutTicks: a.timeoutTicks,
			Rand:         rand.New(rand.NewPCG(seed, uint64(i)<<32|restarts[i])),
		}
		m, err := a.build(sc, cfg, i)
		if err == nil && quorum {
			var hs classic.HardState
			if old, ok := machines[i].(*classic.Quorum); ok {
				hs = old.HardState()
			}
			m, err = classic.NewQuorum(cfg, m, hs)
		}
		if err != nil {
			buildErr = err
			return nil
		}
		machines[i] = m
		return m
	}
	majority := sc.n/2 + 1
	s, err := sim.New(sim.Config{
		IDs:     sc.ids,
		Factory: factory,
		Seed:    seed,
		Latency: latency.Constant(sc.n, sc.rtt),
		Jitter:  sc.jitter,
		Loss:    sc.loss,
	})
	if err != nil {
		return fmt.Errorf("%v: sim.New: %v (factory: %v)", sc, err, buildErr)
	}

	alive := func(s *sim.Sim) []bool {
		out := make([]bool, s.N())
		for i := range out {
			out[i] = s.Alive(i)
		}
		return out
	}
	canCrash := func(s *sim.Sim, i int) bool {
		up := alive(s)
		live := 0
		for j, ok := range up {
			if ok && j != i {
				live++
			}
		}
		if live == 0 || quorum && live < majority {
			return false
		}
		return a.keepAlive == nil || a.keepAlive(sc, up, i)
	}
	randomTime := func(from, to time.Duration) time.Duration {
		return from + time.Duration(rng.Int64N(int64(to-from)))
	}

	var log []string // the faults, for the failure message
	note := func(s *sim.Sim, format string, args ...any) {
		log = append(log, fmt.Sprintf("%v: ", s.Now())+fmt.Sprintf(format, args...))
	}

	s.Campaign(rng.IntN(sc.n))

	// Crashes and restarts.
	for range 1 + rng.IntN(6) {
		at := randomTime(time.Millisecond, faultWindow)
		s.At(at, func(s *sim.Sim) {
			i := rng.IntN(sc.n)
			switch op := rng.IntN(3); {
			case op == 0 && s.Alive(i) && canCrash(s, i):
				note(s, "crash %d (%s)", i, sc.ids[i])
				s.Crash(i)
			case op == 1 || !s.Alive(i):
				if !s.Alive(i) {
					note(s, "restart %d (%s)", i, sc.ids[i])
					s.Restart(i)
				}
			default: // crash and restart a live node at once
				note(s, "bounce %d (%s)", i, sc.ids[i])
				s.Restart(i)
			}
		})
	}
	// One partition that heals within the window.
	tp := randomTime(time.Millisecond, faultWindow*3/4)
	th := randomTime(tp+time.Millisecond, faultWindow)
	groups := make([][]int, 2+rng.IntN(2))
	for i := range sc.n {
		g := rng.IntN(len(groups))
		groups[g] = append(groups[g], i)
	}
	s.At(tp, func(s *sim.Sim) { note(s, "partition %v", groups); s.Partition(groups...) })
	// A leader on a minority side keeps its lease at most until it runs out.
	lease := time.Duration(a.timeoutTicks+classic.PromiseMargin+1) * sim.DefaultTickInterval
	s.At(th, func(s *sim.Sim) { note(s, "heal"); s.Heal() })
	// Sometimes a cut link as well, recovered by the heal at the end.
	if rng.IntN(2) == 0 {
		i, j := rng.IntN(sc.n), rng.IntN(sc.n-1)
		if j >= i {
			j++
		}
		s.At(randomTime(time.Millisecond, faultWindow), func(s *sim.Sim) { note(s, "cut %d-%d", i, j); s.Cut(i, j) })
	}
	// The faults end: everything heals, nobody new restarts.
	s.At(faultWindow, func(s *sim.Sim) {
		note(s, "heal all")
		s.Heal()
		if a.kick {
			var up []int
			for i := range sc.n {
				if s.Alive(i) {
					up = append(up, i)
				}
			}
			k := up[rng.IntN(len(up))]
			note(s, "campaign %d (%s)", k, sc.ids[k])
			s.Campaign(k)
		}
	})
	if a.kick {
		// The driver's failure detector: from then on, a follower that has
		// had no live leader at two checks in a row (detectEvery apart)
		// campaigns; one at a time.
		// (A leader can crash after its election counted it and before
		// the result arrives: the election cannot know.)
		suspect := make([]bool, sc.n)
		var detect func(s *sim.Sim)
		detect = func(s *sim.Sim) {
			for i := range sc.n {
				st := s.State(i)
				j, ok := s.Index(st.Leader)
				was := suspect[i]
				suspect[i] = s.Alive(i) && st.Role == classic.Follower && (!ok || !s.Alive(j))
				if was && suspect[i] {
					note(s, "campaign %d (%s): no live leader (%q)", i, sc.ids[i], st.Leader)
					s.Campaign(i)
					suspect[i] = false
					break
				}
			}
			s.After(detectEvery, detect)
		}
		s.At(faultWindow+detectEvery, detect)
	}

	s.Run(faultWindow + settle)
	s.RunUntil(sim.AllAgree, faultWindow+settle+grace)
	if buildErr != nil {
		return fmt.Errorf("%v: factory: %v", sc, buildErr)
	}

	up := alive(s)
	if quorum {
		if err := checkQuorum(s.Record(), sc, groups, majority, tp+lease, th); err != nil {
			return fmt.Errorf("%v\nfaults: %q\n%v", sc, log, err)
		}
	}
	want := a.expect(sc, up)
	if _, err := s.Record().FinalLeader(want, nil); err != nil {
		var states []string
		for i := range sc.n {
			st := s.State(i)
			if !up[i] {
				states = append(states, fmt.Sprintf("%s:down", sc.ids[i]))
				continue
			}
			states = append(states, fmt.Sprintf("%s:%v(leader=%q,term=%d)", sc.ids[i], st.Role, st.Leader, st.Term))
		}
		return fmt.Errorf("%v\nfaults: %q\nat %v: %v\nstates: %v", sc, log, s.Now(), err, states)
	}
	return nil
}

// checkQuorum checks the safety properties of majority mode on a record: no
// term with two live leaders, no two live leaders at once at all, and no
// leader in a group of fewer than majority nodes during [from, to).
func checkQuorum(r *sim.Record, sc schedule, groups [][]int, majority int, from, to time.Duration) error {
	sb, err := r.SplitBrain()
	if err != nil {
		return err
	}
	if len(sb.SameTerm) > 0 {
		return fmt.Errorf("two leaders of one term: %+v", sb.SameTerm)
	}
	// Promises outlast leases, so leaders of different terms never
	// overlap either.
	if len(sb.Intervals) > 0 {
		return fmt.Errorf("two leaders at once for %v: %+v", sb.Total, sb.Intervals)
	}
	if from >= to {
		return nil // the partition was shorter than a lease
	}
	for _, g := range groups {
		if len(g) >= majority {
			continue
		}
		for _, i := range g {
			spans, err := r.Leading(i)
			if err != nil {
				return err
			}
			for _, sp := range spans {
				if sp.From < to && sp.To > from {
					return fmt.Errorf("%s leads term %d on the minority side %v during [%v, %v), partition until %v",
						sc.ids[i], sp.Term, g, sp.From, sp.To, to)
				}
			}
		}
	}
	return nil
}

// TestElectionProperties runs every algorithm on 1000 random fault schedules
// (50 with -short) and checks that the live nodes end with exactly one agreed
// leader, the one the algorithm's rule picks among them.
func TestElectionProperties(t *testing.T) { properties(t, false) }

// TestQuorumProperties runs every algorithm wrapped with classic.NewQuorum
// on the same 1000 random schedules (50 with -short), each with a random
// partition into two or three groups: besides the final leader, it checks
// that no two live leaders ever share a term and that no node of a minority
// group leads once a lease has passed after the partition.
func TestQuorumProperties(t *testing.T) { properties(t, true) }

func properties(t *testing.T, quorum bool) {
	seeds := uint64(1000)
	if testing.Short() {
		seeds = 50
	}
	for _, a := range algos() {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			if *seedFlag != 0 {
				if err := runSchedule(a, *seedFlag, quorum); err != nil {
					t.Fatalf("%s, replay with -seed %d: %v", a.name, *seedFlag, err)
				}
				return
			}
			failed := 0
			for seed := uint64(1); seed <= seeds; seed++ {
				if err := runSchedule(a, seed, quorum); err != nil {
					failed++
					if failed <= 3 {
						t.Errorf("%s, replay with -seed %d: %v", a.name, seed, err)
					}
				}
			}
			if failed > 0 {
				t.Errorf("%s: %d of %d seeds failed", a.name, failed, seeds)
			}
		})
	}
}
