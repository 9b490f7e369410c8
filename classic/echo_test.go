package classic

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// echoGraph is an undirected graph with a capacity per node.
type echoGraph struct {
	ids  []ID
	adj  map[ID][]ID
	caps map[ID]uint64
	m    int // number of edges
}

func newEchoGraph(ids []ID) *echoGraph {
	return &echoGraph{ids: ids, adj: map[ID][]ID{}, caps: map[ID]uint64{}}
}

func (g *echoGraph) edge(a, b ID) bool {
	if a == b || slices.Contains(g.adj[a], b) {
		return false
	}
	g.adj[a] = append(g.adj[a], b)
	g.adj[b] = append(g.adj[b], a)
	g.m++
	return true
}

// net builds a tnet of Echo machines on g.
func (g *echoGraph) net(t testing.TB) *tnet {
	t.Helper()
	return newTnet(t, g.ids, func(id ID) Machine {
		return tnMust[*Echo](t)(NewEcho(Config{ID: id, Peers: g.ids, TimeoutTicks: 2}, g.adj[id], g.caps[id]))
	})
}

// tenNodes is the ten-node capacity example: a..j, source a, h (capacity 8)
// is the unique maximum, four hops from a on either side of a cycle.
//
//	    a(3)
//	   /    \
//	b(5)    c(2)
//	  \    /   \
//	   d(6)    e(4)
//	   |        |
//	  f(1)     g(7)
//	    \     /   \
//	     h(8)     i(2)
//	        \     /
//	         j(5)
func tenNodes() *echoGraph {
	g := newEchoGraph(tnSplit("a b c d e f g h i j"))
	for _, e := range [][2]ID{
		{"a", "b"}, {"a", "c"}, {"b", "d"}, {"c", "d"}, {"c", "e"}, {"d", "f"},
		{"e", "g"}, {"f", "h"}, {"g", "h"}, {"g", "i"}, {"h", "j"}, {"i", "j"},
	} {
		g.edge(e[0], e[1])
	}
	for id, c := range map[ID]uint64{"a": 3, "b": 5, "c": 2, "d": 6, "e": 4, "f": 1, "g": 7, "h": 8, "i": 2, "j": 5} {
		g.caps[id] = c
	}
	return g
}

func echoOf(n *tnet, id ID) *Echo { return n.nodes[id].(*Echo) }

// TestEchoTenNodeWalkthrough: a starts the election; the ELECTION wave builds
// the spanning tree, the echoes carry each subtree's best (capacity, ID) up,
// a learns that h (8) wins and the COORDINATOR goes down the tree.
func TestEchoTenNodeWalkthrough(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	n.campaign("a")
	n.settle()

	// The spanning tree (the network is FIFO, so the wave is breadth-first).
	wantParent := map[ID]ID{"a": None, "b": "a", "c": "a", "d": "b", "e": "c", "f": "d", "g": "e", "h": "f", "i": "g", "j": "h"}
	for id, p := range wantParent {
		if got := echoOf(n, id).Parent(); got != p {
			t.Errorf("parent of %s = %q, want %q", id, got, p)
		}
	}

	// Every echo carries the best of the sender's subtree.
	wantEcho := map[ID]string{
		"b": "h/8", "c": "g/7", "d": "h/8", "e": "g/7", "f": "h/8",
		"g": "g/7", "h": "h/8", "i": "i/2", "j": "j/5",
	}
	echoes := n.since(0, MsgEcho)
	if len(echoes) != len(wantEcho) {
		t.Fatalf("%d echoes, want one per non-source node:\n%s", len(echoes), tnFmtLongs(echoes))
	}
	for _, m := range echoes {
		if m.To != wantParent[m.From] {
			t.Errorf("%s: echo not sent to the parent %s", tnFmtLong(m), wantParent[m.From])
		}
		if got := fmt.Sprintf("%s/%d", m.Leader, m.Capacity); got != wantEcho[m.From] {
			t.Errorf("echo of %s carries %s, want %s", m.From, got, wantEcho[m.From])
		}
	}

	// A node answers its parent only after every other neighbour answered
	// it (by ECHO as its child or by its own ELECTION).
	for i, m := range n.log {
		if m.Type != MsgEcho {
			continue
		}
		v := m.From
		for _, nb := range g.adj[v] {
			if nb == wantParent[v] {
				continue
			}
			if !slices.ContainsFunc(n.log[:i], func(x Message) bool { return x.From == nb && x.To == v }) {
				t.Errorf("%s echoed to %s before hearing from its neighbour %s", v, m.To, nb)
			}
		}
	}

	// h wins everywhere; only h leads.
	if !n.agree("h") {
		t.Fatalf("not everyone follows h: %s", n.states())
	}
	if st := n.state("a"); st.Term != 1 {
		t.Errorf("term %d, want the election's sequence number 1", st.Term)
	}

	// The COORDINATOR goes down the tree: once to every node but a.
	coords := n.since(0, MsgCoordinator)
	for _, m := range coords {
		if wantParent[m.To] != m.From || m.Leader != "h" || m.Capacity != 8 {
			t.Errorf("bad announcement %s", tnFmtLong(m))
		}
	}

	// 2 messages per edge plus the broadcast: 2·12 + 9 = 33.
	elections, ecs := n.count(MsgElection), n.count(MsgEcho)
	t.Logf("ten nodes, 12 edges: %d ELECTION + %d ECHO + %d COORDINATOR = %d messages",
		elections, ecs, len(coords), len(n.sent))
	if elections+ecs != 2*g.m || len(coords) != len(g.ids)-1 || len(n.sent) != 33 {
		t.Fatalf("got %d ELECTION + %d ECHO + %d COORDINATOR, want 2·%d + %d = 33",
			elections, ecs, len(coords), g.m, len(g.ids)-1)
	}
}

// randomGraph returns a connected graph on n nodes: a random tree plus about
// n extra random edges, and random capacities, all from seed.
func randomGraph(n int, seed uint64) *echoGraph {
	r := rand.New(rand.NewPCG(seed, 42))
	ids := make([]ID, n)
	for i := range ids {
		ids[i] = ID(fmt.Sprintf("n%04d", i))
	}
	g := newEchoGraph(ids)
	for i := 1; i < n; i++ {
		g.edge(ids[i], ids[r.IntN(i)])
	}
	for range n {
		g.edge(ids[r.IntN(n)], ids[r.IntN(n)])
	}
	for _, id := range ids {
		g.caps[id] = uint64(r.IntN(1000))
	}
	return g
}

// TestEchoMessageCount: on random connected graphs of 8, 64 and 512 nodes
// one election costs exactly 2 messages per edge plus n−1 for the broadcast,
// and everyone elects the node of largest capacity (ties: higher ID).
func TestEchoMessageCount(t *testing.T) {
	for _, size := range []int{8, 64, 512} {
		for seed := range uint64(3) {
			g := randomGraph(size, seed)
			n := g.net(t)
			source := g.ids[int(seed)%size]
			n.campaign(source)
			n.settle()
			want := None
			for _, id := range g.ids {
				if want == None || g.caps[id] > g.caps[want] || g.caps[id] == g.caps[want] && id > want {
					want = id
				}
			}
			if !n.agree(want) {
				t.Fatalf("n=%d seed=%d: not everyone follows %s", size, seed, want)
			}
			el, ec, co := n.count(MsgElection), n.count(MsgEcho), n.count(MsgCoordinator)
			t.Logf("n=%d edges=%d: %d ELECTION + %d ECHO + %d COORDINATOR = %d (expected 2·%d + %d = %d)",
				size, g.m, el, ec, co, len(n.sent), g.m, size-1, 2*g.m+size-1)
			if el+ec != 2*g.m || co != size-1 || len(n.sent) != 2*g.m+size-1 {
				t.Fatalf("n=%d seed=%d: %d messages, want 2·%d + %d", size, seed, len(n.sent), g.m, size-1)
			}
			if ec != size-1 {
				t.Fatalf("n=%d seed=%d: %d echoes, want one per tree edge (%d)", size, seed, ec, size-1)
			}
		}
	}
}

// TestEchoConcurrentElections: a and j start elections in the same instant.
// Both are (Seq 1); (j,1) is the higher ElectionID, so every node ends in
// j's election, a's is abandoned, and only j's result is announced.
func TestEchoConcurrentElections(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	for _, src := range tnSplit("a j") {
		n.campaign(src)
	}
	n.settle()
	winner := ElectionID{Source: "j", Seq: 1}
	for _, id := range g.ids {
		if got := echoOf(n, id).Election(); got != winner {
			t.Errorf("%s ended in election %v, want %v", id, got, winner)
		}
	}
	coords := n.since(0, MsgCoordinator)
	if len(coords) != len(g.ids)-1 {
		t.Fatalf("%d COORDINATOR messages, want one broadcast of %d:\n%s", len(coords), len(g.ids)-1, tnFmtLongs(coords))
	}
	for _, m := range coords {
		if m.Election != winner || m.Leader != "h" {
			t.Fatalf("announcement %s, want h in election %v", tnFmtLong(m), winner)
		}
	}
	if !n.agree("h") {
		t.Fatalf("not one leader h: %s", n.states())
	}
}

// TestEchoDeadNeighbour: h is down; the driver answers every message to h
// with UNREACHABLE, which counts as an empty answer. g (7) wins.
func TestEchoDeadNeighbour(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	n.unreachable = true
	n.crash("h")
	n.campaign("a")
	n.settle()
	if !n.agree("g") {
		t.Fatalf("not everyone follows g: %s", n.states())
	}
	unreach := 0
	for _, m := range n.log {
		if m.Type == MsgUnreachable {
			unreach++
			if m.From != "h" {
				t.Errorf("unexpected %s", tnFmtLong(m))
			}
		}
	}
	if unreach != len(g.adj["h"]) {
		t.Errorf("%d UNREACHABLE, want one per neighbour of h (%d)", unreach, len(g.adj["h"]))
	}
}

// TestEchoTimeoutRestarts: the link f→h loses messages during the first
// election, which therefore never completes. After the election timeout the
// waiting nodes start a new election (Seq 2), which succeeds.
func TestEchoTimeoutRestarts(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	n.cut[[2]ID{"h", "f"}] = true // h's echo to its parent f is lost
	n.campaign("a")
	n.settle()
	if st := n.state("a"); st.Role != Candidate || st.Leader != None {
		t.Fatalf("a: %v of %q, want a stuck election", st.Role, st.Leader)
	}
	n.heal()
	// Default election timeout: 2·len(Peers)·TimeoutTicks = 40 ticks.
	n.run(39)
	if n.count(MsgCoordinator) != 0 {
		t.Fatal("the first election completed without h's echo")
	}
	n.run(1)
	if !n.agree("h") {
		t.Fatalf("the restarted election did not elect h: %s", n.states())
	}
	for _, id := range g.ids {
		if e := echoOf(n, id).Election(); e.Seq != 2 {
			t.Errorf("%s is in election %v, want a Seq 2 election", id, e)
		}
		if st := n.state(id); st.Term != 2 {
			t.Errorf("%s: term %d, want 2", id, st.Term)
		}
	}
}

// TestEchoSingleNode: a lone process elects itself.
func TestEchoSingleNode(t *testing.T) {
	e, err := NewEcho(Config{ID: "x", Peers: tnSplit("x")}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.Campaign()
	rd := e.Ready()
	if rd.State.Role != Leader || rd.State.Leader != "x" || len(rd.Messages) != 0 {
		t.Fatalf("lone process: %+v", rd)
	}
}

func TestNewEchoValidation(t *testing.T) {
	peers := tnSplit("a b c")
	cases := []struct {
		name string
		nbs  []ID
		opts []EchoOption
		want error
	}{
		{"no neighbours", nil, nil, ErrBadNeighbours},
		{"self", tnSplit("a b"), nil, ErrBadNeighbours},
		{"stranger", tnSplit("b z"), nil, ErrBadNeighbours},
		{"twice", tnSplit("b b"), nil, ErrBadNeighbours},
		{"bad timeout", tnSplit("b"), []EchoOption{WithElectionTimeout(0)}, ErrBadOption},
	}
	for _, tc := range cases {
		if _, err := NewEcho(Config{ID: "a", Peers: peers}, tc.nbs, 1, tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := NewEcho(Config{ID: "a", Peers: peers}, tnSplit("b c"), 1, WithElectionTimeout(5)); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}
