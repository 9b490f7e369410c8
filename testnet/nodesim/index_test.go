package nodesim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// The indexes answer as the scans they replace did (the scans are kept
// here, as they were).

// TestTrieWalk: the trie gives its nodes in increasing XOR distance from
// any target, through inserts and removals.
func TestTrieWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var keys []dhtselect.Key
	for i := range 500 {
		keys = append(keys, dhtselect.KeyOf(nodeID(i)))
	}
	// Keys with long common prefixes too.
	for i := range 64 {
		k := keys[0]
		k[31] ^= byte(i + 1)
		keys = append(keys, k)
	}
	var tr trie
	in := map[int]bool{}
	for round := range 2000 {
		i := rng.IntN(len(keys))
		if rng.IntN(3) == 0 {
			tr.remove(keys, i)
			delete(in, i)
		} else {
			tr.insert(keys, i)
			in[i] = true
		}
		if tr.n != len(in) {
			t.Fatalf("round %d: %d in the trie, want %d", round, tr.n, len(in))
		}
		if round%50 != 0 {
			continue
		}
		target := keys[rng.IntN(len(keys))]
		target[rng.IntN(32)] ^= byte(rng.IntN(256))
		var want []int
		for i := range in {
			want = append(want, i)
		}
		slices.SortFunc(want, func(a, b int) int {
			if dhtselect.Closer(keys[a], keys[b], target) {
				return -1
			}
			return 1
		})
		var got []int
		tr.walk(&target, func(i int) bool { got = append(got, i); return true })
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: walk gives %v, want %v", round, got, want)
		}
		odd := tr.nearest(&target, func(i int) bool { return i%2 == 1 })
		w := slices.IndexFunc(want, func(i int) bool { return i%2 == 1 })
		if w >= 0 && odd != want[w] || w < 0 && odd != -1 {
			t.Fatalf("round %d: nearest odd %d, want index %d of %v", round, odd, w, want)
		}
	}
}

// TestFenwickNth: the r-th counted index, as the list of them gives it.
func TestFenwickNth(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var f fenwick
	var on []bool
	for round := range 5000 {
		if rng.IntN(4) == 0 || len(on) == 0 {
			on = append(on, false)
			f.grow(len(on))
		}
		i := rng.IntN(len(on))
		if on[i] {
			f.add(i, -1)
		} else {
			f.add(i, 1)
		}
		on[i] = !on[i]
		var list []int
		for j, b := range on {
			if b {
				list = append(list, j)
			}
		}
		if f.n != len(list) {
			t.Fatalf("round %d: count %d, want %d", round, f.n, len(list))
		}
		if len(list) > 0 {
			r := rng.IntN(len(list))
			if got := f.nth(r); got != list[r] {
				t.Fatalf("round %d: nth(%d) = %d, want %d", round, r, got, list[r])
			}
		}
	}
}

// closestScan is closest as it was: a scan of every node.
func (s *Sim) closestScan(i int, key dhtselect.Key, skip int, may func(j int) bool) lookupAnswer {
	best, bestAny := -1, -1
	vis := s.comps[s.comp[i]].vis
	for j, n := range s.nodes {
		if j == skip || n.inc == 0 || j != i && may != nil && !may(j) {
			continue
		}
		up := n.alive && s.reachable(i, j)
		_, known := vis[j]
		if !up && !known {
			continue
		}
		if bestAny < 0 || dhtselect.Closer(n.key, s.nodes[bestAny].key, key) {
			bestAny = j
		}
		if up && (best < 0 || dhtselect.Closer(n.key, s.nodes[best].key, key)) {
			best = j
		}
	}
	return lookupAnswer{to: best, deadNear: bestAny != best}
}

// routingTableScan is routingTable by a scan of every node: the same
// draws, the same buckets.
func (s *Sim) routingTableScan(i int) []int {
	self := s.nodes[i].key
	deepest := -1
	for j := range s.nodes {
		if j != i {
			deepest = max(deepest, cpl(self, s.nodes[j].key))
		}
	}
	var out []int
	for c := 0; c <= deepest; c++ {
		t := s.bucketTarget(self, c)
		var in []int
		for j := range s.nodes {
			if j != i && cpl(self, s.nodes[j].key) == c {
				in = append(in, j)
			}
		}
		slices.SortFunc(in, func(a, b int) int {
			switch {
			case dhtselect.Closer(s.nodes[a].key, s.nodes[b].key, t):
				return -1
			case dhtselect.Closer(s.nodes[b].key, s.nodes[a].key, t):
				return 1
			}
			return 0
		})
		out = append(out, in[:min(len(in), dhtselect.BucketSize)]...)
	}
	return out
}

// TestRoutingTableAsScanned: the same tables and the same draws.
func TestRoutingTableAsScanned(t *testing.T) {
	for _, n := range []int{1, 2, 15, 21, 41, 42, 300, 3000} {
		a, err := New(Config{N: n, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := New(Config{N: n, Seed: 7})
		for i := range n {
			if got, want := a.routingTable(i), b.routingTableScan(i); !slices.Equal(got, want) {
				t.Fatalf("n = %d, node %d: table %v, want %v", n, i, got, want)
			}
			if x, y := a.rng.Uint64(), b.rng.Uint64(); x != y {
				t.Fatalf("n = %d, node %d: the draws after differ", n, i)
			}
		}
	}
}

// checkOracles compares every index with its scan now.
func checkOracles(t *testing.T, s *Sim) {
	t.Helper()
	var live []int
	var keys []dhtselect.Key
	for i, n := range s.nodes {
		if n.alive {
			live = append(live, i)
			keys = append(keys, n.key)
		}
	}
	if s.liveCount() != len(live) {
		t.Fatalf("at %v: %d live, want %d", s.now, s.liveCount(), len(live))
	}
	for r := range live {
		if got := s.idx.live.nth(r); got != live[r] {
			t.Fatalf("at %v: live node %d is %d, want %d", s.now, r, got, live[r])
		}
	}
	for _, n := range s.nodes[:min(len(s.nodes), 50)] {
		if len(keys) == 0 {
			break
		}
		ck := n.key.Cluster(3)
		if got, want := s.closestLive(ck), live[dhtselect.Closest(ck, keys)]; got != want {
			t.Fatalf("at %v: closest live to %v is %d, want %d", s.now, ck, got, want)
		}
	}
	for i, n := range s.nodes {
		var want, fol []int
		for j, o := range s.nodes {
			if j != i && o.alive && s.isContact(j, i) {
				want = append(want, j)
			}
			if j != i && o.state.Superpeer == n.id {
				fol = append(fol, j)
			}
		}
		if got := s.connectedTo(i); !slices.Equal(got, want) {
			for _, j := range want {
				if !slices.Contains(got, j) {
					t.Logf("missing %d: contacts %v (now %v) superpeer %s names %d rev %v fol %v", j, fmt.Sprint(s.nodes[j].contacts.get(i)), s.now, s.nodes[j].state.Superpeer, s.idx.names[j], s.idx.rev[i], s.idx.fol[i])
				}
			}
			t.Fatalf("at %v: connected to %d: %v, want %v", s.now, i, got, want)
		}
		if sp := n.state.Superpeer; sp != "" {
			j, ok := s.indexOf(sp)
			if !ok {
				j = -1
			}
			if s.idx.names[i] != j {
				t.Fatalf("at %v: node %d names %d, its state %s (%d)", s.now, i, s.idx.names[i], sp, j)
			}
		}
		if got := s.followers(i); !slices.Equal(got, fol) {
			t.Fatalf("at %v: followers of %d: %v, want %v", s.now, i, got, fol)
		}
	}
}

// TestOraclesAsScanned: through partitions, crashes, graceful stops,
// restarts, joins and churn, every lookup's answer and every index agree
// with the scans.
func TestOraclesAsScanned(t *testing.T) {
	cfgs := []Config{
		{N: 120, Node: node.Config{Target: dhtselect.Target{Fraction: 0.1}, Election: "bully"}},
		{N: 90, Addr: func(i int) string { return fmt.Sprintf("a%d", i/3) },
			Node: node.Config{Target: dhtselect.Target{Fraction: 0.1}, Election: "bully", MaxPerAddr: 2}},
		{N: 100, Node: node.Config{Target: dhtselect.Target{Fraction: 0.1}}},
	}
	for c, cfg := range cfgs {
		cfg.Seed, cfg.Stagger = uint64(c), 5*time.Second
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		lookups := 0
		s.Watch = func(_ time.Duration, i int, rd node.Ready) {
			for _, l := range rd.Lookups {
				skip := -1
				if l.SkipSelf {
					skip = i
				}
				var may func(int) bool
				if s.addrs != nil {
					may = func(j int) bool { return l.MayAsk(s.nodes[j].id, true) }
				}
				if got, want := s.closest(i, l.Key, skip, may), s.closestScan(i, l.Key, skip, may); got != want {
					t.Fatalf("config %d at %v: node %d's lookup of %v: %+v, want %+v", c, s.now, i, l.Key, got, want)
				}
				lookups++
			}
		}
		s.Every(700*time.Millisecond, func(s *Sim) { checkOracles(t, s) })
		s.RunFor(30 * time.Second)
		o := s.Observe(100 * time.Millisecond)
		s.Partition([]int{1, 2, 3, 4, 5, 6, 7, 8}, []int{9, 10, 11})
		s.RunFor(20 * time.Second)
		s.Heal()
		s.RunFor(10 * time.Second)
		var down []int
		s.Every(3*time.Second, func(s *Sim) {
			for _, i := range down {
				s.Restart(i)
			}
			down = down[:0]
			for range 3 {
				if i := s.rng.IntN(s.N()); s.Alive(i) {
					if s.rng.IntN(3) == 0 {
						s.Stop(i)
					} else {
						o.CrashSuperpeer(s, i)
					}
					down = append(down, i)
				}
			}
		})
		s.RunFor(30 * time.Second)
		s.Isolate(5)
		s.RunFor(5 * time.Second)
		s.Heal()
		s.Churn(0.2, time.Minute, o)
		s.RunFor(80 * time.Second)
		if lookups < 100 {
			t.Fatalf("config %d: only %d lookups checked", c, lookups)
		}
		t.Logf("config %d: %d lookups checked, %d nodes", c, lookups, s.N())
	}
}

// TestIndexOf: indexOf, which reads the index out of an ID that nodeID
// gave, answers as the index map does, for the nodes' own IDs, IDs that
// no node has, and IDs added (AddID), of nodeID's form or not, before and
// after.
func TestIndexOf(t *testing.T) {
	s, err := New(Config{N: 30, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		ids := []peer.ID{"", "n", "n0000030", "n0000036", "n9999999", "n000000a", "n-000001", "\xff0000001", "n00000031"}
		for i := range s.N() {
			ids = append(ids, s.ID(i), nodeID(i))
		}
		for _, id := range ids {
			want, wok := s.index[id]
			if got, ok := s.indexOf(id); got != want || ok != wok {
				t.Errorf("indexOf(%q) = %d, %v; the map says %d, %v", id, got, ok, want, wok)
			}
		}
	}
	check()
	for _, id := range []peer.ID{"x1", "n0000031", "n00000031", "n00000a1", "m0000004", "n1234567"} {
		if _, err := s.AddID(id); err != nil {
			t.Fatal(err)
		}
	}
	if !s.customIDs {
		t.Fatal("AddID gave node 30 its own ID: nothing tested")
	}
	check()
}
