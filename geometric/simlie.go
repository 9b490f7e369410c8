package geometric

import (
	"slices"
	"time"
)

// What the liars of SimConfig.Liars claim in the search on measured RTTs
// (simSwap), for the attack benchmarks. They know every true RTT, and
// they aim to hold superpeer roles: every claim is the extreme that Swap
// and Summarize still accept, in the liars' favour.
//
//   - A liar superpeer never hands its role over, and its summary says
//     its cluster cannot be removed (Full) and that its best second
//     superpeer is a liar member of it, if it has one, with a gain equal
//     to what its members pay now (Cost: each member's RTT saved in
//     full, the most Summarize could find).
//   - A liar member of an honest cluster, asked about candidates,
//     claims that each liar candidate c saves it r(s, c) and each honest
//     one costs it r(s, c) (the two ends of Swap's clamp; s the
//     superpeer), and names no next superpeer, which would bound its
//     claimed loss. Its RTT to the superpeer is raised as far as the
//     claimed saving needs. So it pushes the role to liars and blocks
//     every other swap.
//   - A liar member of another cluster (SwapReport.Outside) claims the
//     same saving for a liar candidate and nothing from an honest one.
//   - In its cluster's summary a liar member claims to lose nothing if
//     its superpeer gave up the role (its next superpeer as near as its
//     own), so that honest clusters look cheap to remove, and that a liar
//     candidate would save it r(s, c).
//
// A liar does not lie about its next superpeer's identity, and liars do
// not coordinate beyond knowing one another.
type liars struct {
	liar, eligible []bool
	ids            []ID
	index          map[ID]int
}

// is reports whether peer i lies.
func (l *liars) is(i int) bool { return l.liar != nil && l.liar[i] }

func (l *liars) isID(id ID) bool {
	i, ok := l.index[id]
	return ok && l.is(i)
}

// eligibleID reports whether peer id may be made a superpeer.
func (l *liars) eligibleID(id ID) bool {
	i, ok := l.index[id]
	return ok && (l.eligible == nil || l.eligible[i])
}

// raised is the RTT to the superpeer a liar claims, at least its own
// (now) and more than the superpeer's RTT to every liar candidate, so
// that the claimed saving reaches the clamp.
func (l *liars) raised(now time.Duration, cands []ID, own []time.Duration) time.Duration {
	t := now
	for c, id := range cands {
		if l.isID(id) {
			t = max(t, own[c]+time.Nanosecond)
		}
	}
	return t
}

// swapClaim is a liar's report to Swap in place of r, the truth.
func (l *liars) swapClaim(r SwapReport, cands []ID, own []time.Duration) SwapReport {
	t := l.raised(r.ToSuperpeer, cands, own)
	out := SwapReport{Member: r.Member, ToSuperpeer: t, ToCandidate: make([]time.Duration, len(cands)), Outside: r.Outside}
	for c, id := range cands {
		switch {
		case l.isID(id):
			out.ToCandidate[c] = max(t-own[c], time.Nanosecond)
		case r.Outside:
			out.ToCandidate[c] = t
		default:
			out.ToCandidate[c] = t + own[c]
		}
	}
	return out
}

// summaryClaim is a liar's report to Summarize in place of r, the truth.
func (l *liars) summaryClaim(r SwapReport, cands []ID, own []time.Duration) SwapReport {
	t := l.raised(r.ToSuperpeer, cands, own)
	out := SwapReport{Member: r.Member, ToSuperpeer: t, ToCandidate: make([]time.Duration, len(cands))}
	if r.Second != "" {
		out.Second, out.ToSecond = r.Second, t
	}
	for c, id := range cands {
		out.ToCandidate[c] = t
		if l.isID(id) {
			out.ToCandidate[c] = max(t-own[c], time.Nanosecond)
		}
	}
	return out
}

// ownSummary is a liar superpeer's summary in place of sum, the truth:
// members are its members' indexes.
func (l *liars) ownSummary(sum ClusterSummary, members []int) ClusterSummary {
	sum.Full, sum.Candidate, sum.Gain = true, "", 0
	if i := slices.IndexFunc(members, func(m int) bool { return l.is(m) && l.eligibleID(l.ids[m]) }); i >= 0 {
		sum.Candidate, sum.Gain = l.ids[members[i]], sum.Cost
	}
	return sum
}
