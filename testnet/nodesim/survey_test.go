package nodesim

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// electionSurvey runs TestElectionSurvey, a report (make bench).
var (
	electionSurvey      = flag.Bool("electionsurvey", false, "TestElectionSurvey: run the survey of every election algorithm (make bench)")
	electionSurveySeeds = flag.Int("electionsurvey.seeds", 2, "TestElectionSurvey: seeds 1 to this many")
)

// TestElectionSurvey reports how each election algorithm, with and
// without Quorum, runs in the node machine: 64 nodes, S = 8, starts
// spread over 5 s, seeds 1 and 2 (-electionsurvey.seeds). It is a report, run by make bench
// (-args -electionsurvey), not a test: it exists to find the faults that
// the tests, most of which run bully, do not. Per run: when the network
// first settled (every live node covered and no cluster with two
// claimers; none within 4 virtual minutes is "-"); then, as faults, three
// superpeers crashed 20 s apart, the superpeer of the largest cluster cut
// off and back four times (5 s each), a minute of quiet and two minutes
// of churn at 10 % a minute, and 30 s more: the coverage over the faults,
// the most orphans in a sample, the slowest failover in detection
// timeouts and how many were never repaired, the time some cluster had
// two claimers, the longest disagreement of a node's lookup and its
// election, the flapping superpeer's wins, and whether the network was
// settled at the end.
func TestElectionSurvey(t *testing.T) {
	if !*electionSurvey {
		t.Skip("a report: -args -electionsurvey (make bench)")
	}
	if *electionSurveySeeds < 1 {
		t.Fatalf("-electionsurvey.seeds %d: want 1 or more", *electionSurveySeeds)
	}
	const n = 64
	served := func(s *Sim) bool { x := s.Take(); return x.Live > 0 && x.Covered == x.Live && x.Split == 0 }
	started := func(s *Sim) bool { return s.Take().Live == n && served(s) }
	fmt.Println("| election | seed | settled at s | coverage | max orphans | slowest failover T | unrepaired | split s | disagree s | flapper wins | settled at the end |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, alg := range classic.Algorithms() {
		for _, quorum := range []bool{false, true} {
			for seed := uint64(1); seed <= uint64(*electionSurveySeeds); seed++ {
				s, err := New(Config{N: n, Seed: seed, Stagger: 5 * time.Second,
					Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: alg, Quorum: quorum}})
				if err != nil {
					t.Fatal(err)
				}
				at := "-"
				if s.RunUntil(started, 100*time.Millisecond, 4*time.Minute) {
					at = fmt.Sprintf("%.1f", s.Now().Seconds())
				}
				o := s.Observe(100 * time.Millisecond)
				from := s.Now()
				for range 3 {
					for i := range s.N() {
						if s.Alive(i) && s.State(i).Role == node.RoleSuperpeer {
							o.CrashSuperpeer(s, i)
							break
						}
					}
					s.RunFor(20 * time.Second)
				}
				wins, _ := flapLargest(s, 4)
				s.RunFor(time.Minute)
				s.Churn(0.1, 2*time.Minute, o)
				s.RunFor(30 * time.Second)
				o.Finish()
				to := s.Now()
				var timeout time.Duration // the detection timeout, T
				for i := range s.N() {
					if s.Alive(i) && s.Machine(i) != nil {
						timeout = max(timeout, s.Machine(i).Detection())
					}
				}
				slowest := 0.0
				for _, f := range o.Failovers {
					slowest = max(slowest, f.Seconds()/timeout.Seconds())
				}
				name := alg
				if quorum {
					name += " + quorum"
				}
				fmt.Printf("| %s | %d | %s | %.4f | %d | %.2f | %d | %.1f | %.1f | %d | %v |\n", name, seed, at,
					o.Coverage(from, to), o.MaxOrphans(from, to), slowest, o.Unrepaired, o.SplitTime(from, to).Seconds(), o.Disagree.Seconds(), wins, served(s))
			}
		}
	}
}

// flapLargest cuts the superpeer of the largest cluster off for 5 s and
// back for 5 s, times times, and returns how often its mates named it
// again after naming another (wins), and how often the superpeer they
// name changed.
func flapLargest(s *Sim, times int) (wins, changes int) {
	sizes := map[string][]int{}
	for i := range s.N() {
		if s.Alive(i) {
			sp := string(s.State(i).Superpeer)
			sizes[sp] = append(sizes[sp], i)
		}
	}
	flapper := ""
	for sp, ids := range sizes {
		if len(ids) > len(sizes[flapper]) || len(ids) == len(sizes[flapper]) && sp < flapper {
			flapper = sp
		}
	}
	x, _ := s.Index(peerID(flapper))
	mates := slices.DeleteFunc(sizes[flapper], func(i int) bool { return i == x })
	last, on := named(s, mates), true
	s.Every(100*time.Millisecond, func(s *Sim) {
		if now := named(s, mates); on && now != last {
			changes++
			if now == flapper {
				wins++
			}
			last = now
		}
	})
	for range times {
		s.Isolate(x)
		s.RunFor(5 * time.Second)
		s.Heal()
		s.RunFor(5 * time.Second)
	}
	on = false
	return wins, changes
}
