//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Self is the CPU time this process has used, user and system, its
// garbage collector's included, to the microsecond; false where it cannot
// be read.
func Self() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
