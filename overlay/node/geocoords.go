package node

import (
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// Which coordinates a node knows with the geometric strategy (issue 20: what
// a peer hears and keeps grows with its cluster and S, not with the
// swarm). No peer gossips its coordinate to the swarm. A node knows:
//
//   - its own;
//   - the token holders': each holder's token report carries its
//     coordinate (GeoFeed.Tokens, S reports);
//   - a superpeer, its members': a member sends its coordinate with every
//     attach request (AttachAsked.Coord, GeoReady.AttachCoord), kept for
//     as long as the member is;
//   - an ordinary peer, some of its mates': its superpeer answers each
//     attach request with the coordinates of up to geoShare of its other
//     members, in turn (GeoAnswer.Coords), which the member keeps for
//     attachTTL while its superpeer names them as its cluster.
//
// That is what the token dynamics use. A superpeer's token is attracted by
// its cell, which is its members, weighted as if every peer were known: by
// the swarm's size that the holders' loads add up to (population,
// geometric.Holder.SetPopulation); its neighbours (the peers it may pass
// its token to), the vantage points of its liar check and the candidates
// of its search are its members. An ordinary peer fits its own coordinate
// by pinging the holders and its mates, and attaches by the holders'
// coordinates. A holder not yet promoted has no members, but it makes no
// decision before it is: MinHold is longer than Dwell (and on leaving it
// passes its token to the nearest peer it knows, its former mates
// included).

// geoShare is how many of its members' coordinates a superpeer sends with
// each answer to an attach request.
const geoShare = 4

// heardCoord is a mate's coordinate, kept until until.
type heardCoord struct {
	c     *coordinate.Coordinate
	until time.Time
}

// coords returns the coordinates the node knows now, but its own: its
// mates', its members' and the believed token holders', in a map of its
// own (the machine keeps it in the snapshot).
func (g *geoMachine) coords(now time.Time) map[peer.ID]*coordinate.Coordinate {
	out := make(map[peer.ID]*coordinate.Coordinate, len(g.mateCoord)+len(g.memberCoord)+len(g.feed.Tokens))
	for p, h := range g.mateCoord {
		if now.After(h.until) {
			delete(g.mateCoord, p)
			continue
		}
		out[p] = h.c
	}
	for p, c := range g.memberCoord {
		out[p] = c
	}
	for _, tp := range g.positions() {
		if tp.Coord != nil {
			out[tp.Holder] = tp.Coord
		}
	}
	delete(out, g.self())
	return out
}

// population is the swarm's size for the attraction's weight: the token
// holders believed, and the ordinary peers they report serving
// (reportedCluster).
func (g *geoMachine) population() int {
	n := 0
	for _, tp := range g.feed.Tokens {
		n += g.reportedCluster(tp)
	}
	return n
}

// reportedCluster is the holder of report tp and the ordinary peers it
// reports serving: its load, at most this node's Capacity (a report's
// load is its author's claim).
func (g *geoMachine) reportedCluster(tp TokenPos) int {
	return 1 + min(max(tp.Load, 0), g.tc.Capacity)
}

// memberSent keeps the coordinate a member sent with its attach request,
// when it is a valid one.
func (g *geoMachine) memberSent(p peer.ID, c *coordinate.Coordinate) {
	if c == nil || geometric.Valid(c) != nil {
		return
	}
	g.memberCoord[p] = c.Clone()
}

// share returns the coordinates of up to geoShare members other than p,
// the next ones in ID order after the last answer's.
func (g *geoMachine) share(p peer.ID) []PeerCoord {
	ids := make([]peer.ID, 0, len(g.memberCoord))
	for q := range g.memberCoord {
		if q != p {
			ids = append(ids, q)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	k := min(geoShare, len(ids))
	out := make([]PeerCoord, 0, k)
	for i := range k {
		q := ids[(g.shareAt+i)%len(ids)]
		out = append(out, PeerCoord{ID: q, Coord: g.memberCoord[q].Clone()})
	}
	g.shareAt = (g.shareAt + k) % len(ids)
	return out
}

// matesSent keeps the coordinates sp sent with its yes to an attach
// request: at most geoShare of them, of the peers it names as its
// cluster, valid ones; the mates' coordinates heard from another
// superpeer, and those of peers no longer in the cluster, go.
func (g *geoMachine) matesSent(now time.Time, sp peer.ID, mates []peer.ID, coords []PeerCoord) {
	if sp != g.matesOf {
		clear(g.mateCoord)
	}
	for p := range g.mateCoord {
		if !slices.Contains(mates, p) {
			delete(g.mateCoord, p)
		}
	}
	for _, pc := range coords[:min(len(coords), geoShare)] {
		if pc.ID != g.self() && pc.ID != sp && slices.Contains(mates, pc.ID) && pc.Coord != nil && geometric.Valid(pc.Coord) == nil {
			g.mateCoord[pc.ID] = heardCoord{c: pc.Coord.Clone(), until: now.Add(g.attachTTL())}
		}
	}
}
