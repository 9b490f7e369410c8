package testnet

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Progress is how a long call goes, for a display (Config.Progress):
// WaitConverged, and RunScenario's faults and the convergence after them.
type Progress struct {
	// Scenario is the name of the running scenario; empty in a
	// WaitConverged of its own.
	Scenario string
	// Step says in a few words what the call is doing: "converging" (the
	// geometric strategy then "holding still for 20s": no mismatch, and
	// the roles must stay put that long), or the scenario's fault under
	// way or last done ("stop superpeer …ExHX659m, wait until its peers
	// have another", "heal"; empty before the first, except churn's plan),
	// and "converging" once the faults are done.
	Step string
	// StepNum numbers the scenario's fault under way or last done, of
	// Steps planned (0 before the first); both 0 outside a scenario.
	StepNum, Steps int
	// Converged counts the live nodes whose view agrees with the expected
	// answer (Check names none of them), of N live nodes. It is 0 while a
	// node process has failed (Check reports that alone).
	Converged, N int
	// Elapsed is the time since the call's start (WaitConverged's since;
	// the scenario's start), StepElapsed the time since the Step began.
	Elapsed, StepElapsed time.Duration
}

// progressPeriod is how often a long call reports its Progress.
const progressPeriod = 250 * time.Millisecond

// progress makes a Progress from Check's mismatches: the nodes converged.
func (t *Net) progress(ms []Mismatch) Progress {
	n := len(t.Members())
	bad := map[peer.ID]bool{}
	for _, m := range ms {
		if m.Node == "" {
			return Progress{N: n}
		}
		bad[m.Node] = true
	}
	return Progress{Converged: max(0, n-len(bad)), N: n}
}

// scenarioProgress follows a scenario's faults for Config.Progress.
type scenarioProgress struct {
	t     *Net
	name  string
	began time.Time

	mu        sync.Mutex
	step      string
	num       int
	steps     int
	stepBegan time.Time
}

func newScenarioProgress(t *Net, name string) *scenarioProgress {
	now := time.Now()
	return &scenarioProgress{t: t, name: name, began: now, stepBegan: now}
}

// plan sets the number of faults planned and what the scenario does
// before the first.
func (s *scenarioProgress) plan(steps int, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps, s.step, s.stepBegan = steps, what, time.Now()
}

// fault counts one more fault, described by what, as it begins.
func (s *scenarioProgress) fault(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.num++
	s.steps = max(s.steps, s.num)
	s.step, s.stepBegan = what, time.Now()
}

// fill completes p with the scenario's step. A step from p (the
// convergence after the faults) replaces the last fault's.
func (s *scenarioProgress) fill(p *Progress, stepBegan time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	p.Scenario, p.StepNum, p.Steps = s.name, s.num, s.steps
	p.Elapsed = now.Sub(s.began)
	if p.Step == "" {
		p.Step, stepBegan = s.step, s.stepBegan
	}
	p.StepElapsed = now.Sub(stepBegan)
}

// report tells Config.Progress how the faults go, every progressPeriod
// until ctx ends.
func (s *scenarioProgress) report(ctx context.Context) {
	tick := time.NewTicker(progressPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p := s.t.progress(s.t.Check())
		s.fill(&p, time.Time{})
		s.t.cfg.Progress(p)
	}
}
