package nodesim

import (
	"fmt"
	"testing"
	"time"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
)

// The geometric strategy's node machines on the PlanetLab matrix.

const planetLab = "../../testdata/planetlab490/planetlab490_median18_ms.txt"

func loadPlanetLab(t *testing.T) *latency.Matrix {
	t.Helper()
	m, err := latency.Load(planetLab)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// geoSim is n geometric node machines with s tokens on the first n
// PlanetLab hosts, the live node's settings (token rounds and pings every
// second, announcements every 5 s).
func geoSim(t *testing.T, n, s int, seed uint64, m *latency.Matrix) *Sim {
	t.Helper()
	return geoSimElection(t, n, s, seed, m, "")
}

// geoSimElection is geoSim with the clusters running the named election.
func geoSimElection(t *testing.T, n, s int, seed uint64, m *latency.Matrix, election string) *Sim {
	t.Helper()
	sim, err := New(Config{N: n, Seed: seed, Stagger: 5 * time.Second, Latency: m.Sub(firstN(n)), Jitter: 2 * time.Millisecond,
		Node: node.Config{Geometric: true, Election: election, Geo: node.GeoConfig{Tokens: geometric.Config{Tokens: s}}}})
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

func firstN(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestGeoConverges: 100 geometric machines with S = 10 on PlanetLab, over
// three seeds. Every node is attached to a live superpeer and ten
// superpeers hold distinct tokens within two virtual minutes, and still
// four minutes in, when the tokens have cooled (the live dynamics: four
// passes at full heat, then the margin doubles with every pass); the
// placement is then better than random placement of ten superpeers
// (matrix RTTs from the ordinary nodes to their superpeer, against the
// mean of 100 random placements with ideal attachment, in the same run):
// on the mean of the seeds by 5 % at least (0.74 measured: 0.79, 0.71 and
// 0.74 by seed, with the coordinates in the ping answers; 0.65, 0.73 and
// 0.73 when a node sampled only the coordinates its cluster told it, with
// the tokens placed from agreed lists; 0.75, 0.64 and 0.86 when every peer
// heard every coordinate and placed by the membership view), and on no seed by more
// than 5 % worse. With the coordinates alone (GeoConfig.SwapCandidates <
// 0), as measured before issue 20, 0.80 on the mean
// (0.93, 0.81 and 0.66 by seed): the search on measured RTTs inside
// clusters (geoswap.go) is the difference.
func TestGeoConverges(t *testing.T) {
	skipShort(t)
	t.Parallel()
	m := loadPlanetLab(t)
	seeds := []uint64{1, 2, 3}
	ratios := make([]float64, len(seeds))
	t.Run("seeds", func(t *testing.T) {
		for k, seed := range seeds {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				ratios[k] = geoConverges(t, m, seed)
			})
		}
	})
	if t.Failed() {
		return
	}
	var sum float64
	for _, r := range ratios {
		sum += r
	}
	if mean := sum / float64(len(seeds)); mean > 0.95 {
		t.Errorf("mean RTT to the superpeer is %.2f of random placement's on the mean of the seeds, want at most 0.95", mean)
	} else {
		t.Logf("mean RTT to the superpeer: %.2f of random placement's on the mean of the seeds %v", mean, seeds)
	}
}

// geoConverges is one seed of TestGeoConverges; it returns the ratio.
func geoConverges(t *testing.T, m *latency.Matrix, seed uint64) float64 {
	s := geoSim(t, 100, 10, seed, m)
	o := s.Observe(time.Second)
	if !s.RunUntil((*Sim).GeoConverged, time.Second, 2*time.Minute) {
		t.Fatalf("not converged after 2 virtual minutes: %+v", s.Take())
	}
	at := s.Now()
	s.Run(4 * time.Minute)
	q := s.GeoQuality(100)
	t.Logf("seed %d: converged at %v; at %v: %+v, RTT to the superpeer %v, with ideal attachment %v, random placement %v: ratio %.2f (ideal attachment %.2f); coverage since convergence %.3f, split brain %v; stats %+v",
		seed, at, s.Now(), s.Take(), q.Mean, q.Ideal, q.Random, q.Ratio(), q.IdealRatio(), o.Coverage(at, s.Now()), o.SplitTime(0, s.Now()), s.Stats())
	if !s.GeoConverged() {
		t.Errorf("not converged at %v: %+v", s.Now(), s.Take())
	}
	if o.SplitTime(0, s.Now()) > 0 {
		t.Errorf("two superpeers held one token for %v", o.SplitTime(0, s.Now()))
	}
	if r := q.Ratio(); r <= 0 || r > 1.05 {
		t.Errorf("mean RTT to the superpeer %v is %.2f of random placement's %v, want at most 1.05", q.Mean, r, q.Random)
	}
	return q.Ratio()
}

// TestGeoSuperpeerCrashRepaired: after convergence the superpeer with the
// most members crashes.
//
// Without an election its members attach to other superpeers (their
// requests to it time out, and they give it up one attachment TTL after
// its last yes), and its token is re-homed and its new holder promoted (a
// missing token waits for its report to expire, three token intervals
// and the postponements, then the dwell): every live node covered again
// within 45 token intervals, the token held by a live superpeer and S
// superpeers again within 90.
//
// With an election (bully) the cluster elects a successor, which takes
// the token over and is promoted at once (geoMachine.election): the token
// is held by a live superpeer again within 10 token intervals; the
// members covered within the same 45 (those whose election named another
// leader still wait for the attachment TTL).
func TestGeoSuperpeerCrashRepaired(t *testing.T) {
	skipShort(t)
	t.Parallel()
	m := loadPlanetLab(t)
	for _, c := range []struct {
		election     string
		tokenWithin  int
		repairWithin int
	}{{"", 90, 90}, {"bully", 10, 90}} {
		t.Run("election="+c.election, func(t *testing.T) {
			t.Parallel()
			geoCrashRepaired(t, geoSimElection(t, 100, 10, 4, m, c.election), c.tokenWithin, c.repairWithin)
		})
	}
}

func geoCrashRepaired(t *testing.T, s *Sim, tokenWithin, repairWithin int) {
	s.Run(150 * time.Second)
	// A hand-over of the search on measured RTTs may be under way.
	if !s.RunUntil((*Sim).GeoConverged, time.Second, time.Minute) {
		t.Fatalf("not converged at %v: %+v", s.Now(), s.Take())
	}
	victim, members := largestGeoCluster(t, s)
	token := s.GeoState(victim).Token
	o := s.Observe(100 * time.Millisecond)
	crash := s.Now()
	o.CrashSuperpeer(s, victim)
	interval := s.cfg.Node.Geo.TokenInterval
	held := func(s *Sim) bool {
		for i := range s.N() {
			if st := s.GeoState(i); s.Alive(i) && st != nil && st.Role == node.RoleSuperpeer && st.Token == token {
				return true
			}
		}
		return false
	}
	var heldAfter time.Duration
	if !s.RunUntil(held, 100*time.Millisecond, time.Duration(tokenWithin)*interval) {
		t.Errorf("token %d not held by a live superpeer %v after the crash: %+v", token, s.Now()-crash, s.Take())
	}
	heldAfter = s.Now() - crash
	repaired := s.RunUntil(func(s *Sim) bool { return held(s) && s.GeoConverged() }, 100*time.Millisecond,
		crash+time.Duration(repairWithin)*interval-s.Now())
	o.Finish()
	t.Logf("crashed n%d (token %d, cluster of %d): members covered again after %v, token held by a live superpeer after %v, converged after %v (%v); token interval %v; stats %+v",
		victim, token, members, o.Failovers, heldAfter, s.Now()-crash, repaired, interval, s.Stats())
	if o.Unrepaired > 0 || len(o.Failovers) != 1 || o.Failovers[0] > 45*interval {
		t.Errorf("members covered again after %v (%d unrepaired), want within %v", o.Failovers, o.Unrepaired, 45*interval)
	}
	if !repaired {
		t.Errorf("not converged %v after the crash: %+v", time.Duration(repairWithin)*interval, s.Take())
	}
}

// TestGeoGracefulStopHandsTokenOn: a superpeer that stops gracefully
// (GeoLeave) passes its token on at once, to its nearest eligible
// neighbour, which is promoted after the dwell: the token is held by a
// live node within one token interval and by a live superpeer within the
// dwell and two more; the members are covered again within 45 token
// intervals.
func TestGeoGracefulStopHandsTokenOn(t *testing.T) {
	skipShort(t)
	t.Parallel()
	m := loadPlanetLab(t)
	s := geoSim(t, 100, 10, 4, m)
	s.Run(150 * time.Second)
	victim, members := largestGeoCluster(t, s)
	token := s.GeoState(victim).Token
	var followers []int
	for j := range s.N() {
		if j != victim && s.Alive(j) && s.State(j).Superpeer == s.ID(victim) {
			followers = append(followers, j)
		}
	}
	holder := func(super bool) func(s *Sim) bool {
		return func(s *Sim) bool {
			for i := range s.N() {
				if st := s.GeoState(i); s.Alive(i) && st != nil && st.Token == token && (!super || st.Role == node.RoleSuperpeer) {
					return true
				}
			}
			return false
		}
	}
	covered := func(s *Sim) bool {
		for _, j := range followers {
			if !s.Covered(j) {
				return false
			}
		}
		return true
	}
	interval, dwell := s.cfg.Node.Geo.TokenInterval, s.cfg.Node.Geo.Tokens.Dwell
	stop := s.Now()
	s.Stop(victim)
	if !s.RunUntil(holder(false), 10*time.Millisecond, interval) {
		t.Errorf("token %d held by no live node %v after the stop", token, s.Now()-stop)
	}
	handed := s.Now() - stop
	if !s.RunUntil(holder(true), 100*time.Millisecond, stop+dwell+2*interval-s.Now()) {
		t.Errorf("token %d held by no live superpeer %v after the stop", token, s.Now()-stop)
	}
	promoted := s.Now() - stop
	if !s.RunUntil(covered, 100*time.Millisecond, stop+45*interval-s.Now()) {
		t.Errorf("the %d members not all covered %v after the stop", len(followers), s.Now()-stop)
	}
	t.Logf("stopped n%d (token %d, cluster of %d): token handed on after %v, held by a superpeer after %v, members covered after %v",
		victim, token, members, handed, promoted, s.Now()-stop)
}

// TestGeoSeedReplays: a seed replays a geometric run exactly (with an
// election, jitter and loss), crash, partition, heal and a join included;
// another seed gives another run.
func TestGeoSeedReplays(t *testing.T) {
	t.Parallel()
	m := loadPlanetLab(t)
	run := func(seed uint64) (uint64, int, Stats) {
		s, err := New(Config{N: 40, Seed: seed, Stagger: 5 * time.Second, Latency: m.Sub(firstN(40)), Jitter: 2 * time.Millisecond,
			Loss: 0.02, Node: node.Config{Geometric: true, Election: "bully", Geo: node.GeoConfig{Tokens: geometric.Config{Tokens: 4}}}})
		if err != nil {
			t.Fatal(err)
		}
		s.Record = true
		s.Run(80 * time.Second)
		for i := range s.N() {
			if st := s.GeoState(i); st != nil && st.Role == node.RoleSuperpeer {
				s.Crash(i)
				break
			}
		}
		s.After(10*time.Second, func(s *Sim) { s.Partition(firstN(10)) })
		s.After(30*time.Second, func(s *Sim) { s.Heal() })
		s.After(35*time.Second, func(s *Sim) { s.Add() })
		s.RunFor(60 * time.Second)
		return s.Trace(), len(s.Changes), s.Stats()
	}
	a, na, sa := run(7)
	b, nb, sb := run(7)
	if a != b || na != nb || sa != sb {
		t.Fatalf("seed 7 twice: traces %x (%d changes, %+v) and %x (%d changes, %+v)", a, na, sa, b, nb, sb)
	}
	if c, _, _ := run(8); c == a {
		t.Fatalf("seeds 7 and 8 gave the same trace %x: the trace does not depend on the run", a)
	}
	if na < 40 || sa.GeoPasses == 0 || sa.GeoAttaches == 0 {
		t.Fatalf("%d state changes, stats %+v: the run did not run", na, sa)
	}
	t.Logf("%d state changes, stats %+v", na, sa)
}

// TestGeoUnattachedLeadsNoStaleElection: a node that is attached to no
// superpeer and holds no token is in no cluster, and runs no election
// (geoMachine.election drops it: elector.leave). It used to keep the
// election of the last cluster it was in, and could lead it for ever: an
// ex-holder ranks itself first in its old cluster, and it heartbeat the old
// members, which had moved on. With room for only 60 of 100 nodes (S = 10,
// capacity 5) and bully, 23 of the unattached ordinary nodes led an
// election four minutes in (12 of them former superpeers), some 220
// heartbeats a second in all; this test fails on that rule. With room for
// everyone (capacity 64) every node attaches, and no ordinary node sends
// heartbeats four minutes in.
func TestGeoUnattachedLeadsNoStaleElection(t *testing.T) {
	skipShort(t)
	m := loadPlanetLab(t)
	s, err := New(Config{N: 100, Seed: 4, Stagger: 5 * time.Second, Latency: m.Sub(firstN(100)), Jitter: 2 * time.Millisecond,
		Node: node.Config{Geometric: true, Election: "bully", Geo: node.GeoConfig{Tokens: geometric.Config{Tokens: 10, Capacity: 5}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Run(4 * time.Minute)
	var stale []int
	unattached := 0
	for i := range s.N() {
		st := s.GeoState(i)
		if st == nil || st.Role == node.RoleSuperpeer || st.Superpeer != "" {
			continue
		}
		unattached++
		if e := s.Machine(i).Election(); e.Leader == s.ID(i) {
			stale = append(stale, i)
		}
	}
	if unattached == 0 {
		t.Fatalf("every node attached: the test tests nothing")
	}
	if len(stale) > 0 {
		t.Errorf("%d of %d unattached ordinary nodes lead an election (a cluster they are not in): %v", len(stale), unattached, stale)
	}
}

// skipShort skips a long geometric run under -short: make test runs the
// package in full without -race, and its -race -short pass is for the
// packages with goroutines (nodesim has none; under the race detector
// these runs took 160 s of CI time).
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("minutes of virtual time on 100 geometric node machines; the run without -short covers it")
	}
}

// largestGeoCluster returns the superpeer with the most members, and
// their number; it fails the test when that superpeer has none.
func largestGeoCluster(t *testing.T, s *Sim) (int, int) {
	t.Helper()
	victim, members := -1, 0
	for i := range s.N() {
		if st := s.GeoState(i); st != nil && st.Role == node.RoleSuperpeer && len(st.Members) > members {
			victim, members = i, len(st.Members)
		}
	}
	if members < 2 {
		t.Fatalf("the largest cluster's superpeer has %d members: the test tests nothing", members)
	}
	return victim, members
}

// TestGeoCrashTakeoverOutlivedConnection: a crashed superpeer whose
// connections outlive it (ConnLoss 30 s, a QUIC connection's idle timeout
// after a SIGKILL, as with peer testnet --procs; issue 21) is replaced by
// its cluster's election, and its members are covered again, each within
// three detection timeouts and a token interval, at seeds 0 to 7: the
// members probe the holder they are still connected to as soon as their
// election runs, the elected one takes the token over when no answer came
// within a detection timeout, and every member whose election no longer
// names the holder follows a mate's takeover (geoattach.go). Before, the
// takeover waited for the connection to drop, and the members for their
// request to the lost holder to time out; and before the members
// followed any mate's takeover, the members of a leader that had itself
// followed the token on elected a chain of leaders: 27 s (13.5 detection
// timeouts) at seed 6. Measured (token held, members covered, in
// detection timeouts T): 1.1 to 2.5 T and 1.7 to 3.2 T, against 2.3 to
// 3.1 T and 2.8 to 13.6 T before.
func TestGeoCrashTakeoverOutlivedConnection(t *testing.T) {
	skipShort(t)
	m := loadPlanetLab(t)
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			geoCrashTakeoverOutlived(t, m, seed)
		})
	}
}

// geoCrashSim is the setting of the crash tests: 100 machines on PlanetLab
// with S = 10, bully, jitter, connections outliving a crash by connLoss,
// run for 150 virtual s and then until converged.
func geoCrashSim(t *testing.T, m *latency.Matrix, seed uint64, connLoss time.Duration) *Sim {
	t.Helper()
	s, err := New(Config{N: 100, Seed: seed, Stagger: 5 * time.Second, Latency: m.Sub(firstN(100)), Jitter: 2 * time.Millisecond,
		ConnLoss: connLoss,
		Node:     node.Config{Geometric: true, Election: "bully", Geo: node.GeoConfig{Tokens: geometric.Config{Tokens: 10}}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Run(150 * time.Second)
	// A hand-over of the search on measured RTTs may be under way: its
	// members attach to the new superpeer within a few token intervals.
	if !s.RunUntil((*Sim).GeoConverged, time.Second, time.Minute) {
		t.Fatalf("not converged at %v: %+v", s.Now(), s.Take())
	}
	return s
}

func geoCrashTakeoverOutlived(t *testing.T, m *latency.Matrix, seed uint64) {
	const connLoss = 30 * time.Second
	s := geoCrashSim(t, m, seed, connLoss)
	victim, members := largestGeoCluster(t, s)
	token := s.GeoState(victim).Token
	det := s.Machine(victim).Detection()
	o := s.Observe(100 * time.Millisecond)
	crash := s.Now()
	o.CrashSuperpeer(s, victim)
	held := func(s *Sim) bool {
		for i := range s.N() {
			if st := s.GeoState(i); s.Alive(i) && st != nil && st.Role == node.RoleSuperpeer && st.Token == token {
				return true
			}
		}
		return false
	}
	within := 3*det + s.cfg.Node.Geo.TokenInterval
	ok := s.RunUntil(held, 100*time.Millisecond, connLoss)
	heldAfter := s.Now() - crash
	s.RunFor(connLoss)
	o.Finish()
	t.Logf("seed %d: crashed n%d (token %d, cluster of %d): token held by a live superpeer after %v (%.2f T), members covered again after %v; detection timeout T %v",
		seed, victim, token, members, heldAfter, float64(heldAfter)/float64(det), o.Failovers, det)
	if !ok || heldAfter > within {
		t.Errorf("token %d held by a live superpeer %v after the crash (found: %v), want within %v (3 detection timeouts and a token interval)",
			token, heldAfter, ok, within)
	}
	if o.Unrepaired > 0 || len(o.Failovers) != 1 || o.Failovers[0] > within {
		t.Errorf("members covered again after %v (%d unrepaired), want within %v (3 detection timeouts and a token interval)", o.Failovers, o.Unrepaired, within)
	} else {
		t.Logf("seed %d: members covered again after %.2f T", seed, float64(o.Failovers[0])/float64(det))
	}
}
