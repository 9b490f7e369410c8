package bench

import (
	"errors"
	"flag"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
)

// attackRow returns the row of one defence and fraction.
func attackRow(t *testing.T, rows []AttackRow, defence string, f float64) AttackRow {
	t.Helper()
	return findAttackRow(t, rows, defence, false, f)
}

// findAttackRow is the row of a defence, with the search or without, and
// a fraction of liars.
func findAttackRow(t *testing.T, rows []AttackRow, defence string, search bool, f float64) AttackRow {
	t.Helper()
	for _, r := range rows {
		if r.Defence == defence && r.Search == search && r.Fraction == f {
			return r
		}
	}
	t.Fatalf("no row for defence %q, search %v, f = %v", defence, search, f)
	return AttackRow{}
}

// A liar's best of G IDs lands within about 1/G of the key space of its
// target (a random ID, within 1/256 with probability 1/256).
func TestGrind(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	target := clusterKey(5, 3)
	if got := target.Prefix(3); got != "101" {
		t.Fatalf("clusterKey(5, 3) has prefix %q, want 101", got)
	}
	for range 5 {
		id := grind(target, 4096, r)
		// P(best of 4096 farther than 1/256) = (255/256)^4096 ≈ 1e-7.
		if d := dhtselect.Xor(dhtselect.KeyOf(id), target).Fraction(); d > 1.0/256 {
			t.Errorf("ground ID at %.5f of the key space from its target, want under 1/256", d)
		}
		if err := id.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}

// Without defence, liars that grind their IDs take far more than their
// share of the superpeer roles; with keys salted per epoch, the IDs they
// ground beforehand are worth their fair share.
func TestDHTAttack(t *testing.T) {
	nw := Synthetic(500, 1)
	rows, err := DHTAttack(AttackConfig{Network: nw, S: 25, Fractions: []float64{0.01, 0.2}, Trials: 3, Seed: 1, Grind: 1 << 12})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 2 defences × (f = 0, 1 %%, 20 %%)", len(rows))
	}
	for _, def := range []string{DefenceNone, DefenceSalt} {
		if r := attackRow(t, rows, def, 0); r.LiarSuperpeers != 0 || r.Superpeers != 32 || r.Liars != 0 {
			t.Errorf("%s, no liars: %+v", def, r)
		}
	}
	// 100 liars, 3 per cluster key; each beats the ~16 honest members with
	// probability G/(G+n) ≈ 0.9.
	if r := attackRow(t, rows, DefenceNone, 0.2); r.Liars != 100 || r.LiarShare < 0.9 {
		t.Errorf("no defence, f = 20 %%: liars hold %.0f %% of the superpeer roles, want over 90 %%", 100*r.LiarShare)
	}
	// 5 liars, each its own cluster key of 32.
	if r := attackRow(t, rows, DefenceNone, 0.01); r.Liars != 5 || r.LiarSuperpeers < 4 {
		t.Errorf("no defence, f = 1 %%: %.1f liar superpeers of 5 liars, want at least 4", r.LiarSuperpeers)
	}
	// Salted: 96 roles each a liar with probability 0.2 (sd 0.04).
	if r := attackRow(t, rows, DefenceSalt, 0.2); r.LiarShare < 0.05 || r.LiarShare > 0.35 {
		t.Errorf("epoch salt, f = 20 %%: liars hold %.0f %% of the superpeer roles, want 5-35 %%", 100*r.LiarShare)
	}
	if r := attackRow(t, rows, DefenceSalt, 0.01); r.LiarSuperpeers > 0.5 {
		t.Errorf("epoch salt, f = 1 %%: %.1f liar superpeers per trial, want about 5/500·32 = 0.3", r.LiarSuperpeers)
	}
}

// Liars claiming the superpeers' spots take the tokens and drag the honest
// peers to far superpeers; checking the claims against measured RTTs
// turns most of them away and the damage with them.
func TestGeometricAttack(t *testing.T) {
	nw, err := PlanetLab()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := GeometricAttack(AttackConfig{Network: nw, S: 25, Fractions: []float64{0.2}, Trials: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := attackRow(t, rows, DefenceNone, 0); r.Damage != 1 || r.LiarSuperpeers != 0 {
		t.Errorf("no liars, no defence: damage %.2f (want 1, the run itself), %.1f liar superpeers", r.Damage, r.LiarSuperpeers)
	}
	if r := attackRow(t, rows, DefenceNone, 0.2); r.LiarShare < 0.5 || r.Damage < 2 {
		t.Errorf("no defence, f = 20 %%: liars hold %.0f %% of the roles (want over 50 %%), damage %.2f (want over 2)", 100*r.LiarShare, r.Damage)
	}
	if r := attackRow(t, rows, DefenceRTT, 0); r.HonestDistrusted > 0.1 || r.Damage > 1.15 {
		t.Errorf("RTT check, no liars: %.1f %% of honest peers distrusted (want under 10 %%), damage %.2f (want under 1.15)", 100*r.HonestDistrusted, r.Damage)
	}
	if r := attackRow(t, rows, DefenceRTT, 0.2); r.LiarShare > 0.25 || r.Damage > 1.3 || r.LiarsDistrusted < 0.7 {
		t.Errorf("RTT check, f = 20 %%: liars hold %.0f %% of the roles (want under 25 %%), damage %.2f (want under 1.3), %.0f %% of liars distrusted (want over 70 %%)",
			100*r.LiarShare, r.Damage, 100*r.LiarsDistrusted)
	}
	// With the search on measured RTTs after the tokens, the liars lying
	// in it too: without liars it is its own baseline, and the liars, who
	// keep the roles they took and vote for one another, hold at least
	// as many as without it.
	for _, def := range []string{DefenceNone, DefenceRTT} {
		if r := findAttackRow(t, rows, def, true, 0); r.Damage > 1.15 || r.LiarSuperpeers != 0 {
			t.Errorf("%s, search, no liars: damage %.2f (want about 1), %.1f liar superpeers", def, r.Damage, r.LiarSuperpeers)
		}
		without, with := attackRow(t, rows, def, 0.2), findAttackRow(t, rows, def, true, 0.2)
		t.Logf("%s, f = 20 %%: liars hold %.0f %% of the roles without the search, %.0f %% with it (damage %.2f, %.2f)",
			def, 100*without.LiarShare, 100*with.LiarShare, without.Damage, with.Damage)
		if with.LiarShare < without.LiarShare {
			t.Errorf("%s, f = 20 %%: the liars hold %.0f %% of the roles with the search, %.0f %% without: the search undid their lies",
				def, 100*with.LiarShare, 100*without.LiarShare)
		}
	}
}

// Liars in the live node's placement (NodeAttack, one seed): with the
// liars honest the row is its own baseline and they do nothing hostile;
// in each hostile row they act (they keep passes, lie in reports), and
// every run ends with its 10 superpeers. Whether their acts win them roles
// is what NodeAttack measures over 8 seeds (BENCHMARKS.md), not what this
// test asserts: at one seed it is a draw that the node's defences can take
// to nothing (at seed 2, since a member that moves tells its superpeer,
// liars that keep their tokens or lie in the search hold 2 roles of 10,
// as they do honest; over seeds 1-8, 2.4 and 3.1 against 2.1).
var (
	nodeAttackTrials = flag.Int("nodeattack.trials", 1, "TestNodeAttack: seeds, from -nodeattack.seed")
	nodeAttackSeed   = flag.Uint64("nodeattack.seed", 2, "TestNodeAttack: the first seed")
	nodeAttackReloc  = flag.Bool("nodeattack.relocate", false, "TestNodeAttack: turn on the relocation between clusters")
)

func TestNodeAttack(t *testing.T) {
	if testing.Short() {
		t.Skip("the node simulator starts no goroutine: nothing for the race detector's short run (TestRunQuickAttack runs NodeAttack too)")
	}
	rows, err := NodeAttack(NodeAttackConfig{Trials: *nodeAttackTrials, Seed: *nodeAttackSeed, Relocate: *nodeAttackReloc})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]AttackRow{}
	for _, r := range rows {
		by[r.Hostility] = r
		t.Logf("liars %q: %.1f of %.1f roles, damage %.2f, %.0f hostile acts", r.Hostility, r.LiarSuperpeers, r.Superpeers, r.Damage, r.HostileActs)
	}
	if c := by[hostileHonest]; c.Damage != 1 || c.Superpeers != 10 || c.HostileActs != 0 {
		t.Errorf("liars honest: damage %.2f (want 1, the run itself), %.1f superpeers (want 10), %.1f hostile acts (want none)", c.Damage, c.Superpeers, c.HostileActs)
	}
	for _, h := range []string{HostileKeep, HostileLies, HostileBoth} {
		if r := by[h]; r.Superpeers != 10 || r.HostileActs == 0 {
			t.Errorf("liars %s: %.1f superpeers (want 10), %.1f hostile acts a run (want some)", h, r.Superpeers, r.HostileActs)
		}
	}
	for _, bad := range []NodeAttackConfig{{N: 1}, {S: 100}, {N: 1000}, {Fraction: 1}, {Trials: -1}, {Duration: -time.Second}} {
		if _, err := NodeAttack(bad); !errors.Is(err, ErrBench) {
			t.Errorf("NodeAttack(%+v) = %v, want ErrBench", bad, err)
		}
	}
}

func TestAttackBadConfig(t *testing.T) {
	nw := Synthetic(100, 1)
	for _, c := range []AttackConfig{
		{S: 5},
		{Network: nw, S: 0},
		{Network: nw, S: 101},
		{Network: nw, S: 5, Fractions: []float64{1}},
		{Network: nw, S: 5, Fractions: []float64{-0.1}},
		{Network: nw, S: 5, Trials: -1},
	} {
		if _, err := DHTAttack(c); !errors.Is(err, ErrBench) {
			t.Errorf("DHTAttack(%+v) = %v, want ErrBench", c, err)
		}
		if _, err := GeometricAttack(c); !errors.Is(err, ErrBench) {
			t.Errorf("GeometricAttack(%+v) = %v, want ErrBench", c, err)
		}
	}
}

// The quick attack suite fills rows for both modes, and the report shows
// them in a section of their own.
func TestRunQuickAttack(t *testing.T) {
	r, err := Run(t.Context(), Config{Suites: []string{SuiteAttack}, Sim: true, Quick: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	for _, row := range r.Attack {
		modes[modeCell(row)]++
	}
	if modes["geometric"] != 8 || modes["geometric + search"] != 8 || modes["dht"] != 8 {
		t.Fatalf("rows per mode %v, want 8 each (2 defences × f = 0, 1, 5, 20 %%)", modes)
	}
	for _, h := range []string{"honest", HostileKeep, HostileLies, HostileBoth} {
		if modes["geometric node, liars "+h] != 1 {
			t.Errorf("rows per mode %v, want one of the node's with liars %s", modes, h)
		}
	}
	var md, tables strings.Builder
	if err := WriteMarkdown(&md, r, nil, "out"); err != nil {
		t.Fatal(err)
	}
	if err := WriteTables(&tables, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Lying peers", "| geometric | planetlab490 | 25 | RTT check | 20 % | 98 |", "| geometric + search | planetlab490 | 25 | RTT check | 20 % | 98 |", "| dht | planetlab490 | 25 | epoch salt | 5 % | 25 |", "G = 4096", "| geometric node, liars both | planetlab100 | 10 | none | 20 % | 20 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(tables.String(), "Lying peers") || !strings.Contains(tables.String(), "epoch salt") {
		t.Errorf("tables lack the attack table:\n%s", tables.String())
	}
}
