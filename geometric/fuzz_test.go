package geometric

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// fuzzBytes reads a fuzzer's bytes as a stream of choices; past the end
// every choice is 0.
type fuzzBytes struct{ b []byte }

func (in *fuzzBytes) next() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *fuzzBytes) intn(n int) int { return int(in.next()) % n }

// coord returns a coordinate: mostly a valid one of Dimensions dimensions
// on a coarse grid (so that coincident points and ties are common), now and
// then one at the bounds, and, when bad is set, sometimes nil, NaN or of
// another dimensionality.
func (in *fuzzBytes) coord(bad bool) *coordinate.Coordinate {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	kind := in.next()
	if bad {
		switch kind % 16 {
		case 0:
			return nil
		case 1:
			c.Vec = c.Vec[:3]
		case 2:
			c.Vec[0] = math.NaN()
			return c
		}
	}
	scale := 0.001
	if kind >= 240 {
		scale = MaxComponent / 128
	}
	for _, i := range []int{0, 1, 2} {
		c.Vec[i] = float64(int(in.next())-128) * scale
	}
	c.Height = float64(in.next()%8) * 0.0001
	c.Adjustment = float64(int(in.next()%8)-4) * 0.0001
	return c
}

var fuzzPool = []ID{"a", "b", "c", "d", "e", "f", "self"}

// peers returns a list of peers of the pool (duplicates possible) with
// coordinates, some unusable.
func (in *fuzzBytes) peers(max int) []Peer {
	var ps []Peer
	for range in.intn(max + 1) {
		ps = append(ps, Peer{ID: fuzzPool[in.intn(len(fuzzPool))], Coord: in.coord(true)})
	}
	return ps
}

func (in *fuzzBytes) token(tokens int) Token {
	t := Token{Num: in.intn(tokens + 1), Seq: uint64(in.next() % 8)}
	switch c := in.next(); {
	case c >= 250:
		t.Seq = math.MaxUint64 - uint64(c%2)
	case c >= 240:
		t.Seq = uint64(c%4) << 32 // a re-homed token
	}
	return t
}

// fuzzHolderState is what FuzzHolder knows of a Holder from its outputs.
type fuzzHolderState struct {
	passing bool
	left    bool
}

// FuzzHolder drives a token Holder with any sequence of its inputs:
// coordinates (valid or not), neighbour and peer lists (with duplicates,
// missing and unusable coordinates), gossiped positions of any token and
// holder (itself included, any Seq up to 2^64-1), tokens handed over or taken
// over, pass outcomes, leaving, and ticks at advancing times. After every
// input:
//
//   - nothing panics;
//   - a Pass moves the held token, one Seq up, to a current neighbour that
//     is not this peer and has a usable coordinate, with a finite,
//     non-negative gain, only when no pass is pending and (but for the one
//     Leave makes, and the next one PassDone makes when that one failed:
//     leaveTries) the peer has not left; a leaving peer's passes have no
//     gain;
//   - Promote comes only for the held token, once per holding, never after
//     Leave; Demote only from a superpeer; Release only after Leave, for the
//     held token; Receive and Takeover succeed only for a peer that holds no
//     token and has not left, and a failed one changes nothing;
//   - a superpeer holds a token, and Position reports exactly the held one.
//
// It runs a second Holder beside the first, with the same inputs but its
// peers given as a PeerSpace (SetPeerSpace) instead of a list (SetPeers):
// the package promises the same decisions, so the outputs must match (gains
// to within rounding).
func FuzzHolder(f *testing.F) {
	f.Add([]byte{3, 10, 20, 30, 0, 1, 200, 100, 50, 2, 2, 1, 7, 4, 0, 0, 8, 10, 8, 200, 8, 255, 8, 255, 6, 1})
	f.Add([]byte{1, 0, 5, 40, 40, 40, 0, 0, 1, 5, 0, 1, 2, 3, 1, 1, 0, 9, 9, 9, 1, 1, 2, 8, 4, 1, 1, 3, 0, 0, 5, 5, 5, 0, 0, 8, 1, 8, 3, 7, 6, 0})
	f.Add([]byte{0, 3, 0, 1, 10, 10, 10, 0, 0, 4, 1, 1, 8, 30, 1, 4, 0, 20, 20, 20, 0, 0, 1, 6, 0, 60, 60, 60, 0, 0, 8, 50, 6, 1, 8, 50, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{b: data}
		cfg := DefaultConfig()
		cfg.Tokens = 1 + in.intn(6)
		cfg.MinHold = time.Duration(in.intn(4)) * time.Second
		cfg.Dwell = time.Duration(1+in.intn(30)) * time.Second
		cfg.Cooling = in.intn(4) - 1
		cfg.Attraction = []float64{1, -1, 0.5, 4}[in.intn(4)]
		const self ID = "self"
		var hs [2]*Holder
		for v := range hs {
			h, err := NewHolder(self, cfg)
			if err != nil {
				t.Fatal(err)
			}
			hs[v] = h
		}
		var st fuzzHolderState
		var neighbours []Peer
		now := time.Unix(1_000_000, 0)
		for ops := 0; len(in.b) > 0 && ops < 400; ops++ {
			token, held := hs[0].Holding()
			super := hs[0].Superpeer()
			dims := -1 // of this peer's coordinate, while it holds a token
			if pos, ok := hs[0].Position(); ok {
				dims = len(pos.Coord.Vec)
			}
			var outs [2][]Output
			var errs [2]error
			op := in.intn(9)
			switch op {
			case 0:
				c := in.coord(true)
				for v, h := range hs {
					errs[v] = h.SetCoordinate(c)
				}
			case 1:
				neighbours = in.peers(6)
				for _, h := range hs {
					h.SetNeighbours(neighbours)
				}
			case 2:
				ps := in.peers(10)
				hs[0].SetPeers(ps)
				hs[1].SetPeerSpace(NewPeerSpace(ps))
			case 3:
				p := Position{Token: in.token(cfg.Tokens), Holder: fuzzPool[in.intn(len(fuzzPool))], Coord: in.coord(true)}
				for v, h := range hs {
					outs[v] = h.Observe(p)
				}
			case 4, 5:
				tk := in.token(cfg.Tokens)
				for v, h := range hs {
					if op == 4 {
						errs[v] = h.Receive(tk, now)
					} else {
						outs[v], errs[v] = h.Takeover(tk, now)
					}
				}
				if errs[0] == nil {
					if held || st.left {
						t.Fatalf("took token %+v while holding %v (token %+v) or after leaving (%v)", tk, held, token, st.left)
					}
					// A takeover promotes at once, and so does a token
					// handed over (Settled passes or more: Handover).
					if got, ok := hs[0].Holding(); !ok || got != tk || hs[0].Superpeer() != (op == 5 || tk.Passes() >= Settled) {
						t.Fatalf("after taking %+v: holding %+v %v, superpeer %v", tk, got, ok, hs[0].Superpeer())
					}
					st.passing = false
				} else if got, ok := hs[0].Holding(); ok != held || got != token {
					t.Fatalf("a refused token %+v changed the holding from %+v %v to %+v %v", tk, token, held, got, ok)
				}
			case 6:
				ok := in.next()%2 == 0
				for v, h := range hs {
					outs[v] = h.PassDone(ok)
				}
				st.passing = false
			case 7:
				for v, h := range hs {
					outs[v] = h.Leave()
				}
			default:
				now = now.Add(time.Duration(in.next()) * 100 * time.Millisecond)
				for v, h := range hs {
					outs[v] = h.Tick(now)
				}
			}
			if (errs[0] == nil) != (errs[1] == nil) {
				t.Fatalf("op %d: errors differ: %v with the list, %v with the space", op, errs[0], errs[1])
			}
			fuzzSameOutputs(t, outs[0], outs[1])
			for _, o := range outs[0] {
				switch o := o.(type) {
				case Pass:
					switch {
					case !held || st.passing || st.left && op != 7 && op != 6:
						t.Fatalf("op %d: %+v while held %v, passing %v, left %v", op, o, held, st.passing, st.left)
					case o.Token != Token{Num: token.Num, Seq: token.Seq + 1}:
						t.Fatalf("op %d: %+v moves another token than the held %+v", op, o, token)
					case o.To == self || o.To == "":
						t.Fatalf("op %d: %+v to itself or no one", op, o)
					case !slices.ContainsFunc(neighbours, func(n Peer) bool {
						return n.ID == o.To && n.Coord != nil && len(n.Coord.Vec) == dims && n.Coord.IsValid()
					}):
						t.Fatalf("op %d: %+v to no neighbour with a usable coordinate of %v", op, o, neighbours)
					case math.IsNaN(o.Gain) || math.IsInf(o.Gain, 0) || o.Gain < 0 || (op == 7 || st.left) && o.Gain != 0:
						t.Fatalf("op %d: %+v with gain %v", op, o, o.Gain)
					}
					st.passing = true
				case Promote:
					if !(held || op == 5) || super || st.left || op != 5 && o.Token != token.Num {
						t.Fatalf("op %d: %+v while held %v (token %+v), superpeer %v, left %v", op, o, held, token, super, st.left)
					}
				case Demote:
					if !super || o.Token != token.Num {
						t.Fatalf("op %d: %+v while superpeer %v of token %+v", op, o, super, token)
					}
				case Release:
					if !st.left && op != 7 || !held || o.Token != token {
						t.Fatalf("op %d: %+v while left %v, held %v (token %+v)", op, o, st.left, held, token)
					}
				default:
					t.Fatalf("op %d: unknown output %T", op, o)
				}
			}
			if op == 7 {
				st.left = true
			}
			got, ok := hs[0].Holding()
			if hs[0].Superpeer() && !ok {
				t.Fatalf("op %d: a superpeer that holds no token", op)
			}
			if pos, pok := hs[0].Position(); pok && (!ok || pos.Token != got || pos.Holder != self || pos.Coord == nil) {
				t.Fatalf("op %d: Position %+v while holding %+v %v", op, pos, got, ok)
			}
		}
	})
}

// fuzzSameOutputs fails unless a (with the peer list) and b (with the
// PeerSpace) are the same decisions, gains equal to within rounding.
func fuzzSameOutputs(t *testing.T, a, b []Output) {
	t.Helper()
	same := len(a) == len(b)
	for i := 0; same && i < len(a); i++ {
		pa, aok := a[i].(Pass)
		pb, bok := b[i].(Pass)
		switch {
		case aok != bok:
			same = false
		case aok:
			same = pa.To == pb.To && pa.Token == pb.Token && approxEqual(pa.Gain, pb.Gain)
		default:
			same = a[i] == b[i]
		}
	}
	if !same {
		t.Fatalf("decisions differ: %+v with the peer list, %+v with the PeerSpace", a, b)
	}
}
