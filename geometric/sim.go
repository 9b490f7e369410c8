package geometric

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/superpeer/superpeer/stats"
)

// SimConfig configures Simulate. Zero fields take the defaults named below.
type SimConfig struct {
	// Config holds the token dynamics and the capacity.
	Config

	// Seed seeds everything random in the run: the peers sampled for RTTs,
	// the coordinate clients' nudges and the round seed of InitialHolders.
	Seed uint64

	// CoordRounds is the number of rounds of coordinate fitting before the
	// tokens start; in each, every peer samples the RTT to one random peer,
	// so it is the number of samples per peer. The default depends on the
	// number of peers n: 1000 up to 10,000 peers, then 10^7/n (a budget
	// of 10^7 samples in all), but never fewer than 400.
	//
	// Why 1000: on PlanetLab, 200 rounds leave the placement at S = 50
	// 1.5 times worse (mean RTT to the superpeer 15.8 ms against 10.6 ms
	// for 1000 rounds; a k-median placement on the coordinates, judged by
	// true RTT), and 3000 rounds gain nothing more. Why fewer above 10,000
	// peers: the fitting costs n·CoordRounds samples, most of a large run.
	// Why at least 400: on the synthetic 10,000-host network of
	// sim_scale_test.go (S = 100, C = 200, seed 1) the mean RTT to the
	// superpeer is 32.2 ms after 50 rounds, 17.3 after 100, 9.6 after
	// 200, 7.1 after 400, 6.75 after 1000 and 6.7 after 2000 (random
	// placement attached the same way: 32.6, 18.6, 11.0, 8.5, 8.1 and
	// 8.1 ms); on its 30,000-host version (S = 300) 9.9 ms after 200
	// rounds, 5.9 after 400 and 5.1 after 1000 (random: 10.7, 6.5 and
	// 5.7); on its 100,000-host version (S = 1000) 5.3 ms after 400
	// (random: 5.6). (With the earlier force law, whose repulsion was
	// summed over the tokens and measured with the heights, 10,000 hosts
	// gave 57.9, 29.4, 11.2, 8.2, 7.9 and 7.7 ms and 100,000 hosts 24.9,
	// 19.9 and 17.2 ms after 200, 400 and 1000 rounds: no better than
	// random placement; see the package documentation.)
	CoordRounds int

	// Coords, when not nil, holds a coordinate for every peer and replaces
	// the fitting (CoordRounds is then ignored). Runs that compare settings
	// on one network pass the Coords of an earlier result.
	Coords []*coordinate.Coordinate

	// Neighbours is the number of peers, nearest by estimated distance, that
	// each peer may pass a token to. Default 8.
	Neighbours int

	// RandomNeighbours is the number of further neighbours of each peer drawn
	// at random (seeded) from the others: long links that let a token leave
	// its region in one pass. Default 8; negative means none.
	RandomNeighbours int

	// MaxRounds bounds the rounds of token dynamics. Default 1000.
	MaxRounds int

	// Round is the virtual time one round of token dynamics stands for (one
	// gossip period). Dwell is counted in it. Default 1 s.
	Round time.Duration

	// SwapRounds bounds the rounds of the search on measured RTTs that
	// follows the token dynamics (swap.go, simSwap: swaps inside clusters
	// and relocations between them); negative means none: the placement
	// of the coordinates alone, every peer attached by coordinate
	// (AttachAll). With the search, every peer attaches by the RTT it
	// measures to the few superpeers nearest by coordinate
	// (attachMeasured). Default 30.
	SwapRounds int
	// SwapCandidates is how many candidates of each kind a superpeer
	// judges per round. Default 8 (on PlanetLab at S = 49, 4 leave the
	// placement at 1.11 times the offline k-median, 8 at 1.09; measured
	// with DefaultSwapConfig's margin).
	SwapCandidates int
	// Swap configures Swap and Relocate; zero fields take
	// SimSwapConfig's, not DefaultSwapConfig's: see SimSwapConfig.
	Swap SwapConfig

	// Liars, when not nil, marks the peers (by index) that lie in the
	// search on measured RTTs, for the attack benchmarks: each claims
	// what serves the liars most within what Swap and Summarize accept
	// (see liars in simlie.go). nil: nobody lies.
	Liars []bool
	// Eligible, when not nil, marks the peers that the search may make
	// superpeers (a candidate of Swap or Summarize must be eligible);
	// the others are members like any, and report. nil: every peer.
	Eligible []bool
}

// SimSwapConfig returns the SwapConfig that Simulate's search takes by
// default: DefaultSwapConfig with a margin of 0.05 ms plus 0.1 % of the
// cluster's mean RTT, where the live node keeps 0.5 ms plus 2 %. The
// simulator's RTTs are exact (rtt is a function), so its margin has only
// to stop ties and the trading of a role back and forth, not noise. The
// live node's margin would cost the placement that much: on PlanetLab
// (seeds 1 to 10, bench's selection suite) 0.5 ms plus 2 % left it at
// 1.06 to 1.12 times the offline k-median at S = 49 and 1.01 to 1.08 at
// S = 25, against 1.04 to 1.07 and 1.00 to 1.03 with this one. At S = 49
// a cluster's mean RTT is some 7 ms, and 0.5 ms plus 2 % asks a swap for
// 9 % of it.
func SimSwapConfig() SwapConfig {
	c := DefaultSwapConfig()
	c.Margin, c.Fraction = 50*time.Microsecond, 0.001
	return c
}

// SimResult is the outcome of Simulate.
type SimResult struct {
	// Coords holds the fitted coordinate of every peer.
	Coords []*coordinate.Coordinate
	// Superpeers lists the indexes of the peers holding a token at the end,
	// in increasing order. When Settled there are exactly S of them and all
	// are promoted.
	Superpeers []int
	// Attach maps every peer to the index of its superpeer (AttachAll); a
	// superpeer maps to itself.
	Attach []int
	// Rounds is the number of rounds of token dynamics run.
	Rounds int
	// LastPass is the last round in which a token moved (0 if none did).
	LastPass int
	// Passes counts the token passes (messages handing a token over).
	Passes int
	// Settled reports that every token was held by a promoted superpeer and
	// none moved in the last round.
	Settled bool
	// Swaps counts the superpeers' roles handed over by the 1-swap search,
	// and SwapProbes the RTTs a peer measured for it, on average: the
	// distinct pairs measured, a peer keeping the RTTs it measured (see
	// simSwap).
	Swaps      int
	SwapProbes float64
}

// Simulate runs coordinates, token dynamics and attachment in-process for n
// peers (named "p0", "p1", ...) whose true RTTs are rtt(i, j); rtt(i, j) <= 0
// marks a pair that was not measured, whose samples Client.Sample rejects.
// rtt must be a function of (i, j): a pair measured twice has the same RTT.
//
// The model, round by round: first CoordRounds rounds in which every peer
// samples the RTT to one random peer. Then the tokens start on
// InitialHolders(Seed, all peers, Tokens), and in every round the holders
// tick one at a time, in a seeded random order; each hears the current
// position of every token just before its tick (gossip faster than the
// tick) and a pass it makes is delivered at once. Every holder knows the
// coordinates of all peers (one PeerSpace, shared: the same decisions as
// SetPeers with all peers) and has Neighbours nearest plus RandomNeighbours
// random peers as neighbours. Dwell is counted in rounds of Round each.
// The run stops when every token is held by a superpeer and none moved in
// the round, or after MaxRounds. Then the superpeers search on measured
// RTTs (rtt itself: see simSwap) for up to SwapRounds rounds, and every
// ordinary peer attaches by the RTTs it measures to the superpeers
// nearest by coordinate (attachMeasured); with SwapRounds < 0, no search,
// and every ordinary peer attaches with AttachAll.
//
// A peer has token state (a Holder) only while it holds a token: it gets a
// new one when it receives a token and drops it when it passes the token
// on. What a holder heard could only make it refuse a token that it is
// never offered (a token's Seq only grows), and a new holder hears every
// position at its first tick, so this changes no result; it keeps the
// memory to O(n + S²) rather than O(S·(S + passes)). Likewise a holder is
// told only the positions that changed since its last tick, and a peer's
// nearest neighbours are found when it first holds a token; the random
// neighbours of all peers are drawn at the start, in peer order.
//
// The coordinates are those of one Client per peer, each seeded from Seed
// and its index, sampling the coordinate its peer last published, computed
// to the same bits by a flat copy of serf's arithmetic (vivaldi.go). serf's
// median filter over the last samples of each peer is left out: rtt being a
// function, it would return each sample as it is.
//
// For large n the run costs, roughly, n·CoordRounds samples, one nearest-
// neighbour search per token holder, and per round a search of the peers
// near each candidate of each holder whose surroundings changed (see
// PeerSpace); on the synthetic 100,000-host network of sim_scale_test.go
// (S = 1000, 400 coordinate rounds) 42 s of one core of a shared 2-core
// machine, with a peak heap of 420 MB (TestSimulateScale; 80-95 s and
// 640 MB with the earlier force law, whose tokens made 3476 passes
// rather than 416).
//
// It fails with ErrConfig when n < 1, when Tokens exceeds n (a peer holds at
// most one token; Tokens == n makes every peer a superpeer), when the
// ordinary peers n-Tokens exceed Tokens × Capacity, or when Coords holds a
// coordinate that is not valid or not of the first one's dimensionality.
func Simulate(n int, rtt func(i, j int) time.Duration, cfg SimConfig) (*SimResult, error) {
	c, err := cfg.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Config = c
	if cfg.CoordRounds == 0 {
		cfg.CoordRounds = DefaultCoordRounds(n)
	}
	if cfg.Neighbours == 0 {
		cfg.Neighbours = 8
	}
	switch {
	case cfg.RandomNeighbours == 0:
		cfg.RandomNeighbours = 8
	case cfg.RandomNeighbours < 0:
		cfg.RandomNeighbours = 0
	}
	if cfg.MaxRounds == 0 {
		cfg.MaxRounds = 1000
	}
	if cfg.Round == 0 {
		cfg.Round = time.Second
	}
	if cfg, err = cfg.searchDefaults(n); err != nil {
		return nil, err
	}
	// The lengths apply at the network's scale (ScaleReference), as on a
	// live node (overlay/node's setScale), here the median of a sample of
	// the true RTTs.
	f := ScaleFor(medianRTT(n, rtt))
	c = c.Scaled(f)
	cfg.Config, cfg.Swap = c, cfg.Swap.Scaled(f)
	switch {
	case n < 1:
		return nil, fmt.Errorf("%w: n = %d peers, want at least 1", ErrConfig, n)
	case c.Tokens > n:
		return nil, fmt.Errorf("%w: Tokens = %d exceeds the %d peers; a peer holds at most one token", ErrConfig, c.Tokens, n)
	case n-c.Tokens > c.Tokens*c.Capacity:
		return nil, fmt.Errorf("%w: %d ordinary peers exceed Tokens × Capacity = %d × %d; raise either", ErrConfig, n-c.Tokens, c.Tokens, c.Capacity)
	case cfg.CoordRounds < 0 || cfg.Neighbours < 0 || cfg.MaxRounds < 0 || cfg.Round < 0:
		return nil, fmt.Errorf("%w: CoordRounds = %d, Neighbours = %d, MaxRounds = %d, Round = %v; none may be negative",
			ErrConfig, cfg.CoordRounds, cfg.Neighbours, cfg.MaxRounds, cfg.Round)
	}

	coords := cfg.Coords
	if coords == nil {
		if coords, err = simCoords(n, rtt, cfg); err != nil {
			return nil, err
		}
	} else if len(coords) != n {
		return nil, fmt.Errorf("%w: %d Coords for %d peers", ErrConfig, len(coords), n)
	} else {
		for i, c := range coords {
			if err := validate(c, dimsOf(coords)); err != nil {
				return nil, fmt.Errorf("%w: Coords[%d]: %w", ErrConfig, i, err)
			}
		}
	}
	ids := make([]ID, n)
	index := make(map[ID]int, n)
	peers := make([]Peer, n)
	for i := range ids {
		ids[i] = ID(fmt.Sprintf("p%d", i))
		index[ids[i]] = i
		peers[i] = Peer{ids[i], coords[i]}
	}
	// Neighbours: the Neighbours nearest, found when a peer first needs
	// them (only token holders do), then RandomNeighbours drawn for each
	// peer in turn, here.
	nr := rand.New(rand.NewPCG(cfg.Seed, 0xe1))
	space := NewPeerSpace(peers)
	near := newNearest(peers)
	rnd := 0
	if n > 1 {
		rnd = cfg.RandomNeighbours
	}
	randoms := make([]int32, n*rnd)
	for i := range n {
		for k := range rnd {
			j := nr.IntN(n - 1)
			if j >= i {
				j++
			}
			randoms[i*rnd+k] = int32(j)
		}
	}
	// hs[i] is the token state of peer i while it holds a token, nil
	// otherwise (see the documentation of Simulate).
	hs := make([]*Holder, n)
	holder := func(i int) (*Holder, error) {
		if hs[i] != nil {
			return hs[i], nil
		}
		h, err := NewHolder(ids[i], c)
		if err != nil {
			return nil, err
		}
		if err := h.SetCoordinate(coords[i]); err != nil {
			return nil, err
		}
		ns := near.of(i, cfg.Neighbours)
		for _, j := range randoms[i*rnd : (i+1)*rnd] {
			ns = append(ns, peers[j])
		}
		h.SetNeighbours(ns)
		h.SetPeerSpace(space)
		hs[i] = h
		return h, nil
	}
	first, err := InitialHolders(cfg.Seed, ids, c.Tokens)
	if err != nil {
		return nil, err
	}
	t0 := time.Unix(0, 0)
	// pos holds the position of every token, by number: what gossip
	// reports. moves lists the tokens in the order they moved, and
	// heard[i] how much of it holder i has observed (-1: nothing yet), so
	// that a holder observes only the positions that changed since its
	// last tick; observing an unchanged report again is a no-op.
	pos := make([]Position, c.Tokens)
	var moves []int
	heard := make([]int, n)
	for i := range heard {
		heard[i] = -1
	}
	for k, id := range first {
		h, err := holder(index[id])
		if err != nil {
			return nil, err
		}
		if err := h.Receive(Token{Num: k}, t0); err != nil {
			return nil, err
		}
		pos[k], _ = h.Position()
	}

	res := &SimResult{Coords: coords}
	tr := rand.New(rand.NewPCG(cfg.Seed, 0x71c))
	for round := 1; round <= cfg.MaxRounds; round++ {
		now := t0.Add(time.Duration(round) * cfg.Round)
		res.Rounds = round
		moved := false
		for _, i := range tr.Perm(n) {
			h := hs[i]
			if h == nil {
				continue
			}
			if heard[i] < 0 {
				for _, p := range pos {
					h.Observe(p)
				}
			} else {
				for _, k := range moves[heard[i]:] {
					h.Observe(pos[k])
				}
			}
			heard[i] = len(moves)
			for _, o := range h.Tick(now) {
				p, ok := o.(Pass)
				if !ok {
					continue
				}
				j := index[p.To]
				fresh := hs[j] == nil
				to, err := holder(j)
				if err != nil {
					return nil, err
				}
				err = to.Receive(p.Token, now)
				h.PassDone(err == nil)
				if err != nil {
					if fresh {
						hs[j] = nil
					}
					continue
				}
				pos[p.Token.Num], _ = to.Position()
				moves = append(moves, p.Token.Num)
				moved = true
				res.Passes++
				res.LastPass = round
				hs[i], heard[i] = nil, -1 // it passed its token
			}
		}
		settled := !moved
		for _, h := range hs {
			if h != nil && !h.Superpeer() {
				settled = false
			}
		}
		if settled {
			res.Settled = true
			break
		}
	}
	for i, h := range hs {
		if h != nil {
			res.Superpeers = append(res.Superpeers, i)
		}
	}
	if cfg.SwapRounds <= 0 || len(res.Superpeers) == 0 {
		res.Attach, err = AttachAll(coords, res.Superpeers, c.Capacity)
		return res, err
	}
	return search(n, rtt, coords, res, cfg)
}

// Search runs the search on measured RTTs that ends Simulate (simSwap)
// from the superpeers sps, of a placement made otherwise, and attaches
// every peer by the RTTs it measures, as Simulate does: for the attack
// benchmarks, whose placement runs on the trusted peers only while every
// peer is a member. cfg's Config gives the capacity, and its search
// fields (SwapRounds, SwapCandidates, Swap, Liars, Eligible) what they
// give Simulate; its token fields are not used. SwapRounds < 0 means no
// search: the peers attach by coordinate (AttachAll).
func Search(n int, rtt func(i, j int) time.Duration, coords []*coordinate.Coordinate, sps []int, cfg SimConfig) (*SimResult, error) {
	c, err := cfg.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Config = c
	if cfg, err = cfg.searchDefaults(n); err != nil {
		return nil, err
	}
	if len(coords) != n {
		return nil, fmt.Errorf("%w: %d coordinates for %d peers", ErrConfig, len(coords), n)
	}
	for i, c := range coords {
		if err := validate(c, dimsOf(coords)); err != nil {
			return nil, fmt.Errorf("%w: coordinate %d: %w", ErrConfig, i, err)
		}
	}
	for _, s := range sps {
		if s < 0 || s >= n {
			return nil, fmt.Errorf("%w: superpeer %d of %d peers", ErrConfig, s, n)
		}
	}
	res := &SimResult{Coords: coords, Superpeers: slices.Sorted(slices.Values(sps))}
	if cfg.SwapRounds < 0 || len(sps) == 0 {
		res.Attach, err = AttachAll(coords, res.Superpeers, c.Capacity)
		return res, err
	}
	return search(n, rtt, coords, res, cfg)
}

// search runs simSwap from res.Superpeers and attaches by measured RTTs.
func search(n int, rtt func(i, j int) time.Duration, coords []*coordinate.Coordinate, res *SimResult, cfg SimConfig) (*SimResult, error) {
	var err error
	if res.Superpeers, res.Swaps, res.SwapProbes, err = simSwap(n, rtt, coords, res.Superpeers, cfg); err != nil {
		return nil, err
	}
	slices.Sort(res.Superpeers)
	res.Attach, err = attachMeasured(n, rtt, coords, res.Superpeers, cfg.Capacity)
	return res, err
}

// medianRTT is the median RTT of up to 4,096 pairs of the n peers, drawn
// by a fixed rule (no draw of the run's random streams), 0 for n < 2.
func medianRTT(n int, rtt func(i, j int) time.Duration) time.Duration {
	if n < 2 {
		return 0
	}
	pairs := min(4096, n*(n-1)/2)
	ds := make([]time.Duration, 0, pairs)
	for k := range pairs {
		i := k % n
		j := (i + 1 + int(uint64(k)*2654435761%uint64(n-1))) % n
		ds = append(ds, rtt(i, j))
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// searchDefaults fills the search's zero fields and checks them for n
// peers.
func (cfg SimConfig) searchDefaults(n int) (SimConfig, error) {
	if cfg.SwapRounds == 0 {
		cfg.SwapRounds = 30
	}
	if cfg.SwapCandidates == 0 {
		cfg.SwapCandidates = 8
	}
	sd := SimSwapConfig()
	cfg.Swap.Margin, cfg.Swap.Fraction = cmp.Or(cfg.Swap.Margin, sd.Margin), cmp.Or(cfg.Swap.Fraction, sd.Fraction)
	var err error
	if cfg.Swap, err = cfg.Swap.withDefaults(); err != nil {
		return cfg, err
	}
	if cfg.Liars != nil && len(cfg.Liars) != n || cfg.Eligible != nil && len(cfg.Eligible) != n {
		return cfg, fmt.Errorf("%w: %d Liars and %d Eligible for %d peers; want n each, or nil", ErrConfig, len(cfg.Liars), len(cfg.Eligible), n)
	}
	return cfg, nil
}

// dimsOf is the dimensionality of the first coordinate of coords (0 if
// it is nil, which validate then refuses).
func dimsOf(coords []*coordinate.Coordinate) int {
	if len(coords) == 0 || coords[0] == nil {
		return 0
	}
	return len(coords[0].Vec)
}

// DefaultCoordRounds returns the CoordRounds that Simulate takes for n
// peers when SimConfig.CoordRounds is 0: min(1000, max(400, 10^7/n)).
func DefaultCoordRounds(n int) int {
	return min(1000, max(400, 10_000_000/max(n, 1)))
}

// simCoords fits a coordinate for every peer: CoordRounds rounds in which
// each peer samples the RTT to one random other peer. Each peer behaves as
// a Client (seeded from Seed and its index) that samples the coordinate its
// peer last published; vivaldi does the arithmetic of all of them, the same
// to the last bit, without a serf client per peer.
func simCoords(n int, rtt func(i, j int) time.Duration, cfg SimConfig) ([]*coordinate.Coordinate, error) {
	r := rand.New(rand.NewPCG(cfg.Seed, 0xc0))
	rngs := make([]*rand.Rand, n)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
	}
	v := newVivaldi(DefaultCoordConfig().Vivaldi, rngs)
	if n > 1 && cfg.CoordRounds > 0 {
		// The samples in order, each drawn (and its RTT asked for) one
		// step ahead, so that the load of the next remote coordinate
		// overlaps the arithmetic of this sample: the draws and the calls
		// of rtt keep their order.
		draw := func(i int) int {
			j := r.IntN(n - 1)
			if j >= i {
				j++
			}
			return j
		}
		j := draw(0)
		d := rtt(0, j)
		var sink float64
		for k, last := 0, cfg.CoordRounds*n-1; k <= last; k++ {
			i := k % n
			nj, nd := 0, time.Duration(0)
			if k < last {
				ni := (k + 1) % n
				nj = draw(ni)
				nd = rtt(ni, nj)
				sink += v.pub[nj*v.stride] // the load, ahead of its use
			}
			v.sample(i, j, d) // unmeasured pairs (rtt <= 0) are rejected
			j, d = nj, nd
		}
		v.sink = sink
	}
	coords := make([]*coordinate.Coordinate, n)
	for i := range coords {
		coords[i] = v.coordinate(i)
	}
	return coords, nil
}

// nearestIndex answers nearest for every peer of one list on a
// pivotIndex: the same answers, without comparing every pair of peers.
type nearestIndex struct {
	peers []Peer
	ix    *pivotIndex
	buf   []neighbour
}

// newNearest indexes peers, whose coordinates must all be valid and of one
// dimensionality.
func newNearest(peers []Peer) *nearestIndex {
	cs := make([]*coordinate.Coordinate, len(peers))
	for i, p := range peers {
		cs[i] = p.Coord
	}
	dims := 0
	if len(cs) > 0 {
		dims = len(cs[0].Vec)
	}
	return &nearestIndex{peers: peers, ix: newPivotIndex(cs, dims)}
}

// of returns nearest(i, peers, k).
func (x *nearestIndex) of(i, k int) []Peer {
	x.buf = x.ix.nearest(x.peers[i].Coord, k, int32(i), x.buf)
	out := make([]Peer, len(x.buf))
	for n, c := range x.buf {
		out[n] = x.peers[c.i]
	}
	return out
}

// nearest returns the k peers nearest to peers[i] by estimated distance, ties
// by index, excluding i. It keeps the k best seen in a sorted slice, O(n·k);
// Simulate uses nearestIndex, which gives the same answers faster.
func nearest(i int, peers []Peer, k int) []Peer {
	type cand struct {
		d float64
		j int
	}
	less := func(a, b cand) bool { return a.d < b.d || (a.d == b.d && a.j < b.j) }
	best := make([]cand, 0, k+1)
	for j := range peers {
		if j == i || k == 0 {
			continue
		}
		c := cand{Distance(peers[i].Coord, peers[j].Coord), j}
		if len(best) == k && !less(c, best[k-1]) {
			continue
		}
		at := len(best)
		for at > 0 && less(c, best[at-1]) {
			at--
		}
		best = slices.Insert(best, at, c)
		if len(best) > k {
			best = best[:k]
		}
	}
	out := make([]Peer, len(best))
	for n, c := range best {
		out[n] = peers[c.j]
	}
	return out
}

// AttachmentRTT scores an attachment against the true RTTs: the mean and the
// 95th percentile (nearest rank, package stats) of rtt(i, attach[i]) over
// the ordinary peers i (those with attach[i] != i and attach[i] >= 0) whose
// RTT is measured (> 0). It returns zeros when there is none.
func AttachmentRTT(attach []int, rtt func(i, j int) time.Duration) (mean, p95 time.Duration) {
	var ds []time.Duration
	for i, s := range attach {
		if s < 0 || s == i {
			continue
		}
		if d := rtt(i, s); d > 0 {
			ds = append(ds, d)
		}
	}
	return time.Duration(stats.Mean(ds)), stats.Sort(ds).Percentile(95)
}
