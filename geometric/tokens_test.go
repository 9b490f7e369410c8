package geometric

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

var t0 = time.Unix(1000, 0)

// at returns a coordinate at (x, y) milliseconds in the first two dimensions.
func at(x, y float64) *coordinate.Coordinate { return coordAt(x/1000, y/1000) }

func peer(id string, x, y float64) Peer { return Peer{ID(id), at(x, y)} }

func newHolder(t *testing.T, p Peer, cfg Config) *Holder {
	t.Helper()
	h, err := NewHolder(p.ID, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetCoordinate(p.Coord); err != nil {
		t.Fatal(err)
	}
	return h
}

func mustReceive(t *testing.T, h *Holder, tok Token, now time.Time) {
	t.Helper()
	if err := h.Receive(tok, now); err != nil {
		t.Fatal(err)
	}
}

// withoutGain checks that every Pass in outs expects a positive gain of at
// least the default margin and returns outs with the gains zeroed, for
// comparison.
func withoutGain(t *testing.T, outs []Output) []Output {
	t.Helper()
	out := slices.Clone(outs)
	for i, o := range out {
		if p, ok := o.(Pass); ok {
			if p.Gain < DefaultConfig().Margin.Seconds() {
				t.Errorf("%+v: gain %v s, want at least the margin %v", p, p.Gain, DefaultConfig().Margin)
			}
			p.Gain = 0
			out[i] = p
		}
	}
	return out
}

func pos(num int, seq uint64, p Peer) Position {
	return Position{Token: Token{num, seq}, Holder: p.ID, Coord: p.Coord}
}

func TestInitialHolders(t *testing.T) {
	var ids []ID
	for i := 0; i < 100; i++ {
		ids = append(ids, ID(fmt.Sprintf("peer-%d", i)))
	}
	got, err := InitialHolders(42, ids, 5)
	if err != nil {
		t.Fatal(err)
	}
	// The S smallest scores, in order.
	byScore := slices.Clone(ids)
	slices.SortFunc(byScore, func(a, b ID) int {
		sa, sb := Score(42, a), Score(42, b)
		if sa != sb {
			if sa < sb {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a), string(b))
	})
	if !slices.Equal(got, byScore[:5]) {
		t.Errorf("InitialHolders = %v, want %v", got, byScore[:5])
	}
	// Every peer that knows the same set, in any order and with
	// repetitions, computes the same holders.
	shuffled := slices.Clone(ids)
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	shuffled = append(shuffled, ids[:10]...)
	again, err := InitialHolders(42, shuffled, 5)
	if err != nil || !slices.Equal(again, got) {
		t.Errorf("shuffled input: %v, %v; want %v", again, err, got)
	}
	// Another round seed, another placement.
	other, _ := InitialHolders(43, ids, 5)
	if slices.Equal(other, got) {
		t.Errorf("seeds 42 and 43 give the same holders %v", got)
	}
	for _, s := range []int{0, -1, 101} {
		if _, err := InitialHolders(42, ids, s); !errors.Is(err, ErrConfig) {
			t.Errorf("InitialHolders(s=%d): err = %v, want ErrConfig", s, err)
		}
	}
	if _, err := InitialHolders(42, []ID{"a", "a"}, 2); !errors.Is(err, ErrConfig) {
		t.Errorf("two tokens for one distinct peer: err = %v, want ErrConfig", err)
	}
}

func TestRehome(t *testing.T) {
	ids := []ID{"a", "b", "c", "d"}
	got := Rehome(7, 3, ids, map[ID]bool{"a": true})
	if got == "" || got == "a" {
		t.Fatalf("Rehome = %q, want a peer other than the holder a", got)
	}
	rev := slices.Clone(ids)
	slices.Reverse(rev)
	if again := Rehome(7, 3, rev, map[ID]bool{"a": true}); again != got {
		t.Errorf("Rehome depends on the order of peers: %q vs %q", again, got)
	}
	if none := Rehome(7, 3, ids, map[ID]bool{"a": true, "b": true, "c": true, "d": true}); none != "" {
		t.Errorf("Rehome with every peer holding = %q, want \"\"", none)
	}
}

// TestRepulsionPushesAway: with attraction off, a token whose holder sits 1
// ms from another token is passed to the neighbour straight away from it.
func TestRepulsionPushesAway(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Attraction = -1
	a, b := peer("a", 0, 0), peer("b", 1, 0)
	away, side, toward := peer("away", -5, 0), peer("side", 0, 5), peer("toward", -1, 4)
	h := newHolder(t, a, cfg)
	h.SetNeighbours([]Peer{side, toward, away, b})
	mustReceive(t, h, Token{0, 3}, t0)
	h.Observe(pos(1, 0, b))
	out := withoutGain(t, h.Tick(t0.Add(time.Second)))
	want := []Output{Pass{Token: Token{0, 4}, To: "away"}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("Tick = %v, want %v", out, want)
	}
	// While the pass is pending the holder decides nothing.
	if out := h.Tick(t0.Add(time.Hour)); out != nil {
		t.Fatalf("Tick while passing = %v, want nothing", out)
	}
	if out := h.PassDone(true); out != nil {
		t.Fatalf("PassDone(true) of a non-superpeer = %v, want nothing", out)
	}
	if _, ok := h.Holding(); ok {
		t.Fatal("still holding after the pass")
	}
}

// TestRepulsionIgnoresHeight: the repulsion sees the Vec parts only. With
// attraction off, a holder 1 ms from another token has one neighbour,
// "tall", at its own Vec but behind a 5 ms height. Measured with the
// heights, tall would be 6 ms from the other token and the token would jump
// there, lowering its energy by 3.2 ms; with the Vec parts it is as near as
// the holder, so the token stays.
func TestRepulsionIgnoresHeight(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Attraction = -1
	a, b := peer("a", 0, 0), peer("b", 1, 0)
	tall := peer("tall", 0, 0)
	tall.Coord.Height = 0.005
	h := newHolder(t, a, cfg)
	h.SetNeighbours([]Peer{tall})
	mustReceive(t, h, Token{0, 0}, t0)
	h.Observe(pos(1, 0, b))
	if out := h.Tick(t0.Add(time.Second)); out != nil {
		t.Fatalf("Tick = %v, want the token to stay off the tall host", out)
	}
}

// TestRepulsionIsMean: the repulsion is the mean over the other tokens, not
// their sum, so four tokens on one spot push as one token there does: the
// pass away from them gains the same energy.
func TestRepulsionIsMean(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Attraction = -1
	gain := func(others int) float64 {
		h := newHolder(t, peer("a", 0, 0), cfg)
		h.SetNeighbours([]Peer{peer("away", -5, 0)})
		mustReceive(t, h, Token{0, 0}, t0)
		for k := 1; k <= others; k++ {
			h.Observe(pos(k, 0, peer(fmt.Sprint("b", k), 1, 0)))
		}
		out := h.Tick(t0.Add(time.Second))
		if len(out) != 1 {
			t.Fatalf("%d other tokens: Tick = %v, want a pass", others, out)
		}
		return out[0].(Pass).Gain
	}
	// ρ²/(1 ms + ε) − ρ²/(6 ms + ε) with ρ = 3 ms, ε = 1 ms: 3.21 ms.
	one, four := gain(1), gain(4)
	if !approxEqual(one, four) || math.Abs(one-0.0045+0.009/7) > 1e-12 {
		t.Fatalf("gain %v with one other token, %v with four; want both %v", one, four, 0.0045-0.009/7)
	}
}

// TestLoneTokenPromotes: a token with no force on it stays, and its holder
// becomes superpeer once, after exactly Dwell.
func TestLoneTokenPromotes(t *testing.T) {
	cfg := DefaultConfig()
	h := newHolder(t, peer("a", 0, 0), cfg)
	h.SetNeighbours([]Peer{peer("b", 10, 0)})
	h.SetPeers([]Peer{peer("a", 0, 0), peer("left", -10, 0), peer("right", 10, 0)})
	mustReceive(t, h, Token{0, 0}, t0)
	for s := time.Duration(0); s < cfg.Dwell; s += time.Second {
		if out := h.Tick(t0.Add(s)); out != nil {
			t.Fatalf("Tick at %v = %v, want nothing", s, out)
		}
	}
	if out := h.Tick(t0.Add(cfg.Dwell)); !reflect.DeepEqual(out, []Output{Promote{0}}) {
		t.Fatalf("Tick at Dwell = %v, want Promote", out)
	}
	if !h.Superpeer() {
		t.Fatal("not a superpeer after Promote")
	}
	if out := h.Tick(t0.Add(2 * cfg.Dwell)); out != nil {
		t.Fatalf("Tick after promotion = %v, want nothing", out)
	}
}

// Takeover promotes at once, and refuses like Receive: a peer that holds a
// token, or a token older than one heard of.
func TestTakeover(t *testing.T) {
	h := newHolder(t, peer("a", 0, 0), DefaultConfig())
	h.Observe(Position{Token: Token{1, 5}, Holder: "dead", Coord: peer("dead", 1, 0).Coord})
	if _, err := h.Takeover(Token{1, 5}, t0); err == nil {
		t.Fatal("took over token 1 at the seq its last holder had")
	}
	out, err := h.Takeover(Rehomed(1, 6), t0)
	if err != nil || !reflect.DeepEqual(out, []Output{Promote{1}}) || !h.Superpeer() {
		t.Fatalf("Takeover = %v, %v; superpeer %v; want Promote at once", out, err, h.Superpeer())
	}
	if _, err := h.Takeover(Rehomed(2, 0), t0); err == nil {
		t.Fatal("took over a second token")
	}
}

// TestTokenWalksToMedian: one token starting at the end of a row of eleven
// peers, 10 ms apart, is passed peer by peer to the middle one and stays
// there; every pass lowers its energy. (With the default Margin of 1 ms it
// would stop one peer short: the last step gains 10 ms × S/N = 0.9 ms.)
func TestTokenWalksToMedian(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Margin = 100 * time.Microsecond
	path, last := walkRow(t, cfg, Token{0, 0})
	if want := []ID{"1", "2", "3", "4", "5"}; !slices.Equal(path, want) {
		t.Fatalf("token path %v, want %v", path, want)
	}
	if last.Seq != 5 {
		t.Errorf("token Seq = %d after 5 passes", last.Seq)
	}
}

// TestCooling: on the row of TestTokenWalksToMedian the steps from peer i to
// i+1 gain 0.91 × (9 − 2i) ms: 8.2, 6.4, 4.5, 2.7 and 0.9 ms. With Margin
// 0.5 ms a token without cooling walks to the median. With Cooling = 1 its
// margin doubles with every pass after the first: the fifth pass must gain
// 0.5 × 2³ = 4 ms and the token stops one peer short. A re-homed token is
// hot again, whatever its Seq.
func TestCooling(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Margin = 500 * time.Microsecond
	cfg.Cooling = -1
	if path, _ := walkRow(t, cfg, Token{0, 0}); !slices.Equal(path, []ID{"1", "2", "3", "4", "5"}) {
		t.Fatalf("without cooling: path %v, want to the median", path)
	}
	cfg.Cooling = 1
	want := []ID{"1", "2", "3", "4"}
	if path, _ := walkRow(t, cfg, Token{0, 0}); !slices.Equal(path, want) {
		t.Fatalf("Cooling = 1: path %v, want %v", path, want)
	}
	// Re-homed after 40 passes: the same walk, and newer than any report
	// of the old placement.
	again := Rehomed(0, 41)
	if again.Passes() != 0 || again.Seq <= 41 {
		t.Fatalf("Rehomed(0, 41) = %+v, Passes %d; want Seq above 41 and no passes", again, again.Passes())
	}
	path, last := walkRow(t, cfg, again)
	if !slices.Equal(path, want) {
		t.Fatalf("re-homed token: path %v, want %v", path, want)
	}
	if last.Passes() != 4 || last.Seq != again.Seq+4 {
		t.Errorf("re-homed token after 4 passes: %+v, Passes %d", last, last.Passes())
	}
	if r := Rehomed(0, last.Seq+1); r.Seq <= last.Seq || r.Passes() != 0 {
		t.Errorf("second re-homing %+v is not newer than %+v", r, last)
	}
}

// walkRow puts token tok on the first of a row of eleven peers 10 ms apart,
// each with its two neighbours in the row, ticks the holders until one is
// promoted, and returns the path of the token and the token as last held.
// It fails t if a pass does not lower the token's energy.
func walkRow(t *testing.T, cfg Config, tok Token) ([]ID, Token) {
	t.Helper()
	var peers []Peer
	for i := 0; i <= 10; i++ {
		peers = append(peers, peer(fmt.Sprint(i), float64(10*i), float64(i%2))) // a slight zigzag
	}
	hs := map[ID]*Holder{}
	for i, p := range peers {
		h := newHolder(t, p, cfg)
		var ns []Peer
		for _, j := range []int{i - 1, i + 1} {
			if j >= 0 && j < len(peers) {
				ns = append(ns, peers[j])
			}
		}
		h.SetNeighbours(ns)
		h.SetPeers(peers)
		hs[p.ID] = h
	}
	cur := hs["0"]
	mustReceive(t, cur, tok, t0)
	var path []ID
	last := math.Inf(1)
	for s := 1; s < 100; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		out := cur.Tick(now)
		if len(out) == 0 {
			continue
		}
		if p, ok := out[0].(Pass); ok {
			e := cur.field().energy(Peer{cur.self, cur.coord})
			if e >= last {
				t.Fatalf("energy rose to %v at %s", e, cur.self)
			}
			last = e
			next := hs[p.To]
			mustReceive(t, next, p.Token, now)
			cur.PassDone(true)
			cur = next
			path = append(path, p.To)
			continue
		}
		if _, ok := out[0].(Promote); ok {
			break
		}
	}
	if !cur.Superpeer() {
		t.Fatalf("holder %s not promoted", cur.self)
	}
	held, _ := cur.Holding()
	return path, held
}

// TestSuperpeerDemotedOnPass: a superpeer that passes its token on reports
// Demote when the pass completes.
func TestSuperpeerDemotedOnPass(t *testing.T) {
	cfg := DefaultConfig()
	a, b, n := peer("a", 0, 0), peer("b", 1, 0), peer("n", -5, 0)
	cfg.Attraction = -1
	h := newHolder(t, a, cfg)
	h.SetNeighbours([]Peer{n})
	mustReceive(t, h, Token{0, 0}, t0)
	if out := h.Tick(t0.Add(cfg.Dwell)); !reflect.DeepEqual(out, []Output{Promote{0}}) {
		t.Fatalf("Tick = %v, want Promote", out)
	}
	h.Observe(pos(1, 0, b)) // a token arrives next door
	if out := withoutGain(t, h.Tick(t0.Add(cfg.Dwell+time.Second))); !reflect.DeepEqual(out, []Output{Pass{Token: Token{0, 1}, To: "n"}}) {
		t.Fatalf("Tick = %v, want Pass to n", out)
	}
	if !h.Superpeer() {
		t.Fatal("demoted before the pass completed")
	}
	if out := h.PassDone(true); !reflect.DeepEqual(out, []Output{Demote{0}}) {
		t.Fatalf("PassDone = %v, want Demote", out)
	}
}

// TestFailedPassKeepsDwell: when the recipient refuses, the holder keeps its
// token and its holding time is unbroken.
func TestFailedPassKeepsDwell(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Attraction = -1
	a, b, n := peer("a", 0, 0), peer("b", 1, 0), peer("n", -5, 0)
	h := newHolder(t, a, cfg)
	h.SetNeighbours([]Peer{n})
	mustReceive(t, h, Token{0, 0}, t0)
	h.Observe(pos(1, 0, b))
	if out := h.Tick(t0.Add(time.Second)); len(out) != 1 {
		t.Fatalf("Tick = %v, want a Pass", out)
	}
	if out := h.PassDone(false); out != nil {
		t.Fatalf("PassDone(false) = %v", out)
	}
	h.Observe(pos(2, 0, n)) // n turned out to hold a token: no longer eligible
	if out := h.Tick(t0.Add(cfg.Dwell)); !reflect.DeepEqual(out, []Output{Promote{0}}) {
		t.Fatalf("Tick at Dwell = %v, want Promote", out)
	}
}

func TestInterruptedHoldingRestartsDwell(t *testing.T) {
	cfg := DefaultConfig()
	h := newHolder(t, peer("a", 0, 0), cfg)
	mustReceive(t, h, Token{0, 0}, t0)
	h.Tick(t0.Add(10 * time.Second))
	// The token is lost to a newer holder, and comes back later.
	h.Observe(pos(0, 1, peer("b", 5, 0)))
	if _, ok := h.Holding(); ok {
		t.Fatal("still holding a token held elsewhere at a higher Seq")
	}
	mustReceive(t, h, Token{0, 2}, t0.Add(20*time.Second))
	if out := h.Tick(t0.Add(cfg.Dwell + time.Second)); out != nil {
		t.Fatalf("Tick = %v: promoted before a full Dwell of the second holding", out)
	}
	if out := h.Tick(t0.Add(20*time.Second + cfg.Dwell)); !reflect.DeepEqual(out, []Output{Promote{0}}) {
		t.Fatalf("Tick = %v, want Promote", out)
	}
}

func TestObserve(t *testing.T) {
	cfg := DefaultConfig()
	h := newHolder(t, peer("m", 0, 0), cfg)
	mustReceive(t, h, Token{0, 5}, t0)
	h.Tick(t0.Add(cfg.Dwell)) // promoted

	// Reports about other tokens: older ones are ignored.
	h.Observe(pos(1, 4, peer("x", 10, 0)))
	h.Observe(pos(1, 3, peer("y", 20, 0)))
	if got := h.heard[1].Holder; got != "x" {
		t.Errorf("token 1 heard at %s, want x (the report with the higher Seq)", got)
	}
	// Malformed reports are ignored.
	bad := at(1, 1)
	bad.Vec[0] = math.NaN()
	h.Observe(Position{Token: Token{1, 9}, Holder: "z", Coord: bad})
	h.Observe(Position{Token: Token{1, 9}, Holder: "z"})
	if got := h.heard[1].Holder; got != "x" {
		t.Errorf("malformed report accepted: token 1 at %s", got)
	}
	// Reports about our own token: an older Seq, or the same Seq from a
	// larger ID, are stale or lose the tie.
	h.Observe(pos(0, 4, peer("a", 1, 0)))
	h.Observe(pos(0, 5, peer("z", 1, 0)))
	if _, ok := h.Holding(); !ok || !h.Superpeer() {
		t.Fatal("lost the token to a stale report or to a larger ID")
	}
	// The same Seq from a smaller ID wins the tie: this peer lost it.
	if out := h.Observe(pos(0, 5, peer("a", 1, 0))); !reflect.DeepEqual(out, []Output{Demote{0}}) {
		t.Fatalf("Observe duplicate = %v, want Demote", out)
	}
	if _, ok := h.Holding(); ok || h.Superpeer() {
		t.Fatal("still holding after losing the token")
	}
}

func TestReceiveRefuses(t *testing.T) {
	cfg := DefaultConfig()
	h := newHolder(t, peer("a", 0, 0), cfg)
	mustReceive(t, h, Token{0, 0}, t0)
	if err := h.Receive(Token{1, 0}, t0); err == nil {
		t.Error("took a second token")
	}
	g := newHolder(t, peer("g", 0, 0), cfg)
	g.Observe(pos(2, 7, peer("b", 3, 0)))
	if err := g.Receive(Token{2, 7}, t0); err == nil {
		t.Error("took a replayed pass of a token held elsewhere at the same Seq")
	}
	mustReceive(t, g, Token{2, 8}, t0)
	l := newHolder(t, peer("l", 0, 0), cfg)
	l.Leave()
	if err := l.Receive(Token{3, 0}, t0); err == nil {
		t.Error("a leaving peer took a token")
	}
}

func TestLeave(t *testing.T) {
	cfg := DefaultConfig()
	near, far, busy := peer("near", 5, 0), peer("far", 50, 0), peer("busy", 1, 0)
	t.Run("superpeer passes to nearest free neighbour", func(t *testing.T) {
		h := newHolder(t, peer("a", 0, 0), cfg)
		h.SetNeighbours([]Peer{far, busy, near})
		mustReceive(t, h, Token{0, 2}, t0)
		if out := h.Tick(t0.Add(cfg.Dwell)); !reflect.DeepEqual(out, []Output{Promote{0}}) {
			t.Fatalf("Tick = %v, want Promote", out)
		}
		h.Observe(pos(1, 0, busy))
		want := []Output{Demote{0}, Pass{Token: Token{0, 3}, To: "near"}} // no gain: it is leaving
		if out := h.Leave(); !reflect.DeepEqual(out, want) {
			t.Fatalf("Leave = %v, want %v", out, want)
		}
		// The pass fails: the next nearest free neighbour, then, with none
		// left (busy holds a token), the release.
		if out := h.PassDone(false); !reflect.DeepEqual(out, []Output{Pass{Token: Token{0, 3}, To: "far"}}) {
			t.Fatalf("failed pass while leaving = %v, want a pass to far", out)
		}
		if out := h.PassDone(false); !reflect.DeepEqual(out, []Output{Release{Token{0, 2}}}) {
			t.Fatalf("second failed pass while leaving = %v, want Release", out)
		}
		if out := h.Tick(t0.Add(time.Hour)); out != nil {
			t.Fatalf("Tick after leaving = %v", out)
		}
	})
	t.Run("three tries at most", func(t *testing.T) {
		h := newHolder(t, peer("a", 0, 0), cfg)
		var ns []Peer
		for i := range 5 {
			ns = append(ns, peer(fmt.Sprint("n", i), float64(i+1), 0))
		}
		h.SetNeighbours(ns)
		mustReceive(t, h, Token{0, 2}, t0)
		if out := h.Leave(); len(out) != 1 || out[0].(Pass).To != "n0" {
			t.Fatalf("Leave = %v, want a pass to n0, the nearest", out)
		}
		var out []Output
		for _, want := range []ID{"n1", "n2"} {
			out = h.PassDone(false)
			if len(out) != 1 || out[0].(Pass).To != want {
				t.Fatalf("after a failed pass while leaving: %v, want a pass to %s", out, want)
			}
		}
		if out = h.PassDone(false); !reflect.DeepEqual(out, []Output{Release{Token{0, 2}}}) {
			t.Fatalf("after three failed passes: %v, want Release", out)
		}
	})
	t.Run("no neighbour: release", func(t *testing.T) {
		h := newHolder(t, peer("a", 0, 0), cfg)
		mustReceive(t, h, Token{0, 2}, t0)
		if out := h.Leave(); !reflect.DeepEqual(out, []Output{Release{Token{0, 2}}}) {
			t.Fatalf("Leave = %v, want Release", out)
		}
		if _, ok := h.Holding(); ok {
			t.Fatal("holding after release")
		}
	})
	t.Run("leaving during a pass", func(t *testing.T) {
		c := cfg
		c.Attraction = -1
		h := newHolder(t, peer("a", 0, 0), c)
		h.SetNeighbours([]Peer{far})
		mustReceive(t, h, Token{0, 0}, t0)
		h.Observe(pos(1, 0, busy))
		if out := h.Tick(t0.Add(time.Second)); len(out) != 1 {
			t.Fatalf("Tick = %v, want Pass", out)
		}
		if out := h.Leave(); out != nil {
			t.Fatalf("Leave during a pass = %v, want nothing (the pass carries the token)", out)
		}
		if out := h.PassDone(true); out != nil {
			t.Fatalf("PassDone = %v", out)
		}
	})
	t.Run("not holding", func(t *testing.T) {
		h := newHolder(t, peer("a", 0, 0), cfg)
		if out := h.Leave(); out != nil {
			t.Fatalf("Leave = %v", out)
		}
	})
}

func TestHolderConfig(t *testing.T) {
	if _, err := NewHolder("", DefaultConfig()); !errors.Is(err, ErrConfig) {
		t.Errorf("empty ID: err = %v", err)
	}
	for _, tc := range []struct {
		field string
		mod   func(*Config)
	}{
		{"Tokens", func(c *Config) { c.Tokens = -2 }},
		{"Capacity", func(c *Config) { c.Capacity = -1 }},
		{"Range", func(c *Config) { c.Range = -time.Millisecond }},
		{"Softening", func(c *Config) { c.Softening = -time.Millisecond }},
		{"Threshold", func(c *Config) { c.Threshold = math.Inf(1) }},
		{"Attraction", func(c *Config) { c.Attraction = math.Inf(-1) }},
		{"Margin", func(c *Config) { c.Margin = -1 }},
		{"Dwell", func(c *Config) { c.Dwell = -time.Second }},
	} {
		cfg := DefaultConfig()
		tc.mod(&cfg)
		_, err := NewHolder("a", cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("bad %s: err = %v, want ErrConfig naming it", tc.field, err)
		}
	}
	h, _ := NewHolder("a", Config{}) // zero fields take the defaults
	if !reflect.DeepEqual(h.cfg, DefaultConfig()) {
		t.Errorf("zero Config became %+v, want the defaults %+v", h.cfg, DefaultConfig())
	}
	nan := at(0, 0)
	nan.Height = math.NaN()
	if err := h.SetCoordinate(nan); !errors.Is(err, ErrBadCoordinate) {
		t.Errorf("SetCoordinate(NaN height) = %v", err)
	}
	if err := h.SetCoordinate(nil); !errors.Is(err, ErrBadCoordinate) {
		t.Errorf("SetCoordinate(nil) = %v", err)
	}
	if err := h.SetCoordinate(at(1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := h.SetCoordinate(&coordinate.Coordinate{Vec: []float64{1, 2}}); !errors.Is(err, ErrBadCoordinate) {
		t.Errorf("SetCoordinate(2 dims after 8) = %v", err)
	}
}

// TestPopulationWeighsAttraction: a holder that knows only some peers'
// coordinates (a superpeer its members') weighs their pull by the swarm's
// size it is given (SetPopulation), A·S/N, not by the peers it knows. With
// two tokens, the other at -10 ms, the holder at 0 and the two other
// peers it knows at 10 ms,
// the step to the neighbour at 5 ms gains, beside the repulsion's (the
// gain with attraction off), the pull of the peers weighted by A·S/N: ten
// times less with N = 30 than with N the three peers known. A population
// below the peers known counts as them.
func TestPopulationWeighsAttraction(t *testing.T) {
	gain := func(attraction float64, population int) float64 {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Margin, cfg.Attraction = time.Microsecond, attraction
		a := peer("a", 0, 0)
		h := newHolder(t, a, cfg)
		h.SetPeers([]Peer{a, peer("p", 10, 0), peer("q", 10, 0)})
		h.SetNeighbours([]Peer{peer("mid", 5, 0)})
		h.SetPopulation(population)
		mustReceive(t, h, Token{0, 0}, t0)
		h.Observe(pos(1, 0, peer("b", -10, 0)))
		out := h.Tick(t0.Add(cfg.MinHold))
		if len(out) != 1 {
			t.Fatalf("population %d: Tick = %v, want a pass to mid", population, out)
		}
		return out[0].(Pass).Gain
	}
	rep := gain(-1, 0)
	known, swarm, below := gain(1, 0)-rep, gain(1, 30)-rep, gain(1, 2)-rep
	if known < 0.001 || math.Abs(known/swarm-10) > 1e-9 {
		t.Errorf("the pull gains %v s with the 3 peers known, %v s with a swarm of 30; want at least 1 ms, and ten times the second", known, swarm)
	}
	if below != known {
		t.Errorf("the pull gains %v s with a population of 2, want %v s as with the 3 peers known", below, known)
	}
}

// TestPin: a pinned holder keeps its token where the forces would move
// it (TestRepulsionPushesAway's field), and still hands it over; a token
// received again is not pinned.
func TestPin(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Attraction = -1
	a, b := peer("a", 0, 0), peer("b", 1, 0)
	away := peer("away", -5, 0)
	h := newHolder(t, a, cfg)
	h.SetNeighbours([]Peer{away, b})
	h.Pin() // holding nothing: no effect
	mustReceive(t, h, Token{0, 3}, t0)
	h.Observe(pos(1, 0, b))
	h.Pin()
	if !h.Pinned() {
		t.Fatal("not pinned")
	}
	for _, at := range []time.Duration{time.Second, time.Hour} {
		for _, o := range h.Tick(t0.Add(at)) {
			if _, ok := o.(Pass); ok {
				t.Fatalf("a pinned holder passed: %+v", o)
			}
		}
	}
	if out := h.Handover("away"); len(out) != 1 {
		t.Fatalf("Handover of a pinned token = %v, want a pass", out)
	}
	h.PassDone(true)
	mustReceive(t, h, Token{0, 9}, t0.Add(2*time.Hour))
	h.Observe(pos(1, 0, b))
	if h.Pinned() {
		t.Fatal("a token received again is pinned")
	}
	out := withoutGain(t, h.Tick(t0.Add(2*time.Hour+time.Second)))
	if want := []Output{Pass{Token: Token{0, 10}, To: "away"}}; !reflect.DeepEqual(out, want) {
		t.Fatalf("Tick after a new receipt = %v, want %v (not pinned)", out, want)
	}
}

// TestScaleInvariance: a holder on a network whose RTTs (coordinates,
// heights included) are all f times another's, with SetScale(f), decides
// as on the original: the same pass, or none, with f times the gain.
// Without SetScale the decisions differ on the small network: the
// lengths (Range, Softening, Margin) are then too large for it.
func TestScaleInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	scaled := func(c *coordinate.Coordinate, f float64) *coordinate.Coordinate {
		s := c.Clone()
		for i := range s.Vec {
			s.Vec[i] *= f
		}
		s.Height *= f
		return s
	}
	decide := func(f float64, setScale bool, ps []Peer, others []Position, self Peer) []Output {
		sp := make([]Peer, len(ps))
		for i, p := range ps {
			sp[i] = Peer{p.ID, scaled(p.Coord, f)}
		}
		h := newHolder(t, Peer{self.ID, scaled(self.Coord, f)}, DefaultConfig())
		if setScale {
			h.SetScale(f)
		}
		h.SetNeighbours(sp)
		h.SetPeers(sp)
		mustReceive(t, h, Token{0, 1}, t0)
		for _, o := range others {
			o.Coord = scaled(o.Coord, f)
			h.Observe(o)
		}
		return h.Tick(t0.Add(time.Second))
	}
	differs := 0
	for trial := range 40 {
		var ps []Peer
		for i := range 40 {
			ps = append(ps, peer(fmt.Sprint(i), rng.Float64()*200, rng.Float64()*200))
		}
		self := ps[0]
		var others []Position
		for k := 1; k <= 4; k++ {
			others = append(others, pos(k, 1, ps[k]))
		}
		want := decide(1, false, ps, others, self)
		for _, f := range []float64{0.01, 8} {
			got := decide(f, true, ps, others, self)
			if len(got) != len(want) {
				t.Fatalf("trial %d, scale %v: %v, want %v", trial, f, got, want)
			}
			for i := range got {
				g, gok := got[i].(Pass)
				w, wok := want[i].(Pass)
				if gok != wok || gok && (g.To != w.To || g.Token != w.Token || math.Abs(g.Gain-f*w.Gain) > 1e-9*f+1e-6*f*w.Gain) {
					t.Fatalf("trial %d, scale %v: %v, want %v with the gain times %v", trial, f, got, want, f)
				}
			}
		}
		if !reflect.DeepEqual(withoutGains(decide(0.01, false, ps, others, self)), withoutGains(want)) {
			differs++
		}
	}
	if differs == 0 {
		t.Error("without SetScale the small network decided as the original in every trial: the test shows nothing")
	}
	t.Logf("without SetScale, %d of 40 trials decided otherwise at scale 0.01", differs)
}

// withoutGains returns outs with the passes' gains zeroed.
func withoutGains(outs []Output) []Output {
	out := slices.Clone(outs)
	for i, o := range out {
		if p, ok := o.(Pass); ok {
			p.Gain = 0
			out[i] = p
		}
	}
	return out
}

func TestScaleFor(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		l    time.Duration
		want float64
	}{
		{0, 1}, {-ms, 1}, {100 * ms, 1}, {51 * ms, 1}, {199 * ms, 1}, {49 * ms, 0.25}, {201 * ms, 4},
		{ms, 1.0 / 64}, {time.Microsecond, 1.0 / (1 << 16)}, {time.Nanosecond, 1.0 / (1 << 18)}, {time.Hour, 64},
	} {
		if got := ScaleFor(c.l); got != c.want {
			t.Errorf("ScaleFor(%v) = %v, want %v", c.l, got, c.want)
		}
	}
	// Rescale keeps the scale within 4^¾ of it (4^1¼ of the defaults'), else
	// takes ScaleFor's.
	for _, c := range []struct {
		cur  float64
		l    time.Duration
		want float64
	}{
		{0, 49 * ms, 0.25}, {1, 49 * ms, 1}, {1, 18 * ms, 1}, {1, 17 * ms, 0.25}, {1, 565 * ms, 1}, {1, 570 * ms, 4},
		{0.25, 70 * ms, 0.25}, {0.25, 71 * ms, 1}, {0.25, 25 * ms, 0.25}, {0.25, 8 * ms, 1.0 / 16}, {1, 0, 1},
		{1.0 / 64, ms, 1.0 / 64}, {1, ms, 1.0 / 64},
	} {
		if got := Rescale(c.cur, c.l); got != c.want {
			t.Errorf("Rescale(%v, %v) = %v, want %v", c.cur, c.l, got, c.want)
		}
	}
}

func TestConfigScaled(t *testing.T) {
	c := DefaultConfig()
	c.MinHold, c.Dwell = time.Second, 2*time.Second
	s := c.Scaled(0.01)
	if s.Range != 30*time.Microsecond || s.Softening != 10*time.Microsecond || s.Margin != 10*time.Microsecond || s.PromotedMargin != 30*time.Microsecond {
		t.Errorf("Scaled(0.01) lengths = %v %v %v %v", s.Range, s.Softening, s.Margin, s.PromotedMargin)
	}
	if s.MinHold != c.MinHold || s.Dwell != c.Dwell || s.Threshold != c.Threshold || s.Attraction != c.Attraction || s.Capacity != c.Capacity {
		t.Errorf("Scaled changed what is not a length: %+v from %+v", s, c)
	}
	for _, f := range []float64{0, -1, math.NaN(), math.Inf(1), 1} {
		if got := c.Scaled(f); got != c {
			t.Errorf("Scaled(%v) = %+v, want c unchanged", f, got)
		}
	}
	if got := (Config{Range: 1}).Scaled(1e-6).Range; got != 1 {
		t.Errorf("a positive length scaled to below a nanosecond is %v, want 1ns", got)
	}
	if got := ScaleLength(time.Hour, 1e30); got != math.MaxInt64 {
		t.Errorf("ScaleLength past the longest Duration = %v, want the longest", got)
	}
	if got := DefaultSwapConfig().Scaled(0.5).Margin; got != 250*time.Microsecond {
		t.Errorf("SwapConfig.Scaled(0.5).Margin = %v", got)
	}
	if got := DefaultTolerance().Scaled(0.5); got.Abs != 5*time.Millisecond || got.Rel != DefaultTolerance().Rel {
		t.Errorf("Tolerance.Scaled(0.5) = %+v", got)
	}
}
