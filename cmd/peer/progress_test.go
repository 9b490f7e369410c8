package main

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/superpeer/superpeer/testnet"
)

// testnetStderr runs a small `peer testnet` with extra args, standard
// error a terminal (a pseudo-terminal) when tty, else a pipe, and returns
// what it wrote there.
func testnetStderr(t *testing.T, tty bool, extra ...string) string {
	t.Helper()
	cmd := exec.Command(peerBin, append([]string{"testnet", "-n", "4", "--superpeers", "2", "--seed", "3"}, extra...)...)
	var out bytes.Buffer
	done := make(chan struct{})
	if tty {
		ptmx, tt, err := pty.Open()
		if err != nil {
			t.Skipf("no pseudo-terminal: %v", err)
		}
		defer ptmx.Close()
		if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 100}); err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = tt
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tt.Close() // the child holds it now: the master reads EOF (EIO) once the child is gone
		go func() { defer close(done); _, _ = io.Copy(&out, ptmx) }()
	} else {
		cmd.Stderr = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		close(done)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("peer testnet %v: %v\n%s", extra, err, out.String())
	}
	select {
	case <-done:
	case <-time.After(time.Minute): // a bound against hangs only
		t.Fatal("the pseudo-terminal did not close after the command ended")
	}
	return out.String()
}

// `peer testnet` draws its progress line on a terminal only, and not
// with --quiet: on a pipe, and on a terminal with --quiet, its standard
// error stays empty.
func TestTestnetProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 libp2p nodes three times")
	}
	if s := testnetStderr(t, false); s != "" {
		t.Errorf("standard error a pipe: it got %q, want nothing", s)
	}
	if s := testnetStderr(t, true, "--quiet"); s != "" {
		t.Errorf("standard error a terminal, --quiet: it got %q, want nothing", s)
	}
	// The control: on a terminal without --quiet the line shows.
	s := testnetStderr(t, true)
	if !strings.Contains(s, "converging: ") || !strings.Contains(s, "/4 peers converged") {
		t.Errorf("standard error a terminal: it got %q, want the progress line", s)
	}
}

// The progress line: the step, the peers converged, the times, and the
// scenario's fault; cut to the width.
func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		p    testnet.Progress
		want string
	}{
		{testnet.Progress{Step: "converging", Converged: 28, N: 32, Elapsed: 12400 * time.Millisecond, StepElapsed: 12400 * time.Millisecond},
			"converging: 28/32 peers converged, 12s"},
		{testnet.Progress{Step: "holding still for 20s", Converged: 32, N: 32, Elapsed: 100 * time.Second, StepElapsed: 4 * time.Second},
			"holding still for 20s (4s): 32/32 peers converged, 1m40s"},
		{testnet.Progress{Scenario: "churn", Step: "replace …1a2b3c4d by a new peer", StepNum: 3, Steps: 6, Converged: 30, N: 32,
			Elapsed: 72 * time.Second, StepElapsed: 4 * time.Second},
			"churn, fault 3 of 6, 1m12s: 30/32 peers converged; replace …1a2b3c4d by a new peer (4s)"},
		{testnet.Progress{Scenario: "flap", Steps: 12, N: 16, Converged: 16, Elapsed: time.Second},
			"flap, fault 0 of 12, 1s: 16/16 peers converged"},
	} {
		if got := progressLine(tc.p); got != tc.want {
			t.Errorf("progressLine(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
	if got := cut("converging: 28/32", 12); got != "converging:…" {
		t.Errorf("cut = %q", got)
	}
	if got := cut("short", 12); got != "short" {
		t.Errorf("cut = %q", got)
	}
}
