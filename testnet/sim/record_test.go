package sim

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
)

func follower(leader classic.ID, term uint64) classic.State {
	return classic.State{Role: classic.Follower, Leader: leader, Term: term}
}

func leaderState(id classic.ID, term uint64) classic.State {
	return classic.State{Role: classic.Leader, Leader: id, Term: term}
}

// constructed is a hand-written timeline of three nodes with known answers:
//
//	100-120ms  n0002 leads term 1, n0000 and n0001 follow: agreed at 120ms
//	300-450ms  n0000 leads term 2 while n0002 still leads term 1 (split brain)
//	500-520ms  n0001 also leads term 2 (split brain in one term)
//	520ms      everyone follows n0000: agreed
//	800ms      n0000 crashes
//	850ms      n0002 leads term 3; n0001 follows it at 900ms: agreed
//	950ms      n0001 leads and steps down in the same instant (no split brain)
func constructed() *Record {
	a, b, c := classic.ID("n0000"), classic.ID("n0001"), classic.ID("n0002")
	return &Record{
		IDs: []classic.ID{a, b, c},
		Changes: []Change{
			{0, 0, follower(classic.None, 0)}, {0, 1, follower(classic.None, 0)}, {0, 2, follower(classic.None, 0)},
			{100 * ms, 2, leaderState(c, 1)},
			{100 * ms, 0, follower(c, 1)},
			{120 * ms, 1, follower(c, 1)},
			{300 * ms, 0, leaderState(a, 2)},
			{450 * ms, 2, follower(a, 2)},
			{500 * ms, 1, leaderState(b, 2)},
			{520 * ms, 1, follower(a, 2)},
			{850 * ms, 2, leaderState(c, 3)},
			{900 * ms, 1, follower(c, 3)},
			{950 * ms, 1, leaderState(b, 3)},
			{950 * ms, 1, follower(c, 3)},
		},
		Faults: []Fault{{At: 800 * ms, Kind: FaultCrash, Node: 0}},
		Sends: []SendRun{
			{0, classic.MsgElection, 4}, {100 * ms, classic.MsgCoordinator, 2},
			{100 * ms, classic.MsgHeartbeat, 2}, {500 * ms, classic.MsgHeartbeat, 1}, {999 * ms, classic.MsgHeartbeat, 10},
		},
		End: 1000 * ms,
	}
}

func TestSplitBrainOfKnownDuration(t *testing.T) {
	sb, err := constructed().SplitBrain()
	if err != nil {
		t.Fatal(err)
	}
	want := SplitBrain{
		Intervals: []Interval{
			{From: 300 * ms, To: 450 * ms, Leaders: []classic.ID{"n0000", "n0002"}},
			{From: 500 * ms, To: 520 * ms, Leaders: []classic.ID{"n0000", "n0001"}},
		},
		Total:         170 * ms,
		SameTerm:      []Interval{{From: 500 * ms, To: 520 * ms, Leaders: []classic.ID{"n0000", "n0001"}, Term: 2}},
		SameTermTotal: 20 * ms,
	}
	if !reflect.DeepEqual(sb, want) {
		t.Errorf("SplitBrain =\n %+v\nwant\n %+v", sb, want)
	}
}

func TestSplitBrainOpenAtEnd(t *testing.T) {
	r := &Record{
		IDs:     []classic.ID{"a", "b", "c"},
		Changes: []Change{{10 * ms, 0, leaderState("a", 1)}, {40 * ms, 1, leaderState("b", 1)}},
		Faults:  []Fault{{At: 60 * ms, Kind: FaultCrash, Node: 2}}, // a follower: no effect
		End:     100 * ms,
	}
	sb, err := r.SplitBrain()
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Intervals) != 1 || sb.Intervals[0].From != 40*ms || sb.Intervals[0].To != 100*ms || !sb.Intervals[0].Open {
		t.Errorf("Intervals = %+v, want one open [40ms, 100ms)", sb.Intervals)
	}
	if sb.Total != 60*ms || sb.SameTermTotal != 60*ms {
		t.Errorf("totals %v, %v; want 60ms each", sb.Total, sb.SameTermTotal)
	}
	// A crashed leader no longer counts.
	r.Faults = append(r.Faults, Fault{At: 70 * ms, Kind: FaultCrash, Node: 1})
	sb, _ = r.SplitBrain()
	if sb.Total != 30*ms || sb.Intervals[0].Open {
		t.Errorf("with the crash at 70ms: %+v", sb)
	}
}

func TestTimeToElect(t *testing.T) {
	r := constructed()
	cases := []struct {
		from  time.Duration
		scope []int
		want  time.Duration
	}{
		{0, nil, 900 * ms},        // the final stretch of agreement starts at 900ms
		{800 * ms, nil, 100 * ms}, // from the crash of the leader
		{850 * ms, nil, 50 * ms},
		{950 * ms, nil, 0}, // already agreed and stays so
		{0, []int{1, 2}, 900 * ms},
		{800 * ms, []int{2}, 50 * ms}, // node 2 alone agrees with itself once it leads
	}
	for _, c := range cases {
		got, err := r.TimeToElect(c.from, c.scope)
		if err != nil || got != c.want {
			t.Errorf("TimeToElect(%v, %v) = %v, %v; want %v", c.from, c.scope, got, err, c.want)
		}
	}
	// Node 1 follows n0002, which is outside the scope {0, 1} (and node 0
	// is down): no agreement.
	if _, err := r.TimeToElect(0, []int{0, 1}); !errors.Is(err, ErrNoAgreement) {
		t.Errorf("scope {0,1}: err = %v, want ErrNoAgreement", err)
	}
	// Cut the record before the final election: no agreement at End.
	r.End = 870 * ms
	if _, err := r.TimeToElect(0, nil); !errors.Is(err, ErrNoAgreement) {
		t.Errorf("End 870ms: err = %v, want ErrNoAgreement", err)
	}
	r.End = 600 * ms
	if got, err := r.TimeToElect(0, nil); err != nil || got != 520*ms {
		t.Errorf("End 600ms: TimeToElect = %v, %v; want 520ms", got, err)
	}
}

func TestFinalLeader(t *testing.T) {
	r := constructed()
	if got, err := r.FinalLeader("n0002", nil); err != nil || got != "n0002" {
		t.Errorf("FinalLeader(n0002) = %q, %v", got, err)
	}
	if got, err := r.FinalLeader(classic.None, nil); err != nil || got != "n0002" {
		t.Errorf("FinalLeader(any) = %q, %v", got, err)
	}
	if got, err := r.FinalLeader("n0001", nil); !errors.Is(err, ErrWrongLeader) || got != "n0002" {
		t.Errorf("FinalLeader(n0001) = %q, %v; want n0002 and ErrWrongLeader", got, err)
	}
	r.End = 870 * ms // n0001 still follows the crashed n0000
	if _, err := r.FinalLeader(classic.None, nil); !errors.Is(err, ErrNoAgreement) {
		t.Errorf("at 870ms: err = %v, want ErrNoAgreement", err)
	}
}

func TestAgreementPerComponent(t *testing.T) {
	// Four nodes in two partition groups, each with its own leader.
	r := &Record{
		IDs: []classic.ID{"a", "b", "c", "d"},
		Changes: []Change{
			{10 * ms, 0, leaderState("a", 1)}, {10 * ms, 1, follower("a", 1)},
			{10 * ms, 2, follower("a", 1)}, {10 * ms, 3, follower("a", 1)},
			{200 * ms, 3, leaderState("d", 2)}, {250 * ms, 2, follower("d", 2)},
		},
		Faults: []Fault{{At: 100 * ms, Kind: FaultNetwork, Groups: []int32{0, 0, 1, 1}}},
		End:    300 * ms,
	}
	if got, err := r.TimeToElect(100*ms, nil); err != nil || got != 150*ms {
		t.Errorf("TimeToElect across groups = %v, %v; want 150ms (each side agrees at 250ms)", got, err)
	}
	if got, err := r.TimeToElect(100*ms, []int{0, 1}); err != nil || got != 0 {
		t.Errorf("TimeToElect of side {a,b} = %v, %v; want 0", got, err)
	}
	if _, err := r.FinalLeader(classic.None, nil); !errors.Is(err, ErrNoAgreement) {
		t.Errorf("FinalLeader over two components: err = %v, want ErrNoAgreement", err)
	}
	if got, err := r.FinalLeader("d", []int{2, 3}); err != nil || got != "d" {
		t.Errorf("FinalLeader(side {c,d}) = %q, %v", got, err)
	}
	sb, _ := r.SplitBrain()
	if sb.Total != 100*ms || sb.SameTermTotal != 0 {
		t.Errorf("split brain %+v, want 100ms in different terms", sb)
	}

	// Cutting node a from both others isolates it; cutting only one link
	// does not split anything.
	r.Faults = []Fault{{At: 100 * ms, Kind: FaultNetwork, Cuts: [][2]int{{0, 1}}}}
	if _, err := r.TimeToElect(0, nil); !errors.Is(err, ErrNoAgreement) {
		t.Errorf("one cut link: err = %v, want ErrNoAgreement (one component, two leaders)", err)
	}
	r.Faults = []Fault{{At: 100 * ms, Kind: FaultNetwork, Cuts: [][2]int{{0, 1}, {2, 0}, {0, 3}}}}
	r.Changes = append(r.Changes, Change{260 * ms, 1, follower("d", 2)})
	if got, err := r.TimeToElect(0, nil); err != nil || got != 260*ms {
		t.Errorf("a isolated by cuts: TimeToElect = %v, %v; want 260ms", got, err)
	}
}

func TestMessagesInWindow(t *testing.T) {
	r := constructed()
	cases := []struct {
		from, to time.Duration
		want     int
	}{
		{0, 999 * ms, 9}, {0, r.End, 19}, {0, 100 * ms, 4}, {100 * ms, 101 * ms, 4}, {101 * ms, 999 * ms, 1}, {2000 * ms, 3000 * ms, 0},
		{500 * ms, 100 * ms, 0},
	}
	for _, c := range cases {
		if got := r.Messages(c.from, c.to); got != c.want {
			t.Errorf("Messages(%v, %v) = %d, want %d", c.from, c.to, got, c.want)
		}
	}
	got := r.MessagesByType(100*ms, 600*ms)
	want := map[classic.MsgType]int{classic.MsgCoordinator: 2, classic.MsgHeartbeat: 3}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MessagesByType = %v, want %v", got, want)
	}
}

func TestRecordValidation(t *testing.T) {
	r := &Record{IDs: []classic.ID{"a"}, Changes: []Change{{At: 0, Node: 3}}}
	if _, err := r.SplitBrain(); !errors.Is(err, ErrBadRecord) {
		t.Errorf("node out of range: err = %v", err)
	}
	r = &Record{IDs: []classic.ID{"a", "b"}, Faults: []Fault{{Kind: FaultNetwork, Groups: []int32{0}}}}
	if _, err := r.TimeToElect(0, nil); !errors.Is(err, ErrBadRecord) {
		t.Errorf("short Groups: err = %v", err)
	}
	if _, err := (&Record{IDs: []classic.ID{"a"}}).FinalLeader(classic.None, []int{1}); !errors.Is(err, ErrBadRecord) {
		t.Errorf("scope out of range: err = %v", err)
	}
	// Unsorted entries and End zero (the last entry's time) are accepted.
	r = &Record{IDs: []classic.ID{"a", "b"}, Changes: []Change{{50 * ms, 1, follower("a", 1)}, {20 * ms, 0, leaderState("a", 1)}}}
	if got, err := r.TimeToElect(0, nil); err != nil || got != 50*ms {
		t.Errorf("unsorted, End 0: TimeToElect = %v, %v; want 50ms", got, err)
	}
}
