package testnet

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Process is what a node process of a Net (Config.Exec) shows of itself,
// for benchmarks that measure a node under attack: its addresses, the
// goroutines and bans of its last report, and what the operating system
// says of its memory and CPU time.
type Process struct {
	PID  int
	Addr peer.AddrInfo
	// RSS and PeakRSS are its resident memory now and at its peak, in
	// bytes, read from /proc, and zero where there is none (not Linux).
	// CPU is its user and system time so far: to the microsecond as its
	// last report gives it (at most 50 ms and 1 ms of CPU old), or from
	// /proc in clock ticks (10 ms) where the process cannot read it.
	RSS, PeakRSS uint64
	CPU          time.Duration
	// Goroutines and Banned are as of its last report (every 50 ms).
	Goroutines int
	Banned     []peer.ID
}

// ErrNotProcess: the node does not run as its own process.
var ErrNotProcess = errors.New("testnet: the node is not a process (Config.Exec)")

// Process returns what the live node id shows of itself as a process.
func (t *Net) Process(id peer.ID) (Process, error) {
	i, err := t.index(id)
	if err != nil {
		return Process{}, err
	}
	pf, ok := t.fab.(*procFabric)
	if !ok {
		return Process{}, ErrNotProcess
	}
	p, err := pf.get(i)
	if err != nil {
		return Process{}, err
	}
	p.mu.Lock()
	out := Process{PID: p.cmd.Process.Pid, Addr: peer.AddrInfo{ID: p.id, Addrs: p.addrs}, Goroutines: p.report.Goroutines}
	banned, cpu := p.report.Banned, time.Duration(p.report.CPUMicros)*time.Microsecond
	p.mu.Unlock()
	for _, s := range banned {
		b, err := peer.Decode(s)
		if err != nil {
			return out, fmt.Errorf("testnet: node %d reports a ban of %q: %w", i, s, err)
		}
		out.Banned = append(out.Banned, b)
	}
	out.RSS, out.PeakRSS, out.CPU = procStats(out.PID)
	if cpu > 0 {
		out.CPU = cpu
	}
	return out, nil
}

// clockTicks is the unit of /proc/PID/stat's times: USER_HZ, 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procStats reads a process's resident memory (now, peak) and CPU time
// from /proc; zeros when it cannot.
func procStats(pid int) (rss, peak uint64, cpu time.Duration) {
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(status))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 3 || f[2] != "kB" {
				continue
			}
			v, _ := strconv.ParseUint(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				rss = v << 10
			case "VmHWM:":
				peak = v << 10
			}
		}
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// The command name (field 2) is in parentheses and may hold
		// spaces: count the fields after its closing one. utime and
		// stime are fields 14 and 15.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseUint(f[11], 10, 64)
				s, _ := strconv.ParseUint(f[12], 10, 64)
				cpu = time.Duration(u+s) * time.Second / clockTicks
			}
		}
	}
	return rss, peak, cpu
}
