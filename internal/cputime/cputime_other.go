//go:build !unix

package cputime

import "time"

// Self is not read on this system.
func Self() (time.Duration, bool) { return 0, false }
