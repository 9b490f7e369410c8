package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// The geometric strategy's rules (geo.go, geoplace.go, geoattach.go), fed
// by hand in virtual time.

const ms = time.Millisecond

// geoTestConfig is a geometric node: S tokens of capacity 2, token rounds
// and pings every second, announcements every 5 s.
func geoTestConfig(self string, s int) Config {
	cfg := testConfig(self)
	cfg.Geometric, cfg.Bootstrap = true, true // a node that joined a network
	cfg.Geo = GeoConfig{
		Network: "test", PingInterval: time.Second, TokenInterval: time.Second,
		Tokens: geometric.Config{Tokens: s, Capacity: 2, MinHold: 10 * time.Second, Dwell: 5 * time.Second, Margin: LiveMargin},
	}
	return cfg
}

// at is a coordinate x seconds along the first axis from the origin every
// client starts at.
func at(t testing.TB, x float64) *coordinate.Coordinate {
	t.Helper()
	c, err := geometric.NewClient(geometric.DefaultCoordConfig())
	if err != nil {
		t.Fatal(err)
	}
	co := c.Coordinate()
	co.Vec[0] += x
	return co
}

// geoDriver drives one machine as a shell does: every 100 ms of virtual
// time it gives the feed when GeoDue, ticks, and answers at once every
// ping, pass and attach request the Ready asks for, by the functions given
// (a nil one fails them).
type geoDriver struct {
	t      *testing.T
	m      *Machine
	now    time.Time
	feed   GeoFeed
	coords map[peer.ID]*coordinate.Coordinate // what the node knows (know)
	ping   func(p peer.ID) (time.Duration, error)
	// pingCoord, when set, is the coordinate p's ping answer carries.
	pingCoord func(p peer.ID) *coordinate.Coordinate
	pass      func(p TokenPass) bool
	attach    func(p peer.ID) AttachDone
	// silent, when set, names the peers whose pings go unanswered: no
	// PingDone at all, as a peer whose process died while its
	// connection lingers.
	silent func(p peer.ID) bool

	pings, asked []peer.ID
	// detached are the superpeers told that the node left them
	// (GeoReady.Detach), in order.
	detached []peer.ID
	// requests are the attach requests asked for, with their times and
	// reports (GeoReady.AttachRTTs).
	requests []attachRequest
	passes   []TokenPass
	reports  []TokenReport
	states   []GeoState
	notes    []Note
	messages []Outgoing
}

func newGeoDriver(t *testing.T, cfg Config) *geoDriver {
	return &geoDriver{t: t, m: mustNew(t, cfg), now: t0, coords: map[peer.ID]*coordinate.Coordinate{}}
}

// know gives the machine d.coords as the coordinates it knows of its
// cluster, as if its superpeer had sent them (coords.go), for an hour.
// The tests of the rules that decide on coordinates start from them;
// TestGeoCoordsScoped tests how a node learns them.
func (d *geoDriver) know() {
	for p, c := range d.coords {
		if p != d.m.cfg.Self {
			d.m.geo.mateCoord[p] = heardCoord{c: c, until: d.now.Add(time.Hour)}
		}
	}
}

// run advances the clock by d.
func (d *geoDriver) run(dur time.Duration) {
	for end := d.now.Add(dur); d.now.Before(end); d.now = d.now.Add(100 * time.Millisecond) {
		if d.m.GeoDue(d.now) {
			d.know()
			d.m.Step(d.now, d.feed)
		}
		d.m.Tick(d.now)
		d.drain()
	}
}

// step gives one input and carries out the Ready.
func (d *geoDriver) step(in Input) {
	if _, ok := in.(GeoFeed); ok {
		d.know()
	}
	d.m.Step(d.now, in)
	d.drain()
}

func (d *geoDriver) drain() {
	for {
		rd := d.m.Ready()
		g := rd.Geo
		d.notes = append(d.notes, rd.Notes...)
		d.messages = append(d.messages, rd.Messages...)
		d.reports = append(d.reports, g.Tokens...)
		if g.State != nil {
			d.states = append(d.states, *g.State)
		}
		d.detached = append(d.detached, g.Detach...)
		if len(g.Detach) > 0 && g.AttachCoord == nil {
			d.t.Errorf("a detach to %v without the node's coordinate", g.Detach)
		}
		if len(g.Pings)+len(g.Passes)+len(g.Attach) == 0 {
			return
		}
		for _, p := range g.Pings {
			d.pings = append(d.pings, p)
			if d.silent != nil && d.silent(p) {
				continue
			}
			in := PingDone{Peer: p, Err: fmt.Errorf("no answer")}
			if d.ping != nil {
				in.RTT, in.Err = d.ping(p)
			}
			if d.pingCoord != nil && in.Err == nil {
				in.Coord = d.pingCoord(p)
			}
			d.m.Step(d.now, in)
		}
		for _, p := range g.Passes {
			d.passes = append(d.passes, p)
			d.m.Step(d.now, PassDone{To: p.To, Token: p.Token, OK: d.pass != nil && d.pass(p)})
		}
		for _, p := range g.Attach {
			d.asked = append(d.asked, p)
			d.requests = append(d.requests, attachRequest{at: d.now, to: p, rtts: g.AttachRTTs[p]})
			in := AttachDone{To: p, Err: fmt.Errorf("no answer")}
			if d.attach != nil {
				in = d.attach(p)
			}
			d.m.Step(d.now, in)
		}
	}
}

// attachedToHolder is node o, with bully elections, attached to h, the
// holder of token 0 at pass counter seq, alone in h's cluster.
func attachedToHolder(t *testing.T, seq uint64) *geoDriver {
	t.Helper()
	cfg := geoTestConfig("o", 1)
	cfg.Election = "bully"
	d := newGeoDriver(t, cfg)
	d.m.Step(d.now, view("o", "h"))
	d.feed = attachFeed(t, "h")
	d.feed.Tokens[0].Token.Seq = seq
	d.feed.Connected = []peer.ID{"h"}
	d.attach = func(p peer.ID) AttachDone { return AttachDone{To: p, OK: true, Mates: []peer.ID{"h", "o"}} }
	d.run(3 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "h" {
		t.Fatalf("attached to %q, want h", sp)
	}
	return d
}

// successorCluster is node y, with bully elections, attached to h, the
// holder of token 0, in a cluster of h, x and y in which x outranks y.
func successorCluster(t *testing.T) (*geoDriver, string) {
	t.Helper()
	key := TokenKey("test", 0)
	x := ""
	for i := range 100 {
		if c := fmt.Sprintf("x%d", i); dhtselect.Closer(dhtselect.KeyOf(peer.ID(c)), dhtselect.KeyOf("y"), key) {
			x = c
			break
		}
	}
	cfg := geoTestConfig("y", 2)
	cfg.Election = "bully"
	d := newGeoDriver(t, cfg)
	d.m.Step(d.now, view("y", "h", x))
	d.feed = attachFeed(t, "h")
	d.coords["y"] = d.coords["o"]
	d.feed.Connected = []peer.ID{"h", peer.ID(x)}
	d.attach = func(p peer.ID) AttachDone { return AttachDone{To: p, OK: true, Mates: []peer.ID{"h", peer.ID(x), "y"}} }
	d.run(3 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "h" {
		t.Fatalf("attached to %q, want h", sp)
	}
	return d, x
}

// electSuccessor: h's connection goes; y campaigns, and x, elected,
// answers its ELECTION (OK, as an honest bully process does before it
// announces itself: y follows no COORDINATOR from a member that did not
// answer its election) and says so.
func (d *geoDriver) electSuccessor(x string) {
	d.t.Helper()
	d.step(Conn{Peer: "h", Connected: 1})
	d.step(ElectionMessage{Msg: classic.Message{Type: classic.MsgOK, From: classic.ID(x), To: "y"}})
	d.step(ElectionMessage{Msg: classic.Message{Type: classic.MsgCoordinator, From: classic.ID(x), To: "y", Leader: classic.ID(x)}})
	if l := d.m.leaderOf("h"); l != peer.ID(x) {
		d.t.Fatalf("the election of h's cluster names %q, want %s", l, x)
	}
}

// attachRequest is an attach request a geoDriver carried out.
type attachRequest struct {
	at   time.Time
	to   peer.ID
	rtts []time.Duration
}

// handOver gives the machine token tok from the peer from as a pass does
// from its holder: a feed in which from reports tok one pass below (a
// machine takes a pass only from the holder it knows, geotokens.go), then
// the pass.
func (d *geoDriver) handOver(from peer.ID, tok geometric.Token) {
	d.t.Helper()
	d.step(GeoFeed{Tokens: []TokenPos{{Holder: from, Token: geometric.Token{Num: tok.Num, Seq: tok.Seq - 1}, Coord: at(d.t, 0.5)}}})
	d.step(TokenOffered{From: from, Token: tok})
}

// promote hands tok over to the node (handOver, from x) and runs it past
// the dwell (5 s): a superpeer.
func (d *geoDriver) promote(tok geometric.Token) {
	d.t.Helper()
	d.handOver("x", tok)
	if !d.m.GeoAnswer().Yes {
		d.t.Fatal("token refused")
	}
	d.run(7 * time.Second)
	if d.m.GeoState().Role != RoleSuperpeer {
		d.t.Fatal("not promoted after the dwell time")
	}
}

// filterRTT follows a lower sample at once and a higher one by an eighth.
func TestFilterRTT(t *testing.T) {
	for _, c := range []struct{ old, sample, want time.Duration }{
		{0, 40 * ms, 40 * ms},
		{40 * ms, 30 * ms, 30 * ms},
		{40 * ms, 840 * ms, 140 * ms},
	} {
		if got := filterRTT(c.old, c.sample); got != c.want {
			t.Errorf("filterRTT(%v, %v) = %v, want %v", c.old, c.sample, got, c.want)
		}
	}
}

// The liar check: a holder that leaves passes its token to its nearest
// neighbour, b, after it measured the RTT to b (a ping: none was
// measured). b claims to sit where the holder sits, 80 ms away in truth:
// it is distrusted, gets no pass, is no neighbour until the next snapshot,
// and the token is released. A claim that agrees with the RTT is trusted
// and the pass is asked for.
func TestGeoVet(t *testing.T) {
	for _, c := range []struct {
		name  string
		claim float64 // seconds from the holder
		trust bool
	}{{"liar", 0, false}, {"truthful", 0.080, true}, {"near enough", 0.050, true}, {"too near", 0.025, false}} {
		t.Run(c.name, func(t *testing.T) {
			d := newGeoDriver(t, geoTestConfig("a", 1))
			d.ping = func(peer.ID) (time.Duration, error) { return 0, fmt.Errorf("no answer") }
			d.handOver("b", geometric.Token{Num: 0, Seq: 1})
			if !d.m.GeoAnswer().Yes {
				t.Fatal("a refused the token")
			}
			d.coords = map[peer.ID]*coordinate.Coordinate{"a": at(t, 0), "b": at(t, c.claim)}
			d.run(2 * time.Second) // one token round: the snapshot and the neighbours; no sample yet of b
			if d.m.geo.rtt["b"] != 0 {
				t.Fatalf("RTT to b known before the check: %v", d.m.geo.rtt["b"])
			}
			d.pings = nil
			d.ping = func(peer.ID) (time.Duration, error) { return 80 * ms, nil }
			d.pass = func(TokenPass) bool { return true } // b takes it (a refused pass would exclude b too: TestGeoRefusedNoNeighbour)
			d.step(GeoLeave{})
			if !slices.Equal(d.pings, []peer.ID{"b"}) {
				t.Fatalf("pings %v, want b", d.pings)
			}
			passed := len(d.passes) == 1 && d.passes[0].To == "b" && d.passes[0].Token == geometric.Token{Num: 0, Seq: 2}
			if passed != c.trust {
				t.Errorf("passes %v, want a pass to b: %v", d.passes, c.trust)
			}
			if got := d.m.Distrusted(); got != map[bool]uint64{true: 0, false: 1}[c.trust] {
				t.Errorf("distrusted %d", got)
			}
			g := d.m.geo
			self := g.snapshot["a"]
			peers := []geometric.Peer{{ID: "a", Coord: self}, {ID: "b", Coord: g.snapshot["b"]}}
			if nb := g.neighbours(self, peers); (len(nb) == 1) != c.trust {
				t.Errorf("neighbours %v in the snapshot of the check", nb)
			}
			g.snapshotEpoch++ // the next snapshot: the distrust is over
			if nb := g.neighbours(self, peers); len(nb) != 1 || nb[0].ID != "b" {
				t.Errorf("neighbours %v in the next snapshot, want b", nb)
			}
			if !c.trust && !slices.ContainsFunc(d.reports, func(r TokenReport) bool { return r.Released && r.Token.Num == 0 }) {
				t.Errorf("token not released after the refused pass: reports %+v", d.reports)
			}
		})
	}
}

// The neighbours: the 8 nearest peers and 8 others drawn once, which
// stay the same while they are there.
func TestGeoNeighbours(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("a", 1))
	g := d.m.geo
	self := at(t, 0)
	var peers []geometric.Peer
	for i := range 30 {
		peers = append(peers, geometric.Peer{ID: geometric.ID(fmt.Sprintf("p%02d", i)), Coord: at(t, float64(i+1)/1000)})
	}
	nb := g.neighbours(self, append(peers, geometric.Peer{ID: "a", Coord: self}))
	if len(nb) != 16 {
		t.Fatalf("%d neighbours, want 16", len(nb))
	}
	for i, p := range nb[:8] {
		if p.ID != peers[i].ID {
			t.Errorf("neighbour %d is %s, want the nearest %s", i, p.ID, peers[i].ID)
		}
	}
	again := g.neighbours(self, peers)
	if !slices.EqualFunc(nb, again, func(a, b geometric.Peer) bool { return a.ID == b.ID }) {
		t.Errorf("the random neighbours were drawn again: %v, then %v", nb, again)
	}
}

// Placement: the node that starts the network (no bootstrap peer) takes
// token 0 when it hears of none, only after the warm-up (10 token
// intervals, at least 3 announce intervals); a node that joined one does
// not, until no token was heard of for three warm-ups more, and then only
// when it is the first of InitialHolders over itself and the peers it is
// connected to.
func TestGeoPlaceAfterWarmup(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("a", 4))
	d.m.cfg.Bootstrap = false
	d.run(14 * time.Second)
	if tok := d.m.GeoState().Token; tok >= 0 {
		t.Fatalf("took token %d at %v, in the warm-up of 15 s", tok, d.now.Sub(t0))
	}
	d.run(2 * time.Second)
	if tok := d.m.GeoState().Token; tok != 0 {
		t.Fatalf("holds token %d at %v, want 0", tok, d.now.Sub(t0))
	}
	for _, c := range []struct {
		connected []peer.ID
		first     bool
	}{{[]peer.ID{"z"}, true}, {[]peer.ID{"z"}, false}} {
		j := newGeoDriver(t, geoTestConfig("a", 4))
		// A peer that a is first before, or not.
		for i := range 100 {
			p := peer.ID(fmt.Sprintf("p%d", i))
			first, _ := geometric.InitialHolders(j.m.geo.seed, []geometric.ID{"a", geometric.ID(p)}, 1)
			if (first[0] == "a") == c.first {
				c.connected = []peer.ID{p}
				break
			}
		}
		j.feed = GeoFeed{Connected: c.connected}
		j.run(59 * time.Second)
		if tok := j.m.GeoState().Token; tok >= 0 {
			t.Fatalf("a joiner took token %d at %v, within four warm-ups", tok, j.now.Sub(t0))
		}
		j.run(2 * time.Second)
		if held := j.m.GeoState().Token == 0; held != c.first {
			t.Errorf("connected to %v, a holds token 0: %v, want %v (first of the two: %v)", c.connected, held, c.first, c.first)
		}
	}
}

// sponsorWith is superpeer s, holding token 1 of tokens, promoted, with
// members a and b (capacity 2), or those named, hearing h report token 0
// at pass counter 7 and s's own report; ask has a member renew and
// returns s's answer.
func sponsorWith(t *testing.T, tokens int, h peer.ID, members ...peer.ID) (d *geoDriver, ask func(p peer.ID) GeoAnswer) {
	t.Helper()
	if len(members) == 0 {
		members = []peer.ID{"a", "b"}
	}
	cfg := geoTestConfig("s", tokens)
	cfg.Geo.Tokens.Capacity = len(members)
	d = newGeoDriver(t, cfg)
	d.coords = map[peer.ID]*coordinate.Coordinate{"s": at(t, 0)}
	d.promote(geometric.Token{Num: 1, Seq: 1})
	ask = func(p peer.ID) GeoAnswer {
		d.step(AttachAsked{From: p, Coord: at(t, 0.002)})
		return d.m.GeoAnswer()
	}
	for _, p := range members {
		if !ask(p).Yes {
			t.Fatalf("%s refused", p)
		}
	}
	d.feed = GeoFeed{Tokens: []TokenPos{
		{Holder: h, Token: geometric.Token{Num: 0, Seq: 7}, Coord: at(t, 0.03)},
		{Holder: "s", Token: geometric.Token{Num: 1, Seq: 1}, Coord: at(t, 0), Superpeer: true, Load: len(members)},
	}, Connected: append(slices.Clone(members), h)}
	return d, ask
}

// Re-homing, at the sponsor: a token reported by h, then missing, is
// named by the superpeer that sponsors it, which hears every report, for
// the member Rehome names among those it serves, in its yes to that
// member alone, after three token intervals, but not while h answers a
// ping (postponed up to three times, three token intervals each); once h
// is gone and answers no more, above every pass counter heard. The order
// goes once the token is reported again. A superpeer that is not the
// token's sponsor names nobody; neither does a member, which hears only
// its cluster's topic and re-homes nothing on its own
// (TestGeoRehomeOrdered).
func TestGeoRehome(t *testing.T) {
	for _, c := range []struct {
		name    string
		answer  bool // h answers pings
		sponsor bool // s is the sponsor
		by      time.Duration
		notBy   time.Duration
		named   bool
	}{
		{"gone", false, true, 20 * time.Second, 2 * time.Second, true},
		{"answers pings", true, true, 25 * time.Second, 10 * time.Second, true},
		{"not the sponsor", false, false, 60 * time.Second, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tokens := 2
			if !c.sponsor {
				tokens = 3 // s2 holds the third
			}
			h := peer.ID("h")
			d, ask := sponsorWith(t, tokens, h)
			d.ping = func(p peer.ID) (time.Duration, error) {
				if p == h && !c.answer {
					return 0, fmt.Errorf("gone")
				}
				return 30 * ms, nil
			}
			if !c.sponsor {
				// A superpeer with members whose score for token 0 is lower
				// than s's: the sponsor.
				var s2 peer.ID
				for i := 0; s2 == ""; i++ {
					p := peer.ID(fmt.Sprintf("s2-%d", i))
					if geometric.Score(d.m.geo.seed, geometric.ID(p)) < geometric.Score(d.m.geo.seed, "s") {
						s2 = p
					}
				}
				d.feed.Tokens = append(d.feed.Tokens, TokenPos{Holder: s2, Token: geometric.Token{Num: 2}, Coord: at(t, 0.001), Superpeer: true, Load: 1})
			}
			named := peer.ID(geometric.Rehome(d.m.geo.seed, 0, []geometric.ID{"a", "b"}, nil))
			other := peer.ID("a")
			if named == "a" {
				other = "b"
			}
			renew := func(dur time.Duration) (order *RehomeOrder) {
				for end := d.now.Add(dur); d.now.Before(end); {
					d.run(time.Second)
					if a := ask(other); a.Rehome != nil {
						t.Fatalf("%s, which Rehome does not name, was ordered %+v", other, *a.Rehome)
					}
					if a := ask(named); a.Rehome != nil && order == nil {
						order = a.Rehome
					}
				}
				return order
			}
			if o := renew(20 * time.Second); o != nil {
				t.Fatalf("ordered %+v while h reports the token", *o)
			}
			d.feed.Tokens = slices.DeleteFunc(d.feed.Tokens, func(tp TokenPos) bool { return tp.Holder == h })
			missing := d.now
			if c.notBy > 0 {
				if o := renew(c.notBy); o != nil {
					t.Fatalf("ordered %+v %v after the token went missing", *o, d.now.Sub(missing))
				}
			}
			o := renew(c.by - c.notBy)
			if got := o != nil; got != c.named {
				t.Fatalf("%v after the token went missing, %s was ordered to take it: %v, want %v", d.now.Sub(missing), named, got, c.named)
			}
			if !c.named {
				return
			}
			if o.Token.Num != 0 || o.Token.Seq <= 7 || o.Token.Passes() != 0 || o.Replaced != h || o.Survey {
				t.Errorf("order %+v: want token 0 placed above the 7 heard, replacing h, not by survey", *o)
			}
			d.feed.Tokens = append(d.feed.Tokens, TokenPos{Holder: named, Token: o.Token, Coord: at(t, 0.002)})
			d.run(2 * time.Second)
			if a := ask(named); a.Rehome != nil {
				t.Errorf("still ordered %+v once %s reports the token", *a.Rehome, named)
			}
		})
	}
}

// attachFeed is the feed of an ordinary peer o at the origin with
// superpeers s1 (10 ms away by coordinates) and s2 (20 ms), each with
// load 0: their coordinates are in their token reports.
func attachFeed(t *testing.T, sps ...string) GeoFeed {
	var f GeoFeed
	for i, s := range sps {
		c := at(t, float64(i+1)/100)
		f.Tokens = append(f.Tokens, TokenPos{Holder: peer.ID(s), Token: geometric.Token{Num: i}, Coord: c, Superpeer: true})
	}
	return f
}

// Attachment: an ordinary peer attaches to the nearest superpeer with
// room, renews once per announce interval, stays while no other is nearer
// by a tenth plus LiveMargin in measured RTT, and moves when one is,
// telling the one it left.
func TestGeoAttachSticky(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("o", 2))
	d.feed = attachFeed(t, "s1", "s2")
	rtt := map[peer.ID]time.Duration{"s1": 50 * ms, "s2": 60 * ms}
	d.ping = func(p peer.ID) (time.Duration, error) { return rtt[p], nil }
	d.attach = func(p peer.ID) AttachDone { return AttachDone{To: p, OK: true, Mates: []peer.ID{p, "o"}} }
	d.run(1500 * ms)
	if len(d.asked) != 1 || d.asked[0] != "s1" || d.m.GeoState().Superpeer != "s1" {
		t.Fatalf("asked %v, attached to %q; want s1, nearest", d.asked, d.m.GeoState().Superpeer)
	}
	rtt["s2"] = 46 * ms
	d.run(20 * time.Second) // 46 ms is not clearly nearer than 50
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Fatalf("moved to %s, not clearly nearer", sp)
	}
	if n := len(d.asked); n < 4 || n > 6 {
		t.Errorf("%d requests in 21.5 s, want one per announce interval of 5 s", n)
	}
	if slices.Contains(d.asked, "s2") {
		t.Errorf("asked s2: %v", d.asked)
	}
	if len(d.detached) != 0 {
		t.Errorf("told %v it left them, and moved nowhere", d.detached)
	}
	rtt["s2"] = 30 * ms
	d.run(30 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "s2" {
		t.Fatalf("attached to %s, want s2, clearly nearer (30 ms against 50)", sp)
	}
	if !slices.Equal(d.detached, []peer.ID{"s1"}) {
		t.Errorf("told %v it left them, want s1 once", d.detached)
	}
	if st := d.m.GeoState(); !slices.Equal(st.Members, []peer.ID{"o", "s2"}) || st.Role != RoleOrdinary || st.Prefix == "" {
		t.Errorf("state %+v", st)
	}
}

// TestGeoAttachScaled: TestGeoAttachSticky in a data centre, every RTT
// a hundredth of a millisecond or so. The node takes the network's scale
// from the RTTs it keeps (its cluster's ten), and "clearly nearer" is a
// tenth plus LiveMargin at that scale: 300 µs against 500 µs is clearly
// nearer, which the 5 ms of LiveMargin as it is would never let be.
func TestGeoAttachScaled(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("o", 2))
	d.feed = attachFeed(t, "s1", "s2")
	us := time.Microsecond
	rtt := map[peer.ID]time.Duration{"s1": 500 * us, "s2": 600 * us}
	mates := []peer.ID{"s1", "o"}
	for i := range 8 {
		p := peer.ID(fmt.Sprintf("m%d", i))
		rtt[p] = time.Duration(400+50*i) * us
		mates = append(mates, p)
	}
	d.ping = func(p peer.ID) (time.Duration, error) { return rtt[p], nil }
	d.attach = func(p peer.ID) AttachDone {
		if p == "s1" {
			return AttachDone{To: p, OK: true, Mates: mates}
		}
		return AttachDone{To: p, OK: true, Mates: []peer.ID{p, "o"}}
	}
	d.run(10 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Fatalf("attached to %q, want s1, nearest", sp)
	}
	if f, l := d.m.GeoScale(); f != 1.0/256 || l < 400*us || l > 800*us {
		t.Fatalf("scale %v from a median RTT of %v, want 1/256 from about 600 µs", f, l)
	}
	rtt["s2"] = 460 * us
	d.run(20 * time.Second) // not clearly nearer than 500 µs
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Fatalf("moved to %s, not clearly nearer", sp)
	}
	rtt["s2"] = 300 * us
	d.run(30 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "s2" {
		t.Fatalf("attached to %s, want s2, clearly nearer at the network's scale (300 µs against 500)", sp)
	}
}

// Attachment tries the best three superpeers with room, in order of
// nearness, and no fourth; a superpeer that does not answer is kept for
// attachTTL since its last yes, one that refuses is left at once.
func TestGeoAttachTries(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("o", 4))
	d.feed = attachFeed(t, "s1", "s2", "s3", "s4")
	d.attach = func(p peer.ID) AttachDone { return AttachDone{To: p} } // refused
	d.run(1500 * ms)
	if !slices.Equal(d.asked, []peer.ID{"s1", "s2", "s3"}) {
		t.Fatalf("asked %v, want s1, s2, s3", d.asked)
	}
	if sp := d.m.GeoState().Superpeer; sp != "" {
		t.Fatalf("attached to %s, refused by all", sp)
	}

	d = newGeoDriver(t, geoTestConfig("o", 2))
	d.feed = attachFeed(t, "s1", "s2")
	answer := true
	d.attach = func(p peer.ID) AttachDone {
		if !answer {
			return AttachDone{To: p, Err: fmt.Errorf("timeout")}
		}
		return AttachDone{To: p, OK: true, Mates: []peer.ID{p, "o"}}
	}
	d.run(1500 * ms)
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Fatalf("attached to %q, want s1", sp)
	}
	answer = false
	d.run(12 * time.Second) // within attachTTL = 15 s of the last yes
	if sp := d.m.GeoState().Superpeer; sp != "s1" {
		t.Fatalf("left the silent s1 for %q within attachTTL", sp)
	}
	d.run(10 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp == "s1" {
		t.Fatalf("still attached to s1, silent for %v", d.now.Sub(t0))
	}
}

// A superpeer's answers: it takes members up to Capacity, always a member
// it has, lists its cluster itself first, and forgets a member silent for
// attachTTL. A node that is not a superpeer refuses; a private node
// refuses tokens.
func TestGeoAnswers(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("s", 1))
	ask := func(p peer.ID) GeoAnswer {
		d.step(AttachAsked{From: p})
		return d.m.GeoAnswer()
	}
	if ask("p1").Yes {
		t.Fatal("a node without a token took a member")
	}
	d.coords = map[peer.ID]*coordinate.Coordinate{"s": at(t, 0)}
	d.promote(geometric.Token{Num: 0, Seq: 1})
	if a := ask("p2"); !a.Yes || !slices.Equal(a.Cluster, []peer.ID{"s", "p2"}) {
		t.Fatalf("p2: %+v", a)
	}
	if a := ask("p1"); !a.Yes || !slices.Equal(a.Cluster, []peer.ID{"s", "p1", "p2"}) {
		t.Fatalf("p1: %+v", a)
	}
	if ask("p3").Yes {
		t.Fatal("p3 taken beyond capacity 2")
	}
	if !ask("p1").Yes {
		t.Fatal("member p1 refused")
	}
	if st := d.m.GeoState(); !slices.Equal(st.Members, []peer.ID{"p1", "p2", "s"}) {
		t.Errorf("members %v", st.Members)
	}
	d.run(10 * time.Second)
	ask("p1")
	// p2 silent for 16.5 s: past the TTL (15 s), and past the attachment
	// round that expires it, a jittered token interval (at most 1.25 s)
	// later.
	d.run(6500 * ms)
	if a := ask("p3"); !a.Yes || !slices.Equal(a.Cluster, []peer.ID{"s", "p1", "p3"}) {
		t.Fatalf("p3 after p2 expired: %+v", a)
	}
	d.run(1500 * ms) // a token round reports the load
	if rep := d.reports[len(d.reports)-1]; rep.Token.Num != 0 || !rep.Superpeer || rep.Load != 2 || rep.Capacity != 2 {
		t.Errorf("last token report %+v", rep)
	}
	// p1 attached elsewhere and says so: its place is free for p4 at
	// once, well before its attachment would have expired; it stays in
	// the roster until then (a roster change rebuilds the election), and
	// comes back only if there is room.
	leave := func(p peer.ID) GeoAnswer {
		d.step(AttachAsked{From: p, Leaving: true})
		return d.m.GeoAnswer()
	}
	if leave("p1").Yes {
		t.Error("a leaving member was answered yes")
	}
	if st := d.m.GeoState(); !slices.Equal(st.Members, []peer.ID{"p1", "p3", "s"}) {
		t.Errorf("roster %v after p1 left, want p1 (until it expires), p3 and s", st.Members)
	}
	if a := ask("p4"); !a.Yes || !slices.Equal(a.Cluster, []peer.ID{"s", "p1", "p3", "p4"}) {
		t.Fatalf("p4 after p1 left: %+v", a)
	}
	if ask("p1").Yes {
		t.Error("p1 came back beyond capacity 2 (p3 and p4)")
	}
	if leave("p9").Yes || !slices.Equal(d.m.GeoState().Members, []peer.ID{"p1", "p3", "p4", "s"}) {
		t.Errorf("a stranger's leaving changed the cluster: %v", d.m.GeoState().Members)
	}
	d.run(1500 * ms)
	if rep := d.reports[len(d.reports)-1]; rep.Load != 2 {
		t.Errorf("last token report %+v, want load 2", rep)
	}
	d.run(15 * time.Second) // p1's attachment expires
	if st := d.m.GeoState(); slices.Contains(st.Members, "p1") {
		t.Errorf("roster %v: p1 did not expire", st.Members)
	}

	p := newGeoDriver(t, geoTestConfig("p", 1))
	p.step(Reachability{Private: true})
	p.step(TokenOffered{From: "x", Token: geometric.Token{Num: 0, Seq: 1}})
	if p.m.GeoAnswer().Yes {
		t.Error("a private node took a token")
	}
}

// The samples: the first fastSamples (150) every PingInterval/5, then
// every PingInterval;
// a superpeer whose RTT is not measured is pinged first; the RTT is
// filtered and the coordinate published.
func TestGeoSamples(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("o", 1))
	d.feed = attachFeed(t, "s1")
	d.coords["p"] = at(t, 0.05)
	d.ping = func(p peer.ID) (time.Duration, error) { return 40 * ms, nil }
	d.run(250 * ms)
	if len(d.pings) != 1 || d.pings[0] != "s1" {
		t.Fatalf("first pings %v, want the superpeer s1", d.pings)
	}
	d.run(30*time.Second - 250*ms)
	if n := len(d.pings); n < 149 || n > 151 {
		t.Errorf("%d pings in the first 30 s, want 150", n)
	}
	d.run(10 * time.Second)
	if n := len(d.pings); n < 158 || n > 162 {
		t.Errorf("%d pings in 40 s, want 150 then one a second", n)
	}
	if d.m.geo.rtt["s1"] != 40*ms {
		t.Errorf("RTT kept for s1: %v, want 40 ms", d.m.geo.rtt["s1"])
	}
	if c := d.m.GeoState().Coord; geometric.Distance(c, at(t, 0)) == 0 {
		t.Error("the coordinate did not move with the samples")
	}
	published := false
	for _, st := range d.states {
		published = published || st.Coord != nil
	}
	if !published {
		t.Error("no coordinate in the states")
	}
}

// The same inputs at the same times give the same outputs: the random
// source is seeded by the network and the peer ID.
func TestGeoReplays(t *testing.T) {
	trace := func() string {
		d := newGeoDriver(t, geoTestConfig("o", 3))
		d.feed = attachFeed(t, "s1", "s2", "s3")
		for i := range 20 {
			d.coords[peer.ID(fmt.Sprintf("p%02d", i))] = at(t, float64(i)/200)
		}
		d.m.Step(d.now, view("o", "s1", "s2", "s3", "p00", "p01"))
		d.ping = func(p peer.ID) (time.Duration, error) { return time.Duration(len(p)) * 10 * ms, nil }
		d.attach = func(p peer.ID) AttachDone { return AttachDone{To: p} }
		d.run(30 * time.Second)
		return fmt.Sprint(d.pings, d.asked, d.passes, d.m.geo.nextRound, d.m.geo.nextAttch)
	}
	if a, b := trace(), trace(); a != b {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
}

// Takeover: the members of a lost holder's cluster elect the next, which
// takes the token over (above every pass counter heard, promoted at once)
// when the old holder is not connected and nobody else reports the token.
// TestGeoTakeover: the elected member takes the token of a holder that
// died over when its connection to it is gone, or, while the connection
// lasts (a QUIC connection outlives a SIGKILLed peer by its 30 s idle
// timeout), when the holder does not answer a ping; a connected holder
// that answers keeps its token.
func TestGeoTakeover(t *testing.T) {
	for _, c := range []struct {
		name               string
		connected, answers bool
	}{{"gone", false, false}, {"connected and silent", true, false}, {"connected and answering", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			d := attachedToHolder(t, 9)
			// h stops: no heartbeats, no attach answers, its report
			// expires.
			d.attach = nil
			d.feed = GeoFeed{}
			if c.connected {
				d.feed.Connected = []peer.ID{"h"}
			} else {
				d.step(Conn{Peer: "h", Connected: 0})
			}
			if c.answers {
				d.ping = func(peer.ID) (time.Duration, error) { return 10 * time.Millisecond, nil }
			}
			d.run(10 * time.Second)
			st := d.m.GeoState()
			if c.answers {
				if st.Token >= 0 {
					t.Fatalf("took the token over from a connected holder that answers pings")
				}
				if !slices.Contains(d.pings, "h") {
					t.Errorf("h was not pinged: %v", d.pings)
				}
				return
			}
			if st.Token != 0 || st.Role != RoleSuperpeer || st.Superpeer != "o" {
				t.Fatalf("after the holder died: %+v, want o the superpeer of token 0", st)
			}
			if tok, _ := d.m.geo.holder.Holding(); tok.Seq <= 9 {
				t.Errorf("took over at seq %d, not above the 9 heard", tok.Seq)
			}
		})
	}
}

// The successor: when the cluster elects another in place of the
// superpeer a member is attached to, the member asks the elected one
// first, as soon as it reports the token, before its current superpeer.
func TestGeoAttachSuccessor(t *testing.T) {
	d, x := successorCluster(t)
	// h's connection goes, the cluster elects x (electSuccessor), and x
	// reports a token.
	d.electSuccessor(x)
	c := at(t, 0.02)
	d.coords[peer.ID(x)] = c
	d.feed.Tokens = []TokenPos{
		{Holder: "h", Token: geometric.Token{Num: 0, Seq: 1}, Coord: d.coords["h"], Superpeer: true},
		{Holder: peer.ID(x), Token: geometric.Token{Num: 1}, Coord: c, Superpeer: true},
	}
	d.asked = nil
	d.run(1500 * ms)
	if len(d.asked) == 0 || d.asked[0] != peer.ID(x) {
		t.Fatalf("asked %v, want the elected %s first", d.asked, x)
	}
	if sp := d.m.GeoState().Superpeer; sp != peer.ID(x) {
		t.Fatalf("attached to %q, want the elected %s", sp, x)
	}
}

// A member whose cluster elected a successor to its lost superpeer
// follows the successor's claim on the token as soon as the claim is in
// its feed (at its next election tick), not at its next token round: with
// --procs, a token round later was up to a token interval, 0.6 detection
// timeouts, of every failover.
func TestGeoTakeoverFollowedAtOnce(t *testing.T) {
	d, x := successorCluster(t)
	hReport := d.feed.Tokens[0]
	d.electSuccessor(x)
	// x takes the token over a moment later; its report arrives while
	// h's has not expired yet.
	d.run(300 * ms)
	d.asked = nil
	claimed := d.now
	d.feed.Tokens = []TokenPos{hReport, {Holder: peer.ID(x), Token: geometric.Rehomed(0, hReport.Token.Seq), Coord: at(t, 0.02), Superpeer: true}}
	for !slices.Contains(d.asked, peer.ID(x)) && d.now.Sub(claimed) < 2*time.Second {
		d.run(100 * ms)
	}
	if took := d.now.Sub(claimed); took > 200*ms {
		t.Fatalf("asked %s %v after its claim was in the feed (asked %v), want within two election ticks", x, took, d.asked)
	}
	if sp := d.m.GeoState().Superpeer; sp != peer.ID(x) {
		t.Fatalf("attached to %q, want the successor %s", sp, x)
	}
}

// The elected leader of a lost superpeer's cluster takes the token over
// as soon as its probe of the lost holder has gone unanswered for a
// detection timeout (lost), not at its next token round after that.
func TestGeoTakeoverAtProbeDeadline(t *testing.T) {
	d := attachedToHolder(t, 9)
	// h's process dies; its connection lingers and its pings go
	// unanswered.
	d.attach = nil
	d.feed = GeoFeed{Connected: []peer.ID{"h"}}
	d.silent = func(p peer.ID) bool { return p == "h" }
	died := d.now
	for d.m.GeoState().Token < 0 && d.now.Sub(died) < 10*time.Second {
		d.run(100 * ms)
	}
	probed := d.m.geo.lostProbeAt
	if d.m.GeoState().Token != 0 || d.m.geo.lostProbe != "h" {
		t.Fatalf("no takeover %v after h died (probe of %q)", d.now.Sub(died), d.m.geo.lostProbe)
	}
	// The driver ticks every 100 ms and stops 100 ms after the round
	// that took over.
	if late := d.now.Sub(probed) - d.m.Detection(); late > 200*ms {
		t.Fatalf("took the token over %v after the last probe of h, %v after its deadline (detection %v), want within two election ticks",
			d.now.Sub(probed), late, d.m.Detection())
	}
	t.Logf("took over %v after h died, %v after the probe's deadline", d.now.Sub(died), d.now.Sub(probed)-d.m.Detection())
}

// FuzzGeo feeds a geometric machine random sequences of its inputs, in
// and out of turn: it must not panic, a superpeer holds a token, and at
// most one pass and one attach request are in flight.
func FuzzGeo(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 3, 9, 5, 9, 6, 9, 8})
	f.Add([]byte{2, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 11, 4, 6, 9, 12, 9})
	ids := []peer.ID{"a", "b", "c", "d"}
	coords := map[peer.ID]*coordinate.Coordinate{}
	for i, id := range ids {
		coords[id] = at(f, float64(i)/50)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := geoTestConfig("a", 2)
		if len(ops)%2 == 0 {
			cfg.Election = "bully"
		}
		m := mustNew(t, cfg)
		now := t0
		var pass *TokenPass
		var asked []peer.ID
		var pinged []peer.ID
		for k, op := range ops {
			p := ids[int(op>>4)%len(ids)]
			switch op % 13 {
			case 0:
				f := GeoFeed{Connected: ids[:int(op>>4)%len(ids)]}
				if op&16 != 0 {
					tp := TokenPos{Holder: "b", Token: geometric.Token{Num: 0, Seq: uint64(k)}, Coord: coords["b"], Superpeer: op&32 != 0, Load: 2}
					if op&64 != 0 {
						// A summary that asks for a relocation to c.
						tp.Summary = &geometric.ClusterSummary{Members: 2, Cost: time.Second, Remove: time.Second, Candidate: "c", Gain: time.Second}
					}
					f.Tokens = append(f.Tokens, tp)
				}
				m.Step(now, f)
			case 1:
				m.Step(now, View{Members: view("a", "b", "c", "d").Members[:1+int(op>>4)%4]})
			case 2:
				m.Step(now, TokenOffered{From: p, Token: geometric.Token{Num: int(op>>6) % 2, Seq: uint64(k)}})
			case 3:
				if len(pinged) > 0 {
					m.Step(now, PingDone{Peer: pinged[0], RTT: time.Duration(op) * ms})
					pinged = pinged[1:]
				}
			case 4:
				m.Step(now, PingDone{Peer: p, Err: fmt.Errorf("no")})
			case 5:
				if pass != nil {
					m.Step(now, PassDone{To: pass.To, Token: pass.Token, OK: op&16 != 0})
					pass = nil
				}
			case 6:
				m.Step(now, AttachAsked{From: p, Coord: coords[p]})
			case 7:
				if len(asked) > 0 {
					m.Step(now, AttachDone{To: asked[0], OK: op&16 != 0, Mates: []peer.ID{asked[0], "a", "c"}, Coords: []PeerCoord{{ID: "c", Coord: coords["c"]}}})
					asked = asked[1:]
				}
			case 8:
				// A failed request: the one in flight when it is to p (it
				// is answered, and the machine may try p again), else a
				// stray answer the machine must bear.
				if len(asked) > 0 && asked[0] == p {
					asked = asked[1:]
				}
				m.Step(now, AttachDone{To: p, Err: fmt.Errorf("no")})
			case 9:
				now = now.Add(time.Duration(op) * 10 * ms)
				m.Tick(now)
			case 10:
				m.Step(now, Conn{Peer: p})
			case 11:
				m.Step(now, Reachability{Private: op&16 != 0})
			case 12:
				if op&0xf0 == 0 {
					m.Step(now, GeoLeave{})
				}
			}
			rd := m.Ready()
			if len(rd.Geo.Passes) > 1 || len(rd.Geo.Passes) == 1 && pass != nil {
				t.Fatalf("two passes in flight: %v, %v", pass, rd.Geo.Passes)
			}
			if len(rd.Geo.Passes) == 1 {
				pass = &rd.Geo.Passes[0]
			}
			asked = append(asked, rd.Geo.Attach...)
			if len(asked) > 1 {
				t.Fatalf("attach requests in flight: %v", asked)
			}
			pinged = append(pinged, rd.Geo.Pings...)
			if st := m.GeoState(); st.Role == RoleSuperpeer && st.Token < 0 {
				t.Fatalf("a superpeer without a token: %+v", st)
			}
		}
	})
}

// Issue 19, finding 3: a peer, z, announces on the token topic that it
// holds both tokens, one pass above their holders' (a holds token 0 at
// pass 3, h token 1 at pass 2), as a superpeer near everyone. The holder
// keeps its token and stays a superpeer (it dropped it, and the swarm had
// no superpeer while the attacker stayed), and publishes no report of
// losing it.
func TestGeoForgedClaimKeepsHolder(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("a", 2))
	d.m.Step(d.now, view("a", "k", "h", "z"))
	d.coords = map[peer.ID]*coordinate.Coordinate{"a": at(t, 0), "h": at(t, 0.03), "z": at(t, 0.01)}
	d.handOver("k", geometric.Token{Num: 0, Seq: 3})
	h := TokenPos{Holder: "h", Token: geometric.Token{Num: 1, Seq: 2}, Coord: at(t, 0.03), Superpeer: true}
	d.feed.Tokens = []TokenPos{h}
	d.run(7 * time.Second) // Dwell 5 s: promoted
	if st := d.m.GeoState(); st.Role != RoleSuperpeer || st.Token != 0 {
		t.Fatalf("before the attack: %+v, want the superpeer of token 0", st)
	}
	d.reports = nil
	d.feed.Tokens = []TokenPos{h,
		{Holder: "z", Token: geometric.Token{Num: 0, Seq: 4}, Coord: at(t, 0.01), Superpeer: true},
		{Holder: "z", Token: geometric.Token{Num: 1, Seq: 3}, Coord: at(t, 0.01), Superpeer: true}}
	d.run(5 * time.Second)
	if st := d.m.GeoState(); st.Role != RoleSuperpeer || st.Token != 0 {
		t.Errorf("after z's claim: %+v, want still the superpeer of token 0", st)
	}
	if slices.ContainsFunc(d.reports, func(r TokenReport) bool { return r.None }) {
		t.Errorf("a reported that it holds no token: %+v", d.reports)
	}
}

// Issue 19, finding 3: a pass of a token its sender never held. c knows
// that a holds token 0 at pass 3; z passes it token 0 at pass 4: c
// refuses (it took it, and its report, one pass above, demoted a for
// good). And a holder does not give way to the report of such a pass
// (c's report of token 0 at pass 4, with no link of a's).
func TestGeoForgedPassRefused(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("c", 1))
	d.m.Step(d.now, view("c", "a", "z"))
	d.coords = map[peer.ID]*coordinate.Coordinate{"c": at(t, 0), "a": at(t, 0.02), "z": at(t, 0.01)}
	d.feed = GeoFeed{
		Tokens: []TokenPos{{Holder: "a", Token: geometric.Token{Num: 0, Seq: 3}, Coord: at(t, 0.02), Superpeer: true}}}
	d.run(2 * time.Second)
	d.step(TokenOffered{From: "z", Token: geometric.Token{Num: 0, Seq: 4}})
	if d.m.GeoAnswer().Yes {
		t.Error("c took token 0 from z, which never held it")
	}
	if st := d.m.GeoState(); st.Token >= 0 {
		t.Errorf("c holds token %d", st.Token)
	}

	a := newGeoDriver(t, geoTestConfig("a", 1))
	a.m.Step(a.now, view("a", "k", "c"))
	a.coords = map[peer.ID]*coordinate.Coordinate{"a": at(t, 0), "c": at(t, 0.02)}
	a.handOver("k", geometric.Token{Num: 0, Seq: 3})
	a.feed.Tokens = nil
	a.run(7 * time.Second)
	if st := a.m.GeoState(); st.Role != RoleSuperpeer || st.Token != 0 {
		t.Fatalf("before the forged pass: %+v, want the superpeer of token 0", st)
	}
	a.feed.Tokens = []TokenPos{{Holder: "c", Token: geometric.Token{Num: 0, Seq: 4}, Coord: at(t, 0.02)}}
	a.run(3 * time.Second)
	if st := a.m.GeoState(); st.Role != RoleSuperpeer || st.Token != 0 {
		t.Errorf("after c reported the forged pass: %+v, want still the superpeer of token 0", st)
	}
}

// A member whose own election named it after its superpeer died, while
// a mate the cluster had elected before took the token over and left
// (peer testnet --procs: the killed superpeer's connection lasted, and
// this member's requests to it timed out for an attachTTL), asks the new
// holder of the cluster's token at its next attachment round: attached
// to it within three failure-detection timeouts of the death, which
// issue 21 asks of a geometric failover; before, one attachTTL after
// the last yes. Two cases: the dead superpeer's report has expired and
// the new holder's is believed; or it lasts (three announce intervals),
// so that the mate's claim is not believed yet, and the member's own
// election, which found the holder silent, vouches for the mate.
func TestGeoAttachMovedToken(t *testing.T) {
	for _, c := range []struct {
		name     string
		hReports bool
	}{{"report expired", false}, {"report lasts", true}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := geoTestConfig("o", 1)
			cfg.Election = "bully"
			d := newGeoDriver(t, cfg)
			d.m.Step(d.now, view("o", "h", "x"))
			d.feed = attachFeed(t, "h")
			d.feed.Tokens[0].Token.Seq = 9
			hReport := d.feed.Tokens[0]
			d.feed.Connected = []peer.ID{"h", "x"}
			d.attach = func(p peer.ID) AttachDone { return AttachDone{To: p, OK: true, Mates: []peer.ID{"h", "o", "x"}} }
			d.run(3 * time.Second)
			if sp := d.m.GeoState().Superpeer; sp != "h" {
				t.Fatalf("attached to %q, want h", sp)
			}
			if d.m.Detection() <= 0 || 3*d.m.Detection() >= d.m.geo.attachTTL() {
				t.Fatalf("detection timeout %v, attachTTL %v: the test needs three of the first within the second", d.m.Detection(), d.m.geo.attachTTL())
			}
			// h dies, its connection lasting; x, elected and silent in
			// this cluster's election since (it left it), took token 0
			// over and reports it as a superpeer. o leads the election
			// then and takes nothing over (another claims the token).
			died := d.now
			d.feed = GeoFeed{Connected: []peer.ID{"h", "x"}, Tokens: []TokenPos{
				{Holder: "x", Token: geometric.Rehomed(0, 9), Coord: at(t, 0.02), Superpeer: true}}}
			if c.hReports {
				d.feed.Tokens = append(d.feed.Tokens, hReport)
			}
			d.attach = func(p peer.ID) AttachDone {
				if p == "h" {
					return AttachDone{To: p, Err: fmt.Errorf("no answer")}
				}
				return AttachDone{To: p, OK: true, Mates: []peer.ID{"x", "o"}}
			}
			for d.m.GeoState().Superpeer != "x" && d.now.Sub(died) < 3*d.m.Detection() {
				d.run(100 * time.Millisecond)
			}
			if st := d.m.GeoState(); st.Superpeer != "x" || st.Token >= 0 {
				t.Fatalf("%v after h died: %+v, want o attached to x, the token's holder now (asked %v)", d.now.Sub(died), st, d.asked)
			}
			t.Logf("attached to x %v after h died (detection timeout %v, attachTTL %v)", d.now.Sub(died), d.m.Detection(), d.m.geo.attachTTL())
		})
	}
}

// As TestGeoAttachMovedToken, but the peer that took the token over, y,
// is not in the roster h gave o (it joined h's cluster after o's last
// renewal, or it is a forger), and h's report lasts, so y's claim is not
// believed: o does not follow y, and does not wait for h either; it
// attaches to z, the other superpeer it believes, within three
// failure-detection timeouts of h's death (abandon). Before, it waited
// for h's report to expire and its attachTTL.
func TestGeoAbandonLost(t *testing.T) {
	cfg := geoTestConfig("o", 1)
	cfg.Election = "bully"
	d := newGeoDriver(t, cfg)
	d.m.Step(d.now, view("o", "h", "x", "y", "z"))
	d.feed = attachFeed(t, "h")
	d.feed.Tokens[0].Token.Seq = 9
	hReport := d.feed.Tokens[0]
	zReport := TokenPos{Holder: "z", Token: geometric.Token{Num: 1, Seq: 3}, Coord: at(t, 0.08), Superpeer: true, Load: 1}
	d.feed.Tokens = append(d.feed.Tokens, zReport)
	d.feed.Connected = []peer.ID{"h", "x", "y", "z"}
	d.attach = func(p peer.ID) AttachDone { return AttachDone{To: p, OK: true, Mates: []peer.ID{"h", "o", "x"}} }
	d.run(3 * time.Second)
	if sp := d.m.GeoState().Superpeer; sp != "h" {
		t.Fatalf("attached to %q, want h", sp)
	}
	died := d.now
	d.feed = GeoFeed{Connected: []peer.ID{"h", "x", "y", "z"}, Tokens: []TokenPos{
		hReport, zReport, {Holder: "y", Token: geometric.Rehomed(0, 9), Coord: at(t, 0.02), Superpeer: true}}}
	d.attach = func(p peer.ID) AttachDone {
		if p == "h" {
			return AttachDone{To: p, Err: fmt.Errorf("no answer")}
		}
		return AttachDone{To: p, OK: true, Mates: []peer.ID{p, "o"}}
	}
	for d.m.GeoState().Superpeer == "h" && d.now.Sub(died) < 3*d.m.Detection() {
		d.run(100 * time.Millisecond)
	}
	if st := d.m.GeoState(); st.Superpeer != "z" {
		t.Fatalf("%v after h died: attached to %q, want z (asked %v)", d.now.Sub(died), st.Superpeer, d.asked)
	}
	t.Logf("attached to z %v after h died (detection timeout %v)", d.now.Sub(died), d.m.Detection())
}

// A peer that refused a pass (it holds another token, say, which this node
// did not believe) is no neighbour until the next snapshot: the forces
// offered the token to it again at every token round, live, and made none
// of the passes they asked for (the live notes of seed 5: three offers to
// a peer that held token 9, refused each time, until the search handed the
// token over).
func TestGeoRefusedNoNeighbour(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("a", 1))
	d.ping = func(peer.ID) (time.Duration, error) { return 80 * ms, nil }
	d.handOver("z", geometric.Token{Num: 0, Seq: 1})
	if !d.m.GeoAnswer().Yes {
		t.Fatal("a refused the token")
	}
	d.coords = map[peer.ID]*coordinate.Coordinate{"a": at(t, 0), "b": at(t, 0.080), "c": at(t, 0.120)}
	d.run(2 * time.Second) // a token round: the snapshot and the neighbours
	d.pass = func(p TokenPass) bool { return p.To != "b" }
	d.step(GeoLeave{})
	if len(d.passes) < 2 || d.passes[0].To != "b" || d.passes[1].To != "c" {
		t.Fatalf("passes %v, want b (refused), then c", d.passes)
	}
	g := d.m.geo
	self := g.snapshot["a"]
	peers := []geometric.Peer{{ID: "a", Coord: self}, {ID: "b", Coord: g.snapshot["b"]}, {ID: "c", Coord: g.snapshot["c"]}}
	if nb := g.neighbours(self, peers); slices.ContainsFunc(nb, func(p geometric.Peer) bool { return p.ID == "b" }) {
		t.Errorf("neighbours %v in the snapshot of the refusal, want no b", nb)
	}
	g.snapshotEpoch++
	if nb := g.neighbours(self, peers); !slices.ContainsFunc(nb, func(p geometric.Peer) bool { return p.ID == "b" }) {
		t.Errorf("neighbours %v in the next snapshot, want b again", nb)
	}
	if len(g.barred) != 0 {
		t.Errorf("refusals of past snapshots kept: %v", g.barred)
	}
}

// A token's absence is timed only while the node hears every report
// (place): a node that stops hearing the backbone (it passed its token on
// and attached to a superpeer) and hears it again counts a token missing
// from then, not from before, and waits for it all over again; it had
// re-homed a token it had just passed on, a wait after it heard the
// backbone again and before the recipient's report came in.
func TestGeoMissingClockStopsWhileIncomplete(t *testing.T) {
	d, _ := sponsorWith(t, 2, "h")
	g := d.m.geo
	tk := g.tokens.info(0)
	tk.missFrom(d.now.Add(-time.Hour))
	g.heard.All, g.allSince = false, time.Time{} // attached: its cluster's topic alone
	g.place(d.now)
	if !tk.missing || !tk.since.Equal(d.now) {
		t.Fatalf("missing %v since %v after a round not hearing every report at %v, want since then", tk.missing, tk.since, d.now)
	}
}
