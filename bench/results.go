package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Results is everything one `peer bench` run measured: the JSON file it
// writes, and the source of its tables, plots and BENCHMARKS.md.
type Results struct {
	Command   string    `json:"command"`
	Machine   Machine   `json:"machine"`
	StartedAt time.Time `json:"started_at"`
	TookS     float64   `json:"took_s"`
	Suites    []string  `json:"suites"`
	// Sim and Live say which halves ran: the simulator's, the live
	// testnet's, or both.
	Sim  bool `json:"sim"`
	Live bool `json:"live"`
	// Seed seeded every random choice; Quick marks a smoke run of small
	// sizes, not a measurement.
	Seed  uint64 `json:"seed"`
	Quick bool   `json:"quick,omitempty"`

	Selection []SelectionRow `json:"selection,omitempty"`
	Election  []ElectionRow  `json:"election,omitempty"`
	Repair    []RepairRow    `json:"repair,omitempty"`
	// LiveRepair is the repair suite's live half.
	LiveRepair []LiveRepairRow `json:"live_repair,omitempty"`
	// SimLive is the repair suite's side-by-side of one scenario on the
	// node simulator and on a live testnet.
	SimLive []SimLiveRow `json:"sim_live,omitempty"`
	// GeoLive is the selection suite's geometric placement, live in
	// virtual time and in the node simulator on the same hosts
	// (TestGeoLiveVirtual, GeoLive).
	GeoLive []GeoLiveRow `json:"geo_live,omitempty"`
	// SimScale is the selection simulators at scale (dhtselect.Simulate,
	// geometric.Simulate), NodeScale the node machines at scale
	// (testnet/nodesim).
	SimScale  []SimScaleRow  `json:"sim_scale,omitempty"`
	NodeScale []NodeScaleRow `json:"node_scale,omitempty"`
	LiveScale []LiveScaleRow `json:"live_scale,omitempty"`
	// Growth is the scale suite's split and merge: node machines whose
	// network doubles or halves (Growth).
	Growth []GrowthRow `json:"growth,omitempty"`
	// Attack is the attack suite: lying peers, before and after the
	// defences.
	Attack []AttackRow `json:"attack,omitempty"`
	// LiveAttack is the attack suite's live half: hostile clients against
	// a swarm of node processes.
	LiveAttack []LiveAttackRow `json:"live_attack,omitempty"`
}

// Machine describes where a run was made.
type Machine struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	MemoryGiB int    `json:"memory_gib,omitempty"`
	Go        string `json:"go"`
}

// ThisMachine describes the machine this process runs on.
func ThisMachine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if f := strings.Fields(procField("/proc/meminfo", "MemTotal")); len(f) > 0 { // "24604280 kB"
		if kb, err := strconv.Atoi(f[0]); err == nil {
			m.MemoryGiB = (kb + 1<<19) >> 20
		}
	}
	return m
}

// procField returns the value of the first line "name: value" of a /proc
// file, or "".
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
