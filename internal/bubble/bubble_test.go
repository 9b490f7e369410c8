package bubble

import (
	"runtime"
	"testing"
	"time"
)

// Many goroutines in one bubble receive, at the same virtual instant, from
// timer channels whose time has come: the load under which the race
// detector crashed (about one run in two of this test with GOMAXPROCS at
// 2 or more, before Test set it to 1). Time is virtual in the bubble, and
// GOMAXPROCS is back to what it was after.
func TestTimersInBubble(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	Test(t, func(t *testing.T) {
		if raceEnabled && runtime.GOMAXPROCS(0) != 1 {
			t.Errorf("GOMAXPROCS %d in the bubble under the race detector, want 1", runtime.GOMAXPROCS(0))
		}
		start := time.Now()
		done := make(chan struct{})
		finished := make(chan struct{})
		const workers = 16
		for range workers {
			go func() {
				defer func() { finished <- struct{}{} }()
				tm := time.NewTimer(0)
				defer tm.Stop()
				for range 2000 {
					<-tm.C
					tm.Reset(0)
				}
				<-done
			}()
		}
		time.Sleep(time.Hour)
		close(done)
		for range workers {
			<-finished
		}
		if d := time.Since(start); d != time.Hour {
			t.Errorf("%v of virtual time passed, want the hour slept", d)
		}
	})
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after the test, want %d as before", got, procs)
	}
}
