package overlay

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"

	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// The geometric strategy (Config.Strategy = StrategyGeometric) drives the
// pure machines of package geometric:
//
//   - Coordinates: every PingInterval the node pings one random peer whose
//     coordinate it knows (libp2p's ping protocol), feeds the RTT and that
//     peer's coordinate to its Vivaldi client, and publishes its own
//     coordinate on the coordinates topic.
//   - Tokens: every TokenInterval (jittered by up to a quarter, so that
//     holders rarely move at the same instant on stale positions) the node
//     gives its Holder the coordinates and token positions heard by gossip
//     and ticks it. A Pass is carried out over the token protocol (the
//     receiver's Holder accepts or refuses it); the holder publishes its
//     position on the tokens topic. The S tokens start on
//     geometric.InitialHolders of the membership view once the view has had
//     warmup to fill; a token that nobody reports for three token intervals
//     is re-homed (geometric.Rehome) to a peer that then takes it.
//   - Attachment: a promoted holder is a superpeer. An ordinary peer attaches
//     to the nearest superpeer with room (geometric.Attach, preferring
//     measured RTTs) by asking it over the attach protocol, which the
//     superpeer refuses when it already serves Capacity peers; the request is
//     repeated every token interval and is the superpeer's proof that the
//     member is alive.
//
// Stream protocols (versioned; the sender is the stream's authenticated
// remote peer), one request frame and one response frame each, in wire.go's
// frame format (length, wire version, type, payload; see there for the
// limits and what is refused):
//
//   - token "/superpeer/<network>/token/2.0.0": a frameToken of 16 bytes
//     (token number and sequence, big-endian uint64s; a number at or above
//     the token count is refused), answered by a frameAnswer of 1 byte
//     (1 taken, 0 refused);
//   - attach "/superpeer/<network>/attach/3.0.0": a frameAttach with no
//     payload, answered by a frameAnswer of 1 byte (1 accepted, 0 refused)
//     followed, when accepted, by the cluster: a uvarint count (at most
//     pb.MaxIDs) of peer IDs, each a uvarint length (at most pb.MaxIDLen)
//     and the ID's bytes, the superpeer first (appendIDs, readIDs). Members
//     learn their cluster-mates from it, for elections.

// Strategies of superpeer selection.
const (
	StrategyDHT       = "dht"
	StrategyGeometric = "geometric"
)

// The geometric strategy's stream protocols on a network.
func tokenProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/token/2.0.0")
}

func attachProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/attach/3.0.0")
}

// geoWarmups is how many token intervals a node waits, when it hears of no
// token, before it places the tokens itself: time for the membership view
// to fill so that the peers agree on the initial holders, and for the
// coordinates to take shape (the first fastSamples pings go out five times
// as often).
const (
	geoWarmups  = 10
	fastSamples = 30
)

// liveMargin is the default Margin of the live token dynamics, larger than
// the simulator's: live coordinates keep moving with every sample (by a few
// milliseconds), and a token should not chase that noise. A token's energy
// is of the order of the mean RTT in its cluster (tens of milliseconds), so
// 5 ms asks for a gain of some ten per cent.
const liveMargin = 5 * time.Millisecond

// liveCooling is the default Cooling of the live token dynamics: four
// passes at full heat, then the margin doubles with every pass. Live
// coordinates are noisy (on 100 nodes sharing two cores, passes late in a
// run still claimed gains of 15 to 170 ms, and up to 500 ms in later runs),
// and a live pass costs a snapshot period (MinHold) and a demotion; the
// first passes from a random start are the ones that gain most.
const liveCooling = 4

// snapshotTicks is how many token intervals the token machine keeps one
// snapshot of the coordinates.
const snapshotTicks = 10

type geo struct {
	n                       *Node
	cfg                     geometric.Config
	feed                    *gossip.Geo
	tokenProto, attachProto protocol.ID
	seed                    uint64
	rng                     *rand.Rand

	mu       sync.Mutex
	client   *geometric.Client
	holder   *geometric.Holder
	rtt      map[peer.ID]time.Duration // last measured
	members  map[peer.ID]time.Time     // a superpeer's attached peers, last request
	attached peer.ID                   // an ordinary peer's superpeer
	attachOK time.Time                 // when it last accepted our request
	mates    []peer.ID                 // the cluster matesOf sent with its last yes, itself first
	matesOf  peer.ID
	// clusterToken is the token number of our cluster's holder, as last
	// reported (it outlives the holder, for the election's takeover).
	clusterToken int
	ctx          context.Context // the node's run context
	tokens       tokenBook       // what we know of each token, for place
	started      time.Time
	// The coordinates the token machine decides on: a snapshot refreshed
	// every snapshotTicks ticks, so that tokens settle between refreshes
	// instead of chasing every sample's noise; and the random half of the
	// neighbours, drawn once.
	viewSize      int       // membership view size at the last tick
	viewSince     time.Time // since when it has had that size
	snapshot      map[peer.ID]*coordinate.Coordinate
	snapshotEpoch int64
	longNeighbors []peer.ID
	holding       bool // we published a token position last time
	// distrusted: peers whose claimed coordinate disagreed with the RTT
	// measured to them (vet), and the snapshot epoch when it did; they are
	// no neighbours, so no token goes to them, until the next snapshot.
	distrusted map[peer.ID]int64
	distrustN  uint64 // how many times vet distrusted a claim
}

func (n *Node) startGeo(ctx context.Context) error {
	cfg := n.cfg.Geometric
	cfg.Tokens = n.cfg.Target.Superpeers
	cfg, err := cfg.Filled()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	client, err := geometric.NewClient(geometric.DefaultCoordConfig())
	if err != nil {
		return err
	}
	holder, err := geometric.NewHolder(geometric.ID(n.self), cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	h := fnv.New64a()
	h.Write([]byte(n.cfg.Network))
	seed := h.Sum64() // shared by the network: initial holders, re-homing
	h.Write([]byte(n.self))
	// The node's own choices (ping targets, jitter, long neighbours) come
	// from a source seeded by the network and its peer ID, not the clock:
	// they differ between nodes and a run can be replayed.
	g := &geo{
		n: n, cfg: cfg, seed: seed,
		rng:        rand.New(rand.NewPCG(seed, h.Sum64())),
		tokenProto: tokenProtocol(n.cfg.Network), attachProto: attachProtocol(n.cfg.Network),
		client: client, holder: holder,
		rtt: map[peer.ID]time.Duration{}, members: map[peer.ID]time.Time{}, tokens: tokenBook{},
		started: time.Now(), ctx: ctx, clusterToken: -1,
		distrusted: map[peer.ID]int64{},
	}
	// A coordinate changes with every ping, but the token machine decides
	// on a snapshot of them every snapshotTicks token intervals: publishing
	// it more often than every AnnounceInterval only costs every peer a
	// signature check per message (a profile of 100 nodes on mocknet spent
	// a fifth of its CPU there). New tokens, promotions and releases still
	// go out at once.
	g.feed, err = gossip.JoinGeo(n.ps, n.self, gossip.GeoConfig{
		Network: n.cfg.Network, Interval: n.cfg.AnnounceInterval, MinGap: n.cfg.AnnounceInterval, Logger: n.log,
		Rejected: n.gossipRejected("geo"),
	})
	if err != nil {
		return err
	}
	ping.NewPingService(n.host) // a host of our own has it already; a given one may not
	n.host.SetStreamHandler(g.tokenProto, g.handleToken)
	n.host.SetStreamHandler(g.attachProto, g.handleAttach)
	n.geo = g
	if err := g.feed.SetCoord(ctx, client.Coordinate()); err != nil {
		n.log.Warn("geometric: publish coordinate", "err", err)
	}
	n.wg.Add(3)
	go g.pingLoop(ctx)
	go g.tickLoop(ctx)
	go g.attachLoop(ctx)
	return nil
}

// pingLoop measures one RTT per PingInterval and updates the coordinate.
func (g *geo) pingLoop(ctx context.Context) {
	defer g.n.wg.Done()
	t := time.NewTicker(g.n.cfg.PingInterval / 5)
	defer t.Stop()
	for samples := 0; ; samples++ {
		if samples == fastSamples {
			t.Reset(g.n.cfg.PingInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, remote, ok := g.pickPingTarget()
		if !ok {
			continue
		}
		// The coordinate is fitted to the filtered RTT, not to the raw
		// sample, whose spikes on a loaded host are scheduling delays
		// (with raw samples, passes 7 to 10 of tokens on 100 nodes still
		// claimed gains of 120 to 850 ms, far above any cluster's RTTs).
		rtt, err := g.measure(ctx, p)
		if err != nil {
			g.n.log.Debug("geometric: ping", "peer", p, "err", err)
			continue
		}
		g.mu.Lock()
		c, err := g.client.Sample(geometric.ID(p), remote, rtt)
		g.mu.Unlock()
		if err != nil {
			g.n.log.Debug("geometric: sample rejected", "peer", p, "rtt", rtt, "err", err)
			continue
		}
		if err := g.feed.SetCoord(ctx, c); err != nil && ctx.Err() == nil {
			g.n.log.Warn("geometric: publish coordinate", "err", err)
		}
	}
}

// measure pings p and folds the sample into the RTT kept for p
// (filterRTT), which it returns.
func (g *geo) measure(ctx context.Context, p peer.ID) (time.Duration, error) {
	rtt, err := g.ping(ctx, p)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rtt[p] = filterRTT(g.rtt[p], rtt)
	return g.rtt[p], nil
}

// filterRTT folds a new sample into the RTT kept for a peer: a lower one
// replaces it at once, a higher one moves it an eighth of the way. A busy
// host adds its scheduling delays to a ping but never takes any away, so
// the kept RTT follows the floor of the samples, not their spikes (which
// made ordinary peers hop between superpeers), and still follows a route
// that got slower.
func filterRTT(old, sample time.Duration) time.Duration {
	if old <= 0 || sample <= old {
		return sample
	}
	return old + (sample-old)/8
}

// pickPingTarget chooses a random peer with a known coordinate, preferring
// a superpeer whose RTT is not measured yet (attachment compares them).
func (g *geo) pickPingTarget() (peer.ID, *coordinate.Coordinate, bool) {
	coords := g.feed.Coords()
	delete(coords, g.n.self)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, tp := range g.feed.Tokens() {
		if _, ok := g.rtt[tp.Holder]; !ok && tp.Superpeer && tp.Holder != g.n.self {
			if c, ok := coords[tp.Holder]; ok {
				return tp.Holder, c, true
			}
		}
	}
	if len(coords) == 0 {
		return "", nil, false
	}
	ids := make([]peer.ID, 0, len(coords))
	for p := range coords {
		ids = append(ids, p)
	}
	slices.Sort(ids)
	p := ids[g.rng.IntN(len(ids))]
	return p, coords[p], true
}

// ping measures the RTT to p: the least of three pings, since a busy host
// adds its scheduling delays to a ping but never takes any away.
func (g *geo) ping(ctx context.Context, p peer.ID) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	results := ping.Ping(ctx, g.n.host, p)
	best := time.Duration(0)
	for range 3 {
		res, ok := <-results
		if !ok { // the deadline passed: the channel closes without a result
			res.Error = ctx.Err()
		}
		if res.Error != nil {
			if best > 0 {
				break
			}
			return 0, res.Error
		}
		if best == 0 || res.RTT < best {
			best = res.RTT
		}
	}
	return best, nil
}

// tickLoop runs the token machine every TokenInterval (jittered), or at
// once when kicked.
func (g *geo) tickLoop(ctx context.Context) { g.every(ctx, g.n.kick, g.tick) }

// every calls fn every TokenInterval give or take a quarter, at random (so
// that holders rarely move at the same instant on stale positions), or at
// once when kick fires, until ctx ends; it runs in one of the node's
// goroutines.
func (g *geo) every(ctx context.Context, kick <-chan struct{}, fn func(context.Context, time.Time)) {
	defer g.n.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.jittered()):
		case <-kick:
		}
		fn(ctx, time.Now())
	}
}

// jittered returns TokenInterval give or take a quarter, at random.
func (g *geo) jittered() time.Duration {
	d := g.n.cfg.TokenInterval
	g.mu.Lock()
	defer g.mu.Unlock()
	return d + time.Duration(g.rng.Int64N(int64(d)/2+1)) - d/4
}

// tick is one round: inputs to the holder, its decisions, the position
// report, the attachment and the node's state.
func (g *geo) tick(ctx context.Context, now time.Time) {
	coords := g.feed.Coords()
	tokens := g.feed.Tokens()
	// The peers that may hold a token: the reachable ones (see nat.go).
	var ids []geometric.ID
	if !g.n.Private() {
		ids = append(ids, geometric.ID(g.n.self))
	}
	private := map[geometric.ID]bool{}
	for _, e := range g.n.members.Entries() {
		if e.Private {
			private[geometric.ID(e.ID)] = true
		} else if e.ID != g.n.self {
			ids = append(ids, geometric.ID(e.ID))
		}
	}
	slices.Sort(ids)

	g.mu.Lock()
	for p := range g.rtt {
		if _, ok := coords[p]; !ok { // gone: drop its RTT and serf's filter for it
			delete(g.rtt, p)
			g.client.Forget(geometric.ID(p))
		}
	}
	// Snapshots are taken at the same wall-clock epochs everywhere, so that
	// holders (and the peers they pass to) decide on nearly the same
	// picture: tokens bounce between peers whose pictures differ.
	epoch := now.UnixNano() / int64(snapshotTicks*g.n.cfg.TokenInterval)
	if epoch != g.snapshotEpoch || len(g.snapshot) < len(coords) {
		g.snapshot, g.snapshotEpoch = coords, epoch
		g.snapshot[g.n.self] = g.client.Coordinate()
	}
	self := g.snapshot[g.n.self]
	peers := make([]geometric.Peer, 0, len(g.snapshot))
	for p, c := range g.snapshot {
		peers = append(peers, geometric.Peer{ID: geometric.ID(p), Coord: c})
	}
	slices.SortFunc(peers, func(a, b geometric.Peer) int { return cmp.Compare(a.ID, b.ID) })
	if err := g.holder.SetCoordinate(self); err != nil {
		g.n.log.Warn("geometric: own coordinate rejected", "err", err)
	}
	g.holder.SetPeers(peers)
	g.holder.SetNeighbours(slices.DeleteFunc(g.neighbours(self, peers), func(p geometric.Peer) bool { return private[p.ID] }))
	var outs []geometric.Output
	for _, tp := range tokens {
		if tp.Holder != g.n.self {
			c := tp.Coord
			if sc, ok := g.snapshot[tp.Holder]; ok {
				c = sc // decide on one consistent picture
			}
			outs = append(outs, g.holder.Observe(geometric.Position{Token: tp.Token, Holder: geometric.ID(tp.Holder), Coord: c})...)
		}
	}
	g.place(ctx, ids, tokens, now)
	outs = append(outs, g.holder.Tick(now)...)
	g.mu.Unlock()
	g.carryOut(ctx, outs)
	g.publishToken(ctx)
	g.update()
}

// attachLoop keeps the attachment every TokenInterval (jittered like the
// ticks). It runs apart from the token machine because an attach request
// is a stream round trip, or up to three, which on a loaded host with
// PlanetLab latencies takes seconds (measured: 2.5 to 5.5 s with 100 nodes
// on two cores); the token machine must not wait for it.
func (g *geo) attachLoop(ctx context.Context) {
	g.every(ctx, nil, func(ctx context.Context, now time.Time) {
		g.attach(ctx, g.feed.Tokens(), now)
		g.update()
	})
}

// attachTTL is how long an attachment lasts without a successful request:
// a superpeer drops a member it has not heard from for that long, and a
// member keeps a superpeer whose refreshes fail (while it still reports its
// token) for as long. It is the membership topic's TTL, three announce
// intervals, so that a loaded host that answers slowly is not taken for a
// dead one sooner than the overlay takes any peer for dead.
func (g *geo) attachTTL() time.Duration { return 3 * g.n.cfg.AnnounceInterval }

// neighbours are the 8 nearest peers by coordinate and 8 random others,
// drawn once (the simulator's choice): the peers a token may be passed to.
// Called with g.mu held.
func (g *geo) neighbours(self *coordinate.Coordinate, peers []geometric.Peer) []geometric.Peer {
	others := slices.DeleteFunc(slices.Clone(peers), func(p geometric.Peer) bool {
		e, bad := g.distrusted[peer.ID(p.ID)]
		return p.ID == geometric.ID(g.n.self) || bad && e == g.snapshotEpoch
	})
	slices.SortStableFunc(others, func(a, b geometric.Peer) int {
		return cmp.Compare(geometric.Distance(self, a.Coord), geometric.Distance(self, b.Coord))
	})
	k := min(8, len(others))
	out := slices.Clone(others[:k])
	rest := others[k:]
	if len(g.longNeighbors) < min(8, len(rest)) {
		g.longNeighbors = g.longNeighbors[:0]
		for _, i := range g.rng.Perm(len(rest))[:min(8, len(rest))] {
			g.longNeighbors = append(g.longNeighbors, peer.ID(rest[i].ID))
		}
	}
	for _, p := range rest {
		if slices.Contains(g.longNeighbors, peer.ID(p.ID)) {
			out = append(out, p)
		}
	}
	return out
}

// place takes a token this node should hold and nobody reports: an initial
// token never heard of, once the warm-up is over, or a token that was
// reported and then missing for three token intervals. Called with g.mu held.
func (g *geo) place(ctx context.Context, ids []geometric.ID, tokens []gossip.TokenPos, now time.Time) {
	// Remember every token heard of, our own included, before anything
	// else: a token we held and passed on is not ours to place again.
	reported := map[int]bool{}
	holding := map[geometric.ID]bool{}
	for _, tp := range tokens {
		reported[tp.Token.Num] = true
		g.tokens.report(tp.Token.Num, tp.Token.Seq, tp.Holder)
		holding[geometric.ID(tp.Holder)] = true
	}
	if t, held := g.holder.Holding(); held {
		g.tokens.hear(t.Num, t.Seq)
		return
	}
	if len(ids) != g.viewSize {
		g.viewSize, g.viewSince = len(ids), now
	}
	// Act only on a membership view that has held still for the warm-up,
	// and not before every report republished (each AnnounceInterval,
	// membership and token positions alike) has had one TTL to arrive:
	// peers that place or re-home tokens from views that differ take the
	// same token twice (Observe settles it, but the tokens churn).
	warm := geoWarmups * g.n.cfg.TokenInterval
	if now.Sub(g.started) < max(warm, 3*g.n.cfg.AnnounceInterval) || now.Sub(g.viewSince) < warm {
		return
	}
	// A token never heard of starts on its initial holder.
	if first, err := geometric.InitialHolders(g.seed, ids, min(g.cfg.Tokens, len(ids))); err == nil {
		for num, id := range first {
			if _, seen := g.tokens.seen(num); id == geometric.ID(g.n.self) && !seen {
				g.receive(geometric.Token{Num: num}, now)
				return
			}
		}
	}
	for num := range g.cfg.Tokens {
		if reported[num] {
			g.tokens.found(num)
			continue
		}
		t := g.tokens.info(num)
		if !t.missing {
			t.missFrom(now)
			continue
		}
		// A token report is republished every announce interval and
		// expires after three. One that was reported has been silent that
		// long before it shows here as missing; one never heard of may
		// still be on its way from its first holder for as long.
		//
		// Gossip under load loses messages, and a false re-homing takes
		// the token from its true holder (the higher Seq wins) and starts
		// it hot somewhere else. So before it re-homes a token that was
		// reported, the peer checks that the last reported holder is gone:
		// one still in the membership view, or that answers a ping, is
		// alive and still holds the token, or passed it on and the new
		// holder's report is late; the wait starts again. After
		// maxPostpones such checks the token is re-homed all the same (its
		// holder may have passed it to a peer that crashed).
		// With an election the cluster of a lost holder takes its token
		// over (see election): give it five failure-detection timeouts
		// first, as long as candidate needs (detection, two timeouts of
		// delay for the second in rank, a query round).
		wait := max(3*g.n.cfg.TokenInterval, 5*g.n.electionDetection())
		last, seen := t.next, t.heard
		if !seen {
			wait = 3 * g.n.cfg.AnnounceInterval
		}
		if now.Sub(t.since) < wait || geometric.Rehome(g.seed, num, ids, holding) != geometric.ID(g.n.self) {
			continue
		}
		if rep := t.reporter; seen && rep != "" && rep != g.n.self && t.postponed < maxPostpones {
			if _, alive := g.n.members.Get(rep); alive {
				t.since = now.Add(3*g.n.cfg.AnnounceInterval - wait) // wait one TTL more
				t.postponed++
				continue
			}
			if !t.probing {
				t.probing = true
				g.n.wg.Add(1) // the tick loop holds the group open
				go g.probe(ctx, num, rep)
			}
			continue
		}
		// Above every pass counter heard, or the holder machine (which
		// remembers the last holder) refuses it; and hot again, to find
		// its place.
		g.receive(geometric.Rehomed(num, last), now)
		g.tokens.found(num)
		return
	}
}

// maxPostpones is how many times a re-homing waits again because the last
// reported holder of the token answered a ping.
const maxPostpones = 3

// tokenBook is what the node knows of each token, by token number: the
// bookkeeping with which place decides whether a token is missing and
// whether to re-home it. It is used with g.mu held.
type tokenBook map[int]*tokenInfo

// tokenInfo is what the node knows of one token. The zero value is a
// token never heard of and not missing.
type tokenInfo struct {
	// heard: the token has been reported, or held by this node; next is
	// one above the highest pass counter (Seq) heard of it.
	heard bool
	next  uint64
	// reporter is the holder named in the newest report.
	reporter peer.ID
	// missing: nobody reports the token; since is when that began to
	// count (after this node passed the token on, a time ahead: the
	// recipient's report has one TTL to arrive).
	missing bool
	since   time.Time
	// probing: the last reporter is being pinged (probe).
	probing bool
	// postponed counts the re-homings postponed because the last
	// reporter was alive.
	postponed int
}

// info returns num's entry, made (never heard of, not missing) if there
// is none.
func (b tokenBook) info(num int) *tokenInfo {
	t := b[num]
	if t == nil {
		t = &tokenInfo{}
		b[num] = t
	}
	return t
}

// seen returns one above the highest pass counter heard of num, and
// whether num was heard of at all.
func (b tokenBook) seen(num int) (uint64, bool) {
	if t := b[num]; t != nil && t.heard {
		return t.next, true
	}
	return 0, false
}

// hear notes the pass counter seq of num, reported or held by this node.
func (b tokenBook) hear(num int, seq uint64) {
	t := b.info(num)
	t.next, t.heard = max(t.next, seq+1), true
}

// report notes a report of num at pass counter seq by holder: the newest
// report names the reporter.
func (b tokenBook) report(num int, seq uint64, holder peer.ID) {
	if t := b.info(num); seq+1 >= t.next {
		t.reporter = holder
	}
	b.hear(num, seq)
}

// missFrom counts the token as missing from at.
func (t *tokenInfo) missFrom(at time.Time) { t.missing, t.since = true, at }

// found notes that num is reported (or re-homed here): it is not missing,
// and no re-homing of it is postponed.
func (b tokenBook) found(num int) {
	if t := b[num]; t != nil {
		t.missing, t.since, t.postponed = false, time.Time{}, 0
	}
}

// probe pings rep, the last reported holder of the missing token num, and
// postpones the token's re-homing when rep answers, or lets the next tick
// re-home it when rep does not.
func (g *geo) probe(ctx context.Context, num int, rep peer.ID) {
	defer g.n.wg.Done()
	_, err := g.ping(ctx, rep)
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tokens.info(num)
	t.probing = false
	if err != nil {
		t.postponed = maxPostpones // gone: re-home at the next tick
		g.n.log.Info("geometric: last holder of a missing token is gone", "token", num, "holder", rep, "err", err)
		return
	}
	if t.missing {
		t.since = time.Now()
		t.postponed++
	}
}

func (g *geo) receive(t geometric.Token, now time.Time) {
	if err := g.holder.Receive(t, now); err != nil {
		g.n.log.Debug("geometric: take token", "token", t.Num, "err", err)
		return
	}
	g.n.log.Info("took token", "token", t.Num, "seq", t.Seq)
}

// carryOut executes the holder's decisions.
func (g *geo) carryOut(ctx context.Context, outs []geometric.Output) {
	for _, o := range outs {
		switch o := o.(type) {
		case geometric.Pass:
			ok := g.vet(ctx, peer.ID(o.To)) && g.pass(ctx, peer.ID(o.To), o.Token)
			g.mu.Lock()
			more := g.holder.PassDone(ok)
			if ok {
				// Our own report goes at once, the recipient's may take a
				// while to reach us: the token is not missing, and not ours
				// to re-home, before that report has had one TTL to come.
				g.tokens.info(o.Token.Num).missFrom(time.Now().Add(3 * g.n.cfg.AnnounceInterval))
			}
			g.mu.Unlock()
			if ok {
				g.n.log.Info("passed token", "token", o.Token.Num, "passes", o.Token.Passes(), "gain_ms", o.Gain*1000, "to", peer.ID(o.To))
			}
			g.carryOut(ctx, more)
		case geometric.Release:
			if err := g.feed.SetToken(ctx, &gossip.TokenPos{Token: o.Token, Released: true, Capacity: g.cfg.Capacity,
				Coord: g.coordinate()}); err != nil {
				g.n.log.Warn("geometric: release token", "err", err)
			}
		case geometric.Promote:
			g.n.log.Info("promoted to superpeer", "token", o.Token)
		case geometric.Demote:
			g.n.log.Info("no longer a superpeer", "token", o.Token)
		}
	}
}

// vet reports whether the coordinate p claims (the one the token machine
// decided on) agrees with the RTT measured to p, measuring it now if it
// was not yet: geometric.Plausible with the DefaultTolerance. It is asked before a
// token is passed to p. A peer cannot make its RTT shorter than the
// network makes it, so one that claims to sit near the token's spot, to
// attract it, is found out by the peer that would pass it; a distrusted
// peer is no neighbour (neighbours) until the next snapshot. This is one
// vantage point, the holder's, not the majority of the claimed spot's
// nearest peers that the simulator measured (bench.GeometricAttack).
func (g *geo) vet(ctx context.Context, p peer.ID) bool {
	g.mu.Lock()
	claimed, rtt := g.snapshot[p], g.rtt[p]
	g.mu.Unlock()
	if claimed == nil {
		return true // not in the snapshot: no claim the machine decided on
	}
	if rtt <= 0 {
		var err error
		if rtt, err = g.measure(ctx, p); err != nil {
			return true // the pass itself will fail, or succeed: no evidence
		}
	}
	self := g.coordinate()
	if geometric.Plausible(self, claimed, rtt, geometric.DefaultTolerance()) {
		return true
	}
	g.mu.Lock()
	g.distrusted[p] = g.snapshotEpoch
	g.distrustN++
	g.mu.Unlock()
	g.n.log.Warn("geometric: a peer's coordinate disagrees with the RTT measured to it; no token for it",
		"peer", p, "predicted_ms", geometric.Distance(self, claimed)*1000, "measured_ms", float64(rtt)/float64(time.Millisecond))
	return false
}

func (g *geo) distrustCount() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.distrustN
}

func (g *geo) coordinate() *coordinate.Coordinate {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.client.Coordinate()
}

// pass hands t to p over the token protocol and reports whether p took it.
func (g *geo) pass(ctx context.Context, p peer.ID, t geometric.Token) bool {
	var req [16]byte
	binary.BigEndian.PutUint64(req[:8], uint64(t.Num))
	binary.BigEndian.PutUint64(req[8:], t.Seq)
	resp, err := g.n.request(ctx, p, g.tokenProto, frameToken, req[:], frameAnswer)
	return err == nil && bytes.Equal(resp, respYes)
}

var respYes, respNo = []byte{1}, []byte{0}

func (g *geo) handleToken(s network.Stream) {
	took := false
	g.n.serve(s, "token", frameToken, func(req []byte, from peer.ID) (frameType, []byte, error) {
		if len(req) != 16 {
			return 0, nil, fmt.Errorf("%w: token pass of %d bytes, want 16", errWire, len(req))
		}
		num, seq := binary.BigEndian.Uint64(req[:8]), binary.BigEndian.Uint64(req[8:])
		if num >= uint64(g.cfg.Tokens) {
			return 0, nil, fmt.Errorf("%w: token number %d out of range (%d tokens)", errWire, num, g.cfg.Tokens)
		}
		if g.n.Private() {
			g.n.log.Debug("geometric: refused a token: this node is private", "token", num, "from", from)
			return frameAnswer, respNo, nil
		}
		g.mu.Lock()
		err := g.holder.Receive(geometric.Token{Num: int(num), Seq: seq}, time.Now())
		g.mu.Unlock()
		if err != nil {
			return frameAnswer, respNo, nil
		}
		g.n.log.Info("received token", "token", num, "from", from)
		took = true
		return frameAnswer, respYes, nil
	})
	if took {
		g.publishToken(context.Background())
	}
}

// publishToken reports the token this node holds, or stops reporting one
// it no longer holds.
func (g *geo) publishToken(ctx context.Context) {
	g.mu.Lock()
	pos, ok := g.holder.Position()
	super := g.holder.Superpeer()
	load := len(g.members)
	was := g.holding
	g.holding = ok
	g.mu.Unlock()
	var err error
	switch {
	case ok:
		err = g.feed.SetToken(ctx, &gossip.TokenPos{Token: pos.Token, Coord: pos.Coord, Superpeer: super,
			Load: min(load, g.cfg.Capacity), Capacity: g.cfg.Capacity})
	case was:
		err = g.feed.SetToken(ctx, nil)
	}
	if err != nil && ctx.Err() == nil {
		g.n.log.Warn("geometric: publish token", "err", err)
	}
}

// attach keeps an ordinary peer attached to a superpeer with room, and a
// superpeer's member list fresh.
//
// An ordinary peer stays with its superpeer while no superpeer with room is
// clearly nearer (by a tenth and by the live margin: superpeers are
// promoted one by one, and the first must not keep everyone; and nearness
// is noisy). It renews the attachment once per announce interval, well
// within attachTTL: a request is a stream, and a hundred peers asking every
// tick loaded the host enough to time their own requests out. A superpeer
// that does not answer is kept until attachTTL has passed since its last
// yes, whether or not its token report is in our view: a slow answer or a
// late report is not a lost superpeer.
func (g *geo) attach(ctx context.Context, tokens []gossip.TokenPos, now time.Time) {
	g.mu.Lock()
	super := g.holder.Superpeer()
	expiry := g.attachTTL()
	for p, seen := range g.members {
		if now.Sub(seen) > expiry {
			delete(g.members, p)
		}
	}
	if super {
		g.attached = g.n.self
		g.mu.Unlock()
		return
	}
	for p := range g.members {
		delete(g.members, p) // no longer a superpeer: nobody is attached
	}
	if g.attached == g.n.self {
		g.attached = "" // a superpeer no longer: it must attach like anyone
	}
	self := g.client.Coordinate()
	current, since := g.attached, g.attachOK
	var sps []geometric.Superpeer
	for _, tp := range tokens {
		if tp.Superpeer && tp.Holder != g.n.self {
			sps = append(sps, geometric.Superpeer{ID: geometric.ID(tp.Holder), Coord: tp.Coord, Load: tp.Load, RTT: g.rtt[tp.Holder]})
		}
	}
	g.mu.Unlock()
	// The cluster elected another in place of the current superpeer
	// (see election): go to it as soon as it reports the token.
	if l := g.n.leaderOf(current); current != "" && l != "" && l != current && l != g.n.self &&
		slices.ContainsFunc(sps, func(s geometric.Superpeer) bool { return s.ID == geometric.ID(l) }) {
		if yes, _ := g.requestAttach(ctx, l); yes {
			g.mu.Lock()
			g.attached, g.attachOK = l, now
			g.mu.Unlock()
			return
		}
	}
	if current != "" {
		i := slices.IndexFunc(sps, func(s geometric.Superpeer) bool { return s.ID == geometric.ID(current) })
		stay := true
		if i >= 0 {
			others := slices.Delete(slices.Clone(sps), i, i+1)
			if best, err := geometric.Attach(self, others, g.cfg.Capacity); err == nil {
				j := slices.IndexFunc(others, func(s geometric.Superpeer) bool { return s.ID == best })
				// Measured against measured only: coordinates
				// estimate some RTTs at a tenth of their value, and a
				// move on such an estimate is undone by the next
				// measurement. pickPingTarget measures superpeers first.
				b, c := others[j].RTT, sps[i].RTT
				stay = b <= 0 || c <= 0 || b*11/10+liveMargin >= c
				if !stay {
					g.n.log.Info("geometric: a superpeer is clearly nearer", "current", current, "current_rtt", c,
						"nearer", peer.ID(best), "nearer_rtt", b)
				}
			}
		}
		if stay {
			if i >= 0 && now.Sub(since) < g.n.cfg.AnnounceInterval {
				return
			}
			yes, err := g.requestAttach(ctx, current)
			if yes {
				g.mu.Lock()
				g.attachOK = now
				g.mu.Unlock()
				return
			}
			// With an election the cluster may still elect a successor
			// to take the token over (see election): wait for it as long
			// as place does.
			if err != nil && now.Sub(since) < max(expiry, 5*g.n.electionDetection()) {
				return // no answer yet, not yet a lost superpeer
			}
			g.n.log.Info("geometric: the superpeer let us go", "superpeer", current, "refused", err == nil, "err", err,
				"reported", i >= 0, "last_yes_ago", now.Sub(since))
		}
	}
	for range 3 {
		best, err := geometric.Attach(self, sps, g.cfg.Capacity)
		if err != nil {
			break
		}
		if yes, _ := g.requestAttach(ctx, peer.ID(best)); yes {
			g.mu.Lock()
			g.attached, g.attachOK = peer.ID(best), now
			g.mu.Unlock()
			return
		}
		sps = slices.DeleteFunc(sps, func(s geometric.Superpeer) bool { return s.ID == best })
	}
	if current != "" && now.Sub(since) < expiry && slices.ContainsFunc(sps, func(s geometric.Superpeer) bool { return s.ID == geometric.ID(current) }) {
		return // none better would take us: keep the current one
	}
	g.mu.Lock()
	g.attached = ""
	g.mu.Unlock()
}

// requestAttach asks p to take us: yes, or no (err nil: p answered no), or
// no answer (err). On yes it keeps the cluster p sent.
func (g *geo) requestAttach(ctx context.Context, p peer.ID) (bool, error) {
	resp, err := g.n.request(ctx, p, g.attachProto, frameAttach, nil, frameAnswer)
	if err != nil || len(resp) == 0 || resp[0] != respYes[0] {
		return false, err
	}
	cluster, err := decodeAll(resp[1:], readIDs)
	if err == nil && (len(cluster) == 0 || cluster[0] != p) {
		err = fmt.Errorf("%w: attach: the cluster list does not start with its superpeer", errWire)
	}
	if err != nil {
		g.n.guard.refuse(g.n, protoName(g.attachProto), p, err)
		return false, err
	}
	g.mu.Lock()
	g.mates, g.matesOf = cluster, p
	g.mu.Unlock()
	return true, nil
}

// readIDs reads a uvarint count of peer IDs, each a uvarint length and the
// ID's bytes, within the election wire's limits.
func readIDs(r *bufio.Reader) ([]peer.ID, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n > pb.MaxIDs {
		return nil, fmt.Errorf("count %d: %v", n, err)
	}
	ids := make([]peer.ID, 0, n)
	for range n {
		l, err := binary.ReadUvarint(r)
		if err != nil || l == 0 || l > pb.MaxIDLen {
			return nil, fmt.Errorf("ID length %d: %v", l, err)
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		id, err := peer.IDFromBytes(b)
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
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	return b
}

func (g *geo) handleAttach(s network.Stream) {
	g.n.serve(s, "attach", frameAttach, func(req []byte, from peer.ID) (frameType, []byte, error) {
		if len(req) != 0 {
			return 0, nil, fmt.Errorf("%w: attach request of %d bytes, want none", errWire, len(req))
		}
		g.mu.Lock()
		_, member := g.members[from]
		ok := g.holder.Superpeer() && (member || len(g.members) < g.cfg.Capacity)
		if ok {
			g.members[from] = time.Now()
		}
		cluster := g.clusterLocked()
		g.mu.Unlock()
		if !ok {
			return frameAnswer, respNo, nil
		}
		if !member {
			g.update() // list a new member before it hears yes
		}
		return frameAnswer, appendIDs(slices.Clone(respYes), cluster), nil
	})
}

// clusterLocked lists a superpeer's cluster: itself first, then its
// members by ID. Called with g.mu held.
func (g *geo) clusterLocked() []peer.ID {
	ids := make([]peer.ID, 0, len(g.members)+1)
	for p := range g.members {
		ids = append(ids, p)
	}
	slices.Sort(ids)
	return append([]peer.ID{g.n.self}, ids...)
}

// update sets the node's state from the machines and reports changes.
func (g *geo) update() {
	g.mu.Lock()
	token, held := g.holder.Holding()
	super := g.holder.Superpeer()
	sp := g.attached
	members := []peer.ID{g.n.self}
	if super {
		members = g.clusterLocked()
	} else if sp != "" {
		members = append(members, sp)
	}
	coord := g.client.Coordinate()
	g.mu.Unlock()
	slices.Sort(members)
	next := State{Self: g.n.self, S: g.cfg.Tokens, Members: members, Role: RoleOrdinary, Coord: coord, Token: -1}
	if held {
		next.Token = token.Num
	}
	if super {
		next.Role = RoleSuperpeer
	}
	if sp != "" {
		next.Superpeer = g.n.addrInfo(sp)
		id := sp.String()
		next.Prefix = "sp-" + id[max(0, len(id)-8):]
	}
	g.n.commit(next)
	// The membership topic is how peers learn of each other (the initial
	// holders and re-homing are computed over it); k is 0 here.
	if err := g.n.members.SetLocal(context.Background(), gossip.Announcement{
		ID: g.n.self, Addrs: g.n.addrs(), Superpeer: super, ClusterKey: g.n.selfKey.Cluster(0), Private: g.n.Private(),
	}); err != nil && !g.n.closed.Load() {
		g.n.log.Warn("announce", "err", err)
	}
	g.election()
}

// Elections with the geometric strategy (Config.Election). A cluster is a
// token holder and the peers attached to it; members learn the cluster
// from the superpeer's answer to their attach requests. Its election key
// is TokenKey of the token's number, and its rank puts the holder first,
// then XOR closeness to the key: while the holder lives, the election
// names it (its heartbeats are the members' failure detector). How the two
// mechanisms hand over to each other:
//
//   - The token dynamics place the superpeers; the election follows: a
//     holder that passes its token leaves the cluster, and the members
//     attach elsewhere and rebuild their machines for the new cluster.
//   - When the holder dies (its heartbeats stop, or its connection drops),
//     the members elect the next by rank, and the winner takes over the
//     token (geometric.Holder.Takeover: above every pass counter heard, and
//     promoted at once), as long as nobody else reports the token and the
//     old holder is not connected. The members then attach to it, since the
//     election names it. The token dynamics may move it on from there.
//   - A token that no cluster takes over (its holder had no members) is
//     re-homed as before, after three token intervals or five
//     failure-detection timeouts, whichever is longer (see place).
func (g *geo) election() {
	if g.n.cfg.Election == "" {
		return
	}
	tokens := g.feed.Tokens()
	g.mu.Lock()
	tok, held := g.holder.Holding()
	var holder peer.ID
	var members []peer.ID
	switch {
	case held:
		holder, g.clusterToken, members = g.n.self, tok.Num, g.clusterLocked()
	case g.attached != "" && g.matesOf == g.attached:
		holder, members = g.attached, slices.Clone(g.mates)
		for _, tp := range tokens {
			if tp.Holder == holder {
				g.clusterToken = tp.Token.Num
			}
		}
		if !slices.Contains(members, g.n.self) {
			members = append(members, g.n.self)
		}
	default:
		g.mu.Unlock()
		return
	}
	num := g.clusterToken
	seen, _ := g.tokens.seen(num)
	g.mu.Unlock()
	if num < 0 {
		return // our superpeer's token is not known yet
	}
	slices.Sort(members)
	var leader peer.ID
	in := node.GeoCluster{Key: TokenKey(g.n.cfg.Network, num), Members: members, Holder: holder}
	if !g.n.do(g.ctx, func(m *node.Machine) { m.Step(time.Now(), in); leader = m.GeoSuperpeer() }) || leader == "" {
		return
	}
	if leader != g.n.self || held || holder == g.n.self || g.n.host.Network().Connectedness(holder) == network.Connected {
		return
	}
	for _, tp := range tokens {
		if tp.Token.Num == num && tp.Holder != holder {
			return // the token has moved on: no takeover
		}
	}
	g.mu.Lock()
	outs, err := g.holder.Takeover(geometric.Rehomed(num, seen), time.Now())
	if err == nil {
		g.attached, g.attachOK = g.n.self, time.Now()
	}
	g.mu.Unlock()
	if err != nil {
		g.n.log.Debug("geometric: take over the token of the lost superpeer", "token", num, "err", err)
		return
	}
	g.n.log.Info("geometric: elected to take over the token of the lost superpeer", "token", num, "lost", holder)
	g.carryOut(g.ctx, outs)
	g.publishToken(g.ctx)
	g.update()
}

// TokenKey is the election key of the geometric cluster of token num in
// the named network: the election ranks the members other than the holder
// by XOR closeness to it.
func TokenKey(network string, num int) dhtselect.Key {
	return sha256.Sum256([]byte(fmt.Sprintf("/superpeer/%s/token/%d", network, num)))
}

// leave hands the token on (or releases it) when the node closes.
func (g *geo) leave(ctx context.Context) {
	g.mu.Lock()
	outs := g.holder.Leave()
	g.mu.Unlock()
	g.carryOut(ctx, outs)
}

func (g *geo) close() error {
	g.n.host.RemoveStreamHandler(g.tokenProto)
	g.n.host.RemoveStreamHandler(g.attachProto)
	return g.feed.Close()
}
