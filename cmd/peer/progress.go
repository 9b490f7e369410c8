package main

import (
	"fmt"
	"io"
	"os"
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
// of N, the time elapsed.
type testnetProgress struct {
	bar *progressbar.ProgressBar
	fd  int // of the terminal, for its width
}

// newTestnetProgress returns nil, which draws nothing, unless on and w is
// a terminal.
func newTestnetProgress(w io.Writer, on bool) *testnetProgress {
	if !on || !onTerminal(w) {
		return nil
	}
	return &testnetProgress{fd: int(w.(*os.File).Fd()), bar: progressbar.NewOptions(-1, progressbar.OptionSetWriter(w),
		progressbar.OptionSetElapsedTime(false), progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(), progressbar.OptionSpinnerType(14))}
}

// show draws p; testnet.Config.Progress calls it. The line is cut to the
// terminal's width: a line that wrapped could not be redrawn in place.
func (t *testnetProgress) show(p testnet.Progress) {
	width, _, err := term.GetSize(t.fd)
	if err != nil || width <= 0 {
		width = 80
	}
	t.bar.Describe(cut(progressLine(p), width-4)) // the spinner, its spaces and one to spare
}

// finish clears the line. Safe on nil.
func (t *testnetProgress) finish() {
	if t != nil {
		_ = t.bar.Finish()
	}
}

// progressLine is what the line says:
//
//	converging: 28/32 peers converged, 12s
//	churn, fault 3 of 6, 1m12s: 30/32 peers converged; replace …1a2b3c4d by a new peer (4s)
func progressLine(p testnet.Progress) string {
	sec := func(d time.Duration) time.Duration { return d.Round(time.Second) }
	if p.Scenario == "" {
		return fmt.Sprintf("%s: %d/%d peers converged, %v", p.Step, p.Converged, p.N, sec(p.Elapsed))
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
