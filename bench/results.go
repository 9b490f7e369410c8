package bench

import (
	"bufio"
	"os"
	"runtime"
	"slices"
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

	// Earlier names the runs whose figures this file kept: a run of some
	// suites, or of one half, written into a folder whose results.json
	// held others (WithEarlier).
	Earlier []EarlierRun `json:"earlier,omitempty"`
}

// EarlierRun is a run whose figures a results file kept: Kept lists
// them by their JSON names (e.g. "election", "live_scale").
type EarlierRun struct {
	Command   string    `json:"command"`
	StartedAt time.Time `json:"started_at"`
	Machine   Machine   `json:"machine"`
	Kept      []string  `json:"kept"`
}

// WithEarlier returns r with the figures of old that r has none of: what
// results.json holds after a run of some suites (or of one half) into a
// folder where an earlier run left the others, so that no figure is lost.
// Each kept part is named in Earlier with the run that made it (old's
// own, or one old had kept in turn). r itself is not changed.
func (r *Results) WithEarlier(old *Results) *Results {
	out := *r
	out.Earlier = slices.Clone(r.Earlier) // r's own, when r kept parts itself
	kept := map[int][]string{}            // the run that made them (its index in runs) -> old's parts kept
	runs := []EarlierRun{{Command: old.Command, StartedAt: old.StartedAt, Machine: old.Machine}}
	runs = append(runs, old.Earlier...)
	origin := func(part string) int { // which of runs made old's part
		for i, e := range old.Earlier {
			if slices.Contains(e.Kept, part) {
				return i + 1
			}
		}
		return 0
	}
	var parts []string // old's parts kept, by their JSON names
	keepPart(&parts, "selection", &out.Selection, old.Selection)
	keepPart(&parts, "election", &out.Election, old.Election)
	keepPart(&parts, "repair", &out.Repair, old.Repair)
	keepPart(&parts, "live_repair", &out.LiveRepair, old.LiveRepair)
	keepPart(&parts, "sim_live", &out.SimLive, old.SimLive)
	keepPart(&parts, "geo_live", &out.GeoLive, old.GeoLive)
	keepPart(&parts, "sim_scale", &out.SimScale, old.SimScale)
	keepPart(&parts, "node_scale", &out.NodeScale, old.NodeScale)
	keepPart(&parts, "live_scale", &out.LiveScale, old.LiveScale)
	keepPart(&parts, "growth", &out.Growth, old.Growth)
	keepPart(&parts, "attack", &out.Attack, old.Attack)
	keepPart(&parts, "live_attack", &out.LiveAttack, old.LiveAttack)
	var order []int
	for _, part := range parts {
		i := origin(part)
		if len(kept[i]) == 0 {
			order = append(order, i)
		}
		kept[i] = append(kept[i], part)
	}
	slices.Sort(order)
	for _, i := range order {
		e := runs[i]
		e.Kept = kept[i]
		out.Earlier = append(out.Earlier, e)
	}
	return &out
}

// keepPart takes old's rows of a part into *dst when the new run made
// none, and notes the part's name in parts.
func keepPart[T any](parts *[]string, name string, dst *[]T, old []T) {
	if len(*dst) == 0 && len(old) > 0 {
		*dst = old
		*parts = append(*parts, name)
	}
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
