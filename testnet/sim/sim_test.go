package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/testnet/latency"
)

const ms = time.Millisecond

// ids returns n IDs that sort in index order: n0000, n0001, ...
func ids(n int) []classic.ID {
	out := make([]classic.ID, n)
	for i := range out {
		out[i] = classic.ID(fmt.Sprintf("n%04d", i))
	}
	return out
}

// probes builds a simulation of passive probe machines; probes[i] is node
// i's current machine (replaced on Restart).
func probes(t *testing.T, cfg Config) (*Sim, []*probe) {
	t.Helper()
	ps := make([]*probe, len(cfg.IDs))
	cfg.Factory = func(i int, id classic.ID, restarted bool) classic.Machine {
		ps[i] = &probe{id: id, restarted: restarted}
		return ps[i]
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, ps
}

// floods builds a simulation of flood machines over a full mesh.
func floods(t testing.TB, cfg Config) (*Sim, []*flood) {
	t.Helper()
	fs := make([]*flood, len(cfg.IDs))
	cfg.Factory = func(i int, id classic.ID, restarted bool) classic.Machine {
		peers := slices.DeleteFunc(slices.Clone(cfg.IDs), func(p classic.ID) bool { return p == id })
		fs[i] = newFlood(id, peers, 20, 10, 30)
		return fs[i]
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, fs
}

func TestNewRejectsBadConfig(t *testing.T) {
	fac := func(int, classic.ID, bool) classic.Machine { return &probe{} }
	holes, _ := latency.Parse(strings.NewReader("0 -1\n-1 0\n"))
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no IDs", Config{Factory: fac}, "no IDs"},
		{"no factory", Config{IDs: ids(2)}, "Factory is nil"},
		{"empty ID", Config{IDs: []classic.ID{"a", ""}, Factory: fac}, "IDs[1] is empty"},
		{"duplicate", Config{IDs: []classic.ID{"a", "b", "a"}, Factory: fac}, `IDs[0] and IDs[2] are both "a"`},
		{"loss", Config{IDs: ids(2), Factory: fac, Loss: 1}, "Loss 1 is not in [0, 1)"},
		{"NaN loss", Config{IDs: ids(2), Factory: fac, Loss: math.NaN()}, "Loss"},
		{"jitter", Config{IDs: ids(2), Factory: fac, Jitter: -1}, "negative Jitter"},
		{"small matrix", Config{IDs: ids(3), Factory: fac, Latency: latency.Constant(2, ms)}, "node 2 is on host 2"},
		{"bad host", Config{IDs: ids(3), Factory: fac, Latency: latency.Constant(2, ms),
			HostOf: func(i int) int { return i - 1 }}, "node 0 is on host -1"},
		{"missing RTT", Config{IDs: ids(2), Factory: fac, Latency: holes}, "misses 1 pairs"},
		{"nil machine", Config{IDs: ids(2), Factory: func(int, classic.ID, bool) classic.Machine { return nil }}, "returned nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New: err = %v, want ErrConfig containing %q", err, c.want)
			}
		})
	}
	if _, err := New(Config{IDs: ids(2), Factory: fac, Latency: holes, MissingRTT: ms}); err != nil {
		t.Errorf("with MissingRTT: %v", err)
	}
}

// TestLatencyFromMatrix checks delivery times against the matrix, the host
// mapping, the From rewrite, and the order of simultaneous events, step by
// step.
func TestLatencyFromMatrix(t *testing.T) {
	m, err := latency.Parse(strings.NewReader(`
0   40  100
40  0   30
100 30  0
`))
	if err != nil {
		t.Fatal(err)
	}
	// Nodes 3 and 4 share hosts 0 and 2 with nodes 0 and 2.
	s, ps := probes(t, Config{IDs: ids(5), Latency: m, HostOf: func(i int) int { return []int{0, 1, 2, 0, 2}[i] },
		TickInterval: -1})
	id := s.ID
	s.Send(0, classic.Message{Type: classic.MsgElection, To: id(2), From: "forged", Term: 1})
	s.Send(0, classic.Message{Type: classic.MsgElection, To: id(1), Term: 2})
	s.Send(1, classic.Message{Type: classic.MsgOK, To: id(2), Term: 3})
	s.Send(3, classic.Message{Type: classic.MsgElection, To: id(4), Term: 4}) // hosts 0 -> 2
	s.Send(3, classic.Message{Type: classic.MsgElection, To: id(0), Term: 5}) // same host
	s.Send(0, classic.Message{Type: classic.MsgElection, To: id(2), Term: 6}) // ties with Term 1

	type got struct {
		at   time.Duration
		node int
		from classic.ID
		term uint64
	}
	want := []got{
		{0, 0, id(3), 5},
		{15 * ms, 2, id(1), 3},
		{20 * ms, 1, id(0), 2},
		{50 * ms, 2, id(0), 1}, // the forged From is overwritten
		{50 * ms, 4, id(3), 4},
		{50 * ms, 2, id(0), 6}, // same instant: in sending order
	}
	for k, w := range want {
		ev, ok := s.Step()
		if !ok {
			t.Fatalf("step %d: queue empty", k)
		}
		g := got{ev.At, ev.Node, ev.Msg.From, ev.Msg.Term}
		if ev.Kind != Delivered || g != w {
			t.Errorf("step %d: %v %+v, want delivered %+v", k, ev.Kind, g, w)
		}
		if s.Now() != ev.At {
			t.Errorf("step %d: Now = %v, want %v", k, s.Now(), ev.At)
		}
	}
	if ev, ok := s.Step(); ok {
		t.Errorf("extra event %+v", ev)
	}
	if n := len(ps[2].got); n != 3 || ps[2].got[0].From != id(1) {
		t.Errorf("node 2 received %v", ps[2].got)
	}
	st := s.Stats()
	if st.Sent != 6 || st.Delivered != 6 || st.SentByType[classic.MsgElection] != 5 || st.SentByType[classic.MsgOK] != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestIDsAreCopiedOnSend(t *testing.T) {
	s, ps := probes(t, Config{IDs: ids(3), TickInterval: -1})
	list := []classic.ID{"x", "y"}
	s.Send(0, classic.Message{Type: classic.MsgElection, To: s.ID(1), IDs: list})
	s.Send(0, classic.Message{Type: classic.MsgElection, To: s.ID(2), IDs: list})
	list[0] = "mutated by the sender"
	s.Run(time.Second)
	ps[1].got[0].IDs[1] = "mutated by a receiver"
	if got := ps[2].got[0].IDs; !slices.Equal(got, []classic.ID{"x", "y"}) {
		t.Errorf("node 2 received %v, want [x y]", got)
	}
}

func TestJitterReorders(t *testing.T) {
	s, ps := probes(t, Config{IDs: ids(2), Latency: latency.Constant(2, 100*ms), Jitter: 20 * ms, TickInterval: -1, Seed: 3})
	const k = 200
	for i := range k {
		s.Send(0, classic.Message{Type: classic.MsgHeartbeat, To: s.ID(1), Term: uint64(i)})
	}
	var lo, hi time.Duration = math.MaxInt64, 0
	for {
		ev, ok := s.Step()
		if !ok {
			break
		}
		lo, hi = min(lo, ev.At), max(hi, ev.At)
	}
	if lo < 50*ms || hi >= 70*ms {
		t.Errorf("deliveries in [%v, %v], want within [50ms, 70ms)", lo, hi)
	}
	if len(ps[1].got) != k {
		t.Fatalf("delivered %d of %d", len(ps[1].got), k)
	}
	inversions := 0
	for i := 1; i < k; i++ {
		if ps[1].got[i].Term < ps[1].got[i-1].Term {
			inversions++
		}
	}
	if inversions == 0 {
		t.Error("jitter did not reorder any message")
	}
}

func TestLossRate(t *testing.T) {
	const k, p = 20000, 0.25
	s, ps := probes(t, Config{IDs: ids(2), Loss: p, TickInterval: -1, Seed: 7})
	for i := range k {
		s.Send(0, classic.Message{Type: classic.MsgHeartbeat, To: s.ID(1), Term: uint64(i)})
	}
	lostEvents := 0
	for {
		ev, ok := s.Step()
		if !ok {
			break
		}
		if ev.Kind == Lost {
			lostEvents++
		}
	}
	st := s.Stats()
	sigma := math.Sqrt(k * p * (1 - p))
	if math.Abs(float64(st.Lost)-k*p) > 4*sigma {
		t.Errorf("lost %d of %d, want %v ± %.0f", st.Lost, k, k*p, 4*sigma)
	}
	if int(st.Lost) != lostEvents || int(st.Lost)+len(ps[1].got) != k || st.Delivered != uint64(len(ps[1].got)) {
		t.Errorf("lost %d (events %d) + delivered %d != sent %d", st.Lost, lostEvents, len(ps[1].got), k)
	}
	if st.Dropped != 0 || st.Unreachable != 0 || len(ps[0].got) != 0 {
		t.Errorf("random loss must be silent: %+v, sender got %v", st, ps[0].got)
	}
}

func TestCrashDropsAndReportsUnreachable(t *testing.T) {
	s, ps := probes(t, Config{IDs: ids(3), Latency: latency.Constant(3, 100*ms), TickInterval: 10 * ms})
	s.Send(0, classic.Message{Type: classic.MsgElection, To: s.ID(2), Term: 1}) // arrives at 50ms
	s.Send(0, classic.Message{Type: classic.MsgElection, To: s.ID(1), Term: 2})
	s.At(10*ms, func(s *Sim) { s.Crash(2) })
	s.At(20*ms, func(s *Sim) { s.Restart(2) }) // the in-flight message belongs to the old connection
	s.At(30*ms, func(s *Sim) {
		s.Send(0, classic.Message{Type: classic.MsgElection, To: s.ID(2), Term: 3}) // reaches the new node at 80ms
	})
	s.At(60*ms, func(s *Sim) { // after Term 2 reached node 1
		s.Crash(1)
		s.Send(0, classic.Message{Type: classic.MsgElection, To: s.ID(1), Term: 4}) // 1 is down
		s.Send(1, classic.Message{Type: classic.MsgElection, To: s.ID(0), Term: 5}) // a crashed node sends nothing
	})
	old2 := ps[2]
	var drops []Event
	var unreach []time.Duration
	for s.Now() < 200*ms {
		ev, _ := s.Step()
		switch {
		case ev.Kind == Dropped:
			drops = append(drops, ev)
		case ev.Kind == Delivered && ev.Msg.Type == classic.MsgUnreachable:
			unreach = append(unreach, ev.At)
			if ev.Node != 0 || ev.Msg.To != s.ID(0) {
				t.Errorf("unreachable delivered to %d (To %q), want node 0", ev.Node, ev.Msg.To)
			}
		}
	}
	if len(drops) != 2 || drops[0].At != 50*ms || drops[0].Msg.Term != 1 || drops[1].At != 110*ms || drops[1].Msg.Term != 4 {
		t.Errorf("drops = %+v, want Term 1 at 50ms and Term 4 at 110ms", drops)
	}
	// Unreachable one RTT after each failed send: 0+100ms and 60+100ms.
	if !slices.Equal(unreach, []time.Duration{100 * ms, 160 * ms}) {
		t.Errorf("unreachable at %v, want [100ms 160ms]", unreach)
	}
	wantFrom := []classic.ID{s.ID(2), s.ID(1)}
	var from []classic.ID
	for _, m := range ps[0].got {
		if m.Type == classic.MsgUnreachable {
			from = append(from, m.From)
		}
	}
	if !slices.Equal(from, wantFrom) {
		t.Errorf("node 0 got unreachable from %v, want %v", from, wantFrom)
	}
	if len(ps[0].got) != 2 {
		t.Errorf("node 0 got %v, want only the two UNREACHABLE (node 1 was down when it sent)", ps[0].got)
	}
	if len(old2.got) != 0 || old2.ticks > 1 {
		t.Errorf("crashed machine got %v and ticked %d times", old2.got, old2.ticks)
	}
	if ps[2] == old2 || !ps[2].restarted || ps[2].campaigns != 1 {
		t.Errorf("restart: new machine %v, restarted %v, campaigns %d", ps[2] != old2, ps[2].restarted, ps[2].campaigns)
	}
	if len(ps[2].got) != 1 || ps[2].got[0].Term != 3 {
		t.Errorf("restarted node got %v, want the Term 3 message", ps[2].got)
	}
	if ps[2].ticks < 17 || ps[2].ticks > 18 {
		t.Errorf("restarted node ticked %d times in 180ms at 10ms, want 17 or 18", ps[2].ticks)
	}
	if len(ps[1].got) != 1 || ps[1].got[0].Term != 2 {
		t.Errorf("node 1 got %v before its crash, want the Term 2 message", ps[1].got)
	}
	ticks1 := ps[1].ticks
	s.RunFor(time.Second)
	if ps[1].ticks != ticks1 {
		t.Errorf("crashed node 1 ticked (%d -> %d)", ticks1, ps[1].ticks)
	}
	st := s.Stats()
	if st.Dropped != 2 || st.Unreachable != 2 || st.Sent != 4 {
		t.Errorf("Stats = %+v, want 4 sent, 2 dropped, 2 unreachable", st)
	}
	kinds := []FaultKind{}
	for _, f := range s.Record().Faults {
		kinds = append(kinds, f.Kind)
	}
	if !slices.Equal(kinds, []FaultKind{FaultCrash, FaultRestart, FaultCrash}) {
		t.Errorf("faults %v, want crash, restart, crash", kinds)
	}
}

func TestCutAndRecover(t *testing.T) {
	s, ps := probes(t, Config{IDs: ids(3), Latency: latency.Constant(3, 20*ms), TickInterval: -1})
	s.Cut(0, 1)
	if s.Reachable(1, 0) || !s.Reachable(0, 2) || !s.Reachable(1, 2) {
		t.Fatal("Reachable does not reflect the cut")
	}
	s.Send(0, classic.Message{Type: classic.MsgQuery, To: s.ID(1)})
	s.Send(1, classic.Message{Type: classic.MsgQuery, To: s.ID(2)})
	s.Run(100 * ms)
	if len(ps[1].got) != 0 || len(ps[2].got) != 1 {
		t.Errorf("over the cut: node 1 got %v, node 2 got %v", ps[1].got, ps[2].got)
	}
	if len(ps[0].got) != 1 || ps[0].got[0].Type != classic.MsgUnreachable || ps[0].got[0].From != s.ID(1) {
		t.Errorf("node 0 got %v, want UNREACHABLE from node 1", ps[0].got)
	}
	s.Recover(1, 0)
	s.Send(0, classic.Message{Type: classic.MsgQuery, To: s.ID(1)})
	s.Run(200 * ms)
	if len(ps[1].got) != 1 {
		t.Errorf("after Recover node 1 got %v", ps[1].got)
	}
}

// TestPartitionAndHeal runs the flood toy: a partition elects a second
// leader on the minority side (a split brain the checker must see), and
// healing merges the sides again.
func TestPartitionAndHeal(t *testing.T) {
	s, fs := floods(t, Config{IDs: ids(5), Latency: latency.Constant(5, 40*ms), Seed: 1})
	s.Campaign(0)
	if !s.RunUntil(AllAgree, 5*time.Second) {
		t.Fatal("no initial agreement")
	}
	if leader, _ := s.Agreed(); leader != s.ID(4) {
		t.Fatalf("leader %q, want n0004", leader)
	}
	elected := s.Now()
	t1 := elected + time.Second
	t2 := t1 + 3*time.Second
	s.At(t1, func(s *Sim) { s.Partition([]int{0, 1, 2}, []int{3, 4}) })
	s.At(t2, func(s *Sim) { s.Heal() })
	s.Run(t2 - ms)

	// Each side agrees on its own leader.
	if leader, ok := s.Agreed(); !ok || leader != classic.None {
		t.Errorf("during the partition Agreed = %q, %v; want two agreeing components", leader, ok)
	}
	for i, want := range []classic.ID{"n0002", "n0002", "n0002", "n0004", "n0004"} {
		if st := s.State(i); st.Leader != want {
			t.Errorf("node %d follows %q, want %q", i, st.Leader, want)
		}
	}
	if fs[0].unreachable == 0 || s.Stats().Unreachable == 0 {
		t.Error("no UNREACHABLE during the partition")
	}
	rec := s.Record()
	if _, err := rec.FinalLeader(classic.None, nil); !errors.Is(err, ErrNoAgreement) {
		t.Errorf("FinalLeader across the partition: err = %v, want ErrNoAgreement", err)
	}
	minority, err := rec.TimeToElect(t1, []int{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	// Followers time out after 30 ticks (300ms) and settle after 20 more.
	if minority < 400*ms || minority > 1500*ms {
		t.Errorf("the minority side elected after %v, want about 0.5s", minority)
	}
	if got, err := rec.FinalLeader("n0002", []int{0, 1, 2}); err != nil || got != "n0002" {
		t.Errorf("FinalLeader(minority) = %q, %v", got, err)
	}

	s.Run(t2 + 3*time.Second)
	rec = s.Record()
	leader, err := rec.FinalLeader(classic.None, nil)
	if err != nil {
		t.Fatalf("after heal: %v", err)
	}
	if leader != "n0002" { // the higher round wins in the toy
		t.Errorf("after heal the leader is %q, want n0002", leader)
	}
	sb, err := rec.SplitBrain()
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Intervals) != 1 {
		t.Fatalf("split brain intervals %+v, want one", sb.Intervals)
	}
	iv := sb.Intervals[0]
	// Node 2 declares itself before its followers have all heard of it.
	if iv.From <= t1 || iv.From > t1+minority || iv.To <= t2 || iv.To > t2+200*ms || iv.Open {
		t.Errorf("split brain %+v, want from (%v, %v] to just after the heal at %v", iv, t1, t1+minority, t2)
	}
	if sb.Total != iv.To-iv.From {
		t.Errorf("Total = %v, want %v", sb.Total, iv.To-iv.From)
	}
	if !slices.Equal(iv.Leaders, []classic.ID{"n0002", "n0004"}) {
		t.Errorf("split brain leaders %v", iv.Leaders)
	}
	if len(sb.SameTerm) != 0 {
		t.Errorf("the two leaders had different rounds, got same-term %+v", sb.SameTerm)
	}
	healed, err := rec.TimeToElect(t2, nil)
	if err != nil || healed <= 0 || healed > 200*ms {
		t.Errorf("TimeToElect after heal = %v, %v; want within one heartbeat and a round trip", healed, err)
	}
}

// TestCrashLeaderAndRestart: the leader crashes, the others elect the next
// highest, and the restarted node joins it.
func TestCrashLeaderAndRestart(t *testing.T) {
	s, fs := floods(t, Config{IDs: ids(5), Latency: latency.Constant(5, 40*ms), Seed: 2, Jitter: 5 * ms})
	s.Campaign(2)
	s.RunUntil(AllAgree, 5*time.Second)
	crash := s.Now() + 500*ms
	s.At(crash, func(s *Sim) { s.Crash(4) })
	s.Run(crash + 3*time.Second)
	rec := s.Record()
	took, err := rec.TimeToElect(crash, nil)
	if err != nil {
		t.Fatal(err)
	}
	if took < 300*ms || took > 1500*ms {
		t.Errorf("re-election took %v, want about timeout + settle", took)
	}
	if l, err := rec.FinalLeader("n0003", nil); err != nil {
		t.Errorf("FinalLeader = %q, %v", l, err)
	}
	if fs[3].unreachable == 0 {
		t.Error("heartbeats to the crashed node produced no UNREACHABLE")
	}
	restart := s.Now()
	s.Restart(4)
	if fs[4].round != 1 || fs[4].role != classic.Candidate {
		t.Errorf("restarted machine: round %d role %v, want a fresh campaign", fs[4].round, fs[4].role)
	}
	s.RunFor(2 * time.Second)
	rec = s.Record()
	if l, err := rec.FinalLeader("n0003", nil); err != nil {
		t.Errorf("after restart FinalLeader = %q, %v", l, err)
	}
	tl := rec.Timeline(4)
	if len(tl) < 2 || tl[len(tl)-1].State.Leader != "n0003" || tl[len(tl)-1].At <= restart {
		t.Errorf("node 4 timeline %+v", tl)
	}
}

func runFlood(t testing.TB, seed uint64) (*Record, Stats) {
	pl := planetLabMatrix()
	s, _ := floods(t, Config{IDs: ids(30), Latency: pl, HostOf: func(i int) int { return i * 16 }, Seed: seed,
		Jitter: 10 * ms, Loss: 0.02})
	s.Campaign(5)
	s.At(2*time.Second, func(s *Sim) { s.Crash(29) })
	s.At(3*time.Second, func(s *Sim) { s.Partition([]int{0, 1, 2, 3}) })
	s.At(5*time.Second, func(s *Sim) { s.Heal(); s.Restart(29) })
	s.Run(8 * time.Second)
	return s.Record(), s.Stats()
}

func TestDeterministicFromSeed(t *testing.T) {
	r1, s1 := runFlood(t, 42)
	r2, s2 := runFlood(t, 42)
	if !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(s1, s2) {
		t.Fatal("two runs with seed 42 differ")
	}
	if len(r1.Changes) < 30 || s1.Sent < 1000 || s1.Lost == 0 || s1.Dropped == 0 {
		t.Errorf("the run exercised too little: %d changes, %+v", len(r1.Changes), s1)
	}
	r3, s3 := runFlood(t, 43)
	if reflect.DeepEqual(r1.Changes, r3.Changes) && s1.Sent == s3.Sent {
		t.Error("seeds 42 and 43 gave the same run")
	}
}

// TestRunUntilStopsAtInstant checks RunUntil's contract.
func TestRunUntilStopsAtInstant(t *testing.T) {
	s, _ := floods(t, Config{IDs: ids(3), Latency: latency.Constant(3, 40*ms)})
	if s.RunUntil(AllAgree, 200*ms) {
		t.Fatal("agreement without any campaign")
	}
	if s.Now() != 200*ms {
		t.Errorf("after a failed RunUntil Now = %v, want the limit", s.Now())
	}
	// The followers time out at 300ms and campaign on their own.
	if !s.RunUntil(AllAgree, 3*time.Second) {
		t.Fatal("no agreement")
	}
	at := s.Now()
	rec := s.Record()
	last := rec.Changes[len(rec.Changes)-1]
	if last.At != at {
		t.Errorf("RunUntil stopped at %v, the agreeing change was at %v", at, last.At)
	}
	if took, err := rec.TimeToElect(0, nil); err != nil || took != at {
		t.Errorf("TimeToElect(0) = %v, %v; want %v", took, err, at)
	}
}

// TestMessagesMatchStats: the record's message counts add up to Stats.
func TestMessagesMatchStats(t *testing.T) {
	s, _ := floods(t, Config{IDs: ids(8), Seed: 9})
	s.Campaign(0)
	s.Run(time.Second)
	mid := s.Now()
	s.Run(2 * time.Second)
	rec, st := s.Record(), s.Stats()
	if got := rec.Messages(0, rec.End+1); uint64(got) != st.Sent {
		t.Errorf("Messages over the run = %d, Stats.Sent = %d", got, st.Sent)
	}
	a, b := rec.Messages(0, mid), rec.Messages(mid, rec.End+1)
	if a+b != int(st.Sent) || a == 0 || b == 0 {
		t.Errorf("windows %d + %d != %d", a, b, st.Sent)
	}
	byType := rec.MessagesByType(0, rec.End+1)
	for typ, k := range st.SentByType {
		if uint64(byType[typ]) != k {
			t.Errorf("%v: record %d, stats %d", typ, byType[typ], k)
		}
	}
	// After the election only heartbeats flow: 7 receivers, each forwards
	// to 6 others, every 10 ticks.
	late := rec.MessagesByType(mid, rec.End+1)
	if late[classic.MsgElection] != 0 || late[classic.MsgHeartbeat] == 0 {
		t.Errorf("messages after the election: %v", late)
	}
}

const planetLab = "../../testdata/planetlab490/planetlab490_median18_ms.txt"

var planetLabMatrix = sync.OnceValue(func() *latency.Matrix {
	m, err := latency.Load(planetLab)
	if err != nil {
		return latency.Constant(490, 120*ms) // keep the tests meaningful without the data
	}
	return m
})

// sparseFloods builds n flood nodes on a ring plus 3 random chords per node
// (about 8 neighbours each, about 8n directed edges), placed round-robin on
// the PlanetLab hosts (or 100ms apart without the data).
// sparseGraph links the nodes in a ring plus three random links per node:
// a connected graph of average degree about 8. It returns each node's
// neighbours.
func sparseGraph(all []classic.ID, r *rand.Rand) [][]classic.ID {
	n := len(all)
	adj := make([][]classic.ID, n)
	link := func(a, b int) {
		if a != b && !slices.Contains(adj[a], all[b]) {
			adj[a] = append(adj[a], all[b])
			adj[b] = append(adj[b], all[a])
		}
	}
	for i := range n {
		link(i, (i+1)%n)
		for range 3 {
			link(i, r.IntN(n))
		}
	}
	return adj
}

func sparseFloods(t testing.TB, n int, seed uint64) *Sim {
	t.Helper()
	pl := planetLabMatrix()
	all := ids(n)
	r := rand.New(rand.NewPCG(seed, 1))
	adj := sparseGraph(all, r)
	s, err := New(Config{
		IDs: all, Latency: pl, HostOf: func(i int) int { return i % pl.N() }, Seed: seed,
		// Settle 1.5s: the flood crosses the graph (a handful of hops of up
		// to ~340ms one way) before anyone settles.
		Factory: func(i int, id classic.ID, _ bool) classic.Machine { return newFlood(id, adj[i], 150, 50, 200) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestElection10k runs one election among 10,000 nodes and checks the
// outcome; BenchmarkElection10k times it.
func TestElection10k(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 nodes")
	}
	const n = 10000
	s := sparseFloods(t, n, 1)
	s.Campaign(0)
	if !s.RunUntil(AllAgree, 30*time.Second) {
		t.Fatalf("no agreement by %v", s.Now())
	}
	rec, st := s.Record(), s.Stats()
	if l, err := rec.FinalLeader(classic.ID(fmt.Sprintf("n%04d", n-1)), nil); err != nil {
		t.Fatalf("FinalLeader = %q, %v", l, err)
	}
	took, err := rec.TimeToElect(0, nil)
	if err != nil || took != s.Now() {
		t.Errorf("TimeToElect = %v, %v; want %v", took, err, s.Now())
	}
	sb, err := rec.SplitBrain()
	if err != nil || sb.Total != 0 {
		t.Errorf("split brain %v (%d intervals), %v", sb.Total, len(sb.Intervals), err)
	}
	if st.Sent < 8*n || st.Delivered > st.Sent || st.Lost+st.Dropped+st.Unreachable+st.Misaddressed != 0 {
		t.Errorf("Stats = %+v", st)
	}
	t.Logf("elected in %v of virtual time: %d events, %d messages (%v), %d ticks, %d state changes",
		took, st.Events, st.Sent, st.SentByType, st.Ticks, len(rec.Changes))
}

func BenchmarkElection10k(b *testing.B) {
	const n = 10000
	var st Stats
	var took time.Duration
	for b.Loop() {
		s := sparseFloods(b, n, 1)
		s.Campaign(0)
		if !s.RunUntil(AllAgree, 30*time.Second) {
			b.Fatal("no agreement")
		}
		st, took = s.Stats(), s.Now()
	}
	b.ReportMetric(float64(st.Sent), "msgs/op")
	b.ReportMetric(float64(st.Events), "events/op")
	b.ReportMetric(took.Seconds(), "virtual-s/op")
}
