package node

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// Issue 19, findings 7 (sybils from one address) and 9 (non-members
// counted and asked): the machine's side. The live side is in
// overlay/sybil_test.go.

// sybilNet is a node "a" with three honest peers, each on its own
// address, all connected, and n sybils connected from one address, all
// announcing themselves and all in the routing table speaking the
// closer protocol: the filed attack.
func sybilNet(n int) (View, Routing) {
	v := view("a", "b", "c", "d")
	r := Routing{Addrs: map[peer.ID]string{"b": "10.0.0.2", "c": "10.0.0.3", "d": "10.0.0.4"}}
	for _, p := range []peer.ID{"b", "c", "d"} {
		r.Peers = append(r.Peers, RoutingPeer{ID: p, Connected: true, Closer: true})
	}
	for i := range n {
		p := peer.ID(fmt.Sprintf("sybil-%03d", i))
		v.Members = append(v.Members, Member{ID: p})
		r.Peers = append(r.Peers, RoutingPeer{ID: p, Connected: true, Closer: true})
		r.Addrs[p] = "10.6.6.6"
	}
	slices.SortFunc(v.Members, func(a, b Member) int { return cmpID(a.ID, b.ID) })
	r.Connected = len(r.Addrs)
	return v, r
}

func cmpID(a, b peer.ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func sybilConfig() Config {
	cfg := testConfig("a")
	cfg.Target = dhtselect.Target{Fraction: 0.5}
	cfg.MaxPerAddr = DefaultMaxPerAddr
	return cfg
}

// evaluated runs m for a few seconds with v and r, answering every lookup
// with the first peer the lookup may ask among answers (as a live lookup
// would end there), and returns the last state.
func evaluated(t *testing.T, m *Machine, v View, r Routing, answer peer.ID) State {
	t.Helper()
	m.Step(t0, r)
	m.Step(t0, v)
	_, rds := tick(m, t0, 6*time.Second, r, answer)
	var st State
	for _, rd := range rds {
		if rd.StateChanged {
			st = rd.State
		}
	}
	if st.Evaluations == 0 {
		t.Fatal("no evaluation")
	}
	return st
}

// TestSybilFloodMovesKByOne: 200 identities from one address, with valid
// announcements, in a swarm of 4 with --fraction 0.5 (the filed attack:
// the estimate went from 4 to 204, k from 1 to 7). The flooded address
// counts for nothing: the estimate stays 4, k does not move (the
// must-show: by one at most), and no sybil is a member of the node's
// cluster.
func TestSybilFloodMovesKByOne(t *testing.T) {
	v, r := sybilNet(0)
	before := evaluated(t, mustNew(t, sybilConfig()), v, r, "a")
	v, r = sybilNet(200)
	after := evaluated(t, mustNew(t, sybilConfig()), v, r, "a")
	if before.K != 1 || before.Size.N != 4 {
		t.Fatalf("honest swarm: k = %d, estimate %d, want 1 and 4", before.K, before.Size.N)
	}
	if after.K-before.K > 1 || after.Size.N != 4 {
		t.Errorf("with 200 sybils from one address: k = %d (was %d), estimate %d; want k moved by at most 1, estimate 4",
			after.K, before.K, after.Size.N)
	}
	for _, p := range after.Members {
		if len(p) > 5 && p[:5] == "sybil" {
			t.Errorf("sybil %s is a member of the cluster %v", p, after.Members)
		}
	}
}

// TestSybilNeverSuperpeer: a lookup that ends at an identity of a flooded
// address is no answer (its address flooded while the lookup ran), and a
// lookup may not ask such identities at all.
func TestSybilNeverSuperpeer(t *testing.T) {
	m := mustNew(t, sybilConfig())
	v, r := sybilNet(200)
	m.Step(t0, r)
	m.Step(t0, v)
	_, rds := tick(m, t0, 6*time.Second, r, "sybil-007")
	for _, rd := range rds {
		if rd.StateChanged && rd.State.Superpeer == "sybil-007" {
			t.Fatalf("a sybil became the superpeer: %+v", rd.State)
		}
		for _, l := range rd.Lookups {
			if l.MayAsk("sybil-007", true) {
				t.Error("a lookup may ask a sybil of a flooded address")
			}
			if !l.MayAsk("b", true) || !l.MayAsk("c", false) {
				t.Error("a lookup may not ask an honest member")
			}
		}
	}
}

// TestSybilsOutOfTheElectorate: with Quorum, the electorate of the
// node's cluster is its honest members alone, also when the first
// identities of the flood counted (and were remembered) before the rest
// arrived.
func TestSybilsOutOfTheElectorate(t *testing.T) {
	cfg := sybilConfig()
	cfg.Target = dhtselect.Target{Superpeers: 1}
	cfg.Election, cfg.Quorum = "bully", true
	m := mustNew(t, cfg)
	v, r := sybilNet(3) // under the limit: they count
	m.Step(t0, r)
	m.Step(t0, v)
	if got := m.configured(t0); got != 7 {
		t.Fatalf("3 identities from one address: %d configured, want 7", got)
	}
	v, r = sybilNet(200)
	m.Step(t0.Add(time.Second), r)
	m.Step(t0.Add(time.Second), v)
	electorate := m.clusterMembers(0, dhtselect.Key{}, true)
	want := []peer.ID{"a", "b", "c", "d"}
	dhtselect.SortByKey(want)
	if !slices.Equal(electorate, want) {
		t.Errorf("electorate of %d, want the honest %v", len(electorate), want)
	}
}

// TestUnseenMembersDoNotCount: a member announced on the topic but never
// seen on a connection (one host can relay announcements signed by any
// number of keys) does not count; the node itself always does.
func TestUnseenMembersDoNotCount(t *testing.T) {
	m := mustNew(t, sybilConfig())
	v, r := sybilNet(0)
	for i := range 100 {
		v.Members = append(v.Members, Member{ID: peer.ID(fmt.Sprintf("ghost-%03d", i))})
	}
	st := evaluated(t, m, v, r, "a")
	if st.Size.N != 4 {
		t.Errorf("estimate %d with 100 members never seen on a connection, want 4", st.Size.N)
	}
	m = mustNew(t, sybilConfig())
	st = evaluated(t, m, view("a"), Routing{}, "a")
	if st.Size.N != 1 || !slices.Equal(st.Members, []peer.ID{"a"}) {
		t.Errorf("alone: estimate %d, members %v; want 1 and itself", st.Size.N, st.Members)
	}
}

// TestNonMembersNotCounted (finding 9): routing-table peers that speak
// only the overlay's DHT prefix (no closer protocol) and do not announce
// themselves count neither for the size estimate nor as peers a lookup
// may ask; with the address accounting off too (it is another rule).
func TestNonMembersNotCounted(t *testing.T) {
	for _, limit := range []int{0, DefaultMaxPerAddr} {
		cfg := sybilConfig()
		cfg.MaxPerAddr = limit
		m := mustNew(t, cfg)
		v, r := sybilNet(0)
		for i := range 30 {
			p := peer.ID(fmt.Sprintf("kad-%02d", i))
			r.Peers = append(r.Peers, RoutingPeer{ID: p, Connected: true})
			r.Addrs[p] = fmt.Sprintf("10.1.0.%d", i)
		}
		st := evaluated(t, m, v, r, "a")
		if st.Size.N != 4 {
			t.Errorf("limit %d: estimate %d (%s) with 30 DHT-only peers in the table, want 4", limit, st.Size.N, st.Size.Source)
		}
		m.Step(t0.Add(time.Minute), Reevaluate{})
		m.Step(t0.Add(time.Minute), r)
		m.Tick(t0.Add(time.Minute))
		rd := m.Ready()
		if len(rd.Lookups) != 1 {
			t.Fatalf("limit %d: %d lookups, want 1", limit, len(rd.Lookups))
		}
		if l := rd.Lookups[0]; l.MayAsk("kad-00", false) || !l.MayAsk("kad-00", true) {
			t.Errorf("limit %d: MayAsk(DHT-only peer) = %v, MayAsk(one that speaks closer) = %v; want false, true",
				limit, l.MayAsk("kad-00", false), l.MayAsk("kad-00", true))
		}
	}
}

// TestUncountedPeersTakeRoom: routing-table peers that do not count
// still took their slots in the table's buckets. Three peers count; the
// table holds 20 more that speak only the overlay's DHT prefix (Closer
// false), all in the bucket of common prefix length 0 with the node's
// key, which they fill: the table does not hold every peer met, and the
// estimate is not the table's count taken as exact (it was 4,
// SourceRouting: dhtselect.EstimateSize counted only the refused as
// taking room). The view holds the node alone, so that the membership
// does not decide the estimate first.
func TestUncountedPeersTakeRoom(t *testing.T) {
	for _, limit := range []int{0, DefaultMaxPerAddr} {
		cfg := sybilConfig()
		cfg.MaxPerAddr = limit
		m := mustNew(t, cfg)
		_, r := sybilNet(0)
		self := dhtselect.KeyOf("a")
		for i := range dhtselect.BucketSize {
			p := peer.ID(fmt.Sprintf("kad-%02d", i))
			k := dhtselect.KeyOf(p)
			k[0] = k[0]&0x7f | ^self[0]&0x80 // first bit unlike the node's
			r.Peers = append(r.Peers, RoutingPeer{ID: p, Connected: true, Key: k})
			r.Addrs[p] = fmt.Sprintf("10.1.0.%d", i)
		}
		r.Connected = len(r.Addrs)
		st := evaluated(t, m, view("a"), r, "a")
		if st.Size.Source == dhtselect.SourceRouting {
			t.Errorf("limit %d: estimate %d from the routing table, taken as exact, with a bucket full of peers that do not count",
				limit, st.Size.N)
		}
		if st.Size.N < 4 {
			t.Errorf("limit %d: estimate %d (%s), below the 4 the table counts", limit, st.Size.N, st.Size.Source)
		}
	}
}

func TestAddrGroup(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"::ffff:10.1.2.3", "10.1.2.3"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"},
		{"::1", "::/64"},
	} {
		if got := AddrGroup(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("AddrGroup(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
	if AddrGroup(netip.Addr{}) != "" {
		t.Error("AddrGroup of the zero address is not empty")
	}
}

func TestMaxPerAddrNegative(t *testing.T) {
	cfg := testConfig("a")
	cfg.MaxPerAddr = -1
	if _, err := New(cfg); err == nil {
		t.Error("MaxPerAddr -1 accepted")
	}
}

// TestUnseenMatesAskedFor: cluster-mates announced but not connected
// (back after a partition: the cut closed their connections, and the
// heal opens none) are asked for (Ready.Connect), each at most once a
// ReevaluateInterval, those of other clusters never; once connected they
// count, and nothing more is asked. Without the rule they never counted
// again (peer testnet --scenario partition; TestPartitionHealReconnects in
// testnet).
func TestUnseenMatesAskedFor(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	cfg := sybilConfig()
	cfg.Target = dhtselect.Target{Superpeers: 2}
	self := dhtselect.KeyOf("a").Cluster(1)
	connected := Routing{Addrs: map[peer.ID]string{}}
	var mates, want []peer.ID // want: the mates not connected
	for i, id := range ids[1:] {
		p := peer.ID(id)
		if i%2 == 0 {
			connected.Addrs[p] = fmt.Sprintf("10.0.0.%d", i)
			connected.Peers = append(connected.Peers, RoutingPeer{ID: p, Connected: true, Closer: true})
		}
		if dhtselect.KeyOf(p).Cluster(1) == self {
			mates = append(mates, p)
			if _, ok := connected.Addrs[p]; !ok {
				want = append(want, p)
			}
		}
	}
	connected.Connected = len(connected.Addrs)
	if len(want) == 0 || len(want) == len(mates) {
		t.Fatalf("mates %v, %v of them not connected: want some of each", mates, want)
	}
	slices.Sort(want)
	m := mustNew(t, cfg)
	m.Step(t0, connected)
	m.Step(t0, view(ids...))
	// An evaluation every second (Reevaluate), each of which commits.
	asked := map[peer.ID]int{}
	var first []peer.ID
	evaluations := 0
	now := t0
	for ; now.Before(t0.Add(12 * time.Second)); now = now.Add(100 * time.Millisecond) {
		if now.Sub(t0)%time.Second == 0 {
			m.Step(now, Reevaluate{})
		}
		_, rds := tick(m, now, 0, connected, "a")
		for _, rd := range rds {
			if rd.StateChanged {
				evaluations++
			}
			if len(rd.Connect) > 0 && first == nil {
				first = rd.Connect
			}
			for _, p := range rd.Connect {
				if !slices.Contains(want, p) {
					t.Errorf("asked for %s, which is connected or of another cluster", p)
				}
				asked[p]++
			}
		}
	}
	if evaluations < 10 {
		t.Fatalf("%d evaluations in 12 s, want one a second", evaluations)
	}
	if !slices.Equal(first, want) {
		t.Errorf("first asked for %v, want the mates not connected %v", first, want)
	}
	for p, n := range asked {
		if n > 3 { // 12 s: at 0, 5 and 10 s at most
			t.Errorf("%s asked for %d times in 12 s, want at most once every %v", p, n, cfg.ReevaluateInterval)
		}
	}
	var rds []Ready
	// Connected now: they count, and nothing is asked.
	all := connected
	all.Addrs = maps.Clone(connected.Addrs)
	for i, p := range want {
		all.Addrs[p] = fmt.Sprintf("10.0.1.%d", i)
		all.Peers = append(all.Peers, RoutingPeer{ID: p, Connected: true, Closer: true})
	}
	all.Connected = len(all.Addrs)
	m.Step(now, all)
	m.Step(now, view(ids...))
	_, rds = tick(m, now, 12*time.Second, all, "a")
	var st State
	for _, rd := range rds {
		if len(rd.Connect) > 0 {
			t.Errorf("asked for %v, all connected", rd.Connect)
		}
		if rd.StateChanged {
			st = rd.State
		}
	}
	if len(st.Members) != len(mates)+1 {
		t.Errorf("members %v, want the %d mates and itself", st.Members, len(mates))
	}
	// Without the accounting every member counts: none is asked for.
	cfg.MaxPerAddr = 0
	m = mustNew(t, cfg)
	m.Step(t0, connected)
	m.Step(t0, view(ids...))
	_, rds = tick(m, t0, 12*time.Second, connected, "a")
	for _, rd := range rds {
		if len(rd.Connect) > 0 {
			t.Errorf("MaxPerAddr 0: asked for %v", rd.Connect)
		}
	}
}

// TestGhostClaimers: backbone summaries under fresh keys ground into a
// cluster, published by a hostile peer and never seen on a connection,
// neither enter the cluster's electorate nor take the place of a real
// other claimer as the registrar (a hostile-peer audit: under bully with
// quorum the ghosts left a lone superpeer without a majority, so without
// its role, for as long as they were published; without quorum it sent
// them 353 election messages in a minute). A ghost that is the only other
// claimer is still the registrar: registering is how a real claimer not
// seen yet gets connected.
func TestGhostClaimers(t *testing.T) {
	for _, quorum := range []bool{false, true} {
		cfg := testConfig("a")
		cfg.MaxPerAddr = DefaultMaxPerAddr
		cfg.Election, cfg.Quorum = "bully", quorum
		m := mustNew(t, cfg)
		r := Routing{Addrs: map[peer.ID]string{}}
		m.Step(t0, r)
		m.Step(t0, view("a"))
		now, _ := tick(m, t0, 3*time.Second, r, "a")
		if st := m.State(); st.Role != RoleSuperpeer {
			t.Fatalf("quorum %v: alone, role %v", quorum, st.Role)
		}
		ss := []Summary{{Superpeer: "a", K: 0, Size: 1}}
		var ghosts []peer.ID
		for i := range 3 {
			p := peer.ID(fmt.Sprintf("ghost-%d", i))
			ghosts = append(ghosts, p)
			ss = append(ss, Summary{Superpeer: p, K: 0, ClusterKey: dhtselect.KeyOf(p).Cluster(0), Size: 1})
		}
		m.Step(now, Backbone{Summaries: ss})
		sent, lost := 0, 0
		for end := now.Add(60 * time.Second); now.Before(end); now = now.Add(100 * time.Millisecond) {
			if m.Due(now) {
				m.Step(now, r)
			}
			m.Tick(now)
			rd := m.Ready()
			for _, l := range rd.Lookups {
				m.Step(now, LookupDone{Key: l.Key, Superpeer: "a", Queries: 1})
			}
			for _, o := range rd.Messages {
				sent++
				m.Step(now, SendFailed{To: peer.ID(o.Msg.To), Gen: o.Gen}) // a ghost has no host
			}
			if m.State().Role != RoleSuperpeer {
				lost++
			}
			if int(now.Sub(t0)/(100*time.Millisecond))%50 == 0 {
				m.Step(now, Backbone{Summaries: ss}) // republished every announce interval
			}
		}
		if lost > 0 || sent > 0 {
			t.Errorf("quorum %v: without its role %d ticks of 600, %d election messages sent to ghosts; want none", quorum, lost, sent)
		}
		if slices.ContainsFunc(m.el.peers, func(p peer.ID) bool { return slices.Contains(ghosts, p) }) {
			t.Errorf("quorum %v: electorate %v holds ghosts", quorum, m.el.peers)
		}
		if reg := m.Registrar(); !slices.Contains(ghosts, reg) {
			t.Errorf("quorum %v: registrar %q; want a ghost, the only other claimer (registering connects a real one)", quorum, reg)
		}
		// A real other claimer, seen on a connection, is the registrar
		// whatever the ghosts' keys.
		real := peer.ID("real")
		r.Addrs = map[peer.ID]string{real: "10.0.0.9"}
		m.Step(now, r)
		m.Step(now, Backbone{Summaries: append(slices.Clone(ss), Summary{Superpeer: real, K: 0, ClusterKey: dhtselect.KeyOf(real).Cluster(0), Size: 1})})
		if reg := m.Registrar(); reg != real {
			t.Errorf("quorum %v: registrar %q with a connected claimer; want %q", quorum, reg, real)
		}
	}
}

// TestOtherElectionNoElector: a member that says it runs another election
// than this node's (or none) is no elector of its cluster; one that says
// nothing (an older build) is.
func TestOtherElectionNoElector(t *testing.T) {
	cfg := testConfig("a")
	cfg.Election, cfg.Quorum = "bully", true
	m := mustNew(t, cfg)
	v := View{Members: []Member{
		{ID: "a", Election: "bully+quorum"}, {ID: "b", Election: "bully+quorum"}, {ID: "c", Election: "none"},
		{ID: "d"}, {ID: "e", Election: "bully"},
	}}
	m.Step(t0, Routing{})
	m.Step(t0, v)
	got := m.sameElection([]peer.ID{"a", "b", "c", "d", "e"})
	if want := []peer.ID{"a", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("sameElection = %v, want %v", got, want)
	}
	if len(m.otherElection) != 2 {
		t.Errorf("warned of %v, want c and e", m.otherElection)
	}
	if ElectionTag("", true) != "none" || ElectionTag("ring", false) != "ring" || ElectionTag("ring", true) != "ring+quorum" {
		t.Error("ElectionTag")
	}
}

// TestGhostSummariesNoEstimate: the backbone's estimate is at most twice
// what the node's own summary and those of superpeers seen on a
// connection say, so ghosts do not make it: summaries under fresh keys, 8
// a cluster at k+1 each claiming 2^20 members, made the working k theirs
// and moved k from 1 to 21 under --fraction 0.5 (the live ghost-backbone
// attack). Without the address accounting (the simulator) every summary
// counts, as before.
func TestGhostSummariesNoEstimate(t *testing.T) {
	half := func(bit byte, prefix string) peer.ID {
		for i := 0; ; i++ {
			p := peer.ID(fmt.Sprintf("%s-%d", prefix, i))
			if dhtselect.KeyOf(p)[0]>>7 == bit {
				return p
			}
		}
	}
	self, other := half(0, "self"), half(1, "other")
	ss := []Summary{
		{Superpeer: self, K: 1, ClusterKey: dhtselect.KeyOf(self).Cluster(1), Size: 2},
		{Superpeer: other, K: 1, ClusterKey: dhtselect.KeyOf(other).Cluster(1), Size: 2},
	}
	for i := range 32 {
		g := peer.ID(fmt.Sprintf("ghost-%d", i))
		ss = append(ss, Summary{Superpeer: g, K: 2, ClusterKey: dhtselect.KeyOf(g).Cluster(2), Size: 1 << 20})
	}
	for _, accounting := range []bool{true, false} {
		cfg := testConfig(string(self))
		if accounting {
			cfg.MaxPerAddr = DefaultMaxPerAddr
		}
		m := mustNew(t, cfg)
		m.Step(t0, Routing{Addrs: map[peer.ID]string{other: "10.0.0.2"}})
		m.Step(t0, Backbone{Summaries: ss})
		est, ok := m.backboneEstimate(dhtselect.Estimate{N: 2, Source: dhtselect.SourceRouting})
		switch {
		case accounting && (!ok || est.N != 4 || est.Source != dhtselect.SourceBackbone):
			t.Errorf("with the accounting: estimate %+v, %v; want 4 from the backbone, the ghosts left out", est, ok)
		case !accounting && (!ok || est.N < 1<<20):
			t.Errorf("without the accounting: estimate %+v, %v; want the ghosts' (every summary counts)", est, ok)
		}
	}
}

// TestOtherElectionNotExtra: a member that runs another election does not
// come back into the electorate as the lookup's answer, the current
// superpeer or the registrar (review: it did, past sameElection).
func TestOtherElectionNotExtra(t *testing.T) {
	cfg := testConfig("a")
	cfg.Election, cfg.Quorum = "bully", true
	m := mustNew(t, cfg)
	m.Step(t0, Routing{})
	m.Step(t0, View{Members: []Member{{ID: "a", Election: "bully+quorum"}, {ID: "b", Election: "none"}}})
	ck := dhtselect.KeyOf("b").Cluster(0)
	if got := m.electorate(0, ck, []peer.ID{"a", "b"}, "b", "b", "b"); slices.Contains(got, "b") {
		t.Errorf("electorate %v holds b, which runs no election", got)
	}
}

// TestFewVouchedKeepTheBackbone: a superpeer that can vouch for only a few
// of the backbone's summaries (its own and two in its routing table, of
// 32) and whose own estimate is a quarter of the network's still takes the
// whole backbone's estimate: the bound on unverified summaries includes
// the extrapolation of the vouched-for ones. Before, 13 of the 32
// superpeers of a 512-node live testnet in virtual time (own estimates of
// 112 to 243) refused the backbone's 512 and served on their own
// estimate, their members with them (bench's TestLiveScaleVirtual, 204
// nodes off by up to 78 %). Ghosts are still held to twice the bound.
func TestFewVouchedKeepTheBackbone(t *testing.T) {
	const k, size = 5, 16
	bySlot := map[int]peer.ID{}
	for i := 0; len(bySlot) < 1<<k; i++ {
		p := peer.ID(fmt.Sprintf("sp-%d", i))
		if s := int(dhtselect.KeyOf(p)[0] >> (8 - k)); bySlot[s] == "" {
			bySlot[s] = p
		}
	}
	var ss []Summary
	for _, p := range bySlot {
		ss = append(ss, Summary{Superpeer: p, K: k, ClusterKey: dhtselect.KeyOf(p).Cluster(k), Size: size})
	}
	self := bySlot[0]
	cfg := testConfig(string(self))
	cfg.MaxPerAddr = DefaultMaxPerAddr
	m := mustNew(t, cfg)
	m.Step(t0, Routing{Addrs: map[peer.ID]string{bySlot[1]: "10.0.0.2", bySlot[2]: "10.0.0.3"}})
	m.Step(t0, Backbone{Summaries: ss})
	own := dhtselect.Estimate{N: 120, Source: dhtselect.SourceRouting}
	est, ok := m.backboneEstimate(own)
	if !ok || est.N != size<<k || est.Source != dhtselect.SourceBackbone {
		t.Errorf("estimate %+v, %v; want %d from the whole backbone", est, ok, size<<k)
	}
	// Ghosts at k+1 claiming 2^20 each are still refused.
	for i := range 64 {
		g := peer.ID(fmt.Sprintf("ghost-%d", i))
		ss = append(ss, Summary{Superpeer: g, K: k + 1, ClusterKey: dhtselect.KeyOf(g).Cluster(k + 1), Size: 1 << 20})
	}
	m.Step(t0, Backbone{Summaries: ss})
	if est, ok := m.backboneEstimate(own); ok && est.N > 4*size<<k {
		t.Errorf("with ghosts: estimate %+v; want at most twice the bound", est)
	}
}
