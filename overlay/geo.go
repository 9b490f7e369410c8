package overlay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// The geometric strategy (Config.Strategy = StrategyGeometric). The node
// machine (overlay/node's geo.go) makes every decision: which peer to ping,
// the coordinate, where tokens go, which superpeer to attach to, what to
// answer, when to take a lost holder's token over. This is its I/O:
//
//   - the feed (gossip.Geo, one per token topic the node hears:
//     geotopics.go): the token positions heard, with the peers
//     connected, go to the machine as node.GeoFeed before each of its
//     geometric decisions (Machine.GeoDue) and before an attach request;
//     its token reports (node.GeoReady.Tokens) are published on every
//     token topic it hears, which only token holders publish on. Which
//     topics those are is the machine's word (GeoReady.Topics: the
//     backbone, gossip.TokenTopic, which holders read, and the topic of
//     the node's cluster, gossip.ClusterTopic, which its members read
//     instead; overlay/node's geobackbone.go). No coordinate is gossiped
//     otherwise: a member sends its coordinate to its superpeer with its
//     attach requests, and the superpeer passes some of its members' on
//     in its answers (overlay/node's geocoords.go), with the positions of
//     the superpeers nearby;
//   - pings (the coordinate ping of rtt.go, the least of three, whose
//     answer carries the answerer's coordinate): the machine's
//     GeoReady.Pings, each answered by node.PingDone with that
//     coordinate;
//   - token passes (GeoReady.Passes, answered by node.PassDone) and attach
//     requests (GeoReady.Attach, answered by node.AttachDone) over the two
//     stream protocols below; the handlers step the machine with
//     node.TokenOffered or node.AttachAsked on the node's loop (Node.do)
//     and write its answer (Machine.GeoAnswer);
//   - the node's state (GeoReady.State) is committed like the DHT
//     strategy's: events, logs, protected connections.
//
// Stream protocols (versioned; the sender is the stream's authenticated
// remote peer), one request frame and one response frame each, in wire.go's
// frame format (length, wire version, type, payload; see there for the
// limits and what is refused):
//
//   - token "/superpeer/<network>/token/3.0.0": a frameToken of the token
//     number and sequence (big-endian uint64s; a number at or above the
//     token count is refused) followed by the giver's link
//     (gossip.TokenLink's stream encoding: its signature of the pass to
//     the recipient, which the recipient checks against the stream's
//     sender and then publishes with its reports), answered by a
//     frameAnswer of 1 byte (1 taken, 0 refused). A link that does not
//     verify, or a pass the machine finds forged (GeoAnswer.Forged), is
//     refused like a malformed frame: a strike;
//   - attach "/superpeer/<network>/attach/14.0.0": a frameAttach of one
//     byte of what the member says of itself (attachPrivate: it is
//     private, attachFlapping: it flaps, attachLeaving: it attached to
//     another superpeer, let it go; attachKnown: the digest of the roster
//     it holds from this superpeer follows, rosterDigestSize bytes, see
//     georoster.go; attachNear: then the digest of the nearest superpeers
//     it holds from it, 8 bytes, node.NearDigest; other bits refused), then the
//     member's coordinate (appendCoord: a uvarint count of components,
//     geometric.Dimensions, then the components, the error, the
//     adjustment and the height, each a big-endian float32; it must pass
//     geometric.Valid), then, optionally, the member's report for the
//     search on measured RTTs (overlay/node's geoswap.go): a uvarint count
//     (1 to maxAttachRTTs) of uvarint RTTs in nanoseconds (each at most
//     geometric.MaxRTT), to the superpeer first, then to each candidate
//     it named, then, optionally, the member's next superpeer (a peer ID:
//     a uvarint length, at most pb.MaxIDLen, and the ID's bytes) and its
//     RTT to it (a uvarint as above); answered by a frameAnswer of 1 byte
//     (1 accepted, 0 refused) followed, when accepted, by the cluster: a
//     uvarint count (at most pb.MaxIDs) of peer IDs, each a uvarint length
//     (at most pb.MaxIDLen) and the ID's bytes, the superpeer first
//     (appendIDs, readIDs; none, with no demoted peers either: the
//     roster the request named by its digest, unchanged), then the
//     candidates of the search in the same
//     form (none: a count of 0), then some members' coordinates: a
//     uvarint count (at most maxAttachCoords) of a peer ID (as above) and
//     its coordinate (appendCoord), then the peers of the cluster that
//     said they are private or flapping (node.GeoAnswer.Demoted), as the
//     cluster (each must be in it), then the superpeers nearest
//     (node.GeoAnswer.Nearby, appendNearby): a uvarint count (at most
//     maxNearest) of a peer ID, a token number (uvarint, below
//     gossip.MaxTokens), its sequence (uvarint), a coordinate
//     (appendCoord), one byte (1: a superpeer, 0: not; other values
//     refused) and a load (uvarint, at most maxNearbyLoad), the
//     superpeer's own position first, then one byte (1: the nearest
//     the request named by their digest, and the list is the superpeer's
//     own position alone; 0: not), then those relayed in turn
//     (node.GeoAnswer.Rotated: as the nearest, at most maxRotated), then
//     the order to take a missing
//     token (node.GeoAnswer.Rehome, appendRehome): one byte, 0 none, 1 an
//     order (other values refused), which is the token (number and
//     sequence, as above), the holder it replaces (a peer ID, or a single
//     0 byte: none) and one byte (1: the superpeer's survey named this
//     member, 0: not; other values refused), then the superpeer's own
//     token report (readReport: a uvarint length, 0 none, at most
//     gossip.MaxGeoSize, and the report as gossip encodes it, checked as
//     one the superpeer published). Members learn their cluster-mates from
//     it, for elections, some of their coordinates, which mates rank last
//     and take no token, what they no longer hear on the backbone (the
//     superpeers to ask next, and the missing tokens to take), and their
//     superpeer's report, which it no longer republishes on its cluster's
//     topic (geotopics.go);
//   - vouch "/superpeer/<network>/vouch/1.0.0": a frameVouch of a peer ID
//     (the peer checked), answered by a frameAnswer of 8 bytes (the RTT
//     this node measures to it, nanoseconds, big-endian: the machine's,
//     or a ping's for a holder the machine believes, within its budget;
//     0: none): a vantage point of another node's liar check
//     (overlay/node's geovet.go).

// Strategies of superpeer selection.
const (
	StrategyDHT       = "dht"
	StrategyGeometric = "geometric"
)

// The geometric strategy's stream protocols on a network.
func tokenProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/token/3.0.0")
}

func attachProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/attach/14.0.0")
}

func vouchProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/vouch/1.0.0")
}

// liveMargin is the default Margin of the live token dynamics (see
// node.LiveMargin).
const liveMargin = node.LiveMargin

// liveCooling is the default Cooling of the live token dynamics: four
// passes at full heat, then the margin doubles with every pass. Live
// coordinates are noisy (on 100 nodes sharing two cores, passes late in a
// run still claimed gains of 15 to 170 ms, and up to 500 ms in later runs),
// and a live pass costs a snapshot period (MinHold) and a demotion; the
// first passes from a random start are the ones that gain most.
const liveCooling = 4

// snapshotTicks is how many token intervals the token machine keeps one
// snapshot of the coordinates (the default MinHold).
const snapshotTicks = node.SnapshotTicks

// geoConfig is the node machine's configuration of the geometric strategy.
func geoConfig(cfg Config) (node.GeoConfig, error) {
	g := cfg.Geometric
	g.Tokens = cfg.Target.Superpeers
	g, err := g.Filled()
	if err != nil {
		return node.GeoConfig{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return node.GeoConfig{Network: cfg.Network, Tokens: g, Coords: geometric.DefaultCoordConfig(),
		PingInterval: cfg.PingInterval, TokenInterval: cfg.TokenInterval, Relocate: cfg.GeoRelocate}, nil
}

// geo is the geometric strategy's I/O.
type geo struct {
	n *Node
	// feeds are the token topics the node hears (geotopics.go).
	feeds *geoFeeds
	// rosters is the roster held from the superpeer (georoster.go).
	rosters                 rosters
	tokenProto, attachProto protocol.ID
	vouchProto              protocol.ID
	tokens                  int             // S: token numbers at or above are refused
	ctx                     context.Context // the node's run context
	// believed is the set of token holders the machine believed at its
	// last feed (Machine.TokenHolders), for the feed's Protect.
	believed atomic.Pointer[map[peer.ID]bool]
	// kept are the peers tagged keepTag (keep); carryOut's alone.
	kept map[peer.ID]bool
}

// keepTag is the connection manager's tag of the peers the machine pings
// (GeoState.Keep), and keepValue its value: above kad-dht's tag of its
// routing-table peers (5), so that a trim drops those first, and below
// GossipSub's of its mesh peers (20). The cluster is protected besides
// (protect).
const (
	keepTag   = "superpeer-pinged"
	keepValue = 10
)

// keep tags the connections to the peers in ps, and untags those it tagged
// before that are not.
func (g *geo) keep(ps []peer.ID) {
	cm := g.n.host.ConnManager()
	next := make(map[peer.ID]bool, len(ps))
	for _, p := range ps {
		next[p] = true
		if !g.kept[p] {
			cm.TagPeer(p, keepTag, keepValue)
		}
	}
	for p := range g.kept {
		if !next[p] {
			cm.UntagPeer(p, keepTag)
		}
	}
	g.kept = next
}

func (n *Node) startGeo(ctx context.Context) error {
	g := &geo{
		n: n, ctx: ctx, tokens: n.cfg.Target.Superpeers,
		tokenProto: tokenProtocol(n.cfg.Network), attachProto: attachProtocol(n.cfg.Network), vouchProto: vouchProtocol(n.cfg.Network),
	}
	// A holder's coordinate changes with every ping, but the token machine
	// decides on a snapshot of them every snapshotTicks token intervals:
	// publishing it more often than every AnnounceInterval only costs every
	// peer a signature check per message (a profile of 100 nodes on mocknet
	// spent a fifth of its CPU there, when every peer published its
	// coordinate). New tokens, promotions and releases still go out at
	// once.
	ps, err := n.pubSub()
	if err != nil {
		return err
	}
	// The feed keeps S tokens' reports, a few each; when a token's room
	// is full, the holders the machine believes and the passes they (or
	// this node) signed get in before anyone else (hostile-peer audit,
	// finding B: a flood of reports under fresh keys was all kept, and
	// all of it went to the machine with every feed).
	// The same bounds hold on every token topic, the backbone's and the
	// clusters' (geotopics.go).
	g.feeds, err = joinGeoFeeds(ps, n.self, gossip.GeoConfig{
		Network: n.cfg.Network, Interval: n.cfg.AnnounceInterval, MinGap: n.cfg.AnnounceInterval, Logger: n.log,
		Rejected: n.gossipRejected("geo"), Tokens: n.cfg.Target.Superpeers, Protect: g.protect,
	}, n.log)
	if err != nil {
		return err
	}
	n.host.SetStreamHandler(g.tokenProto, g.handleToken)
	n.host.SetStreamHandler(g.attachProto, g.handleAttach)
	n.host.SetStreamHandler(g.vouchProto, g.handleVouch)
	n.host.SetStreamHandler(coordPingProtocol(n.cfg.Network), n.handleCoordPing)
	n.geo = g
	return nil
}

// protect names the token reports the feed keeps first (gossip's
// GeoConfig.Protect): those of a holder the machine believes, or of a pass
// that one, or this node, signed.
func (g *geo) protect(holder, giver peer.ID) bool {
	if giver == g.n.self {
		return true
	}
	b := g.believed.Load()
	return b != nil && ((*b)[holder] || giver != "" && (*b)[giver])
}

// stepFeed steps the machine with feed and notes the holders it then
// believes (protect); on the node's loop.
func (g *geo) stepFeed(m *node.Machine, now time.Time, feed node.GeoFeed) {
	m.Step(now, feed)
	b := map[peer.ID]bool{}
	for _, p := range m.TokenHolders() {
		b[p] = true
	}
	g.believed.Store(&b)
}

// input is what gossip says now, for the machine: the reports heard on
// the token topics the node hears, one per holder.
func (g *geo) input() node.GeoFeed {
	in := node.GeoFeed{Connected: g.n.connectedPeers()}
	for _, tp := range g.feeds.reports() {
		in.Tokens = append(in.Tokens, node.TokenPos{Holder: tp.Holder, Token: tp.Token, Coord: tp.Coord, Superpeer: tp.Superpeer, Load: tp.Load,
			Giver: tp.Giver, Summary: tp.Summary})
	}
	return in
}

// carryOut does the geometric part of a Ready: publish on the token
// topics the node hears, then join and leave topics as the machine says
// (a release goes out before the node leaves the backbone; a new topic
// gets the node's report at once), then start the pings, passes and
// attach requests, each in its own goroutine, whose answer comes back to
// the machine (always, even when the node stops: see leave).
func (g *geo) carryOut(ctx context.Context, rd node.GeoReady) {
	n := g.n
	g.publish(ctx, rd.Tokens)
	if rd.Topics != nil {
		g.feeds.set(ctx, *rd.Topics)
	} else {
		g.feeds.retry(ctx)
	}
	if st := rd.State; st != nil {
		next := State{Self: n.self, S: st.S, Members: st.Members, Role: st.Role, Coord: st.Coord, Token: st.Token, Prefix: st.Prefix, Size: st.Size}
		if st.Superpeer != "" {
			next.Superpeer = n.addrInfo(st.Superpeer)
		}
		n.commit(next)
		if m, ok := n.members.(*geoMembership); ok {
			m.changed(n.State())
		}
		g.keep(st.Keep)
	}
	for _, p := range rd.Pings {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			rtt, c, err := g.ping(ctx, p)
			n.feed(node.PingDone{Peer: p, RTT: rtt, Coord: c, Err: err})
		}()
	}
	for _, p := range rd.Passes {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.feed(node.PassDone{To: p.To, Token: p.Token, OK: g.pass(ctx, p.To, p.Token)})
		}()
	}
	for _, p := range rd.Attach {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			a, err := g.requestAttach(ctx, p, attachFlags(rd.AttachPrivate, rd.AttachFlapping), rd.AttachCoord, rd.AttachRTTs[p], rd.AttachSecond, rd.AttachNear[p])
			done := a.Done(p)
			done.Err = err
			n.feed(done)
		}()
	}
	for _, p := range rd.Detach {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			// The answer is no, and nothing waits for it.
			_, _ = g.requestAttach(ctx, p, attachFlags(rd.AttachPrivate, rd.AttachFlapping)|attachLeaving, rd.AttachCoord, nil, node.PeerRTT{}, 0)
		}()
	}
	for _, v := range rd.Vouch {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			rtt, err := g.requestVouch(ctx, v)
			n.feed(node.VouchDone{From: v.To, Of: v.Of, RTT: rtt, Err: err})
		}()
	}
}

// errNoVouch is a vantage point's answer of no RTT (zero): it keeps none
// for the peer asked about and measured none. No check, and no blame.
var errNoVouch = errors.New("overlay: the vantage point has no RTT to the peer")

// requestVouch asks v.To for the RTT it measures to v.Of.
func (g *geo) requestVouch(ctx context.Context, v node.VouchRequest) (time.Duration, error) {
	resp, err := g.n.request(ctx, v.To, g.vouchProto, frameVouch, []byte(v.Of), frameAnswer)
	if err != nil {
		return 0, err
	}
	if len(resp) != 8 {
		err = fmt.Errorf("%w: vouch answer of %d bytes, want 8", errWire, len(resp))
		g.n.guard.refuse(g.n, protoName(g.vouchProto), v.To, err)
		return 0, err
	}
	rtt := time.Duration(binary.BigEndian.Uint64(resp))
	if rtt == 0 {
		return 0, errNoVouch
	}
	if rtt < 0 || rtt > geometric.MaxRTT {
		return 0, fmt.Errorf("%w: vouch answer of %v", errWire, rtt)
	}
	return rtt, nil
}

// handleVouch answers a vantage point's question: the RTT this node
// measures to a peer, 8 bytes of nanoseconds, big-endian; zero when it has
// none. The machine decides (node.VouchAsked): the RTT it keeps, or, for
// a token holder it believes and within its budget, a ping (the least of
// three, as a sample's); a stranger's request never makes the node open a
// stream to the peer it names (hostile-peer audit, finding A: it did, one
// per request, and the peer named banned the node for the rate).
func (g *geo) handleVouch(s network.Stream) {
	g.n.serve(s, "vouch", frameVouch, func(req []byte, from peer.ID) (frameType, []byte, error) {
		of, err := peer.IDFromBytes(req)
		if err != nil || of == g.n.self || of == from {
			return 0, nil, fmt.Errorf("%w: vouch request for %q: %v", errWire, of, err)
		}
		var ans node.GeoAnswer
		if !g.n.do(g.ctx, func(m *node.Machine) { m.Step(time.Now(), node.VouchAsked{From: from, Of: of}); ans = m.GeoAnswer() }) {
			return 0, nil, fmt.Errorf("%w: stopping", errLimit)
		}
		rtt := ans.RTT
		if rtt <= 0 && ans.Measure {
			if rtt, _, err = g.ping(g.ctx, of); err != nil {
				rtt = 0 // none: the asker counts no check
			}
		}
		return frameAnswer, binary.BigEndian.AppendUint64(nil, uint64(max(rtt, 0))), nil
	})
}

// publish publishes the machine's token reports, in order, on every token
// topic the node hears.
func (g *geo) publish(ctx context.Context, reports []node.TokenReport) {
	for _, r := range reports {
		var err error
		if r.None {
			err = g.feeds.publish(ctx, nil)
		} else {
			tp := &gossip.TokenPos{Token: r.Token, Coord: r.Coord, Superpeer: r.Superpeer,
				Load: r.Load, Capacity: r.Capacity, Released: r.Released, Summary: r.Summary}
			if len(r.Link) > 0 {
				tp.Link, err = gossip.UnmarshalLink(r.Link)
			}
			if err == nil {
				err = g.feeds.publish(ctx, tp)
			}
		}
		if err != nil && ctx.Err() == nil {
			g.n.log.Warn("geometric: publish token", "err", err)
		}
	}
}

// ping measures the RTT to p, the least of three pings of the coordinate
// ping (rtt.go), and records it for the membership view's RTTs; it
// returns the coordinate p's answer carried (nil: none).
func (g *geo) ping(ctx context.Context, p peer.ID) (time.Duration, *coordinate.Coordinate, error) {
	d, c, err := pingCoord(ctx, g.n, p, rttFirst)
	if err == nil {
		g.n.rtts.record(p, d)
	}
	return d, c, err
}

// pass hands t to p over the token protocol, with this node's signature
// of the pass (gossip.SignLink), and reports whether p took it.
func (g *geo) pass(ctx context.Context, p peer.ID, t geometric.Token) bool {
	sk := g.n.host.Peerstore().PrivKey(g.n.self)
	if sk == nil {
		g.n.log.Warn("geometric: no private key to sign a token pass with", "to", p)
		return false
	}
	link, err := gossip.SignLink(sk, t, p)
	if err != nil {
		g.n.log.Warn("geometric: sign a token pass", "to", p, "err", err)
		return false
	}
	req := binary.BigEndian.AppendUint64(nil, uint64(t.Num))
	req = binary.BigEndian.AppendUint64(req, t.Seq)
	resp, err := g.n.request(ctx, p, g.tokenProto, frameToken, append(req, link.Marshal()...), frameAnswer)
	return err == nil && bytes.Equal(resp, respYes)
}

var respYes, respNo = []byte{1}, []byte{0}

// handleToken reads a token pass and answers with the machine's decision
// (node.TokenOffered).
func (g *geo) handleToken(s network.Stream) {
	g.n.serve(s, "token", frameToken, func(req []byte, from peer.ID) (frameType, []byte, error) {
		if len(req) <= 16 {
			return 0, nil, fmt.Errorf("%w: token pass of %d bytes, want 16 and a link", errWire, len(req))
		}
		num, seq := binary.BigEndian.Uint64(req[:8]), binary.BigEndian.Uint64(req[8:16])
		if num >= uint64(g.tokens) {
			return 0, nil, fmt.Errorf("%w: token number %d out of range (%d tokens)", errWire, num, g.tokens)
		}
		t := geometric.Token{Num: int(num), Seq: seq}
		link, err := gossip.UnmarshalLink(req[16:])
		if err == nil {
			var giver peer.ID
			if giver, err = link.Verify(t, g.n.self); err == nil && giver != from {
				err = fmt.Errorf("token link signed by %s, sent by %s", giver, from)
			}
		}
		if err != nil {
			return 0, nil, fmt.Errorf("%w: token pass: %w", errWire, err)
		}
		var ans node.GeoAnswer
		in := node.TokenOffered{From: from, Token: t, Link: req[16:]}
		if !g.n.do(g.ctx, func(m *node.Machine) { m.Step(time.Now(), in); ans = m.GeoAnswer() }) {
			return frameAnswer, respNo, nil
		}
		if ans.Forged != nil {
			return 0, nil, fmt.Errorf("%w: %w", errWire, ans.Forged)
		}
		if !ans.Yes {
			return frameAnswer, respNo, nil
		}
		return frameAnswer, respYes, nil
	})
}

// The bits of an attach request's first byte: what the member says of
// itself (node.AttachAsked.Private, Flapping and Leaving).
const (
	attachPrivate  byte = 1 << 0
	attachFlapping byte = 1 << 1
	attachLeaving  byte = 1 << 2
	// attachKnown: the flags byte is followed by the digest of the
	// roster the member holds from the superpeer it asks (georoster.go).
	attachKnown byte = 1 << 3
	// attachNear: then (after the roster's digest, if any) the digest of
	// the nearest superpeers it holds from it (node.AttachAsked.Near), a
	// big-endian uint64, never 0.
	attachNear byte = 1 << 4
)

// attachFlags is an attach request's first byte.
func attachFlags(private, flapping bool) byte {
	var b byte
	if private {
		b |= attachPrivate
	}
	if flapping {
		b |= attachFlapping
	}
	return b
}

// requestAttach asks p to take us, with what we say of ourselves (flags,
// attachFlags), our coordinate c and our report rtts if any, with our next
// superpeer second if any: yes with the cluster, the candidates, the
// coordinates and the demoted members p sent, or no (err nil: p answered
// no), or no answer (err).
func (g *geo) requestAttach(ctx context.Context, p peer.ID, flags byte, c *coordinate.Coordinate, rtts []time.Duration, second node.PeerRTT, near uint64) (node.GeoAnswer, error) {
	if c == nil {
		return node.GeoAnswer{}, fmt.Errorf("%w: attach request without a coordinate", errWire)
	}
	req := []byte{flags}
	held := g.rosters.get(p)
	if held != nil && flags&attachLeaving == 0 {
		req[0] |= attachKnown
		req = append(req, held.digest...)
	}
	if flags&attachLeaving != 0 {
		near = 0
	}
	if near != 0 {
		req[0] |= attachNear
		req = binary.BigEndian.AppendUint64(req, near)
	}
	req = appendCoord(req, c)
	if len(rtts) > 0 {
		req = appendRTTs(req, rtts)
		if second.Peer != "" && second.RTT > 0 {
			req = appendSecond(req, second)
		}
	}
	resp, err := g.n.request(ctx, p, g.attachProto, frameAttach, req, frameAnswer)
	if err != nil || len(resp) == 0 || resp[0] != respYes[0] {
		if err == nil {
			g.feeds.relay(p, nil) // p no longer serves: its report is not relayed
		}
		return node.GeoAnswer{}, err
	}
	a, report, err := readAttachYes(p, resp[1:], held, near)
	if err != nil {
		g.n.guard.refuse(g.n, protoName(g.attachProto), p, err)
		return node.GeoAnswer{}, err
	}
	g.rosters.keep(p, a.Cluster, a.Demoted)
	g.feeds.relay(p, report)
	return a, nil
}

// readAttachYes reads superpeer p's yes to an attach request (after its
// first byte): the cluster, which must start with p, the candidates, the
// coordinates and the demoted members, each of which must be in the
// cluster, then the superpeers nearby, which must start with p if any, the
// order to take a missing token, if any, and p's own token report, if any
// (readReport). An empty cluster, with an empty demoted list, stands for
// the roster held (georoster.go), which the request named by its digest:
// refused if none is held from p. The superpeers nearby are its nearest
// (node.GeoAnswer.Nearby), one byte (1: the nearest the request named by
// their digest near, held by the member, and the list before is the
// superpeer's own position alone; 0: not; refused when the request named
// none) and those relayed in turn (node.GeoAnswer.Rotated).
func readAttachYes(p peer.ID, b []byte, held *heldRoster, near uint64) (node.GeoAnswer, *gossip.TokenPos, error) {
	var report *gossip.TokenPos
	a, err := decodeAll(b, func(r *bufio.Reader) (node.GeoAnswer, error) {
		var a node.GeoAnswer
		var err error
		if a.Cluster, err = readIDs(r); err != nil {
			return a, err
		}
		if a.Candidates, err = readIDs(r); err != nil {
			return a, err
		}
		if a.Coords, err = readCoords(r); err != nil {
			return a, err
		}
		if a.Demoted, err = readIDs(r); err != nil {
			return a, err
		}
		if len(a.Cluster) == 0 {
			var ok bool
			if len(a.Demoted) > 0 {
				return a, fmt.Errorf("%w: attach: demoted peers without a cluster", errWire)
			}
			if a.Cluster, a.Demoted, ok = held.of(p); !ok {
				return a, fmt.Errorf("%w: attach: an empty cluster, and no roster of this superpeer's held", errWire)
			}
		}
		if a.Nearby, err = readNearby(r, maxNearest); err != nil {
			return a, err
		}
		if a.NearbyHeld, err = readFlag(r, "nearest held"); err != nil {
			return a, err
		}
		if a.NearbyHeld && (near == 0 || len(a.Nearby) != 1) {
			return a, fmt.Errorf("%w: attach: the nearest held, with %d positions, for a request that named them by digest %d", errWire, len(a.Nearby), near)
		}
		if a.Rotated, err = readNearby(r, maxRotated); err != nil {
			return a, err
		}
		if a.Rehome, err = readRehome(r); err != nil {
			return a, err
		}
		if report, err = readReport(r, p); err != nil {
			return a, err
		}
		a.Size, err = readSize(r)
		return a, err
	})
	if err == nil && (len(a.Cluster) == 0 || a.Cluster[0] != p) {
		err = fmt.Errorf("%w: attach: the cluster list does not start with its superpeer", errWire)
	}
	for _, d := range a.Demoted {
		if err == nil && !slices.Contains(a.Cluster, d) {
			err = fmt.Errorf("%w: attach: demoted peer %s not in the cluster", errWire, d)
		}
	}
	if err == nil && len(a.Nearby) > 0 && a.Nearby[0].Holder != p {
		err = fmt.Errorf("%w: attach: the superpeers nearby do not start with the superpeer", errWire)
	}
	if err != nil {
		return node.GeoAnswer{}, nil, err
	}
	a.Yes = true
	return a, report, nil
}

// appendAttachYes is readAttachYes' writer (after the first byte); report
// is the superpeer's own report as appendReport writes it (nil: none),
// known the digest of the roster the member holds, from its request (nil:
// none): when it is the answer's, the cluster and the demoted peers are
// left empty.
func appendAttachYes(b []byte, a node.GeoAnswer, report, known []byte) []byte {
	cluster, demoted := a.Cluster, a.Demoted
	if sameRoster(known, cluster, demoted) {
		cluster, demoted = nil, nil
	}
	b = appendIDs(appendCoords(appendIDs(appendIDs(b, cluster), a.Candidates), a.Coords), demoted)
	b = appendRehome(appendPositions(appendFlag(appendNearby(b, a.Nearby), a.NearbyHeld), a.Rotated, maxRotated), a.Rehome)
	b = append(binary.AppendUvarint(b, uint64(len(report))), report...)
	return binary.AppendUvarint(b, uint64(min(max(a.Size, 0), maxAttachSize)))
}

// readReport reads superpeer p's own token report in its yes to an attach
// request: a uvarint length (0: none, at most gossip.MaxGeoSize) and the
// report as p publishes it on its cluster's topic (gossip.TokenPos.Encode),
// checked as gossip checks a report whose signed origin is p
// (gossip.DecodeTokenPos). A superpeer publishes on its own cluster topic
// only what its members must hear at once (a new token, a promotion, a
// release: gossip.Geo.SetQuiet); they have the rest, its coordinate and
// its load, from this report, once an announce interval.
func readReport(r *bufio.Reader, p peer.ID) (*gossip.TokenPos, error) {
	data, err := readBytes(r, gossip.MaxGeoSize)
	if err != nil {
		return nil, fmt.Errorf("report: %v", err) // %v: an io failure, not struck (see PROTOCOLS.md)
	}
	if len(data) == 0 {
		return nil, nil
	}
	tp, err := gossip.DecodeTokenPos(p, data)
	if err != nil {
		return nil, fmt.Errorf("report: %v", err)
	}
	return &tp, nil
}

// maxAttachSize bounds the network's size in a yes (node.GeoAnswer.Size):
// the most peers the tokens' clusters can hold, each cluster list at most
// pb.MaxIDs peers.
const maxAttachSize = gossip.MaxTokens * pb.MaxIDs

// readSize reads the superpeer's estimate of the network's size in its
// yes: a uvarint, at most maxAttachSize.
func readSize(r *bufio.Reader) (int, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, fmt.Errorf("size: %v", err) // %v: a truncated answer, not struck (see PROTOCOLS.md)
	}
	if n > maxAttachSize {
		return 0, fmt.Errorf("%w: attach: a network of %d peers, limit %d", errWire, n, maxAttachSize)
	}
	return int(n), nil
}

// maxNearest and maxRotated bound the superpeers nearby in an attach
// answer: the machine's node.MaxNearest (7: the superpeer itself and the
// six nearest others) and node.MaxRotated (2, relayed in turn).
const (
	maxNearest = node.MaxNearest
	maxRotated = node.MaxRotated
)

// maxNearbyLoad bounds the load of a superpeer nearby: no cluster list
// holds more than pb.MaxIDs peers.
const maxNearbyLoad = pb.MaxIDs

// readNearby reads superpeers nearby (node.GeoAnswer.Nearby or Rotated): a
// uvarint count (at most limit) of a peer ID (readID), a token number
// (uvarint, below gossip.MaxTokens), the token's sequence (uvarint), a
// coordinate (readCoord), one byte (1: a superpeer, 0: not; other values
// refused) and a load (uvarint, at most maxNearbyLoad).
func readNearby(r *bufio.Reader, limit uint64) ([]node.TokenPos, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n > limit {
		return nil, fmt.Errorf("nearby count %d: %v", n, err)
	}
	var out []node.TokenPos
	for range n {
		var tp node.TokenPos
		if tp.Holder, err = readID(r); err != nil {
			return nil, err
		}
		if tp.Token, err = readToken(r); err != nil {
			return nil, err
		}
		if tp.Coord, err = readCoord(r); err != nil {
			return nil, err
		}
		if tp.Superpeer, err = readFlag(r, "nearby superpeer"); err != nil {
			return nil, err
		}
		load, err := binary.ReadUvarint(r)
		if err != nil || load > maxNearbyLoad {
			return nil, fmt.Errorf("nearby load %d: %v", load, err)
		}
		tp.Load = int(load)
		out = append(out, tp)
	}
	return out, nil
}

// appendNearby is readNearby's writer; the Giver and the Summary are not
// sent. An entry without a coordinate is left out (none at all if the
// first, the superpeer's own, has none: the reader wants it first).
func appendNearby(b []byte, ps []node.TokenPos) []byte {
	if len(ps) > 0 && ps[0].Coord == nil {
		ps = nil
	}
	return appendPositions(b, ps, maxNearest)
}

// appendPositions writes at most limit of ps as readNearby reads them,
// those without a coordinate left out.
func appendPositions(b []byte, ps []node.TokenPos, limit int) []byte {
	ps = slices.DeleteFunc(slices.Clone(ps), func(tp node.TokenPos) bool { return tp.Coord == nil })
	ps = ps[:min(len(ps), limit)]
	b = binary.AppendUvarint(b, uint64(len(ps)))
	for _, tp := range ps {
		b = appendID(b, tp.Holder)
		b = appendToken(b, tp.Token)
		b = appendCoord(b, tp.Coord)
		b = binary.AppendUvarint(appendFlag(b, tp.Superpeer), uint64(min(max(tp.Load, 0), maxNearbyLoad)))
	}
	return b
}

// readToken reads a token: its number (uvarint, below gossip.MaxTokens;
// the machine checks it against the network's S) and its sequence
// (uvarint).
func readToken(r *bufio.Reader) (geometric.Token, error) {
	num, err := binary.ReadUvarint(r)
	if err != nil || num >= gossip.MaxTokens {
		return geometric.Token{}, fmt.Errorf("token number %d: %v", num, err)
	}
	seq, err := binary.ReadUvarint(r)
	if err != nil {
		return geometric.Token{}, fmt.Errorf("token sequence: %v", err)
	}
	return geometric.Token{Num: int(num), Seq: seq}, nil
}

// appendToken is readToken's writer.
func appendToken(b []byte, t geometric.Token) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(b, uint64(max(t.Num, 0))), t.Seq)
}

// readRehome reads an order to take a missing token
// (node.GeoAnswer.Rehome): one byte, 0 (none: nothing follows) or 1 (other
// values refused), then the token (readToken), the holder it replaces (a
// peer ID as readID reads it, or a single 0 byte: none) and one byte, 1 if
// the superpeer's survey named this member, else 0 (other values
// refused).
func readRehome(r *bufio.Reader) (*node.RehomeOrder, error) {
	some, err := readFlag(r, "rehome")
	if err != nil || !some {
		return nil, err
	}
	var o node.RehomeOrder
	if o.Token, err = readToken(r); err != nil {
		return nil, err
	}
	if b, _ := r.Peek(1); len(b) == 1 && b[0] == 0 {
		_, _ = r.ReadByte()
	} else if o.Replaced, err = readID(r); err != nil {
		return nil, err
	}
	if o.Survey, err = readFlag(r, "rehome survey"); err != nil {
		return nil, err
	}
	return &o, nil
}

// readFlag reads a byte that must be 0 (false) or 1 (true): another value
// is malformed (errWire), no byte is the reader's error.
func readFlag(r *bufio.Reader, what string) (bool, error) {
	b, err := r.ReadByte()
	if err != nil {
		return false, fmt.Errorf("%s byte: %w", what, err)
	}
	if b > 1 {
		return false, fmt.Errorf("%w: %s byte %d, want 0 or 1", errWire, what, b)
	}
	return b == 1, nil
}

// appendFlag is readFlag's writer: 1 for true, 0 for false.
func appendFlag(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendRehome is readRehome's writer.
func appendRehome(b []byte, o *node.RehomeOrder) []byte {
	if o == nil {
		return appendFlag(b, false)
	}
	b = appendToken(appendFlag(b, true), o.Token)
	return appendFlag(appendID(b, o.Replaced), o.Survey)
}

// readAttachRequest reads an attach request from a member: attachFlags'
// byte (no other bit set but attachLeaving and attachKnown), the digest of
// the roster it holds with attachKnown, its coordinate and its report, if
// any, with its next superpeer, if any.
func readAttachRequest(from peer.ID, req []byte) (attachRequest, error) {
	in, err := decodeAll(req, func(r *bufio.Reader) (attachRequest, error) {
		in := attachRequest{AttachAsked: node.AttachAsked{From: from}}
		flags, err := r.ReadByte()
		if err != nil {
			return in, err
		}
		if flags&^(attachPrivate|attachFlapping|attachLeaving|attachKnown|attachNear) != 0 {
			return in, fmt.Errorf("flags %#x", flags)
		}
		in.Private, in.Flapping, in.Leaving = flags&attachPrivate != 0, flags&attachFlapping != 0, flags&attachLeaving != 0
		if flags&attachKnown != 0 {
			in.Known = make([]byte, rosterDigestSize)
			if _, err := io.ReadFull(r, in.Known); err != nil {
				return in, err
			}
		}
		if flags&attachNear != 0 {
			var d [8]byte
			if _, err := io.ReadFull(r, d[:]); err != nil {
				return in, err
			}
			if in.Near = binary.BigEndian.Uint64(d[:]); in.Near == 0 {
				return in, errors.New("a digest of the nearest of 0")
			}
		}
		if in.Coord, err = readCoord(r); err != nil {
			return in, err
		}
		if _, more := r.Peek(1); more != nil {
			return in, nil
		}
		if in.RTTs, err = readRTTs(r); err != nil {
			return in, err
		}
		if _, more := r.Peek(1); more == nil {
			in.Second, err = readSecond(r)
		}
		return in, err
	})
	if err != nil {
		return attachRequest{}, fmt.Errorf("%w: attach request: %w", errWire, err)
	}
	return in, nil
}

// attachRequest is an attach request as read: what the machine is asked,
// and the digest of the roster the member holds (Known, nil: none), for
// the answer's writer.
type attachRequest struct {
	node.AttachAsked
	Known []byte
}

// maxAttachCoords bounds the members' coordinates in an attach answer
// (the machine sends at most four).
const maxAttachCoords = 8

// appendCoord appends c: a uvarint count of components, then the
// components, the error, the adjustment and the height, each a big-endian
// float32 (IEEE 754 single precision): the nearest (a valid component
// stays valid, since geometric.MaxComponent is a float32), but the height
// rounded up (heightBits), so that a height at Vivaldi's floor (serf's
// HeightMin, 10 µs, which a fresh coordinate has and a settled one
// often keeps) does not fall below it, where the node takes a peer's
// coordinate for a bad one. A float32 keeps a coordinate of PlanetLab's
// scale (components below 0.3 s) to 20 ns, against RTTs measured to the
// microsecond at best, and halves what every coordinate costs on the
// wire: the machine's answer to an attach request carries up to thirteen
// (four members', nine superpeers nearby; issue 20).
func appendCoord(b []byte, c *coordinate.Coordinate) []byte {
	b = binary.AppendUvarint(b, uint64(len(c.Vec)))
	for _, x := range append(slices.Clone(c.Vec), c.Error, c.Adjustment) {
		b = binary.BigEndian.AppendUint32(b, math.Float32bits(float32(x)))
	}
	return binary.BigEndian.AppendUint32(b, heightBits(c.Height))
}

// heightBits is height h on the wire: the least float32 not below h
// (geometric.MaxComponent is a float32, so a valid height stays valid).
func heightBits(h float64) uint32 {
	f := float32(h)
	if float64(f) < h {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return math.Float32bits(f)
}

// readCoord reads appendCoord's encoding of a coordinate that passes
// geometric.Valid.
func readCoord(r *bufio.Reader) (*coordinate.Coordinate, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	return readCoordBody(r, n)
}

// readCoordBody reads a coordinate of n components, its count read.
func readCoordBody(r *bufio.Reader, n uint64) (*coordinate.Coordinate, error) {
	if n != geometric.Dimensions {
		return nil, fmt.Errorf("coordinate of %d components, want %d", n, geometric.Dimensions)
	}
	xs := make([]float64, n+3)
	var b [4]byte
	for i := range xs {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		xs[i] = float64(math.Float32frombits(binary.BigEndian.Uint32(b[:])))
	}
	c := &coordinate.Coordinate{Vec: xs[:n], Error: xs[n], Adjustment: xs[n+1], Height: xs[n+2]}
	if err := geometric.Valid(c); err != nil {
		return nil, err
	}
	return c, nil
}

// readCoords reads a uvarint count (at most maxAttachCoords) of a peer ID
// (readID) and its coordinate (readCoord).
func readCoords(r *bufio.Reader) ([]node.PeerCoord, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n > maxAttachCoords {
		return nil, fmt.Errorf("coordinate count %d: %v", n, err)
	}
	out := make([]node.PeerCoord, 0, n)
	for range n {
		id, err := readID(r)
		if err != nil {
			return nil, err
		}
		c, err := readCoord(r)
		if err != nil {
			return nil, err
		}
		out = append(out, node.PeerCoord{ID: id, Coord: c})
	}
	return out, nil
}

// appendCoords is readCoords' writer.
func appendCoords(b []byte, cs []node.PeerCoord) []byte {
	cs = cs[:min(len(cs), maxAttachCoords)]
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for _, pc := range cs {
		b = appendID(b, pc.ID)
		b = appendCoord(b, pc.Coord)
	}
	return b
}

// maxAttachRTTs bounds a report in an attach request: the RTT to the
// superpeer and to each candidate or landmark (node.SurveyLandmarks).
const maxAttachRTTs = node.SurveyLandmarks + 1

// readRTTs reads a report: a uvarint count (1 to maxAttachRTTs) of
// uvarint RTTs in nanoseconds, each in (0, geometric.MaxRTT].
func readRTTs(r *bufio.Reader) ([]time.Duration, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n == 0 || n > maxAttachRTTs {
		return nil, fmt.Errorf("RTT count %d: %v", n, err)
	}
	out := make([]time.Duration, 0, n)
	for range n {
		v, err := binary.ReadUvarint(r)
		if err != nil || v == 0 || v > uint64(geometric.MaxRTT) {
			return nil, fmt.Errorf("RTT %d ns: %v", v, err)
		}
		out = append(out, time.Duration(v))
	}
	return out, nil
}

// appendRTTs is readRTTs' writer.
func appendRTTs(b []byte, rtts []time.Duration) []byte {
	b = binary.AppendUvarint(b, uint64(len(rtts)))
	for _, d := range rtts {
		b = binary.AppendUvarint(b, uint64(min(max(d, 1), geometric.MaxRTT)))
	}
	return b
}

// readSecond reads a member's next superpeer: a peer ID (readID) and a
// uvarint RTT in nanoseconds, in (0, geometric.MaxRTT].
func readSecond(r *bufio.Reader) (node.PeerRTT, error) {
	id, err := readID(r)
	if err != nil {
		return node.PeerRTT{}, err
	}
	v, err := binary.ReadUvarint(r)
	if err != nil || v == 0 || v > uint64(geometric.MaxRTT) {
		return node.PeerRTT{}, fmt.Errorf("RTT to the next superpeer %d ns: %v", v, err)
	}
	return node.PeerRTT{Peer: id, RTT: time.Duration(v)}, nil
}

// appendSecond is readSecond's writer.
func appendSecond(b []byte, s node.PeerRTT) []byte {
	b = appendID(b, s.Peer)
	return binary.AppendUvarint(b, uint64(min(max(s.RTT, 1), geometric.MaxRTT)))
}

// readID reads a peer ID: a uvarint length (1 to pb.MaxIDLen, the
// election wire's limit) and the ID's bytes.
func readID(r *bufio.Reader) (peer.ID, error) {
	l, err := binary.ReadUvarint(r)
	if err != nil || l == 0 || l > pb.MaxIDLen {
		return "", fmt.Errorf("ID length %d: %v", l, err)
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return peer.IDFromBytes(b)
}

// readIDs reads a uvarint count of peer IDs (readID), within the election
// wire's limits.
func readIDs(r *bufio.Reader) ([]peer.ID, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n > pb.MaxIDs {
		return nil, fmt.Errorf("count %d: %v", n, err)
	}
	ids := make([]peer.ID, 0, n)
	for range n {
		id, err := readID(r)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// appendIDs is readIDs' writer.
func appendIDs(b []byte, ids []peer.ID) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = appendID(b, id)
	}
	return b
}

// appendID is readID's writer: a uvarint length and the ID's bytes.
func appendID(b []byte, id peer.ID) []byte {
	return append(binary.AppendUvarint(b, uint64(len(id))), id...)
}

// handleAttach answers an attach request with the machine's decision
// (node.AttachAsked), given the feed as it is now.
func (g *geo) handleAttach(s network.Stream) {
	g.n.serve(s, "attach", frameAttach, func(req []byte, from peer.ID) (frameType, []byte, error) {
		in, err := readAttachRequest(from, req)
		if err != nil {
			return 0, nil, err
		}
		var ans node.GeoAnswer
		feed := g.input()
		if !g.n.do(g.ctx, func(m *node.Machine) {
			now := time.Now()
			g.stepFeed(m, now, feed)
			m.Step(now, in.AttachAsked)
			ans = m.GeoAnswer()
		}) || !ans.Yes {
			return frameAnswer, respNo, nil
		}
		return frameAnswer, appendAttachYes(slices.Clone(respYes), ans, g.feeds.ownReport(), in.Known), nil
	})
}

// TokenKey is the election key of the geometric cluster of token num in
// the named network (node.TokenKey).
func TokenKey(network string, num int) dhtselect.Key { return node.TokenKey(network, num) }

// leave hands the token on (or releases it) when the node closes. The loop
// has stopped, so the machine is this goroutine's: the answers its last
// pings, passes and attach requests left in the inbox are stepped first,
// then GeoLeave, and its pings and passes are carried out here, one by
// one, until none is asked for.
func (g *geo) leave(ctx context.Context) {
	m := g.n.m
	for _, in := range g.n.inbox.take() {
		switch in.(type) {
		case node.PingDone, node.PassDone, node.AttachDone, node.VouchDone:
			m.Step(time.Now(), in)
		}
	}
	m.Step(time.Now(), node.GeoLeave{})
	for {
		rd := m.Ready()
		for _, note := range rd.Notes {
			g.n.log.Log(ctx, note.Level, note.Msg, note.Args...)
		}
		g.publish(ctx, rd.Geo.Tokens)
		if len(rd.Geo.Pings) == 0 && len(rd.Geo.Passes) == 0 && len(rd.Geo.Vouch) == 0 {
			return
		}
		for _, v := range rd.Geo.Vouch {
			rtt, err := g.requestVouch(ctx, v)
			m.Step(time.Now(), node.VouchDone{From: v.To, Of: v.Of, RTT: rtt, Err: err})
		}
		for _, p := range rd.Geo.Pings {
			rtt, c, err := g.ping(ctx, p)
			m.Step(time.Now(), node.PingDone{Peer: p, RTT: rtt, Coord: c, Err: err})
		}
		for _, p := range rd.Geo.Passes {
			m.Step(time.Now(), node.PassDone{To: p.To, Token: p.Token, OK: g.pass(ctx, p.To, p.Token)})
		}
	}
}

func (g *geo) close() error {
	g.n.host.RemoveStreamHandler(g.tokenProto)
	g.n.host.RemoveStreamHandler(g.attachProto)
	g.n.host.RemoveStreamHandler(g.vouchProto)
	g.n.host.RemoveStreamHandler(coordPingProtocol(g.n.cfg.Network))
	return g.feeds.close()
}

// GeoSwaps counts the superpeer's roles this node handed over by the
// search on measured RTTs (overlay/node's geoswap.go).
func (n *Node) GeoSwaps() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.swaps
}
