// Package bubble runs a test in a testing/synctest bubble (virtual time),
// as synctest.Test does, but on one P when the race detector is on.
//
// Go 1.26's race detector crashes, now and then, in a bubble whose timers
// fire on two threads at once: the runtime runs every timer of a bubble
// under one race context (runtime/time.go, unlockAndRun: the bubble's
// timers.raceCtx), and a goroutine that receives from a timer channel
// whose time has come runs that timer on its own thread without the
// timers' lock (maybeRunChan). Two threads then use one ThreadSanitizer
// thread state at once, and the process dies with "ThreadSanitizer: CHECK
// failed" (exit status 66) or SIGSEGV in __tsan::SlotLock, under
// runtime.(*timer).maybeRunChan. The same crash is reported upstream for
// Go 1.26.0 (golang/go#78156, open). With GOMAXPROCS at 1 no two threads
// run Go code at once, and it does not happen; the race detector still
// checks every access against the happens-before order, which does not
// depend on how many Ps run the goroutines.
//
// Use Test in place of synctest.Test in tests that the race stage of make
// test runs. It changes GOMAXPROCS for the whole process while the test
// runs, so it is for tests that do not call t.Parallel.
package bubble
