//go:build linux

package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// madvCollapse is Linux's MADV_COLLAPSE (since 6.1; the syscall package
// does not name it).
const madvCollapse = 25

// adviseHugePages asks Linux for transparent huge pages on the process's
// anonymous read-write mappings of 4 MiB or more: the Go heap's arenas,
// which the runtime does not advise itself, and which a machine whose
// transparent huge pages are "madvise" (this one's) then backs with 4 KiB
// pages only. A run of 100,000 node machines reads a few GB at random,
// event by event: with 4 KiB pages nearly every node it touches costs a
// TLB miss and a walk of page tables that do not fit the cache either.
// MADV_HUGEPAGE makes the pages faulted in from now on 2 MiB where they
// can be; with collapse, MADV_COLLAPSE also merges those the mappings
// have into 2 MiB pages now (a copy, some seconds of the kernel's time
// for a few GB, on the goroutine that asks). It changes what the memory
// is made of, never what is in it.
func adviseHugePages(collapse bool) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 5 || f[1] != "rw-p" { // anonymous (no path) and private
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		z, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || z-a < 4<<20 {
			continue
		}
		// Advice: an error (an older kernel's) changes nothing.
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(a), uintptr(z-a), syscall.MADV_HUGEPAGE)
		if collapse {
			_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(a), uintptr(z-a), madvCollapse)
		}
	}
}
