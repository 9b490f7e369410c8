package dhtselect

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// FuzzParseKey: ParseKey, which decodes the cluster key of every membership
// announcement, never panics; what it accepts is 64 hex digits, and
// String gives them back (in lower case); so every key survives a round
// trip, and Cluster(k) of it is below it for every k.
func FuzzParseKey(f *testing.F) {
	f.Add(KeyOf("peer").String())
	f.Add(Mask(3).String())
	f.Add(strings.ToUpper(KeyOf("x").String()))
	f.Add("")
	f.Add("0g" + strings.Repeat("0", 62))
	f.Add(strings.Repeat("f", 66))
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			return
		}
		if len(s) != 2*len(k) || k.String() != strings.ToLower(s) {
			t.Fatalf("ParseKey(%q) = %s", s, k)
		}
		k2, err := ParseKey(k.String())
		if err != nil || k2 != k {
			t.Fatalf("round trip of %s: %s, %v", k, k2, err)
		}
		for c := 0; c <= KeyBits; c += 17 {
			if Closer(k, k.Cluster(c), Key{}) {
				t.Fatalf("%s.Cluster(%d) = %s lies above it", k, c, k.Cluster(c))
			}
		}
	})
}

// FuzzLookup drives a Lookup as a driver would, but with the answers under
// the fuzzer's control: any peer may answer (queried or not, once or twice),
// fail, or name any peers as closer (itself, us, the empty ID, peers named
// before). Hostile peers can answer anything, so only what the Lookup itself
// guarantees is checked:
//
//   - nothing panics;
//   - Next never returns us, the empty ID or a peer it returned before, and
//     never puts more than alpha queries in flight;
//   - an answer counts only from a peer in flight: Result holds us and the
//     peers that answered while queried, each once, closest first;
//   - once Done, Next has nothing more to ask;
//   - and the lookup ends: from any state, a driver that answers every query
//     with nothing new reaches Done within as many rounds as there are
//     candidates.
func FuzzLookup(f *testing.F) {
	f.Add([]byte{0x80, 3, 3, 0xff, 0, 1, 0x12, 0x34, 2, 5, 1, 0, 1, 1, 2, 3})
	f.Add([]byte{0x00, 1, 1, 0x03, 0, 0, 0, 1, 3, 0, 2, 0, 0, 0})
	f.Add([]byte{0xf0, 4, 2, 0xaa, 1, 2, 0xff, 0xff, 0, 0, 0, 1, 7, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		pool := make([]peer.ID, 16)
		for i := range pool {
			pool[i] = peer.ID(fmt.Sprintf("p%d", i))
		}
		const self = peer.ID("self")
		pick := func() peer.ID {
			switch c := int(next()); {
			case c < 224:
				return pool[c%len(pool)]
			case c < 240:
				return self
			default:
				return ""
			}
		}
		var target Key
		target[0] = next()
		width, alpha := 1+int(next()%4), 1+int(next()%4)
		var seeds []peer.ID
		for i, m := 0, next(); i < 8; i++ {
			if m&(1<<i) != 0 {
				seeds = append(seeds, pool[i])
			}
		}
		l := NewLookup(target, self, seeds, width, alpha)
		asked := map[peer.ID]bool{}
		inFlight := map[peer.ID]bool{}
		answered := map[peer.ID]bool{self: true}
		check := func() {
			res := l.Result()
			want := 0
			for id := range answered {
				if slices.Contains(res, id) {
					want++
				}
			}
			if want != len(answered) || len(res) != len(answered) {
				t.Fatalf("Result %v, want exactly %v", res, answered)
			}
			for i := 1; i < len(res); i++ {
				if !Closer(KeyOf(res[i-1]), KeyOf(res[i]), target) {
					t.Fatalf("Result %v is not closest first", res)
				}
			}
			if l.Done() {
				if got := l.Next(); len(got) > 0 {
					t.Fatalf("Done, yet Next asks %v", got)
				}
			}
		}
		ask := func() []peer.ID {
			got := l.Next()
			for _, p := range got {
				if p == self || p == "" || asked[p] {
					t.Fatalf("Next asks %q again, or us, or no one: %v", p, got)
				}
				asked[p], inFlight[p] = true, true
			}
			if len(inFlight) > alpha {
				t.Fatalf("%d queries in flight, alpha %d", len(inFlight), alpha)
			}
			return got
		}
		for ops := 0; len(data) > 0 && ops < 500; ops++ {
			switch next() % 4 {
			case 0:
				ask()
			case 1, 2:
				p := pick()
				var closer []peer.ID
				for range next() % 6 {
					closer = append(closer, pick())
				}
				l.Answered(p, closer)
				if inFlight[p] {
					delete(inFlight, p)
					answered[p] = true
				}
			case 3:
				p := pick()
				l.Failed(p)
				delete(inFlight, p)
			}
			check()
		}
		// An honest end: every query answered with nothing new.
		for round := 0; !l.Done(); round++ {
			if round > len(pool)+2 {
				t.Fatalf("not done after %d rounds of answers", round)
			}
			for p := range inFlight {
				l.Answered(p, nil)
				answered[p] = true
			}
			clear(inFlight)
			ask()
			check()
		}
	})
}
