package testnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/testnet/latency"
)

// ErrConfig reports an invalid testnet configuration.
var ErrConfig = errors.New("testnet: invalid configuration")

// Config configures a Net.
type Config struct {
	// N is the number of nodes, at least 1.
	N int
	// Strategy names the selection strategy: StrategyDHT (default) or
	// StrategyGeometric, which needs Target.Superpeers.
	Strategy string
	// Geometric tunes the geometric strategy (see overlay.Config); its
	// Capacity is the most ordinary peers per superpeer. PingInterval and
	// TokenInterval are the nodes' periods of RTT samples and of the token
	// machine; zero means the node's defaults (1 s and 1 s).
	Geometric                   geometric.Config
	PingInterval, TokenInterval time.Duration
	// GeoRelocate turns on the relocation between clusters
	// (overlay.Config.GeoRelocate).
	GeoRelocate bool
	// Target is the superpeer target.
	Target dhtselect.Target
	// Seed derives the peer keys.
	Seed uint64
	// AnnounceInterval and ReevaluateInterval are the nodes' periods.
	// ReevaluateInterval defaults to 1 s. AnnounceInterval defaults to
	// DefaultAnnounceInterval: a real node's, whatever the strategy (its
	// membership is cluster-scoped).
	AnnounceInterval, ReevaluateInterval time.Duration
	// Latency, when set, gives the links their delays: node i is host i of
	// the matrix, and the one link between nodes i and j delays every write
	// by RTT(i, j)/2 each way. It needs at least N hosts; missing entries are
	// filled in (see latency.Matrix.FillMissing). Nil means no delay.
	Latency *latency.Matrix
	// Election, Quorum and IgnoreFlaps make every cluster run that election
	// algorithm (overlay.Config.Election, Quorum, IgnoreFlaps); empty runs
	// none.
	Election    string
	Quorum      bool
	IgnoreFlaps bool
	// Progress, when set, is told how WaitConverged and RunScenario go
	// (Progress), a few times a second and once more when they converge.
	// The calls never overlap; each should return quickly.
	Progress func(Progress)
	// Logger receives the nodes' logs; nil discards them.
	Logger *slog.Logger
	// Exec, when set, is the path of the peer command: every node then runs
	// as its own OS process (`peer run --control`) on loopback TCP and
	// QUIC, is stopped with SIGKILL, and is cut off by its connection gater.
	// Latency is refused then (loopback has no per-pair delays), and the
	// geometric PingInterval and TokenInterval are the node's defaults.
	Exec string
}

// MaxProcs bounds N when every node is its own process: each holds a
// whole libp2p stack (tens of MB, a few dozen threads).
const MaxProcs = 256

// MaxNodes bounds N: every pair of nodes gets a mocknet link (O(N²)
// links in this process), so a larger in-process testnet would only
// exhaust the machine. Scale beyond it belongs to the simulator.
const MaxNodes = 1024

// Strategies: selection by ID-space reservation, or by repelling tokens in
// network coordinates.
const (
	StrategyDHT       = overlay.StrategyDHT
	StrategyGeometric = overlay.StrategyGeometric
)

// maxNodes is MaxProcs or MaxNodes.
func (c *Config) maxNodes() int {
	if c.Exec != "" {
		return MaxProcs
	}
	return MaxNodes
}

func (c *Config) fill() error {
	switch {
	case c.Exec == "" && (c.N < 1 || c.N > MaxNodes):
		return fmt.Errorf("%w: -n %d, want 1 to %d nodes in one process", ErrConfig, c.N, MaxNodes)
	case c.Exec != "" && (c.N < 1 || c.N > MaxProcs):
		return fmt.Errorf("%w: -n %d, want 1 to %d node processes", ErrConfig, c.N, MaxProcs)
	case c.Exec != "" && c.Latency != nil:
		return fmt.Errorf("%w: a latency matrix needs the in-process network; node processes talk over loopback, which has no per-pair delays", ErrConfig)
	}
	if c.Strategy == "" {
		c.Strategy = StrategyDHT
	}
	if c.Strategy != StrategyDHT && c.Strategy != StrategyGeometric {
		return fmt.Errorf("%w: strategy %q: use %s or %s", ErrConfig, c.Strategy, StrategyDHT, StrategyGeometric)
	}
	if c.Strategy == StrategyGeometric && c.Target.Superpeers < 1 {
		return fmt.Errorf("%w: the geometric strategy needs --superpeers (a number of tokens), not a fraction", ErrConfig)
	}
	if err := c.Target.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Latency != nil {
		if c.Latency.N() < c.N {
			return fmt.Errorf("%w: the latency matrix has %d hosts, fewer than the %d nodes; node i needs row i",
				ErrConfig, c.Latency.N(), c.N)
		}
		full, err := c.Latency.FillMissing()
		if err != nil {
			return fmt.Errorf("%w: latency matrix: %w", ErrConfig, err)
		}
		c.Latency = full
	}
	if c.AnnounceInterval == 0 {
		c.AnnounceInterval = DefaultAnnounceInterval(c.N, c.Strategy)
	}
	if c.ReevaluateInterval == 0 {
		c.ReevaluateInterval = time.Second
	}
	if c.TokenInterval == 0 {
		c.TokenInterval = time.Second
	}
	if c.PingInterval == 0 {
		c.PingInterval = overlay.DefaultConfig().PingInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// DefaultAnnounceInterval is the announce interval of a testnet of n nodes
// with the given strategy when Config leaves it zero: a real node's
// (overlay.DefaultConfig, 5 s) whatever n and the strategy. Membership is
// cluster-scoped with both strategies (overlay/cluster.go, and
// overlay/geomembership.go for the geometric strategy): no peer
// announces on a topic of the whole swarm, so a peer's load does not grow
// with n and the process's grows as n, not n². (The geometric strategy's
// interval was stretched, n × 125 ms and more, while every geometric peer
// announced on the global membership topic, issue 20.)
func DefaultAnnounceInterval(int, string) time.Duration {
	return overlay.DefaultConfig().AnnounceInterval
}

// Net is a running network of overlay nodes.
type Net struct {
	cfg     Config
	fab     fabric
	keys    *rand.ChaCha8 // the peer keys, in start order
	mu      sync.Mutex
	ids     []peer.ID // node i's ID, stopped nodes included
	nodes   []Member  // node i, row i of the matrix; nil once stopped
	cut     [][2]int  // node pairs cut by Partition or Down, for Heal and Up
	started time.Time
	// stoppedSent counts the election messages of stopped nodes, by type.
	stoppedSent map[string]uint64
	// timeline is the Overview's; watched says Overview was called, so
	// that a stop notes the clusters at once (see Overview).
	timeline   overlay.Timeline
	watched    atomic.Bool
	overviewMu sync.Mutex
}

// Start starts cfg.N nodes: in this process, or each in its own OS process
// when cfg.Exec is set. Node 0 is the bootstrap peer of all the others.
func Start(ctx context.Context, cfg Config) (*Net, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	t := &Net{cfg: cfg, keys: rand.NewChaCha8(seedBytes(cfg.Seed)), started: time.Now()}
	if cfg.Exec != "" {
		pf, err := newProcFabric(&t.cfg)
		if err != nil {
			return nil, err
		}
		t.fab = pf
	} else {
		t.fab = newMemFabric(&t.cfg)
	}
	for i := range cfg.N {
		if err := t.startNode(ctx, i, 0); err != nil {
			return nil, errors.Join(err, t.Close())
		}
	}
	return t, nil
}

// startNode starts node i, which must be the next, with the next key,
// bootstrapped from node boot unless it is node 0.
func (t *Net) startNode(ctx context.Context, i, boot int) error {
	sk, id, err := nextKey(t.keys)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.ids = append(t.ids, id)
	t.nodes = append(t.nodes, nil)
	t.mu.Unlock()
	if i == 0 {
		boot = -1
	}
	m, err := t.fab.start(ctx, i, sk, boot)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.nodes[i] = m
	t.mu.Unlock()
	return nil
}

// Join starts one more node, reachable from every live one and
// bootstrapped from the live node started first, and returns it. Its key
// comes next from the seed; with a latency matrix it gets the next row,
// which must exist.
func (t *Net) Join(ctx context.Context) (Member, error) {
	live := t.indexed()
	t.mu.Lock()
	i := len(t.ids)
	t.mu.Unlock()
	switch {
	case len(live) == 0:
		return nil, fmt.Errorf("testnet: no live node to join through")
	case i >= t.cfg.maxNodes():
		return nil, fmt.Errorf("%w: node %d would pass the limit of %d nodes", ErrConfig, i, t.cfg.maxNodes())
	case t.cfg.Latency != nil && i >= t.cfg.Latency.N():
		return nil, fmt.Errorf("%w: node %d has no row in the latency matrix of %d hosts", ErrConfig, i, t.cfg.Latency.N())
	}
	if err := t.startNode(ctx, i, live[0].Index); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fault(t.ids[i], "node %d (%s) joined", i, overlay.Short(t.ids[i].String()))
	return t.nodes[i], nil
}

// nextKey draws the next node's key from keys (a Net's seeded source)
// and returns it with its peer ID.
func nextKey(keys io.Reader) (crypto.PrivKey, peer.ID, error) {
	sk, _, err := crypto.GenerateEd25519Key(keys)
	if err != nil {
		return nil, "", err
	}
	id, err := peer.IDFromPrivateKey(sk)
	return sk, id, err
}

func seedBytes(seed uint64) [32]byte {
	var b [32]byte
	for i := range 8 {
		b[i] = byte(seed >> (8 * i))
	}
	return b
}

// Nodes returns the live in-process nodes, in start order; none when the
// nodes run as processes (see Members).
func (t *Net) Nodes() []*overlay.Node {
	var out []*overlay.Node
	for _, n := range t.indexed() {
		if on, ok := n.Member.(*overlay.Node); ok {
			out = append(out, on)
		}
	}
	return out
}

// Members returns the live nodes, in start order.
func (t *Net) Members() []Member {
	var out []Member
	for _, n := range t.indexed() {
		out = append(out, n.Member)
	}
	return out
}

// indexedNode is a live node and its index (its row of the latency matrix).
type indexedNode struct {
	Index int
	Member
}

func (t *Net) indexed() []indexedNode {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []indexedNode
	for i, n := range t.nodes {
		if n != nil {
			out = append(out, indexedNode{i, n})
		}
	}
	return out
}

// index returns the index of the live node id.
func (t *Net) index(id peer.ID) (int, error) {
	for _, n := range t.indexed() {
		if n.ID() == id {
			return n.Index, nil
		}
	}
	return 0, fmt.Errorf("testnet: no live node %s", id)
}

// Stop stops the node with the given ID abruptly, as a crashed process:
// in process, its links are cut first, so no peer hears from it again, and
// it closes without a goodbye; as a process, it gets SIGKILL.
func (t *Net) Stop(id peer.ID) error { return t.stop(id, false) }

// Shutdown stops the node with the given ID cleanly: in process, it
// closes (saying goodbye) before its links are cut; as a process, it gets
// SIGTERM, on which peer run closes its node.
func (t *Net) Shutdown(id peer.ID) error { return t.stop(id, true) }

func (t *Net) stop(id peer.ID, graceful bool) error {
	i, err := t.index(id)
	if err != nil {
		return err
	}
	t.mu.Lock()
	n := t.nodes[i]
	t.mu.Unlock()
	how := "crashed"
	if graceful {
		how = "shut down"
	}
	// The fault goes into the time line before the node leaves the
	// Net's list: an overview taken between the two would otherwise note
	// its cluster without a superpeer before the crash that caused it
	// (TestOverview under -race).
	t.fault(id, "node %d (%s, %s) %s", i, overlay.Short(id.String()), n.State().Role, how)
	t.mu.Lock()
	t.nodes[i] = nil
	if t.stoppedSent == nil {
		t.stoppedSent = map[string]uint64{}
	}
	addCounts(t.stoppedSent, n.ElectionStats().Sent)
	t.mu.Unlock()
	if t.watched.Load() {
		t.overview() // the clusters without it, before anyone could react
	}
	err = t.fab.kill(i, graceful)
	if t.watched.Load() {
		t.overview()
	}
	return err
}

// Partition cuts the live nodes in side off from the other live nodes,
// their open connections included, until Heal. The nodes keep running:
// each side sees the other fall silent.
func (t *Net) Partition(side []peer.ID) error {
	live := t.indexed()
	in := map[peer.ID]bool{}
	for _, p := range side {
		if !slices.ContainsFunc(live, func(n indexedNode) bool { return n.ID() == p }) {
			return fmt.Errorf("testnet: no live node %s to cut off", p)
		}
		in[p] = true
	}
	var pairs [][2]int
	for x, a := range live {
		for _, b := range live[x+1:] {
			if in[a.ID()] != in[b.ID()] {
				pairs = append(pairs, [2]int{a.Index, b.Index})
			}
		}
	}
	t.fault("", "partition: %d of %d live nodes cut off from the others", len(side), len(live))
	return t.cutPairs(pairs)
}

// Down cuts the live node id off from every other live node, as a host
// whose network is gone while its process runs on, until Up or Heal.
func (t *Net) Down(id peer.ID) error {
	i, err := t.index(id)
	if err != nil {
		return err
	}
	var pairs [][2]int
	for _, n := range t.indexed() {
		if n.Index != i {
			pairs = append(pairs, [2]int{i, n.Index})
		}
	}
	t.fault(id, "node %d (%s) cut off from every other", i, overlay.Short(id.String()))
	return t.cutPairs(pairs)
}

// cutPairs cuts each pair of nodes that is not cut yet, noting it for
// restore.
func (t *Net) cutPairs(pairs [][2]int) error {
	var errs []error
	for _, pr := range pairs {
		t.mu.Lock()
		done := slices.ContainsFunc(t.cut, func(c [2]int) bool { return c == pr || c == [2]int{pr[1], pr[0]} })
		t.mu.Unlock()
		if done {
			continue
		}
		errs = append(errs, t.fab.cut(pr[0], pr[1]))
		t.mu.Lock()
		t.cut = append(t.cut, pr)
		t.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Up restores the links that Down or Partition cut from the node id to
// live nodes. The node reconnects by itself (it dials its bootstrap peers
// again, and they or gossip lead it to the rest).
func (t *Net) Up(id peer.ID) error {
	i, err := t.index(id)
	if err != nil {
		return err
	}
	t.fault(id, "node %d (%s) reconnected", i, overlay.Short(id.String()))
	return t.restore(func(a, b peer.ID) bool { return a == id || b == id })
}

// Heal restores every link that Partition or Down cut between live nodes.
func (t *Net) Heal() error {
	t.fault("", "healed: every cut link restored")
	return t.restore(func(a, b peer.ID) bool { return true })
}

func (t *Net) restore(match func(a, b peer.ID) bool) error {
	t.mu.Lock()
	var keep, redo [][2]int
	for _, pr := range t.cut {
		a, b := t.ids[pr[0]], t.ids[pr[1]]
		switch {
		case t.nodes[pr[0]] == nil || t.nodes[pr[1]] == nil: // stopped since: stays cut
		case match(a, b):
			redo = append(redo, pr)
		default:
			keep = append(keep, pr)
		}
	}
	t.cut = keep
	t.mu.Unlock()
	var errs []error
	for _, pr := range redo {
		errs = append(errs, t.fab.mend(pr[0], pr[1]))
	}
	return errors.Join(errs...)
}

// Close stops every node and the network.
func (t *Net) Close() error {
	t.mu.Lock()
	t.nodes = nil
	t.mu.Unlock()
	return t.fab.close()
}

// ElectionMessages counts the election messages sent by all nodes, by
// type: the live ones so far and the stopped ones until they stopped.
func (t *Net) ElectionMessages() map[string]uint64 {
	out := map[string]uint64{}
	t.mu.Lock()
	addCounts(out, t.stoppedSent)
	t.mu.Unlock()
	for _, n := range t.Members() {
		addCounts(out, n.ElectionStats().Sent)
	}
	return out
}

// addCounts adds the counts of src to dst.
func addCounts(dst, src map[string]uint64) {
	for k, c := range src {
		dst[k] += c
	}
}

// Expected is the brute-force answer for the live nodes: k and every node's
// assignment.
func (t *Net) Expected() (int, []dhtselect.Assignment) {
	nodes := t.Members()
	ids := make([]peer.ID, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID()
	}
	k := t.cfg.Target.K(len(ids))
	return k, dhtselect.Assign(ids, k)
}

// ByRank reports whether the named election keeps the highest-ranked live
// member as leader, so that its winner is the peer the DHT lookup names.
// Two do not: invitation merges groups under the leader of the larger
// group, and stable never replaces a live leader, so a closer peer that
// joins later does not take over.
func ByRank(election string) bool { return election != "invitation" && election != "stable" }

// agreedLeaders returns, when the nodes run an election that does not elect
// by rank (ByRank), the superpeer of each cluster that has exactly one live
// member in the superpeer role: there the election's choice, not the
// closest peer, is the right answer. It is empty otherwise.
func (t *Net) agreedLeaders(as []dhtselect.Assignment) map[dhtselect.Key]peer.ID {
	out := map[dhtselect.Key]peer.ID{}
	if t.cfg.Election == "" || ByRank(t.cfg.Election) {
		return out
	}
	cluster := map[peer.ID]dhtselect.Key{}
	for _, a := range as {
		cluster[a.ID] = a.ClusterKey
	}
	count := map[dhtselect.Key]int{}
	for _, n := range t.Members() {
		if n.State().Role == overlay.RoleSuperpeer {
			ck := cluster[n.ID()]
			out[ck] = n.ID()
			count[ck]++
		}
	}
	for ck, c := range count {
		if c != 1 {
			delete(out, ck)
		}
	}
	return out
}

// Mismatch describes one node whose view differs from the brute-force answer.
type Mismatch struct {
	Node peer.ID
	What string
}

func (m Mismatch) String() string {
	if m.Node == "" {
		return m.What
	}
	return m.Node.ShortString() + ": " + m.What
}

// Check compares every live node's view (k, role, cluster key, superpeer and
// cluster members) with the brute-force answer and lists the differences.
func (t *Net) Check() []Mismatch {
	var failed []Mismatch
	for _, err := range t.fab.failed() {
		failed = append(failed, Mismatch{What: err.Error()})
	}
	if len(failed) > 0 {
		return failed
	}
	if t.cfg.Strategy == StrategyGeometric {
		return t.checkGeometric()
	}
	k, as := t.Expected()
	members := map[dhtselect.Key][]peer.ID{}
	for _, c := range dhtselect.Clusters(as, k) {
		members[c.Key] = c.Members
	}
	byID := map[peer.ID]dhtselect.Assignment{}
	for _, a := range as {
		byID[a.ID] = a
	}
	agreed := t.agreedLeaders(as)
	var out []Mismatch
	for _, n := range t.Members() {
		s, want := n.State(), byID[n.ID()]
		if sp, ok := agreed[want.ClusterKey]; ok {
			want.Superpeer = sp
		}
		wantRole := overlay.RoleOrdinary
		if want.Superpeer == want.ID {
			wantRole = overlay.RoleSuperpeer
		}
		switch {
		case s.K != k:
			out = append(out, Mismatch{n.ID(), fmt.Sprintf("k = %d, want %d (size estimate %d from %s)", s.K, k, s.Size.N, s.Size.Source)})
		case s.ClusterKey != want.ClusterKey:
			out = append(out, Mismatch{n.ID(), "wrong cluster key"})
		case s.Superpeer.ID != want.Superpeer:
			out = append(out, Mismatch{n.ID(), fmt.Sprintf("superpeer %s, want %s", s.Superpeer.ID.ShortString(), want.Superpeer.ShortString())})
		case s.Role != wantRole:
			out = append(out, Mismatch{n.ID(), fmt.Sprintf("role %s, want %s", s.Role, wantRole)})
		case !slices.Equal(s.Members, members[want.ClusterKey]):
			out = append(out, Mismatch{n.ID(), fmt.Sprintf("%d members known, want %d", len(s.Members), len(members[want.ClusterKey]))})
		}
	}
	return out
}

// What electionNote asks a node for beyond a Member's methods. Both
// fabrics' members have the first, an in-process node the second (a
// process's bans come from its report, Net.Process); the assertions keep a
// rename from silently emptying the notes.
type (
	membershipReporter interface {
		MembershipStatus() *overlay.MembershipStatus
	}
	banReporter interface{ Banned() []peer.ID }
)

var (
	_ membershipReporter = (*overlay.Node)(nil)
	_ membershipReporter = (*proc)(nil)
	_ banReporter        = (*overlay.Node)(nil)
)

// electionNote is what a report's mismatch adds of the node's election,
// so that a run that did not converge says why (the lookup's answer, the
// election's leader, role and term, its registrar and registrations, the
// peers the node bans): the report is all that a failed test in CI
// prints.
func (t *Net) electionNote(n Member) string {
	var parts []string
	if e := n.ElectionStats(); e.Algorithm != "" {
		parts = append(parts, fmt.Sprintf("lookup %s, election leader %s, %s, term %d", e.Lookup.ShortString(), e.Leader.ShortString(), e.Role, e.Term))
	}
	if ms, ok := n.(membershipReporter); ok {
		if m := ms.MembershipStatus(); m != nil {
			reg := m.Registrar // as the lookup and the leader are shown, if it decodes
			if p, err := peer.Decode(reg); err == nil {
				reg = p.ShortString()
			}
			parts = append(parts, fmt.Sprintf("registrar %s, serving %v, registry %d, roster %d, registrations sent %v, answered %v",
				reg, m.Serving, m.Registry, m.Roster, m.Sent, m.Received))
		}
	}
	var banned []peer.ID
	if p, err := t.Process(n.ID()); err == nil {
		banned = p.Banned
	} else if bn, ok := n.(banReporter); ok {
		banned = bn.Banned()
	}
	if len(banned) > 0 {
		short := make([]string, len(banned))
		for i, p := range banned {
			short[i] = p.ShortString()
		}
		parts = append(parts, "bans "+strings.Join(short, " "))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// checkGeometric checks the geometric strategy's end state, which has no
// brute-force answer: exactly S superpeers (or N, if fewer), each holding a
// distinct token; every ordinary node attached to a live superpeer that
// lists it; no superpeer serving more than its capacity.
func (t *Net) checkGeometric() []Mismatch {
	nodes := t.Members()
	capacity := t.cfg.Geometric.Capacity
	if capacity == 0 {
		capacity = geometric.DefaultConfig().Capacity
	}
	states := map[peer.ID]overlay.State{}
	for _, n := range nodes {
		states[n.ID()] = n.State()
	}
	var out []Mismatch
	supers, tokens := 0, map[int]peer.ID{}
	for _, n := range nodes {
		s := states[n.ID()]
		switch {
		case s.Role == overlay.RoleSuperpeer:
			supers++
			if other, dup := tokens[s.Token]; dup {
				out = append(out, Mismatch{n.ID(), fmt.Sprintf("holds token %d, as does %s", s.Token, other.ShortString())})
			}
			tokens[s.Token] = n.ID()
			if len(s.Members)-1 > capacity {
				out = append(out, Mismatch{n.ID(), fmt.Sprintf("serves %d ordinary peers, capacity %d", len(s.Members)-1, capacity)})
			}
		case s.Superpeer.ID == "":
			out = append(out, Mismatch{n.ID(), "not attached to a superpeer"})
		default:
			sp, ok := states[s.Superpeer.ID]
			switch {
			case !ok:
				out = append(out, Mismatch{n.ID(), "attached to " + s.Superpeer.ID.ShortString() + ", not a live node"})
			case sp.Role != overlay.RoleSuperpeer:
				out = append(out, Mismatch{n.ID(), "attached to " + s.Superpeer.ID.ShortString() + ", not a superpeer"})
			case !slices.Contains(sp.Members, n.ID()):
				out = append(out, Mismatch{n.ID(), "attached to " + s.Superpeer.ID.ShortString() + ", which does not list it"})
			}
		}
	}
	if want := min(t.cfg.Target.Superpeers, len(nodes)); supers != want && len(nodes) > 0 {
		out = append(out, Mismatch{nodes[0].ID(), fmt.Sprintf("(overlay) %d superpeers, want %d", supers, want)})
	}
	return out
}

// WaitConverged polls Check until it finds no mismatch, and returns the time
// from since until then. With the geometric strategy, whose end state is not
// known in advance, the state must also hold still: no mismatch and no
// change of any node's role or superpeer for 20 token intervals; the time
// returned is when that quiet stretch began. It fails when ctx ends first,
// with the remaining mismatches in the error. Config.Progress, when set,
// hears how it goes a few times a second, and once more when it converged.
func (t *Net) WaitConverged(ctx context.Context, since time.Time) (time.Duration, error) {
	return t.waitConverged(ctx, since, nil)
}

// waitConverged is WaitConverged; sp, when set, fills in the scenario's
// step in the Progress reports.
func (t *Net) waitConverged(ctx context.Context, since time.Time, sp *scenarioProgress) (time.Duration, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	// Geometric: nothing may change for 20 token intervals, the live
	// MinHold (10) plus one snapshot period (10): by then every holder has
	// held its token long enough to move it and has decided on a fresh
	// snapshot of the coordinates not to.
	quiet := 20 * t.cfg.TokenInterval
	var (
		last     string
		stable   time.Time
		reported time.Time
	)
	report := func(ms []Mismatch, final bool) {
		if t.cfg.Progress == nil || !final && time.Since(reported) < progressPeriod {
			return
		}
		reported = time.Now()
		p, began := t.progress(ms), since
		p.Step, p.Elapsed = "converging", reported.Sub(since)
		if !stable.IsZero() {
			p.Step, began = "holding still for "+quiet.String(), stable
		}
		if sp != nil {
			sp.fill(&p, began)
		} else {
			p.StepElapsed = reported.Sub(began)
		}
		t.cfg.Progress(p)
	}
	for {
		ms := t.Check()
		if len(ms) == 0 {
			if t.cfg.Strategy != StrategyGeometric {
				report(ms, true)
				return time.Since(since), nil
			}
			if sig := t.signature(); sig != last || stable.IsZero() {
				last, stable = sig, time.Now()
			} else if time.Since(stable) >= quiet {
				report(ms, true)
				return stable.Sub(since), nil
			}
		} else {
			last, stable = "", time.Time{}
		}
		report(ms, false)
		select {
		case <-ctx.Done():
			return time.Since(since), fmt.Errorf("testnet: not converged: %d of %d nodes disagree with the brute-force answer, e.g. %s",
				len(ms), len(t.Members()), firstOr(ms, "the roles kept changing"))
		case <-tick.C:
		}
	}
}

// signature summarises every node's role and superpeer.
func (t *Net) signature() string {
	var b []byte
	for _, n := range t.Members() {
		s := n.State()
		b = fmt.Appendf(b, "%s:%d:%s;", n.ID(), s.Role, s.Superpeer.ID)
	}
	return string(b)
}

func firstOr(ms []Mismatch, none string) string {
	if len(ms) == 0 {
		return none
	}
	return ms[0].String()
}

// Traffic counts the bytes the nodes write to their streams, by protocol;
// nil when every node is its own process.
func (t *Net) Traffic() *Traffic {
	if f, ok := t.fab.(*memFabric); ok {
		return f.tr
	}
	return nil
}

// Started is when Start began.
func (t *Net) Started() time.Time { return t.started }
