package attack

import (
	"context"
	"slices"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
)

// TestGrindInto: every ghost falls in the cluster asked for, at its k;
// the same seed draws the same ghosts; bad arguments are refused.
func TestGrindInto(t *testing.T) {
	ctx := context.Background()
	ck := dhtselect.Key{0xa0} // prefix 101 at k = 3
	gs, err := GrindInto(ctx, GhostRand(1), 3, ck, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 5 {
		t.Fatalf("%d ghosts, want 5", len(gs))
	}
	for _, g := range gs {
		if g.K != 3 || g.Cluster() != ck || dhtselect.KeyOf(g.ID) != g.KadID {
			t.Errorf("ghost %s: k %d, cluster %s; want 3, %s", g.ID, g.K, g.Cluster(), ck)
		}
		if id, err := peer.IDFromPrivateKey(g.Key); err != nil || id != g.ID {
			t.Errorf("ghost %s: key gives %s, %v", g.ID, id, err)
		}
	}
	again, err := GrindInto(ctx, GhostRand(1), 3, ck, 5)
	if err != nil {
		t.Fatal(err)
	}
	other, err := GrindInto(ctx, GhostRand(2), 3, ck, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range gs {
		if again[i].ID != gs[i].ID {
			t.Errorf("ghost %d: %s, then %s from the same seed", i, gs[i].ID, again[i].ID)
		}
		if other[i].ID == gs[i].ID {
			t.Errorf("ghost %d: %s from seeds 1 and 2", i, gs[i].ID)
		}
	}
	for name, c := range map[string]struct {
		k  int
		ck dhtselect.Key
	}{"negative k": {-1, dhtselect.Key{}}, "k above MaxK": {dhtselect.MaxK + 1, dhtselect.Key{}}, "bits beyond k": {2, dhtselect.Key{0x20}}} {
		if _, err := GrindInto(ctx, GhostRand(1), c.k, c.ck, 1); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := GrindInto(cctx, GhostRand(1), 20, dhtselect.Key{}, 1); err == nil {
		t.Error("cancelled: no error")
	}
}

// TestSpreadOver: per ghosts in each cluster at k, no more, no fewer.
func TestSpreadOver(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ k, per int }{{0, 3}, {1, 2}, {4, 3}} {
		gs, err := SpreadOver(ctx, GhostRand(uint64(c.k)), c.k, c.per)
		if err != nil {
			t.Fatal(err)
		}
		if len(gs) != c.per<<c.k {
			t.Errorf("k %d, %d per cluster: %d ghosts, want %d", c.k, c.per, len(gs), c.per<<c.k)
		}
		count := map[dhtselect.Key]int{}
		for _, g := range gs {
			if g.K != c.k {
				t.Errorf("k %d: a ghost at %d", c.k, g.K)
			}
			count[g.Cluster()]++
			if i := clusterIndex(g.KadID, c.k); g.Cluster() != clusterKeyOf(i, c.k) {
				t.Errorf("k %d: ghost %s in cluster %d by index, %s by mask", c.k, g.ID, i, g.Cluster())
			}
		}
		if len(count) != 1<<c.k {
			t.Errorf("k %d: %d clusters, want %d", c.k, len(count), 1<<c.k)
		}
		for ck, n := range count {
			if n != c.per {
				t.Errorf("k %d: cluster %s has %d ghosts, want %d", c.k, ck, n, c.per)
			}
		}
	}
	if _, err := SpreadOver(ctx, GhostRand(1), MaxSpreadK+1, 1); err == nil {
		t.Error("k above MaxSpreadK: no error")
	}
}

// clusterKeyOf is the cluster key of the i-th cluster at k.
func clusterKeyOf(i, k int) dhtselect.Key {
	var key dhtselect.Key
	if k > 0 {
		v := uint32(i) << (32 - k)
		key[0], key[1], key[2], key[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	}
	return key
}

// TestGhostsAgainst: the plan against a victim at k = 1 (a swarm of two
// clusters): 7 ghosts in its cluster, 8 in each of the 4 clusters at
// k = 2; their summaries decode, under their own IDs as origins, to the
// clusters they were drawn for; and they outnumber the swarm's summaries
// at k together with the victim's ghosts, so that they take the working k
// of dhtselect.EstimateFromClusters (which the test logs).
func TestGhostsAgainst(t *testing.T) {
	victim, err := newGhost(GhostRand(99), 0)
	if err != nil {
		t.Fatal(err)
	}
	const k = 1
	gs, err := GhostsAgainst(context.Background(), GhostRand(7), victim.ID, k, GhostsPerCluster-1, GhostsPerCluster)
	if err != nil {
		t.Fatal(err)
	}
	own, spread := 0, 0
	cs := []dhtselect.ClusterSize{{K: k, Key: victim.KadID.Cluster(k), Size: 2}, {K: k, Key: dhtselect.Key{0x80} /* the other half */, Size: 2}}
	if victim.KadID[0] >= 0x80 {
		cs[1].Key = dhtselect.Key{}
	}
	for i, g := range gs {
		data, err := g.Summary(uint64(i+1), GhostSize)
		if err != nil {
			t.Fatal(err)
		}
		s, err := gossip.DecodeSummary(g.ID, data)
		if err != nil {
			t.Fatalf("ghost %d: %v", i, err)
		}
		if s.K != g.K || s.ClusterKey != g.Cluster() || s.Size != GhostSize || s.Superpeer != g.ID {
			t.Errorf("ghost %d: summary %+v; want k %d, cluster %s", i, s, g.K, g.Cluster())
		}
		switch {
		case g.K == k && g.Cluster() == victim.KadID.Cluster(k):
			own++
		case g.K == k+1:
			spread++
		default:
			t.Errorf("ghost %d at k %d, cluster %s: neither the victim's nor at k+1", i, g.K, g.Cluster())
		}
		cs = append(cs, dhtselect.ClusterSize{K: s.K, Key: s.ClusterKey, Size: s.Size})
	}
	if own != GhostsPerCluster-1 || spread != GhostsPerCluster<<(k+1) {
		t.Errorf("%d ghosts in the victim's cluster, %d at k+1; want %d and %d", own, spread, GhostsPerCluster-1, GhostsPerCluster<<(k+1))
	}
	if spread <= own+2 {
		t.Errorf("%d ghosts at k+1 do not outnumber the %d summaries at k", spread, own+2)
	}
	est, ok := dhtselect.EstimateFromClusters(cs)
	t.Logf("a swarm of 4 at k = 1 under the ghosts: the backbone estimates %d (%s, %v)", est.N, est.Source, ok)
	if _, err := GhostsAgainst(context.Background(), GhostRand(7), victim.ID, MaxSpreadK, 1, 1); err == nil {
		t.Error("k = MaxSpreadK: no error")
	}
}

// TestTokenBucket: events at a rate, spaced evenly; a late event waits
// for nothing and saves up no burst.
func TestTokenBucket(t *testing.T) {
	var b tokenBucket
	t0 := time.Unix(1000, 0)
	for i, want := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond} {
		if got := b.take(t0, 10); got != want {
			t.Errorf("event %d: wait %v, want %v", i, got, want)
		}
	}
	late := t0.Add(10 * time.Second)
	for i, want := range []time.Duration{0, 100 * time.Millisecond} {
		if got := b.take(late, 10); got != want {
			t.Errorf("after a pause, event %d: wait %v, want %v", i, got, want)
		}
	}
}

// TestFlowTracer: a peer's queue is what was queued to it and not
// written; wait returns once every queue is below the limit, and writes
// off the queues when none of them drains.
func TestFlowTracer(t *testing.T) {
	var f flowTracer
	for range 5 {
		f.SendRPC(nil, "a")
	}
	f.SendRPC(nil, "b")
	f.SendRPCCompleted(nil, "a", 0)
	f.DropRPC(nil, "a")
	if d := f.deepest(); d != 4 || f.sent.Load() != 6 || f.dropped.Load() != 1 {
		t.Fatalf("deepest %d, sent %d, dropped %d; want 4, 6, 1", d, f.sent.Load(), f.dropped.Load())
	}
	ctx := context.Background()
	if !f.wait(ctx, 5, time.Second) {
		t.Error("wait below the limit: false")
	}
	go func() {
		for range 2 {
			time.Sleep(5 * time.Millisecond)
			f.SendRPCCompleted(nil, "a", 0)
		}
	}()
	if !f.wait(ctx, 3, time.Minute) { // the minute bounds a hang
		t.Error("wait for a queue that drains: false")
	}
	if d := f.deepest(); d >= 3 {
		t.Errorf("after wait, a queue of %d; want below 3", d)
	}
	f.RemovePeer("a")
	if d := f.deepest(); d != 1 {
		t.Errorf("a gone, the deepest queue is %d; want b's 1", d)
	}
	if f.wait(ctx, 1, 10*time.Millisecond) {
		t.Error("wait for a stalled queue: true")
	}
	if d := f.deepest(); d != 0 {
		t.Errorf("after a stall, a queue of %d; want 0 (written off)", d)
	}
}

// TestStartGhosts: ghosts' summaries, published from one host under the
// ghosts' keys, pass the overlay's own backbone (gossip.JoinBackbone: its
// validator and its bounds) on a plain GossipSub host: it holds every
// ghost of the plan, each under its own ID and cluster, and no more than
// GhostsPerCluster of a cluster when more are published.
func TestStartGhosts(t *testing.T) {
	if testing.Short() {
		t.Skip("real hosts")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // against hangs
	defer cancel()
	h, err := NewHost()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ps, err := pubsub.NewGossipSub(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := gossip.JoinBackbone(ps, h.ID(), gossip.BackboneConfig{Network: "default", Interval: time.Second, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer bb.Close()
	own, err := GrindInto(ctx, GhostRand(3), 1, dhtselect.KeyOf(h.ID()).Cluster(1), GhostsPerCluster+3)
	if err != nil {
		t.Fatal(err)
	}
	spread, err := SpreadOver(ctx, GhostRand(4), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	ghosts := append(own, spread...)
	p, err := StartGhosts(ctx, GhostConfig{Network: "default", Peers: []peer.AddrInfo{{ID: h.ID(), Addrs: h.Addrs()}}, MaxRate: 500}, ghosts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := GhostsPerCluster + len(spread) // the bound holds the first 8 of own
	waitFor(t, "the backbone to hold the ghosts", func() bool { return len(bb.Summaries()) >= want && p.Stats().Rounds >= 3 })
	ss := bb.Summaries()
	if len(ss) != want {
		t.Errorf("%d summaries held, want %d", len(ss), want)
	}
	byID := map[peer.ID]Ghost{}
	for _, g := range ghosts {
		byID[g.ID] = g
	}
	inOwn := 0
	for _, s := range ss {
		g, ok := byID[s.Superpeer]
		switch {
		case !ok:
			t.Errorf("summary of %s, no ghost", s.Superpeer)
		case s.K != g.K || s.ClusterKey != g.Cluster() || (s.Size != GhostSize && s.Size != GhostSize-1):
			t.Errorf("summary %+v of ghost at k %d, cluster %s", s, g.K, g.Cluster())
		case slices.ContainsFunc(own, func(o Ghost) bool { return o.ID == g.ID }):
			inOwn++
		}
	}
	if inOwn != GhostsPerCluster {
		t.Errorf("%d of %d ghosts of one cluster held, want %d (the bound)", inOwn, len(own), GhostsPerCluster)
	}
	st := p.Stats()
	t.Logf("%+v; backbone %+v", st, bb.Stats())
	if st.Published == 0 || len(p.BackbonePeers()) != 1 {
		t.Errorf("stats %+v, backbone peers %v", st, p.BackbonePeers())
	}
}
