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

// TestEchoLostEchoRetransmitted: the link h→f loses h's echo during the
// first election, which therefore stalls at f. (This test used to assert that
// the election stayed stuck until the election timeout and that a new, Seq 2
// election then pulled every node back in: that was the bug that kept a lossy
// cluster from ever agreeing.) Now, one retransmission interval later, f
// re-sends its ELECTION to the silent h and h re-sends its ECHO to f, and the
// same election (Seq 1) completes with h.
func TestEchoLostEchoRetransmitted(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	n.cut[[2]ID{"h", "f"}] = true // h's echo to its parent f is lost
	n.campaign("a")
	n.settle()
	if st := n.state("a"); st.Role != Candidate || st.Leader != None {
		t.Fatalf("a: %v of %q, want a stuck election", st.Role, st.Leader)
	}
	n.heal()
	// Default retransmission interval: len(Peers)·TimeoutTicks = 20 ticks.
	mark := n.mark()
	n.run(19)
	if got := n.since(mark, 0); len(got) != 0 {
		t.Fatalf("retransmitted before the interval:\n%s", tnFmtLongs(got))
	}
	n.run(1)
	if !n.agree("h") {
		t.Fatalf("the retransmitted echo did not elect h: %s", n.states())
	}
	for _, id := range g.ids {
		if e := echoOf(n, id).Election(); e != (ElectionID{Source: "a", Seq: 1}) {
			t.Errorf("%s is in election %v, want the first one", id, e)
		}
		if st := n.state(id); st.Term != 1 {
			t.Errorf("%s: term %d, want 1", id, st.Term)
		}
	}
	// At the interval every node that still waits retransmits once: the
	// ancestors of the stall (a, b, d, f) re-send ELECTION to the child
	// they wait for, and the nodes that answered (c, e, g, h, i, j) re-send
	// their ECHO, since they have no result yet. Only h's duplicate
	// matters: it gets through now. h also answers f's duplicate ELECTION
	// with its ECHO again; the other duplicates are ignored. The election
	// then finishes as it would have: 4 echoes up from f to a and the 9
	// COORDINATORs.
	tnWantLog(t, "retransmissions", n.since(mark, 0)[:11], []string{
		"ELECTION a→b e=a/1", "ELECTION b→d e=a/1", "ECHO c→a leader=g e=a/1", "ELECTION d→f e=a/1",
		"ECHO e→c leader=g e=a/1", "ELECTION f→h e=a/1", "ECHO g→e leader=g e=a/1", "ECHO h→f leader=h e=a/1",
		"ECHO i→g leader=i e=a/1", "ECHO j→h leader=j e=a/1", "ECHO h→f leader=h e=a/1",
	})
	if got, want := n.total(), 33+11; got != want {
		t.Errorf("%d messages in all, want the 33 of a loss-free election plus 11 retransmissions = %d:\n%s",
			got, want, tnFmtLongs(n.since(mark, 0)))
	}
	// Nothing more is sent once everyone knows the result.
	mark = n.mark()
	n.run(200)
	if got := n.since(mark, 0); len(got) != 0 {
		t.Fatalf("messages after agreement:\n%s", tnFmtLongs(got))
	}
}

// TestEchoLostElectionRetransmitted: the ELECTION a→c is lost; c still joins
// through d (a's wave reaches it the other way round), so c answers a by its
// own ELECTION and nothing needs retransmitting. The ELECTION c→a is lost as
// well, so a waits for c; after the retransmission interval a re-sends, c
// (already in the election, a not its parent) answers with its ELECTION again,
// and the election completes.
func TestEchoLostElectionRetransmitted(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	n.dropNext(func(m Message) bool { return m.Type == MsgElection && m.From == "a" && m.To == "c" })
	n.dropNext(func(m Message) bool { return m.Type == MsgElection && m.From == "c" && m.To == "a" })
	n.campaign("a")
	n.settle()
	if n.lost != 2 {
		t.Fatalf("%d messages lost, want 2", n.lost)
	}
	if st := n.state("a"); st.Role != Candidate {
		t.Fatalf("a: %v, want still waiting for c", st.Role)
	}
	mark := n.mark()
	n.run(20)
	if !n.agree("h") {
		t.Fatalf("not everyone follows h after the retransmission: %s", n.states())
	}
	// a re-sends to its two silent neighbours (b's echo waits on the same
	// lost answer further down); c answers the duplicate.
	tnWantLog(t, "retransmission", n.since(mark, 0)[:2], []string{"ELECTION a→b e=a/1", "ELECTION a→c e=a/1"})
	if st := n.state("c"); st.Term != 1 {
		t.Errorf("c: term %d, want the first election", st.Term)
	}
}

// TestEchoLostCoordinatorRecovered: the COORDINATOR d→f is lost, so f (and
// its subtree) miss the result. f does not start a new election: after the
// retransmission interval it re-sends its ECHO, d answers with the result,
// and f passes it down.
func TestEchoLostCoordinatorRecovered(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	n.dropNext(func(m Message) bool { return m.Type == MsgCoordinator && m.To == "f" })
	n.campaign("a")
	n.settle()
	if st := n.state("f"); st.Role != Candidate || st.Leader != None {
		t.Fatalf("f: %v of %q, want waiting for the result", st.Role, st.Leader)
	}
	mark := n.mark()
	n.run(20)
	if !n.agree("h") {
		t.Fatalf("not everyone follows h: %s", n.states())
	}
	// f and the nodes below it (h, j) all re-send their echoes; only d,
	// which knows the result, answers, and f passes it down.
	tnWantLog(t, "recovery", n.since(mark, 0), []string{
		"ECHO f→d leader=h e=a/1", "ECHO h→f leader=h e=a/1", "ECHO j→h leader=j e=a/1",
		"COORDINATOR d→f leader=h e=a/1", "COORDINATOR f→h leader=h e=a/1", "COORDINATOR h→j leader=h e=a/1",
	})
	for _, id := range g.ids {
		if e := echoOf(n, id).Election(); e.Seq != 1 {
			t.Errorf("%s is in election %v, want no new election", id, e)
		}
	}
}

// TestEchoTimeoutRestarts: the source a crashes after its ELECTION wave went
// out, and the driver's failure detector is slow: for the first 80 ticks no
// send to a is reported UNREACHABLE, so the election can never complete. After
// the election timeout without progress the waiting nodes start new elections
// (Seq 2 and up). By then the driver reports a unreachable, which counts as
// a's empty answer, and h is elected among the live nodes. (Without any
// report no echo election can complete next to a dead neighbour: each
// timeout would start another one that waits for a too.)
func TestEchoTimeoutRestarts(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	n.campaign("a")
	n.round() // the wave leaves a
	n.crash("a")
	n.settle()
	if st := n.state("b"); st.Role != Candidate || st.Leader != None {
		t.Fatalf("b: %v of %q, want a stuck election", st.Role, st.Leader)
	}
	// Default election timeout: 4·len(Peers)·TimeoutTicks = 80 ticks
	// without progress; b and c re-send their echoes to a meanwhile.
	n.run(79)
	if n.count(MsgCoordinator) != 0 {
		t.Fatal("the first election completed without its source")
	}
	for _, id := range n.live() {
		if e := echoOf(n, id).Election(); e.Seq != 1 {
			t.Fatalf("%s is in election %v before the timeout, want the first one", id, e)
		}
	}
	n.unreachable = true // the failure detector catches up
	n.runUntil(80, "following h after a new election", func() bool { return n.agree("h") })
	for _, id := range n.live() {
		if st := n.state(id); st.Term < 2 {
			t.Errorf("%s: term %d, want a new election (Seq 2 or above)", id, st.Term)
		}
	}
}

// TestEchoRestartedNodeLearnsLeader: after h won (twice, Seq 2), h's
// neighbour i restarts with no memory and campaigns with Seq 1, below the
// finished election. Its neighbours no longer ignore it: they answer with the
// known result, and i, the source of a campaign that would otherwise be lost,
// runs it again above that election (Seq 3), so that everyone counts it.
func TestEchoRestartedNodeLearnsLeader(t *testing.T) {
	g := tenNodes()
	n := g.net(t)
	n.campaign("a")
	n.settle()
	n.campaign("a") // (a, 2): above the restarted node's (i, 1)
	n.settle()
	n.restart("i", tnMust[*Echo](t)(NewEcho(Config{ID: "i", Peers: g.ids, TimeoutTicks: 2}, g.adj["i"], g.caps["i"])))
	mark := n.mark()
	n.campaign("i")
	n.settle()
	if !n.agree("h") {
		t.Fatalf("not everyone follows h: %s", n.states())
	}
	for _, id := range g.ids {
		if st := n.state(id); st.Term != 3 {
			t.Errorf("%s: term %d, want i's rerun campaign (3)", id, st.Term)
		}
	}
	// i's first ELECTIONs, the two answers with the result, then one
	// loss-free election.
	if got, want := len(n.since(mark, 0)), 2+2+33; got != want {
		t.Errorf("%d messages, want %d:\n%s", got, want, tnFmtLongs(n.since(mark, 0)))
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
		{"bad retransmit", tnSplit("b"), []EchoOption{WithRetransmitTimeout(-1)}, ErrBadOption},
		{"retransmit not below timeout", tnSplit("b"), []EchoOption{WithElectionTimeout(40), WithRetransmitTimeout(40)}, ErrBadOption},
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
