package testnet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/stats"
)

// Scenarios that RunScenario knows.
const (
	// ScenarioKillSuperpeer stops superpeers abruptly, one after another.
	ScenarioKillSuperpeer = "kill-superpeer"
	// ScenarioChurn replaces peers (a random live one stops abruptly, a new
	// one joins) at Rate for Duration.
	ScenarioChurn = "churn"
	// ScenarioPartition cuts a random third of the peers off from the rest
	// for Duration, then heals the cut.
	ScenarioPartition = "partition"
	// ScenarioFlap takes the superpeer of the largest cluster off the
	// network and back, every FlapPeriod (half down, half up), for Duration.
	ScenarioFlap = "flap"
)

// Scenarios lists the scenario names RunScenario accepts.
func Scenarios() []string {
	return []string{ScenarioKillSuperpeer, ScenarioChurn, ScenarioPartition, ScenarioFlap}
}

// FlapPeriod is one down-and-up cycle of the flap scenario: the node is
// off the network for half of it, long enough for its cluster to detect
// the loss and elect another, and back for the other half.
const FlapPeriod = 10 * time.Second

// partitionSide is the fraction of the peers that the partition scenario
// cuts off.
const partitionSide = 1.0 / 3

// ScenarioConfig configures RunScenario.
type ScenarioConfig struct {
	// Name is one of Scenarios.
	Name string
	// Kills is how many superpeers kill-superpeer stops, one at a time,
	// each once the previous one's cluster has a live superpeer again.
	// Each victim is a random superpeer that some peer names (any claimant
	// when none is named). Default 1.
	Kills int
	// Rate is the fraction of the peers that churn replaces per minute.
	// Default 0.1.
	Rate float64
	// Duration is how long churn replaces peers (default 2 minutes), how
	// long a partition lasts (default 30 s), and how long flap goes on
	// (default 1 minute).
	Duration time.Duration
	// Seed chooses the victims, the joiners' keys aside (they come from the
	// Net's seed).
	Seed uint64
	// Graceful makes kill-superpeer shut its victims down cleanly
	// (Net.Shutdown: a goodbye, SIGTERM for a process) rather than crash
	// them (Net.Stop).
	Graceful bool
	// Sample is the period of the observer's samples. Default 20 ms.
	Sample time.Duration
}

// Distribution summarises durations in milliseconds (stats: the median of
// an even count is the mean of the two middle values).
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
	// to be the superpeer of the same cluster, or of overlapping ones (one
	// cluster's key a prefix of the other's). DHT strategy only (geometric
	// clusters have no key of their own); always 0 with geometric.
	SplitBrainMS float64 `json:"split_brain_ms"`
	// MinoritySuperpeerMS (partition) is the total time, while the cut
	// lasted, during which a peer claimed to be the superpeer of a cluster
	// of which it had no majority of the members on its side (members as
	// they were just before the cut). DHT strategy only, like SplitBrainMS.
	MinoritySuperpeerMS float64 `json:"minority_superpeer_ms"`
	// MinorityAtHeal (partition) counts those claims in the last sample
	// before the heal. With Quorum the old superpeer on the minority side
	// keeps its lease for up to one failure-detection timeout after the
	// cut, and then there are none.
	MinorityAtHeal int `json:"minority_superpeers_at_heal"`
	// LeaderChanges (flap) counts how often the superpeer named by most of
	// the flapping node's former cluster-mates changed, from the first
	// fault to the end; FlapperWins how often that superpeer became the
	// flapping node again.
	LeaderChanges int `json:"leader_changes"`
	FlapperWins   int `json:"flapper_wins"`
	// Messages counts the election messages sent, by type, by all nodes
	// (stopped ones up to their stop) over the whole run.
	Messages map[string]uint64 `json:"messages"`
	// Coverage is the fraction of (live peer, sample) pairs, from the first
	// fault to the end, in which the peer named a live superpeer.
	Coverage float64 `json:"coverage"`
	// DisagreeMS is the longest time a live peer's DHT lookup and its
	// cluster's election named different live superpeers, both naming
	// one (0 without elections), but for a lookup answer that the peer's
	// election, or its own, ranks last (a flapping or private node, which
	// the election passes over by design). Stable and invitation keep a
	// live leader by design, so with them it may last.
	DisagreeMS float64 `json:"disagree_ms"`
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
	prog   *scenarioProgress // the faults done, for Config.Progress

	mu         sync.Mutex
	samples    int // (live peer, sample) pairs
	covered    int
	splitBrain time.Duration
	failovers  []*failover
	// partition: the peers whose side holds less than a majority of their
	// cluster, while the cut lasts, and the time one of them claimed it.
	minority      map[peer.ID]bool
	minoritySuper time.Duration
	minorityNow   int // minority claims in the last sample
	atHeal        int // minorityNow just before the heal
	// flap: the flapping node, its former cluster-mates, the superpeer most
	// of them name, and the counts.
	differ        map[peer.ID]time.Time // since when a peer's lookup and election differ
	disagree      time.Duration         // the longest such time
	flapper       peer.ID
	mates         []peer.ID
	named         peer.ID
	changes, wins int
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

// disagrees reports whether a peer's lookup and election (e) name
// different live superpeers, both naming one, as the node simulator
// counts it (nodesim's Observer): not when the lookup's answer is ranked
// last, by the peer's election or by its own (host quality: private or
// flapping), which the election passes over by design. elections are
// every live node's.
func disagrees(e overlay.ElectionStats, live map[peer.ID]bool, elections map[peer.ID]overlay.ElectionStats) bool {
	if !live[e.Lookup] || !live[e.Leader] || e.Lookup == e.Leader {
		return false
	}
	return !slices.Contains(e.Demoted, e.Lookup) && !slices.Contains(elections[e.Lookup].Demoted, e.Lookup)
}

// sample looks at every live node once.
func (o *observer) sample() {
	nodes := o.t.Members()
	live := liveSet(nodes)
	states := make(map[peer.ID]overlay.State, len(nodes))
	var claims []overlay.State
	elections := make(map[peer.ID]overlay.ElectionStats, len(nodes))
	for _, n := range nodes {
		s := n.State()
		states[n.ID()] = s
		if s.Role == overlay.RoleSuperpeer {
			claims = append(claims, s)
		}
		if o.t.cfg.Election != "" {
			elections[n.ID()] = n.ElectionStats()
		}
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.differ == nil {
		o.differ = map[peer.ID]time.Time{}
	}
	differs := func(e overlay.ElectionStats) bool { return disagrees(e, live, elections) }
	for p, since := range o.differ { // a stopped node's entry ends here too
		if !differs(elections[p]) {
			o.disagree = max(o.disagree, now.Sub(since))
			delete(o.differ, p)
		}
	}
	for p, e := range elections {
		if _, ok := o.differ[p]; !ok && differs(e) {
			o.differ[p] = now
		}
	}
	for _, s := range states {
		o.samples++
		if live[s.Superpeer.ID] {
			o.covered++
		}
	}
	if o.t.cfg.Strategy == StrategyDHT && splitBrain(claims) {
		o.splitBrain += o.period
	}
	o.minorityNow = 0
	for _, c := range claims {
		if o.minority[c.Self] {
			o.minorityNow++
		}
	}
	if o.minorityNow > 0 {
		o.minoritySuper += o.period
	}
	if o.flapper != "" {
		votes := map[peer.ID]int{}
		for _, p := range o.mates {
			if s, ok := states[p]; ok && s.Superpeer.ID != "" {
				votes[s.Superpeer.ID]++
			}
		}
		var best peer.ID
		for p, v := range votes {
			if v > votes[best] || v == votes[best] && p < best {
				best = p
			}
		}
		if best != "" && best != o.named {
			o.changes++
			if best == o.flapper {
				o.wins++
			}
			o.named = best
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

// splitBrain reports whether two of the superpeer claims are for the same
// cluster or for overlapping ones (one key a prefix of the other, as when
// two peers disagree on k).
func splitBrain(claims []overlay.State) bool {
	for i, a := range claims {
		for _, b := range claims[i+1:] {
			k := min(a.K, b.K)
			if a.ClusterKey.Cluster(k) == b.ClusterKey.Cluster(k) {
				return true
			}
		}
	}
	return false
}

// stop stops victim (crashes it, or shuts it down when graceful) and,
// when peers named it their superpeer, starts timing its failover.
func (o *observer) stop(victim peer.ID, graceful bool) error {
	var former []peer.ID
	for _, n := range o.t.Members() {
		if n.ID() != victim && n.State().Superpeer.ID == victim {
			former = append(former, n.ID())
		}
	}
	f := &failover{victim: victim, at: time.Now(), former: former}
	err := o.t.stop(victim, graceful)
	if len(former) > 0 {
		o.mu.Lock()
		o.failovers = append(o.failovers, f)
		o.mu.Unlock()
	}
	return err
}

// recovered reports whether every peer that named the stopped victim its
// superpeer names another live one; true at once when none named it (a
// superpeer alone in its cluster, or a geometric one with no members),
// which has nothing to fail over: kill-superpeer waited for it until its
// timeout (peer testnet -n 4 --superpeers 4 --scenario kill-superpeer
// --seed 3; -n 16 --superpeers 4 --strategy geometric).
func (o *observer) recovered(victim peer.ID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.failovers {
		if f.victim == victim {
			return f.took != 0
		}
	}
	return true
}

// RunScenario runs a scenario on a converged Net: it applies the faults
// while an observer samples every node's view, waits until the overlay
// converges again (or ctx ends), and reports what it measured. The error
// is the first fault's or the convergence error, if any; the report is
// valid either way.
func (t *Net) RunScenario(ctx context.Context, sc ScenarioConfig) (ScenarioReport, error) {
	if err := sc.fill(); err != nil {
		return ScenarioReport{}, err
	}
	o := &observer{t: t, period: sc.Sample, prog: newScenarioProgress(t, sc.Name)}
	octx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); o.run(octx) }()
	stopReports := func() {}
	if t.cfg.Progress != nil {
		pctx, cancel := context.WithCancel(ctx)
		reported := make(chan struct{})
		go func() { defer close(reported); o.prog.report(pctx) }()
		stopReports = func() { cancel(); <-reported }
	}
	rng := rand.New(rand.NewPCG(sc.Seed, 0x5eed))
	rep := ScenarioReport{Name: sc.Name}
	var err error
	switch sc.Name {
	case ScenarioKillSuperpeer:
		err = t.killSuperpeers(ctx, o, rng, sc.Kills, sc.Graceful, &rep.Faults)
	case ScenarioChurn:
		err = t.churn(ctx, o, rng, sc, &rep.Faults)
	case ScenarioPartition:
		err = t.partition(ctx, o, rng, sc.Duration, &rep.Faults)
	case ScenarioFlap:
		err = t.flap(ctx, o, sc.Duration, &rep.Faults)
	}
	stopReports() // waitConverged reports from here on
	if err == nil {
		_, err = t.waitConverged(ctx, time.Now(), o.prog)
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
	rep.MinoritySuperpeerMS = millis(o.minoritySuper)
	rep.LeaderChanges, rep.FlapperWins = o.changes, o.wins
	rep.MinorityAtHeal = o.atHeal
	for _, since := range o.differ {
		o.disagree = max(o.disagree, time.Since(since))
	}
	rep.DisagreeMS = millis(o.disagree)
	if o.samples > 0 {
		rep.Coverage = float64(o.covered) / float64(o.samples)
	}
	rep.Messages = t.ElectionMessages()
	nodes := t.Members()
	live := liveSet(nodes)
	for _, n := range nodes {
		if !live[n.State().Superpeer.ID] {
			rep.Orphans++
		}
		rep.DetectionTimeoutMS = max(rep.DetectionTimeoutMS, millis(n.ElectionStats().Timeout))
	}
	return rep, err
}

// DefaultDuration is a scenario's Duration when none is given: 2 minutes
// of churn, a partition of 30 s, a minute of flapping (0 for the others).
func DefaultDuration(name string) time.Duration {
	return map[string]time.Duration{ScenarioChurn: 2 * time.Minute, ScenarioPartition: 30 * time.Second,
		ScenarioFlap: time.Minute}[name]
}

func (sc *ScenarioConfig) fill() error {
	if !slices.Contains(Scenarios(), sc.Name) {
		return fmt.Errorf("%w: scenario %q: use one of %v", ErrConfig, sc.Name, Scenarios())
	}
	switch {
	case sc.Kills < 0:
		return fmt.Errorf("%w: %d kills, want at least 1", ErrConfig, sc.Kills)
	case sc.Rate < 0 || sc.Rate > 1 || math.IsNaN(sc.Rate):
		return fmt.Errorf("%w: churn rate %v per minute, want a fraction of the peers between 0 and 1", ErrConfig, sc.Rate)
	case sc.Duration < 0:
		return fmt.Errorf("%w: scenario duration %v, want a positive duration", ErrConfig, sc.Duration)
	case sc.Graceful && sc.Name != ScenarioKillSuperpeer:
		return fmt.Errorf("%w: a graceful stop is for %s only, not %s", ErrConfig, ScenarioKillSuperpeer, sc.Name)
	}
	if sc.Kills == 0 {
		sc.Kills = 1
	}
	if sc.Rate == 0 {
		sc.Rate = 0.1
	}
	if sc.Duration == 0 {
		sc.Duration = DefaultDuration(sc.Name)
	}
	if sc.Sample <= 0 {
		sc.Sample = 20 * time.Millisecond
	}
	return nil
}

// killSuperpeers stops kills superpeers (crashes them, or shuts them down
// when graceful), each once the previous one's peers have a live
// superpeer again.
func (t *Net) killSuperpeers(ctx context.Context, o *observer, rng *rand.Rand, kills int, graceful bool, faults *[]string) error {
	o.prog.plan(kills, "")
	for i := range kills {
		supers := t.superpeers()
		named := t.namedSuperpeers(supers)
		if len(supers) == 0 || len(t.Members()) < 2 {
			return fmt.Errorf("testnet: no superpeer left to stop after %d kills", i)
		}
		// A claimant that no peer names (a superpeer alone in its cluster,
		// or one that has just claimed and not been heard yet, as an
		// invitation group's leader before the merge) has no failover to
		// time; one is stopped only when no superpeer is named.
		pool, note := named, ""
		if len(named) == 0 {
			pool, note = supers, " (no peer names it: no failover to time)"
		}
		victim := pool[rng.IntN(len(pool))]
		verb := "stop superpeer "
		if graceful {
			verb = "shut down superpeer "
		}
		*faults = append(*faults, verb+victim.String()+note)
		o.prog.fault(verb + short(victim.String()) + ", wait until its peers have another")
		if err := o.stop(victim, graceful); err != nil {
			return err
		}
		if _, err := waitFor(ctx, func() error {
			if !o.recovered(victim) {
				return fmt.Errorf("the peers of stopped superpeer %s have no live superpeer yet", victim.ShortString())
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// superpeers lists the live nodes that claim to be superpeers, sorted.
func (t *Net) superpeers() []peer.ID {
	var out []peer.ID
	for _, n := range t.Members() {
		if n.State().Role == overlay.RoleSuperpeer {
			out = append(out, n.ID())
		}
	}
	slices.Sort(out)
	return out
}

// namedSuperpeers lists, sorted, those of supers that some other live
// node names its superpeer.
func (t *Net) namedSuperpeers(supers []peer.ID) []peer.ID {
	var out []peer.ID
	for _, n := range t.Members() {
		if sp := n.State().Superpeer.ID; sp != n.ID() && slices.Contains(supers, sp) && !slices.Contains(out, sp) {
			out = append(out, sp)
		}
	}
	slices.Sort(out)
	return out
}

// churn replaces a random live peer by a new one every 1/(rate·n) minutes
// for d: the old one stops abruptly, the new one joins at once.
func (t *Net) churn(ctx context.Context, o *observer, rng *rand.Rand, sc ScenarioConfig, faults *[]string) error {
	n := len(t.Members())
	every := time.Duration(float64(time.Minute) / (sc.Rate * float64(n)))
	if every > sc.Duration {
		return fmt.Errorf("%w: churn rate %v of %d peers replaces none in %v", ErrConfig, sc.Rate, n, sc.Duration)
	}
	o.prog.plan(int(sc.Duration/every), fmt.Sprintf("replacing a peer every %v", every.Round(time.Millisecond)))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for range int(sc.Duration / every) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		live := t.Members()
		victim := live[rng.IntN(len(live))].ID()
		o.prog.fault("replace " + short(victim.String()) + " by a new peer")
		if err := o.stop(victim, false); err != nil {
			return err
		}
		joined, err := t.Join(ctx)
		if err != nil {
			return err
		}
		*faults = append(*faults, "replace "+victim.String()+" by "+joined.ID().String())
	}
	return nil
}

// partition cuts a random third of the live peers off from the rest for
// d, then heals the cut. While it lasts the observer times superpeer
// claims from the minority side of each cluster.
func (t *Net) partition(ctx context.Context, o *observer, rng *rand.Rand, d time.Duration, faults *[]string) error {
	nodes := t.Members()
	side := map[peer.ID]bool{}
	var cut []peer.ID
	for _, i := range rng.Perm(len(nodes))[:int(math.Round(partitionSide*float64(len(nodes))))] {
		side[nodes[i].ID()] = true
		cut = append(cut, nodes[i].ID())
	}
	// The members of each cluster on each side, as they are now.
	count := map[dhtselect.Key][2]int{}
	states := make([]overlay.State, len(nodes))
	for i, n := range nodes {
		states[i] = n.State()
		c := count[states[i].ClusterKey]
		if side[n.ID()] {
			c[1]++
		} else {
			c[0]++
		}
		count[states[i].ClusterKey] = c
	}
	minority := map[peer.ID]bool{}
	for i, n := range nodes {
		c, x := count[states[i].ClusterKey], 0
		if side[n.ID()] {
			x = 1
		}
		if 2*c[x] <= c[0]+c[1] {
			minority[n.ID()] = true
		}
	}
	if t.cfg.Strategy == StrategyDHT { // geometric clusters have no key
		o.mu.Lock()
		o.minority = minority
		o.mu.Unlock()
	}
	*faults = append(*faults, fmt.Sprintf("cut %d of %d peers off for %v", len(cut), len(nodes), d))
	o.prog.plan(2, "")
	o.prog.fault((*faults)[len(*faults)-1])
	err := t.Partition(cut)
	if err == nil {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(d):
		}
	}
	o.sample()
	o.mu.Lock()
	o.minority, o.atHeal = nil, o.minorityNow
	o.mu.Unlock()
	*faults = append(*faults, "heal")
	o.prog.fault("heal")
	return errors.Join(err, t.Heal())
}

// flap takes the superpeer of the largest cluster off the network and back
// every FlapPeriod for d, while the observer counts the changes of the
// superpeer its cluster-mates name.
func (t *Net) flap(ctx context.Context, o *observer, d time.Duration, faults *[]string) error {
	sizes := map[peer.ID]int{}
	nodes := t.Members()
	for _, n := range nodes {
		sizes[n.State().Superpeer.ID]++
	}
	var flapper peer.ID
	for _, sp := range t.superpeers() {
		if sizes[sp] > sizes[flapper] {
			flapper = sp
		}
	}
	if flapper == "" {
		return fmt.Errorf("testnet: no superpeer to flap")
	}
	var mates []peer.ID
	for _, n := range nodes {
		if n.ID() != flapper && n.State().Superpeer.ID == flapper {
			mates = append(mates, n.ID())
		}
	}
	o.mu.Lock()
	o.flapper, o.mates, o.named = flapper, mates, flapper
	o.mu.Unlock()
	*faults = append(*faults, fmt.Sprintf("flap superpeer %s (%d members) every %v for %v", flapper, len(mates), FlapPeriod, d))
	o.prog.plan(2*int((d+FlapPeriod-1)/FlapPeriod), "")
	for end := time.Now().Add(d); time.Now().Before(end); {
		o.prog.fault("take superpeer " + short(flapper.String()) + " off the network")
		if err := t.Down(flapper); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), t.Up(flapper))
		case <-time.After(FlapPeriod / 2):
		}
		o.prog.fault("bring superpeer " + short(flapper.String()) + " back")
		if err := t.Up(flapper); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(FlapPeriod / 2):
		}
	}
	return nil
}

// liveSet returns the IDs of nodes as a set.
func liveSet(nodes []Member) map[peer.ID]bool {
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
	s := stats.Sort(ms)
	return Distribution{N: len(s), Median: s.Median(), Max: s.Max()}
}
