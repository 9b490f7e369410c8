package testnet

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
)

// progressLog records the Progress calls and whether two overlapped.
type progressLog struct {
	mu      sync.Mutex
	calls   []Progress
	inside  bool
	overlap bool
}

func (l *progressLog) record(p Progress) {
	l.mu.Lock()
	l.overlap = l.overlap || l.inside
	l.inside = true
	l.mu.Unlock()
	time.Sleep(time.Millisecond) // widen the window in which an overlap would show
	l.mu.Lock()
	l.calls = append(l.calls, p)
	l.inside = false
	l.mu.Unlock()
}

// take returns the calls so far and forgets them.
func (l *progressLog) take(t *testing.T) []Progress {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.overlap {
		t.Error("two Progress calls overlapped")
	}
	out := l.calls
	l.calls = nil
	return out
}

// Config.Progress follows WaitConverged on 8 nodes (converged nodes of
// N, the time since start, ending with all 8 converged) and then a
// kill-superpeer scenario (its name, its one fault, the convergence after
// it, ending with the 7 live nodes converged).
func TestProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 8 libp2p nodes")
	}
	var log progressLog
	tn := startNet(t, Config{N: 8, Target: dhtselect.Target{Superpeers: 2}, Seed: 2, AnnounceInterval: time.Second,
		Progress: log.record})
	if calls := log.take(t); len(calls) != 0 {
		t.Fatalf("Progress called before WaitConverged: %+v", calls)
	}
	waitConverged(t, tn, tn.Started())
	calls := log.take(t)
	if len(calls) == 0 {
		t.Fatal("WaitConverged did not call Progress")
	}
	var prev time.Duration
	for _, p := range calls {
		if p.Scenario != "" || p.Step != "converging" || p.StepNum != 0 || p.Steps != 0 || p.N != 8 ||
			p.Converged < 0 || p.Converged > p.N || p.Elapsed < prev || p.StepElapsed != p.Elapsed {
			t.Errorf("WaitConverged: progress %+v after an elapsed %v", p, prev)
		}
		prev = p.Elapsed
	}
	if last := calls[len(calls)-1]; last.Converged != 8 {
		t.Errorf("last progress %+v, want 8 of 8 converged", last)
	}
	t.Logf("WaitConverged: %d calls, first %+v, last %+v", len(calls), calls[0], calls[len(calls)-1])

	ctx, cancel := context.WithTimeout(context.Background(), convergeBound)
	defer cancel()
	if _, err := tn.RunScenario(ctx, ScenarioConfig{Name: ScenarioKillSuperpeer, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	calls = log.take(t)
	if len(calls) == 0 {
		t.Fatal("RunScenario did not call Progress")
	}
	prev = 0
	faulted := false
	// Steps is 0 only in a report that came before the scenario's plan.
	for _, p := range calls {
		switch {
		case p.Scenario != ScenarioKillSuperpeer || p.Steps != 1 && !(p.Steps == 0 && p.StepNum == 0) || p.StepNum < 0 || p.StepNum > 1 ||
			p.Converged < 0 || p.Converged > p.N || p.N < 7 || p.N > 8 || p.Elapsed < prev ||
			p.StepElapsed < 0 || p.StepElapsed > p.Elapsed:
			t.Errorf("scenario: progress %+v after an elapsed %v", p, prev)
		case p.StepNum == 1 && p.Step != "converging" && !strings.HasPrefix(p.Step, "stop superpeer "):
			t.Errorf("scenario: step %q after the fault, want the fault or converging", p.Step)
		}
		faulted = faulted || strings.HasPrefix(p.Step, "stop superpeer ")
		prev = p.Elapsed
	}
	last := calls[len(calls)-1]
	if last.Step != "converging" || last.StepNum != 1 || last.Converged != 7 || last.N != 7 {
		t.Errorf("last progress %+v, want converging after fault 1 of 1, 7 of 7 converged", last)
	}
	if !faulted {
		t.Log("no report fell between the fault and the failover (it may be shorter than a report period)")
	}
	t.Logf("RunScenario: %d calls, first %+v, last %+v", len(calls), calls[0], last)
}
