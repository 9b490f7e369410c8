package gossip

import (
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// The fuzz targets of the gossip payloads (every decoder a validator runs on
// what any peer publishes) and of the membership view.

// fuzzOrigin returns one of four fixed peer IDs, the signed origin of a
// fuzzed message.
func fuzzOrigin(i byte) peer.ID {
	h := sha256.Sum256([]byte{'o', i % 4})
	id, err := peer.IDFromBytes(append([]byte{0x00, 0x20}, h[:]...))
	if err != nil {
		panic(err)
	}
	return id
}

func fuzzAnnouncement(id peer.ID, k int, seq uint64, addrs ...string) Announcement {
	a := Announcement{ID: id, K: k, ClusterKey: dhtselect.KeyOf(id).Cluster(k), Seq: seq}
	for _, s := range addrs {
		a.Addrs = append(a.Addrs, ma.StringCast(s))
	}
	return a
}

func mustEncode(tb testing.TB, enc func() ([]byte, error)) []byte {
	tb.Helper()
	b, err := enc()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func sameAnnouncement(a, b Announcement) bool {
	return a.ID == b.ID && a.Seq == b.Seq && a.Leaving == b.Leaving && sameSaying(a, b)
}

// FuzzDecodeAnnouncement: DecodeAnnouncement never panics and every error
// wraps ErrBadAnnouncement. What it accepts is from the given origin, has k
// in [0, dhtselect.MaxK], at most maxAddrs addresses and the cluster key of
// the origin at that k (a peer cannot speak for another's cluster), and
// encodes to a payload that decodes to the same announcement.
func FuzzDecodeAnnouncement(f *testing.F) {
	a := fuzzAnnouncement(fuzzOrigin(0), 3, 42, "/ip4/127.0.0.1/tcp/4001", "/ip6/::1/udp/4001/quic-v1")
	f.Add(byte(0), mustEncode(f, a.Encode))
	a.Superpeer, a.Private, a.Leaving = true, true, true
	f.Add(byte(0), mustEncode(f, a.Encode))
	f.Add(byte(1), mustEncode(f, fuzzAnnouncement(fuzzOrigin(1), 0, 1).Encode))
	f.Add(byte(2), mustEncode(f, fuzzAnnouncement(fuzzOrigin(2), dhtselect.MaxK, 1<<63, "/dns4/example.com/tcp/443/wss").Encode))
	f.Add(byte(1), mustEncode(f, a.Encode)) // another peer's cluster
	f.Add(byte(0), []byte(`{"v":2}`))
	f.Add(byte(0), []byte(`{"v":2,"k":-1}`))
	f.Add(byte(0), []byte(`{"v":2,"addrs":["/ip4/1.2.3.4/tcp/99999"]}`))
	f.Fuzz(func(t *testing.T, who byte, data []byte) {
		from := fuzzOrigin(who)
		a, err := DecodeAnnouncement(from, data)
		if err != nil {
			if !errors.Is(err, ErrBadAnnouncement) {
				t.Fatalf("error %v does not wrap ErrBadAnnouncement", err)
			}
			return
		}
		switch {
		case a.ID != from:
			t.Fatalf("ID %s, want the origin %s", a.ID, from)
		case a.K < 0 || a.K > dhtselect.MaxK:
			t.Fatalf("accepted k = %d", a.K)
		case len(a.Addrs) > maxAddrs:
			t.Fatalf("accepted %d addresses", len(a.Addrs))
		case a.ClusterKey != dhtselect.KeyOf(from).Cluster(a.K):
			t.Fatalf("accepted cluster key %s, not %s's at k = %d", a.ClusterKey, from, a.K)
		}
		b, err := a.Encode()
		if err != nil {
			t.Fatalf("accepted %+v but cannot encode it: %v", a, err)
		}
		if len(b) > MaxAnnouncementSize {
			return // the canonical form may spell an address longer
		}
		a2, err := DecodeAnnouncement(from, b)
		if err != nil {
			t.Fatalf("the encoding %s of an accepted announcement does not decode: %v", b, err)
		}
		if !sameAnnouncement(a, a2) {
			t.Fatalf("round trip changed the announcement\nfirst  %+v\nsecond %+v", a, a2)
		}
	})
}

func fuzzCoord(x float64) *coordinate.Coordinate {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	c.Vec[0], c.Height, c.Adjustment = x, 0.001, -0.0005
	return c
}

// FuzzDecodeTokenPos: DecodeTokenPos never panics and every error wraps
// ErrBadGeo. What it accepts has the origin as holder, a token number in
// [0, MaxTokens), capacity >= 1, load in [0, capacity], a valid coordinate
// (or none, only in a release), and encodes to a payload that decodes to
// the same position.
func FuzzDecodeTokenPos(f *testing.F) {
	tp := TokenPos{Seq: 3, Token: geometric.Token{Num: 2, Seq: 5 << 32}, Coord: fuzzCoord(0.02), Superpeer: true, Load: 1, Capacity: 4}
	f.Add(byte(0), mustEncode(f, tp.Encode))
	f.Add(byte(1), mustEncode(f, TokenPos{Seq: 9, Token: geometric.Token{Num: MaxTokens - 1, Seq: 1<<63 + 1}, Released: true, Capacity: 1}.Encode))
	f.Add(byte(0), []byte(`{"v":2,"seq":1,"num":-1,"capacity":1}`))
	f.Add(byte(0), []byte(`{"v":2,"seq":1,"num":0,"load":5,"capacity":4,"coord":{"vec":[0,0,0,0,0,0,0,0]}}`))
	f.Add(byte(0), []byte(`{"v":2,"seq":1,"num":0,"capacity":1,"coord":{"vec":[1e400,0,0,0,0,0,0,0]}}`))
	f.Add(byte(0), []byte(`{"v":2,"seq":1,"num":0,"capacity":1,"coord":{"vec":[0,0,0,0,0,0,0]}}`))
	f.Add(byte(0), []byte(`{"v":2,"seq":1,"num":0,"capacity":1,"coord":null} {}`))
	sum := tp
	sum.Summary = &geometric.ClusterSummary{Members: 1, Cost: 3 * time.Millisecond, Remove: time.Millisecond, Candidate: geometric.ID(fuzzOrigin(1)), Gain: 2 * time.Millisecond}
	f.Add(byte(0), mustEncode(f, sum.Encode))
	f.Add(byte(0), []byte(`{"v":2,"seq":1,"num":0,"capacity":1,"coord":{"vec":[0,0,0,0,0,0,0,0]},"summary":{"members":2,"cost_us":-1,"cand":"x"}}`))
	f.Fuzz(func(t *testing.T, who byte, data []byte) {
		origin := fuzzOrigin(who)
		p, err := DecodeTokenPos(origin, data)
		if err != nil {
			if !errors.Is(err, ErrBadGeo) {
				t.Fatalf("error %v does not wrap ErrBadGeo", err)
			}
			return
		}
		switch {
		case p.Holder != origin:
			t.Fatalf("holder %s, want the origin %s", p.Holder, origin)
		case p.Token.Num < 0 || p.Token.Num >= MaxTokens:
			t.Fatalf("accepted token number %d", p.Token.Num)
		case p.Capacity < 1 || p.Load < 0 || p.Load > p.Capacity:
			t.Fatalf("accepted load %d of capacity %d", p.Load, p.Capacity)
		case p.Coord == nil && !p.Released:
			t.Fatalf("accepted a position without a coordinate: %+v", p)
		case p.Coord != nil && geometric.Valid(p.Coord) != nil:
			t.Fatalf("accepted an invalid coordinate %+v: %v", p.Coord, geometric.Valid(p.Coord))
		case p.Summary != nil && (p.Summary.Superpeer != geometric.ID(origin) || p.Summary.Members < 0 || p.Summary.Members > p.Capacity ||
			p.Summary.Cost < 0 || p.Summary.Remove < 0 || p.Summary.Gain < 0 || max(p.Summary.Cost, p.Summary.Remove, p.Summary.Gain) > MaxSummaryRTT):
			t.Fatalf("accepted summary %+v of capacity %d from %s", p.Summary, p.Capacity, origin)
		}
		b, err := p.Encode()
		if err != nil {
			t.Fatalf("accepted %+v but cannot encode it: %v", p, err)
		}
		p2, err := DecodeTokenPos(origin, b)
		if err != nil {
			t.Fatalf("the encoding %s of an accepted position does not decode: %v", b, err)
		}
		c1, c2 := p.Coord, p2.Coord
		s1, s2 := p.Summary, p2.Summary
		p.Coord, p2.Coord, p.Summary, p2.Summary = nil, nil, nil, nil
		if p != p2 || !geometric.SameCoord(c1, c2) || c1 != nil && c1.Error != c2.Error || !sameSummary(s1, s2) {
			t.Fatalf("round trip changed the position\nfirst  %+v %+v\nsecond %+v %+v", p, c1, p2, c2)
		}
	})
}

// FuzzView drives the membership view with a sequence of announcements
// (from four peers, any sequence numbers, goodbyes, roles, clusters and
// addresses), removals and expiries at advancing times, and checks it
// against a model of what it promises: a stale announcement (Seq not above
// the last accepted, goodbyes included) changes nothing; an accepted one is
// what Get returns, unless it is a goodbye, which hides the peer (Left) until
// it expires; Expire drops exactly the entries older than the TTL that keep
// does not keep (goodbyes whatever keep says), returns the non-goodbyes among
// them sorted, and keeps the rest; Len and Entries agree, sorted by ID.
func FuzzView(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 1, 2, 0, 0, 3, 10, 2, 200})
	f.Add([]byte{0, 1, 5, 4, 0, 1, 3, 5, 4, 2, 0, 0, 3, 90, 3, 90, 4, 0xff})
	f.Add([]byte{1, 2, 1, 0, 1, 2, 0, 8, 3, 200, 2, 1, 1, 2, 2, 1, 3, 255, 3, 255, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const ttl = 100 * time.Second
		v := NewView(ttl)
		type rec struct {
			a    Announcement
			seen time.Time
		}
		model := map[peer.ID]rec{}
		now := time.Unix(1_000_000, 0)
		addrs := []string{"/ip4/10.0.0.1/tcp/1", "/ip4/10.0.0.2/tcp/1", "/ip6/::1/tcp/2"}
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}
		for ops := 0; len(data) > 0 && ops < 1000; ops++ {
			switch op := next() % 4; op {
			case 0, 1:
				c, seq := next(), next()
				id := fuzzOrigin(c)
				a := fuzzAnnouncement(id, int(c>>2)%4, uint64(seq%8))
				a.Superpeer, a.Leaving, a.Private = c&0x10 != 0, c&0x20 != 0 && op == 1, c&0x40 != 0
				for i, s := range addrs {
					if seq&(0x10<<i) != 0 {
						a.Addrs = append(a.Addrs, ma.StringCast(s))
					}
				}
				old, had := model[id]
				stale := v.Stale(a)
				if stale != (had && a.Seq <= old.a.Seq) {
					t.Fatalf("Stale(%s seq %d) = %v with %+v in the view", id, a.Seq, stale, old)
				}
				accepted, changed := v.Apply(a, now)
				if accepted == stale {
					t.Fatalf("Apply(%s seq %d): accepted %v, stale %v", id, a.Seq, accepted, stale)
				}
				if !accepted {
					if changed {
						t.Fatalf("a stale announcement changed the view")
					}
					break
				}
				wasLive := had && !old.a.Leaving
				switch {
				case a.Leaving && changed != wasLive:
					t.Fatalf("goodbye of %s: changed %v, was live %v", id, changed, wasLive)
				case !a.Leaving && changed != (!wasLive || !sameSaying(old.a, a)):
					t.Fatalf("announcement of %s: changed %v, before %+v now %+v", id, changed, old.a, a)
				}
				model[id] = rec{a, now}
			case 2:
				id := fuzzOrigin(next())
				old, had := model[id]
				if got := v.Remove(id); got != (had && !old.a.Leaving) {
					t.Fatalf("Remove(%s) = %v, model %+v (had %v)", id, got, old, had)
				}
				delete(model, id)
			case 3:
				now = now.Add(time.Duration(next()) * time.Second)
				keepMask := next()
				keep := func(id peer.ID) bool {
					for i := range byte(4) {
						if fuzzOrigin(i) == id {
							return keepMask&(1<<i) != 0
						}
					}
					return false
				}
				var want []peer.ID
				for id, r := range model {
					if now.Sub(r.seen) <= ttl {
						continue
					}
					if r.a.Leaving {
						delete(model, id)
					} else if !keep(id) {
						want = append(want, id)
						delete(model, id)
					}
				}
				slices.Sort(want)
				if got := v.Expire(now, keep); !slices.Equal(got, want) {
					t.Fatalf("Expire at %v: %v, want %v", now, got, want)
				}
			}
			var live []peer.ID
			for id, r := range model {
				if !r.a.Leaving {
					live = append(live, id)
				}
				e, ok := v.Get(id)
				if ok == r.a.Leaving || ok && (!sameAnnouncement(e.Announcement, r.a) || !e.Seen.Equal(r.seen)) {
					t.Fatalf("Get(%s) = %+v, %v; model %+v", id, e, ok, r)
				}
				if v.Left(id) != r.a.Leaving {
					t.Fatalf("Left(%s) = %v, model %+v", id, v.Left(id), r)
				}
			}
			slices.Sort(live)
			var got []peer.ID
			for _, e := range v.Entries() {
				got = append(got, e.ID)
			}
			if !slices.Equal(got, live) || v.Len() != len(live) {
				t.Fatalf("Entries %v, Len %d; want %v", got, v.Len(), live)
			}
		}
	})
}
