package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/testnet"
)

// A traffic window shorter than an announce interval measured nothing at
// all once (CI: peer bench --quick, 8 nodes, a 2 s window against a 5 s
// interval: every member's registration fell outside it). The window is
// stretched to one announce interval, and every ordinary peer's periodic
// registration falls in it. (The quiet before it is stretched so too.)
func TestLiveWindowCoversAnAnnounce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a live testnet of 8 nodes")
	}
	rows, err := LiveScale(context.Background(), LiveScaleConfig{Sizes: []int{8}, Strategy: testnet.StrategyDHT, Window: time.Millisecond, Quiet: time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	if !r.Converged {
		t.Fatalf("8 nodes did not converge: %s", r.Error)
	}
	if r.WindowS < r.AnnounceIntervalS {
		t.Errorf("window %v s, shorter than the announce interval %v s", r.WindowS, r.AnnounceIntervalS)
	}
	if r.Ordinary <= 0 || r.OrdinaryByProtocol["register"] <= 0 || r.BytesPerPeerPerS <= 0 {
		t.Errorf("no traffic measured in the window: %+v", r)
	}
}

// A negative window or quiet is refused before any node starts, with an
// error that names it.
func TestLiveScaleBadConfig(t *testing.T) {
	for _, c := range []LiveScaleConfig{{Sizes: []int{8}, Window: -time.Second}, {Sizes: []int{8}, Quiet: -time.Second}} {
		_, err := LiveScale(context.Background(), c)
		if !errors.Is(err, ErrBench) {
			t.Errorf("LiveScale(window %v, quiet %v) = %v, want ErrBench", c.Window, c.Quiet, err)
		} else if !strings.Contains(err.Error(), "quiet -1s") && c.Quiet < 0 {
			t.Errorf("LiveScale(quiet %v): %v, want the quiet named", c.Quiet, err)
		}
	}
}
