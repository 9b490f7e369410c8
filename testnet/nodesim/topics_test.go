package nodesim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
)

// synthLatency is a matrix of n hosts drawn from the seed: five regions
// on a plane (the distance between two points as its RTT, a region 20 to
// 60 ms across, the regions up to 200 ms apart), plus each host's access
// delay (1 to 10 ms, on both ends of a path). Any n: a scale test need
// not wrap around the 490 PlanetLab hosts.
func synthLatency(t *testing.T, n int, seed uint64) *latency.Matrix {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x73796e7468))
	type region struct{ x, y, r float64 }
	regions := make([]region, 5)
	for k := range regions {
		regions[k] = region{rng.Float64() * 140, rng.Float64() * 140, 10 + rng.Float64()*20}
	}
	x, y, acc := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		g := regions[rng.IntN(len(regions))]
		a, d := rng.Float64()*2*math.Pi, g.r*math.Sqrt(rng.Float64())
		x[i], y[i], acc[i] = g.x+d*math.Cos(a), g.y+d*math.Sin(a), 1+rng.Float64()*9
	}
	var b strings.Builder
	for i := range n {
		for j := range n {
			if j > 0 {
				b.WriteByte('\t')
			}
			rtt := 0.0
			if i != j {
				rtt = math.Hypot(x[i]-x[j], y[i]-y[j]) + acc[i] + acc[j]
			}
			fmt.Fprintf(&b, "%.3f", rtt)
		}
		b.WriteByte('\n')
	}
	m, err := latency.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// topicLoad is what TestGeoTokenTopicsScale measures at one size.
type topicLoad struct {
	n, s                  int
	converged             time.Duration
	coverage              float64
	ordinary, superpeer   float64 // token reports received a second, by one ordinary peer, one superpeer
	ordSeconds, spSeconds float64
	quality               GeoQuality
}

// TestGeoTokenTopicsScale (issue 20: an ordinary peer's cost follows its
// cluster, not the swarm): the geometric strategy at 160 nodes with
// S = 10 and at 640 with S = 40 (16 nodes a cluster at both; a synthetic
// matrix, the same draw of regions), each converged and then measured for
// a virtual minute. Both converge as before (GeoConverged, every node
// covered since), and the token reports an ordinary peer receives a
// second (Stats.OrdinaryDeliveries over the ordinary peers' seconds: its
// cluster topic's, its superpeer's report and the claims of its
// cluster's token) are flat: at most 1.25 times at 640 nodes what they
// are at 160. A superpeer's grow with S, as they must (it hears every
// holder's on the backbone): at least twice.
func TestGeoTokenTopicsScale(t *testing.T) {
	skipShort(t)
	small := topicScaleRun(t, 160, 10, 1)
	large := topicScaleRun(t, 640, 40, 1)
	for _, l := range []topicLoad{small, large} {
		t.Logf("N = %d, S = %d: converged at %v, coverage %.3f; token reports a second: ordinary peer %.3f (%.0f node-seconds), superpeer %.3f (%.0f); placement %.2f x random",
			l.n, l.s, l.converged, l.coverage, l.ordinary, l.ordSeconds, l.superpeer, l.spSeconds, l.quality.Ratio())
	}
	if large.ordinary > 1.25*small.ordinary {
		t.Errorf("an ordinary peer receives %.3f token reports a second at %d nodes, %.3f at %d: %.2f times, want at most 1.25",
			large.ordinary, large.n, small.ordinary, small.n, large.ordinary/small.ordinary)
	}
	if large.superpeer < 2*small.superpeer {
		t.Errorf("a superpeer receives %.3f token reports a second with S = %d, %.3f with S = %d: want at least twice (it hears every holder)",
			large.superpeer, large.s, small.superpeer, small.s)
	}
}

// topicScaleRun is one size of TestGeoTokenTopicsScale.
func topicScaleRun(t *testing.T, n, tokens int, seed uint64) topicLoad {
	t.Helper()
	start := time.Now()
	s, err := New(Config{N: n, Seed: seed, Stagger: 5 * time.Second, Latency: synthLatency(t, n, seed), Jitter: 2 * time.Millisecond,
		Node: node.Config{Geometric: true, Geo: node.GeoConfig{Tokens: geometric.Config{Tokens: tokens}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := s.Observe(time.Second)
	if !s.RunUntil((*Sim).GeoConverged, time.Second, 3*time.Minute) {
		t.Fatalf("N = %d, S = %d: not converged after 3 virtual minutes: %+v", n, tokens, s.Take())
	}
	l := topicLoad{n: n, s: tokens, converged: s.Now()}
	s.RunFor(20 * time.Second) // the tokens settle
	from, before := s.Now(), s.Stats()
	s.Every(time.Second, func(s *Sim) {
		for i := range s.N() {
			if !s.Alive(i) {
				continue
			}
			if s.State(i).Role == node.RoleSuperpeer {
				l.spSeconds++
			} else {
				l.ordSeconds++
			}
		}
	})
	s.RunFor(time.Minute)
	after := s.Stats()
	l.ordinary = float64(after.OrdinaryDeliveries-before.OrdinaryDeliveries) / max(l.ordSeconds, 1)
	l.superpeer = float64(after.SuperpeerDeliveries-before.SuperpeerDeliveries) / max(l.spSeconds, 1)
	l.coverage = o.Coverage(l.converged, s.Now())
	l.quality = s.GeoQuality(20)
	t.Logf("N = %d, S = %d: %v of wall time; from %v: %+v; stats %+v", n, tokens, time.Since(start).Round(time.Millisecond), from, s.Take(), after)
	if !s.GeoConverged() {
		t.Errorf("N = %d, S = %d: not converged at %v: %+v", n, tokens, s.Now(), s.Take())
	}
	if l.coverage < 0.99 {
		t.Errorf("N = %d, S = %d: coverage %.3f since convergence, want at least 0.99", n, tokens, l.coverage)
	}
	return l
}

// TestGeoTokenTopicsHeard: on 40 PlanetLab hosts with S = 4, converged,
// an ordinary peer hears its cluster's topic alone (its superpeer's
// report, no other superpeer's), a superpeer every superpeer's. A member
// that joins the backbone hears the other holders only once they
// republish after its subscription reached the topic (GossipSub keeps no
// history): not at once, but within an announce interval and two gossip
// delays; and a member that leaves its cluster's topic no longer hears
// its superpeer.
func TestGeoTokenTopicsHeard(t *testing.T) {
	s := geoSim(t, 40, 4, 1, loadPlanetLab(t))
	if !s.RunUntil((*Sim).GeoConverged, time.Second, 2*time.Minute) {
		t.Fatalf("not converged after 2 virtual minutes: %+v", s.Take())
	}
	s.RunFor(time.Minute)
	supers := map[string]bool{}
	for i := range s.N() {
		if s.State(i).Role == node.RoleSuperpeer {
			supers[string(s.ID(i))] = true
		}
	}
	heardSupers := func(i int) (n int, heardOwn bool) {
		for _, tp := range s.geoFeed(i).Tokens {
			if supers[string(tp.Holder)] && tp.Holder != s.ID(i) {
				n++
				heardOwn = heardOwn || tp.Holder == s.State(i).Superpeer
			}
		}
		return n, heardOwn
	}
	member := -1
	for i := range s.N() {
		n, own := heardSupers(i)
		g := s.nodes[i].geo
		switch st := s.State(i); {
		case st.Role == node.RoleSuperpeer:
			if n != len(supers)-1 || !g.topics.All {
				t.Errorf("superpeer %d hears %d other superpeers (topics %+v), want %d", i, n, g.topics, len(supers)-1)
			}
		case g.own == nil:
			if g.topics.All || g.topics.Cluster < 0 || n != 1 || !own {
				t.Errorf("member %d hears %d superpeers (its own: %v) on topics %+v, want its own alone on its cluster's", i, n, own, g.topics)
			}
			if member < 0 {
				member = i
			}
		}
	}
	if member < 0 {
		t.Fatal("no ordinary member")
	}
	g := s.nodes[member].geo
	c := g.topics.Cluster
	s.setTopics(member, node.GeoTopics{All: true, Cluster: c})
	if n, _ := heardSupers(member); n != 1 {
		t.Errorf("member %d hears %d superpeers as it joins the backbone, want its own alone", member, n)
	}
	s.RunFor(s.cfg.Node.AnnounceInterval + 2*s.cfg.GossipDelay)
	if n, _ := heardSupers(member); n != len(supers) {
		t.Errorf("member %d hears %d superpeers an announce interval after it joined the backbone, want %d", member, n, len(supers))
	}
	s.setTopics(member, node.GeoTopics{All: false, Cluster: -1})
	if n, _ := heardSupers(member); n != 0 {
		t.Errorf("member %d hears %d superpeers on no topic", member, n)
	}
}
