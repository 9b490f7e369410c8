package node

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// Which token claims the machine believes (issue 19, finding 3: a peer
// announced that it held both tokens, one pass above the real holders,
// and they dropped them; a pass of a token its sender never held was
// taken and demoted the real holder for good).
//
// The feed gives every live report of every token (GeoFeed.Tokens, all
// the claims); the machine believes, per token, the holder it knows and
// the passes that holder provably made:
//
//   - Every pass carries the giver's signature naming the recipient and
//     the token's new pass counter (gossip.TokenLink); the driver checks
//     it, the recipient publishes it with its reports, and gossip rejects
//     a report of a passed token without a valid one (TokenPos.Giver is
//     the signer). So "K gave t at pass n to X" is provable, by K alone.
//   - A node that knows t's holder K (K's report is live) believes K, and
//     a report of t whose link K signed, with a higher counter: K passed
//     it (and from there the chain of such links). Nothing else: a claim
//     one pass above K's with another's signature, or a re-homing
//     (placement) claimed while K still reports t, is ignored (counted,
//     TokenClaimsIgnored). That is a believed holder of t is never
//     replaced by the claims of a peer that K did not name.
//   - A node that knows no live holder of t (a joiner, or K's report
//     expired) believes the claims only when they form one chain of links
//     (each report's giver the holder of the one before, with a lower
//     counter), at its tip: a lone report, or a stale report and the
//     passes that followed it; at most maxChain links, as the chain it
//     follows from K (chains: ghost chains under throwaway keys). A
//     duplicate of the placement it knew K by, at K's counter, counts as
//     such a claim, not as an older one: K gave the token up to it
//     (yieldsTo) or is gone. Claims that conflict (two chains, or a
//     placement beside another report) are all ignored until they do not:
//     a joiner believes no forger, though a forger can keep it from
//     believing anyone about that token while the conflict lasts.
//   - The holder itself (it knows itself) gives its token up only to a
//     report with its own signature and a higher counter (it passed the
//     token and the answer was lost), or to a duplicate placement at the
//     same counter whose holder has the smaller Score(seed^token) (two
//     starters, two sponsors' clusters, or two members whose rosters
//     differed, placed it: geoplace.go; or a mate of the lost holder's
//     cluster with a smaller ID that took it over as this node did), or
//     when its own placement (a re-homing or a takeover)
//     replaced a holder that turns out alive: that holder still reports
//     the token one membership TTL after the placement (a crashed
//     holder's report is gone by then).
//   - A pass is taken only from the holder this node believes, at a
//     higher counter (passable); a pass from another peer that claims to
//     have held the token at a counter the known holder had already
//     reached is a forgery, which the driver strikes.
//
// What a forger can still do: claim, with no other claim beside it, a
// token whose holder is gone (a re-homing is not signed by anyone); claim
// a placement of a token at its holder's own counter, from an ID ground to
// a smaller Score(seed^token) than the holder's, and so make the holder
// give it up (as it could make itself the initial holder in the views
// before); with an accomplice's signature of a pass in the epoch a
// placement superseded, above the superseded holder's counter, make a
// holder of the placement give it up (superseded: the chain of links back
// to that holder is not checked, its reports may have expired); and hold
// back joiners as said.
//
// Why the ground ID is not refused: honest duplicates of one placement,
// at one counter, come from different lists (two sponsors' clusters, the
// fragments of a partition), so a holder cannot tell a forger's from an
// honest one by the lists it knows; any order on IDs is as cheap to grind
// (a random score beats half the honest ones: a key or two). Closing it
// needs a proof of the placement that the holder can check: the sponsor's
// roster signed by the sponsor (the attach answer), carried with the
// claim, so that anyone who believes the sponsor can check that Rehome
// names the claimant in it. That is a change of the attach and tokens
// wire formats, not made.

// placement is a token this node took without a pass: by re-homing or by
// taking it over for its cluster.
type placement struct {
	num      int
	at       time.Time
	replaced peer.ID   // the holder believed before, "" if none
	mates    []peer.ID // for a takeover, the lost holder's cluster: the others that may take it over too
}

// claimKey names one claim, to count it once.
type claimKey struct {
	holder peer.ID
	token  geometric.Token
}

// errForged is the reason of a token pass refused as a forgery.
var errForged = errors.New("node: forged token pass")

func forgedOrNil(err error) error {
	if errors.Is(err, errForged) {
		return err
	}
	return nil
}

// resolve returns, of the claims, the ones this node believes: at most one
// per token held by another (see the rules above), and this node's own
// reports as they are.
func (g *geoMachine) resolve(now time.Time, claims []TokenPos) []TokenPos {
	self := g.self()
	var out []TokenPos
	byNum := map[int][]TokenPos{}
	for _, c := range claims {
		if c.Holder == self {
			out = append(out, c)
			continue
		}
		byNum[c.Token.Num] = append(byNum[c.Token.Num], c)
	}
	own, held := g.holder.Holding()
	if !held || g.placed != nil && g.placed.num != own.Num {
		g.placed = nil
	}
	if held {
		// What this node holds it knows first-hand; after it passes the
		// token on, the recipient's report must carry its link.
		g.setKnown(now, TokenPos{Holder: self, Token: own})
	}
	for _, num := range sortedKeys(byNum) {
		cs := byNum[num]
		if held && own.Num == num {
			out = append(out, g.ownClaims(now, own, cs)...)
			continue
		}
		cur, believed := g.believe(num, cs)
		for _, c := range cs {
			if !believed || c.Token.Seq > cur.Token.Seq || c.Token.Seq == cur.Token.Seq && c.Holder != cur.Holder {
				g.ignore(c)
			}
		}
		if believed {
			g.setKnown(now, cur)
			out = append(out, cur)
		}
	}
	slices.SortStableFunc(out, func(a, b TokenPos) int { return cmp.Compare(a.Token.Num, b.Token.Num) })
	return out
}

// believe returns the claim on token num that this node believes, if any:
// the end of the chain of passes from the holder it knows, when that
// holder still reports the token (or is this node, which passed it on);
// else the end of the chain from the holder a placement superseded, when
// that one reports it still (superseded); else the tip of the claims newer
// than what it knew, when they form one chain.
func (g *geoMachine) believe(num int, cs []TokenPos) (TokenPos, bool) {
	k, ok := g.known[num]
	if ok {
		start, live := k, k.Holder == g.self()
		if !live {
			if i := slices.IndexFunc(cs, func(c TokenPos) bool { return c.Holder == k.Holder }); i >= 0 {
				start, live = cs[i], true
			}
		}
		ch := newChains(cs)
		if live {
			if cur := ch.follow(start); cur.Holder != g.self() {
				return cur, true
			}
		}
		if sp, ok := g.superseded[num]; ok && k.Holder != g.self() {
			if i := slices.IndexFunc(cs, sp.lineage); i >= 0 {
				return ch.follow(cs[i]), true
			}
		}
		// Nothing older than what this node knew counts. A duplicate of
		// the placement it knew, at the same counter, is no older: the
		// holder it knew gave the token up to it (yieldsTo) or is gone.
		cs = slices.DeleteFunc(slices.Clone(cs), func(c TokenPos) bool {
			sibling := c.Token == k.Token && c.Token.Passes() == 0
			return c.Token.Seq <= k.Token.Seq && c.Holder != k.Holder && !sibling
		})
	}
	return chainTip(cs)
}

// ownClaims returns, of the claims on the token this node holds, the one
// it must give way to, if any (the holder machine's Observe then drops the
// token), and notes when a holder its placement replaced is alive.
func (g *geoMachine) ownClaims(now time.Time, own geometric.Token, cs []TokenPos) []TokenPos {
	self := g.self()
	var out []TokenPos
	for _, c := range cs {
		switch {
		case c.Giver == self && c.Token.Seq > own.Seq:
			out = append(out, c) // we passed it on, and the answer was lost
		case c.Token.Seq == own.Seq && c.Token.Passes() == 0 && g.yieldsTo(c):
			g.yield = c.Holder // a duplicate placement that the rule names, or a mate's takeover
			g.known[own.Num] = c
		case g.placed != nil && c.Holder == g.placed.replaced && g.placed.replaced != "" &&
			!now.Before(g.placed.at.Add(g.attachTTL()+g.m.cfg.AnnounceInterval)):
			// One TTL and an interval after the placement, a dead
			// holder's report has expired: this one is alive.
			g.yield = c.Holder
		case g.supersededAlive(now, own, c):
			// Likewise for a token that came to this node by passes
			// from a placement.
			g.yield = c.Holder
			g.known[own.Num] = c
		default:
			if c.Token.Seq >= own.Seq {
				g.ignore(c)
			}
		}
	}
	if len(out) > 0 {
		g.known[own.Num] = out[0]
	}
	return out
}

// superseded is the holder of a token this node believed until a
// placement of it (a re-homing or a takeover, at a newer epoch of the
// pass counter: Seq's high half) replaced it, its counter then, and when
// the node first believed the placement.
type superseded struct {
	holder peer.ID
	seq    uint64
	at     time.Time
}

// lineage reports whether c is the superseded holder's claim, or that of
// a peer the token was passed to after it, in the epoch it held it in: a
// report of a pass (a signed link) above the counter it had. The chain of
// links back to it cannot be checked when the reports between have
// expired (the side that kept the holder passed the token on while the
// other re-homed it), so a pass whose link another peer signed counts: a
// forger needs an accomplice's signature of a pass in that old epoch to
// make a holder of the placement give its token up.
func (sp superseded) lineage(c TokenPos) bool {
	if c.Token.Seq>>32 != sp.seq>>32 || c.Token.Seq < sp.seq {
		return false
	}
	return c.Holder == sp.holder || c.Giver != "" && c.Token.Seq > sp.seq
}

// setKnown notes the claim on cur's token that this node believes now;
// when a placement replaced the holder it believed before, that holder
// is superseded (see ownClaims: when it turns out alive, as after a
// partition whose side without it re-homed its token, the placement
// gives way to it). A superseded holder is only ever one this node
// believed: a forger cannot become one by claiming an old counter.
func (g *geoMachine) setKnown(now time.Time, cur TokenPos) {
	num := cur.Token.Num
	if old, ok := g.known[num]; ok && old.Holder != cur.Holder && cur.Token.Seq>>32 > old.Token.Seq>>32 {
		g.superseded[num] = superseded{holder: old.Holder, seq: old.Token.Seq, at: now}
	}
	if sp, ok := g.superseded[num]; ok && cur.Token.Seq>>32 <= sp.seq>>32 {
		delete(g.superseded, num) // the superseded lineage is believed again
	}
	g.known[num] = cur
}

// supersededAlive reports whether c, a claim on own's token, is the
// lineage of the holder that a placement of own superseded, one
// attachment TTL and an announce interval after the node first believed
// the placement: a dead holder's report has expired by then, so that one
// is alive (the two sides of a partition healed, each holding the
// token).
func (g *geoMachine) supersededAlive(now time.Time, own geometric.Token, c TokenPos) bool {
	sp, ok := g.superseded[own.Num]
	return ok && own.Seq>>32 > sp.seq>>32 && sp.lineage(c) &&
		!now.Before(sp.at.Add(g.attachTTL()+g.m.cfg.AnnounceInterval))
}

// yieldsTo reports whether this node gives its token up to c, a
// placement of it at the same counter (a duplicate): when c's holder has
// the smaller Score(seed^token) (the smaller ID on a tie), a rule both
// holders agree on whatever lists they placed the token from; or, when
// this node took the token over for the cluster of its lost holder, when
// c's holder is another member of that cluster that did the same and has
// the smaller ID.
func (g *geoMachine) yieldsTo(c TokenPos) bool {
	if p := g.placed; p != nil && p.num == c.Token.Num && slices.Contains(p.mates, c.Holder) {
		return c.Holder < g.self() // two of the lost holder's cluster took it over
	}
	seed := g.seed ^ uint64(c.Token.Num)
	a, b := geometric.Score(seed, geometric.ID(c.Holder)), geometric.Score(seed, geometric.ID(g.self()))
	return a < b || a == b && c.Holder < g.self()
}

// maxChain is the most passes the machine follows from one claim, and
// one less than the most claims on a token it believes as one chain from
// none it knew. A holder passes its token at most once a MinHold (ten
// token intervals, unless it leaves or hands it over) and a report lives
// three announce intervals, so an honest chain of live reports is a few
// links long.
const maxChain = 32

// chains indexes the claims on one token by giver, so that following a
// chain of passes costs the claims on the chain, not all the claims on
// the token at every link (hostile-peer audit, finding B: anyone can
// publish on the tokens topic under throwaway keys, and a chain of ghost
// reports, each link signed by the ghost before, listed against its
// order, made a scan per link quadratic: 8,000 claims took 100 ms a
// resolve, on the node's loop, once per attach request).
type chains struct {
	cs      []TokenPos
	byGiver map[peer.ID][]int // indices into cs, in cs's order
	looked  int               // claims examined (the tests count them)
}

func newChains(cs []TokenPos) *chains {
	c := &chains{cs: cs, byGiver: map[peer.ID][]int{}}
	for i, tp := range cs {
		if tp.Giver != "" {
			c.byGiver[tp.Giver] = append(c.byGiver[tp.Giver], i)
		}
	}
	return c
}

// next returns the index in cs of the report that cur's holder provably
// passed the token to (its link signed by cur's holder, a higher
// counter), the first in cs's order, or -1.
func (c *chains) next(cur TokenPos) int {
	for _, i := range c.byGiver[cur.Holder] {
		c.looked++
		if x := c.cs[i]; x.Holder != cur.Holder && x.Token.Seq > cur.Token.Seq {
			return i
		}
	}
	return -1
}

// follow returns the end of the chain of passes from cur, or the claim
// maxChain passes on when the chain is longer (the counter rises at every
// step: the chain ends).
func (c *chains) follow(cur TokenPos) TokenPos {
	for range maxChain {
		i := c.next(cur)
		if i < 0 {
			break
		}
		cur = c.cs[i]
	}
	return cur
}

// tip returns the tip of the claims when all of them lie on one chain of
// passes (see next) from the lowest, and false when they conflict, are
// more than such a chain can be (maxChain passes), or there are none.
func (c *chains) tip() (TokenPos, bool) {
	if len(c.cs) == 0 || len(c.cs) > maxChain+1 {
		return TokenPos{}, false
	}
	cur := slices.MinFunc(c.cs, func(a, b TokenPos) int {
		return cmp.Or(cmp.Compare(a.Token.Seq, b.Token.Seq), cmp.Compare(a.Holder, b.Holder))
	})
	on := 1
	for i := c.next(cur); i >= 0; i = c.next(cur) {
		cur = c.cs[i]
		on++
	}
	return cur, on == len(c.cs)
}

// chainTip returns the tip of cs when all its reports lie on one chain of
// passes from the lowest (see chains.tip).
func chainTip(cs []TokenPos) (TokenPos, bool) { return newChains(cs).tip() }

// ignore counts a claim not believed, once.
func (g *geoMachine) ignore(c TokenPos) {
	k := claimKey{c.Holder, c.Token}
	if g.ignSeen[k] {
		return
	}
	if len(g.ignSeen) > 4096 { // bounded: a forger's claims are counted again after
		clear(g.ignSeen)
	}
	g.ignSeen[k] = true
	g.ignored++
	g.note(slog.LevelDebug, "geometric: a token claim not believed", "token", c.Token.Num, "seq", c.Token.Seq, "holder", c.Holder, "giver", c.Giver)
}

// passable says whether a pass may be taken: from the holder of the token
// this node believes, at a higher counter. A pass from another peer that
// names a counter the believed holder had already reached (From claims to
// have held the token at a counter at or below the holder's) is a forgery
// (errForged); others are refused without blame (this node may have
// missed a report).
func (g *geoMachine) passable(in TokenOffered) error {
	k, ok := g.known[in.Token.Num]
	live := ok && slices.ContainsFunc(g.feed.Tokens, func(tp TokenPos) bool { return tp.Holder == k.Holder && tp.Token.Num == k.Token.Num })
	switch {
	case !live:
		return fmt.Errorf("node: token %d: no holder of it known", in.Token.Num)
	case k.Holder == in.From && in.Token.Seq > k.Token.Seq:
		return nil
	case k.Holder == in.From:
		return fmt.Errorf("node: token %d at %d from its holder, who reports %d: a replay", in.Token.Num, in.Token.Seq, k.Token.Seq)
	case in.Token.Seq <= k.Token.Seq+1:
		return fmt.Errorf("%w: %s passes token %d at %d, which %s holds at %d", errForged, in.From, in.Token.Num, in.Token.Seq, k.Holder, k.Token.Seq)
	default:
		return fmt.Errorf("node: token %d at %d from %s, but %s holds it at %d as far as this node knows", in.Token.Num, in.Token.Seq, in.From, k.Holder, k.Token.Seq)
	}
}

// TokenClaimsIgnored counts the token claims (reports of others) the
// machine did not believe, each once; TokenPassesForged the token passes
// it refused as forgeries.
func (m *Machine) TokenClaimsIgnored() uint64 {
	if m.geo == nil {
		return 0
	}
	return m.geo.ignored
}

// TokenHolders returns the holders of the token claims the machine
// believes now (its own included), sorted: the reports the driver keeps
// first when a token's reports fill their room (gossip.GeoConfig.Protect).
func (m *Machine) TokenHolders() []peer.ID {
	if m.geo == nil {
		return nil
	}
	var out []peer.ID
	for _, tp := range m.geo.feed.Tokens {
		out = append(out, tp.Holder)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TokenPassesForged counts the token passes refused as forgeries.
func (m *Machine) TokenPassesForged() uint64 {
	if m.geo == nil {
		return 0
	}
	return m.geo.forged
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
