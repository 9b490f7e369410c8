package bubble

import (
	"runtime"
	"testing"
	"testing/synctest"
)

// Test runs f in a new synctest bubble of t, as synctest.Test does; under
// the race detector it runs it with GOMAXPROCS set to 1, and sets it back
// after (see the package documentation for why).
func Test(t *testing.T, f func(*testing.T)) {
	t.Helper()
	if raceEnabled {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	synctest.Test(t, f)
}
