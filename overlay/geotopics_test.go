package overlay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/serf/coordinate"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/internal/bubble"
	"github.com/superpeer/superpeer/overlay/node"
)

// TestGeometricClusterTopicsLive (issue 20): eight nodes on mocknet, in
// two groups of four (5 ms each way inside a group, 40 ms across), two
// tokens, in virtual time. Once settled, the token topics each node's
// GossipSub router is subscribed to are the ones its machine names: a
// superpeer, the backbone (gossip.TokenTopic) and its own cluster's
// (gossip.ClusterTopic of its token); an ordinary member, its
// superpeer's cluster topic and not the backbone, and it hears its
// superpeer's report there; and every ordinary node is still attached to
// a superpeer that lists it. Then the superpeer of token 1 leaves (it
// hands its token on): the seven left settle so again. A driver that
// ignored GeoReady.Topics (the backbone for everyone) fails it.
func TestGeometricClusterTopicsLive(t *testing.T) { clusterTopicsLive(t, false) }

// TestGeometricClusterTopicsCrashLive is TestGeometricClusterTopicsLive,
// then the superpeer of token 0 is cut off from every other node, as if
// it crashed (its members hear nothing more on their cluster's topic; the
// token is missing from the backbone): the six left settle so again.
// It failed about one run in twenty (1 of 60) while a node that began to
// hear the backbone took the tokens it had not heard within an announce
// interval and two token intervals for missing: the one that took token
// 0 over then had token 1 re-homed as its sponsor, and two superpeers
// held it for good, one by passes, one by the placement. 100 of 100 pass
// since it waits a report's TTL (overlay/node's complete).
func TestGeometricClusterTopicsCrashLive(t *testing.T) { clusterTopicsLive(t, true) }

func clusterTopicsLive(t *testing.T, crash bool) {
	bubble.Test(t, func(t *testing.T) {
		mn, hosts := mocknetWith(t, 8, func(i, j int) time.Duration {
			if i/4 == j/4 {
				return 5 * time.Millisecond
			}
			return 40 * time.Millisecond
		})
		nodes := mocknetNodesOn(t, hosts, func(int) []Option {
			return []Option{
				WithLogger(quiet), WithStrategy(StrategyGeometric),
				WithTarget(dhtselect.Target{Superpeers: 2}), WithIntervals(300*time.Millisecond, time.Second),
				WithGeometric(geometric.Config{}, 50*time.Millisecond, 100*time.Millisecond),
			}
		})
		network := nodes[0].cfg.Network
		backbone := gossip.TokenTopic(network)
		// subscribed is the overlay's token topics n's router is
		// subscribed to, sorted.
		subscribed := func(n *Node) []string {
			ps, err := n.pubSub()
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, topic := range ps.GetTopics() {
				if _, ok := gossip.ClusterTopicToken(network, topic); ok || topic == backbone {
					out = append(out, topic)
				}
			}
			slices.Sort(out)
			return out
		}
		// settled reports what is not yet as it should be among nodes ("":
		// all is).
		settled := func(nodes []*Node) string {
			supers := map[peer.ID]State{}
			for _, n := range nodes {
				if s := n.State(); s.Role == RoleSuperpeer {
					supers[n.ID()] = s
				}
			}
			if len(supers) != 2 {
				return fmt.Sprintf("%d superpeers, want 2", len(supers))
			}
			for _, n := range nodes {
				s := n.State()
				got := subscribed(n)
				if sp, ok := supers[n.ID()]; ok {
					want := []string{backbone, gossip.ClusterTopic(network, sp.Token)}
					slices.Sort(want)
					if !slices.Equal(got, want) {
						return fmt.Sprintf("superpeer %s (token %d) subscribed to %q, want %q", n.ID().ShortString(), sp.Token, got, want)
					}
					continue
				}
				sp, ok := supers[s.Superpeer.ID]
				switch {
				case !ok:
					return fmt.Sprintf("%s attached to %q, not a superpeer", n.ID().ShortString(), s.Superpeer.ID.ShortString())
				case !slices.Contains(sp.Members, n.ID()):
					return fmt.Sprintf("%s attached to %s, which does not list it", n.ID().ShortString(), s.Superpeer.ID.ShortString())
				case s.Token >= 0:
					return fmt.Sprintf("%s holds token %d", n.ID().ShortString(), s.Token)
				}
				if want := []string{gossip.ClusterTopic(network, sp.Token)}; !slices.Equal(got, want) {
					return fmt.Sprintf("member %s of %s (token %d) subscribed to %q, want %q", n.ID().ShortString(), s.Superpeer.ID.ShortString(), sp.Token, got, want)
				}
				if !slices.ContainsFunc(n.geo.feeds.reports(), func(tp gossip.TokenPos) bool {
					return tp.Holder == s.Superpeer.ID && tp.Token.Num == sp.Token
				}) {
					return fmt.Sprintf("member %s does not hear its superpeer %s's report", n.ID().ShortString(), s.Superpeer.ID.ShortString())
				}
			}
			return ""
		}
		show := func(nodes []*Node) string {
			var sb strings.Builder
			for _, n := range nodes {
				s := n.State()
				fmt.Fprintf(&sb, "\n%s: %s, superpeer %s, token %d, topics %q, %d peers connected", n.ID().ShortString(), s.Role, s.Superpeer.ID.ShortString(), s.Token, subscribed(n),
					len(n.Host().Network().Peers()))
				for _, tp := range n.geo.feeds.reports() {
					fmt.Fprintf(&sb, "\n    report %s token %d seq %x super %v published %v", tp.Holder.ShortString(), tp.Token.Num, tp.Token.Seq, tp.Superpeer, time.Unix(0, int64(tp.Seq)).UTC())
				}
			}
			return sb.String()
		}
		// waitSettled waits until nodes are settled at three checks in a
		// row, a second apart: not a moment between two changes.
		waitSettled := func(what string, nodes []*Node) {
			t.Helper()
			start := time.Now()
			var last string
			for stable := 0; stable < 3; {
				if time.Since(start) > 3*time.Minute {
					t.Fatalf("%s: not settled within 3 virtual minutes: %s%s", what, last, show(nodes))
				}
				time.Sleep(time.Second)
				if last = settled(nodes); last == "" {
					stable++
				} else {
					stable = 0
				}
			}
			t.Logf("%s: settled in %v (virtual)", what, time.Since(start))
		}
		waitSettled("start", nodes)

		var left *Node
		for _, n := range nodes {
			if s := n.State(); s.Role == RoleSuperpeer && s.Token == 1 {
				left = n
			}
		}
		if err := left.Close(); err != nil {
			t.Fatal(err)
		}
		nodes = slices.DeleteFunc(nodes, func(n *Node) bool { return n == left })
		waitSettled("the superpeer of token 1 left", nodes)
		if !crash {
			return
		}

		var cut *Node
		for _, n := range nodes {
			if s := n.State(); s.Role == RoleSuperpeer && s.Token == 0 {
				cut = n
			}
		}
		nodes = slices.DeleteFunc(nodes, func(n *Node) bool { return n == cut })
		for _, n := range nodes {
			if err := mn.UnlinkPeers(cut.ID(), n.ID()); err != nil {
				t.Fatal(err)
			}
			if err := mn.DisconnectPeers(cut.ID(), n.ID()); err != nil {
				t.Fatal(err)
			}
		}
		// And it stops as if it crashed: its loops and its GossipSub
		// router (mocknet lets a stream opened as its connection closes
		// live on, and GossipSub's streams are long-lived).
		cut.cancel()
		cut.psMu.Lock()
		cut.cancelPS()
		cut.psMu.Unlock()
		waitSettled("the superpeer of token 0 cut off", nodes)
	})
}

// geoFeeds over GossipSub (mocknet, virtual time): the node (host 0) hears
// the backbone until told otherwise; joining a cluster topic while it
// holds a token publishes its report there at once (the republication
// interval is far off), without the summary; of a holder's reports on
// the two topics it keeps one, the higher Token.Seq, else the
// backbone's; leaving the backbone unsubscribes the router and keeps its
// counts; after a release no report is set on a topic joined later; a
// topic that could not be joined is joined an interval later (retry).
func TestGeoFeeds(t *testing.T) {
	bubble.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		mn := mocknet.New()
		defer mn.Close()
		var hs []host.Host
		var pss []*pubsub.PubSub
		for range 3 {
			h, err := mn.GenPeer()
			if err != nil {
				t.Fatal(err)
			}
			ps, err := pubsub.NewGossipSub(ctx, h)
			if err != nil {
				t.Fatal(err)
			}
			hs, pss = append(hs, h), append(pss, ps)
		}
		if err := mn.LinkAll(); err != nil {
			t.Fatal(err)
		}
		if err := mn.ConnectAllButSelf(); err != nil {
			t.Fatal(err)
		}
		cfg := gossip.GeoConfig{Network: "test", Interval: time.Hour, MinGap: -1, Tokens: 2, Logger: quiet}
		f, err := joinGeoFeeds(pss[0], hs[0].ID(), cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		defer f.close()
		var others []*gossip.Geo
		join := func(i, cluster int) *gossip.Geo {
			var g *gossip.Geo
			var err error
			if cluster < 0 {
				g, err = gossip.JoinGeo(pss[i], hs[i].ID(), cfg)
			} else {
				g, err = gossip.JoinGeoCluster(pss[i], hs[i].ID(), cfg, cluster)
			}
			if err != nil {
				t.Fatal(err)
			}
			others = append(others, g)
			return g
		}
		defer func() {
			for _, g := range others {
				_ = g.Close()
			}
		}()
		b1, c1 := join(1, -1), join(1, 1) // host 1: a holder on both topics
		b2, c2, c20 := join(2, -1), join(2, 1), join(2, 0)
		synctest.Wait()
		time.Sleep(2 * time.Second) // subscriptions known, meshes built
		if all, cl := f.topics(); !all || cl != -1 {
			t.Fatalf("before the machine says: backbone %v, cluster %d; want the backbone only", all, cl)
		}
		// heardFrom is the report g keeps of host 0, if any.
		heardFrom := func(g *gossip.Geo) (gossip.TokenPos, bool) {
			for _, tp := range g.Reports() {
				if tp.Holder == hs[0].ID() {
					return tp, true
				}
			}
			return gossip.TokenPos{}, false
		}
		own := &gossip.TokenPos{Token: geometric.Token{Num: 1, Seq: 1 << 32}, Coord: coordinate.NewCoordinate(coordinate.DefaultConfig()), Superpeer: true,
			Capacity: 4, Summary: &geometric.ClusterSummary{Members: 1}}
		if err := f.publish(ctx, own); err != nil {
			t.Fatal(err)
		}
		waitVirtual(t, "the backbone to carry host 0's report", time.Second, func() bool { _, ok := heardFrom(b2); return ok })
		if _, ok := heardFrom(c2); ok {
			t.Fatal("host 0's report on a cluster topic it did not join")
		}
		f.set(ctx, node.GeoTopics{All: true, Cluster: 1})
		waitVirtual(t, "the cluster topic to carry host 0's report at once", time.Second, func() bool { _, ok := heardFrom(c2); return ok })
		if tp, _ := heardFrom(c2); tp.Summary != nil || tp.Token != own.Token {
			t.Errorf("on the cluster topic: %+v, want token %v without a summary", tp, own.Token)
		}
		if tp, _ := heardFrom(b2); tp.Summary == nil {
			t.Error("on the backbone: no summary")
		}
		// Host 0 is the superpeer of token 1: on token 1's topic it
		// publishes no load change (its members have it from its
		// answers), on the backbone it does.
		busier := *own
		busier.Load = 3
		if err := f.publish(ctx, &busier); err != nil {
			t.Fatal(err)
		}
		waitVirtual(t, "the backbone to carry the load change", time.Second, func() bool { tp, _ := heardFrom(b2); return tp.Load == 3 })
		time.Sleep(time.Second) // as long again for the cluster topic
		if tp, _ := heardFrom(c2); tp.Load != 0 {
			t.Errorf("the superpeer's own cluster topic carried a load change: %+v", tp)
		}
		if r, err := gossip.DecodeTokenPos(hs[0].ID(), f.ownReport()); err != nil || r.Load != 3 || r.Summary != nil || r.Token != own.Token {
			t.Errorf("the report for an attach answer: %+v, %v; want load 3 of token %v, no summary", r, err, own.Token)
		}

		// Host 1 reports token 0 on both topics: the higher Token.Seq is
		// kept, on a tie the backbone's.
		report := func(g *gossip.Geo, seq uint64, load int) {
			if err := g.SetToken(ctx, &gossip.TokenPos{Token: geometric.Token{Num: 0, Seq: seq << 32}, Coord: coordinate.NewCoordinate(coordinate.DefaultConfig()),
				Capacity: 4, Load: load}); err != nil {
				t.Fatal(err)
			}
		}
		heard1 := func() []gossip.TokenPos {
			var out []gossip.TokenPos
			for _, tp := range f.reports() {
				if tp.Holder == hs[1].ID() {
					out = append(out, tp)
				}
			}
			return out
		}
		one := func(seq uint64, load int) func() bool {
			return func() bool {
				r := heard1()
				return len(r) == 1 && r[0].Token.Seq == seq<<32 && r[0].Load == load
			}
		}
		report(b1, 1, 1)
		report(c1, 2, 2)
		waitVirtual(t, "the cluster topic's higher Token.Seq", time.Second, one(2, 2))
		report(b1, 2, 3)
		waitVirtual(t, "the backbone's report on a tie", time.Second, one(2, 3))
		if got := f.tokens(); len(got) != 2 || got[0].Holder != hs[1].ID() || got[1].Holder != hs[0].ID() {
			t.Errorf("tokens %+v, want token 0 of host 1 and token 1 of host 0", got)
		}

		// Leaving the backbone: the router is no longer subscribed, the
		// cluster's reports are still heard, the counts stay.
		before, _ := f.stats()
		f.set(ctx, node.GeoTopics{All: false, Cluster: 1})
		if all, cl := f.topics(); all || cl != 1 {
			t.Fatalf("backbone %v, cluster %d; want cluster 1 only", all, cl)
		}
		if slices.Contains(pss[0].GetTopics(), gossip.TokenTopic("test")) {
			t.Error("still subscribed to the backbone")
		}
		if !one(2, 2)() {
			t.Errorf("host 1's reports: %+v, want the cluster topic's", heard1())
		}
		if after, _ := f.stats(); after.Accepted < before.Accepted || after.Accepted == 0 {
			t.Errorf("backbone counts %+v after leaving it, %+v before", after, before)
		}

		// A release goes out on the topics joined; a topic joined after
		// gets no report.
		released := *own
		released.Released = true
		if err := f.publish(ctx, &released); err != nil {
			t.Fatal(err)
		}
		waitVirtual(t, "the release on the cluster topic", time.Second, func() bool { _, ok := heardFrom(c2); return !ok })
		f.set(ctx, node.GeoTopics{Cluster: 0})
		time.Sleep(time.Second)
		if tp, ok := heardFrom(c20); ok {
			t.Errorf("after a release, a topic joined later carries %+v", tp)
		}
		if got := pss[0].GetTopics(); !slices.Equal(got, []string{gossip.ClusterTopic("test", 0)}) {
			t.Errorf("subscribed to %q, want cluster 0's only", got)
		}

		// A topic that cannot be joined (here, a validator is registered
		// for it already) is joined by retry, an interval later.
		name := gossip.ClusterTopic("test", 1)
		if err := pss[0].RegisterTopicValidator(name, func(context.Context, peer.ID, *pubsub.Message) bool { return true }); err != nil {
			t.Fatal(err)
		}
		f.set(ctx, node.GeoTopics{Cluster: 1})
		if all, cl := f.topics(); all || cl != -1 {
			t.Fatalf("backbone %v, cluster %d; want none, the join having failed", all, cl)
		}
		if err := pss[0].UnregisterTopicValidator(name); err != nil {
			t.Fatal(err)
		}
		f.retry(ctx)
		if _, cl := f.topics(); cl != -1 {
			t.Fatalf("cluster %d: retried at once", cl)
		}
		time.Sleep(cfg.Interval)
		f.retry(ctx)
		if _, cl := f.topics(); cl != 1 {
			t.Fatalf("cluster %d an interval later, want 1", cl)
		}
		if err := f.close(); err != nil {
			t.Fatal(err)
		}
		if got := pss[0].GetTopics(); len(got) != 0 {
			t.Errorf("subscribed to %q after close", got)
		}
	})
}

// mergeReports: one report per holder; of the two topics', the higher
// Token.Seq, else the backbone's; the superpeer's relayed report over
// them at no lower Token.Seq, and not once a report heard passes its
// token on. geoFeeds keeps the relayed report for a report's TTL, or
// until its superpeer says no.
func TestGeoFeedsRelay(t *testing.T) {
	ids := testIDs(t, 3)
	sp, h, q := ids[0], ids[1], ids[2]
	co := coordinate.NewCoordinate(coordinate.DefaultConfig())
	pos := func(holder peer.ID, num int, seq uint64, load int) gossip.TokenPos {
		return gossip.TokenPos{Holder: holder, Token: geometric.Token{Num: num, Seq: seq}, Coord: co, Superpeer: true, Capacity: 8, Load: load}
	}
	loads := func(out []gossip.TokenPos) map[peer.ID]int {
		m := map[peer.ID]int{}
		for _, tp := range out {
			if _, dup := m[tp.Holder]; dup {
				t.Fatalf("two reports of %s: %+v", tp.Holder, out)
			}
			m[tp.Holder] = tp.Load
		}
		return m
	}
	relayed := pos(sp, 1, 1<<32, 7)
	for _, c := range []struct {
		name         string
		all, cluster []gossip.TokenPos
		want         map[peer.ID]int
	}{
		{"relayed only", nil, nil, map[peer.ID]int{sp: 7}},
		{"over an older publication", nil, []gossip.TokenPos{pos(sp, 1, 1<<32, 2)}, map[peer.ID]int{sp: 7}},
		{"the cluster's higher Token.Seq", []gossip.TokenPos{pos(h, 0, 1, 1)}, []gossip.TokenPos{pos(h, 0, 2, 2)}, map[peer.ID]int{h: 2, sp: 7}},
		{"the backbone's on a tie", []gossip.TokenPos{pos(h, 0, 2, 3)}, []gossip.TokenPos{pos(h, 0, 2, 2)}, map[peer.ID]int{h: 3, sp: 7}},
		{"a heard report of the superpeer at a higher Token.Seq", nil, []gossip.TokenPos{pos(sp, 1, 1<<32|1, 2)}, map[peer.ID]int{sp: 2}},
		{"the token passed on", nil, []gossip.TokenPos{pos(q, 1, 1<<32|1, 0)}, map[peer.ID]int{q: 0}},
	} {
		if got := loads(mergeReports(c.all, c.cluster, &relayed)); !maps.Equal(got, c.want) {
			t.Errorf("%s: holders and loads %v, want %v", c.name, got, c.want)
		}
	}
	bubble.Test(t, func(t *testing.T) {
		f := &geoFeeds{self: q, cfg: gossip.GeoConfig{Network: "test", Interval: 5 * time.Second}, log: quiet, clusterNum: -1}
		has := func() bool { return len(f.reports()) == 1 }
		tp := relayed
		f.relay(sp, &tp)
		if !has() {
			t.Fatal("the relayed report not kept")
		}
		f.relay(h, nil)
		if !has() {
			t.Fatal("another superpeer's no dropped the relayed report")
		}
		f.relay(sp, nil)
		if has() {
			t.Fatal("the superpeer's no kept its relayed report")
		}
		f.relay(sp, &tp)
		time.Sleep(14 * time.Second)
		if !has() {
			t.Fatal("the relayed report gone before a TTL (15 s)")
		}
		time.Sleep(time.Second)
		if has() {
			t.Fatal("the relayed report kept for a TTL")
		}
	})
}
