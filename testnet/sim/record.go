package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/superpeer/superpeer/classic"
)

// Errors of the checker.
var (
	// ErrNoAgreement means the live nodes do not agree on one leader (at the
	// end of the record, for TimeToElect and FinalLeader).
	ErrNoAgreement = errors.New("sim: no agreement on a leader")
	// ErrWrongLeader means the nodes agree, but not on the expected leader.
	ErrWrongLeader = errors.New("sim: agreed on an unexpected leader")
	// ErrBadRecord means a Record refers to a node that does not exist.
	ErrBadRecord = errors.New("sim: malformed record")
)

// Change is one entry of the timeline: from At on, node Node reports State.
type Change struct {
	At    time.Duration
	Node  int
	State classic.State
}

// FaultKind is the kind of a Fault.
type FaultKind uint8

// Kinds of Fault.
const (
	FaultCrash   FaultKind = iota + 1 // Node crashed
	FaultRestart                      // Node came back with a fresh machine (its state is the next Change's; the simulator records one at the same instant)
	FaultNetwork                      // the partition or the cut links changed
)

// String returns the kind's name, such as "crash".
func (k FaultKind) String() string {
	switch k {
	case FaultCrash:
		return "crash"
	case FaultRestart:
		return "restart"
	case FaultNetwork:
		return "network"
	}
	return "unknown"
}

// Fault is a change of liveness or connectivity in the record.
type Fault struct {
	At   time.Duration
	Kind FaultKind
	// Node is the node that crashed or restarted.
	Node int
	// Groups (FaultNetwork) is the partition group of each node from At on,
	// nil when there is no partition.
	Groups []int32
	// Cuts (FaultNetwork) lists the cut links from At on, each as (i, j)
	// with i < j.
	Cuts [][2]int
}

// SendRun counts messages of one type sent at one instant.
type SendRun struct {
	At    time.Duration
	Type  classic.MsgType
	Count int
}

// Record is the history of a run, kept compact: state changes only when a
// state changes, faults, and message counts run-length encoded by time and
// type. Sim.Record returns one; tests may also build one by hand. Before the
// first entry every node is alive, connected and in the zero State.
//
// The checker methods replay the record. All entries at one instant are
// applied together before anything is judged, so a state that lasts zero
// time (two leaders for an instant while messages are processed) counts for
// nothing.
type Record struct {
	// IDs names the nodes, as in Config.
	IDs []classic.ID
	// Changes is the timeline of states, in time order.
	Changes []Change
	// Faults lists crashes, restarts and network changes, in time order.
	Faults []Fault
	// Sends counts the messages sent, in time order.
	Sends []SendRun
	// End is when observation stopped; the last states last until then.
	// Entries after End are ignored. Zero means the time of the last entry.
	End time.Duration
}

// Timeline returns node i's state changes, in order.
func (r *Record) Timeline(i int) []Change {
	var out []Change
	for _, c := range r.Changes {
		if c.Node == i {
			out = append(out, c)
		}
	}
	return out
}

// Messages returns the number of messages sent in [from, to).
func (r *Record) Messages(from, to time.Duration) int {
	k := 0
	for _, s := range r.sendsIn(from, to) {
		k += s.Count
	}
	return k
}

// MessagesByType returns the messages sent in [from, to), by type.
func (r *Record) MessagesByType(from, to time.Duration) map[classic.MsgType]int {
	out := map[classic.MsgType]int{}
	for _, s := range r.sendsIn(from, to) {
		out[s.Type] += s.Count
	}
	return out
}

func (r *Record) sendsIn(from, to time.Duration) []SendRun {
	lo, _ := slices.BinarySearchFunc(r.Sends, from, func(s SendRun, t time.Duration) int { return cmp.Compare(s.At, t) })
	hi, _ := slices.BinarySearchFunc(r.Sends, to, func(s SendRun, t time.Duration) int { return cmp.Compare(s.At, t) })
	if hi < lo {
		return nil
	}
	return r.Sends[lo:hi]
}

// replay applies the record in time order to a tracker restricted to scope
// (nil: all nodes) and calls visit after all entries of each instant, and
// once more at End (with atEnd set). The tracker then holds the state from
// that instant until the next visit.
func (r *Record) replay(scope []int, visit func(t time.Duration, tr *tracker, atEnd bool)) error {
	n := len(r.IDs)
	index := make(map[classic.ID]int32, n)
	for i, id := range r.IDs {
		index[id] = int32(i)
	}
	var in []bool
	if scope != nil {
		in = make([]bool, n)
		for _, i := range scope {
			if i < 0 || i >= n {
				return fmt.Errorf("%w: scope names node %d of %d", ErrBadRecord, i, n)
			}
			in[i] = true
		}
	}
	changes, faults := r.Changes, r.Faults
	byAt := func(a, b Change) int { return cmp.Compare(a.At, b.At) }
	if !slices.IsSortedFunc(changes, byAt) {
		changes = slices.Clone(changes)
		slices.SortStableFunc(changes, byAt)
	}
	faultAt := func(a, b Fault) int { return cmp.Compare(a.At, b.At) }
	if !slices.IsSortedFunc(faults, faultAt) {
		faults = slices.Clone(faults)
		slices.SortStableFunc(faults, faultAt)
	}
	for _, c := range changes {
		if c.Node < 0 || c.Node >= n {
			return fmt.Errorf("%w: change at %v names node %d of %d", ErrBadRecord, c.At, c.Node, n)
		}
	}
	for _, f := range faults {
		if (f.Kind == FaultCrash || f.Kind == FaultRestart) && (f.Node < 0 || f.Node >= n) {
			return fmt.Errorf("%w: %v at %v names node %d of %d", ErrBadRecord, f.Kind, f.At, f.Node, n)
		}
		if f.Kind == FaultNetwork && f.Groups != nil && len(f.Groups) != n {
			return fmt.Errorf("%w: network change at %v has %d group labels for %d nodes", ErrBadRecord, f.At, len(f.Groups), n)
		}
		for _, p := range f.Cuts {
			if p[0] < 0 || p[1] < 0 || p[0] >= n || p[1] >= n {
				return fmt.Errorf("%w: network change at %v cuts %v of %d nodes", ErrBadRecord, f.At, p, n)
			}
		}
	}
	end := r.End
	if end == 0 {
		if k := len(changes); k > 0 {
			end = changes[k-1].At
		}
		if k := len(faults); k > 0 {
			end = max(end, faults[k-1].At)
		}
	}
	tr := newTracker(r.IDs, index, in)
	ci, fi := 0, 0
	for ci < len(changes) || fi < len(faults) {
		t := time.Duration(1<<63 - 1)
		if ci < len(changes) {
			t = changes[ci].At
		}
		if fi < len(faults) {
			t = min(t, faults[fi].At)
		}
		if t > end {
			break
		}
		for ; fi < len(faults) && faults[fi].At == t; fi++ {
			switch f := faults[fi]; f.Kind {
			case FaultCrash:
				tr.setAlive(f.Node, false)
			case FaultRestart:
				tr.setAlive(f.Node, true)
			case FaultNetwork:
				cuts := make([][2]int, len(f.Cuts))
				for k, p := range f.Cuts {
					cuts[k] = pairKey(p[0], p[1])
				}
				tr.setTopology(f.Groups, cuts)
			}
		}
		for ; ci < len(changes) && changes[ci].At == t; ci++ {
			tr.setState(changes[ci].Node, changes[ci].State)
		}
		visit(t, tr, false)
	}
	visit(end, tr, true)
	return nil
}

// TimeToElect returns how long after from the live nodes in scope (nil: all
// nodes) came to agree on a leader and stayed in agreement until End. Nodes
// agree when, in each connected component (see Sim.Agreed), every live
// in-scope node names the same live in-scope node, which alone has role
// Leader. It is 0 when they already agreed at from and never stopped. It
// returns ErrNoAgreement if they do not agree at End.
//
// Under a partition, pass the nodes of one side as scope to time that side
// alone (for example the majority, when the minority is meant to stay
// leaderless).
func (r *Record) TimeToElect(from time.Duration, scope []int) (time.Duration, error) {
	since := time.Duration(-1)
	var why string
	err := r.replay(scope, func(t time.Duration, tr *tracker, atEnd bool) {
		if _, ok := tr.agreed(); ok {
			if since < 0 {
				since = t
			}
		} else {
			since = -1
			if atEnd {
				why = tr.describe()
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if since < 0 {
		return 0, fmt.Errorf("%w at %v: %s", ErrNoAgreement, r.End, why)
	}
	return max(since-from, 0), nil
}

// FinalLeader checks the state at End: the live nodes in scope (nil: all
// nodes) are connected, agree on one leader, and exactly one of them has role
// Leader. If expect is not classic.None the leader must be expect. It returns
// the leader, or ErrNoAgreement or ErrWrongLeader with an explanation.
func (r *Record) FinalLeader(expect classic.ID, scope []int) (classic.ID, error) {
	var (
		leader classic.ID
		ok     bool
		why    string
		comps  int
	)
	err := r.replay(scope, func(t time.Duration, tr *tracker, atEnd bool) {
		if atEnd {
			leader, ok = tr.agreed()
			comps = tr.nonEmpty
			if !ok {
				why = tr.describe()
			}
		}
	})
	switch {
	case err != nil:
		return classic.None, err
	case !ok:
		return classic.None, fmt.Errorf("%w at %v: %s", ErrNoAgreement, r.End, why)
	case comps > 1:
		return classic.None, fmt.Errorf("%w at %v: the live nodes form %d disconnected components, each with its own leader",
			ErrNoAgreement, r.End, comps)
	case expect != classic.None && leader != expect:
		return leader, fmt.Errorf("%w: %q, want %q", ErrWrongLeader, leader, expect)
	}
	return leader, nil
}

// Interval is a stretch of time [From, To) during which two or more live
// nodes had role Leader.
type Interval struct {
	From, To time.Duration
	// Leaders are the live nodes with role Leader at From.
	Leaders []classic.ID
	// Term is the shared term, for same-term intervals.
	Term uint64
	// Open is set when the interval lasted until End.
	Open bool
}

// SplitBrain summarises the times when two live nodes each believed
// themselves Leader, wherever they were (a partition does not excuse it).
type SplitBrain struct {
	// Intervals lists the times with two or more live leaders, whatever
	// their terms, and Total is their summed duration.
	Intervals []Interval
	Total     time.Duration
	// SameTerm lists the times when two or more live leaders shared a term,
	// which term-plus-majority algorithms must never allow, and
	// SameTermTotal is their summed duration. A same-term interval lies
	// within an interval of Intervals.
	SameTerm      []Interval
	SameTermTotal time.Duration
}

// SplitBrain finds the split-brain intervals of the record.
func (r *Record) SplitBrain() (SplitBrain, error) {
	var (
		sb              SplitBrain
		inAny, inSame   bool
		curAny, curSame Interval
	)
	err := r.replay(nil, func(t time.Duration, tr *tracker, atEnd bool) {
		if inAny && (atEnd || tr.leaders < 2) {
			curAny.To, curAny.Open = t, atEnd && tr.leaders >= 2
			sb.Intervals = append(sb.Intervals, curAny)
			sb.Total += curAny.To - curAny.From
			inAny = false
		}
		if inSame && (atEnd || tr.dupTerms == 0) {
			curSame.To, curSame.Open = t, atEnd && tr.dupTerms > 0
			sb.SameTerm = append(sb.SameTerm, curSame)
			sb.SameTermTotal += curSame.To - curSame.From
			inSame = false
		}
		if atEnd {
			return
		}
		if !inAny && tr.leaders >= 2 {
			inAny, curAny = true, Interval{From: t, Leaders: tr.leaderIDs()}
		}
		if !inSame && tr.dupTerms > 0 {
			inSame, curSame = true, sameTermInterval(t, tr)
		}
	})
	// Drop empty intervals that open exactly at End.
	sb.Intervals = slices.DeleteFunc(sb.Intervals, func(iv Interval) bool { return iv.To == iv.From })
	sb.SameTerm = slices.DeleteFunc(sb.SameTerm, func(iv Interval) bool { return iv.To == iv.From })
	return sb, err
}

// sameTermInterval opens a same-term interval: the lowest term shared by two
// live leaders, and those leaders.
func sameTermInterval(t time.Duration, tr *tracker) Interval {
	iv := Interval{From: t}
	first := true
	for term, k := range tr.termLeaders {
		if k >= 2 && (first || term < iv.Term) {
			iv.Term, first = term, false
		}
	}
	for i, st := range tr.state {
		if tr.alive[i] && st.Role == classic.Leader && st.Term == iv.Term {
			iv.Leaders = append(iv.Leaders, tr.ids[i])
		}
	}
	return iv
}

// Span is a stretch of time [From, To) during which a node was live and
// reported role Leader in term Term.
type Span struct {
	From, To time.Duration
	Term     uint64
}

// Leading returns the spans during which node i was live and Leader, in
// time order. A crash ends a span; a change of term starts a new one.
func (r *Record) Leading(i int) ([]Span, error) {
	var (
		out  []Span
		cur  Span
		open bool
	)
	err := r.replay([]int{i}, func(t time.Duration, tr *tracker, atEnd bool) {
		st := tr.state[i]
		leading := !atEnd && tr.alive[i] && st.Role == classic.Leader
		if open && (!leading || st.Term != cur.Term) {
			if cur.To = t; cur.To > cur.From {
				out = append(out, cur)
			}
			open = false
		}
		if leading && !open {
			cur, open = Span{From: t, Term: st.Term}, true
		}
	})
	return out, err
}
