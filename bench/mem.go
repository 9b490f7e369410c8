package bench

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// memSampleEvery is how often a MemPeak samples the process's memory.
const memSampleEvery = 50 * time.Millisecond

// MemPeak samples the memory this process holds from the operating system
// (the Go runtime's mapped memory less what it has returned: heap, stacks
// and runtime metadata, about the resident size) until Stop, and keeps the
// highest sample. Start one after the work before it has been collected
// (StartMemPeak collects it and returns the freed memory to the operating
// system first), so that the peak belongs to the work measured.
type MemPeak struct {
	stop             chan struct{}
	done             sync.WaitGroup
	base, peak, live uint64
}

var memMetrics = []string{"/memory/classes/total:bytes", "/memory/classes/heap/released:bytes", "/gc/heap/live:bytes"}

// memNow is the memory the runtime holds now, in bytes.
func memNow(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// StartMemPeak collects garbage and returns it to the operating system,
// then samples until Stop.
func StartMemPeak() *MemPeak {
	debug.FreeOSMemory()
	m := &MemPeak{stop: make(chan struct{})}
	s := make([]metrics.Sample, len(memMetrics))
	for i, name := range memMetrics {
		s[i].Name = name
	}
	m.base = memNow(s)
	m.peak = m.base
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(memSampleEvery)
		defer t.Stop()
		for {
			m.peak = max(m.peak, memNow(s))
			m.live = max(m.live, s[2].Value.Uint64())
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// Live is the largest live heap seen: the bytes the last garbage
// collection found reachable, which does not depend on GOGC as the memory
// held does. Read it after Stop.
func (m *MemPeak) Live() uint64 { return m.live }

// Base is the memory held at the start, after the GC.
func (m *MemPeak) Base() uint64 { return m.base }

// Stop ends the sampling and returns the peak in bytes.
func (m *MemPeak) Stop() uint64 {
	close(m.stop)
	m.done.Wait()
	return m.peak
}
