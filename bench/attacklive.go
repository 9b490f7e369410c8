package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/testnet"
	"github.com/superpeer/superpeer/testnet/attack"
)

// LiveAttackConfig configures LiveAttack: each attack of testnet/attack
// against a swarm of node processes on loopback, the set-up the issue's
// attacks were found on (4 nodes, 2 superpeers, bully, 1 s intervals).
type LiveAttackConfig struct {
	// Exec is the peer command; every node runs as its own process so
	// that its memory and CPU can be measured. Required.
	Exec string
	// Attacks are the attacks' names (attack.All); nil means all.
	Attacks []string
	// N is the number of nodes (default 4), Superpeers the target
	// (default 2), Election the algorithm (default bully).
	N, Superpeers int
	Election      string
	// Idle is how long the swarm is measured before the attack, Duration
	// how long the attack runs, Recover how long the swarm has to
	// converge after it. Defaults 10 s, 30 s, 60 s.
	Idle, Duration, Recover time.Duration
	// Sample is the period of the role samples; default 250 ms.
	Sample time.Duration
	// Seed derives the peer keys and the attacks' randomness.
	Seed uint64
}

// LiveAttackRow is one attack against one swarm.
type LiveAttackRow struct {
	Attack  string `json:"attack"`
	Finding string `json:"finding"`
	N       int    `json:"n"`
	// IdleCPU and AttackCPU are the victim's CPU use (cores) before and
	// during the attack; MaxCPURatio is the largest attack/idle ratio
	// over the honest nodes.
	IdleCPU     float64 `json:"idle_cpu"`
	AttackCPU   float64 `json:"attack_cpu"`
	MaxCPURatio float64 `json:"max_cpu_ratio"`
	// IdleRSSMB is the victim's resident memory before the attack,
	// PeakRSSMB its peak (VmHWM) at the end of the attack.
	IdleRSSMB float64 `json:"idle_rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// IdleGoroutines and MaxGoroutines are the victim's, before and at
	// most during the attack.
	IdleGoroutines int `json:"idle_goroutines"`
	MaxGoroutines  int `json:"max_goroutines"`
	// Samples is the number of role samples during the attack;
	// AttackerShare the share in which some honest node named a
	// superpeer that is no honest node, NobodyShare the share in which
	// some honest node named none, LongestNobodyMs the longest such
	// stretch.
	Samples         int     `json:"samples"`
	AttackerShare   float64 `json:"attacker_share"`
	NobodyShare     float64 `json:"nobody_share"`
	LongestNobodyMs float64 `json:"longest_nobody_ms"`
	// HonestBans is the number of (node, honest peer) bans seen during
	// and after the attack.
	HonestBans int `json:"honest_bans"`
	// RecoverMs is the time from the attack's end until the swarm
	// checked correct again; -1 when it did not within Recover.
	RecoverMs float64 `json:"recover_ms"`
	Error     string  `json:"error,omitempty"`
}

func (c *LiveAttackConfig) fill() error {
	if c.Exec == "" {
		return fmt.Errorf("%w: the live attack suite needs the peer command (its nodes are processes)", ErrBench)
	}
	if c.Attacks == nil {
		for _, a := range attack.All() {
			c.Attacks = append(c.Attacks, a.Name)
		}
	}
	for _, name := range c.Attacks {
		if _, err := attack.Find(name); err != nil {
			return fmt.Errorf("%w: %w", ErrBench, err)
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.N, 4)
	def(&c.Superpeers, 2)
	if c.Election == "" {
		c.Election = "bully"
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	dur(&c.Idle, 10*time.Second)
	dur(&c.Duration, 30*time.Second)
	dur(&c.Recover, time.Minute)
	dur(&c.Sample, 250*time.Millisecond)
	if c.N < 2 || c.Superpeers < 1 || c.Superpeers > c.N || c.Idle < 0 || c.Duration < 0 || c.Recover < 0 || c.Sample < 0 {
		return fmt.Errorf("%w: live attack on %d nodes, %d superpeers, idle %v, attack %v, recovery %v, samples every %v",
			ErrBench, c.N, c.Superpeers, c.Idle, c.Duration, c.Recover, c.Sample)
	}
	return nil
}

// LiveAttack runs each attack against its own fresh swarm. An attack that
// fails gets a row with its error; only a cancelled ctx stops the others.
func LiveAttack(ctx context.Context, cfg LiveAttackConfig) ([]LiveAttackRow, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	var rows []LiveAttackRow
	for i, name := range cfg.Attacks {
		a, _ := attack.Find(name)
		row := LiveAttackRow{Attack: a.Name, Finding: a.Finding, N: cfg.N, RecoverMs: -1}
		if err := liveAttackOne(ctx, cfg, a, cfg.Seed+uint64(i), &row); err != nil {
			if ctx.Err() != nil {
				return rows, ctx.Err()
			}
			row.Error = err.Error()
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func liveAttackOne(ctx context.Context, cfg LiveAttackConfig, a attack.Attack, seed uint64, row *LiveAttackRow) error {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute+cfg.Idle+cfg.Duration+cfg.Recover)
	defer cancel()
	strategy := testnet.StrategyDHT
	if a.Geometric {
		strategy = testnet.StrategyGeometric
	}
	tn, err := testnet.Start(ctx, testnet.Config{N: cfg.N, Strategy: strategy, Target: dhtselect.Target{Superpeers: cfg.Superpeers}, Seed: seed,
		Election: cfg.Election, AnnounceInterval: time.Second, ReevaluateInterval: time.Second, Exec: cfg.Exec})
	if err != nil {
		return err
	}
	defer tn.Close()
	if _, err := tn.WaitConverged(ctx, tn.Started()); err != nil {
		return err
	}
	members := tn.Members()
	honest := make([]peer.ID, len(members))
	for i, m := range members {
		honest[i] = m.ID()
	}
	victimID := members[0].State().Superpeer.ID // a superpeer: the attacks' richest target
	if victimID == "" {
		victimID = honest[0]
	}
	snap := func() (map[peer.ID]testnet.Process, error) {
		out := map[peer.ID]testnet.Process{}
		for _, id := range honest {
			p, err := tn.Process(id)
			if err != nil {
				return nil, err
			}
			out[id] = p
		}
		return out, nil
	}
	bans := map[[2]peer.ID]bool{}
	countBans := func(ps map[peer.ID]testnet.Process) {
		for id, p := range ps {
			for _, b := range p.Banned {
				if slices.Contains(honest, b) {
					bans[[2]peer.ID{id, b}] = true
				}
			}
		}
	}

	// Idle.
	before, err := snap()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sleep(ctx, cfg.Idle); err != nil {
		return err
	}
	idle, err := snap()
	if err != nil {
		return err
	}
	idleFor := time.Since(t0)
	row.IdleRSSMB = float64(idle[victimID].RSS) / (1 << 20)
	row.IdleGoroutines = idle[victimID].Goroutines
	countBans(idle)

	// The attack.
	target := attack.Target{Network: "default", Victim: idle[victimID].Addr, Seed: seed}
	for _, id := range honest {
		target.Nodes = append(target.Nodes, idle[id].Addr)
	}
	actx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- a.Run(actx, target) }()
	t1 := time.Now()
	var nobodySince time.Time
	tick := time.NewTicker(cfg.Sample)
	defer tick.Stop()
	for sampling := true; sampling; {
		select {
		case <-actx.Done():
			sampling = false
			continue
		case <-tick.C:
		}
		row.Samples++
		attacker, nobody := false, false
		for _, m := range members {
			sp := m.State().Superpeer.ID
			switch {
			case sp == "":
				nobody = true
			case !slices.Contains(honest, sp):
				attacker = true
			}
		}
		if attacker {
			row.AttackerShare++
		}
		now := time.Now()
		if nobody {
			row.NobodyShare++
			if nobodySince.IsZero() {
				nobodySince = now
			}
			row.LongestNobodyMs = max(row.LongestNobodyMs, ms(now.Sub(nobodySince)))
		} else {
			nobodySince = time.Time{}
		}
		if p, err := tn.Process(victimID); err == nil {
			row.MaxGoroutines = max(row.MaxGoroutines, p.Goroutines)
		}
	}
	attackFor := time.Since(t1)
	aerr := <-done
	after, err := snap()
	if err != nil {
		return err
	}
	countBans(after)
	if row.Samples > 0 {
		row.AttackerShare /= float64(row.Samples)
		row.NobodyShare /= float64(row.Samples)
	}
	cpu := func(from, to map[peer.ID]testnet.Process, id peer.ID, d time.Duration) float64 {
		return (to[id].CPU - from[id].CPU).Seconds() / d.Seconds()
	}
	row.IdleCPU = cpu(before, idle, victimID, idleFor)
	row.AttackCPU = cpu(idle, after, victimID, attackFor)
	for _, id := range honest {
		if i := cpu(before, idle, id, idleFor); i > 0 {
			row.MaxCPURatio = max(row.MaxCPURatio, cpu(idle, after, id, attackFor)/i)
		}
	}
	row.PeakRSSMB = float64(after[victimID].PeakRSS) / (1 << 20)

	// Recovery.
	t2 := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, cfg.Recover)
	defer rcancel()
	for rctx.Err() == nil {
		if len(tn.Check()) == 0 {
			row.RecoverMs = ms(time.Since(t2))
			break
		}
		if err := sleep(rctx, cfg.Sample); err != nil {
			break
		}
	}
	if ps, err := snap(); err == nil {
		countBans(ps)
	}
	row.HonestBans = len(bans)
	if aerr != nil {
		return fmt.Errorf("the attack: %w", aerr)
	}
	return ctx.Err()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WriteLiveAttackTable prints rows as a table.
func WriteLiveAttackTable(w io.Writer, rows []LiveAttackRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "attack\tn\tCPU idle\tCPU attack\tmax CPU ratio\tRSS idle MB\tRSS peak MB\tgoroutines\tattacker SP\tno SP\tlongest no SP ms\thonest bans\trecover ms\terror")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.2f\t%.0f\t%.0f\t%d→%d\t%.1f%%\t%.1f%%\t%.0f\t%d\t%.0f\t%s\n", r.Attack, r.N, r.IdleCPU, r.AttackCPU,
			r.MaxCPURatio, r.IdleRSSMB, r.PeakRSSMB, r.IdleGoroutines, r.MaxGoroutines, 100*r.AttackerShare, 100*r.NobodyShare,
			r.LongestNobodyMs, r.HonestBans, r.RecoverMs, r.Error)
	}
	return tw.Flush()
}

// writeLiveAttackMarkdown writes the live attacks' table of the report.
func writeLiveAttackMarkdown(b *mdBlocks, rows []LiveAttackRow) {
	r0 := rows[0]
	b.block("live-attack-about", func(w io.Writer) {
		fmt.Fprintf(w, "Hostile clients (`testnet/attack`) against a swarm of %d `peer run` processes on loopback (bully, 1 s intervals; `bench.LiveAttack`), each attack on a fresh swarm. "+
			"The victim is a superpeer; its CPU is in cores, before (idle) and during the attack, as the process reads its own (getrusage, to the microsecond); *max CPU ratio* is the largest attack ÷ idle over all honest nodes; "+
			"RSS is the victim's resident memory before the attack and its peak (VmHWM) at the end of it. "+
			"*Attacker SP* and *no SP* are the shares of role samples (every 250 ms) in which some honest node named a superpeer that is no honest node, or none; "+
			"*honest bans* counts (node, honest peer) bans; *recover* is the time after the attack until the swarm checked correct.\n\n", r0.N)
	})
	b.block("live-attack-table", func(w io.Writer) {
		var out [][]string
		for _, r := range rows {
			out = append(out, []string{r.Attack, r.Finding, f2(r.IdleCPU) + " → " + f2(r.AttackCPU), f2(r.MaxCPURatio),
				f0(r.IdleRSSMB) + " → " + f0(r.PeakRSSMB), d(r.IdleGoroutines) + " → " + d(r.MaxGoroutines),
				f1(100*r.AttackerShare) + " %", f1(100*r.NobodyShare) + " %", f0(r.LongestNobodyMs), d(r.HonestBans), recoverCell(r)})
		}
		mdTable(w, []string{"attack", "what it does", "victim CPU (cores)", "max CPU ratio", "victim RSS MB", "goroutines", "attacker SP", "no SP", "longest no SP ms", "honest bans", "recover ms"}, out)
	})
}

func recoverCell(r LiveAttackRow) string {
	switch {
	case r.Error != "":
		return "error: " + r.Error
	case r.RecoverMs < 0:
		return "not recovered"
	}
	return f0(r.RecoverMs)
}
