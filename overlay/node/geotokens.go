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
//     passes that followed it. Claims that conflict (two chains, or a
//     placement beside another report) are all ignored until they do not:
//     a joiner believes no forger, though a forger can keep it from
//     believing anyone about that token while the conflict lasts.
//   - The holder itself (it knows itself) gives its token up only to a
//     report with its own signature and a higher counter (it passed the
//     token and the answer was lost), or to a duplicate placement at the
//     same counter whose holder the deterministic rule names
//     (geometric.InitialHolders, geometric.Rehome: views that differed at
//     the start; or a mate of the lost holder's cluster with a smaller ID
//     that took it over as this node did), or when its own placement (a re-homing or a takeover)
//     replaced a holder that turns out alive: that holder still reports
//     the token one membership TTL after the placement (a crashed
//     holder's report is gone by then).
//   - A pass is taken only from the holder this node believes, at a
//     higher counter (passable); a pass from another peer that claims to
//     have held the token at a counter the known holder had already
//     reached is a forgery, which the driver strikes.
//
// What a forger can still do: claim, with no other claim beside it, a
// token whose holder is gone (a re-homing is not signed by anyone); and
// hold back joiners as said.

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
		g.known[own.Num] = TokenPos{Holder: self, Token: own}
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
			g.known[num] = cur
			out = append(out, cur)
		}
	}
	slices.SortStableFunc(out, func(a, b TokenPos) int { return cmp.Compare(a.Token.Num, b.Token.Num) })
	return out
}

// believe returns the claim on token num that this node believes, if any:
// the end of the chain of passes from the holder it knows, when that
// holder still reports the token (or is this node, which passed it on);
// else the tip of the claims newer than what it knew, when they form one
// chain.
func (g *geoMachine) believe(num int, cs []TokenPos) (TokenPos, bool) {
	k, ok := g.known[num]
	if ok {
		start, live := k, k.Holder == g.self()
		if !live {
			if i := slices.IndexFunc(cs, func(c TokenPos) bool { return c.Holder == k.Holder }); i >= 0 {
				start, live = cs[i], true
			}
		}
		if live {
			if cur := follow(start, cs); cur.Holder != g.self() {
				return cur, true
			}
		}
		// Nothing older than what this node knew counts.
		cs = slices.DeleteFunc(slices.Clone(cs), func(c TokenPos) bool { return c.Token.Seq <= k.Token.Seq && c.Holder != k.Holder })
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

// yieldsTo reports whether this node gives its token up to c, a
// placement of it at the same counter (a duplicate): when the
// deterministic rule names c's holder in this node's view (the initial
// holder for the first placement, the re-homing's choice for a later
// one), or, when this node took the token over for the cluster of its lost
// holder, when c's holder is another member of that cluster that did the
// same and has the smaller ID.
func (g *geoMachine) yieldsTo(c TokenPos) bool {
	if p := g.placed; p != nil && p.num == c.Token.Num && slices.Contains(p.mates, c.Holder) {
		return c.Holder < g.self() // two of the lost holder's cluster took it over
	}
	ids := g.holderIDs()
	if c.Token.Seq == 0 {
		first, err := geometric.InitialHolders(g.seed, ids, min(g.tc.Tokens, len(ids)))
		return err == nil && c.Token.Num < len(first) && first[c.Token.Num] == geometric.ID(c.Holder)
	}
	holding := map[geometric.ID]bool{}
	for num, k := range g.known {
		if num != c.Token.Num {
			holding[geometric.ID(k.Holder)] = true
		}
	}
	return geometric.Rehome(g.seed, c.Token.Num, ids, holding) == geometric.ID(c.Holder)
}

// next returns the index in cs of the report that cur's holder provably
// passed the token to (its link signed by cur's holder, a higher
// counter), or -1.
func next(cur TokenPos, cs []TokenPos) int {
	return slices.IndexFunc(cs, func(c TokenPos) bool {
		return c.Giver == cur.Holder && c.Holder != cur.Holder && c.Token.Seq > cur.Token.Seq
	})
}

// follow returns the end of the chain of passes from cur among cs.
func follow(cur TokenPos, cs []TokenPos) TokenPos {
	for i := next(cur, cs); i >= 0; i = next(cur, cs) {
		cur = cs[i] // the counter rises at every step: the chain ends
	}
	return cur
}

// chainTip returns the tip of cs when all its reports lie on one chain of
// passes (see next) from the lowest, and false when they conflict or there
// are none.
func chainTip(cs []TokenPos) (TokenPos, bool) {
	if len(cs) == 0 {
		return TokenPos{}, false
	}
	cur := slices.MinFunc(cs, func(a, b TokenPos) int {
		return cmp.Or(cmp.Compare(a.Token.Seq, b.Token.Seq), cmp.Compare(a.Holder, b.Holder))
	})
	on := 1
	for i := next(cur, cs); i >= 0; i = next(cur, cs) {
		cur = cs[i]
		on++
	}
	return cur, on == len(cs)
}

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

// holderIDs are the peers that may hold a token, sorted: the public ones
// in the view, and this node unless it is private.
func (g *geoMachine) holderIDs() []geometric.ID {
	var ids []geometric.ID
	if !g.m.private {
		ids = append(ids, geometric.ID(g.self()))
	}
	for _, e := range g.m.view {
		if !e.Private && e.ID != g.self() {
			ids = append(ids, geometric.ID(e.ID))
		}
	}
	slices.Sort(ids)
	return ids
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
