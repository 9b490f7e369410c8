package overlay

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// geoFeeds are the token topics a geometric node hears (node.GeoTopics,
// overlay/node's geobackbone.go): the backbone (gossip.TokenTopic, every
// holder's report) and the topic of its cluster (gossip.ClusterTopic), 0,
// 1 or 2 of them, each a gossip.Geo, joined and left as the machine's
// GeoReady.Topics says (set). The node's own report goes on every topic
// joined (publish), the last one as soon as a topic is joined; what the
// machine hears is the union of the topics' reports, one per holder
// (reports). Until the machine first says, the node hears the backbone
// alone.
//
// set and publish run on the node's loop (and, once it stopped, in
// leave); the readers (the feed of an attach request's handler, the
// status pages) run anywhere: the feeds are swapped under mu.
type geoFeeds struct {
	ps   *pubsub.PubSub
	self peer.ID
	cfg  gossip.GeoConfig
	log  *slog.Logger

	mu sync.Mutex
	// all is the backbone's feed and cluster the cluster topic's (nil:
	// not joined), the topic of token clusterNum (-1: none).
	all, cluster *gossip.Geo
	clusterNum   int
	// last is the report the node publishes (nil: none), set on a topic
	// joined later.
	last *gossip.TokenPos
	// gone are the counts of the feeds left, so that the counters of
	// Stats only grow: the backbone's and the cluster topics'.
	goneAll, goneCluster gossip.FeedStats
	// want are the topics the machine named last, and failed when a
	// topic of them could not be joined (zero: all were): retry joins
	// again an interval later.
	want   node.GeoTopics
	failed time.Time
	// relayed is the report of the superpeer that last said yes to an
	// attach request, with its answer (relay): a superpeer publishes on
	// its own cluster's topic only a new token, a promotion and a release
	// (quiet), and its members have its report from its answers.
	relayed   *gossip.TokenPos
	relayedAt time.Time
}

// joinGeoFeeds joins the backbone, as a node does until its machine says
// which topics it hears.
func joinGeoFeeds(ps *pubsub.PubSub, self peer.ID, cfg gossip.GeoConfig, log *slog.Logger) (*geoFeeds, error) {
	f := &geoFeeds{ps: ps, self: self, cfg: cfg, log: log, clusterNum: -1, want: node.GeoTopics{All: true, Cluster: -1}}
	all, err := gossip.JoinGeo(ps, self, cfg)
	if err != nil {
		return nil, err
	}
	f.all = all
	return f, nil
}

// set joins and leaves topics so that the node hears exactly t's: the
// topics joined get the node's report at once, and the ones left are
// closed (the report published there expires at their readers; a
// release was published before, by publish). A topic that cannot be
// joined is logged and left out (retry joins it later). A cluster outside
// [0, S) is none.
func (f *geoFeeds) set(ctx context.Context, t node.GeoTopics) {
	if t.Cluster >= f.cfg.Tokens {
		f.log.Warn("geometric: cluster topic of a token out of range", "cluster", t.Cluster, "tokens", f.cfg.Tokens)
	}
	if t.Cluster < 0 || t.Cluster >= f.cfg.Tokens {
		t.Cluster = -1
	}
	f.mu.Lock()
	all, cluster, num, last := f.all, f.cluster, f.clusterNum, f.last
	f.want = t
	f.mu.Unlock()
	var leftAll, leftCluster *gossip.Geo
	if t.All && all == nil {
		all = f.join(ctx, -1, last)
	} else if !t.All && all != nil {
		leftAll, all = all, nil
	}
	if cluster != nil && num != t.Cluster {
		leftCluster, cluster, num = cluster, nil, -1
	}
	if cluster == nil && t.Cluster >= 0 {
		if cluster = f.join(ctx, t.Cluster, last); cluster != nil {
			num = t.Cluster
		}
	}
	f.mu.Lock()
	if leftAll != nil {
		f.goneAll = addStats(f.goneAll, leftAll.Stats())
	}
	if leftCluster != nil {
		f.goneCluster = addStats(f.goneCluster, leftCluster.Stats())
	}
	f.all, f.cluster, f.clusterNum = all, cluster, num
	f.failed = time.Time{}
	if t.All != (all != nil) || t.Cluster != num {
		f.failed = time.Now()
	}
	f.mu.Unlock()
	for _, g := range []*gossip.Geo{leftAll, leftCluster} {
		if g == nil {
			continue
		}
		if err := g.Close(); err != nil {
			f.log.Warn("geometric: leave token topic", "topic", g.Topic(), "err", err)
		}
	}
	f.log.Debug("geometric: token topics", "backbone", all != nil, "cluster", num)
}

// retry joins the topics the machine named last that could not be joined,
// an interval after the last try.
func (f *geoFeeds) retry(ctx context.Context) {
	f.mu.Lock()
	due := !f.failed.IsZero() && time.Since(f.failed) >= f.cfg.Interval
	want := f.want
	f.mu.Unlock()
	if due {
		f.set(ctx, want)
	}
}

// join joins the backbone (cluster < 0) or the topic of cluster, and sets
// the report last on it (nil: none); nil if it cannot.
func (f *geoFeeds) join(ctx context.Context, cluster int, last *gossip.TokenPos) *gossip.Geo {
	var g *gossip.Geo
	var err error
	if cluster < 0 {
		g, err = gossip.JoinGeo(f.ps, f.self, f.cfg)
	} else {
		g, err = gossip.JoinGeoCluster(f.ps, f.self, f.cfg, cluster)
	}
	if err != nil {
		f.log.Warn("geometric: join token topic", "cluster", cluster, "err", err)
		return nil
	}
	if cluster >= 0 {
		g.SetQuiet(quietOn(last, cluster))
	}
	if last != nil {
		if err := g.SetToken(ctx, forTopic(last, cluster >= 0)); err != nil && ctx.Err() == nil {
			f.log.Warn("geometric: publish token", "topic", g.Topic(), "err", err)
		}
	}
	return g
}

// forTopic is the report tp as published on a topic: on a cluster's,
// without the summary, which only superpeers read (relocation, on the
// backbone).
func forTopic(tp *gossip.TokenPos, cluster bool) *gossip.TokenPos {
	if !cluster || tp.Summary == nil {
		return tp
	}
	c := *tp
	c.Summary = nil
	return &c
}

// quietOn says whether the node's report last goes quietly on the topic
// of cluster (gossip.Geo.SetQuiet): when it is the superpeer of that
// cluster. Its members then have the report from its answers to their
// attach requests (ownReport, relay), once an announce interval; the
// topic carries what they must hear at once. On a cluster's topic the
// superpeer's republication was most of what a member received (1.5 KB/s
// of its 3.1: each report came from up to six mesh peers).
func quietOn(last *gossip.TokenPos, cluster int) bool {
	return last != nil && last.Superpeer && !last.Released && last.Token.Num == cluster
}

// publish sets the node's report (nil: none) on every topic joined, and
// keeps it for the topics joined later; a release is published once, and
// then none is kept.
func (f *geoFeeds) publish(ctx context.Context, tp *gossip.TokenPos) error {
	f.mu.Lock()
	f.last = tp
	if tp != nil && tp.Released {
		f.last = nil
	}
	all, cluster, num := f.all, f.cluster, f.clusterNum
	f.mu.Unlock()
	var errs []error
	if all != nil {
		errs = append(errs, all.SetToken(ctx, tp))
	}
	if cluster != nil {
		cluster.SetQuiet(quietOn(tp, num))
		if tp != nil {
			tp = forTopic(tp, true)
		}
		errs = append(errs, cluster.SetToken(ctx, tp))
	}
	return errors.Join(errs...)
}

// ownReport is the node's report as its answer to an attach request
// carries it (readReport): as published on a cluster's topic, under a
// fresh publication sequence; nil when the node is no superpeer.
func (f *geoFeeds) ownReport() []byte {
	f.mu.Lock()
	last := f.last
	f.mu.Unlock()
	if last == nil || !last.Superpeer {
		return nil
	}
	tp := *forTopic(last, true)
	tp.Holder, tp.Seq = f.self, uint64(time.Now().UnixNano())
	data, err := tp.Encode()
	if err != nil {
		f.log.Warn("geometric: encode the report for an attach answer", "err", err)
		return nil
	}
	return data
}

// relay keeps superpeer p's report from its yes to an attach request
// (nil: p said no, and its report kept, if any, goes).
func (f *geoFeeds) relay(p peer.ID, tp *gossip.TokenPos) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case tp != nil:
		f.relayed, f.relayedAt = tp, time.Now()
	case f.relayed != nil && f.relayed.Holder == p:
		f.relayed = nil
	}
}

// joined are the feeds joined, the backbone first; under mu.
func (f *geoFeeds) joined() []*gossip.Geo {
	var out []*gossip.Geo
	for _, g := range []*gossip.Geo{f.all, f.cluster} {
		if g != nil {
			out = append(out, g)
		}
	}
	return out
}

// reports is every live report heard on the topics joined, the node's
// own included, and the report its superpeer relayed last (relay), for a
// report's TTL: one per holder, as mergeReports keeps them.
func (f *geoFeeds) reports() []gossip.TokenPos {
	f.mu.Lock()
	all, cluster, relayed := f.all, f.cluster, f.relayed
	if relayed != nil && time.Since(f.relayedAt) >= f.cfg.ReportTTL() {
		relayed, f.relayed = nil, nil
	}
	f.mu.Unlock()
	var heardAll, heardCluster []gossip.TokenPos
	if all != nil {
		heardAll = all.Reports()
	}
	if cluster != nil {
		heardCluster = cluster.Reports()
	}
	return mergeReports(heardAll, heardCluster, relayed)
}

// mergeReports is reports' rule: one report per holder of the backbone's
// (all), the cluster topic's and the superpeer's relayed one (nil: none),
// sorted by token number, then holder. Of a holder's reports on the two
// topics, the higher Token.Seq, else the backbone's; the relayed one over
// both, fresher (a coordinate, a load) at no lower Token.Seq, unless a
// report heard passes its token further on.
func mergeReports(all, cluster []gossip.TokenPos, relayed *gossip.TokenPos) []gossip.TokenPos {
	out := slices.Clone(all)
	at := make(map[peer.ID]int, len(out))
	for i, tp := range out {
		at[tp.Holder] = i
	}
	for _, tp := range cluster {
		i, ok := at[tp.Holder]
		switch {
		case !ok:
			at[tp.Holder] = len(out)
			out = append(out, tp)
		case tp.Token.Seq > out[i].Token.Seq:
			out[i] = tp
		}
	}
	if relayed != nil && !slices.ContainsFunc(out, func(tp gossip.TokenPos) bool {
		return tp.Token.Num == relayed.Token.Num && tp.Token.Seq > relayed.Token.Seq
	}) {
		i, ok := at[relayed.Holder]
		switch {
		case !ok:
			out = append(out, *relayed)
		case relayed.Token.Seq >= out[i].Token.Seq:
			out[i] = *relayed
		}
	}
	slices.SortFunc(out, func(a, b gossip.TokenPos) int {
		return cmp.Or(cmp.Compare(a.Token.Num, b.Token.Num), cmp.Compare(a.Holder, b.Holder))
	})
	return out
}

// tokens is one report per token number of reports, sorted by number: the
// highest Token.Seq, on a tie the smaller holder (gossip.Geo.Tokens'
// rule), for the status pages.
func (f *geoFeeds) tokens() []gossip.TokenPos {
	var out []gossip.TokenPos
	for _, tp := range f.reports() {
		if n := len(out); n > 0 && out[n-1].Token.Num == tp.Token.Num {
			if tp.Token.Seq > out[n-1].Token.Seq { // holders are sorted: a tie keeps the smaller
				out[n-1] = tp
			}
			continue
		}
		out = append(out, tp)
	}
	return out
}

// coords is the coordinate of every holder heard (the node's own
// included).
func (f *geoFeeds) coords() map[peer.ID]*coordinate.Coordinate {
	out := map[peer.ID]*coordinate.Coordinate{}
	for _, tp := range f.reports() {
		if tp.Coord != nil {
			out[tp.Holder] = tp.Coord
		}
	}
	return out
}

// coord is holder p's coordinate, if heard.
func (f *geoFeeds) coord(p peer.ID) (*coordinate.Coordinate, bool) {
	c, ok := f.coords()[p]
	return c, ok
}

// stats are the validators' counts of the backbone and of the cluster
// topics, the topics left included.
func (f *geoFeeds) stats() (backbone, cluster gossip.FeedStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	backbone, cluster = f.goneAll, f.goneCluster
	if f.all != nil {
		backbone = addStats(backbone, f.all.Stats())
	}
	if f.cluster != nil {
		cluster = addStats(cluster, f.cluster.Stats())
	}
	return backbone, cluster
}

// topics reports whether the node hears the backbone, and the token of
// the cluster topic it hears (-1: none).
func (f *geoFeeds) topics() (all bool, cluster int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.all != nil, f.clusterNum
}

// close leaves every topic.
func (f *geoFeeds) close() error {
	f.mu.Lock()
	feeds := f.joined()
	f.all, f.cluster, f.clusterNum = nil, nil, -1
	f.mu.Unlock()
	var errs []error
	for _, g := range feeds {
		errs = append(errs, g.Close())
	}
	return errors.Join(errs...)
}
