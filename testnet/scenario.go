package testnet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
)

// Scenarios that RunScenario knows.
const (
	// ScenarioKillSuperpeer stops superpeers abruptly, one after another.
	ScenarioKillSuperpeer = "kill-superpeer"
)

// Scenarios lists the scenario names RunScenario accepts.
func Scenarios() []string { return []string{ScenarioKillSuperpeer} }

// ScenarioConfig configures RunScenario.
type ScenarioConfig struct {
	// Name is one of Scenarios.
	Name string
	// Kills is how many superpeers kill-superpeer stops, one at a time,
	// each once the previous one's cluster has a live superpeer again.
	// Default 1.
	Kills int
	// Seed chooses the victims.
	Seed uint64
	// Sample is the period of the observer's samples. Default 20 ms.
	Sample time.Duration
}

// Distribution summarises durations in milliseconds.
type Distribution struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// ScenarioReport is what a scenario measured, in the shape of `peer testnet
// --scenario NAME --json` (the "scenario" member of the report).
type ScenarioReport struct {
	Name string `json:"name"`
	// Orphans counts live peers without a live superpeer at the end.
	Orphans int `json:"orphans"`
	// FailoverMS is, per stopped superpeer, the time from its stop until
	// every live peer that named it names another live superpeer.
	FailoverMS Distribution `json:"failover_ms"`
	// SplitBrainMS is the total time during which two live peers claimed
	// to be the superpeer of the same cluster. DHT strategy only (geometric
	// clusters have no key of their own); always 0 with geometric.
	SplitBrainMS float64 `json:"split_brain_ms"`
	// Messages counts the election messages sent, by type, by all nodes
	// (stopped ones up to their stop) over the whole run.
	Messages map[string]uint64 `json:"messages"`
	// Coverage is the fraction of (live peer, sample) pairs, from the first
	// fault to the end, in which the peer named a live superpeer.
	Coverage float64 `json:"coverage"`
	// DetectionTimeoutMS is the largest failure-detection timeout of the
	// live nodes' elections at the end (0 without elections): the unit in
	// which failover is judged.
	DetectionTimeoutMS float64 `json:"detection_timeout_ms"`
	// Faults lists what was done, in order.
	Faults []string `json:"faults"`
}

// observer samples every live node's view while a scenario runs.
type observer struct {
	t      *Net
	period time.Duration

	mu         sync.Mutex
	samples    int // (live peer, sample) pairs
	covered    int
	splitBrain time.Duration
	failovers  []*failover
}

// failover is one stopped superpeer and the peers that named it.
type failover struct {
	victim peer.ID
	at     time.Time
	former []peer.ID
	took   time.Duration // 0 until all former peers name a live superpeer
}

func (o *observer) run(ctx context.Context) {
	tick := time.NewTicker(o.period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		o.sample()
	}
}

// sample looks at every live node once.
func (o *observer) sample() {
	nodes := o.t.Nodes()
	live := liveSet(nodes)
	states := make(map[peer.ID]overlay.State, len(nodes))
	claims := map[dhtselect.Key]int{}
	for _, n := range nodes {
		s := n.State()
		states[n.ID()] = s
		if s.Role == overlay.RoleSuperpeer {
			claims[s.ClusterKey]++
		}
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range states {
		o.samples++
		if live[s.Superpeer.ID] {
			o.covered++
		}
	}
	if o.t.cfg.Strategy == StrategyDHT {
		for _, c := range claims {
			if c > 1 {
				o.splitBrain += o.period
				break
			}
		}
	}
	for _, f := range o.failovers {
		if f.took != 0 {
			continue
		}
		done := true
		for _, p := range f.former {
			if s, ok := states[p]; ok && (!live[s.Superpeer.ID] || s.Superpeer.ID == f.victim) {
				done = false
				break
			}
		}
		if done {
			f.took = now.Sub(f.at)
		}
	}
}

// stop stops victim and starts timing its failover.
func (o *observer) stop(victim peer.ID) error {
	var former []peer.ID
	for _, n := range o.t.Nodes() {
		if n.ID() != victim && n.State().Superpeer.ID == victim {
			former = append(former, n.ID())
		}
	}
	f := &failover{victim: victim, at: time.Now(), former: former}
	err := o.t.Stop(victim)
	o.mu.Lock()
	o.failovers = append(o.failovers, f)
	o.mu.Unlock()
	return err
}

func (o *observer) recovered(victim peer.ID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.failovers {
		if f.victim == victim {
			return f.took != 0
		}
	}
	return false
}

// RunScenario runs a scenario on a converged Net: it applies the faults
// while an observer samples every node's view, waits until the overlay
// converges again (or ctx ends), and reports what it measured. The error
// is the convergence error, if any; the report is valid either way.
func (t *Net) RunScenario(ctx context.Context, sc ScenarioConfig) (ScenarioReport, error) {
	if !slices.Contains(Scenarios(), sc.Name) {
		return ScenarioReport{}, fmt.Errorf("%w: scenario %q: use one of %v", ErrConfig, sc.Name, Scenarios())
	}
	if sc.Kills == 0 {
		sc.Kills = 1
	}
	if sc.Kills < 0 {
		return ScenarioReport{}, fmt.Errorf("%w: %d kills, want at least 1", ErrConfig, sc.Kills)
	}
	if sc.Sample <= 0 {
		sc.Sample = 20 * time.Millisecond
	}
	o := &observer{t: t, period: sc.Sample}
	octx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); o.run(octx) }()
	rng := rand.New(rand.NewPCG(sc.Seed, 0x5eed))
	rep := ScenarioReport{Name: sc.Name}
	var err error
	for i := range sc.Kills {
		var supers []peer.ID
		for _, n := range t.Nodes() {
			if n.State().Role == overlay.RoleSuperpeer {
				supers = append(supers, n.ID())
			}
		}
		if len(supers) == 0 || len(t.Nodes()) < 2 {
			err = fmt.Errorf("testnet: no superpeer left to stop after %d kills", i)
			break
		}
		slices.Sort(supers)
		victim := supers[rng.IntN(len(supers))]
		rep.Faults = append(rep.Faults, "stop superpeer "+victim.String())
		if err = o.stop(victim); err != nil {
			break
		}
		if _, err = waitFor(ctx, func() error {
			if !o.recovered(victim) {
				return fmt.Errorf("the peers of stopped superpeer %s have no live superpeer yet", victim.ShortString())
			}
			return nil
		}); err != nil {
			break
		}
	}
	if err == nil {
		_, err = t.WaitConverged(ctx, time.Now())
	}
	cancel()
	<-done
	o.sample()

	o.mu.Lock()
	defer o.mu.Unlock()
	var took []float64
	for _, f := range o.failovers {
		if f.took != 0 {
			took = append(took, millis(f.took))
		}
	}
	rep.FailoverMS = summarize(took)
	rep.SplitBrainMS = millis(o.splitBrain)
	if o.samples > 0 {
		rep.Coverage = float64(o.covered) / float64(o.samples)
	}
	rep.Messages = t.ElectionMessages()
	nodes := t.Nodes()
	live := liveSet(nodes)
	for _, n := range nodes {
		if !live[n.State().Superpeer.ID] {
			rep.Orphans++
		}
		rep.DetectionTimeoutMS = max(rep.DetectionTimeoutMS, millis(n.ElectionStats().Timeout))
	}
	return rep, err
}

// liveSet returns the IDs of nodes as a set.
func liveSet(nodes []*overlay.Node) map[peer.ID]bool {
	live := make(map[peer.ID]bool, len(nodes))
	for _, n := range nodes {
		live[n.ID()] = true
	}
	return live
}

// waitFor polls cond every 20 ms until it returns nil, and returns how long
// that took, or cond's last error when ctx ends first.
func waitFor(ctx context.Context, cond func() error) (time.Duration, error) {
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), err
		case <-tick.C:
		}
	}
}

func summarize(ms []float64) Distribution {
	if len(ms) == 0 {
		return Distribution{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Distribution{N: len(s), Median: med, Max: s[len(s)-1]}
}
