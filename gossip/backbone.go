package gossip

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// BackboneVersion is the version of the backbone payload, and the last
// element of the topic's name; payloads of other versions are rejected.
const BackboneVersion = 1

// MaxSummarySize bounds an encoded summary, in bytes. An honest one is
// about 100.
const MaxSummarySize = 1 << 10

// MaxClusterSize bounds the size a summary may give its cluster.
const MaxClusterSize = 1 << 20

// MaxNetworkEstimate bounds the network-size estimate a summary may carry.
const MaxNetworkEstimate = 1 << 40

// ErrBadSummary reports a malformed or out-of-range backbone summary.
var ErrBadSummary = errors.New("gossip: bad backbone summary")

// BackboneTopic is the name of the backbone topic of an overlay network,
// on which only superpeers publish and which only they read.
func BackboneTopic(network string) string {
	return fmt.Sprintf("/superpeer/%s/backbone/%d", network, BackboneVersion)
}

// Summary is what a superpeer says of its cluster on the backbone.
type Summary struct {
	// Superpeer is the publisher. It is not encoded: receivers take it from
	// the message's signed origin.
	Superpeer peer.ID
	// K is the number of reserved bits the superpeer works at, in
	// [0, dhtselect.MaxK].
	K int
	// ClusterKey is the cluster the summary is about. It is not encoded:
	// it is the superpeer's key masked to K (a superpeer is a member of
	// its own cluster, so it cannot speak for another).
	ClusterKey dhtselect.Key
	// Size is the number of the cluster's members, the superpeer
	// included, in [1, MaxClusterSize].
	Size int
	// Estimate is the superpeer's own estimate of the network's size, in
	// [0, MaxNetworkEstimate]; zero if it has none.
	Estimate int
	// Term is the superpeer's election term; zero without a quorum.
	Term uint64
	// Seq orders one superpeer's summaries; a receiver ignores one that is
	// not newer than the last it accepted from that superpeer. The
	// Backbone sets it when publishing.
	Seq uint64
	// Leaving is a goodbye: the superpeer stopped serving its cluster and
	// left the backbone. Receivers drop its summary at once.
	Leaving bool
}

type wireSummary struct {
	V        int    `json:"v"`
	Seq      uint64 `json:"seq"`
	K        int    `json:"k"`
	Size     int    `json:"size"`
	Estimate int    `json:"estimate,omitempty"`
	Term     uint64 `json:"term,omitempty"`
	Leaving  bool   `json:"leaving,omitempty"`
}

// check reports what is wrong with s's encoded fields, if anything.
func (s Summary) check() error {
	switch {
	case s.K < 0 || s.K > dhtselect.MaxK:
		return fmt.Errorf("%w: k = %d out of [0, %d]", ErrBadSummary, s.K, dhtselect.MaxK)
	case s.Size < 1 || s.Size > MaxClusterSize:
		return fmt.Errorf("%w: cluster size %d out of [1, %d]", ErrBadSummary, s.Size, MaxClusterSize)
	case s.Estimate < 0 || s.Estimate > MaxNetworkEstimate:
		return fmt.Errorf("%w: network estimate %d out of [0, %d]", ErrBadSummary, s.Estimate, MaxNetworkEstimate)
	}
	return nil
}

// Encode serialises s for the wire (Superpeer and ClusterKey are left
// out). It fails with ErrBadSummary for a summary receivers would reject.
func (s Summary) Encode() ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return json.Marshal(wireSummary{V: BackboneVersion, Seq: s.Seq, K: s.K, Size: s.Size, Estimate: s.Estimate, Term: s.Term, Leaving: s.Leaving})
}

// DecodeSummary parses and checks a summary published by origin (the
// message's signed origin, which becomes the Superpeer): size, version,
// encoding (nothing after the JSON value, numbers that fit), k in
// [0, dhtselect.MaxK], cluster size in [1, MaxClusterSize], estimate in
// [0, MaxNetworkEstimate]. The cluster key is origin's key masked to k.
// Errors wrap ErrBadSummary.
func DecodeSummary(origin peer.ID, data []byte) (Summary, error) {
	if origin == "" {
		return Summary{}, fmt.Errorf("%w: no origin (unsigned message)", ErrBadSummary)
	}
	if len(data) > MaxSummarySize {
		return Summary{}, fmt.Errorf("%w: %d bytes, limit %d", ErrBadSummary, len(data), MaxSummarySize)
	}
	var probe struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Summary{}, fmt.Errorf("%w: %v", ErrBadSummary, err)
	}
	if probe.V != BackboneVersion {
		return Summary{}, fmt.Errorf("%w: version %d, want %d", ErrBadSummary, probe.V, BackboneVersion)
	}
	var w wireSummary
	if err := json.Unmarshal(data, &w); err != nil {
		return Summary{}, fmt.Errorf("%w: %v", ErrBadSummary, err)
	}
	s := Summary{Superpeer: origin, K: w.K, Size: w.Size, Estimate: w.Estimate, Term: w.Term, Seq: w.Seq, Leaving: w.Leaving}
	if err := s.check(); err != nil {
		return Summary{}, err
	}
	s.ClusterKey = dhtselect.KeyOf(origin).Cluster(s.K)
	return s, nil
}

var summarySpec = feedSpec[Summary]{
	kind:   "summary",
	decode: DecodeSummary,
	encode: Summary.Encode,
	seq:    func(s Summary) uint64 { return s.Seq },
	setSeq: func(s *Summary, seq uint64) { s.Seq = seq },
	live:   func(s Summary) bool { return !s.Leaving },
	same: func(a, b Summary) bool {
		return a.K == b.K && a.Size == b.Size && a.Estimate == b.Estimate && a.Term == b.Term && a.Leaving == b.Leaving
	},
	// A first summary, a change of k or term, and a goodbye go out at
	// once; a change of size or estimate may wait for the minimum gap.
	urgent: func(old *Summary, s Summary) bool {
		return old == nil || old.K != s.K || old.Term != s.Term || s.Leaving
	},
	// Anyone may publish a summary under a fresh key, and every one of
	// them was held (a hostile-peer audit: 3,474 at once from one
	// publisher): a cluster holds at most maxClaimers live summaries of
	// new origins (an honest one has one claimer, two in a hand-over or a
	// split), and the backbone maxSummaries origins (the superpeers of a
	// swarm of a million at S = N/16, with room). Past them a new origin's
	// summary is ignored until older ones go (their TTL), unless the node
	// can vouch for it (BackboneConfig.Vouch): a flood can hide a new
	// superpeer the node has not met, but cannot exhaust memory.
	slot:       func(s Summary) string { return strconv.Itoa(s.K) + "/" + s.ClusterKey.String() },
	perSlot:    maxClaimers,
	maxOrigins: maxSummaries,
}

// maxClaimers and maxSummaries bound what a Backbone holds (summarySpec).
const (
	maxClaimers  = 8
	maxSummaries = 1 << 16
)

// BackboneConfig configures a Backbone.
type BackboneConfig struct {
	// Network names the overlay; it keeps topics of different overlays apart.
	Network string
	// Interval is the republish period of this superpeer's summary.
	Interval time.Duration
	// TTL is how long a summary stays without a refresh. Zero means three
	// intervals; it may not be shorter than Interval.
	TTL time.Duration
	// MinGap is the least time between two publications that Set calls
	// prompt by a change of size or estimate alone: such a change within
	// MinGap of the last publication goes out, coalesced with later ones,
	// when MinGap has passed (a cluster whose members come and go does not
	// flood the backbone). A first summary, a change of k or term, and the
	// goodbye go out at once regardless. Zero means Interval/4; negative
	// means no limit.
	MinGap time.Duration
	// Logger receives rejections (at debug level); nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of entry times and expiry; nil means time.Now. The
	// republish period runs on the real clock regardless.
	Now func() time.Time
	// Refuse, when set, names origins whose summaries are ignored (see
	// MembershipConfig.Refuse).
	Refuse func(origin peer.ID) bool
	// Rejected, when set, is told of every rejected summary and the peer
	// that sent it to us (see MembershipConfig.Rejected).
	Rejected func(from peer.ID, err error)
	// Vouch, when set, names the superpeers this node can vouch for (the
	// overlay: connected, or in its routing table). A cluster holds at
	// most 8 live summaries of new origins (see summarySpec); when it is
	// full, the summary of an origin Vouch names takes the place of one
	// whose origin it does not name, so that a flood of summaries under
	// fresh keys cannot keep out a superpeer the node knows of.
	Vouch func(origin peer.ID) bool
}

// Backbone keeps, from the backbone topic of one overlay, the latest
// summary of every superpeer, and publishes this superpeer's own. Only
// superpeers join it: a peer that becomes one joins (JoinBackbone), and
// one that steps down leaves (Close), saying goodbye.
type Backbone struct {
	*feed[Summary]
	now     func() time.Time
	changes chan struct{}
}

// newBackbone checks cfg and returns a Backbone without its feed, and the
// feed's configuration (for JoinBackbone and for tests).
func newBackbone(self peer.ID, cfg BackboneConfig) (*Backbone, feedConfig, error) {
	switch {
	case cfg.Network == "":
		return nil, feedConfig{}, fmt.Errorf("%w: empty network name", ErrBadConfig)
	case self == "":
		return nil, feedConfig{}, fmt.Errorf("%w: empty local peer ID", ErrBadConfig)
	case cfg.Interval <= 0:
		return nil, feedConfig{}, fmt.Errorf("%w: backbone interval %v, want > 0", ErrBadConfig, cfg.Interval)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 3 * cfg.Interval
	}
	if cfg.TTL < cfg.Interval {
		return nil, feedConfig{}, fmt.Errorf("%w: backbone TTL %v is shorter than the interval %v", ErrBadConfig, cfg.TTL, cfg.Interval)
	}
	if cfg.MinGap == 0 {
		cfg.MinGap = cfg.Interval / 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	b := &Backbone{now: cfg.Now, changes: make(chan struct{}, 1)}
	fc := feedConfig{
		topic: BackboneTopic(cfg.Network), self: self, interval: cfg.Interval, ttl: cfg.TTL, minGap: cfg.MinGap,
		now: cfg.Now, log: cfg.Logger, changed: b.notify, rejected: cfg.Rejected, refuse: cfg.Refuse, vouch: cfg.Vouch,
	}
	return b, fc, nil
}

// JoinBackbone joins the backbone topic of cfg.Network on ps, with a
// validator that rejects malformed summaries and ignores stale ones. self
// is the local peer, the author of ps's messages; ps should sign strictly
// (the default), since a summary's superpeer is its signed origin. Call Set
// to publish, and Close to leave.
func JoinBackbone(ps *pubsub.PubSub, self peer.ID, cfg BackboneConfig) (*Backbone, error) {
	b, fc, err := newBackbone(self, cfg)
	if err != nil {
		return nil, err
	}
	if b.feed, err = joinFeed(ps, fc, &summarySpec, nil); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Backbone) notify() {
	select {
	case b.changes <- struct{}{}:
	default:
	}
}

// Set sets this superpeer's summary: it is published at once if it changed
// (a change of size or estimate alone within the MinGap rule of
// BackboneConfig) and again every Interval. s.Superpeer must be empty or
// the local peer; s.ClusterKey must be empty or the local key masked to
// s.K (it is set so); s.Seq is the Backbone's to set. A summary receivers
// would reject is refused with ErrBadSummary. After Leave, or with
// s.Leaving, it is the goodbye that stands: see Leave.
func (b *Backbone) Set(ctx context.Context, s Summary) error {
	self := b.cfg.self
	if s.Superpeer != "" && s.Superpeer != self {
		return fmt.Errorf("%w: summary of %s, local peer is %s", ErrBadSummary, s.Superpeer, self)
	}
	if err := s.check(); err != nil {
		return err
	}
	ck := dhtselect.KeyOf(self).Cluster(s.K)
	if s.ClusterKey != (dhtselect.Key{}) && s.ClusterKey != ck {
		return fmt.Errorf("%w: cluster key %s is not the local key masked to k = %d", ErrBadSummary, s.ClusterKey, s.K)
	}
	s.Superpeer, s.ClusterKey = self, ck
	if s.Leaving {
		return b.Leave(ctx)
	}
	return b.set(ctx, &s)
}

// Leave publishes this superpeer's goodbye (Summary.Leaving): the others
// drop its summary at once. Later publications, periodic ones included,
// are goodbyes too, and Set changes nothing any more. Nothing is sent when
// Set was never called. It returns the publication's error.
func (b *Backbone) Leave(ctx context.Context) error {
	return b.seal(ctx, func(s *Summary) { s.Leaving = true })
}

// Summaries returns the live summaries, this superpeer's own included once
// set, sorted by cluster key and then superpeer. Goodbyes and summaries
// older than the TTL are left out.
func (b *Backbone) Summaries() []Summary {
	b.mu.Lock()
	var out []Summary
	b.tab.each(b.now(), func(_ peer.ID, s Summary) { out = append(out, s) })
	b.mu.Unlock()
	slices.SortFunc(out, func(a, c Summary) int {
		return cmp.Or(slices.Compare(a.ClusterKey[:], c.ClusterKey[:]), cmp.Compare(a.K, c.K), cmp.Compare(a.Superpeer, c.Superpeer))
	})
	return out
}

// Get returns superpeer p's live summary.
func (b *Backbone) Get(p peer.ID) (Summary, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tab.get(p, b.now())
}

// Left reports whether superpeer p said goodbye within the TTL.
func (b *Backbone) Left(p peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tab.withdrawn(p)
}

// Forget drops p's summary at once, for instance when the overlay found it
// dead; a later summary from p brings it back.
func (b *Backbone) Forget(p peer.ID) {
	if b.forget(p) {
		b.notify()
	}
}

// Changes is signalled (coalesced, capacity 1) when a summary appeared,
// went, or changed by more than a refresh.
func (b *Backbone) Changes() <-chan struct{} { return b.changes }

// Stats counts what the validator decided about other superpeers'
// summaries, and the summaries this one published.
func (b *Backbone) Stats() FeedStats { return b.stats() }

// closeTimeout bounds the goodbye's publication in Close.
const closeTimeout = 5 * time.Second

// Close says goodbye (Leave, unless already done; nothing when Set was
// never called), stops publishing and leaves the topic. A superpeer that
// steps down closes its Backbone.
func (b *Backbone) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var err error
	b.mu.Lock()
	sealed := b.sealed
	b.mu.Unlock()
	if !sealed {
		err = b.Leave(ctx)
	}
	return errors.Join(err, b.close())
}

// ClusterSizes returns the summaries as dhtselect.EstimateFromClusters
// takes them: k, cluster key and size of each.
func ClusterSizes(ss []Summary) []dhtselect.ClusterSize {
	out := make([]dhtselect.ClusterSize, len(ss))
	for i, s := range ss {
		out[i] = dhtselect.ClusterSize{K: s.K, Key: s.ClusterKey, Size: s.Size}
	}
	return out
}
