package bench

import (
	"cmp"
	"fmt"
	"time"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
	"github.com/superpeer/superpeer/testnet/latency"
	"github.com/superpeer/superpeer/testnet/nodesim"
)

// The hostilities of NodeAttack: what its liars do.
const (
	HostileKeep   = "keep tokens"
	HostileLies   = "lie in the search"
	HostileBoth   = "both"
	hostileHonest = "" // the control: the same peers, honest
)

// NodeAttackConfig configures NodeAttack.
type NodeAttackConfig struct {
	// Matrix gives the RTTs; its first N hosts are the nodes. nil: the
	// PlanetLab matrix.
	Matrix *latency.Matrix
	// N and S: nodes and superpeers. Zero: 100 and 10.
	N, S int
	// Fraction is the share of liars. Zero: 0.2.
	Fraction float64
	// Trials is how many seeds, from Seed. Zero: 8.
	Trials int
	Seed   uint64
	// Duration is how long each run lasts. Zero: 300 s.
	Duration time.Duration
	// Relocate turns on the relocation between clusters
	// (node.GeoConfig.Relocate), whose summaries liars that lie in the
	// search lie in too (nodesim's LieInSearch).
	Relocate bool
}

// NodeAttack measures what liars gain from the live node's geometric
// placement: overlay/node's machines in the node simulator (nodesim, as
// GeoLive's simulator side: token rounds and pings every second, announce
// interval 5 s), round(f·N) random nodes lying with honest coordinates,
// as nodesim's KeepTokens and LieInSearch say: a liar that holds a token
// never passes it on (the coordinates' forces and the search's
// hand-overs alike), or it lies in its reports to the search on measured
// RTTs (liar candidates save it the most Swap accepts, honest ones cost
// it the most), or both. Every row is against the run of the same seed
// in which the same nodes are honest (the control row: their share of
// the roles is then chance). Each run's figures are read at its end.
func NodeAttack(cfg NodeAttackConfig) ([]AttackRow, error) {
	if cfg.Matrix == nil {
		path, err := findPlanetLab()
		if err != nil {
			return nil, err
		}
		if cfg.Matrix, err = latency.Load(path); err != nil {
			return nil, err
		}
	}
	cfg.N, cfg.S, cfg.Trials = cmp.Or(cfg.N, 100), cmp.Or(cfg.S, 10), cmp.Or(cfg.Trials, 8)
	if cfg.Fraction == 0 {
		cfg.Fraction = 0.2
	}
	if cfg.Duration == 0 {
		cfg.Duration = 300 * time.Second
	}
	if cfg.N < 2 || cfg.S < 1 || cfg.S >= cfg.N || cfg.N > cfg.Matrix.N() || !(cfg.Fraction > 0 && cfg.Fraction < 1) || cfg.Trials < 1 || cfg.Duration < 0 {
		return nil, fmt.Errorf("%w: node attack with N = %d, S = %d on %d hosts, f = %v, %d trials, %v",
			ErrBench, cfg.N, cfg.S, cfg.Matrix.N(), cfg.Fraction, cfg.Trials, cfg.Duration)
	}
	hosts := make([]int, cfg.N)
	for i := range hosts {
		hosts[i] = i
	}
	m := cfg.Matrix.Sub(hosts)
	nw, err := FromMatrix(fmt.Sprintf("planetlab%d", cfg.N), m)
	if err != nil {
		return nil, err
	}
	kinds := []string{hostileHonest, HostileKeep, HostileLies, HostileBoth}
	rows := make([]*tally, len(kinds))
	for k, h := range kinds {
		rows[k] = &tally{row: AttackRow{Mode: "geometric node", Hostility: h, Network: nw.Name, S: cfg.S, Defence: DefenceNone,
			Fraction: cfg.Fraction, Liars: liarCount(cfg.Fraction, cfg.N), Hosts: cfg.N, Trials: cfg.Trials}}
	}
	for t := range cfg.Trials {
		seed := cfg.Seed + uint64(t)
		lr := trialRand(cfg.Seed, t, 0x10de)
		liar := pickLiars(cfg.N, cfg.Fraction, lr)
		var liars []int
		for i, l := range liar {
			if l {
				liars = append(liars, i)
			}
		}
		var base []int
		for k, h := range kinds {
			sps, attach, acts, err := nodeAttackRun(m, cfg, seed, h, liars)
			if err != nil {
				return nil, err
			}
			rows[k].acts += acts
			if h == hostileHonest {
				base = attach
			}
			rows[k].add(nw, sps, attach, base, liar)
		}
	}
	out := make([]AttackRow, len(rows))
	for i, t := range rows {
		out[i] = t.done()
	}
	return out, nil
}

// nodeAttackRun is one run of NodeAttack: the superpeers at its end,
// each node's superpeer (itself for one, -1 none), and the liars' acts
// (AttackRow.HostileActs).
func nodeAttackRun(m *latency.Matrix, cfg NodeAttackConfig, seed uint64, hostility string, liars []int) (sps, attach []int, acts uint64, err error) {
	s, err := nodesim.New(nodesim.Config{N: cfg.N, Seed: seed, Stagger: time.Second, Latency: m,
		Node: node.Config{Geometric: true, AnnounceInterval: 5 * time.Second,
			Geo: node.GeoConfig{PingInterval: time.Second, TokenInterval: time.Second, Tokens: geometric.Config{Tokens: cfg.S}, Relocate: cfg.Relocate}}})
	if err != nil {
		return nil, nil, 0, err
	}
	if hostility == HostileKeep || hostility == HostileBoth {
		s.KeepTokens(liars)
	}
	if hostility == HostileLies || hostility == HostileBoth {
		s.LieInSearch(liars)
	}
	s.Run(time.Second + cfg.Duration) // the last node starts at 1 s
	index := make(map[string]int, cfg.N)
	for i := range cfg.N {
		index[string(s.ID(i))] = i
	}
	attach = make([]int, cfg.N)
	for i := range cfg.N {
		attach[i] = -1
		if j, ok := index[string(s.Machine(i).GeoState().Superpeer)]; ok {
			attach[i] = j
			if j == i {
				sps = append(sps, i)
			}
		}
	}
	st := s.Stats()
	return sps, attach, st.KeptPasses + st.LiedReports, nil
}
