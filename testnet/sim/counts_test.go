package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/latency"
)

// The message counts of one election, measured on the real machines of
// package classic in the simulator and set against the textbook formula, for
// n = 8, 64 and 512 processes. TestMessageCounts asserts that they agree
// exactly and prints the table; BenchmarkMessageCounts reports the same
// counts as metrics (msgs/election and expected-msgs/election).
//
// What is counted: every message a machine sends from the instant the
// election starts (the initiator's Campaign, in the same instant as the
// crash that causes it) until the live nodes agree on the expected leader
// and countSettle more virtual time has passed (so that a late election is
// counted too), as Record.MessagesByType reports them. Heartbeats are not part of
// an election: HEARTBEAT and HEARTBEAT_ACK are left out of the count (and
// reported separately in the log); Bully and Ring leaders send HEARTBEAT,
// Echo sends none. The MsgUnreachable notices the simulator injects for sends
// to a crashed node are not sends of a machine and are not counted either.
// Everything else (a spurious election, a duplicate COORDINATOR) would show
// up in the count and fail the test.
//
// Every case is loss-free with fixed latencies, so each formula is exact,
// not a bound: measured must equal expected.

// countSizes are the cluster sizes of the table.
var countSizes = []int{8, 64, 512}

// countSettle is how long a run goes on after agreement before the count is
// taken, so that stragglers (a late election, a duplicate announcement) are
// counted.
const countSettle = time.Second

// countLimit bounds the virtual time an election may take.
const countLimit = time.Minute

// countCase is one row family of the table: one algorithm, one scenario, run
// at every size of countSizes.
type countCase struct {
	algo, name string
	// formula is the expected count as a formula of n (and |E| for echo).
	formula string
	// quadratic marks Θ(n²) cases, whose n = 512 run -short skips.
	quadratic bool
	// prepare builds the network for n processes and brings it to the
	// instant before the election (a leader elected and crashed, where the
	// scenario needs one).
	prepare func(tb testing.TB, n int) *countElection
}

// countElection is a prepared network, ready to run one election.
type countElection struct {
	s *Sim
	// start begins the election (crash, then Campaign), at s.Now().
	start func(s *Sim)
	// want is the leader the election must end with.
	want classic.ID
	// expected is the theoretical message count; detail says how it was
	// evaluated (for echo, with the graph's |E|).
	expected int
	detail   string
}

// countResult is what one election used.
type countResult struct {
	measured, expected int
	byType             map[classic.MsgType]int // election messages only
	heartbeats         int                     // left out of measured
	elect              time.Duration           // virtual time from start to agreement
	detail             string
}

// run starts the election, runs it to agreement plus countSettle, checks the
// leader and counts the messages.
func (e *countElection) run(tb testing.TB) countResult {
	tb.Helper()
	s := e.s
	t0 := s.Now()
	e.start(s)
	if !s.RunUntil(AllAgree, t0+countLimit) {
		tb.Fatalf("no agreement within %v", countLimit)
	}
	elect := s.Now() - t0
	s.RunFor(countSettle)
	if l, err := s.Record().FinalLeader(e.want, nil); err != nil {
		tb.Fatalf("FinalLeader = %q, %v; want %q", l, err, e.want)
	}
	r := countResult{expected: e.expected, elect: elect, detail: e.detail, byType: map[classic.MsgType]int{}}
	for typ, k := range s.Record().MessagesByType(t0, s.Now()+1) {
		switch typ {
		case classic.MsgHeartbeat, classic.MsgHeartbeatAck:
			r.heartbeats += k
		default:
			r.byType[typ] += k
			r.measured += k
		}
	}
	return r
}

// countCases are the scenarios of the table. The expected counts come from
// the formulas of formulas.go (BullyMessages and the others), which the
// election suite of package bench shares; the walkthroughs below derive them.
//
// Bully (see classic/bully.go and TestBullyMessageCounts): processes 0..n-1
// ranked by ID; n-1 led and has just crashed, and one process notices. With
// the lowest process 0 initiating, every live process i ends up campaigning
// once (0 on its own, the others on the first ELECTION from below) and sends
// ELECTION to the n-1-i processes above it; each ELECTION to a live process
// is answered by one OK; the winner n-2 announces to everyone else:
//
//	ELECTION    = Σ_{i=0}^{n-2} (n-1-i) = n(n-1)/2
//	OK          = n(n-1)/2 − (n-1)     = (n-1)(n-2)/2   (no OK from the dead n-1)
//	COORDINATOR = n-1                                     (to every member, the dead n-1 included)
//	total       = n(n-1)                                  Θ(n²)
//
// With the second highest n-2 initiating: 1 ELECTION (to the dead n-1, which
// never answers), no OK, n-1 COORDINATOR: n in all.
//
// Ring (see classic/ring.go and TestRingMessageCounts): processes in ring
// order 0..n-1, IDs increasing along the ring, nobody down, one initiator.
// ID-list: the ELECTION goes once round (n hops, the last back to the
// initiator) and the COORDINATOR once round (n hops, the last dropped by the
// initiator): 2n, whoever initiates.
//
// Max-only (Chang-Roberts): the ELECTION carries the highest ID seen; it
// travels d hops from the initiator to the highest process (each process on
// the way replaces the max with its own higher ID), then a full turn of n
// hops back to it; then n COORDINATOR: n+d+n. The highest initiating has
// d = 0: 2n. The lowest (process 0, the successor of the highest) has
// d = n-1: 3n-1. That is the issue's "about 2n per initiator (here at most
// 2n-1 ELECTION) plus the coordinator round (n)".
//
// Max-only with every process initiating at once (the Chang-Roberts bounds,
// ELECTION only; plus n COORDINATOR): with IDs increasing along the ring
// every message but the highest dies at the next hop (n initial sends, then
// the highest's n-1 further hops): 2n-1 ELECTION, 3n-1 in all. With IDs
// decreasing along the ring, the message of the k-th lowest (k = 0..n-2)
// travels k+1 hops before the highest swallows it, and the highest's goes n
// hops: Σ_{k=0}^{n-2}(k+1) + n = n(n+1)/2 ELECTION, n(n+1)/2 + n in all.
// This needs the messages of higher IDs to arrive later at each process,
// which a constant latency guarantees (they come from farther away).
//
// Echo election (see classic/echo.go and TestEcho10k): on a connected graph
// of |E| edges every edge carries exactly two messages (ELECTION then ECHO
// on a spanning-tree edge, an ELECTION each way on the others), and the
// winner's COORDINATOR goes down the n-1 tree edges: 2·|E| + n − 1.
func countCases() []countCase {
	return []countCase{
		{"Bully", "lowest initiates, highest crashed", "n(n-1)", true, func(tb testing.TB, n int) *countElection {
			return bullyCount(tb, n, 0, BullyMessages(n, 0))
		}},
		{"Bully", "second highest initiates, highest crashed", "n", false, func(tb testing.TB, n int) *countElection {
			return bullyCount(tb, n, n-2, BullyMessages(n, n-2))
		}},
		{"Ring", "ID list, lowest initiates", "2n", false, func(tb testing.TB, n int) *countElection {
			return ringCount(tb, n, false, false, []int{0}, RingMessages(n))
		}},
		{"RingMax", "lowest initiates", "3n-1", false, func(tb testing.TB, n int) *countElection {
			return ringCount(tb, n, true, false, []int{0}, RingMaxMessages(n, n-1))
		}},
		{"RingMax", "highest initiates", "2n", false, func(tb testing.TB, n int) *countElection {
			return ringCount(tb, n, true, false, []int{n - 1}, RingMaxMessages(n, 0))
		}},
		{"RingMax", "all initiate, IDs increasing", "3n-1", false, func(tb testing.TB, n int) *countElection {
			return ringCount(tb, n, true, false, allNodes(n), RingMaxAllMessages(n, false))
		}},
		{"RingMax", "all initiate, IDs decreasing", "n(n+1)/2+n", true, func(tb testing.TB, n int) *countElection {
			return ringCount(tb, n, true, true, allNodes(n), RingMaxAllMessages(n, true))
		}},
		{"Echo", "random graph, avg degree ~8, node 0 initiates", "2|E|+n-1", false, echoCount},
	}
}

func allNodes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Bully timing. One-way latency 50 ms, ticks of 10 ms. The expected winner
// n-2 has TimeoutTicks 20 (200 ms, twice a round trip): it wins after 20
// ticks without an OK from the dead n-1, by which time every ELECTION of the
// lower processes (sent 50 ms after the start, arriving at 100 ms) has
// reached it. Every other process has TimeoutTicks 1000 (10 s): a slow
// failure detector, so that only the initiator notices the crash, as the
// textbook count assumes. With one timeout for all, every follower would
// time out on the missing heartbeats about when n-2 does and campaign too
// (that case, n(n-1) again, is TestBullyEveryoneNoticesTheCrash). The
// timeouts change only when a process acts, not what it sends.
const (
	bullyRTT       = 100 * time.Millisecond
	bullyFastTicks = 20
	bullySlowTicks = 1000
)

// bullyCount prepares n bully processes: n-1 is elected, heartbeats for a
// while, and the election starts with its crash and initiator's Campaign.
func bullyCount(tb testing.TB, n, initiator, expected int) *countElection {
	tb.Helper()
	all := ids(n)
	top, second := n-1, n-2
	s, err := New(Config{
		IDs: all, Latency: latency.Constant(n, bullyRTT), Seed: 1,
		Factory: func(i int, id classic.ID, _ bool) classic.Machine {
			ticks := bullySlowTicks
			if i == second {
				ticks = bullyFastTicks
			}
			m, err := classic.NewBully(classic.Config{ID: id, Peers: all, TimeoutTicks: ticks})
			if err != nil {
				tb.Fatal(err)
			}
			return m
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	s.Campaign(top)
	if !s.RunUntil(AllAgree, time.Second) {
		tb.Fatalf("bully n=%d: %s not elected before the crash", n, all[top])
	}
	s.RunFor(100 * time.Millisecond) // a few heartbeats
	return &countElection{
		s:     s,
		start: func(s *Sim) { s.Crash(top); s.Campaign(initiator) },
		want:  all[second], expected: expected,
		detail: fmt.Sprintf("%d", expected),
	}
}

// Ring timing. One-way latency 1 ms, so that a turn of 512 hops takes half a
// second; TimeoutTicks 1000 (10 s of 10 ms ticks) exceeds the two turns the
// ring needs (3n-1 hops at most, 1.5 s at n = 512) before anyone gives up.
// The leader heartbeats once a second (HeartbeatTicks 100) rather than every
// 2 ticks: heartbeats are not counted, and an ID-list heartbeat carries the
// whole ring, so at n = 512 the default rate made the run six times slower.
const (
	ringRTT            = 2 * time.Millisecond
	ringTicks          = 1000
	ringHeartbeatTicks = 100
)

// ringCount prepares a fresh ring of n processes (no leader yet); the
// election starts with Campaign at each initiator at once. The ring order is
// IDs increasing, or decreasing when decreasing is set; initiators are node
// indices (node i has the i-th ID of the ring order).
func ringCount(tb testing.TB, n int, maxOnly, decreasing bool, initiators []int, expected int) *countElection {
	tb.Helper()
	order := ids(n)
	if decreasing {
		slices.Reverse(order)
	}
	s, err := New(Config{
		IDs: order, Latency: latency.Constant(n, ringRTT), Seed: 1,
		Factory: func(i int, id classic.ID, _ bool) classic.Machine {
			cfg := classic.Config{ID: id, Peers: order, TimeoutTicks: ringTicks, HeartbeatTicks: ringHeartbeatTicks}
			var m *classic.Ring
			var err error
			if maxOnly {
				m, err = classic.NewRingMax(cfg)
			} else {
				m, err = classic.NewRing(cfg)
			}
			if err != nil {
				tb.Fatal(err)
			}
			return m
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return &countElection{
		s: s,
		start: func(s *Sim) {
			for _, i := range initiators {
				s.Campaign(i)
			}
		},
		want: slices.Max(order), expected: expected,
		detail: fmt.Sprintf("%d", expected),
	}
}

// echoCount prepares the echo network of TestEcho10k (echoNet: sparseGraph,
// a ring plus three random links per node, average degree about 8, less at n
// = 8 where a node has at most 7 neighbours; PlanetLab latencies; seeded
// capacities) for n nodes. Its election timeout is so long that no
// retransmission fires in a loss-free run.
func echoCount(tb testing.TB, n int) *countElection {
	tb.Helper()
	s, want, edges := echoNet(tb, n, uint64(n))
	expected := EchoMessages(n, edges)
	return &countElection{
		s:     s,
		start: func(s *Sim) { s.Campaign(0) },
		want:  want, expected: expected,
		detail: fmt.Sprintf("2·%d+%d = %d (avg degree %.1f)", edges, n-1, expected, 2*float64(edges)/float64(n)),
	}
}

// countTypes formats a by-type count in message-type order.
func countTypes(by map[classic.MsgType]int) string {
	var parts []string
	for _, typ := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%v %d", typ, by[typ]))
	}
	return strings.Join(parts, ", ")
}

// TestMessageCounts runs every case of countCases at n = 8, 64 and 512,
// asserts measured == expected, and logs the table. Under -short the two
// Θ(n²) cases skip n = 512 (262,000 and 132,000 messages, about 0.6 s each).
func TestMessageCounts(t *testing.T) {
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "algorithm\tcase\tn\tmeasured\texpected\tratio\tformula\tby type\theartbeats (not counted)\ttime to elect (virtual)")
	for _, c := range countCases() {
		for _, n := range countSizes {
			t.Run(fmt.Sprintf("%s/%s/n=%d", c.algo, c.name, n), func(t *testing.T) {
				if testing.Short() && c.quadratic && n > 64 {
					t.Skip("-short: Θ(n²) messages at n = 512")
				}
				r := c.prepare(t, n).run(t)
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.3f\t%s = %s\t%s\t%d\t%v\n",
					c.algo, c.name, n, r.measured, r.expected, float64(r.measured)/float64(r.expected),
					c.formula, r.detail, countTypes(r.byType), r.heartbeats, r.elect)
				if r.measured != r.expected {
					t.Errorf("measured %d messages (%s), expected %s = %s",
						r.measured, countTypes(r.byType), c.formula, r.detail)
				}
			})
		}
	}
	tw.Flush()
	t.Log("message counts of one election, measured against theory:\n" + table.String())
}

// BenchmarkMessageCounts runs one election per iteration for every case and
// size; ns/op is the simulator's cost of the election (the preparation,
// building the network and electing the first bully leader, is not timed;
// the countSettle second after agreement is). It reports the measured
// messages per election and the expected count.
func BenchmarkMessageCounts(b *testing.B) {
	for _, c := range countCases() {
		for _, n := range countSizes {
			name := strings.ReplaceAll(fmt.Sprintf("%s/%s/n=%d", c.algo, c.name, n), " ", "_")
			b.Run(name, func(b *testing.B) {
				var r countResult
				for b.Loop() {
					b.StopTimer()
					e := c.prepare(b, n)
					b.StartTimer()
					r = e.run(b)
				}
				b.ReportMetric(float64(r.measured), "msgs/election")
				b.ReportMetric(float64(r.expected), "expected-msgs/election")
			})
		}
	}
}
