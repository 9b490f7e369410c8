package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// The token claims a machine believes (geotokens.go), fed by hand.

func tok(num int, seq uint64) geometric.Token { return geometric.Token{Num: num, Seq: seq} }

// believed is the holder and counter of token num that the machine
// believes after the feed, "" if none.
func believed(d *geoDriver, num int) (peer.ID, uint64) {
	d.step(d.feed)
	for _, tp := range d.m.geo.feed.Tokens {
		if tp.Token.Num == num && tp.Holder != d.m.cfg.Self {
			return tp.Holder, tp.Token.Seq
		}
	}
	return "", 0
}

// A third peer follows the chain of signed passes from the holder it
// knows, and nothing else: a's pass to j (j's report carries a's link) is
// believed at once, also while a's stale report lasts; a claim of another
// peer (a link of a peer that is not the holder, or a re-homing while the
// holder reports the token) is not, and is counted. When the holder it
// knew no longer reports the token, the tip of one chain newer than what
// it knew is believed; claims that conflict are not, until they do not.
func TestGeoTokenChain(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("c", 1))
	co := at(t, 0.02)
	rep := func(holder string, seq uint64, giver string) TokenPos {
		return TokenPos{Holder: peer.ID(holder), Token: tok(0, seq), Coord: co, Giver: peer.ID(giver)}
	}
	d.coords["c"] = at(t, 0)
	d.feed = GeoFeed{Tokens: []TokenPos{rep("a", 3, "k")}}
	if h, s := believed(d, 0); h != "a" || s != 3 {
		t.Fatalf("believes %s at %d, want a at 3 (a lone report)", h, s)
	}
	d.feed.Tokens = []TokenPos{rep("a", 3, "k"), rep("z", 4, "y"), rep("x", 2<<32, "")}
	if h, _ := believed(d, 0); h != "a" {
		t.Fatalf("believes %s, want still a: z's link is not a's, x's re-homing is beside a's report", h)
	}
	if n := d.m.TokenClaimsIgnored(); n != 2 {
		t.Errorf("%d claims ignored, want 2", n)
	}
	d.feed.Tokens = []TokenPos{rep("a", 3, "k"), rep("z", 4, "y"), rep("j", 4, "a")}
	if h, s := believed(d, 0); h != "j" || s != 4 {
		t.Fatalf("believes %s at %d, want j at 4 (a's pass)", h, s)
	}
	d.feed.Tokens = []TokenPos{rep("z", 5, "y"), rep("l", 6, "j"), rep("j", 4, "a")}
	if h, s := believed(d, 0); h != "l" || s != 6 {
		t.Fatalf("believes %s at %d, want l at 6 (j's pass)", h, s)
	}
	// l's report goes (it left); a chain newer than l's is believed,
	// conflicting claims are not.
	d.feed.Tokens = []TokenPos{rep("m", 7, "l"), rep("z", 9, "y")}
	if h, _ := believed(d, 0); h != "" {
		t.Fatalf("believes %s, want nobody while m's and z's claims conflict", h)
	}
	d.feed.Tokens = []TokenPos{rep("m", 7, "l"), rep("n", 8, "m")}
	if h, s := believed(d, 0); h != "n" || s != 8 {
		t.Fatalf("believes %s at %d, want n at 8, the tip of the chain from m", h, s)
	}
	d.feed.Tokens = []TokenPos{rep("z", 5, "y")}
	if h, _ := believed(d, 0); h != "" {
		t.Fatalf("believes %s, want nobody: z's claim is older than what c knew", h)
	}
	d.feed.Tokens = []TokenPos{rep("r", 1<<32, "")}
	if h, _ := believed(d, 0); h != "r" {
		t.Fatalf("believes %s, want r, the one to re-home the token when nobody else claims it", h)
	}
}

// A pass is taken only from the holder the machine believes, at a higher
// counter. A pass by another that names a counter the holder had reached
// already is a forgery: refused, counted, and GeoAnswer.Forged set for
// the driver to strike the sender; one ahead of what the machine knows is
// refused without blame (it may have missed a report).
func TestGeoPassFromHolderOnly(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("c", 1))
	d.coords["c"] = at(t, 0)
	d.feed = GeoFeed{Tokens: []TokenPos{{Holder: "a", Token: tok(0, 3), Coord: at(t, 0.02), Giver: "k"}}}
	d.step(d.feed)
	for _, c := range []struct {
		from   peer.ID
		seq    uint64
		forged bool
	}{{"z", 4, true}, {"z", 3, true}, {"z", 9, false}, {"a", 3, false}} {
		d.step(TokenOffered{From: c.from, Token: tok(0, c.seq)})
		if a := d.m.GeoAnswer(); a.Yes || (a.Forged != nil) != c.forged {
			t.Errorf("pass from %s at %d: %+v, want refused, forged %v", c.from, c.seq, a, c.forged)
		}
	}
	if n := d.m.TokenPassesForged(); n != 2 {
		t.Errorf("%d forged passes counted, want 2", n)
	}
	d.step(TokenOffered{From: "a", Token: tok(0, 4), Link: []byte("a's link")})
	if !d.m.GeoAnswer().Yes {
		t.Fatal("refused the holder's pass")
	}
	d.run(1500 * ms)
	if r := d.reports[len(d.reports)-1]; r.Token != tok(0, 4) || r.Giver != "a" || string(r.Link) != "a's link" {
		t.Errorf("report %+v, want token 0 at 4 with a's link", r)
	}
}

// The holder gives its token up to a report that carries its own link
// (it passed the token on and the answer was lost), not to one with
// another's.
func TestGeoOwnLinkDrops(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("a", 1))
	d.m.Step(d.now, view("a", "k", "j"))
	d.coords = map[peer.ID]*coordinate.Coordinate{"a": at(t, 0), "j": at(t, 0.02)}
	d.handOver("k", tok(0, 3))
	d.feed.Tokens = nil
	d.run(7 * time.Second)
	if st := d.m.GeoState(); st.Role != RoleSuperpeer {
		t.Fatalf("%+v, want a superpeer", st)
	}
	d.feed.Tokens = []TokenPos{{Holder: "j", Token: tok(0, 4), Coord: at(t, 0.02), Giver: "k"}}
	d.run(2 * time.Second)
	if st := d.m.GeoState(); st.Token != 0 {
		t.Fatalf("gave its token up to a report with k's link: %+v", st)
	}
	d.feed.Tokens = []TokenPos{{Holder: "j", Token: tok(0, 4), Coord: at(t, 0.02), Giver: "a"}}
	d.run(2 * time.Second)
	if st := d.m.GeoState(); st.Token != -1 || st.Role == RoleSuperpeer {
		t.Errorf("kept its token beside a report with its own link: %+v", st)
	}
}

// A takeover gives way to the holder it replaced when that holder turns
// out alive: its report still there one membership TTL and an announce
// interval after the takeover (a crashed holder's report is gone by then).
func TestGeoTakeoverYields(t *testing.T) {
	d := attachedToHolder(t, 9<<32)
	// h's connection goes, but it lives on and its report keeps coming.
	d.attach = nil
	d.feed.Connected = nil
	d.step(Conn{Peer: "h", Connected: 0})
	d.run(10 * time.Second)
	if st := d.m.GeoState(); st.Token != 0 || st.Role != RoleSuperpeer {
		t.Fatalf("after h's connection went: %+v, want the token taken over", st)
	}
	d.reports = nil
	d.run(15 * time.Second)
	if st := d.m.GeoState(); st.Token != -1 {
		t.Errorf("kept the token of h, alive: %+v", st)
	}
	if !slices.ContainsFunc(d.reports, func(r TokenReport) bool { return r.None }) {
		t.Errorf("no report of giving it back: %+v", d.reports)
	}
}

// Two peers that both took token 0 at the same placement (two starters,
// or two clusters that re-homed it) settle it: the one with the smaller
// Score(seed^0) keeps it, whatever the IDs; the other gives it up.
func TestGeoDuplicatePlacement(t *testing.T) {
	outcomes := map[bool]int{}
	for _, other := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		d := newGeoDriver(t, geoTestConfig("a", 1))
		d.coords = map[peer.ID]*coordinate.Coordinate{"a": at(t, 0), "b": at(t, 0.02), "c": at(t, 0.03)}
		d.feed = GeoFeed{}
		d.step(d.feed)
		if !d.m.geo.receive(tok(0, 0), d.now) {
			t.Fatal("a did not take token 0")
		}
		d.feed.Tokens = []TokenPos{{Holder: peer.ID(other), Token: tok(0, 0), Coord: at(t, 0.02)}}
		d.run(2 * time.Second)
		kept := d.m.GeoState().Token == 0
		if want := geometric.Score(d.m.geo.seed, "a") < geometric.Score(d.m.geo.seed, geometric.ID(other)); kept != want {
			t.Errorf("%s claims token 0 too: a kept it %v, want %v (a's score is the smaller: %v)", other, kept, want, want)
		}
		outcomes[kept]++
	}
	if len(outcomes) != 2 {
		t.Errorf("outcomes %v: the cases do not show both a keeping and giving up", outcomes)
	}
}

// A third peer that believed one of two duplicates of a placement (two
// members of a sponsor's cluster took the same re-homed token; the one
// with the larger Score gives it up) believes the other once the first's
// report is gone, and takes a pass from it. (It believed nobody before,
// for good: the other's claim, at the counter it knew, counted as older;
// in nodesim, 100 PlanetLab hosts 100-199, S = 10, seed 1, the holder of
// such a token was refused every pass for a minute.) A claim at that
// counter beside the first's live report is not believed, nor is a pass
// at it from another holder's chain.
func TestGeoDuplicatePlacementThirdPeer(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("c", 1))
	d.coords["c"] = at(t, 0)
	placed := geometric.Rehomed(0, 0)
	co := at(t, 0.02)
	rep := func(holder string, tk geometric.Token, giver string) TokenPos {
		return TokenPos{Holder: peer.ID(holder), Token: tk, Coord: co, Giver: peer.ID(giver)}
	}
	d.feed = GeoFeed{Tokens: []TokenPos{rep("a", placed, "")}}
	if h, _ := believed(d, 0); h != "a" {
		t.Fatalf("believes %q, want a (a lone placement)", h)
	}
	d.feed.Tokens = []TokenPos{rep("a", placed, ""), rep("b", placed, "")}
	if h, _ := believed(d, 0); h != "a" {
		t.Fatalf("believes %q beside a's live report, want still a", h)
	}
	d.feed.Tokens = []TokenPos{rep("b", placed, "")} // a gave it up
	if h, s := believed(d, 0); h != "b" || s != placed.Seq {
		t.Fatalf("believes %q at %d after a gave the placement up, want b at %d", h, s, placed.Seq)
	}
	d.step(TokenOffered{From: "b", Token: geometric.Token{Num: 0, Seq: placed.Seq + 1}, Link: []byte("b's link")})
	if !d.m.GeoAnswer().Yes {
		t.Errorf("refused b's pass: %+v", d.m.GeoAnswer())
	}
	// A pass at the placement's counter is no placement: not a sibling.
	d2 := newGeoDriver(t, geoTestConfig("c", 1))
	d2.coords["c"] = at(t, 0)
	d2.feed = GeoFeed{Tokens: []TokenPos{rep("a", geometric.Token{Num: 0, Seq: placed.Seq + 1}, "k")}}
	if h, _ := believed(d2, 0); h != "a" {
		t.Fatalf("believes %q, want a", h)
	}
	d2.feed.Tokens = []TokenPos{rep("z", geometric.Token{Num: 0, Seq: placed.Seq + 1}, "y")}
	if h, _ := believed(d2, 0); h != "" {
		t.Errorf("believes %q, want nobody: z's claim is at the counter c knew, from another chain", h)
	}
}

// A placement supersedes the holder a node believed (a side of a
// partition re-homed the token): when that holder's report is heard again
// (the partition healed), the node believes it again once the placement's
// report is gone, and a holder of the placement's lineage gives its token
// up to it one attachment TTL and an announce interval after it first
// believed the placement; so does it to a pass in k's epoch above k's
// counter (a link another peer signed: the reports between may have
// expired). A claim of the old epoch by another peer without a link, or
// at k's own counter, is neither believed nor yielded to.
func TestGeoTokenSuperseded(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("c", 1))
	co := at(t, 0.02)
	rep := func(holder string, seq uint64, giver string) TokenPos {
		return TokenPos{Holder: peer.ID(holder), Token: tok(0, seq), Coord: co, Giver: peer.ID(giver)}
	}
	d.coords["c"] = at(t, 0)
	d.feed = GeoFeed{Tokens: []TokenPos{rep("k", 3, "j")}}
	if h, _ := believed(d, 0); h != "k" {
		t.Fatalf("believes %s, want k", h)
	}
	d.feed.Tokens = []TokenPos{rep("r", 1<<32, "")} // k's report expired; r re-homed it
	if h, _ := believed(d, 0); h != "r" {
		t.Fatalf("believes %s, want r", h)
	}
	// r passes the token to this node.
	d.step(TokenOffered{From: "r", Token: tok(0, 1<<32+1)})
	if !d.m.GeoAnswer().Yes {
		t.Fatal("refused r's pass")
	}
	// A forger claims k's epoch: without a link, or at k's own counter
	// with one: ignored.
	d.feed.Tokens = []TokenPos{rep("f", 3, ""), rep("g", 3, "j"), rep("h", 9, ""), rep("c", 1<<32+1, "r")}
	d.step(d.feed)
	d.run(d.m.geo.attachTTL() + 2*d.m.cfg.AnnounceInterval)
	if tk, held := d.m.geo.holder.Holding(); !held || tk.Seq != 1<<32+1 {
		t.Fatalf("gave its token up to a forger's claim of the old epoch (holds %v, %v)", tk, held)
	}
	// k is back: this node yields to it.
	d.feed.Tokens = []TokenPos{rep("k", 3, "j"), rep("c", 1<<32+1, "r")}
	d.run(3 * time.Second)
	if _, held := d.m.geo.holder.Holding(); held {
		t.Fatal("kept the token while the holder its placement superseded reports it")
	}
	// Likewise to a pass in k's epoch after k's counter.
	d2 := newGeoDriver(t, geoTestConfig("c", 1))
	d2.coords["c"] = at(t, 0)
	d2.feed = GeoFeed{Tokens: []TokenPos{rep("k", 3, "j")}}
	believed(d2, 0)
	d2.feed.Tokens = []TokenPos{rep("r", 1<<32, "")}
	believed(d2, 0)
	d2.step(TokenOffered{From: "r", Token: tok(0, 1<<32+1)})
	d2.feed.Tokens = []TokenPos{rep("k3", 6, "k2"), rep("c", 1<<32+1, "r")}
	d2.run(d2.m.geo.attachTTL() + 2*d2.m.cfg.AnnounceInterval)
	if _, held := d2.m.geo.holder.Holding(); held {
		t.Fatal("kept the token while k's lineage (a pass after k's counter) reports it")
	}
	// A third node that believed the placement believes k again when the
	// placement's report is gone.
	e := newGeoDriver(t, geoTestConfig("e", 1))
	e.coords["e"] = at(t, 0)
	e.feed = GeoFeed{Tokens: []TokenPos{rep("k", 3, "j")}}
	believed(e, 0)
	e.feed.Tokens = []TokenPos{rep("r", 1<<32, "")}
	believed(e, 0)
	e.feed.Tokens = []TokenPos{rep("f", 5, "")}
	if h, _ := believed(e, 0); h != "" {
		t.Fatalf("believes %s, want nobody: f was never the holder", h)
	}
	e.feed.Tokens = []TokenPos{rep("k", 3, "j")}
	if h, _ := believed(e, 0); h != "k" {
		t.Fatalf("believes %s, want k, which the placement superseded", h)
	}
}

// ghostChain is n reports of token 0 under throwaway keys, each passed by
// the one before (its link signed by it) at a rising counter from seq, the
// first by giver ("": a placement), listed against the chain's order as
// the hostile-peer audit listed them (finding B): a scan of the claims
// for each link then reads to the end.
func ghostChain(t *testing.T, n int, giver peer.ID, seq uint64) []TokenPos {
	co := at(t, 0.02)
	cs := make([]TokenPos, n)
	for i := range n {
		c := TokenPos{Holder: peer.ID(fmt.Sprintf("g%05d", i)), Token: tok(0, seq+uint64(i)), Coord: co, Giver: giver}
		if i > 0 {
			c.Giver = peer.ID(fmt.Sprintf("g%05d", i-1))
		}
		cs[n-1-i] = c
	}
	return cs
}

// Ghost chains (hostile-peer audit, finding B). A node that knows no
// holder of a token believes the tip of the claims on it only when they
// form one chain of at most maxChain passes: the audit's 2,000 ghosts
// chained from a placement are believed no more (on the code before, the
// joiner believed the last ghost, and resolving the claims read 2,001,000
// of them; 32,004,000 for 8,000, 100 ms a resolve). A node that knows the
// holder follows the passes it signed for maxChain links at most. The
// work is counted in claims examined: at most one per claim on the token.
func TestGeoGhostChain(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("c", 1))
	d.coords["c"] = at(t, 0)
	d.feed = GeoFeed{Tokens: ghostChain(t, 2000, "", 1<<32)}
	if h, s := believed(d, 0); h != "" {
		t.Fatalf("a joiner believes %s at %d of a chain of 2,000 ghosts, want nobody", string(h), s)
	}
	if n := d.m.TokenClaimsIgnored(); n != 2000 {
		t.Errorf("%d claims ignored, want the 2,000", n)
	}
	// A chain as long as the machine follows is still one chain.
	j := newGeoDriver(t, geoTestConfig("c", 1))
	j.coords["c"] = at(t, 0)
	j.feed = GeoFeed{Tokens: ghostChain(t, maxChain+1, "", 1<<32)}
	if h, _ := believed(j, 0); h != peer.ID(fmt.Sprintf("g%05d", maxChain)) {
		t.Fatalf("believes %q of a chain of %d claims, want its tip", string(h), maxChain+1)
	}

	// c knows a at 3; a's pass to g00000 starts a chain of 8,000.
	k := newGeoDriver(t, geoTestConfig("c", 1))
	k.coords["c"] = at(t, 0)
	a := TokenPos{Holder: "a", Token: tok(0, 3), Coord: at(t, 0.02), Giver: "k"}
	k.feed = GeoFeed{Tokens: []TokenPos{a}}
	if h, _ := believed(k, 0); h != "a" {
		t.Fatalf("believes %q, want a (a lone report)", h)
	}
	k.feed.Tokens = append(ghostChain(t, 8000, "a", 4), a)
	if h, s := believed(k, 0); h != peer.ID(fmt.Sprintf("g%05d", maxChain-1)) || s != 3+maxChain {
		t.Fatalf("believes %s at %d, want the claim %d passes from a's", string(h), s, maxChain)
	}

	for _, n := range []int{500, 2000, 8000} {
		cs := ghostChain(t, n, "", 1<<32)
		ch := newChains(cs)
		if _, ok := ch.tip(); ok || ch.looked > n {
			t.Errorf("%d ghosts: one chain %v, %d claims examined; want no chain, at most %d", n, ok, ch.looked, n)
		}
		cs = append(ghostChain(t, n, "a", 4), a)
		ch = newChains(cs)
		if tip := ch.follow(a); tip.Token.Seq != 3+maxChain || ch.looked > n {
			t.Errorf("%d ghosts from a: followed to %d, %d claims examined; want %d passes, at most %d", n, tip.Token.Seq-3, ch.looked, maxChain, n)
		}
		// A giver that signed n links, all below its counter, and then
		// one pass: the chain from it reads each link once.
		fan := make([]TokenPos, 0, n+1)
		for i := range n {
			fan = append(fan, TokenPos{Holder: peer.ID(fmt.Sprintf("f%05d", i)), Token: tok(0, 2), Giver: "a"})
		}
		fan = append(fan, TokenPos{Holder: "b", Token: tok(0, 4), Giver: "a"}, a)
		ch = newChains(fan)
		if tip := ch.follow(a); tip.Holder != "b" || ch.looked > n+1 {
			t.Errorf("a's %d stale links and its pass to b: followed to %s, %d claims examined; want b, at most %d", n, string(tip.Holder), ch.looked, n+1)
		}
	}
}

// TokenHolders are the holders of the claims the machine believes: the
// driver keeps their reports first (gossip.GeoConfig.Protect).
func TestGeoTokenHolders(t *testing.T) {
	d := newGeoDriver(t, geoTestConfig("c", 2))
	d.coords["c"] = at(t, 0)
	d.feed = GeoFeed{Tokens: []TokenPos{
		{Holder: "b", Token: tok(1, 1<<32), Coord: at(t, 0.03)},
		{Holder: "a", Token: tok(0, 3), Coord: at(t, 0.02), Giver: "k"},
		{Holder: "z", Token: tok(0, 4), Coord: at(t, 0.02), Giver: "y"},
	}}
	d.step(d.feed)
	if got := d.m.TokenHolders(); !slices.Equal(got, []peer.ID{"b"}) {
		t.Errorf("holders %v, want b alone (a's and z's claims on token 0 conflict)", got)
	}
	d.feed.Tokens = d.feed.Tokens[:2]
	d.step(d.feed)
	if got := d.m.TokenHolders(); !slices.Equal(got, []peer.ID{"a", "b"}) {
		t.Errorf("holders %v, want a and b", got)
	}
}
