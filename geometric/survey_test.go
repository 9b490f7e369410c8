package geometric

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// surveyLine is a survey on a line: the superpeer s at 0, members at the
// given positions (ms), each reporting its true distance to s and to
// every candidate; the candidates are members too.
func surveyLine(s float64, members []float64, cands []int) (cs []ID, own []time.Duration, reports []SwapReport) {
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	abs := func(x float64) float64 { return max(x, -x) }
	id := func(i int) ID { return ID(rune('a' + i)) }
	for _, c := range cands {
		cs = append(cs, id(c))
		own = append(own, ms(abs(members[c]-s)))
	}
	for i, x := range members {
		r := SwapReport{Member: id(i), ToSuperpeer: ms(abs(x - s))}
		for _, c := range cands {
			r.ToCandidate = append(r.ToCandidate, max(ms(abs(x-members[c])), time.Nanosecond))
		}
		reports = append(reports, r)
	}
	return cs, own, reports
}

// TestSurvey: three groups on a line, the superpeer in the first; the
// survey names one candidate in each other group, the central one, and
// not a second one in the superpeer's group.
func TestSurvey(t *testing.T) {
	//                0  1  2    3    4    5    6    7    8
	members := []float64{1, 2, 3, 100, 101, 102, 200, 201, 202}
	cands := []int{1, 2, 3, 4, 5, 6, 7, 8}
	cs, own, reports := surveyLine(0, members, cands)
	got, err := Survey("s", cs, own, reports, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []ID{"e", "h"}; !slices.Equal(got, want) {
		t.Errorf("Survey = %v, want %v (the centres of the two far groups)", got, want)
	}
	// One token: the superpeer's own, nobody else.
	if got, _ := Survey("s", cs, own, reports, 1); len(got) != 0 {
		t.Errorf("Survey for 1 token = %v, want none", got)
	}
	// A candidate the superpeer did not measure is not judged.
	own2 := slices.Clone(own)
	own2[3] = 0 // e
	if got, _ := Survey("s", cs, own2, reports, 3); slices.Contains(got, "e") {
		t.Errorf("Survey named %v: e, which the superpeer did not measure", got)
	}
	if got, err := Survey("s", cs, own, nil, 3); err != nil || len(got) != 0 {
		t.Errorf("Survey without reports = %v, %v; want none", got, err)
	}
	if _, err := Survey("s", cs, own[:2], reports, 3); !errors.Is(err, ErrConfig) {
		t.Errorf("own of the wrong length: err %v, want ErrConfig", err)
	}
	if _, err := Survey("s", cs, own, reports, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("0 tokens: err %v, want ErrConfig", err)
	}
}

// TestSurveyClampsLiars: members that claim to be next to a candidate in
// the superpeer's own group (1 ms from it) are counted within the
// triangle inequality: at least r(m,s) − r(s,c), so far members cannot
// pull a token into the superpeer's group, and the survey names the same
// holders as without the lie.
func TestSurveyClampsLiars(t *testing.T) {
	members := []float64{1, 2, 3, 100, 101, 102, 200, 201, 202}
	cands := []int{1, 2, 3, 4, 5, 6, 7, 8}
	cs, own, reports := surveyLine(0, members, cands)
	for i := 3; i < 9; i++ {
		reports[i].ToCandidate[0] = time.Millisecond // b, at 2 ms from s
	}
	got, err := Survey("s", cs, own, reports, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []ID{"e", "h"}; !slices.Equal(got, want) {
		t.Errorf("Survey with liars = %v, want %v", got, want)
	}
}
