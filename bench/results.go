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
	var order []int
	keep := func(part string, empty bool, take func()) {
		if !empty {
			return
		}
		take()
		i := origin(part)
		if len(kept[i]) == 0 {
			order = append(order, i)
		}
		kept[i] = append(kept[i], part)
	}
	keep("selection", len(out.Selection) == 0 && len(old.Selection) > 0, func() { out.Selection = old.Selection })
	keep("election", len(out.Election) == 0 && len(old.Election) > 0, func() { out.Election = old.Election })
	keep("repair", len(out.Repair) == 0 && len(old.Repair) > 0, func() { out.Repair = old.Repair })
	keep("live_repair", len(out.LiveRepair) == 0 && len(old.LiveRepair) > 0, func() { out.LiveRepair = old.LiveRepair })
	keep("sim_live", len(out.SimLive) == 0 && len(old.SimLive) > 0, func() { out.SimLive = old.SimLive })
	keep("geo_live", len(out.GeoLive) == 0 && len(old.GeoLive) > 0, func() { out.GeoLive = old.GeoLive })
	keep("sim_scale", len(out.SimScale) == 0 && len(old.SimScale) > 0, func() { out.SimScale = old.SimScale })
	keep("node_scale", len(out.NodeScale) == 0 && len(old.NodeScale) > 0, func() { out.NodeScale = old.NodeScale })
	keep("live_scale", len(out.LiveScale) == 0 && len(old.LiveScale) > 0, func() { out.LiveScale = old.LiveScale })
	keep("growth", len(out.Growth) == 0 && len(old.Growth) > 0, func() { out.Growth = old.Growth })
	keep("attack", len(out.Attack) == 0 && len(old.Attack) > 0, func() { out.Attack = old.Attack })
	keep("live_attack", len(out.LiveAttack) == 0 && len(old.LiveAttack) > 0, func() { out.LiveAttack = old.LiveAttack })
	slices.Sort(order)
	for _, i := range order {
		e := runs[i]
		e.Kept = kept[i]
		out.Earlier = append(out.Earlier, e)
	}
	return &out
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
