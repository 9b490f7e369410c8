package geometric

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// lineCluster is a cluster on a line: peer i at pos[i] ms, RTT the
// distance; peer 0 is the superpeer.
type lineCluster struct{ pos []float64 }

func (l lineCluster) id(i int) ID { return ID(fmt.Sprintf("m%d", i)) }
func (l lineCluster) rtt(i, j int) time.Duration {
	d := l.pos[i] - l.pos[j]
	if d < 0 {
		d = -d
	}
	return time.Duration(d * float64(time.Millisecond))
}

// reports are every member's honest claims about candidates cs.
func (l lineCluster) reports(sp int, cs []int) []SwapReport {
	var out []SwapReport
	for m := range l.pos {
		if m == sp {
			continue
		}
		r := SwapReport{Member: l.id(m), ToSuperpeer: l.rtt(m, sp), ToCandidate: make([]time.Duration, len(cs))}
		for k, c := range cs {
			r.ToCandidate[k] = l.rtt(m, c)
		}
		out = append(out, r)
	}
	return out
}

func (l lineCluster) swap(t *testing.T, sp int, cs []int, reports []SwapReport) (SwapDecision, bool) {
	t.Helper()
	ids := make([]ID, len(cs))
	own := make([]time.Duration, len(cs))
	for k, c := range cs {
		ids[k], own[k] = l.id(c), l.rtt(sp, c)
	}
	d, ok, err := Swap(SwapConfig{}, l.id(sp), ids, own, reports, len(l.pos)-1)
	if err != nil {
		t.Fatal(err)
	}
	return d, ok
}

// The walkthrough: a superpeer at the edge of its cluster (0 ms; members
// at 20 to 30 ms) hands its role to the central member (25 ms), and the
// new superpeer does not hand it back, nor on to a member 1 ms away (the
// margin).
func TestSwapToTheMedianAndSettles(t *testing.T) {
	l := lineCluster{pos: []float64{0, 20, 22, 24, 25, 26, 28, 30}}
	d, ok := l.swap(t, 0, []int{1, 4, 7}, l.reports(0, []int{1, 4, 7}))
	if !ok || d.To != l.id(4) {
		t.Fatalf("swap from the edge: %+v, %v; want to %s", d, ok, l.id(4))
	}
	t.Logf("gain %v on a mean of %v over %d reports", d.Gain, d.Mean, d.Reports)
	if d, ok := l.swap(t, 4, []int{0, 3, 5}, l.reports(4, []int{0, 3, 5})); ok {
		t.Fatalf("the new superpeer swaps again, to %s (gain %v): no settling", d.To, d.Gain)
	}
}

// A liar cannot drag the role to a far candidate: its claim is clamped by
// the superpeer's own RTT to the candidate, and one claim of k moves the
// mean by at most 2·r(s,c)/k. Without the clamp the same lie would win.
func TestSwapLiarIsClamped(t *testing.T) {
	l := lineCluster{pos: []float64{10, 8, 9, 10, 11, 12, 60}}
	cs := []int{6} // the far member, the liar's friend
	reps := l.reports(0, cs)
	for k := range reps {
		if reps[k].Member == l.id(1) {
			reps[k].ToSuperpeer, reps[k].ToCandidate[0] = time.Hour, time.Nanosecond // the lie
		}
	}
	if d, ok := l.swap(t, 0, cs, reps); ok {
		t.Fatalf("a liar moved the role to a far candidate: %+v", d)
	}
	// The same lie, unclamped: the mean change the lie claims.
	var sum time.Duration
	for _, r := range reps {
		sum += r.ToCandidate[0] - r.ToSuperpeer
	}
	if sum >= 0 {
		t.Fatalf("the lie would not have won unclamped (sum %v): the test shows nothing", sum)
	}
}

// A superpeer at the edge between two clusters: s at 50 ms, four members
// at 40 to 43 ms, four at 58 to 61 ms, next to another superpeer q at
// 64 ms. The central candidate of the left group, 41 ms, would serve the
// right group 9 ms worse each, and Swap judges no gain. Told that the
// right group's next superpeer is q, nearer to them than s, Swap counts
// their loss as what they lose by going there (nothing) and hands the role
// over. A Second that is the superpeer itself or the candidate is no
// fallback and changes nothing.
func TestSwapCountsTheNextSuperpeer(t *testing.T) {
	l := lineCluster{pos: []float64{50, 40, 41, 42, 43, 58, 59, 60, 61, 64}}
	q := 9 // not a member
	cs := []int{2}
	reps := l.reports(0, cs)
	reps = reps[:len(reps)-1] // q reports nothing
	members := len(reps)
	swap := func(reps []SwapReport) (SwapDecision, bool) {
		ids, own := []ID{l.id(2)}, []time.Duration{l.rtt(0, 2)}
		d, ok, err := Swap(SwapConfig{}, l.id(0), ids, own, reps, members)
		if err != nil {
			t.Fatal(err)
		}
		return d, ok
	}
	if d, ok := swap(reps); ok {
		t.Fatalf("swap without the next superpeers: %+v; want none (the right group loses 9 ms each)", d)
	}
	with := func(second func(m int) int) []SwapReport {
		out := slices.Clone(reps)
		for k := range out {
			m := k + 1
			out[k].Second, out[k].ToSecond = l.id(second(m)), l.rtt(m, second(m))
		}
		return out
	}
	d, ok := swap(with(func(int) int { return q }))
	if !ok || d.To != l.id(2) {
		t.Fatalf("swap with the next superpeers: %+v, %v; want to %s", d, ok, l.id(2))
	}
	// The left group gains 9, 9, 7 and 5 ms, the right group nothing, s
	// loses 9 ms: 21 ms over 9 peers.
	if want := 21 * time.Millisecond / 9; d.Gain != want {
		t.Errorf("gain %v, want %v", d.Gain, want)
	}
	for _, bad := range []int{0, 2} {
		if d, ok := swap(with(func(int) int { return bad })); ok {
			t.Errorf("Second = %s counted as a fallback: %+v", l.id(bad), d)
		}
	}
}

// Members of a neighbouring cluster count: s at 50 ms with members at 44,
// 45, 46 and 55 ms; the candidate at 45 ms gains the cluster 3 ms in all
// (0.6 ms a peer, not above the margin of 0.5 ms plus 2 % of 5 ms). Two
// peers of the cluster of t at 30 ms, at 38 and 39 ms, whose next
// superpeer is s, would attach to the candidate and gain 1 and 3 ms:
// with their reports the swap is made. An outsider's claim is clamped to
// [−r(s,c), 0] and counts for no quorum.
func TestSwapCountsOutsiders(t *testing.T) {
	l := lineCluster{pos: []float64{50, 44, 45, 46, 55, 38, 39, 30}}
	tt := 7
	cs := []int{2}
	own := []time.Duration{l.rtt(0, 2)}
	reps := l.reports(0, cs)[:4]
	outs := make([]SwapReport, 0, 2)
	for _, o := range []int{5, 6} {
		outs = append(outs, SwapReport{Member: l.id(o), ToSuperpeer: l.rtt(o, tt), ToCandidate: []time.Duration{l.rtt(o, 2)}, Outside: true})
	}
	swap := func(reps []SwapReport) (SwapDecision, bool) {
		d, ok, err := Swap(SwapConfig{}, l.id(0), []ID{l.id(2)}, own, reps, 4)
		if err != nil {
			t.Fatal(err)
		}
		return d, ok
	}
	if d, ok := swap(reps); ok {
		t.Fatalf("swap on the members' reports alone: %+v; want none (0.6 ms a peer)", d)
	}
	d, ok := swap(append(slices.Clone(reps), outs...))
	if want := 7 * time.Millisecond / 5; !ok || d.Gain != want || d.Reports != 4 {
		t.Fatalf("with the outsiders: %+v, %v; want a swap gaining %v on 4 reports", d, ok, want)
	}
	// A lying outsider gains the cluster at most r(s,c) = 5 ms.
	liar := SwapReport{Member: l.id(5), ToSuperpeer: time.Hour, ToCandidate: []time.Duration{time.Nanosecond}, Outside: true}
	if d, _ := swap(append(slices.Clone(reps), liar)); d.Gain != 8*time.Millisecond/5 {
		t.Errorf("a lying outsider: gain %v, want %v (its claim clamped to 5 ms)", d.Gain, 8*time.Millisecond/5)
	}
	// One member and the outsiders make no quorum of 4 members.
	if d, ok := swap(append(slices.Clone(reps[:1]), outs...)); ok {
		t.Errorf("outsiders made a quorum: %+v", d)
	}
}

// A swap needs a majority of the members to report.
func TestSwapQuorum(t *testing.T) {
	l := lineCluster{pos: []float64{0, 20, 22, 24, 25, 26, 28, 30}}
	reps := l.reports(0, []int{4})
	if _, ok := l.swap(t, 0, []int{4}, reps[:3]); ok {
		t.Fatal("3 reports of 7 members decided a swap")
	}
	if _, ok := l.swap(t, 0, []int{4}, reps[:4]); !ok {
		t.Fatal("4 reports of 7 members decided no swap")
	}
	// A member reporting twice counts once.
	dup := append(reps[:3:3], reps[0], reps[0])
	if _, ok := l.swap(t, 0, []int{4}, dup); ok {
		t.Fatal("a member's repeated report made a quorum")
	}
}

// Relocation: two superpeers share one site (A at 0 ms, B at 1 ms, each
// with members there), a third cluster spans two sites (C at 100 ms with
// members there and at 200 ms). B's cluster loses little without B; C's
// far members gain much from a superpeer at 200 ms: B's token goes there.
func TestRelocate(t *testing.T) {
	pos := []float64{0, 1, 100}           // A, B, C
	pos = append(pos, 0, 0.5, 1, 1.5, 2)  // 3..7: A's and B's members
	pos = append(pos, 100, 101, 99)       // 8..10: C's near members
	pos = append(pos, 200, 201, 199, 202) // 11..14: C's far members
	l := lineCluster{pos: pos}
	clusters := map[int][]int{0: {3, 4, 5}, 1: {6, 7}, 2: {8, 9, 10, 11, 12, 13, 14}}
	next := map[int]int{0: 1, 1: 0, 2: 1}
	var sums []ClusterSummary
	for _, s := range []int{0, 1, 2} {
		ms := clusters[s]
		var cs []int
		if s == 2 {
			cs = []int{11, 8}
		} else {
			cs = ms[:1]
		}
		ids := make([]ID, len(cs))
		own := make([]time.Duration, len(cs))
		for k, c := range cs {
			ids[k], own[k] = l.id(c), l.rtt(s, c)
		}
		var reps []SwapReport
		for _, m := range ms {
			r := SwapReport{Member: l.id(m), ToSuperpeer: l.rtt(m, s), ToCandidate: make([]time.Duration, len(cs)),
				Second: l.id(next[s]), ToSecond: l.rtt(m, next[s])}
			for k, c := range cs {
				r.ToCandidate[k] = l.rtt(m, c)
			}
			reps = append(reps, r)
		}
		sums = append(sums, Summarize(l.id(s), len(ms), ids, own, reps, l.id(next[s]), l.rtt(s, next[s]),
			func(q ID) time.Duration {
				for _, o := range []int{0, 1, 2} {
					if l.id(o) == q {
						return l.rtt(s, o)
					}
				}
				return 0
			}, func(ID) int { return 64 }))
	}
	mv, err := Relocate(SwapConfig{}, sums)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summaries %+v; relocations %+v", sums, mv)
	if len(mv) != 1 || mv[0].To != l.id(11) || (mv[0].From != l.id(0) && mv[0].From != l.id(1)) {
		t.Fatalf("relocations %+v, want one from %s or %s to %s", mv, l.id(0), l.id(1), l.id(11))
	}
	// With no room at the next superpeer, nothing moves.
	for k := range sums[:2] {
		sums[k].Full = true
	}
	if mv, _ := Relocate(SwapConfig{}, sums); len(mv) != 0 {
		t.Fatalf("relocated %+v though the next superpeers are full", mv)
	}
}

// A hand-over: the recipient is promoted at once, and the token, settled
// where the measurements put it, does not walk on for the coordinates'
// forces (walkRow from the row's end walks a fresh token to the median).
func TestHandoverSettles(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Margin = 500 * time.Microsecond
	a, err := NewHolder("a", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, 0)
	if err := a.Receive(Token{Num: 0}, t0); err != nil {
		t.Fatal(err)
	}
	if out := a.Handover("a"); out != nil {
		t.Fatalf("handover to itself: %v", out)
	}
	out := a.Handover("b")
	p, ok := out[0].(Pass)
	if len(out) != 1 || !ok || p.To != "b" || p.Token.Passes() != Settled+1 {
		t.Fatalf("handover: %+v, want a pass to b with %d passes", out, Settled+1)
	}
	if out := a.Handover("c"); out != nil {
		t.Fatalf("a second handover while the first is in flight: %v", out)
	}
	a.PassDone(true)
	b, err := NewHolder("b", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Receive(p.Token, t0); err != nil || !b.Superpeer() {
		t.Fatalf("recipient: err %v, superpeer %v; want promoted at once", err, b.Superpeer())
	}
	if path, _ := walkRow(t, cfg, Token{Num: 0, Seq: uint64(Settled)}); len(path) != 0 {
		t.Fatalf("a settled token walked %v", path)
	}
}
