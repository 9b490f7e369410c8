package bench

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// The defences of the attack suite, as AttackRow.Defence names them.
const (
	DefenceNone = "none"
	// DefenceSalt: selection keys salted per epoch (dhtselect.SaltedKey)
	// and an ID first seen in an epoch not eligible before the next.
	DefenceSalt = "epoch salt"
	// DefenceRTT: coordinates checked against measured RTTs
	// (geometric.VetClaim); a distrusted peer holds no token.
	DefenceRTT = "RTT check"
)

// AttackFractions are the fractions f of lying peers the attack suite
// measures (each after a run without liars).
var AttackFractions = []float64{0.01, 0.05, 0.20}

// DefaultGrind is G, the IDs a grinding liar tries: 2^16. Making an
// Ed25519 key pair and hashing its ID takes some 25 µs on one core, so this
// is about 2 s of work per liar, a small budget: what matters is G against
// the network size n (a liar beats the honest members of its target
// cluster with probability about G/(G+n)), and a real attacker can afford
// far more.
const DefaultGrind = 1 << 16

// AttackConfig configures DHTAttack and GeometricAttack.
type AttackConfig struct {
	// Network gives the RTTs; its host i is peer i.
	Network *Network
	// S is the target number of superpeers.
	S int
	// Capacity is the geometric mode's C. Zero means DefaultCapacity(n, S).
	Capacity int
	// Fractions are the fractions f of liars, each rounded to a whole
	// number of peers; nil means AttackFractions. A run without liars
	// (f = 0) is always measured too.
	Fractions []float64
	// Trials is the number of independent trials (fresh IDs or fitted
	// coordinates, liars, salt), each from its own seed (trial t runs
	// geometric.Simulate with Seed+t); zero means 5. The figures pool all
	// trials.
	Trials int
	// Seed seeds everything.
	Seed uint64
	// Grind is G for the DHT attack; zero means DefaultGrind.
	Grind int
	// Tolerance is the RTT check's; zero means geometric.DefaultTolerance.
	Tolerance geometric.Tolerance
	// Checkers is how many peers check each peer's coordinate: its
	// nearest honest peers by claimed coordinate. Zero means 8.
	Checkers int
}

func (c AttackConfig) filled() (AttackConfig, error) {
	if c.Network == nil || c.S < 1 || c.S > c.Network.N() {
		return c, fmt.Errorf("%w: attack on %d superpeers of a network of %d hosts", ErrBench, c.S, nOf(c.Network))
	}
	if c.Fractions == nil {
		c.Fractions = AttackFractions
	}
	for _, f := range c.Fractions {
		if !(f > 0 && f < 1) {
			return c, fmt.Errorf("%w: liar fraction %v, want one in (0, 1)", ErrBench, f)
		}
	}
	if c.Capacity == 0 {
		c.Capacity = DefaultCapacity(c.Network.N(), c.S)
	}
	if c.Trials == 0 {
		c.Trials = 5
	}
	if c.Grind == 0 {
		c.Grind = DefaultGrind
	}
	if c.Tolerance == (geometric.Tolerance{}) {
		c.Tolerance = geometric.DefaultTolerance()
	}
	if c.Checkers == 0 {
		c.Checkers = 8
	}
	if c.Trials < 0 || c.Grind < 1 || c.Checkers < 1 || c.Capacity < 1 {
		return c, fmt.Errorf("%w: attack with %d trials, grind %d, %d checkers, capacity %d; want them positive",
			ErrBench, c.Trials, c.Grind, c.Checkers, c.Capacity)
	}
	return c, nil
}

func nOf(nw *Network) int {
	if nw == nil {
		return 0
	}
	return nw.N()
}

// liarCount is round(f·n).
func liarCount(f float64, n int) int { return int(math.Round(f * float64(n))) }

// AttackRow is one line of the attack table: one mode, defence and
// fraction of liars, pooled over the trials.
type AttackRow struct {
	Mode    string `json:"mode"` // "dht" or "geometric"
	Network string `json:"network"`
	S       int    `json:"s"`
	Defence string `json:"defence"`
	// Search marks a geometric row whose tokens are followed by the
	// search on measured RTTs, in which the liars lie too
	// (GeometricAttack).
	Search bool `json:"search,omitempty"`
	// Hostility is what the liars of a NodeAttack row do (HostileKeep,
	// HostileLies, HostileBoth; "" in its control row, the same nodes
	// honest).
	Hostility string `json:"hostility,omitempty"`
	// Fraction is f as asked; Liars the peers that lie in each trial,
	// round(f·n).
	Fraction float64 `json:"fraction"`
	Liars    int     `json:"liars"`
	Hosts    int     `json:"hosts"`
	Trials   int     `json:"trials"`
	// Grind is G, the IDs each liar tried (dht).
	Grind int `json:"grind,omitempty"`
	// Superpeers and LiarSuperpeers are means per trial.
	Superpeers     float64 `json:"superpeers"`
	LiarSuperpeers float64 `json:"liar_superpeers"`
	// HostileActs is, in a NodeAttack row, what the liars did per trial:
	// the passes they kept and the reports and summaries they lied in
	// (nodesim's Stats.KeptPasses and LiedReports).
	HostileActs float64 `json:"hostile_acts,omitempty"`
	// LiarShare is the share of the superpeer roles the liars held, and
	// ShareOverFair that over their fair share Liars/Hosts (0 without
	// liars).
	LiarShare     float64 `json:"liar_share"`
	ShareOverFair float64 `json:"share_over_fair"`
	// HonestMeanMs is the mean true RTT from an honest ordinary peer to
	// its superpeer; NoLiarMeanMs that of the same honest peers in the
	// run of the same seed without liars and without defence; Damage the
	// first over the second.
	HonestMeanMs float64 `json:"honest_mean_ms"`
	NoLiarMeanMs float64 `json:"no_liar_mean_ms"`
	Damage       float64 `json:"damage"`
	// LiarsDistrusted and HonestDistrusted are the fractions of the liars
	// and of the honest peers the RTT check distrusted.
	LiarsDistrusted  float64 `json:"liars_distrusted,omitempty"`
	HonestDistrusted float64 `json:"honest_distrusted,omitempty"`
	// ToleranceRel, ToleranceAbsMs and Checkers are the RTT check's
	// settings, in its rows.
	ToleranceRel   float64 `json:"tolerance_rel,omitempty"`
	ToleranceAbsMs float64 `json:"tolerance_abs_ms,omitempty"`
	Checkers       int     `json:"checkers,omitempty"`
}

// tally pools the trials of one row.
type tally struct {
	row                       AttackRow
	sps, liarSPs              int
	rtt, base                 float64
	rttN, baseN               int
	liarsOut, honestOut, hons int
	acts                      uint64 // HostileActs, summed
}

// add counts one trial: the superpeers, attach (attach[i] is i's
// superpeer, i itself for one, negative if unattached) and base, the
// attachment of the run without liars or defence, judged on the honest
// peers (liar[i] false).
func (t *tally) add(nw *Network, superpeers, attach, base []int, liar []bool) {
	t.sps += len(superpeers)
	for _, s := range superpeers {
		if liar[s] {
			t.liarSPs++
		}
	}
	for i, s := range attach {
		if liar[i] {
			continue
		}
		t.hons++
		if s >= 0 && s != i {
			t.rtt += nw.MS(i, s)
			t.rttN++
		}
		if b := base[i]; b >= 0 && b != i {
			t.base += nw.MS(i, b)
			t.baseN++
		}
	}
}

// distrusted counts the peers a defence turned away in one trial.
func (t *tally) distrusted(trusted, liar []bool) {
	for i, ok := range trusted {
		switch {
		case ok:
		case liar[i]:
			t.liarsOut++
		default:
			t.honestOut++
		}
	}
}

func (t *tally) done() AttackRow {
	r := t.row
	tr := float64(r.Trials)
	r.Superpeers, r.LiarSuperpeers, r.HostileActs = float64(t.sps)/tr, float64(t.liarSPs)/tr, float64(t.acts)/tr
	if t.sps > 0 {
		r.LiarShare = float64(t.liarSPs) / float64(t.sps)
	}
	if r.Liars > 0 {
		r.ShareOverFair = r.LiarShare / (float64(r.Liars) / float64(r.Hosts))
		if r.Defence == DefenceRTT {
			r.LiarsDistrusted = float64(t.liarsOut) / float64(r.Liars*r.Trials)
		}
	}
	if r.Defence == DefenceRTT && t.hons > 0 {
		r.HonestDistrusted = float64(t.honestOut) / float64(t.hons)
	}
	if t.rttN > 0 {
		r.HonestMeanMs = t.rtt / float64(t.rttN)
	}
	if t.baseN > 0 {
		r.NoLiarMeanMs = t.base / float64(t.baseN)
	}
	r.Damage = ratio(r.HonestMeanMs, r.NoLiarMeanMs)
	return r
}

// trialRand returns the generator of one purpose in one trial.
func trialRand(seed uint64, trial int, purpose uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(trial)<<32|purpose))
}

// pickLiars returns the liar mask for round(f·n) liars drawn at random.
func pickLiars(n int, f float64, r *rand.Rand) []bool {
	liar := make([]bool, n)
	for _, i := range r.Perm(n)[:liarCount(f, n)] {
		liar[i] = true
	}
	return liar
}

// DHTAttack measures ID grinding in DHT mode, on the brute-force
// assignment (dhtselect.Assign; the simulator's lookups end there).
//
// The attack: in each trial n honest peers get random IDs, and round(f·n)
// of them, the liars, replace theirs by ground ones. The liars share out
// the 2^k cluster keys (in a random order, one each while they last, then
// a second each), and each keeps the best of G random IDs: the one whose
// key, KeyOf, is closest to its target's cluster key, where it becomes the
// superpeer unless an honest member is closer still.
//
// The defence (DefenceSalt): selection keys salted with the epoch's salt,
// dhtselect.EpochSalt with randomness unknown beforehand, and an ID first
// seen in an epoch not eligible to be a superpeer before the next. The
// liars ground their IDs before the salt was known (against the unsalted
// keys, or an old salt: to the new salt it is all the same), and the
// assignment is dhtselect.AssignSalted. (Without the eligibility rule, a
// liar grinds again within the epoch against the salt in force, which is
// the attack without defence with the budget one epoch allows.)
//
// The RTTs are the network's: peer i is host i. Every row is against the
// runs of the same trial without liars and without defence.
func DHTAttack(cfg AttackConfig) ([]AttackRow, error) {
	cfg, err := cfg.filled()
	if err != nil {
		return nil, err
	}
	nw, n := cfg.Network, cfg.Network.N()
	k, err := dhtselect.BitsFor(cfg.S)
	if err != nil {
		return nil, err
	}
	fs := append([]float64{0}, cfg.Fractions...)
	rows := make([]*tally, 0, 2*len(fs))
	for _, def := range []string{DefenceNone, DefenceSalt} {
		for _, f := range fs {
			rows = append(rows, &tally{row: AttackRow{Mode: "dht", Network: nw.Name, S: cfg.S, Defence: def, Fraction: f,
				Liars: liarCount(f, n), Hosts: n, Trials: cfg.Trials, Grind: cfg.Grind}})
		}
	}
	for t := range cfg.Trials {
		r := trialRand(cfg.Seed, t, 0xd47)
		ids := make([]peer.ID, n)
		for i := range ids {
			ids[i] = randomPeerID(r)
		}
		var beacon [32]byte
		for i := 0; i < len(beacon); i += 8 {
			binary.LittleEndian.PutUint64(beacon[i:], r.Uint64())
		}
		salt := dhtselect.EpochSalt([]byte(nw.Name), uint64(t)+1, beacon[:])
		_, base := dhtAttach(dhtselect.Assign(ids, k), ids)
		for fi, f := range fs {
			lr := trialRand(cfg.Seed, t, 0x11a5<<8|uint64(fi))
			liar := pickLiars(n, f, lr)
			lying := slices.Clone(ids)
			targets := lr.Perm(1 << k)
			j := 0
			for i := range n {
				if liar[i] {
					lying[i] = grind(clusterKey(targets[j%len(targets)], k), cfg.Grind, lr)
					j++
				}
			}
			for di, as := range [][]dhtselect.Assignment{dhtselect.Assign(lying, k), dhtselect.AssignSalted(lying, k, salt)} {
				sps, attach := dhtAttach(as, lying)
				rows[di*len(fs)+fi].add(nw, sps, attach, base, liar)
			}
		}
	}
	out := make([]AttackRow, len(rows))
	for i, t := range rows {
		out[i] = t.done()
	}
	return out, nil
}

// dhtAttach turns an assignment into superpeer indexes (sorted) and the
// index of every peer's superpeer.
func dhtAttach(as []dhtselect.Assignment, ids []peer.ID) (superpeers, attach []int) {
	index := make(map[peer.ID]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	attach = make([]int, len(as))
	for i, a := range as {
		attach[i] = index[a.Superpeer]
		if !slices.Contains(superpeers, attach[i]) {
			superpeers = append(superpeers, attach[i])
		}
	}
	slices.Sort(superpeers)
	return superpeers, attach
}

// clusterKey returns the cluster key whose k leading bits are c.
func clusterKey(c, k int) dhtselect.Key {
	var key dhtselect.Key
	if k > 0 {
		binary.BigEndian.PutUint32(key[:4], uint32(c)<<(32-k))
	}
	return key
}

// peerIDPrefix starts an identity multihash of a protobuf Ed25519 public
// key, the form of an Ed25519 peer ID; random bytes stand in for the key.
var peerIDPrefix = []byte{0x00, 0x24, 0x08, 0x01, 0x12, 0x20}

func randomPeerID(r *rand.Rand) peer.ID {
	b := make([]byte, len(peerIDPrefix)+32)
	copy(b, peerIDPrefix)
	for i := len(peerIDPrefix); i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return peer.ID(b)
}

// grind returns the best of g random peer IDs: the one whose key (KeyOf,
// SHA-256 of the ID) is closest to target.
func grind(target dhtselect.Key, g int, r *rand.Rand) peer.ID {
	b := make([]byte, len(peerIDPrefix)+32)
	copy(b, peerIDPrefix)
	best := make([]byte, len(b))
	var bestKey dhtselect.Key
	for try := range g {
		for i := len(peerIDPrefix); i < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], r.Uint64())
		}
		key := dhtselect.Key(sha256.Sum256(b))
		if try == 0 || dhtselect.Closer(key, bestKey, target) {
			copy(best, b)
			bestKey = key
		}
	}
	return peer.ID(best)
}

// GeometricAttack measures lying about coordinates in geometric mode, in
// geometric.Simulate on the network's RTTs: first the token dynamics
// alone (no search on measured RTTs, SwapRounds < 0), then, in the rows
// marked Search, followed by the search (geometric.Search), in which the
// liars lie too, as geometric.SimConfig.Liars says: a liar superpeer
// never gives its role away, and liar members claim, at the ends of what
// geometric.Swap and Summarize accept, that liar candidates serve them
// best and honest ones worst.
//
// The attack: in each trial, the run without liars fits the coordinates
// and places the tokens; then round(f·n) peers, the liars, publish false
// coordinates, and the tokens start again from scratch (same seed). The
// liars claim the spots where the honest run's superpeers sit, the spots of
// the largest clusters first (one liar each while they last, then a second
// each, and so on): the superpeer's Vec, moved by 10 µs in a random
// direction, with no height. There, every peer of the cell is nearer to
// the liar than to the superpeer by the superpeer's height, so the token
// moves to the liar, and the cell's peers attach to it, whose true RTT is
// whatever the network makes it. The liars' false coordinates do not feed
// back into the honest peers' fit (the fit ends before they lie).
//
// The defence (DefenceRTT): each peer's claimed coordinate is checked by
// its Checkers nearest honest peers by that coordinate, those that would
// pass it a token or attach to it, each against the RTT it measures to it
// (geometric.VetClaim with Tolerance). A distrusted peer may hold no token
// and serve no one: the tokens run on the trusted peers only, and then
// every peer, distrusted ones included, attaches to the nearest superpeer
// with room by the coordinates; in the Search rows the search then runs
// with every peer a member that reports, and only trusted peers as
// candidates. The check applies to honest peers too: the f = 0 row shows
// what its false alarms cost.
//
// Every row is against the run of the same trial without liars and without
// defence, with the search in the Search rows and without it otherwise.
func GeometricAttack(cfg AttackConfig) ([]AttackRow, error) {
	cfg, err := cfg.filled()
	if err != nil {
		return nil, err
	}
	nw, n := cfg.Network, cfg.Network.N()
	fs := append([]float64{0}, cfg.Fractions...)
	var rows []*tally
	for _, search := range []bool{false, true} {
		for _, def := range []string{DefenceNone, DefenceRTT} {
			for _, f := range fs {
				row := AttackRow{Mode: "geometric", Network: nw.Name, S: cfg.S, Defence: def, Search: search, Fraction: f,
					Liars: liarCount(f, n), Hosts: n, Trials: cfg.Trials}
				if def == DefenceRTT {
					row.ToleranceRel, row.ToleranceAbsMs, row.Checkers = cfg.Tolerance.Rel, msOf(cfg.Tolerance.Abs), cfg.Checkers
				}
				rows = append(rows, &tally{row: row})
			}
		}
	}
	// row is the tally of a row: def 0 is DefenceNone, 1 DefenceRTT.
	row := func(search bool, def, fi int) *tally {
		if search {
			def += 2
		}
		return rows[def*len(fs)+fi]
	}
	gc := geometric.Config{Tokens: cfg.S, Capacity: cfg.Capacity}
	for t := range cfg.Trials {
		seed := cfg.Seed + uint64(t)
		base, err := geometric.Simulate(n, nw.RTT, geometric.SimConfig{Config: gc, Seed: seed, SwapRounds: -1})
		if err != nil {
			return nil, err
		}
		baseSearch, err := geometric.Search(n, nw.RTT, base.Coords, base.Superpeers, geometric.SimConfig{Config: gc})
		if err != nil {
			return nil, err
		}
		spots := bySize(base.Superpeers, base.Attach)
		for fi, f := range fs {
			lr := trialRand(cfg.Seed, t, 0x6e0<<8|uint64(fi))
			liar := pickLiars(n, f, lr)
			claimed := slices.Clone(base.Coords)
			j := 0
			for i := range n {
				if liar[i] {
					claimed[i] = claimSpot(base.Coords[spots[j%len(spots)]], lr)
					j++
				}
			}
			res, err := geometric.Simulate(n, nw.RTT, geometric.SimConfig{Config: gc, Seed: seed, Coords: claimed, SwapRounds: -1})
			if err != nil {
				return nil, err
			}
			row(false, 0, fi).add(nw, res.Superpeers, res.Attach, base.Attach, liar)
			if res, err = geometric.Search(n, nw.RTT, claimed, res.Superpeers, geometric.SimConfig{Config: gc, Liars: liar}); err != nil {
				return nil, err
			}
			row(true, 0, fi).add(nw, res.Superpeers, res.Attach, baseSearch.Attach, liar)

			trusted := vetAll(nw, claimed, liar, cfg.Checkers, cfg.Tolerance)
			sps, attach, err := trustedRun(nw, claimed, trusted, gc, seed)
			if err != nil {
				return nil, err
			}
			row(false, 1, fi).add(nw, sps, attach, base.Attach, liar)
			row(false, 1, fi).distrusted(trusted, liar)
			if res, err = geometric.Search(n, nw.RTT, claimed, sps, geometric.SimConfig{Config: gc, Liars: liar, Eligible: trusted}); err != nil {
				return nil, err
			}
			row(true, 1, fi).add(nw, res.Superpeers, res.Attach, baseSearch.Attach, liar)
			row(true, 1, fi).distrusted(trusted, liar)
		}
	}
	out := make([]AttackRow, len(rows))
	for i, t := range rows {
		out[i] = t.done()
	}
	return out, nil
}

// bySize returns the superpeers, those with the most attached peers first
// (ties by index).
func bySize(superpeers, attach []int) []int {
	size := make(map[int]int)
	for _, s := range attach {
		size[s]++
	}
	out := slices.Clone(superpeers)
	slices.SortStableFunc(out, func(a, b int) int { return size[b] - size[a] })
	return out
}

// claimSpot returns a liar's false coordinate at the spot of c: its Vec
// moved by 10 µs in a random direction, no height, c's adjustment and error.
func claimSpot(c *coordinate.Coordinate, r *rand.Rand) *coordinate.Coordinate {
	out := c.Clone()
	dir := make([]float64, len(out.Vec))
	norm := 0.0
	for i := range dir {
		dir[i] = r.NormFloat64()
		norm += dir[i] * dir[i]
	}
	norm = math.Sqrt(norm)
	for i := range out.Vec {
		out.Vec[i] += 10e-6 * dir[i] / norm
	}
	out.Height = 0
	return out
}

// vetAll returns, for every peer, whether its claimed coordinate passes
// geometric.VetClaim by its m nearest honest peers by claimed coordinate,
// each checking with its own coordinate and the true RTT.
func vetAll(nw *Network, claimed []*coordinate.Coordinate, liar []bool, m int, tol geometric.Tolerance) []bool {
	n := len(claimed)
	trusted := make([]bool, n)
	type cand struct {
		d float64
		j int
	}
	cs := make([]cand, 0, n)
	checks := make([]geometric.Check, 0, m)
	for i := range n {
		cs = cs[:0]
		for j := range n {
			if j != i && !liar[j] {
				cs = append(cs, cand{geometric.Distance(claimed[i], claimed[j]), j})
			}
		}
		slices.SortFunc(cs, func(a, b cand) int {
			if a.d != b.d {
				return cmpFloat(a.d, b.d)
			}
			return a.j - b.j
		})
		checks = checks[:0]
		for _, c := range cs[:min(m, len(cs))] {
			checks = append(checks, geometric.Check{Self: claimed[c.j], RTT: nw.RTT(c.j, i)})
		}
		trusted[i] = geometric.VetClaim(claimed[i], checks, tol)
	}
	return trusted
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cmpFloat(a, b float64) int {
	if a < b {
		return -1
	}
	return 1
}

// trustedRun runs the tokens on the trusted peers only (with their claimed
// coordinates and the same seed) and attaches every peer by the claimed
// coordinates to the superpeers found.
func trustedRun(nw *Network, claimed []*coordinate.Coordinate, trusted []bool, gc geometric.Config, seed uint64) (superpeers, attach []int, err error) {
	var sub []int
	var coords []*coordinate.Coordinate
	for i, ok := range trusted {
		if ok {
			sub = append(sub, i)
			coords = append(coords, claimed[i])
		}
	}
	rtt := func(a, b int) time.Duration { return nw.RTT(sub[a], sub[b]) }
	res, err := geometric.Simulate(len(sub), rtt, geometric.SimConfig{Config: gc, Seed: seed, Coords: coords, SwapRounds: -1})
	if err != nil {
		return nil, nil, fmt.Errorf("tokens on the %d trusted peers: %w", len(sub), err)
	}
	for _, s := range res.Superpeers {
		superpeers = append(superpeers, sub[s])
	}
	attach, err = geometric.AttachAll(claimed, superpeers, gc.Capacity)
	return superpeers, attach, err
}

// WriteAttackTable prints the attack rows: mode, defence, f and liars,
// the liars' share of the superpeer roles against their fair share, the
// honest peers' mean RTT to their superpeer against the run without liars,
// and what the RTT check turned away.
func WriteAttackTable(w io.Writer, rows []AttackRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tnetwork\tS\tdefence\tf\tliars\tsuperpeers\tliar superpeers\tliar share\tshare/f\thonest mean ms\tno-liar mean ms\tdamage\tliars distrusted\thonest distrusted\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.0f%%\t%d\t%.1f\t%.1f\t%.1f%%\t%s\t%.1f\t%.1f\t%.2f\t%s\t%s\t\n",
			modeCell(r), r.Network, r.S, r.Defence, 100*r.Fraction, r.Liars, r.Superpeers, r.LiarSuperpeers, 100*r.LiarShare,
			shareOverFair(r), r.HonestMeanMs, r.NoLiarMeanMs, r.Damage, distrustCell(r, r.LiarsDistrusted, r.Liars > 0), distrustCell(r, r.HonestDistrusted, true))
	}
	return tw.Flush()
}

// distrustCell is a fraction of peers the RTT check distrusted, or "–"
// where there is none to report.
func distrustCell(r AttackRow, x float64, any bool) string {
	if r.Defence != DefenceRTT || !any {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*x)
}

// modeCell is the row's mode, "+ search" in the rows with the search on
// measured RTTs.
func modeCell(r AttackRow) string {
	switch {
	case r.Search:
		return r.Mode + " + search"
	case r.Mode == "geometric node" && r.Hostility == "":
		return r.Mode + ", liars honest"
	case r.Hostility != "":
		return r.Mode + ", liars " + r.Hostility
	}
	return r.Mode
}

// shareOverFair is ShareOverFair, or "–" without liars.
func shareOverFair(r AttackRow) string {
	if r.Liars == 0 {
		return "–"
	}
	return f1(r.ShareOverFair)
}

// writeAttackMarkdown writes the attack section of the report.
func writeAttackMarkdown(b *mdBlocks, rows []AttackRow) {
	r0 := rows[0]
	grind, tol := 0, ""
	for _, r := range rows {
		if r.Grind > 0 {
			grind = r.Grind
		}
		if r.Checkers > 0 {
			tol = fmt.Sprintf("%.0f %% + %.0f ms, checked by the %d nearest honest peers", 100*r.ToleranceRel, r.ToleranceAbsMs, r.Checkers)
		}
	}
	b.block("attack-about", func(w io.Writer) {
		fmt.Fprintf(w, "A fraction f of the %d peers lie to become superpeers (`bench.GeometricAttack`, `bench.DHTAttack`; %d trials of their own seeds per row, pooled). "+
			"**geometric**: after the honest run has fitted the coordinates and placed S tokens, the liars publish false coordinates at the spots of that run's superpeers (largest clusters first), with no height, and the tokens run again (the honest peers' coordinates, fitted before, are not disturbed by the lies). "+
			"**geometric + search**: the same, then the search on measured RTTs (`geometric.Search`: swaps inside clusters and relocations between them), in which the liars lie too (`geometric.SimConfig.Liars`): a liar superpeer never hands its role over and its cluster's summary offers a liar member as a second superpeer; a liar member claims, at the ends of what `geometric.Swap` accepts, that liar candidates serve it best and honest ones worst, and that its cluster would lose nothing without its superpeer; with the RTT check, distrusted peers are members that report but never candidates; against the honest run with the search. "+
			"**geometric node** (`bench.NodeAttack`): the live node's machines (overlay/node) in the node simulator, on the first 100 PlanetLab hosts with S = 10 for 300 s (token rounds and pings every second, as in the geometric rows of the Selection section), a fifth of the nodes liars with honest coordinates, as nodesim's `KeepTokens` and `LieInSearch` say: a liar that holds a token never passes it on, or it lies in its reports to the search on measured RTTs as above (the node makes no relocations), or both; against the run of the same seed in which the same nodes are honest (the row *liars honest*: their share of the roles is then chance). "+
			"**dht**: each liar tries G = %d random IDs and keeps the one whose SHA-256 is closest to a cluster key, the liars sharing out the %s cluster keys (the brute-force assignment, where the simulator's lookups end). "+
			"Defences: **RTT check** (`geometric.VetClaim`): a peer's claimed coordinate is compared with the RTT measured to it (tolerance %s, majority vote); a distrusted peer holds no token and serves no one; it applies to honest peers too (the f = 0 row is its cost). "+
			"**epoch salt** (`dhtselect.SaltedKey`, `EpochSalt`): selection keys are SHA-256(salt ‖ ID) with a salt unknown before the epoch, and an ID first seen in an epoch is not eligible before the next, so the liars' IDs were ground without knowing the salt. "+
			"*Liar share* is the share of the superpeer roles the liars hold (their fair share is f); *damage* is the honest ordinary peers' mean true RTT to their superpeer over that of the same peers in the run without liars or defence, same seeds (the dht strategy ignores RTT, so its superpeers are as far whoever holds them). At f = 1 %% there are only a few liars per trial: read those rows as rough.\n\n",
			r0.Hosts, r0.Trials, grind, fmt.Sprint(1<<bitsFor(r0.S)), tol)
	})
	b.block("attack-table", func(w io.Writer) {
		var out [][]string
		for _, r := range rows {
			out = append(out, []string{modeCell(r), r.Network, d(r.S), r.Defence, f0(100*r.Fraction) + " %", d(r.Liars), f1(r.Superpeers), f1(r.LiarSuperpeers),
				f1(100*r.LiarShare) + " %", shareOverFair(r), f1(r.HonestMeanMs) + " / " + f1(r.NoLiarMeanMs), f2(r.Damage),
				distrustCell(r, r.LiarsDistrusted, r.Liars > 0) + " / " + distrustCell(r, r.HonestDistrusted, true)})
		}
		mdTable(w, []string{"mode", "network", "S", "defence", "f", "liars", "superpeers", "liar superpeers", "liar share", "share ÷ f", "honest mean ms / no liars", "damage", "distrusted: liars / honest"}, out)
	})
}

// bitsFor is dhtselect.BitsFor for a valid S.
func bitsFor(s int) int {
	k, _ := dhtselect.BitsFor(s)
	return k
}
