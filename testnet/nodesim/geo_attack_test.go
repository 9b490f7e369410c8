package nodesim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
)

// TestGeoForgedTokens (issue 19, finding 3): a Byzantine member of a
// geometric swarm (40 PlanetLab hosts, S = 4, converged and four minutes
// in, when the tokens have cooled) claims on the token topic, every second
// for a minute, every token one pass above its holder's, as a superpeer;
// and passes every token, one pass above its holder's, to a member of the
// holder's cluster. The swarm keeps its superpeers: at no sample (every
// 100 ms) is it without one, and on the mean of the samples it has as
// many as the same run without the attack (within a tenth of a
// superpeer: the attack changes the order of events, and tokens still
// move); the attacker holds no token and serves no one, every forged pass
// is refused, and the swarm is converged at the end. (The holders dropped
// their tokens at the first claim, and the swarm had no superpeer while
// the attacker stayed.)
func TestGeoForgedTokens(t *testing.T) {
	m := loadPlanetLab(t)
	quiet := forgedTokensRun(t, m, false)
	loud := forgedTokensRun(t, m, true)
	t.Logf("without the attack: %+v", quiet)
	t.Logf("with the attack:    %+v", loud)
	if loud.passes == 0 || loud.samples == 0 {
		t.Fatal("no attack")
	}
	if loud.taken > 0 {
		t.Errorf("%d of %d forged passes taken", loud.taken, loud.passes)
	}
	if loud.fewest == 0 {
		t.Errorf("no superpeer at some sample")
	}
	if loud.mean < quiet.mean-0.1 {
		t.Errorf("%.2f superpeers on the mean of the samples with the attack, %.2f without", loud.mean, quiet.mean)
	}
	if loud.holds > 0 || loud.served > 0 {
		t.Errorf("the attacker held a token in %d samples and served peers in %d node-samples", loud.holds, loud.served)
	}
	if !loud.converged {
		t.Error("not converged after the attack")
	}
}

type forgedTokens struct {
	passes, taken, forged int // forged passes made, taken, refused as forged
	samples, fewest       int // samples, and the fewest superpeers in one
	mean                  float64
	holds, served         int // samples in which the attacker held a token; node-samples it served
	converged             bool
}

func forgedTokensRun(t *testing.T, m *latency.Matrix, attack bool) forgedTokens {
	const n, tokens = 40, 4
	s := geoSim(t, n, tokens, 1, m)
	if !s.RunUntil((*Sim).GeoConverged, time.Second, 2*time.Minute) {
		t.Fatalf("not converged after 2 virtual minutes: %+v", s.Take())
	}
	s.Run(4 * time.Minute)
	attacker := -1
	for i := range s.N() {
		if st := s.GeoState(i); st != nil && st.Role != node.RoleSuperpeer && st.Token < 0 {
			attacker = i
			break
		}
	}
	var r forgedTokens
	attacking := true
	if attack {
		s.Every(time.Second, func(s *Sim) {
			if !attacking {
				return
			}
			co := s.Machine(attacker).GeoState().Coord
			var claims []node.TokenReport
			for i := range s.N() {
				g := s.nodes[i].geo
				if i == attacker || !s.Alive(i) || g == nil || g.own == nil {
					continue
				}
				next := geometric.Token{Num: g.own.Token.Num, Seq: g.own.Token.Seq + 1}
				claims = append(claims, node.TokenReport{Token: next, Coord: co, Superpeer: true, Capacity: 2})
				for j := range s.N() {
					if j != attacker && j != i && s.Alive(j) && s.State(j).Superpeer == s.ID(i) {
						r.passes++
						s.ForgePass(attacker, j, next, func(a node.GeoAnswer) {
							if a.Yes {
								r.taken++
							}
							if a.Forged != nil {
								r.forged++
							}
						})
						break
					}
				}
			}
			s.ForgeTokens(attacker, claims)
		})
	}
	sum := 0
	s.Every(100*time.Millisecond, func(s *Sim) {
		if !attacking {
			return
		}
		x := s.Take()
		if r.samples++; r.samples == 1 || x.Claimers < r.fewest {
			r.fewest = x.Claimers
		}
		sum += x.Claimers
		if st := s.GeoState(attacker); st != nil && (st.Token >= 0 || st.Role == node.RoleSuperpeer) {
			r.holds++
		}
		for i := range s.N() {
			if i != attacker && s.Alive(i) && s.State(i).Superpeer == s.ID(attacker) {
				r.served++
			}
		}
	})
	s.RunFor(time.Minute)
	attacking = false
	s.ForgeTokens(attacker, nil)
	r.mean = float64(sum) / float64(max(r.samples, 1))
	s.RunFor(10 * time.Second)
	r.converged = s.GeoConverged()
	return r
}

// TestGeoHostileHolders: nodes that keep every token they get
// (KeepTokens) hold it to the end, and liars in the search (LieInSearch)
// send reports that the search acts on: on 60 PlanetLab hosts with S = 6,
// the same ten nodes hold more roles when they lie than when they are
// honest. (bench.NodeAttack measures both.) The keepers are the ten and
// every node that held a token in the honest run: a new network's survey
// places its tokens once and pins them, so a keeper must be a node the
// placement reaches.
func TestGeoHostileHolders(t *testing.T) {
	m := loadPlanetLab(t)
	const n, tokens = 60, 6
	liars := []int{3, 9, 14, 22, 27, 31, 38, 44, 50, 57}
	run := func(watch []int, keep, lie bool) (roles int, held, kept map[int]bool) {
		s := geoSim(t, n, tokens, 1, m)
		if keep {
			s.KeepTokens(watch)
		}
		if lie {
			s.LieInSearch(watch)
		}
		held, kept = map[int]bool{}, map[int]bool{}
		s.Every(time.Second, func(s *Sim) {
			for _, i := range watch {
				if st := s.GeoState(i); st != nil && st.Token >= 0 {
					held[i] = true
				}
			}
		})
		s.Run(4 * time.Minute)
		for _, i := range watch {
			if st := s.GeoState(i); st != nil && st.Token >= 0 {
				kept[i] = true
				if st.Role == node.RoleSuperpeer {
					roles++
				}
			}
		}
		return roles, held, kept
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	honest, _, _ := run(liars, false, false)
	_, holders, _ := run(all, false, false)
	keepers := slices.Clone(liars)
	for i := range holders {
		if !slices.Contains(keepers, i) {
			keepers = append(keepers, i)
		}
	}
	_, held, kept := run(keepers, true, false)
	if len(held) == 0 {
		t.Fatal("no keeper ever held a token: the test shows nothing")
	}
	for i := range held {
		if !kept[i] {
			t.Errorf("keeper %d held a token and passed it on", i)
		}
	}
	lying, _, _ := run(liars, false, true)
	t.Logf("ten liars of 60: %d roles honest, %d lying in the search; %d keepers of %d held a token", honest, lying, len(held), len(keepers))
	if lying <= honest {
		t.Errorf("lying in the search, the liars hold %d roles, honest %d: the lies do nothing", lying, honest)
	}
}

// TestHostileOutOfRange: KeepTokens and LieInSearch refuse a number that
// is no node's, with a panic that names it, rather than mark nothing.
func TestHostileOutOfRange(t *testing.T) {
	m := loadPlanetLab(t)
	for name, mark := range map[string]func(*Sim, []int){"KeepTokens": (*Sim).KeepTokens, "LieInSearch": (*Sim).LieInSearch} {
		for _, i := range []int{-1, 8} {
			s := geoSim(t, 8, 2, 1, m)
			func() {
				defer func() {
					if r := recover(); r == nil {
						t.Errorf("%s(%d) of 8 nodes did not panic", name, i)
					} else if msg := fmt.Sprint(r); !strings.Contains(msg, fmt.Sprintf("no node %d", i)) {
						t.Errorf("%s(%d): panic %q does not name the node", name, i, msg)
					}
				}()
				mark(s, []int{i})
			}()
		}
	}
}
