package geometric

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// randomCoords returns n coordinates of dims dimensions in a few clusters,
// with heights and (also negative) adjustments, and some repeated exactly,
// so that ties and the adjustment clamp of Distance both occur.
func randomCoords(n, dims int, seed uint64) []*coordinate.Coordinate {
	r := rand.New(rand.NewPCG(seed, 17))
	cfg := coordinate.DefaultConfig()
	cfg.Dimensionality = uint(dims)
	centres := make([][]float64, 4)
	for i := range centres {
		centres[i] = make([]float64, dims)
		for k := range centres[i] {
			centres[i][k] = r.NormFloat64() * 0.05
		}
	}
	cs := make([]*coordinate.Coordinate, n)
	for i := range cs {
		if i > 0 && r.IntN(10) == 0 {
			cs[i] = cs[r.IntN(i)].Clone() // an exact duplicate
			continue
		}
		c := coordinate.NewCoordinate(cfg)
		ctr := centres[r.IntN(len(centres))]
		for k := range c.Vec {
			c.Vec[k] = ctr[k] + r.NormFloat64()*0.005
		}
		c.Height = 1e-5 + r.Float64()*0.003
		c.Adjustment = (r.Float64() - 0.6) * 0.004
		cs[i] = c
	}
	return cs
}

func peersOf(cs []*coordinate.Coordinate) []Peer {
	ps := make([]Peer, len(cs))
	for i, c := range cs {
		ps[i] = Peer{ID(fmt.Sprintf("p%d", i)), c}
	}
	return ps
}

// The k-d tree gives exactly the brute-force nearest neighbours, ties by
// index included.
func TestNearestIndexMatchesScan(t *testing.T) {
	for _, dims := range []int{2, 8} {
		for seed := range uint64(3) {
			peers := peersOf(randomCoords(700, dims, seed))
			x := newNearest(peers)
			for i := range peers {
				for _, k := range []int{0, 1, 8, 20} {
					if got, want := x.of(i, k), nearest(i, peers, k); !reflect.DeepEqual(got, want) {
						t.Fatalf("dims %d seed %d: peer %d, k = %d: index %v, scan %v", dims, seed, i, k, got, want)
					}
				}
			}
		}
	}
	// Ties on a grid, as in TestNearest.
	r := rand.New(rand.NewPCG(2, 2))
	var peers []Peer
	for i := 0; i < 300; i++ {
		peers = append(peers, Peer{ID(fmt.Sprint(i)), at(float64(r.IntN(20)), float64(r.IntN(20)))})
	}
	x := newNearest(peers)
	for i := range peers {
		if got, want := x.of(i, 8), nearest(i, peers, 8); !reflect.DeepEqual(got, want) {
			t.Fatalf("grid: peer %d: index %v, scan %v", i, got, want)
		}
	}
}

// attachAllSorted is AttachAllBy as it was first written: every pair
// sorted. The lazy version must give the same answer.
func attachAllSorted(n int, dist func(i, j int) float64, superpeers []int, capacity int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	for _, s := range superpeers {
		out[s] = s
	}
	var pairs []pair
	for i := range n {
		if out[i] >= 0 {
			continue
		}
		for k, s := range superpeers {
			pairs = append(pairs, pair{dist(i, s), i, k})
		}
	}
	slices.SortFunc(pairs, pair.compare)
	load := make([]int, len(superpeers))
	for _, p := range pairs {
		if out[p.peer] >= 0 || load[p.k] >= capacity {
			continue
		}
		out[p.peer] = superpeers[p.k]
		load[p.k]++
	}
	return out
}

func TestAttachAllMatchesSortedPairs(t *testing.T) {
	for seed := range uint64(6) {
		cs := randomCoords(400, 8, seed)
		r := rand.New(rand.NewPCG(seed, 5))
		for _, s := range []int{1, 3, 10, 40} {
			sps := r.Perm(len(cs))[:s]
			for _, capacity := range []int{1, (len(cs) - s) / s, (len(cs)-s)/s + 1, 2 * len(cs) / s, len(cs)} {
				capacity = max(capacity, 1)
				got, err := AttachAll(cs, sps, capacity)
				want := attachAllSorted(len(cs), func(i, j int) float64 { return Distance(cs[i], cs[j]) }, sps, capacity)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d, S = %d, capacity %d: lazy and sorted attachments differ", seed, s, capacity)
				}
				if full := (len(cs) - s) <= s*capacity; full != (err == nil) {
					t.Fatalf("seed %d, S = %d, capacity %d: err = %v", seed, s, capacity, err)
				}
			}
		}
	}
	// Integer distances: many ties.
	d := func(i, j int) float64 { return float64((i*7 + j*3) % 5) }
	for _, capacity := range []int{1, 2, 5, 50} {
		sps := []int{3, 17, 40, 41}
		got, _ := AttachAllBy(60, d, sps, capacity)
		if want := attachAllSorted(60, d, sps, capacity); !slices.Equal(got, want) {
			t.Fatalf("ties, capacity %d: %v, want %v", capacity, got, want)
		}
	}
}

// A holder on a PeerSpace decides as one with the plain peer list: the
// same passes (the same neighbour, the same force), over a run of moves
// where the space must follow tokens that come, go and move.
func TestPeerSpaceMatchesPeers(t *testing.T) {
	passes, trials := 0, 0
	defer func() {
		t.Logf("%d of %d decisions were passes", passes, trials)
		if passes == 0 || passes == trials {
			t.Errorf("%d of %d decisions were passes: the comparison needs both", passes, trials)
		}
	}()
	for seed := range uint64(4) {
		cs := randomCoords(600, 8, seed)
		peers := peersOf(cs)
		space := NewPeerSpace(peers)
		r := rand.New(rand.NewPCG(seed, 9))
		near := newNearest(peers)
		type tok struct{ num, peer int }
		var toks []tok
		for k, p := range r.Perm(len(peers))[:20] {
			toks = append(toks, tok{k, p})
		}
		nextNum := len(toks)
		taken := func(p int) bool {
			return slices.ContainsFunc(toks, func(t tok) bool { return t.peer == p })
		}
		for trial := range 80 {
			// One change at a time, as the space sees in a simulation:
			// a token moves, comes or goes; now and then all move.
			switch op := r.IntN(8); {
			case op == 0 && len(toks) < 40:
				if p := r.IntN(len(peers)); !taken(p) {
					toks = append(toks, tok{nextNum, p})
					nextNum++
				}
			case op == 1 && len(toks) > 2:
				toks = slices.Delete(toks, 1, 2)
			case op == 2:
				for k := range toks {
					if p := r.IntN(len(peers)); !taken(p) {
						toks[k].peer = p
					}
				}
			default:
				if p := r.IntN(len(peers)); !taken(p) {
					toks[r.IntN(len(toks))].peer = p
				}
			}
			holders := make([]int, len(toks))
			for k, t := range toks {
				holders[k] = t.peer
			}
			trials++
			me := holders[0]
			cfg := DefaultConfig()
			cfg.Tokens = len(holders)
			ns := near.of(me, 8)
			for range 8 {
				ns = append(ns, peers[r.IntN(len(peers))])
			}
			var outs [2][]Output
			var forces, gains [2][]float64
			for v, useSpace := range []bool{false, true} {
				h, err := NewHolder(peers[me].ID, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := h.SetCoordinate(cs[me]); err != nil {
					t.Fatal(err)
				}
				h.SetNeighbours(ns)
				if useSpace {
					h.SetPeerSpace(space)
				} else {
					h.SetPeers(peers)
				}
				if err := h.Receive(Token{Num: toks[0].num}, time.Unix(0, 0)); err != nil {
					t.Fatal(err)
				}
				for _, o := range toks[1:] {
					h.Observe(Position{Token{Num: o.num}, peers[o.peer].ID, cs[o.peer]})
				}
				for i, ok := range h.eligibleNeighbours() {
					if ok != h.eligible(h.neighbours[i]) {
						t.Fatalf("seed %d trial %d: neighbour %d eligible %v, eligibleNeighbours says %v", seed, trial, i, h.eligible(h.neighbours[i]), ok)
					}
				}
				f := h.field()
				self := Peer{h.self, h.coord}
				forces[v] = f.force(self)
				gains[v] = nil
				for _, n := range ns {
					gains[v] = append(gains[v], f.energy(self)-f.energy(n))
				}
				outs[v] = h.Tick(time.Unix(1, 0))
			}
			if !reflect.DeepEqual(forces[0], forces[1]) {
				t.Fatalf("seed %d trial %d: force %v with the list, %v with the space", seed, trial, forces[0], forces[1])
			}
			for k := range gains[0] {
				if !approxEqual(gains[0][k], gains[1][k]) {
					t.Fatalf("seed %d trial %d: gain to neighbour %d: %v with the list, %v with the space", seed, trial, k, gains[0][k], gains[1][k])
				}
			}
			if len(outs[0]) != len(outs[1]) {
				t.Fatalf("seed %d trial %d: %v with the list, %v with the space", seed, trial, outs[0], outs[1])
			}
			if len(outs[0]) > 0 {
				passes++
			}
			for k := range outs[0] {
				a, aok := outs[0][k].(Pass)
				b, bok := outs[1][k].(Pass)
				if aok != bok || a.To != b.To || a.Token != b.Token || !approxEqual(a.Gain, b.Gain) {
					t.Fatalf("seed %d trial %d: %+v with the list, %+v with the space", seed, trial, outs[0][k], outs[1][k])
				}
			}
		}
	}
}

func approxEqual(a, b float64) bool {
	return a == b || max(a-b, b-a) <= 1e-9*max(1, a, -a, b, -b)
}

func TestPeerSpaceCellMatchesScan(t *testing.T) {
	cs := randomCoords(800, 8, 7)
	peers := peersOf(cs)
	space := NewPeerSpace(peers)
	r := rand.New(rand.NewPCG(7, 7))
	for trial := range 40 {
		holders := r.Perm(len(peers))[:1+r.IntN(30)]
		var ts []Position
		for k, o := range holders {
			ts = append(ts, Position{Token{Num: k}, peers[o].ID, cs[o]})
		}
		space.sync(ts)
		own := r.IntN(len(holders))
		for range 5 {
			x := peers[r.IntN(len(peers))]
			got := space.cell(x, own, nil)
			sortCell(got)
			var want []int32
			for j, p := range peers {
				near := 1e300
				for k, o := range holders {
					if k != own {
						near = min(near, rtt(p, peers[o]))
					}
				}
				if rtt(x, p) < near {
					want = append(want, int32(j))
				}
			}
			var ids []int32
			for _, c := range got {
				ids = append(ids, c.point)
			}
			if !slices.Equal(ids, want) {
				t.Fatalf("trial %d: cell of %s has %d peers, want %d", trial, x.ID, len(ids), len(want))
			}
		}
	}
}

// vivaldi does what a Client per peer does, to the last bit: the same
// coordinates after every sample, nudges and rejected samples included.
func TestVivaldiMatchesClient(t *testing.T) {
	const n = 60
	r := rand.New(rand.NewPCG(3, 3))
	pts := make([][3]float64, n)
	for i := range pts {
		pts[i] = [3]float64{r.Float64() * 100, r.Float64() * 100, r.Float64() * 5}
	}
	rtt := func(i, j int) time.Duration {
		switch {
		case (i*31+j*17)%41 == 0:
			return 0 // unmeasured: rejected
		case (i*13+j*7)%97 == 0:
			return 11 * time.Second // too long: rejected
		case (i*5+j)%53 == 0:
			return 300 * time.Nanosecond // below serf's zero threshold
		}
		dx, dy := pts[i][0]-pts[j][0], pts[i][1]-pts[j][1]
		return time.Duration((1 + pts[i][2] + pts[j][2] + math.Hypot(dx, dy)) * float64(time.Millisecond))
	}
	rngs := make([]*rand.Rand, n)
	cs := make([]*Client, n)
	pub := make([]*coordinate.Coordinate, n)
	for i := range n {
		rngs[i] = rand.New(rand.NewPCG(9, uint64(i)))
		cc := DefaultCoordConfig()
		cc.Rand = rand.New(rand.NewPCG(9, uint64(i)))
		var err error
		if cs[i], err = NewClient(cc); err != nil {
			t.Fatal(err)
		}
		pub[i] = cs[i].Coordinate()
	}
	v := newVivaldi(DefaultCoordConfig().Vivaldi, rngs)
	accepted := 0
	for step := range 40000 {
		i, j := r.IntN(n), r.IntN(n-1)
		if j >= i {
			j++
		}
		if step%5000 == 0 {
			j = i // a peer sampling its own published coordinate: nudged
		}
		c, err := cs[i].Sample(ID(fmt.Sprint(j)), pub[j], rtt(i, j))
		if err == nil {
			pub[i] = c
			cs[i].Forget(ID(fmt.Sprint(j)))
			accepted++
		}
		if ok := v.sample(i, j, rtt(i, j)); ok != (err == nil) {
			t.Fatalf("step %d: vivaldi accepted %v, Client %v", step, ok, err)
		}
		if got := v.coordinate(i); !reflect.DeepEqual(got, pub[i]) {
			t.Fatalf("step %d: peer %d at %+v, Client at %+v", step, i, got, pub[i])
		}
	}
	t.Logf("%d of 40000 samples accepted", accepted)
}

// The PeerSpace's nearest and second-nearest token of every peer, and the
// cells, stay right as tokens come, go and move, one or several at a time.
func TestPeerSpaceTracksTokens(t *testing.T) {
	cs := randomCoords(900, 8, 11)
	peers := peersOf(cs)
	space := NewPeerSpace(peers)
	r := rand.New(rand.NewPCG(11, 1))
	type tok struct{ num, peer int }
	var toks []tok
	for k, p := range r.Perm(len(peers))[:30] {
		toks = append(toks, tok{k, p})
	}
	next := len(toks)
	near := newNearest(peers)
	for step := range 300 {
		switch op := r.IntN(10); {
		case op == 0 && len(toks) < 60:
			toks = append(toks, tok{next, r.IntN(len(peers))})
			next++
		case op == 1 && len(toks) > 3:
			i := r.IntN(len(toks))
			toks = slices.Delete(toks, i, i+1)
		case op == 2:
			toks[r.IntN(len(toks))].peer = r.IntN(len(peers))
			toks[r.IntN(len(toks))].peer = r.IntN(len(peers))
		default: // one token to a peer near it, as a pass
			k := r.IntN(len(toks))
			toks[k].peer = near.of(toks[k].peer, 4)[r.IntN(4)].ID.index()
		}
		var ts []Position
		for _, o := range toks {
			ts = append(ts, Position{Token{Num: o.num}, peers[o.peer].ID, cs[o.peer]})
		}
		space.sync(ts)
		for k := range space.point {
			k := int32(k)
			p := peers[space.point[k]]
			var ds []float64
			for _, o := range toks {
				ds = append(ds, rtt(p, peers[o.peer]))
			}
			slices.Sort(ds)
			want2 := math.Inf(1)
			if len(ds) > 1 {
				want2 = ds[1]
			}
			if space.d1[k] != ds[0] || space.d2[k] != want2 {
				t.Fatalf("step %d: peer %s: d1, d2 = %v, %v; want %v, %v", step, p.ID, space.d1[k], space.d2[k], ds[0], want2)
			}
			if space.n1[k] < 0 || space.tokenRTT(k, space.n1[k]) != ds[0] {
				t.Fatalf("step %d: peer %s: nearest token slot %d is not at d1", step, p.ID, space.n1[k])
			}
			if r := space.d2[k] - space.w[k]; space.r[k] != r {
				t.Fatalf("step %d: peer %s: radius %v, want %v", step, p.ID, space.r[k], r)
			}
		}
		checkBallTree(t, space.tree, space.r)
	}
}

// index returns i for an ID "p<i>" of peersOf.
func (id ID) index() int {
	var i int
	fmt.Sscanf(string(id), "p%d", &i)
	return i
}

// checkBallTree checks that every node of tr knows the largest radius
// below it, or more.
func checkBallTree(t *testing.T, tr *ballTree, r []float64) {
	t.Helper()
	for id := range tr.nodes {
		n := tr.nodes[id]
		m := math.Inf(-1)
		for _, x := range r[n.lo:n.hi] {
			m = max(m, x)
		}
		if tr.rmax[id] < m {
			t.Fatalf("node %d: largest radius %v below it, but it knows %v", id, m, tr.rmax[id])
		}
	}
}

func TestSelectNth(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for trial := range 200 {
		n := 1 + r.IntN(60)
		keys := make([]float64, n)
		ids := make([]int32, n)
		for i := range keys {
			keys[i] = float64(r.IntN(8)) // many ties
			ids[i] = int32(i)
		}
		k := r.IntN(n)
		type kv struct {
			k float64
			i int32
		}
		want := make([]kv, n)
		for i := range keys {
			want[i] = kv{keys[i], ids[i]}
		}
		slices.SortFunc(want, func(a, b kv) int {
			if a.k != b.k {
				return cmp.Compare(a.k, b.k)
			}
			return cmp.Compare(a.i, b.i)
		})
		selectNth(keys, ids, k)
		if keys[k] != want[k].k || ids[k] != want[k].i {
			t.Fatalf("trial %d: %d-th is (%v, %d), want %v", trial, k, keys[k], ids[k], want[k])
		}
		for i := range n {
			if (i < k && (keys[i] > keys[k] || keys[i] == keys[k] && ids[i] > ids[k])) ||
				(i > k && (keys[i] < keys[k] || keys[i] == keys[k] && ids[i] < ids[k])) {
				t.Fatalf("trial %d: not partitioned around %d", trial, k)
			}
		}
	}
}

// A cached cell, brought up to date after every change of the tokens, is
// the cell computed afresh, entry for entry.
func TestCellCacheMatchesFresh(t *testing.T) {
	cs := randomCoords(800, 8, 13)
	peers := peersOf(cs)
	space := NewPeerSpace(peers)
	r := rand.New(rand.NewPCG(13, 1))
	near := newNearest(peers)
	type tok struct{ num, peer int }
	var toks []tok
	for k, p := range r.Perm(len(peers))[:25] {
		toks = append(toks, tok{k, p})
	}
	xs := make([]Peer, 12)
	caches := make([]cellCache, len(xs))
	for i := range xs {
		xs[i] = peers[r.IntN(len(peers))]
	}
	xs[0] = peers[toks[0].peer] // the holder of token 0 itself
	incremental := 0
	for step := range 400 {
		switch op := r.IntN(12); {
		case op == 0:
			for range 3 {
				k := 1 + r.IntN(len(toks)-1)
				toks[k].peer = r.IntN(len(peers))
			}
		default: // a pass to a near peer, token 0 stays
			k := 1 + r.IntN(len(toks)-1)
			toks[k].peer = near.of(toks[k].peer, 4)[r.IntN(4)].ID.index()
		}
		var ts []Position
		for _, o := range toks {
			ts = append(ts, Position{Token{Num: o.num}, peers[o.peer].ID, cs[o.peer]})
		}
		space.sync(ts)
		for i, x := range xs {
			if caches[i].version != 0 {
				incremental++
			}
			got := space.cached(x, 0, &caches[i], nil)
			want := space.cell(x, 0, nil)
			sortCell(want)
			if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("step %d, candidate %s: cached cell of %d peers, fresh %d", step, x.ID, len(got), len(want))
			}
		}
	}
	t.Logf("%d of %d cells brought up to date rather than computed afresh", incremental, 400*len(xs))
	if incremental == 0 {
		t.Fatal("the incremental path was not exercised")
	}
}

// Simulate refuses Coords that the indexes could not take: nil, not finite,
// or of another dimensionality than the first.
func TestSimulateRejectsBadCoords(t *testing.T) {
	good := randomCoords(6, 8, 1)
	for name, bad := range map[string]*coordinate.Coordinate{
		"nil":            nil,
		"NaN":            {Vec: []float64{math.NaN(), 0, 0, 0, 0, 0, 0, 0}},
		"two dimensions": {Vec: []float64{0, 0}},
	} {
		cs := slices.Clone(good)
		cs[3] = bad
		cfg := SimConfig{Seed: 1, Coords: cs}
		cfg.Tokens = 2
		if _, err := Simulate(len(cs), line(len(cs)), cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}
