package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/superpeer/superpeer/testnet"
)

// onTerminal reports whether w is a terminal: progress is drawn there
// only, never into a file or a pipe.
func onTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// testnetProgress draws a testnet's Progress as one line on a terminal,
// redrawn in place and cleared at the end: the step, the peers converged
// of N, the time elapsed. Logs written through above go above the line.
type testnetProgress struct {
	fd int // of the terminal, for its width

	mu    sync.Mutex // one writer of the terminal at a time
	bar   *progressbar.ProgressBar
	shown bool // the line is on the terminal
	done  bool // finished: the line is gone for good
}

// newTestnetProgress returns nil, which draws nothing, unless on and w is
// a terminal.
func newTestnetProgress(w io.Writer, on bool) *testnetProgress {
	if !on || !onTerminal(w) {
		return nil
	}
	// No spinner interval: the bar draws only when told, under mu.
	return &testnetProgress{fd: int(w.(*os.File).Fd()), bar: progressbar.NewOptions(-1, progressbar.OptionSetWriter(w),
		progressbar.OptionSetElapsedTime(false), progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(), progressbar.OptionSpinnerType(14), progressbar.OptionSetSpinnerChangeInterval(0))}
}

// show draws p; testnet.Config.Progress calls it. The line is cut to the
// terminal's width: a line that wrapped could not be redrawn in place.
func (t *testnetProgress) show(p testnet.Progress) {
	width, _, err := term.GetSize(t.fd)
	if err != nil || width <= 0 {
		width = 80
	}
	line := cut(progressLine(p), width-4) // the spinner, its spaces and one to spare
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.done {
		t.shown = true
		t.bar.Describe(line)
	}
}

// above returns a writer for w that prints above the line: it clears the
// line, writes, and draws the line again below. It is w itself when t is
// nil.
func (t *testnetProgress) above(w io.Writer) io.Writer {
	if t == nil {
		return w
	}
	return writerFunc(func(b []byte) (int, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		drawn := t.shown && !t.done
		if drawn {
			_ = t.bar.Clear()
		}
		n, err := w.Write(b)
		if drawn {
			_ = t.bar.Add(0)
		}
		return n, err
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// finish clears the line for good. Safe on nil, and more than once.
func (t *testnetProgress) finish() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shown && !t.done {
		_ = t.bar.Finish()
	}
	t.done = true
}

// progressLine is what the line says:
//
//	converging: 28/32 peers converged, 12s
//	holding still for 20s (4s): 32/32 peers converged, 1m40s
//	churn, fault 3 of 6, 1m12s: 30/32 peers converged; replace …1a2b3c4d by a new peer (4s)
func progressLine(p testnet.Progress) string {
	sec := func(d time.Duration) time.Duration { return d.Round(time.Second) }
	if p.Scenario == "" {
		step := p.Step
		if sec(p.StepElapsed) != sec(p.Elapsed) { // a step of its own: the geometric strategy's holding still
			step += fmt.Sprintf(" (%v)", sec(p.StepElapsed))
		}
		return fmt.Sprintf("%s: %d/%d peers converged, %v", step, p.Converged, p.N, sec(p.Elapsed))
	}
	line := fmt.Sprintf("%s, fault %d of %d, %v: %d/%d peers converged", p.Scenario, p.StepNum, p.Steps, sec(p.Elapsed), p.Converged, p.N)
	if p.Step != "" {
		line += fmt.Sprintf("; %s (%v)", p.Step, sec(p.StepElapsed))
	}
	return line
}

// cut shortens s to at most n characters, the last of them "…".
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 1 {
		return s
	}
	return string(r[:n-1]) + "…"
}
