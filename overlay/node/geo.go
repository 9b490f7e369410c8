package node

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// The geometric strategy (Config.Geometric). The machine drives the pure
// machines of package geometric:
//
//   - Coordinates: every PingInterval (a fifth of it for the first
//     fastSamples) it asks for a ping of one random peer of a bounded set
//     (pingTargets: its cluster, its superpeer, the token holders and a
//     few peers it is connected to), a superpeer whose RTT it has not
//     measured first (pickPingTarget). A ping's answer carries the
//     answerer's coordinate (PingDone.Coord), as Serf's do: the answer is
//     folded into the RTT kept for the peer (filterRTT) and, with that
//     coordinate once vetted (pingCoord), into the Vivaldi client, so every
//     peer the node pings is a sample without any gossip.
//   - Tokens: every TokenInterval, jittered by up to a quarter (so that
//     holders rarely move at the same instant on stale positions), or at
//     once when the election named another leader, a token round gives the
//     Holder a snapshot of the coordinates and the token positions heard by
//     gossip (GeoFeed), places missing tokens (place), and ticks it. A Pass
//     is vetted (vet: the recipient's claimed coordinate against the RTT
//     measured to it) and carried out by the driver (GeoReady.Passes,
//     answered by PassDone); the round waits for it. The token this node
//     holds is for the driver to publish (GeoReady.Tokens).
//   - Attachment: every TokenInterval (jittered likewise) an attachment
//     round keeps an ordinary peer attached to a superpeer with room
//     (attach): the driver asks the superpeers the machine names
//     (GeoReady.Attach) and answers with AttachDone. A superpeer answers
//     the requests of others (AttachAsked, then GeoAnswer) and expires the
//     members it has not heard from for attachTTL.
//   - Elections (Config.Election): the machine runs the election of its
//     cluster (the holder and the peers attached to it), and takes the
//     token over when the cluster elects it in place of a lost holder
//     (election).
//
// After each round, and when a peer attaches for the first time, the
// node's geometric state (GeoReady.State) and its announcement
// (Ready.Announce) are set.
//
// The randomness (ping targets, jitter, the random neighbours) comes from a
// source seeded by the network name and the peer ID; the initial holders
// and re-homing from the network name alone, so that all nodes agree.

// GeoConfig configures the geometric strategy (Config.Geometric).
type GeoConfig struct {
	// Network is the overlay's network name: it seeds the random sources.
	Network string
	// Tokens is the token machines' configuration; its Tokens is S.
	// Zero fields take geometric's defaults.
	Tokens geometric.Config
	// Coords configures the Vivaldi client; zero takes
	// geometric.DefaultCoordConfig.
	Coords geometric.CoordConfig
	// PingInterval is the period of the RTT samples, TokenInterval that of
	// the token and attachment rounds.
	PingInterval, TokenInterval time.Duration
	// Vantage is how many vantage points must find a peer's claimed
	// coordinate implausible, and be the majority of those that checked
	// it, before the node distrusts it (geovet.go): the node itself and
	// the peers nearest the claimed coordinate, asked for the RTT they
	// measure to it. Zero means DefaultVantage; 1 is the node's own check
	// alone (the rule before issue 19's finding 10).
	Vantage int
	// SwapCandidates is how many candidates a superpeer names per round
	// of the search on measured RTTs (geoswap.go), at most
	// DefaultSwapCandidates. Zero means DefaultSwapCandidates; negative,
	// no search: the placement of the coordinates alone.
	SwapCandidates int
	// Relocate turns on the relocation between clusters
	// (georelocate.go): superpeers publish summaries of their clusters
	// and move tokens by them. Off by default: a superpeer's summary is a
	// claim that no receiver can check, and liar superpeers draw the
	// other superpeers' tokens to their fellow liars with it. For swarms
	// whose superpeers trust one another (one operator's nodes).
	Relocate bool
}

// DefaultVantage is the default GeoConfig.Vantage.
const DefaultVantage = 3

// geoWarmups is how many token intervals a node waits, when it hears of no
// token, before it places the tokens itself: time for the membership view
// to fill so that the peers agree on the initial holders, and for the
// coordinates to take shape (the first fastSamples pings go out five times
// as often).
//
// The coordinates bound how soon the tokens settle: the node simulator's
// median relative error was 0.30 at 20 s, 0.20 at 40 s and 0.13 at 60 s
// with 30 fast samples, and the tokens moved as it fell. With 150 (the
// first 30 s at five a second) and geoPingRandom 24, not 8, the
// placement settled 5 to 13 s sooner on the mean, no worse (TestGeoSimSweep,
// 16 seeds on each of the PlanetLab hosts 0-99, 100-199, 250-349 and
// 390-489, with the search's warm-up counted from the token's taking:
// 70.2/72.9/66.9/64.2 s → 63.4/60.0/59.2/59.6 s, at 0.651/0.572/0.691/0.655
// → 0.650/0.563/0.693/0.639 of random placement's mean RTT). Live in
// virtual time (100 PlanetLab hosts, six draws each) it settled at 62.0 s
// on the mean instead of 93.0 s, but placed worse: 0.700 of random
// instead of 0.640, one draw above 0.75. The loss is the earlier search's
// (swapWarm): with it alone, four draws placed at 0.685 (BENCHMARKS.md).
// The cost of the samples: five pings a second for the first 30 s of a
// node, one a second after.
const (
	geoWarmups  = 10
	fastSamples = 150
)

// LiveMargin is the default Margin of the live token dynamics, larger than
// the simulator's: live coordinates keep moving with every sample (by a few
// milliseconds), and a token should not chase that noise. A token's energy
// is of the order of the mean RTT in its cluster (tens of milliseconds), so
// 5 ms asks for a gain of some ten per cent. Attachment asks as much of a
// superpeer nearer than the current one. Like every length of the token
// dynamics, it is stated for a network of PlanetLab's scale and applies
// at the node's own (setScale): 20 µs where the node keeps RTTs of half a
// millisecond.
const LiveMargin = 5 * time.Millisecond

// SnapshotTicks is how many token intervals the token machine keeps one
// snapshot of the coordinates.
const SnapshotTicks = 10

// maxPostpones is how many times a re-homing waits again because the last
// reported holder of the token answered a ping.
const maxPostpones = 3

// geoPingRandom is how many peers the node is connected to, drawn at
// random, it samples its coordinate against besides its cluster and the
// token holders: the far samples Vivaldi needs for the picture's large
// scale, which a cluster's members, near each other, do not give. With 8,
// the fast samples at start (fastSamples) went to few peers, and the
// coordinates converged no sooner for them. A node keeps an RTT per
// target: a bounded set, whatever the swarm's size.
const geoPingRandom = 24

// geoNearest and geoRandom are the neighbours a token may be passed to: the
// nearest by coordinate, and others drawn once.
const (
	geoNearest = 8
	geoRandom  = 8
)

// TokenKey is the election key of the geometric cluster of token num in
// the named network: the election ranks the members other than the holder
// by XOR closeness to it.
func TokenKey(network string, num int) dhtselect.Key {
	return sha256.Sum256([]byte(fmt.Sprintf("/superpeer/%s/token/%d", network, num)))
}

// GeoFeed is what gossip says now: every live token report heard on the
// token topics the node hears (GeoReady.Topics; geobackbone.go), as
// gossip.Geo.Reports gives them (all the claims on each token; the machine
// decides which to believe, see geotokens.go), and the peers the host is
// connected to. The driver gives it before a geometric decision (GeoDue) and before
// AttachAsked; the machine keeps the slices without a copy: the driver
// must not change them afterwards. Coordinates are not gossiped: the
// machine learns them from its cluster (coords.go).
type GeoFeed struct {
	Tokens    []TokenPos
	Connected []peer.ID
}

// TokenPos is a token position heard by gossip: Holder holds Token at
// Coord, is a superpeer or not, and serves Load ordinary peers. Giver is
// the peer whose signed link (gossip.TokenLink, checked by the driver)
// names Holder as the recipient of the pass that gave it Token; "" for a
// placement (Token.Passes() == 0), which no pass gave.
type TokenPos struct {
	Holder    peer.ID
	Token     geometric.Token
	Coord     *coordinate.Coordinate
	Superpeer bool
	Load      int
	Giver     peer.ID
	// Summary is the holder's summary of its cluster, for relocation
	// (georelocate.go), nil if none; its Superpeer is not read.
	Summary *geometric.ClusterSummary
}

// PingDone answers a ping the machine asked for (GeoReady.Pings): the RTT
// measured to Peer (the least of a few pings), or the error. Coord is the
// coordinate Peer's answer carried (nil: none), a stranger's claim the
// machine checks (pingCoord) before it fits its own to it.
type PingDone struct {
	Peer  peer.ID
	RTT   time.Duration
	Err   error
	Coord *coordinate.Coordinate
}

// TokenOffered: From passes Token to this node over the token protocol,
// with Link, its signature of the pass (gossip.TokenLink's stream
// encoding), which the driver checked: From signed it. The machine keeps
// the link while it holds the token and publishes it with its reports
// (TokenReport.Link). The answer is GeoAnswer's, read right after the
// Step.
type TokenOffered struct {
	From  peer.ID
	Token geometric.Token
	Link  []byte
}

// PassDone answers a TokenPass: whether To took Token.
type PassDone struct {
	To    peer.ID
	Token geometric.Token
	OK    bool
}

// AttachAsked: From asks to attach to this node. The answer is
// GeoAnswer's, read right after the Step. RTTs, when set, is From's report
// for the search on measured RTTs (geoswap.go): the RTT it measures to
// this node, then to each candidate this node named. Coord is From's
// coordinate (GeoReady.AttachCoord), nil if it sent none. Second, with a
// report, is From's next superpeer and its RTT to it (GeoReady.AttachSecond;
// zero: none); a claim like the RTTs, which geometric.Swap bounds. Private and
// Flapping are what From says of itself (GeoReady.AttachPrivate,
// AttachFlapping): a claim that can only make it less eligible (it ranks
// last in the cluster's election and is handed no token), so it is taken
// as it comes. Leaving says that From attached to another superpeer
// (GeoReady.Detach): it no longer counts in this node's load, so its place
// is free at once, and the answer is no. It stays in the roster (and the
// cluster's election) until its attachment expires, as before: a change
// of roster rebuilds the election, and a member that could leave and come
// back at will would have its superpeer campaign at every change.
type AttachAsked struct {
	From     peer.ID
	RTTs     []time.Duration
	Second   PeerRTT
	Coord    *coordinate.Coordinate
	Private  bool
	Flapping bool
	Leaving  bool
	// Near is the digest of the nearest superpeers the member holds from
	// this superpeer (NearDigest; 0: none): when the superpeer's nearest
	// have it, its yes leaves them out (GeoAnswer.NearbyHeld).
	Near uint64
}

// AttachDone answers an attach request (GeoReady.Attach): To accepted (OK,
// with its cluster Mates, itself first, the Candidates of its search on
// measured RTTs, for this node to measure: geoswap.go, and the Coords of
// some of its members: coords.go, and the Demoted among Mates: those that
// said they are private or flapping, GeoAnswer.Demoted), refused (not OK,
// Err nil), or did not answer (Err).
type AttachDone struct {
	To         peer.ID
	OK         bool
	Mates      []peer.ID
	Candidates []peer.ID
	Coords     []PeerCoord
	Demoted    []peer.ID
	// Nearby and Rehome are what the superpeer relays from the backbone
	// (geobackbone.go): its own token position first, then the nearest
	// superpeers with room, and the missing token it names this node to
	// take, if any. NearbyHeld and Rotated are GeoAnswer's.
	Nearby     []TokenPos
	NearbyHeld bool
	Rotated    []TokenPos
	Rehome     *RehomeOrder
	// Size is the superpeer's estimate of the network's size
	// (GeoAnswer.Size).
	Size int
	Err  error
}

// Done is the AttachDone of a's answer to an attach request to p: the
// drivers give the requester's machine what the superpeer's said.
func (a GeoAnswer) Done(p peer.ID) AttachDone {
	return AttachDone{To: p, OK: a.Yes, Mates: a.Cluster, Candidates: a.Candidates, Coords: a.Coords, Demoted: a.Demoted,
		Nearby: a.Nearby, NearbyHeld: a.NearbyHeld, Rotated: a.Rotated, Rehome: a.Rehome, Size: a.Size}
}

// RehomeOrder names a member to take a missing token (AttachDone.Rehome,
// GeoAnswer.Rehome): the token's sponsor, a superpeer that hears every
// token report, found Token missing (geobackbone.go). Token is the
// placement to take (geometric.Rehomed: above every pass counter the
// sponsor heard); Replaced is the holder the sponsor last heard report
// it, "" if none; Survey says that the sponsor's survey named this member
// (geosurvey.go): the token is pinned.
type RehomeOrder struct {
	Token    geometric.Token
	Replaced peer.ID
	Survey   bool
}

// GeoTopics says which token reports a node hears (GeoReady.Topics):
// All, the backbone's (every holder's report; a holder publishes there
// always); Cluster, the reports on the topic of the cluster whose
// superpeer holds token Cluster (-1: none), where that superpeer and the
// holders attached to it publish too. The driver subscribes to those
// topics and no other, and gives the machine, in each GeoFeed, the
// reports it hears on them. It publishes a Ready's reports on the topics
// it was on before that Ready's Topics, then joins and leaves topics, and
// sets the node's current report on a topic it joins at once (a holder
// promoted says so on its old cluster's topic, and its new topics have its
// report).
type GeoTopics struct {
	All     bool
	Cluster int
}

// PeerRTT is a peer and the RTT measured to it: a member's next
// superpeer in its report (AttachAsked.Second, GeoReady.AttachSecond).
type PeerRTT struct {
	Peer peer.ID
	RTT  time.Duration
}

// PeerCoord is a peer's coordinate, as a superpeer passes its members'
// on to them (AttachDone.Coords, GeoAnswer.Coords).
type PeerCoord struct {
	ID    peer.ID
	Coord *coordinate.Coordinate
}

// GeoLeave: the node is leaving; the holder hands its token on (a
// TokenPass) or releases it.
type GeoLeave struct{}

// VouchAsked: From asks for the RTT this node measures to Of (a vantage
// point of From's liar check). The answer is GeoAnswer.RTT, read right
// after the Step: the RTT the machine keeps for Of, or zero when it has
// none. With none, GeoAnswer.Measure says whether the driver measures one
// (a ping, the least of three) for the answer; otherwise the answer is
// zero, none (geovet.go's vouchAsked: only for a holder the machine
// believes, within a budget).
type VouchAsked struct{ From, Of peer.ID }

// VouchDone answers a VouchRequest: the RTT From measures to Of, or the
// error (no answer).
type VouchDone struct {
	From, Of peer.ID
	RTT      time.Duration
	Err      error
}

func (GeoFeed) input()      {}
func (PingDone) input()     {}
func (TokenOffered) input() {}
func (PassDone) input()     {}
func (AttachAsked) input()  {}
func (AttachDone) input()   {}
func (GeoLeave) input()     {}
func (VouchAsked) input()   {}
func (VouchDone) input()    {}

// GeoReady is the geometric strategy's part of Ready.
type GeoReady struct {
	// Pings are peers to ping; each answers with PingDone.
	Pings []peer.ID
	// Passes are token passes to make; each answers with PassDone.
	Passes []TokenPass
	// Attach are peers to ask to attach to; each answers with AttachDone.
	// AttachRTTs holds the report to send with the request to a peer, if
	// any (AttachAsked.RTTs), and AttachSecond goes with it: the node's
	// next superpeer and its RTT (AttachAsked.Second; zero: none);
	// AttachCoord is the node's coordinate, to send with each request
	// (AttachAsked.Coord).
	//
	// AttachPrivate and AttachFlapping are what the node says of itself
	// with each request (AttachAsked.Private, Flapping): that it is
	// private, and that it flaps.
	// AttachNear holds the digest of the nearest superpeers the node
	// holds from a peer it asks, if any (AttachAsked.Near).
	Attach         []peer.ID
	AttachRTTs     map[peer.ID][]time.Duration
	AttachNear     map[peer.ID]uint64
	AttachSecond   PeerRTT
	AttachCoord    *coordinate.Coordinate
	AttachPrivate  bool
	AttachFlapping bool
	// Detach are superpeers this node left for another: the driver tells
	// each (an attach request with AttachAsked.Leaving, and AttachCoord),
	// and nothing answers. Without it the superpeer counted the member in
	// its load until the attachment expired (three announce intervals),
	// and members nearer it that it had no room for waited as long.
	Detach []peer.ID
	// Vouch are peers to ask for the RTT they measure to a peer (the
	// vantage points of the liar check); each answers with VouchDone.
	Vouch []VouchRequest
	// Tokens are the token reports to publish, in order.
	Tokens []TokenReport
	// State, when not nil, is the node's geometric state.
	State *GeoState
	// Topics, when not nil, are the token topics the node hears from now
	// on (the first Ready sets them).
	Topics *GeoTopics
}

// VouchRequest asks the driver to ask To for the RTT it measures to Of.
type VouchRequest struct{ To, Of peer.ID }

// TokenPass asks the driver to hand Token to To.
type TokenPass struct {
	To    peer.ID
	Token geometric.Token
}

// TokenReport is what the node publishes on its token topics: None, that
// it holds no token any longer (gossip.Geo.SetToken(nil)); else the token
// it holds (or Released, once) at Coord.
//
// Giver and Link are the pass that gave the token (TokenOffered's From
// and Link), for a token received from a peer; none for a placement.
type TokenReport struct {
	None      bool
	Token     geometric.Token
	Coord     *coordinate.Coordinate
	Superpeer bool
	Load      int
	Capacity  int
	Released  bool
	Giver     peer.ID
	Link      []byte
	// Summary is a superpeer's summary of its cluster (georelocate.go),
	// nil if it has none yet.
	Summary *geometric.ClusterSummary
}

// GeoState is the node's state with the geometric strategy.
type GeoState struct {
	Role      Role
	S         int
	Superpeer peer.ID // "" when not attached
	// Prefix names the cluster: "sp-" and the end of the superpeer's ID.
	Prefix string
	// Members are this node and its superpeer, or a superpeer's cluster,
	// sorted by ID.
	Members []peer.ID
	Coord   *coordinate.Coordinate
	Token   int // -1 when none
	// Size is the node's estimate of the network's size (geosize.go).
	Size dhtselect.Estimate
	// Keep are the peers the node pings (pingTargets as drawn so far), sorted:
	// the driver keeps its connections to them over others when it has
	// too many (the connection manager's tags, above kad-dht's of its
	// routing-table peers). A connection trimmed from under a target is
	// dialled again at its next ping. It guards only against the node's
	// own trims: at 512 in-process nodes the re-dials that cost an
	// ordinary peer about 100 B/s of kad-dht's checks were the
	// superpeers' trims of the many members pinging them, which the
	// routing table's rule stopped (overlay/table.go); the tags alone
	// took that share from 96 to 83 B/s (one run each).
	Keep []peer.ID
}

// GeoAnswer is the answer to the last TokenOffered or AttachAsked: Yes, and
// for an attach request the cluster (this node first, then its members).
// Forged, when set, says why a token pass was refused as a forgery (the
// sender cannot have held the token: see offered): the driver strikes the
// sender.
//
// RTT is the answer to VouchAsked, and Measure, when RTT is zero, that
// the driver measures one for the answer (else it answers none).
// Candidates, with a yes to an attach
// request, are the peers the superpeer asks its members to measure
// (geoswap.go), Coords the coordinates of some of its members
// (coords.go), and Demoted the peers of Cluster, sorted, that said they
// are private or flapping (their last requests' AttachAsked.Private and
// Flapping; the superpeer itself when it is either): every member ranks
// them last and hands them no token (demotes).
type GeoAnswer struct {
	Yes        bool
	Cluster    []peer.ID
	Candidates []peer.ID
	Coords     []PeerCoord
	Demoted    []peer.ID
	// Nearby is the superpeer's own position, then its nearest others
	// with room, and Rotated the others it relays in turn
	// (geobackbone.go); with NearbyHeld, Nearby holds its own position
	// alone: its nearest are those the member's request named by their
	// digest (AttachAsked.Near).
	Nearby     []TokenPos
	NearbyHeld bool
	Rotated    []TokenPos
	Rehome     *RehomeOrder
	// Size is the superpeer's estimate of the network's size, with a yes
	// to an attach request (geosize.go).
	Size    int
	Forged  error
	RTT     time.Duration
	Measure bool
}

type geoMachine struct {
	m      *Machine
	cfg    GeoConfig
	tc     geometric.Config // filled
	seed   uint64           // the network's
	rng    *rand.Rand       // the node's own
	client *geometric.Client
	holder *geometric.Holder

	begun                          bool
	started                        time.Time
	nextPing, nextRound, nextAttch time.Time
	samples                        int
	kicked                         bool // a round at once (the election named another leader)
	// recheck is when a takeover awaited may be decided (election's
	// await): the machine runs the election's rules again then, not at
	// its next token round; awaitSince is when a member began to wait
	// for the claim of the leader its cluster elected.
	recheck, awaitSince time.Time

	feed      GeoFeed
	connected map[peer.ID]bool
	// The coordinates the node knows (coords.go): its members' (a
	// superpeer's, from their attach requests) and some of its mates'
	// (from its superpeer's answers), besides the token holders' in the
	// feed; and where the next answer's share of them starts.
	memberCoord map[peer.ID]*coordinate.Coordinate
	mateCoord   map[peer.ID]heardCoord
	shareAt     int

	rtt      map[peer.ID]time.Duration // last measured, filtered
	scale    float64                   // the network's scale (setScale); 0 before the first
	members  map[peer.ID]time.Time     // a superpeer's attached peers, last request
	attached peer.ID                   // an ordinary peer's superpeer
	attachOK time.Time                 // when it last accepted our request
	mates    []peer.ID                 // the cluster matesOf sent with its last yes, itself first
	matesOf  peer.ID
	// The peers of the cluster that said they are private or flapping
	// (demotes): a superpeer's members, by their last requests; an
	// ordinary peer's mates, as matesOf's last yes named them.
	memberDemoted map[peer.ID]bool
	mateDemoted   map[peer.ID]bool
	// memberLeft are the members that said they left for another
	// superpeer (AttachAsked.Leaving): in the roster (and the election)
	// until they expire, but served no longer: not in the load (load),
	// and neither candidates, reporters nor named holders of the search
	// and the survey.
	memberLeft map[peer.ID]bool
	// clusterToken is the token number of our cluster's holder, as last
	// reported (it outlives the holder, for the election's takeover), and
	// clusterOf that holder.
	clusterToken int
	clusterOf    peer.ID
	tokens       tokenBook
	// The coordinates the token machine decides on: a snapshot refreshed
	// every SnapshotTicks token intervals, so that tokens settle between
	// refreshes instead of chasing every sample's noise; and the random
	// half of the neighbours, drawn once.
	snapshot      map[peer.ID]*coordinate.Coordinate
	snapshotEpoch int64
	longNeighbors []peer.ID
	holding       bool // we published a token position last time
	// barred: peers that are no neighbours, so no token goes to them,
	// until the next snapshot, with the snapshot epoch when they were
	// barred: those whose claimed coordinate disagreed with the RTT
	// measured to them (vet), and those a pass of ours to failed (they
	// said no, or did not answer). A peer that holds another token
	// refuses one (geometric.Holder.Receive), and while duplicate claims
	// of its token were settled this node may not have believed it a
	// holder: live, a holder offered its token to such a peer at every
	// token round until the next snapshot, and made none of the passes
	// the forces asked for.
	barred    map[peer.ID]int64
	distrustN uint64
	vetN      uint64 // claims checked (the denominator of distrustN)
	overruled uint64 // checks in which this node's own found the claim implausible and the others did not
	// The measurements this node made for other holders' liar checks
	// (geovet.go's vouchAsked): when it last measured each peer for
	// one, and for each holder that asked; the measurements granted and
	// the requests answered with none (no RTT kept, no measurement).
	vouchOf, vouchBy       map[peer.ID]time.Time
	vouchMeasured, vouchNo uint64

	// The token claims (geotokens.go): every live report of the feed, the
	// holder of each token this node believes, the pass that gave this
	// node the token it holds, and the placement (re-homing or takeover)
	// by which it took one, if it did.
	claims []TokenPos
	known  map[int]TokenPos
	// superseded: per token, the holder a placement replaced in this
	// node's belief (geotokens.go).
	superseded map[int]superseded
	link       []byte
	giver      peer.ID
	placed     *placement
	yield      peer.ID // give the token up to it: a duplicate placement the rule names, or the holder a placement replaced, alive
	ignored    uint64  // claims not believed (unprovable), counted once each
	ignSeen    map[claimKey]bool
	forged     uint64 // token passes refused as forgeries
	// badCoords counts the ping answers whose coordinate failed the
	// check (pingCoord).
	badCoords uint64

	// The search on measured RTTs (geoswap.go): a superpeer's, and a
	// member's candidates to report on (named by swapOf), whether it sent
	// its report, when it last sent one in a request of its own (early),
	// and the hand-overs made.
	search *swapSearch
	// The survey of a new network (geosurvey.go): the first superpeer's
	// (surveyed, and the holders it named by token number, and when).
	surveyed    bool
	placement   []peer.ID
	placementAt time.Time
	// surveyPlaced is the token the survey placed here, if surveyHeld (token 0 at the
	// first superpeer, or a token its placement named this node for):
	// while this node holds it, its search needs a larger gain
	// (surveyMargin, geosurvey.go).
	surveyPlaced geometric.Token
	surveyHeld   bool
	swapOf       peer.ID
	swapAsk      []peer.ID
	swapSent     bool
	early        time.Time
	swaps        uint64
	// summary is the superpeer's last summary of its cluster, published
	// with its token (georelocate.go); relocations counts the hand-overs
	// to other clusters' members.
	summary     *geometric.ClusterSummary
	relocations uint64

	// movedTo is the mate of its cluster that took over the token of
	// the lost holder movedFrom, as its claim says, when this node's own
	// election no longer named that holder (election): the next
	// attachment round asks it (geoattach.go's movedHolder).
	movedTo, movedFrom peer.ID

	// lostProbe is the lost holder whose connection the takeover last
	// probed (election), when, and whether the ping failed.
	lostProbe   peer.ID
	lostProbeAt time.Time
	lostSilent  bool
	// abandoned is the lost superpeer this node left at abandonedAt
	// (abandon).
	abandoned   peer.ID
	abandonedAt time.Time

	// The backbone (geobackbone.go): the token topics the node hears,
	// since when it hears every holder's report (zero: it does not), what
	// its superpeer nearOf relayed last, and a sponsor's orders to take
	// missing tokens, by token number.
	heard     GeoTopics
	topicsSet bool
	allSince  time.Time
	near      []TokenPos
	nearOf    peer.ID
	spToken   int // the token of nearOf, as its last yes gave it; -1 none
	// nearKept are the nearest superpeers nearOf last sent in full, at
	// nearKeptAt (relayed).
	nearKept   []TokenPos
	nearKeptAt time.Time
	// sizeN is the network's size in the last yes of sizeOf (geosize.go).
	sizeOf peer.ID
	sizeN  int
	orders map[int]rehomeOrder

	pings    map[peer.ID]*pendingPing
	sampling bool // a sample ping is in flight
	// pingRandom are the peers the node is connected to, drawn at random
	// (geoPingRandom of them), that it samples besides its cluster and
	// the holders (pingTargets); one that is no longer connected, or
	// whose ping fails, is drawn again.
	pingRandom []peer.ID
	pass       *pendingOut // a Pass being vetted or made; the round waits
	round      *attachRound
	answer     GeoAnswer

	out GeoReady
}

// pendingPing is what a ping in flight is for.
type pendingPing struct {
	sample  bool                   // fit the coordinate (remote is the peer's)
	remote  *coordinate.Coordinate // at the time of the pick
	vet     bool                   // the pass in flight waits for it
	probes  []int                  // missing tokens whose last holder it is
	lost    bool                   // the holder the election replaced, still connected (election)
	measure bool                   // keep the RTT: a candidate of the search (geoswap.go)
}

// pendingOut is a holder's Pass being carried out, the outputs after it,
// and what to do when they are done.
type pendingOut struct {
	p       geometric.Pass
	vetting bool // waiting for the ping of vet, or for the vantage points' answers
	rest    []geometric.Output
	then    func(now time.Time)
	// The liar check from several vantage points (geovet.go): the
	// checks so far, this node's first, and the peers asked.
	checks  []geometric.Check
	waiting map[peer.ID]bool
}

func newGeo(m *Machine, cfg Config) (*geoMachine, error) {
	gc := cfg.Geo
	if gc.PingInterval <= 0 || gc.TokenInterval <= 0 {
		return nil, fmt.Errorf("node: geometric: ping interval %v and token interval %v, want both > 0", gc.PingInterval, gc.TokenInterval)
	}
	if gc.Vantage < 0 {
		return nil, fmt.Errorf("node: geometric: vantage %d, want >= 1 (0: %d)", gc.Vantage, DefaultVantage)
	}
	if gc.Vantage == 0 {
		gc.Vantage = DefaultVantage
	}
	tc, err := gc.Tokens.Filled()
	if err != nil {
		return nil, fmt.Errorf("node: geometric: %w", err)
	}
	holder, err := geometric.NewHolder(geometric.ID(cfg.Self), tc)
	if err != nil {
		return nil, fmt.Errorf("node: geometric: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte(gc.Network))
	seed := h.Sum64() // shared by the network: initial holders, re-homing
	h.Write([]byte(cfg.Self))
	cc := gc.Coords
	if cc == (geometric.CoordConfig{}) {
		cc = geometric.DefaultCoordConfig()
	}
	if cc.Rand == nil {
		// The nudges that keep serf off the origin must differ between
		// nodes. With one fixed source for all (geometric's default)
		// every node left the origin in the same direction, their Vecs
		// microseconds apart: serf's height step, which divides by that
		// distance, threw heights to 0.1 to 0.4 s (19.5 s once), and the
		// coordinates' median error was still 0.22 after 120 samples a
		// node (nodesim, 100 PlanetLab hosts) where nodes that start
		// apart reach 0.14.
		cc.Rand = rand.New(rand.NewPCG(h.Sum64(), 0xc00d))
	}
	client, err := geometric.NewClient(cc)
	if err != nil {
		return nil, fmt.Errorf("node: geometric: %w", err)
	}
	g := &geoMachine{
		m: m, cfg: gc, tc: tc, seed: seed, client: client, holder: holder,
		// The node's own choices (ping targets, jitter, long neighbours)
		// come from a source seeded by the network and its peer ID: they
		// differ between nodes and a run can be replayed.
		rng: rand.New(rand.NewPCG(seed, h.Sum64())),
		rtt: map[peer.ID]time.Duration{}, members: map[peer.ID]time.Time{}, tokens: tokenBook{},
		memberDemoted: map[peer.ID]bool{}, mateDemoted: map[peer.ID]bool{}, memberLeft: map[peer.ID]bool{}, orders: map[int]rehomeOrder{},
		clusterToken: -1, spToken: -1, barred: map[peer.ID]int64{}, connected: map[peer.ID]bool{},
		known: map[int]TokenPos{}, superseded: map[int]superseded{}, ignSeen: map[claimKey]bool{},
		pings: map[peer.ID]*pendingPing{}, vouchOf: map[peer.ID]time.Time{}, vouchBy: map[peer.ID]time.Time{},
	}
	g.memberCoord, g.mateCoord = map[peer.ID]*coordinate.Coordinate{}, map[peer.ID]heardCoord{}
	return g, nil
}

// self is the node's peer ID.
func (g *geoMachine) self() peer.ID { return g.m.cfg.Self }

// begin starts the clocks at the first input.
func (g *geoMachine) begin(now time.Time) {
	if g.begun {
		return
	}
	g.begun, g.started = true, now
	g.setTopics(now)
	g.nextPing = now.Add(g.cfg.PingInterval / 5)
	g.nextRound = now.Add(g.jittered())
	g.nextAttch = now.Add(g.jittered())
}

// jittered returns TokenInterval give or take a quarter, at random.
func (g *geoMachine) jittered() time.Duration {
	d := g.cfg.TokenInterval
	return d + time.Duration(g.rng.Int64N(int64(d)/2+1)) - d/4
}

// pingPeriod is the period of the samples: a fifth of PingInterval for the
// first fastSamples.
func (g *geoMachine) pingPeriod() time.Duration {
	if g.samples < fastSamples {
		return g.cfg.PingInterval / 5
	}
	return g.cfg.PingInterval
}

// attachTTL is how long an attachment lasts without a successful request:
// a superpeer drops a member it has not heard from for that long, and a
// member keeps a superpeer whose refreshes fail (while it still reports its
// token) for as long. It is the membership topic's TTL, three announce
// intervals, so that a loaded host that answers slowly is not taken for a
// dead one sooner than the overlay takes any peer for dead.
func (g *geoMachine) attachTTL() time.Duration { return 3 * g.m.cfg.AnnounceInterval }

// roundDue, pingDue and attachDue report whether Tick(now) starts a token
// round, a sample or an attachment round.
func (g *geoMachine) roundDue(now time.Time) bool {
	return g.pass == nil && (g.kicked || !now.Before(g.nextRound))
}
func (g *geoMachine) pingDue(now time.Time) bool   { return !now.Before(g.nextPing) }
func (g *geoMachine) attachDue(now time.Time) bool { return g.round == nil && !now.Before(g.nextAttch) }
func (g *geoMachine) recheckDue(now time.Time) bool {
	return !g.recheck.IsZero() && !now.Before(g.recheck)
}

// GeoDue reports whether Tick(now) will make a geometric decision: the
// driver then gives a fresh GeoFeed first.
func (m *Machine) GeoDue(now time.Time) bool {
	g := m.geo
	if g == nil {
		return false
	}
	if !g.begun {
		return true
	}
	return g.roundDue(now) || g.pingDue(now) || g.attachDue(now) || g.recheckDue(now)
}

// GeoNext is when the geometric strategy's next timer falls due (zero
// without it): the driver ticks the machine then, as well as every
// ElectionTick.
func (m *Machine) GeoNext() time.Time {
	g := m.geo
	if g == nil {
		return time.Time{}
	}
	if g.kicked && g.pass == nil {
		return g.started // at once
	}
	next := g.nextPing
	if g.pass == nil && g.nextRound.Before(next) {
		next = g.nextRound
	}
	if g.round == nil && g.nextAttch.Before(next) {
		next = g.nextAttch
	}
	if !g.recheck.IsZero() && g.recheck.Before(next) {
		next = g.recheck
	}
	return next
}

// GeoAnswer is the answer to the last TokenOffered or AttachAsked; a
// stream handler steps the machine with it and reads this at once.
func (m *Machine) GeoAnswer() GeoAnswer {
	if m.geo == nil {
		return GeoAnswer{}
	}
	a := m.geo.answer
	a.Cluster, a.Candidates, a.Demoted, a.Nearby, a.Rotated = slices.Clone(a.Cluster), slices.Clone(a.Candidates), slices.Clone(a.Demoted), slices.Clone(a.Nearby), slices.Clone(a.Rotated)
	if a.Rehome != nil {
		r := *a.Rehome
		a.Rehome = &r
	}
	return a
}

// Distrusted counts the claims vet found implausible.
func (m *Machine) Distrusted() uint64 {
	if m.geo == nil {
		return 0
	}
	return m.geo.distrustN
}

// kickGeo asks for a token round at once (the election named another
// leader).
func (m *Machine) kickGeo() {
	if m.geo != nil {
		m.geo.kicked = true
	}
}

// disconnected notes a lost connection (Conn).
func (g *geoMachine) disconnected(p peer.ID) { delete(g.connected, p) }

// take returns and clears the geometric outputs.
func (g *geoMachine) take() GeoReady {
	out := g.out
	g.out = GeoReady{}
	return out
}

func (g *geoMachine) note(level slog.Level, msg string, args ...any) { g.m.note(level, msg, args...) }

// step takes a geometric input.
func (g *geoMachine) step(now time.Time, in Input) {
	g.begin(now)
	switch in := in.(type) {
	case GeoFeed:
		g.feed = in
		g.connected = make(map[peer.ID]bool, len(in.Connected))
		for _, p := range in.Connected {
			g.connected[p] = true
		}
		in.Tokens = g.heardClaims(in.Tokens)
		g.claims = in.Tokens
		g.feed.Tokens = g.resolve(now, in.Tokens)
	case PingDone:
		g.pingDone(now, in)
	case TokenOffered:
		g.offered(now, in)
	case PassDone:
		g.passDone(now, in)
	case AttachAsked:
		g.asked(now, in)
	case AttachDone:
		g.attachDone(now, in)
	case GeoLeave:
		g.carryOut(now, g.holder.Leave(), nil)
	case VouchAsked:
		g.vouchAsked(now, in)
	case VouchDone:
		g.vouchDone(now, in)
	}
}

// tick runs what is due at now.
func (g *geoMachine) tick(now time.Time) {
	g.begin(now)
	if g.pingDue(now) {
		g.samples++
		g.nextPing = g.nextPing.Add(g.pingPeriod())
		if !g.nextPing.After(now) { // late: not made up for
			g.nextPing = now.Add(g.pingPeriod())
		}
		if !g.sampling {
			if p, remote, ok := g.pickPingTarget(now); ok {
				g.sampling = true
				pp := g.ping(p)
				pp.sample, pp.remote = true, remote
			}
		}
	}
	if g.roundDue(now) {
		g.kicked = false
		g.recheck = time.Time{}
		g.tokenRound(now)
	}
	if g.recheckDue(now) {
		g.recheck = time.Time{}
		g.update(now)
	}
	if g.attachDue(now) {
		g.startAttach(now)
	}
}

// ping asks for a ping of p, unless one is in flight, and returns what it
// is for.
func (g *geoMachine) ping(p peer.ID) *pendingPing {
	pp := g.pings[p]
	if pp == nil {
		pp = &pendingPing{}
		g.pings[p] = pp
		g.out.Pings = append(g.out.Pings, p)
	}
	return pp
}

func (g *geoMachine) pingDone(now time.Time, in PingDone) {
	pp := g.pings[in.Peer]
	if pp == nil {
		return
	}
	delete(g.pings, in.Peer)
	if pp.sample {
		g.sampling = false
	}
	if in.Err != nil {
		g.note(slog.LevelDebug, "geometric: ping", "peer", in.Peer, "err", in.Err)
		if i := slices.Index(g.pingRandom, in.Peer); i >= 0 {
			g.pingRandom = slices.Delete(g.pingRandom, i, i+1) // drawn again
		}
	}
	if in.Err == nil && (pp.sample || pp.vet || pp.measure) {
		g.rtt[in.Peer] = filterRTT(g.rtt[in.Peer], in.RTT)
		g.sampled(in, pp.remote)
	}
	for _, num := range pp.probes {
		g.probed(now, num, in)
	}
	if pp.lost && in.Peer == g.lostProbe {
		g.lostSilent = in.Err != nil
		if g.lostSilent {
			g.note(slog.LevelInfo, "geometric: the lost superpeer is still connected but does not answer a ping", "holder", in.Peer, "err", in.Err)
			g.recheck = now // a takeover may be decided now (election)
		}
	}
	if pp.vet && g.pass != nil && g.pass.vetting && len(g.pass.waiting) == 0 && peer.ID(g.pass.p.To) == in.Peer {
		g.pass.vetting = false
		if in.Err != nil {
			g.vetted(now, true) // no answer: the pass will tell
			return
		}
		g.judge(now, g.rtt[in.Peer])
	}
}

// sampled fits the coordinate to a ping's answer: the peer's coordinate
// is the one its answer carried, once checked (pingCoord), else the one
// the node knew (remote, nil if none: then no sample); an answer with a
// coordinate that fails the check is no sample at all. The coordinate is
// fitted to the filtered RTT, not to the raw sample, whose spikes on a
// loaded host are scheduling delays (with raw samples, passes 7 to 10 of
// tokens on 100 nodes still claimed gains of 120 to 850 ms, far above any
// cluster's RTTs).
func (g *geoMachine) sampled(in PingDone, remote *coordinate.Coordinate) {
	if in.Coord != nil {
		c, err := pingCoord(in.Coord)
		if err != nil {
			g.badCoords++
			g.note(slog.LevelDebug, "geometric: a ping's answer carried a bad coordinate", "peer", in.Peer, "err", err)
			return
		}
		remote = c
	}
	if remote == nil {
		return
	}
	rtt := g.rtt[in.Peer]
	if _, err := g.client.Sample(geometric.ID(in.Peer), remote, rtt); err != nil {
		g.note(slog.LevelDebug, "geometric: sample rejected", "peer", in.Peer, "rtt", rtt, "err", err)
	}
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

// pickPingTarget chooses a random peer of pingTargets, preferring a
// superpeer whose RTT is not measured yet (attachment compares them); with
// the coordinate the node knows of it, if any (its answer carries its
// own).
func (g *geoMachine) pickPingTarget(now time.Time) (peer.ID, *coordinate.Coordinate, bool) {
	coords := g.coords(now)
	for _, tp := range g.positions() {
		if _, ok := g.rtt[tp.Holder]; !ok && tp.Superpeer && tp.Holder != g.self() {
			return tp.Holder, coords[tp.Holder], true
		}
	}
	ids := g.pingTargets()
	if len(ids) == 0 {
		return "", nil, false
	}
	p := ids[g.rng.IntN(len(ids))]
	return p, coords[p], true
}

// pingTargets are the peers the node samples its coordinate against,
// sorted: the token holders, its cluster (a superpeer's members, an
// ordinary peer's superpeer and the mates its last answer named) and
// geoPingRandom peers it is connected to, drawn at random (pingRandom,
// drawn again here when some left). A bounded set (S, the capacity and
// geoPingRandom), whatever the swarm's size.
func (g *geoMachine) pingTargets() []peer.ID {
	set := g.targetSet()
	g.pingRandom = slices.DeleteFunc(g.pingRandom, func(p peer.ID) bool { return !g.connected[p] || set[p] })
	if len(g.pingRandom) < geoPingRandom {
		var pool []peer.ID
		for _, p := range g.feed.Connected {
			if !set[p] && p != g.self() && !slices.Contains(g.pingRandom, p) {
				pool = append(pool, p)
			}
		}
		slices.Sort(pool)
		for _, i := range g.rng.Perm(len(pool))[:min(geoPingRandom-len(g.pingRandom), len(pool))] {
			g.pingRandom = append(g.pingRandom, pool[i])
		}
	}
	return g.targets(set)
}

// targetSet is pingTargets without the random ones.
func (g *geoMachine) targetSet() map[peer.ID]bool {
	set := map[peer.ID]bool{}
	for _, tp := range g.positions() {
		set[tp.Holder] = true
	}
	for p := range g.members {
		set[p] = true
	}
	if g.attached != "" {
		set[g.attached] = true
		if g.matesOf == g.attached {
			for _, p := range g.mates {
				set[p] = true
			}
		}
	}
	return set
}

// targets adds the random targets drawn so far to set, and returns them
// all but the node, sorted.
func (g *geoMachine) targets(set map[peer.ID]bool) []peer.ID {
	for _, p := range g.pingRandom {
		set[p] = true
	}
	delete(set, g.self())
	return slices.Sorted(maps.Keys(set))
}

// tokenRound is one round of the token machine: inputs to the holder, its
// decisions, the position report, and the node's state.
func (g *geoMachine) tokenRound(now time.Time) {
	g.setScale()
	coords := g.coords(now)
	// The peers that may not hold a token: the private ones the node
	// knows of, and those its cluster's roster demotes (private or
	// flapping, by their own word).
	private := map[geometric.ID]bool{}
	for _, e := range g.m.view {
		if e.Private {
			private[geometric.ID(e.ID)] = true
		}
	}
	for _, ps := range []map[peer.ID]bool{g.memberDemoted, g.mateDemoted} {
		for p := range ps {
			if g.demotes(p) {
				private[geometric.ID(p)] = true
			}
		}
	}
	// Kept besides the peers with coordinates: the ping targets, and the
	// candidates whose RTTs the member's report still needs (swapAsk; a
	// candidate need not be among the mates its superpeer named, and once
	// its RTT was dropped the report was never complete: in nodesim, 100
	// PlanetLab hosts, S = 10, seed 15, a round of 32 told had 6 reports).
	keep := g.pingTargets()
	if !g.swapSent {
		keep = append(keep, g.swapAsk...)
	}
	if g.search != nil {
		keep = append(keep, g.search.cands...) // the superpeer's own RTTs to them (a landmark need not be a member)
	}
	for p := range g.rtt {
		if _, ok := coords[p]; !ok && !slices.Contains(keep, p) { // gone: drop its RTT and serf's filter for it
			delete(g.rtt, p)
			g.client.Forget(geometric.ID(p))
		}
	}
	// Snapshots are taken at the same epochs of the clock everywhere, so
	// that holders (and the peers they pass to) decide on nearly the same
	// picture: tokens bounce between peers whose pictures differ.
	epoch := now.UnixNano() / int64(SnapshotTicks*g.cfg.TokenInterval)
	if epoch != g.snapshotEpoch || len(g.snapshot) < len(coords)+1 { // the snapshot has this node too
		g.snapshot = make(map[peer.ID]*coordinate.Coordinate, len(coords)+1)
		for p, c := range coords {
			g.snapshot[p] = c
		}
		g.snapshotEpoch = epoch
		g.snapshot[g.self()] = g.client.Coordinate()
	}
	self := g.snapshot[g.self()]
	peers := make([]geometric.Peer, 0, len(g.snapshot))
	for p, c := range g.snapshot {
		peers = append(peers, geometric.Peer{ID: geometric.ID(p), Coord: c})
	}
	slices.SortFunc(peers, func(a, b geometric.Peer) int { return cmp.Compare(a.ID, b.ID) })
	if err := g.holder.SetCoordinate(self); err != nil {
		g.note(slog.LevelWarn, "geometric: own coordinate rejected", "err", err)
	}
	g.holder.SetPeers(peers)
	g.holder.SetPopulation(g.population())
	g.holder.SetNeighbours(slices.DeleteFunc(g.neighbours(self, peers), func(p geometric.Peer) bool { return private[p.ID] }))
	var outs []geometric.Output
	if to := g.yield; to != "" {
		g.yield = ""
		if t, held := g.holder.Holding(); held {
			g.note(slog.LevelInfo, "geometric: another holds our token by a better right; giving it up", "token", t.Num, "holder", to)
			outs = append(outs, g.holder.Yield()...)
		}
	}
	for _, tp := range g.feed.Tokens {
		if tp.Holder != g.self() {
			c := tp.Coord
			if sc, ok := g.snapshot[tp.Holder]; ok {
				c = sc // decide on one consistent picture
			}
			outs = append(outs, g.holder.Observe(geometric.Position{Token: tp.Token, Holder: geometric.ID(tp.Holder), Coord: c})...)
		}
	}
	g.place(now)
	outs = append(outs, g.holder.Tick(now)...)
	g.carryOut(now, outs, func(now time.Time) {
		g.publishToken()
		g.update(now)
		g.nextRound = now.Add(g.jittered())
	})
}

// neighbours are the geoNearest nearest peers by coordinate and geoRandom
// others, drawn once (the simulator's choice): the peers a token may be
// passed to. Distrusted peers (vet) and those that refused a pass are
// none until the next snapshot.
func (g *geoMachine) neighbours(self *coordinate.Coordinate, peers []geometric.Peer) []geometric.Peer {
	maps.DeleteFunc(g.barred, func(_ peer.ID, e int64) bool { return e != g.snapshotEpoch })
	others := slices.DeleteFunc(slices.Clone(peers), func(p geometric.Peer) bool {
		_, barred := g.barred[peer.ID(p.ID)]
		return p.ID == geometric.ID(g.self()) || barred
	})
	slices.SortStableFunc(others, func(a, b geometric.Peer) int {
		return cmp.Compare(geometric.Distance(self, a.Coord), geometric.Distance(self, b.Coord))
	})
	k := min(geoNearest, len(others))
	out := slices.Clone(others[:k])
	rest := others[k:]
	if len(g.longNeighbors) < min(geoRandom, len(rest)) {
		g.longNeighbors = g.longNeighbors[:0]
		for _, i := range g.rng.Perm(len(rest))[:min(geoRandom, len(rest))] {
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

// carryOut carries out the holder's decisions in order. A Pass is vetted,
// then handed to the driver; the outputs after it, and then, wait for its
// PassDone.
func (g *geoMachine) carryOut(now time.Time, outs []geometric.Output, then func(time.Time)) {
	for i, o := range outs {
		switch o := o.(type) {
		case geometric.Pass:
			g.pass = &pendingOut{p: o, rest: outs[i+1:], then: then}
			g.vet(now)
			return
		case geometric.Release:
			g.out.Tokens = append(g.out.Tokens, TokenReport{Token: o.Token, Released: true, Capacity: g.tc.Capacity,
				Coord: g.client.Coordinate()})
		case geometric.Promote:
			g.note(slog.LevelInfo, "promoted to superpeer", "token", o.Token)
			// A superpeer is its own: drop an attachment round in
			// flight, whose answers would name another. Without this a
			// node promoted while its round asked superpeers across a
			// partition named its old superpeer for 32 s, its round's
			// three requests timing out one after the other
			// (TestGeoPartitionSideWithoutSuperpeer, bully, seed 1).
			g.round, g.nextAttch = nil, now
			g.attached, g.attachOK = g.self(), now
		case geometric.Demote:
			g.note(slog.LevelInfo, "no longer a superpeer", "token", o.Token)
		}
	}
	if then != nil {
		then(now)
	}
}

// vetted carries on with the pass in flight: to the driver when the
// recipient is trusted, or failed at once.
func (g *geoMachine) vetted(now time.Time, ok bool) {
	if ok {
		g.out.Passes = append(g.out.Passes, TokenPass{To: peer.ID(g.pass.p.To), Token: g.pass.p.Token})
		return
	}
	g.passDone(now, PassDone{To: peer.ID(g.pass.p.To), Token: g.pass.p.Token, OK: false})
}

// passDone takes the outcome of the pass in flight and carries on with
// what waited for it.
func (g *geoMachine) passDone(now time.Time, in PassDone) {
	p := g.pass
	if p == nil || p.vetting || peer.ID(p.p.To) != in.To || p.p.Token != in.Token {
		return
	}
	g.pass = nil
	if !in.OK {
		g.barred[in.To] = g.snapshotEpoch
	}
	more := g.holder.PassDone(in.OK)
	if in.OK {
		// Our own report goes at once, the recipient's may take a while to
		// reach us: the token is not missing, and not ours to re-home,
		// before that report has had one TTL to come.
		g.tokens.info(p.p.Token.Num).missFrom(now.Add(3 * g.m.cfg.AnnounceInterval))
		g.note(slog.LevelInfo, "passed token", "token", p.p.Token.Num, "passes", p.p.Token.Passes(), "gain_ms", p.p.Gain*1000, "to", in.To)
	}
	g.carryOut(now, append(more, p.rest...), p.then)
}

// publishToken reports the token this node holds, or stops reporting one
// it no longer holds.
func (g *geoMachine) publishToken() {
	pos, ok := g.holder.Position()
	was := g.holding
	g.holding = ok
	switch {
	case ok:
		r := TokenReport{Token: pos.Token, Coord: pos.Coord, Superpeer: g.holder.Superpeer(),
			Load: min(g.load(), g.tc.Capacity), Capacity: g.tc.Capacity}
		if pos.Token.Passes() > 0 {
			r.Giver, r.Link = g.giver, g.link
		}
		if r.Superpeer && g.summary != nil {
			sum := *g.summary
			r.Summary = &sum
		}
		g.out.Tokens = append(g.out.Tokens, r)
	case was:
		g.out.Tokens = append(g.out.Tokens, TokenReport{None: true})
	}
}

// offered answers a token pass: refused when this node is private or
// flapping (selfDemoted), when the sender is not the holder of the token
// this node knows (passable, which also says whether the pass is a
// forgery), or when the holder machine refuses it.
func (g *geoMachine) offered(now time.Time, in TokenOffered) {
	g.answer = GeoAnswer{}
	if g.selfDemoted() {
		g.note(slog.LevelDebug, "geometric: refused a token: this node is private or flapping", "token", in.Token.Num, "from", in.From,
			"private", g.m.private)
		return
	}
	if err := g.passable(in); err != nil {
		if g.answer.Forged = forgedOrNil(err); g.answer.Forged != nil {
			g.forged++
		}
		g.note(slog.LevelInfo, "geometric: refused a token pass", "token", in.Token.Num, "seq", in.Token.Seq, "from", in.From, "err", err)
		return
	}
	if err := g.holder.Receive(in.Token, now); err != nil {
		return
	}
	g.link, g.giver, g.placed = slices.Clone(in.Link), in.From, nil
	g.note(slog.LevelInfo, "received token", "token", in.Token.Num, "from", in.From)
	g.answer.Yes = true
	g.publishToken()
	st := g.state() // the node holds a token now, not at its next round
	g.out.State = &st
}

// asked answers an attach request: a superpeer takes a member it has, or a
// new one (or one that left) while it serves fewer than Capacity; a
// request that says its sender left is answered no, and the member is
// served no longer (memberLeft).
func (g *geoMachine) asked(now time.Time, in AttachAsked) {
	_, member := g.members[in.From]
	if in.Leaving {
		g.answer = GeoAnswer{}
		if member && !g.memberLeft[in.From] {
			g.memberLeft[in.From] = true
			g.note(slog.LevelDebug, "geometric: a member left for another superpeer", "member", in.From)
		}
		return
	}
	member = member && !g.memberLeft[in.From] // one that left comes back only if there is room
	ok := g.holder.Superpeer() && (member || g.load() < g.tc.Capacity)
	g.answer = GeoAnswer{}
	if !ok {
		return
	}
	g.members[in.From] = now
	delete(g.memberLeft, in.From)
	if in.Private || in.Flapping {
		g.memberDemoted[in.From] = true
	} else {
		delete(g.memberDemoted, in.From)
	}
	g.memberSent(in.From, in.Coord)
	g.answer = GeoAnswer{Yes: true, Cluster: g.cluster(), Candidates: g.swapReported(in.From, in.RTTs, in.Second), Coords: g.share(in.From),
		Demoted: g.clusterDemoted(), Rehome: g.orderFor(in.From), Size: g.backboneSize()}
	g.answer.Nearby, g.answer.Rotated = g.nearby(in.Coord)
	if len(g.answer.Nearby) > 1 && in.Near != 0 && in.Near == NearDigest(g.answer.Nearby[1:]) {
		g.answer.Nearby, g.answer.NearbyHeld = g.answer.Nearby[:1], true
	}
	if !member {
		g.update(now) // list a new member before it hears yes
	}
}

// load is how many members a superpeer serves: those attached, less
// those that said they left (memberLeft).
func (g *geoMachine) load() int { return len(g.members) - len(g.memberLeft) }

// cluster lists a superpeer's cluster: itself first, then its members by
// ID.
func (g *geoMachine) cluster() []peer.ID {
	ids := make([]peer.ID, 0, len(g.members)+1)
	for p := range g.members {
		ids = append(ids, p)
	}
	slices.Sort(ids)
	return append([]peer.ID{g.self()}, ids...)
}

// clusterDemoted lists, sorted, the peers of a superpeer's cluster that
// said they are private or flapping: the members by their last requests,
// itself by its own state (selfDemoted).
func (g *geoMachine) clusterDemoted() []peer.ID {
	var out []peer.ID
	for p := range g.memberDemoted {
		if _, ok := g.members[p]; ok {
			out = append(out, p)
		}
	}
	if g.selfDemoted() {
		out = append(out, g.self())
	}
	slices.Sort(out)
	return out
}

// selfDemoted reports whether this node says of itself that it is
// private or flapping.
func (g *geoMachine) selfDemoted() bool {
	return g.m.private || g.m.el != nil && g.m.el.selfFlapping
}

// demotes reports whether p is a peer of this node's cluster that ranks
// last and is handed no token because it said it is private or flapping:
// this node itself by its own state; a superpeer's member by its last
// request; an ordinary peer's mate (its superpeer included) as the
// superpeer's last yes named it. A peer's word about itself can only
// lower it, so what it says is taken; a superpeer can lower (or fail to
// lower) a member in the roster it sends, as it can leave one out.
func (g *geoMachine) demotes(p peer.ID) bool {
	super := g.holder.Superpeer()
	switch {
	case p == g.self():
		return g.selfDemoted() || !super && g.mateDemoted[p]
	case super:
		return g.memberDemoted[p]
	}
	return g.mateDemoted[p]
}

// state is the node's geometric state now.
func (g *geoMachine) state() GeoState {
	token, held := g.holder.Holding()
	super := g.holder.Superpeer()
	sp := g.attached
	members := []peer.ID{g.self()}
	if super {
		members = g.cluster()
	} else if sp != "" {
		members = append(members, sp)
	}
	slices.Sort(members)
	st := GeoState{S: g.tc.Tokens, Members: members, Role: RoleOrdinary, Coord: g.client.Coordinate(), Token: -1, Superpeer: sp, Size: g.size(),
		Keep: g.targets(g.targetSet())}
	if held {
		st.Token = token.Num
	}
	if super {
		st.Role = RoleSuperpeer
	}
	if sp != "" {
		id := sp.String()
		st.Prefix = "sp-" + id[max(0, len(id)-8):]
	}
	return st
}

// GeoState is the node's geometric state now (zero without the geometric
// strategy). GeoReady.State reports it after each round.
func (m *Machine) GeoState() GeoState {
	if m.geo == nil {
		return GeoState{}
	}
	return m.geo.state()
}

// update sets the node's state and announcement from the machines, and
// runs the cluster's election.
func (g *geoMachine) update(now time.Time) {
	st := g.state()
	g.out.State = &st
	g.setTopics(now)
	super := st.Role == RoleSuperpeer
	// The membership topic is how peers learn of each other (the initial
	// holders and re-homing are computed over it); k is 0 here.
	g.m.announce = &Announcement{Superpeer: super, ClusterKey: g.m.selfKey.Cluster(0), Private: g.m.private}
	g.election(now)
}

// rttScale is the median of the RTTs the node keeps (filterRTT's, to the
// peers it pings: its cluster, its superpeer, the token holders and a few
// others), 0 while it keeps fewer than scaleSamples.
func (g *geoMachine) rttScale() time.Duration {
	ds := make([]time.Duration, 0, len(g.rtt))
	for _, d := range g.rtt {
		if d > 0 {
			ds = append(ds, d)
		}
	}
	if len(ds) < scaleSamples {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// scaleSamples is how many peers' RTTs the node keeps before it takes
// the network's scale from them: a fifth of a second of the first, fast
// samples (pingPeriod).
const scaleSamples = 8

// setScale takes the network's scale from the RTTs the node keeps
// (geometric.Rescale), at each token round: the lengths of the token
// dynamics (Holder.SetScale), of the search's margin, of the attachment's
// and of the vetting's tolerance apply at it (length). Each node takes
// its own: the lengths are margins against noise and steps of its own
// decisions, which need not agree between nodes.
func (g *geoMachine) setScale() {
	cur := g.scale
	if cur <= 0 {
		cur = 1 // the defaults', until the RTTs kept say otherwise
	}
	if f := geometric.Rescale(cur, g.rttScale()); f != g.scale {
		g.scale = f
		g.holder.SetScale(f)
	}
}

// length is d at the network's scale (setScale).
func (g *geoMachine) length(d time.Duration) time.Duration {
	return geometric.ScaleLength(d, g.scale)
}

// GeoScale is the geometric strategy's scale (see
// geometric.ScaleReference) and the median RTT it was taken from: 1 and 0
// before the node has measured enough peers, or without the strategy.
func (m *Machine) GeoScale() (float64, time.Duration) {
	if m.geo == nil || m.geo.scale <= 0 {
		return 1, 0
	}
	return m.geo.scale, m.geo.rttScale()
}
