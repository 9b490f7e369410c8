package gossip

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/serf/coordinate"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// GeoVersion is the version of the token payload, and the last element of
// the token topic's name; payloads of other versions are rejected. Version
// 2 added the token link (TokenLink).
const GeoVersion = 2

// MaxGeoSize bounds an encoded token payload, in bytes. An
// honest one is about 300 bytes.
const MaxGeoSize = 4 << 10

// MaxTokens bounds the number of tokens of a network: token numbers lie in
// [0, MaxTokens).
const MaxTokens = 4096

// ErrBadGeo reports a malformed or out-of-range coordinate or token payload.
var ErrBadGeo = errors.New("gossip: bad geometric message")

// TokenTopic is the name of the token topic of an overlay network: the
// backbone of token reports, on which every token holder publishes and
// which superpeers, holders and unattached peers read.
func TokenTopic(network string) string {
	return fmt.Sprintf("/superpeer/%s/tokens/%d", network, GeoVersion)
}

// ClusterTopic is the name of the token topic of one cluster of an overlay
// network: the cluster whose superpeer holds token number token. That
// superpeer, and the holders of tokens in transit attached to it, publish
// their token reports there as well as on the backbone (TokenTopic); the
// cluster's ordinary members read it instead of the backbone, so that
// what they hear follows their cluster, not the swarm (issue 20). Its
// payloads, and their checks, are the backbone's. The name extends
// TokenTopic's with "/cluster/" and the token number in decimal: it
// differs from every network's TokenTopic, and from the cluster topic of
// any other network or token (ClusterTopicToken reads it back).
func ClusterTopic(network string, token int) string {
	return fmt.Sprintf("%s/cluster/%d", TokenTopic(network), token)
}

// ClusterTopicToken returns the token number of name if name is a cluster
// topic of network (ClusterTopic), with a number in [0, MaxTokens)
// written as ClusterTopic writes it (no sign, no leading zero).
func ClusterTopicToken(network, name string) (int, bool) {
	prefix := TokenTopic(network) + "/cluster/"
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" || len(rest) > 4 {
		return 0, false
	}
	num, err := strconv.Atoi(rest)
	if err != nil || num < 0 || num >= MaxTokens || strconv.Itoa(num) != rest {
		return 0, false
	}
	return num, true
}

// TokenPos is what a token holder says of the token it holds, or released.
type TokenPos struct {
	// Holder is the peer. It is not encoded: receivers take it from the
	// message's signed origin.
	Holder peer.ID
	// Seq orders one holder's messages (whatever token they are about).
	// Geo sets it when publishing.
	Seq uint64
	// Token is the token: Num in [0, MaxTokens), and its own pass counter
	// Seq, which orders reports of one token from different holders.
	Token geometric.Token
	// Coord is the holder's coordinate. It may be nil only when Released.
	Coord *coordinate.Coordinate
	// Superpeer reports that the holder has held the token for the dwell
	// time and promoted itself.
	Superpeer bool
	// Load is the number of ordinary peers attached to the holder, in
	// [0, Capacity].
	Load int
	// Capacity is the most ordinary peers the holder serves, at least 1.
	Capacity int
	// Released reports that the holder gave the token up (it is leaving);
	// receivers drop the holder's entry.
	Released bool
	// Link is the last pass's proof: the giver's signature naming Holder
	// as the recipient of Token (SignLink). A report of a passed token
	// (Token.Passes() > 0) must carry it, unless Released; a report of a
	// placement (no passes) must not.
	Link *TokenLink
	// Giver is the peer that signed Link, as the decoder verified it; it
	// is not encoded ("" without a link).
	Giver peer.ID
	// Summary is a superpeer's summary of its cluster, for relocation
	// (overlay/node's georelocate.go), nil if none. Its Superpeer is not
	// encoded: it is the Holder. Members lies in [0, Capacity], the
	// durations in [0, MaxSummaryRTT], Candidate is a peer ID or "".
	Summary *geometric.ClusterSummary
}

// MaxSummaryRTT bounds each duration of a cluster summary on the wire
// (TokenPos.Summary): a sum of up to MaxTokens-capacity RTTs of a few
// hundred milliseconds is far below it.
const MaxSummaryRTT = time.Hour

// wireClusterSummary is a cluster summary on the wire; durations in
// microseconds, the candidate as its peer ID's string.
type wireClusterSummary struct {
	Members   int    `json:"members"`
	Cost      int64  `json:"cost_us"`
	Remove    int64  `json:"remove_us"`
	Full      bool   `json:"full,omitempty"`
	Candidate string `json:"cand,omitempty"`
	Gain      int64  `json:"gain_us"`
}

func clusterSummaryToWire(s *geometric.ClusterSummary) *wireClusterSummary {
	if s == nil {
		return nil
	}
	w := &wireClusterSummary{Members: s.Members, Cost: s.Cost.Microseconds(), Remove: s.Remove.Microseconds(), Full: s.Full, Gain: s.Gain.Microseconds()}
	if s.Candidate != "" {
		w.Candidate = peer.ID(s.Candidate).String()
	}
	return w
}

func clusterSummaryFromWire(w *wireClusterSummary, holder peer.ID) (*geometric.ClusterSummary, error) {
	if w == nil {
		return nil, nil
	}
	s := &geometric.ClusterSummary{Superpeer: geometric.ID(holder), Members: w.Members, Full: w.Full,
		Cost: time.Duration(w.Cost) * time.Microsecond, Remove: time.Duration(w.Remove) * time.Microsecond, Gain: time.Duration(w.Gain) * time.Microsecond}
	for _, us := range []int64{w.Cost, w.Remove, w.Gain} {
		if us < 0 || us > MaxSummaryRTT.Microseconds() {
			return nil, fmt.Errorf("%w: summary duration %d µs out of [0, %v]", ErrBadGeo, us, MaxSummaryRTT)
		}
	}
	if w.Candidate != "" {
		c, err := peer.Decode(w.Candidate)
		if err != nil {
			return nil, fmt.Errorf("%w: summary candidate: %v", ErrBadGeo, err)
		}
		s.Candidate = geometric.ID(c)
	}
	return s, nil
}

// TokenLink is a token pass's proof: the giver's public key and its
// signature over the token, its sequence and the recipient (linkBytes).
// The recipient of a pass checks it (Verify) before it takes the token,
// and then carries it in its reports, so that every receiver can check
// who gave the token to the peer that claims it: a report of a token one
// pass above its holder's, which any peer can write, is only believed
// with the signature of the holder the receiver knows (overlay/node's
// token rules decide that; this is the proof).
type TokenLink struct {
	Key []byte `json:"key"` // the giver's public key, crypto.MarshalPublicKey
	Sig []byte `json:"sig"`
}

// MaxLinkKey bounds a link's public key, in bytes (an Ed25519 key is 36,
// an RSA-4096 key some 550).
const MaxLinkKey = 1024

// MaxLinkSig bounds a link's signature, in bytes.
const MaxLinkSig = 1024

// linkBytes is what a link signs: a domain string, the token number and
// sequence (big-endian uint64s) and the recipient's ID bytes. The network
// is not in it: a link names its recipient and the exact pass, and is
// believed only from the holder a receiver knows in its own network.
func linkBytes(t geometric.Token, to peer.ID) []byte {
	b := append([]byte("/superpeer/token-link/1\x00"), make([]byte, 16)...)
	binary.BigEndian.PutUint64(b[len(b)-16:], uint64(t.Num))
	binary.BigEndian.PutUint64(b[len(b)-8:], t.Seq)
	return append(b, to...)
}

// SignLink signs the pass of t to the peer to with the giver's key sk.
func SignLink(sk crypto.PrivKey, t geometric.Token, to peer.ID) (*TokenLink, error) {
	key, err := crypto.MarshalPublicKey(sk.GetPublic())
	if err != nil {
		return nil, fmt.Errorf("gossip: token link: %w", err)
	}
	sig, err := sk.Sign(linkBytes(t, to))
	if err != nil {
		return nil, fmt.Errorf("gossip: token link: %w", err)
	}
	return &TokenLink{Key: key, Sig: sig}, nil
}

// Verify checks that l is a signature of the pass of t to the peer to,
// and returns the giver. Errors wrap ErrBadGeo.
func (l *TokenLink) Verify(t geometric.Token, to peer.ID) (peer.ID, error) {
	if l == nil {
		return "", fmt.Errorf("%w: no token link", ErrBadGeo)
	}
	if len(l.Key) == 0 || len(l.Key) > MaxLinkKey || len(l.Sig) == 0 || len(l.Sig) > MaxLinkSig {
		return "", fmt.Errorf("%w: token link of a %d-byte key and a %d-byte signature", ErrBadGeo, len(l.Key), len(l.Sig))
	}
	pk, err := crypto.UnmarshalPublicKey(l.Key)
	if err != nil {
		return "", fmt.Errorf("%w: token link key: %v", ErrBadGeo, err)
	}
	giver, err := peer.IDFromPublicKey(pk)
	if err != nil {
		return "", fmt.Errorf("%w: token link key: %v", ErrBadGeo, err)
	}
	if giver == to {
		return "", fmt.Errorf("%w: token link signed by its own recipient %s", ErrBadGeo, to)
	}
	if ok, err := pk.Verify(linkBytes(t, to), l.Sig); err != nil || !ok {
		return "", fmt.Errorf("%w: token link of token %d at %d to %s: bad signature", ErrBadGeo, t.Num, t.Seq, to)
	}
	return giver, nil
}

// Marshal is the link's stream encoding: a uvarint key length, the key,
// the signature (the rest).
func (l *TokenLink) Marshal() []byte {
	b := binary.AppendUvarint(nil, uint64(len(l.Key)))
	return append(append(b, l.Key...), l.Sig...)
}

// UnmarshalLink parses Marshal's encoding (bounds only; Verify checks
// the rest). Errors wrap ErrBadGeo.
func UnmarshalLink(b []byte) (*TokenLink, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > MaxLinkKey || uint64(len(b)-k) <= n {
		return nil, fmt.Errorf("%w: token link of %d bytes, key length %d", ErrBadGeo, len(b), n)
	}
	return &TokenLink{Key: slices.Clone(b[k : k+int(n)]), Sig: slices.Clone(b[k+int(n):])}, nil
}

// wireCoord is a coordinate on the wire. It is spelled out here rather than
// taken from serf's own JSON tags so that the wire format is ours and every
// field is checked (geometric.Valid) after decoding.
type wireCoord struct {
	Vec        []float64 `json:"vec"`
	Error      float64   `json:"error"`
	Adjustment float64   `json:"adjustment"`
	Height     float64   `json:"height"`
}

type wireToken struct {
	V         int                 `json:"v"`
	Seq       uint64              `json:"seq"`
	Num       int                 `json:"num"`
	TokenSeq  uint64              `json:"tseq"`
	Coord     *wireCoord          `json:"coord,omitempty"`
	Superpeer bool                `json:"superpeer,omitempty"`
	Load      int                 `json:"load"`
	Capacity  int                 `json:"capacity"`
	Released  bool                `json:"released,omitempty"`
	Link      *TokenLink          `json:"link,omitempty"`
	Summary   *wireClusterSummary `json:"summary,omitempty"`
}

func toWire(c *coordinate.Coordinate) *wireCoord {
	if c == nil {
		return nil
	}
	return &wireCoord{Vec: slices.Clone(c.Vec), Error: c.Error, Adjustment: c.Adjustment, Height: c.Height}
}

func fromWire(w *wireCoord) *coordinate.Coordinate {
	if w == nil {
		return nil
	}
	return &coordinate.Coordinate{Vec: w.Vec, Error: w.Error, Adjustment: w.Adjustment, Height: w.Height}
}

func checkCoord(c *coordinate.Coordinate) error {
	if err := geometric.Valid(c); err != nil {
		return fmt.Errorf("%w: %w", ErrBadGeo, err)
	}
	return nil
}

// decodeWire checks the size and version of a payload and parses it into w.
func decodeWire(data []byte, w any) error {
	if len(data) > MaxGeoSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBadGeo, len(data), MaxGeoSize)
	}
	var probe struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return fmt.Errorf("%w: %v", ErrBadGeo, err)
	}
	if probe.V != GeoVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrBadGeo, probe.V, GeoVersion)
	}
	// Numbers that do not fit a float64 (1e400) or an int are errors here,
	// never infinities; so is anything after the JSON value.
	if err := json.Unmarshal(data, w); err != nil {
		return fmt.Errorf("%w: %v", ErrBadGeo, err)
	}
	return nil
}

// check reports what is wrong with t, if anything.
func (t TokenPos) check() error {
	if t.Token.Num < 0 || t.Token.Num >= MaxTokens {
		return fmt.Errorf("%w: token number %d out of [0, %d)", ErrBadGeo, t.Token.Num, MaxTokens)
	}
	if t.Capacity < 1 {
		return fmt.Errorf("%w: capacity %d, want >= 1", ErrBadGeo, t.Capacity)
	}
	if t.Load < 0 || t.Load > t.Capacity {
		return fmt.Errorf("%w: load %d out of [0, capacity %d]", ErrBadGeo, t.Load, t.Capacity)
	}
	if t.Link != nil && t.Token.Passes() == 0 {
		return fmt.Errorf("%w: a link on token %d at placement %d, which no pass gave", ErrBadGeo, t.Token.Num, t.Token.Seq>>32)
	}
	if t.Link == nil && t.Token.Passes() > 0 && !t.Released {
		return fmt.Errorf("%w: token %d %d passes after its placement, without the giver's link", ErrBadGeo, t.Token.Num, t.Token.Passes())
	}
	if sum := t.Summary; sum != nil {
		if sum.Members < 0 || sum.Members > t.Capacity {
			return fmt.Errorf("%w: summary of %d members out of [0, capacity %d]", ErrBadGeo, sum.Members, t.Capacity)
		}
		for _, d := range []time.Duration{sum.Cost, sum.Remove, sum.Gain} {
			if d < 0 || d > MaxSummaryRTT {
				return fmt.Errorf("%w: summary duration %v out of [0, %v]", ErrBadGeo, d, MaxSummaryRTT)
			}
		}
	}
	if t.Coord == nil && t.Released {
		return nil
	}
	return checkCoord(t.Coord)
}

// Encode serialises t for the wire. It fails with ErrBadGeo for a position
// that receivers would reject.
func (t TokenPos) Encode() ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	return json.Marshal(wireToken{
		V: GeoVersion, Seq: t.Seq, Num: t.Token.Num, TokenSeq: t.Token.Seq, Coord: toWire(t.Coord),
		Superpeer: t.Superpeer, Load: t.Load, Capacity: t.Capacity, Released: t.Released, Link: t.Link,
		Summary: clusterSummaryToWire(t.Summary),
	})
}

// DecodeTokenPos parses and checks a token position published by origin
// (the message's signed origin, which becomes the Holder): size, version,
// encoding, token number in [0, MaxTokens), capacity >= 1, load in
// [0, capacity], the coordinate with geometric.Valid (it may be absent
// only from a release), and the link: required on a passed token (but for
// a release), refused on a placement, and when present a valid signature
// of the pass to origin by another peer, the Giver. Errors wrap ErrBadGeo.
func DecodeTokenPos(origin peer.ID, data []byte) (TokenPos, error) {
	if origin == "" {
		return TokenPos{}, fmt.Errorf("%w: no origin (unsigned message)", ErrBadGeo)
	}
	var w wireToken
	if err := decodeWire(data, &w); err != nil {
		return TokenPos{}, err
	}
	sum, err := clusterSummaryFromWire(w.Summary, origin)
	if err != nil {
		return TokenPos{}, err
	}
	t := TokenPos{
		Holder: origin, Seq: w.Seq, Token: geometric.Token{Num: w.Num, Seq: w.TokenSeq}, Coord: fromWire(w.Coord),
		Superpeer: w.Superpeer, Load: w.Load, Capacity: w.Capacity, Released: w.Released, Link: w.Link, Summary: sum,
	}
	if err := t.check(); err != nil {
		return TokenPos{}, err
	}
	if t.Link != nil {
		giver, err := t.Link.Verify(t.Token, origin)
		if err != nil {
			return TokenPos{}, err
		}
		t.Giver = giver
	}
	return t, nil
}

func sameSummary(a, b *geometric.ClusterSummary) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

var tokenSpec = feedSpec[TokenPos]{
	kind:   "token",
	decode: DecodeTokenPos,
	encode: TokenPos.Encode,
	seq:    func(t TokenPos) uint64 { return t.Seq },
	setSeq: func(t *TokenPos, s uint64) { t.Seq = s },
	live:   func(t TokenPos) bool { return !t.Released },
	same: func(a, b TokenPos) bool {
		return a.Token == b.Token && a.Superpeer == b.Superpeer && a.Load == b.Load && a.Capacity == b.Capacity &&
			a.Released == b.Released && geometric.SameCoord(a.Coord, b.Coord) && a.Giver == b.Giver && sameSummary(a.Summary, b.Summary)
	},
	// A new token, a promotion and a release go out at once; load and
	// coordinate updates may wait for the minimum gap.
	urgent: func(old *TokenPos, t TokenPos) bool {
		return old == nil || old.Token != t.Token || old.Superpeer != t.Superpeer || t.Released
	},
	group: func(t TokenPos) int { return t.Token.Num },
}

// GeoConfig configures a Geo.
type GeoConfig struct {
	// Network names the overlay; it keeps topics of different overlays apart.
	Network string
	// Interval is the republish period of the local token report.
	Interval time.Duration
	// TTL is how long an entry stays without a refresh. Zero means three
	// intervals; it may not be shorter than Interval.
	TTL time.Duration
	// MinGap is the least time between two publications that SetToken
	// calls prompt: a change within MinGap of the last publication goes
	// out, coalesced with later ones, when MinGap has passed. It keeps a
	// holder's coordinate, which changes with every RTT sample, from
	// flooding the topic. A first value, a new token, a promotion and a
	// release are published at once regardless. Zero means Interval/4;
	// negative means no limit.
	MinGap time.Duration
	// Logger receives rejections (at debug level); nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of entry times and expiry; nil means time.Now. The
	// republish period runs on the real clock regardless.
	Now func() time.Time
	// Rejected, when set, is told of every rejected payload and the peer
	// that sent it to us (see MembershipConfig.Rejected).
	Rejected func(from peer.ID, err error)

	// The bound on the reports kept (hostile-peer audit, finding B: anyone
	// may publish on the tokens topic, under as many keys as it makes, and
	// every report was kept for the TTL, and handed to the node machine
	// with every feed). Tokens is the network's token count S: a report
	// of a token numbered at or above it is ignored (0: MaxTokens).
	// PerToken is the most reports of one token kept (0:
	// DefaultPerToken); an honest token has its holder's, and for a TTL
	// those of a holder that passed it on or crashed. When a token's
	// reports fill its room, a report from a new origin is ignored, unless
	// a kept one no longer counts (withdrawn or expired), or Protect names
	// the new one (its holder and the giver of its link, "" for none) and
	// not some kept one, which then makes room (the newest first): a flood
	// under fresh keys fills the room left and evicts nothing, and the
	// holders the node believes and the passes they signed still get in.
	// Nil Protect names none.
	Tokens   int
	PerToken int
	Protect  func(holder, giver peer.ID) bool
}

// DefaultPerToken is the most reports of one token a Geo keeps by default
// (GeoConfig.PerToken).
const DefaultPerToken = 8

// ReportTTL is how long a report stays without a refresh: TTL, or three
// intervals when TTL is zero.
func (cfg GeoConfig) ReportTTL() time.Duration {
	if cfg.TTL == 0 {
		return 3 * cfg.Interval
	}
	return cfg.TTL
}

func (cfg GeoConfig) withDefaults() (GeoConfig, error) {
	if cfg.Network == "" {
		return cfg, fmt.Errorf("%w: empty network name", ErrBadConfig)
	}
	if cfg.Interval <= 0 {
		return cfg, fmt.Errorf("%w: republish interval %v, want > 0", ErrBadConfig, cfg.Interval)
	}
	cfg.TTL = cfg.ReportTTL()
	if cfg.TTL < cfg.Interval {
		return cfg, fmt.Errorf("%w: TTL %v is shorter than the republish interval %v", ErrBadConfig, cfg.TTL, cfg.Interval)
	}
	if cfg.MinGap == 0 {
		cfg.MinGap = cfg.Interval / 4
	}
	if cfg.Tokens < 0 || cfg.Tokens > MaxTokens || cfg.PerToken < 0 {
		return cfg, fmt.Errorf("%w: %d tokens and %d reports a token, want [0, %d] and >= 0", ErrBadConfig, cfg.Tokens, cfg.PerToken, MaxTokens)
	}
	if cfg.Tokens == 0 {
		cfg.Tokens = MaxTokens
	}
	if cfg.PerToken == 0 {
		cfg.PerToken = DefaultPerToken
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg, nil
}

// Geo keeps, from one token topic of an overlay (the backbone, JoinGeo,
// or a cluster's, JoinGeoCluster), the latest report of every token
// holder that publishes there, and publishes this peer's own. Only holders publish
// (S of them), so what a peer hears grows with S, not with the swarm; what
// it keeps is bounded so even when others publish (GeoConfig.PerToken).
// Coordinates are not gossiped otherwise: a node learns those of its
// cluster from its superpeer (overlay/node's geocoords.go), and the token
// reports carry the holders'.
type Geo struct {
	cfg     GeoConfig
	self    peer.ID
	tokens  *feed[TokenPos]
	lim     *limit[TokenPos] // the bound on the reports kept
	changes chan struct{}
}

// newGeo returns a Geo attached to no topic (for JoinGeo and for tests).
func newGeo(self peer.ID, cfg GeoConfig) (*Geo, feedConfig, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, feedConfig{}, err
	}
	if self == "" {
		return nil, feedConfig{}, fmt.Errorf("%w: empty local peer ID", ErrBadConfig)
	}
	g := &Geo{cfg: cfg, self: self, changes: make(chan struct{}, 1)}
	g.lim = &limit[TokenPos]{groups: cfg.Tokens, per: cfg.PerToken}
	if protect := cfg.Protect; protect != nil {
		g.lim.protect = func(origin peer.ID, t TokenPos) bool { return protect(origin, t.Giver) }
	}
	fc := feedConfig{
		self: self, interval: cfg.Interval, ttl: cfg.TTL, minGap: cfg.MinGap,
		now: cfg.Now, log: cfg.Logger, changed: g.notify, rejected: cfg.Rejected,
	}
	return g, fc, nil
}

// JoinGeo joins the token topic of cfg.Network on ps, with a validator
// that rejects malformed payloads and ignores stale ones. self is the local
// peer, the author of ps's messages; ps should sign strictly (the default),
// since the sender of every payload is its signed origin. Call SetToken to
// publish, and Close to leave.
func JoinGeo(ps *pubsub.PubSub, self peer.ID, cfg GeoConfig) (*Geo, error) {
	return joinGeo(ps, self, cfg, -1)
}

// JoinGeoCluster is JoinGeo on the cluster topic of token number token
// (ClusterTopic), with the same validator and bounds. token must be in
// [0, cfg.Tokens) (MaxTokens when cfg.Tokens is 0).
func JoinGeoCluster(ps *pubsub.PubSub, self peer.ID, cfg GeoConfig, token int) (*Geo, error) {
	if token < 0 {
		return nil, fmt.Errorf("%w: cluster topic of token %d", ErrBadConfig, token)
	}
	return joinGeo(ps, self, cfg, token)
}

// joinGeo joins the backbone (cluster < 0) or the topic of cluster.
func joinGeo(ps *pubsub.PubSub, self peer.ID, cfg GeoConfig, cluster int) (*Geo, error) {
	g, fc, err := newGeo(self, cfg)
	if err != nil {
		return nil, err
	}
	fc.topic = TokenTopic(g.cfg.Network)
	if cluster >= 0 {
		if cluster >= g.cfg.Tokens {
			return nil, fmt.Errorf("%w: cluster topic of token %d, want [0, %d)", ErrBadConfig, cluster, g.cfg.Tokens)
		}
		fc.topic = ClusterTopic(g.cfg.Network, cluster)
	}
	if g.tokens, err = joinFeed(ps, fc, &tokenSpec, g.lim); err != nil {
		return nil, err
	}
	return g, nil
}

// Topic is the name of the topic g was joined on ("" for a Geo on none).
func (g *Geo) Topic() string { return g.tokens.cfg.topic }

func (g *Geo) notify() {
	select {
	case g.changes <- struct{}{}:
	default:
	}
}

// SetToken sets the token this peer holds. Nil means it holds none: nothing
// further is published and its own entry goes from Tokens (others drop it
// when it expires, or sooner when the token's new holder reports a higher
// Token.Seq). A non-nil position is published at once if it changed (a new
// token, a promotion or a release always at once; a load or coordinate
// change within the MinGap rule) and again every Interval; with Released set
// it is published once and then cleared, as if SetToken(nil) followed.
// t.Holder must be empty or this peer. A position receivers would reject is
// refused with ErrBadGeo.
func (g *Geo) SetToken(ctx context.Context, t *TokenPos) error {
	if t == nil {
		return g.tokens.set(ctx, nil)
	}
	if t.Holder != "" && t.Holder != g.self {
		return fmt.Errorf("%w: position held by %s, local peer is %s", ErrBadGeo, t.Holder, g.self)
	}
	v := *t
	v.Holder = g.self
	if v.Coord != nil {
		v.Coord = v.Coord.Clone()
	}
	return g.tokens.set(ctx, &v)
}

// SetQuiet makes g publish the local report only when it changes urgently
// (a new token, a promotion, a release), not again every Interval nor for
// a load or coordinate change (quiet), or as usual (not quiet). It is for
// a superpeer's own cluster topic, whose readers, its members, have its
// report from every answer to their attach requests (overlay); the topic
// then carries the changes they must hear at once.
func (g *Geo) SetQuiet(quiet bool) { g.tokens.setQuiet(quiet) }

// Coord returns a copy of token holder p's coordinate, as its live token
// report gives it (this peer's own included).
func (g *Geo) Coord(p peer.ID) (*coordinate.Coordinate, bool) {
	f := g.tokens
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tab.get(p, g.cfg.Now())
	if !ok || t.Coord == nil {
		return nil, false
	}
	return t.Coord.Clone(), true
}

// Coords returns a copy of the coordinate of every token holder with a
// live report (this peer's own included): the coordinates gossip carries.
func (g *Geo) Coords() map[peer.ID]*coordinate.Coordinate {
	f := g.tokens
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[peer.ID]*coordinate.Coordinate, len(f.tab.recs))
	f.tab.each(g.cfg.Now(), func(id peer.ID, t TokenPos) {
		if t.Coord != nil {
			out[id] = t.Coord.Clone()
		}
	})
	return out
}

// Tokens returns one position per token number, sorted by number: of the
// live reports about a token, the one with the highest Token.Seq, and on
// equal Token.Seq the one whose holder has the smaller ID (the rule by which
// geometric.Holder gives way). Released and expired reports are left out;
// this peer's own is included.
func (g *Geo) Tokens() []TokenPos {
	f := g.tokens
	f.mu.Lock()
	best := make(map[int]TokenPos)
	f.tab.each(g.cfg.Now(), func(_ peer.ID, t TokenPos) {
		if b, ok := best[t.Token.Num]; !ok || beats(t, b) {
			best[t.Token.Num] = t
		}
	})
	f.mu.Unlock()
	out := make([]TokenPos, 0, len(best))
	for _, t := range best {
		if t.Coord != nil {
			t.Coord = t.Coord.Clone()
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b TokenPos) int { return cmp.Compare(a.Token.Num, b.Token.Num) })
	return out
}

// Reports returns every live token report, this peer's own included,
// sorted by token number and then holder: all the claims on each token,
// for the node machine, which decides which to believe (Tokens' rule, the
// highest Token.Seq, is what a forged claim one pass above the holder's
// exploited). Released and expired reports are left out.
func (g *Geo) Reports() []TokenPos {
	f := g.tokens
	var out []TokenPos
	f.mu.Lock()
	f.tab.each(g.cfg.Now(), func(_ peer.ID, t TokenPos) {
		if t.Coord != nil {
			t.Coord = t.Coord.Clone()
		}
		out = append(out, t)
	})
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b TokenPos) int {
		return cmp.Or(cmp.Compare(a.Token.Num, b.Token.Num), cmp.Compare(a.Holder, b.Holder))
	})
	return out
}

// beats reports whether report a of a token wins over report b of the same
// token.
func beats(a, b TokenPos) bool {
	if a.Token.Seq != b.Token.Seq {
		return a.Token.Seq > b.Token.Seq
	}
	return a.Holder < b.Holder
}

// Changes is signalled (coalesced, capacity 1) when a token position
// changed: appeared, went, or differs by more than a refresh.
func (g *Geo) Changes() <-chan struct{} { return g.changes }

// Forget drops p's token position at once, for instance when it
// disconnected or left; a later message from p brings it back.
func (g *Geo) Forget(p peer.ID) {
	if g.tokens.forget(p) {
		g.notify()
	}
}

// Stats returns the validator's counts on the token topic.
func (g *Geo) Stats() FeedStats { return g.tokens.stats() }

// Close stops publishing and leaves the topic.
func (g *Geo) Close() error { return g.tokens.close() }
