package gossip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/serf/coordinate"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/internal/bubble"
)

// coordAt returns serf's default coordinate moved to x seconds on the first
// axis.
func coordAt(x float64) *coordinate.Coordinate {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	c.Vec[0] = x
	return c
}

// rawCoord is a token payload (token 0 at its placement, capacity 1) with
// the given JSON in place of the holder's coordinate, for crafting bad input
// the encoder refuses to produce.
func rawCoord(seq uint64, coordJSON string) []byte {
	return fmt.Appendf(nil, `{"v":2,"seq":%d,"num":0,"tseq":0,"load":0,"capacity":1,"coord":%s}`, seq, coordJSON)
}

const goodCoordJSON = `{"vec":[0.01,0,0,0,0,0,0,0],"error":1.5,"adjustment":0,"height":0.00001}`

// tokenRoundTrip encodes tp and decodes it from origin.
func tokenRoundTrip(t *testing.T, origin peer.ID, tp TokenPos) TokenPos {
	t.Helper()
	data, err := tp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTokenPos(origin, data)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTokenPosRoundTrip(t *testing.T) {
	id := fakeID(t, 1)
	tp := TokenPos{
		Holder: id, Seq: 7, Token: geometric.Token{Num: MaxTokens - 1, Seq: 1 << 60}, Coord: coordAt(-0.02),
		Superpeer: true, Load: 3, Capacity: 3,
	}
	got := tokenRoundTrip(t, id, tp)
	if got.Holder != id || got.Seq != 7 || got.Token != tp.Token || !geometric.SameCoord(got.Coord, tp.Coord) ||
		!got.Superpeer || got.Load != 3 || got.Capacity != 3 || got.Released {
		t.Fatalf("round trip changed the position: %+v -> %+v", tp, got)
	}
	// A release may leave the coordinate out.
	rel := TokenPos{Token: geometric.Token{Num: 2, Seq: 9}, Capacity: 1, Released: true}
	if got := tokenRoundTrip(t, id, rel); !got.Released || got.Coord != nil || got.Token != rel.Token {
		t.Fatalf("release round trip: %+v", got)
	}
}

// TestTokenPosSummary: a superpeer's cluster summary goes through the
// wire with its holder as its superpeer, microsecond durations and the
// candidate's peer ID; a summary out of range is refused on both sides,
// and a report without one decodes as before.
func TestTokenPosSummary(t *testing.T) {
	id, cand := fakeID(t, 1), fakeID(t, 2)
	sum := &geometric.ClusterSummary{Members: 3, Cost: 90 * time.Millisecond, Remove: 12345 * time.Microsecond, Full: true,
		Candidate: geometric.ID(cand), Gain: 40 * time.Millisecond}
	tp := TokenPos{Token: geometric.Token{Num: 1}, Coord: coordAt(0.01), Superpeer: true, Load: 3, Capacity: 4, Summary: sum}
	got := tokenRoundTrip(t, id, tp)
	want := *sum
	want.Superpeer = geometric.ID(id)
	if got.Summary == nil || *got.Summary != want {
		t.Fatalf("summary %+v, want %+v", got.Summary, want)
	}
	if !tokenSpec.same(got, TokenPos{Holder: id, Token: tp.Token, Coord: tp.Coord, Superpeer: true, Load: 3, Capacity: 4, Summary: &want}) {
		t.Error("an unchanged summary counts as a change")
	}
	other := want
	other.Gain++
	if tokenSpec.same(got, TokenPos{Holder: id, Token: tp.Token, Coord: tp.Coord, Superpeer: true, Load: 3, Capacity: 4, Summary: &other}) {
		t.Error("a changed summary does not count as a change: it would not be republished")
	}
	for name, bad := range map[string]geometric.ClusterSummary{
		"members above capacity": {Members: 5},
		"negative members":       {Members: -1},
		"negative cost":          {Cost: -time.Millisecond},
		"remove too long":        {Remove: MaxSummaryRTT + time.Microsecond},
		"negative gain":          {Gain: -1},
	} {
		tp.Summary = &bad
		if _, err := tp.Encode(); !errors.Is(err, ErrBadGeo) {
			t.Errorf("encode %s: err = %v, want ErrBadGeo", name, err)
		}
	}
	tok := func(sum string) []byte {
		return []byte(`{"v":2,"seq":1,"num":0,"capacity":4,"load":2,"coord":` + goodCoordJSON + `,"summary":` + sum + `}`)
	}
	for name, data := range map[string][]byte{
		"members above capacity": tok(`{"members":5,"cost_us":1,"remove_us":1,"gain_us":1}`),
		"negative remove":        tok(`{"members":1,"cost_us":1,"remove_us":-1,"gain_us":1}`),
		"gain too long":          tok(fmt.Sprintf(`{"members":1,"cost_us":1,"remove_us":1,"gain_us":%d}`, MaxSummaryRTT.Microseconds()+1)),
		"bad candidate":          tok(`{"members":1,"cost_us":1,"remove_us":1,"gain_us":1,"cand":"not a peer"}`),
		"not an object":          tok(`[1]`),
	} {
		if _, err := DecodeTokenPos(id, data); !errors.Is(err, ErrBadGeo) {
			t.Errorf("decode %s: err = %v, want ErrBadGeo", name, err)
		}
	}
	if got, err := DecodeTokenPos(id, tok(`{"members":2,"cost_us":1000,"remove_us":0,"gain_us":3}`)); err != nil || got.Summary == nil ||
		got.Summary.Cost != time.Millisecond || got.Summary.Candidate != "" {
		t.Fatalf("the good summary of these cases: %+v, %v", got.Summary, err)
	}
	if got, err := DecodeTokenPos(id, rawCoord(1, goodCoordJSON)); err != nil || got.Summary != nil {
		t.Fatalf("a report without a summary: %+v, %v", got.Summary, err)
	}
}

// TestDecodeCoordRejects: a token report whose holder's coordinate is
// malformed or out of range is rejected.
func TestDecodeCoordRejects(t *testing.T) {
	id := fakeID(t, 1)
	vec := func(first string) string {
		return `{"vec":[` + first + `,0,0,0,0,0,0,0],"error":1.5,"adjustment":0,"height":0.00001}`
	}
	cases := []struct {
		name   string
		origin peer.ID
		data   []byte
		coord  bool // the error also wraps geometric.ErrBadCoordinate
	}{
		{name: "not json", data: []byte("garbage")},
		{name: "empty", data: nil},
		{name: "oversized", data: append(rawCoord(1, goodCoordJSON), make([]byte, MaxGeoSize)...)},
		{name: "no version", data: []byte(`{"seq":1,"num":0,"capacity":1,"coord":` + goodCoordJSON + `}`)},
		{name: "unknown version", data: []byte(`{"v":1,"seq":1,"num":0,"capacity":1,"coord":` + goodCoordJSON + `}`)},
		{name: "trailing data", data: append(rawCoord(1, goodCoordJSON), []byte(`{}`)...)},
		{name: "negative seq", data: []byte(`{"v":2,"seq":-1,"num":0,"capacity":1,"coord":` + goodCoordJSON + `}`)},
		{name: "no origin", origin: "-", data: rawCoord(1, goodCoordJSON)},
		{name: "no coordinate", data: []byte(`{"v":2,"seq":1,"num":0,"capacity":1}`), coord: true},
		{name: "null coordinate", data: rawCoord(1, `null`), coord: true},
		{name: "no vec", data: rawCoord(1, `{"error":1.5,"height":0.00001}`), coord: true},
		{name: "wrong dimension", data: rawCoord(1, `{"vec":[0,0,0],"error":1.5,"height":0.00001}`), coord: true},
		{name: "overflow to inf", data: rawCoord(1, vec("1e400"))},
		{name: "negative overflow", data: rawCoord(1, vec("-1e400"))},
		{name: "NaN literal", data: rawCoord(1, vec("NaN"))},
		{name: "Infinity literal", data: rawCoord(1, vec("Infinity"))},
		{name: "string component", data: rawCoord(1, vec(`"0.1"`))},
		{name: "huge component", data: rawCoord(1, vec("1e300")), coord: true},
		{name: "absurd component", data: rawCoord(1, vec("11")), coord: true},
		{name: "huge height", data: rawCoord(1, `{"vec":[0,0,0,0,0,0,0,0],"error":1.5,"height":1e12}`), coord: true},
		{name: "negative height", data: rawCoord(1, `{"vec":[0,0,0,0,0,0,0,0],"error":1.5,"height":-0.1}`), coord: true},
		{name: "negative error", data: rawCoord(1, `{"vec":[0,0,0,0,0,0,0,0],"error":-1,"height":0.1}`), coord: true},
		{name: "huge adjustment", data: rawCoord(1, `{"vec":[0,0,0,0,0,0,0,0],"error":1,"height":0.1,"adjustment":-1e9}`), coord: true},
	}
	for _, c := range cases {
		origin := id
		if c.origin == "-" {
			origin = ""
		}
		_, err := DecodeTokenPos(origin, c.data)
		if !errors.Is(err, ErrBadGeo) {
			t.Errorf("%s: err = %v, want ErrBadGeo", c.name, err)
			continue
		}
		if c.coord && !errors.Is(err, geometric.ErrBadCoordinate) {
			t.Errorf("%s: err = %v, want it to wrap geometric.ErrBadCoordinate too", c.name, err)
		}
	}
	if _, err := DecodeTokenPos(id, rawCoord(1, goodCoordJSON)); err != nil {
		t.Fatalf("the good payload of these cases is rejected: %v", err)
	}
}

func TestDecodeTokenPosRejects(t *testing.T) {
	id := fakeID(t, 1)
	tok := func(fields string) []byte {
		return []byte(`{"v":2,"seq":1,"coord":` + goodCoordJSON + `,` + fields + `}`)
	}
	cases := map[string][]byte{
		"not json":          []byte("{"),
		"unknown version":   []byte(`{"v":3,"num":0,"capacity":1,"coord":` + goodCoordJSON + `}`),
		"oversized":         append(tok(`"num":0,"capacity":1`), make([]byte, MaxGeoSize)...),
		"negative num":      tok(`"num":-1,"capacity":1`),
		"num at MaxTokens":  tok(fmt.Sprintf(`"num":%d,"capacity":1`, MaxTokens)),
		"num overflows int": tok(`"num":1e30,"capacity":1`),
		"fractional num":    tok(`"num":1.5,"capacity":1`),
		"negative tseq":     tok(`"num":0,"tseq":-1,"capacity":1`),
		"zero capacity":     tok(`"num":0,"capacity":0`),
		"no capacity":       tok(`"num":0`),
		"negative load":     tok(`"num":0,"load":-1,"capacity":4`),
		"load > capacity":   tok(`"num":0,"load":5,"capacity":4`),
		"missing coord":     []byte(`{"v":2,"seq":1,"num":0,"capacity":1}`),
		"bad coord":         []byte(`{"v":2,"seq":1,"num":0,"capacity":1,"coord":{"vec":[1e300,0,0,0,0,0,0,0]}}`),
		"inf coord":         []byte(`{"v":2,"seq":1,"num":0,"capacity":1,"coord":{"vec":[1e999,0,0,0,0,0,0,0]}}`),
		"bad released":      []byte(`{"v":2,"seq":1,"num":0,"capacity":1,"released":true,"coord":{"vec":[0]}}`),
		"released bad load": []byte(`{"v":2,"seq":1,"num":0,"capacity":1,"load":2,"released":true}`),
	}
	for name, data := range cases {
		if _, err := DecodeTokenPos(id, data); !errors.Is(err, ErrBadGeo) {
			t.Errorf("%s: err = %v, want ErrBadGeo", name, err)
		}
	}
	if _, err := DecodeTokenPos("", tok(`"num":0,"capacity":1`)); !errors.Is(err, ErrBadGeo) {
		t.Errorf("no origin: err = %v, want ErrBadGeo", err)
	}
	if _, err := DecodeTokenPos(id, tok(`"num":0,"capacity":1,"load":1`)); err != nil {
		t.Fatalf("the good payload of these cases is rejected: %v", err)
	}
}

func TestEncodeRefusesWhatDecodeRejects(t *testing.T) {
	nan := coordAt(0)
	nan.Vec[3] = math.NaN()
	inf := coordAt(0)
	inf.Height = math.Inf(1)
	short := coordAt(0)
	short.Vec = short.Vec[:2]
	for name, c := range map[string]*coordinate.Coordinate{"nil": nil, "NaN": nan, "Inf": inf, "2 dimensions": short} {
		if _, err := (TokenPos{Coord: c, Capacity: 1}).Encode(); !errors.Is(err, ErrBadGeo) {
			t.Errorf("TokenPos %s: err = %v, want ErrBadGeo", name, err)
		}
	}
	for name, tp := range map[string]TokenPos{
		"num":      {Token: geometric.Token{Num: MaxTokens}, Coord: coordAt(0), Capacity: 1},
		"load":     {Coord: coordAt(0), Load: 2, Capacity: 1},
		"capacity": {Coord: coordAt(0)},
	} {
		if _, err := tp.Encode(); !errors.Is(err, ErrBadGeo) {
			t.Errorf("TokenPos bad %s: err = %v, want ErrBadGeo", name, err)
		}
	}
}

func TestTopicNames(t *testing.T) {
	if got := TokenTopic("x"); got != "/superpeer/x/tokens/2" {
		t.Errorf("TokenTopic = %q", got)
	}
	if got := ClusterTopic("x", 3); got != "/superpeer/x/tokens/2/cluster/3" {
		t.Errorf("ClusterTopic = %q", got)
	}
}

// A cluster topic's name differs from every token topic's and from every
// other network's or token's cluster topic, networks whose names look
// like topic names included; ClusterTopicToken reads back exactly the
// names ClusterTopic writes for tokens in [0, MaxTokens).
func TestClusterTopicNames(t *testing.T) {
	networks := []string{"x", "y", "x/tokens/2", "x/tokens/2/cluster/1", "x/tokens/2/cluster", "superpeer", ""}
	seen := map[string]string{}
	add := func(name, what string) {
		if prev, dup := seen[name]; dup {
			t.Errorf("%s and %s are both %q", prev, what, name)
		}
		seen[name] = what
	}
	for _, nw := range networks {
		add(TokenTopic(nw), fmt.Sprintf("TokenTopic(%q)", nw))
		for _, num := range []int{0, 1, 2, 10, 11, 100, MaxTokens - 1} {
			name := ClusterTopic(nw, num)
			add(name, fmt.Sprintf("ClusterTopic(%q, %d)", nw, num))
			if got, ok := ClusterTopicToken(nw, name); !ok || got != num {
				t.Errorf("ClusterTopicToken(%q, %q) = %d, %v; want %d", nw, name, got, ok, num)
			}
		}
		if _, ok := ClusterTopicToken(nw, TokenTopic(nw)); ok {
			t.Errorf("the token topic of %q read as a cluster topic", nw)
		}
	}
	for _, name := range []string{"/superpeer/x/tokens/2/cluster/", "/superpeer/x/tokens/2/cluster/-1", "/superpeer/x/tokens/2/cluster/01",
		"/superpeer/x/tokens/2/cluster/+1", "/superpeer/x/tokens/2/cluster/4096", "/superpeer/x/tokens/2/cluster/1/", "/superpeer/x/tokens/1/cluster/1",
		"/superpeer/y/tokens/2/cluster/1"} {
		if num, ok := ClusterTopicToken("x", name); ok {
			t.Errorf("ClusterTopicToken(x, %q) = %d, want none", name, num)
		}
	}
}

// A Geo on a cluster topic (JoinGeoCluster) hears the reports published
// there and not the backbone's, and the backbone's does not hear the
// cluster's: the topics are apart. Its validator is the backbone's (a
// malformed report is rejected), and a token number at or above the
// network's S is refused when joining.
func TestGeoClusterTopic(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hosts, pss := gossipSubNet(ctx, t, 3)
	cfg := GeoConfig{Network: "test", Interval: 100 * time.Millisecond, Tokens: 4}
	if _, err := JoinGeoCluster(pss[0], hosts[0].ID(), cfg, 4); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("cluster topic of token 4 of 4: %v, want ErrBadConfig", err)
	}
	if _, err := JoinGeoCluster(pss[0], hosts[0].ID(), cfg, -1); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("cluster topic of token -1: %v, want ErrBadConfig", err)
	}
	// 0 publishes on the cluster topic of token 1 and on the backbone; 1
	// reads the cluster topic only, 2 the backbone only.
	var gs []*Geo
	join := func(i, cluster int) *Geo {
		var g *Geo
		var err error
		if cluster < 0 {
			g, err = JoinGeo(pss[i], hosts[i].ID(), cfg)
		} else {
			g, err = JoinGeoCluster(pss[i], hosts[i].ID(), cfg, cluster)
		}
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
		return g
	}
	defer func() {
		for _, g := range gs {
			if err := g.Close(); err != nil {
				t.Error(err)
			}
		}
	}()
	onCluster, onBackbone := join(0, 1), join(0, -1)
	member, other := join(1, 1), join(2, -1)
	if onCluster.Topic() != ClusterTopic("test", 1) || onBackbone.Topic() != TokenTopic("test") {
		t.Fatalf("topics %q and %q", onCluster.Topic(), onBackbone.Topic())
	}
	inCluster := &TokenPos{Token: geometric.Token{Num: 1, Seq: 1 << 32}, Coord: coordAt(0.01), Superpeer: true, Capacity: 4}
	if err := onCluster.SetToken(ctx, inCluster); err != nil {
		t.Fatal(err)
	}
	onBackbone2 := *inCluster
	onBackbone2.Load = 2
	if err := onBackbone.SetToken(ctx, &onBackbone2); err != nil {
		t.Fatal(err)
	}
	heard := func(g *Geo, load int) func() bool {
		return func() bool {
			r := g.Reports()
			return len(r) == 1 && r[0].Holder == hosts[0].ID() && r[0].Load == load
		}
	}
	waitFor(t, "the member to hear the cluster's report", heard(member, 0))
	waitFor(t, "the other peer to hear the backbone's report", heard(other, 2))
	// Both topics carry several republications by now: neither heard
	// the other's.
	time.Sleep(300 * time.Millisecond)
	if !heard(member, 0)() || !heard(other, 2)() {
		t.Fatalf("member heard %+v, other %+v", member.Reports(), other.Reports())
	}
	// A malformed report on the cluster topic is rejected there.
	topic, err := pss[2].Join(ClusterTopic("test", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer topic.Close()
	before := member.Stats().Rejected
	if err := topic.Publish(ctx, rawCoord(1, `{"vec":[1e9,0,0,0,0,0,0,0],"error":1,"adjustment":0,"height":0}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the member to reject a malformed report", func() bool { return member.Stats().Rejected > before })
}

// clock is a settable clock for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// offlineGeo returns a Geo attached to no topic, whose messages the test
// hands in with offer, on a clock the test moves.
func offlineGeo(t *testing.T, self peer.ID, minGap time.Duration) (*Geo, *clock) {
	t.Helper()
	clk := &clock{t: time.Unix(1_000_000, 0)}
	g, fc, err := newGeo(self, GeoConfig{Network: "test", Interval: time.Second, MinGap: minGap, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	g.tokens = newFeed(fc, &tokenSpec, g.lim)
	return g, clk
}

// offer passes a message from origin through f's validator, as GossipSub
// does, and delivers it if accepted. The message comes through a relay, a
// peer other than the local one.
func offer[T any](f *feed[T], origin peer.ID, data []byte) pubsub.ValidationResult {
	const relay = peer.ID("relay")
	msg := &pubsub.Message{Message: &pb.Message{From: []byte(origin), Data: data}, ReceivedFrom: relay}
	r := f.validate(context.Background(), relay, msg)
	if r == pubsub.ValidationAccept {
		f.deliver(msg)
	}
	return r
}

// coordMsg is a token report of token 0 at its placement with the
// holder's coordinate c.
func coordMsg(t *testing.T, seq uint64, c *coordinate.Coordinate) []byte {
	t.Helper()
	data, err := TokenPos{Seq: seq, Coord: c, Capacity: 1}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func tokenMsg(t *testing.T, seq uint64, num int, tseq uint64, released bool) []byte {
	t.Helper()
	data, err := TokenPos{Seq: seq, Token: geometric.Token{Num: num, Seq: tseq << 32}, Coord: coordAt(float64(num) / 100), Capacity: 2, Released: released}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func drain(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestGeoValidatorStaleness(t *testing.T) {
	self, a := fakeID(t, 1), fakeID(t, 2)
	g, _ := offlineGeo(t, self, -1)
	f := g.tokens
	steps := []struct {
		what string
		seq  uint64
		x    float64
		want pubsub.ValidationResult
	}{
		{"first", 10, 0.01, pubsub.ValidationAccept},
		{"same seq", 10, 0.02, pubsub.ValidationIgnore},
		{"older", 9, 0.03, pubsub.ValidationIgnore},
		{"newer", 11, 0.04, pubsub.ValidationAccept},
	}
	for _, s := range steps {
		if got := offer(f, a, coordMsg(t, s.seq, coordAt(s.x))); got != s.want {
			t.Fatalf("%s (seq %d): %v, want %v", s.what, s.seq, got, s.want)
		}
	}
	if c, ok := g.Coord(a); !ok || c.Vec[0] != 0.04 {
		t.Fatalf("coordinate of a = %v, %v; want the newest (0.04)", c, ok)
	}
	if got := offer(f, a, rawCoord(12, `{"vec":[1e300,0,0,0,0,0,0,0]}`)); got != pubsub.ValidationReject {
		t.Fatalf("bad coordinate: %v, want Reject", got)
	}
	if got := offer(f, "", rawCoord(13, goodCoordJSON)); got != pubsub.ValidationReject {
		t.Fatalf("unsigned message: %v, want Reject", got)
	}
	// Our own message, relayed back by another peer, is ignored: we know our
	// own coordinate first-hand.
	if got := offer(f, self, coordMsg(t, 1, coordAt(0.5))); got != pubsub.ValidationIgnore {
		t.Fatalf("our own message relayed: %v, want Ignore", got)
	}
	if _, ok := g.Coord(self); ok {
		t.Fatal("a relayed message of ours entered our view")
	}
	if s := g.Stats(); s != (FeedStats{Accepted: 2, Rejected: 2, Ignored: 3}) {
		t.Fatalf("stats = %+v", s)
	}

	// Forget drops a's coordinate but keeps its sequence number: a delayed
	// older message does not bring it back, a newer one does.
	g.Forget(a)
	if _, ok := g.Coord(a); ok {
		t.Fatal("Forget kept the coordinate")
	}
	if got := offer(f, a, coordMsg(t, 11, coordAt(0.05))); got != pubsub.ValidationIgnore {
		t.Fatalf("replay after Forget: %v, want Ignore", got)
	}
	if got := offer(f, a, coordMsg(t, 12, coordAt(0.06))); got != pubsub.ValidationAccept {
		t.Fatalf("newer after Forget: %v, want Accept", got)
	}
}

func TestGeoTokensResolution(t *testing.T) {
	self := fakeID(t, 1)
	g, _ := offlineGeo(t, self, -1)
	// Three peers in ID order.
	ids := []peer.ID{fakeID(t, 2), fakeID(t, 3), fakeID(t, 4)}
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[j] < ids[i] {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	lo, mid, hi := ids[0], ids[1], ids[2]
	f := g.tokens
	holderOf := func(num int) (peer.ID, uint64) {
		for _, tp := range g.Tokens() {
			if tp.Token.Num == num {
				return tp.Holder, tp.Token.Seq >> 32
			}
		}
		return "", 0
	}
	mustAccept := func(from peer.ID, data []byte) {
		t.Helper()
		if r := offer(f, from, data); r != pubsub.ValidationAccept {
			t.Fatalf("message from %s: %v, want Accept", from, r)
		}
	}

	mustAccept(hi, tokenMsg(t, 1, 3, 5, false))
	if h, s := holderOf(3); h != hi || s != 5 {
		t.Fatalf("token 3 held by %s at %d, want hi at 5", h, s)
	}
	// A higher token Seq wins whatever the holder's ID.
	mustAccept(mid, tokenMsg(t, 1, 3, 6, false))
	if h, _ := holderOf(3); h != mid {
		t.Fatalf("token 3 held by %s, want mid (higher token seq)", h)
	}
	// A lower one loses even with a smaller ID.
	mustAccept(lo, tokenMsg(t, 1, 3, 4, false))
	if h, _ := holderOf(3); h != mid {
		t.Fatalf("token 3 held by %s, want mid (lo's report is older)", h)
	}
	// On an equal token Seq the smaller holder ID wins.
	mustAccept(lo, tokenMsg(t, 2, 3, 6, false))
	if h, _ := holderOf(3); h != lo {
		t.Fatalf("token 3 held by %s, want lo (equal token seq, smaller ID)", h)
	}
	// lo releases it: mid's report stands again.
	mustAccept(lo, tokenMsg(t, 3, 3, 6, true))
	if h, _ := holderOf(3); h != mid {
		t.Fatalf("after lo's release token 3 held by %s, want mid", h)
	}
	// A holder's newer message about another token replaces its old claim.
	mustAccept(mid, tokenMsg(t, 2, 5, 1, false))
	if h, s := holderOf(3); h != hi || s != 5 {
		t.Fatalf("after mid moved to token 5, token 3 held by %s at %d, want hi at 5", h, s)
	}
	// Our own token counts too, and the list is sorted by number.
	if err := g.SetToken(context.Background(), &TokenPos{Token: geometric.Token{Num: 0, Seq: 1 << 32}, Coord: coordAt(0), Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, tp := range g.Tokens() {
		nums = append(nums, tp.Token.Num)
	}
	if fmt.Sprint(nums) != "[0 3 5]" {
		t.Fatalf("token numbers %v, want [0 3 5]", nums)
	}
	if h, _ := holderOf(0); h != self {
		t.Fatalf("token 0 held by %s, want self", h)
	}
	// A stale message of a holder is ignored even though it names a token.
	if r := offer(f, hi, tokenMsg(t, 1, 9, 100, false)); r != pubsub.ValidationIgnore {
		t.Fatalf("stale token message: %v, want Ignore", r)
	}
	// Releasing our own clears it at once, and nothing is left to republish.
	if err := g.SetToken(context.Background(), &TokenPos{Token: geometric.Token{Num: 0, Seq: 1}, Coord: coordAt(0), Capacity: 1, Released: true}); err != nil {
		t.Fatal(err)
	}
	if h, _ := holderOf(0); h != "" {
		t.Fatalf("our released token still held by %s", h)
	}
	if g.tokens.local != nil {
		t.Fatal("a release stays to be republished")
	}
	// Forget drops a holder's position.
	g.Forget(hi)
	if h, _ := holderOf(3); h != "" {
		t.Fatalf("after Forget(hi) token 3 held by %s", h)
	}
}

func TestGeoExpiry(t *testing.T) {
	self, a := fakeID(t, 1), fakeID(t, 2)
	g, clk := offlineGeo(t, self, -1)
	ttl := g.cfg.TTL
	if ttl != 3*time.Second {
		t.Fatalf("default TTL %v, want 3 intervals", ttl)
	}
	offer(g.tokens, a, tokenMsg(t, 5, 1, 1, false))
	drain(g.Changes())

	clk.advance(ttl)
	if len(g.Coords()) != 1 || len(g.Tokens()) != 1 {
		t.Fatalf("entries gone at exactly the TTL: %v, %v", g.Coords(), g.Tokens())
	}
	clk.advance(time.Nanosecond)
	if len(g.Coords()) != 0 || len(g.Tokens()) != 0 {
		t.Fatalf("entries past the TTL still shown: %v, %v", g.Coords(), g.Tokens())
	}
	// The republish loop's expiry deletes them and signals the change.
	if !g.tokens.tab.expire(clk.now()) {
		t.Fatal("expiry of a live entry not reported as a change")
	}
	if len(g.tokens.tab.recs) != 0 {
		t.Fatal("expired records kept")
	}
	// Our own entry is refreshed by republication, not expired.
	if err := setCoord(context.Background(), g, coordAt(0.02)); err != nil {
		t.Fatal(err)
	}
	if !drain(g.Changes()) {
		t.Fatal("setting our coordinate signalled no change")
	}
	clk.advance(ttl / 2)
	g.tokens.publish(context.Background())
	clk.advance(ttl)
	if c, ok := g.Coord(self); !ok || c.Vec[0] != 0.02 {
		t.Fatalf("our own coordinate = %v, %v after republication", c, ok)
	}
}

// setCoord reports that this peer holds token 0 at its placement at c.
func setCoord(ctx context.Context, g *Geo, c *coordinate.Coordinate) error {
	return g.SetToken(ctx, &TokenPos{Coord: c, Capacity: 1})
}

func TestGeoSetAndMinGap(t *testing.T) {
	self := fakeID(t, 1)
	g, clk := offlineGeo(t, self, 100*time.Millisecond)
	ctx := context.Background()
	f := g.tokens
	if err := setCoord(ctx, g, nil); !errors.Is(err, ErrBadGeo) {
		t.Fatalf("nil coordinate: %v", err)
	}
	bad := coordAt(0)
	bad.Vec[0] = math.Inf(-1)
	if err := setCoord(ctx, g, bad); !errors.Is(err, ErrBadGeo) {
		t.Fatalf("infinite coordinate: %v", err)
	}
	if len(g.Coords()) != 0 {
		t.Fatal("a refused coordinate entered the view")
	}
	// The first value is published at once.
	if err := setCoord(ctx, g, coordAt(0.01)); err != nil {
		t.Fatal(err)
	}
	seq := f.lastSeq
	if seq == 0 || f.pending {
		t.Fatalf("first coordinate not published: seq %d, pending %v", seq, f.pending)
	}
	// The same value again publishes nothing.
	_ = setCoord(ctx, g, coordAt(0.01))
	if f.lastSeq != seq || f.pending {
		t.Fatal("an unchanged coordinate was published")
	}
	// A change within MinGap waits, but our own view shows it at once.
	_ = setCoord(ctx, g, coordAt(0.02))
	if f.lastSeq != seq || !f.pending {
		t.Fatal("a change within MinGap was published at once")
	}
	if c, _ := g.Coord(self); c.Vec[0] != 0.02 {
		t.Fatalf("own coordinate %v, want the pending one", c.Vec[0])
	}
	// After MinGap a change goes out at once.
	clk.advance(100 * time.Millisecond)
	_ = setCoord(ctx, g, coordAt(0.03))
	if f.lastSeq == seq || f.pending {
		t.Fatal("a change after MinGap was not published")
	}
	// A new token is urgent, a load change within MinGap is not.
	clk.advance(100 * time.Millisecond)
	tf := g.tokens
	tp := TokenPos{Token: geometric.Token{Num: 1, Seq: 1 << 32}, Coord: coordAt(0), Capacity: 2}
	_ = g.SetToken(ctx, &tp)
	tseq := tf.lastSeq
	tp.Load = 1
	_ = g.SetToken(ctx, &tp)
	if tf.lastSeq != tseq || !tf.pending {
		t.Fatal("a load change within MinGap was published at once")
	}
	tp.Token.Seq = 2 << 32
	_ = g.SetToken(ctx, &tp)
	if tf.lastSeq == tseq || tf.pending {
		t.Fatal("a new token was not published at once")
	}
	if err := g.SetToken(ctx, &TokenPos{Holder: fakeID(t, 9), Token: tp.Token, Coord: coordAt(0), Capacity: 1}); !errors.Is(err, ErrBadGeo) {
		t.Fatalf("a position of another holder: %v", err)
	}
	// SetToken(nil) drops our own position and stops republication.
	_ = g.SetToken(ctx, nil)
	if len(g.Tokens()) != 0 || tf.local != nil {
		t.Fatal("SetToken(nil) kept our position")
	}
}

// runCoordFeed returns a Geo attached to no topic whose token feed runs
// its republish loop, and the function that stops the loop.
func runCoordFeed(t *testing.T, self peer.ID, cfg GeoConfig) (*Geo, *feed[TokenPos], context.Context, func()) {
	t.Helper()
	g, fc, err := newGeo(self, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := newFeed(fc, &tokenSpec, g.lim)
	g.tokens = f
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.done.Add(1)
	go f.run(ctx)
	return g, f, ctx, func() { cancel(); f.done.Wait() }
}

// A change held back by MinGap goes out from the republish loop when the gap
// has passed, well before the next periodic republication.
func TestGeoDeferredPublish(t *testing.T) {
	self := fakeID(t, 1)
	g, f, ctx, stop := runCoordFeed(t, self, GeoConfig{Network: "test", Interval: time.Hour, MinGap: 20 * time.Millisecond})
	defer stop()

	if err := setCoord(ctx, g, coordAt(0.01)); err != nil {
		t.Fatal(err)
	}
	state := func() (uint64, bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.lastSeq, f.pending
	}
	first, _ := state()
	if err := setCoord(ctx, g, coordAt(0.02)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deferred change to be published", func() bool {
		seq, pending := state()
		return seq > first && !pending
	})
	f.mu.Lock()
	r := f.tab.recs[self]
	f.mu.Unlock()
	if r.val.Coord.Vec[0] != 0.02 || r.seq == first {
		t.Fatalf("published record %+v, want the deferred coordinate under a new seq", r)
	}
}

// Real GossipSub over an in-process network: every peer's view converges on
// every token and its holder's coordinate; a pass and a release spread; bad payloads
// published through the raw topic are rejected by every receiver and stale
// ones ignored, and neither reaches a view.
func TestGeoOverGossipSub(t *testing.T) {
	const n = 5
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hosts, pss := gossipSubNet(ctx, t, n)
	gs := make([]*Geo, n)
	ids := make([]peer.ID, n)
	for i, h := range hosts {
		g, err := JoinGeo(pss[i], h.ID(), GeoConfig{Network: "test", Interval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		gs[i], ids[i] = g, h.ID()
	}
	defer func() {
		for _, g := range gs {
			if err := g.Close(); err != nil {
				t.Error(err)
			}
		}
	}()
	pos := func(i, num int, tseq uint64) *TokenPos {
		return &TokenPos{Token: geometric.Token{Num: num, Seq: tseq << 32}, Coord: coordAt(float64(i) / 100), Capacity: 4}
	}
	if err := gs[0].SetToken(ctx, pos(0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := gs[1].SetToken(ctx, pos(1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := gs[4].SetToken(ctx, pos(4, 4, 1)); err != nil {
		t.Fatal(err)
	}
	// holders renders a view's tokens as "num@peer-index".
	holders := func(g *Geo) string {
		var out []string
		for _, tp := range g.Tokens() {
			i := 0
			for i < n && ids[i] != tp.Holder {
				i++
			}
			out = append(out, fmt.Sprintf("%d@%d", tp.Token.Num, i))
		}
		return strings.Join(out, " ")
	}
	// converged: the tokens are want, and the coordinates the holders'.
	converged := func(want string) func() bool {
		return func() bool {
			for _, g := range gs {
				cs := g.Coords()
				if holders(g) != want || len(cs) != len(g.Tokens()) {
					return false
				}
				for _, tp := range g.Tokens() {
					i := slices.Index(ids, tp.Holder)
					if c := cs[tp.Holder]; c == nil || c.Vec[0] != float64(i)/100 {
						return false
					}
				}
			}
			return true
		}
	}
	waitFor(t, "every view to hold tokens 0@0 1@1 4@4 and their holders' coordinates", converged("0@0 1@1 4@4"))

	// Peer 0 passes token 0 to peer 2: the higher token Seq wins everywhere,
	// though peer 0's older report lives on until it expires.
	if err := gs[2].SetToken(ctx, pos(2, 0, 2)); err != nil {
		t.Fatal(err)
	}
	if err := gs[0].SetToken(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pass of token 0 to peer 2 to spread", converged("0@2 1@1 4@4"))
	// A load change right after (within MinGap, so it may wait) spreads too.
	loaded := pos(2, 0, 2)
	loaded.Load = 3
	if err := gs[2].SetToken(ctx, loaded); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "peer 2's load to spread", func() bool {
		for _, g := range gs {
			if ts := g.Tokens(); len(ts) == 0 || ts[0].Load != 3 {
				return false
			}
		}
		return true
	})
	// Peer 1 leaves and releases token 1.
	rel := pos(1, 1, 1)
	rel.Released = true
	if err := gs[1].SetToken(ctx, rel); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the release of token 1 to spread", converged("0@2 4@4"))

	// Peer 4 publishes bad payloads through the raw topic: a token with a
	// load above its capacity, and a coordinate that overflows to infinity.
	// Each has the highest sequence number, so were it accepted it would
	// stick. Peer 4's own validator passes its own messages, so they do go
	// out; every receiver must reject them (at least two rejections each).
	badToken := []byte(fmt.Sprintf(`{"v":2,"seq":%d,"num":7,"tseq":9,"load":9,"capacity":1,"coord":%s}`, uint64(math.MaxUint64), goodCoordJSON))
	badCoord := rawCoord(math.MaxUint64, `{"vec":[1e400,0,0,0,0,0,0,0],"error":1,"height":0.1}`)
	before := make([]FeedStats, n)
	for i, g := range gs {
		before[i] = g.Stats()
	}
	publishUntil(t, "every peer to reject both bad payloads", func() {
		_ = gs[4].tokens.topic.Publish(ctx, badToken)
		_ = gs[4].tokens.topic.Publish(ctx, badCoord)
	}, func() bool {
		for i, g := range gs[:4] {
			if g.Stats().Rejected < before[i].Rejected+2 {
				return false
			}
		}
		return true
	})
	// A stale, well-formed report (sequence number 1, below peer 4's
	// republications) is ignored.
	stale := coordMsg(t, 1, coordAt(0.09))
	publishUntil(t, "every peer to ignore the stale report", func() {
		_ = gs[4].tokens.topic.Publish(ctx, stale)
	}, func() bool {
		for i, g := range gs[:4] {
			if g.Stats().Ignored == before[i].Ignored {
				return false
			}
		}
		return true
	})
	for i, g := range gs[:4] {
		if h := holders(g); h != "0@2 4@4" {
			t.Errorf("peer %d accepted a bad token: tokens %s", i, h)
		}
		if c, ok := g.Coord(ids[4]); !ok || c.Vec[0] != 0.04 {
			t.Errorf("peer %d's coordinate of peer 4 = %v, %v; want the honest one", i, c, ok)
		}
	}
	// Peer 4 stays in every view after this: its honest republications
	// still count.
	waitFor(t, "views to hold after the bad payloads", converged("0@2 4@4"))
}

// publishUntil calls publish, then again every 200 ms, until cond holds or a
// generous deadline passes (GossipSub delivers a message only to the mesh
// peers of the moment, so one publication may miss a peer).
func publishUntil(t *testing.T, what string, publish func(), cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		publish()
		for range 10 {
			if cond() {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A coordinate that changes with every sample, with MinGap equal to the
// republish interval (the live node's setting), goes out about once per
// interval: the periodic republication and the deferred change do not both
// send it. Virtual time: the feed's ticker and timers run on synctest's
// clock.
func TestGeoOnePublicationPerInterval(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		const interval, intervals = time.Second, 60
		g, f, ctx, stop := runCoordFeed(t, fakeID(t, 1), GeoConfig{Network: "test", Interval: interval, MinGap: interval})
		var longest, last time.Duration
		start := time.Now()
		prev := f.stats().Published
		for i := range intervals * 10 {
			if err := setCoord(ctx, g, coordAt(float64(i+1)/1000)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(interval / 10)
			synctest.Wait()
			if p := f.stats().Published; p != prev {
				prev = p
				now := time.Since(start)
				longest, last = max(longest, now-last), now
			}
		}
		stop()
		got := f.stats().Published
		if got < intervals-1 || got > intervals+2 {
			t.Fatalf("%d publications in %d intervals, want one per interval", got, intervals)
		}
		if longest > 3*interval/2+interval/10 {
			t.Fatalf("silence of %v between publications, want at most 1.5 intervals", longest)
		}
		t.Logf("%d publications in %d intervals, longest silence %v", got, intervals, longest)
	})
}

// TestTokenLink: a report of a passed token is believed only with the
// giver's signature naming its holder (issue 19, finding 3: a peer claimed
// tokens one pass above their holders'). The decoder rejects a pass claim
// without a link, a link on a placement, a link signed for another
// recipient or another pass, and a link signed by the claimer itself; it
// accepts a good one and names its giver.
func TestTokenLink(t *testing.T) {
	key := func(i byte) (crypto.PrivKey, peer.ID) { return seededKey(t, i) }
	giverKey, giver := key(1)
	holderKey, holder := key(2)
	_, other := key(3)
	tok := geometric.Token{Num: 1, Seq: 1<<32 + 3}
	link, err := SignLink(giverKey, tok, holder)
	if err != nil {
		t.Fatal(err)
	}
	encode := func(tp TokenPos) []byte {
		t.Helper()
		w := wireToken{V: GeoVersion, Seq: 1, Num: tp.Token.Num, TokenSeq: tp.Token.Seq, Coord: toWire(coordAt(0)), Capacity: 1, Link: tp.Link}
		data, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	got, err := DecodeTokenPos(holder, encode(TokenPos{Token: tok, Link: link}))
	if err != nil || got.Giver != giver || got.Holder != holder {
		t.Fatalf("a good link: %+v, %v; want giver %s", got, err, giver)
	}
	if g, err := UnmarshalLink(link.Marshal()); err != nil {
		t.Fatalf("stream encoding: %v", err)
	} else if id, err := g.Verify(tok, holder); err != nil || id != giver {
		t.Fatalf("stream encoding round trip: %s, %v", id, err)
	}
	self, err := SignLink(holderKey, tok, holder)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		origin peer.ID
		tp     TokenPos
	}{
		"pass without a link":   {holder, TokenPos{Token: tok}},
		"link on a placement":   {holder, TokenPos{Token: geometric.Token{Num: 1, Seq: 2 << 32}, Link: link}},
		"link to another":       {other, TokenPos{Token: tok, Link: link}},
		"link of another pass":  {holder, TokenPos{Token: geometric.Token{Num: 1, Seq: tok.Seq + 1}, Link: link}},
		"link of another token": {holder, TokenPos{Token: geometric.Token{Num: 2, Seq: tok.Seq}, Link: link}},
		"self-signed link":      {holder, TokenPos{Token: tok, Link: self}},
		"garbled signature":     {holder, TokenPos{Token: tok, Link: &TokenLink{Key: link.Key, Sig: append([]byte{1}, link.Sig[1:]...)}}},
		"garbled key":           {holder, TokenPos{Token: tok, Link: &TokenLink{Key: []byte{1, 2, 3}, Sig: link.Sig}}},
	} {
		if _, err := DecodeTokenPos(c.origin, encode(c.tp)); !errors.Is(err, ErrBadGeo) {
			t.Errorf("%s: err = %v, want ErrBadGeo", name, err)
		}
	}
	for _, b := range [][]byte{nil, {0}, {5, 1, 2}, {1, 9}} {
		if _, err := UnmarshalLink(b); !errors.Is(err, ErrBadGeo) {
			t.Errorf("UnmarshalLink(%v): err = %v, want ErrBadGeo", b, err)
		}
	}
}

// seededKey is the Ed25519 key drawn from a ChaCha8 source seeded with i,
// and its peer ID.
func seededKey(t *testing.T, i byte) (crypto.PrivKey, peer.ID) {
	t.Helper()
	sk, _, err := crypto.GenerateEd25519Key(mrand.NewChaCha8([32]byte{i}))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, id
}

// A quiet Geo (a superpeer's own cluster topic) publishes a new token, a
// promotion and a release at once, and nothing else: no coordinate or
// load change, and no republication every interval. Virtual time.
func TestGeoQuiet(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		self := fakeID(t, 1)
		g, f, ctx, stop := runCoordFeed(t, self, GeoConfig{Network: "test", Interval: 20 * time.Millisecond, MinGap: time.Millisecond})
		defer stop()
		g.SetQuiet(true)
		published := func() uint64 { return f.n.published.Load() }
		tp := TokenPos{Token: geometric.Token{Num: 1, Seq: 1 << 32}, Coord: coordAt(0.01), Capacity: 2}
		if err := g.SetToken(ctx, &tp); err != nil {
			t.Fatal(err)
		}
		if n := published(); n != 1 {
			t.Fatalf("%d publications of the first report, want 1", n)
		}
		tp.Coord, tp.Load = coordAt(0.02), 1
		if err := g.SetToken(ctx, &tp); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // five intervals, a hundred minimum gaps
		synctest.Wait()
		f.mu.Lock()
		pending := f.pending
		f.mu.Unlock()
		if n := published(); n != 1 || pending {
			t.Fatalf("%d publications (pending %v) after a coordinate and load change and five intervals, want 1", n, pending)
		}
		if c, _ := g.Coord(self); c.Vec[0] != 0.02 {
			t.Errorf("own coordinate %v, want the changed one", c.Vec[0])
		}
		tp.Superpeer = true // a promotion
		_ = g.SetToken(ctx, &tp)
		tp.Token.Seq = 2 << 32 // a new token
		_ = g.SetToken(ctx, &tp)
		tp.Released = true
		_ = g.SetToken(ctx, &tp)
		if n := published(); n != 4 {
			t.Fatalf("%d publications after a promotion, a new token and a release, want 4", n)
		}
		// Not quiet: republished every interval again.
		g.SetQuiet(false)
		tp.Released = false
		_ = g.SetToken(ctx, &tp)
		time.Sleep(50 * time.Millisecond) // two intervals and a half
		synctest.Wait()
		if n := published(); n < 7 {
			t.Errorf("%d publications two intervals after quiet was turned off, want 7 or more", n)
		}
	})
}
