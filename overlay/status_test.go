package overlay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
)

// Two nodes on loopback with a bully election, and a status server on the
// second: /status agrees with its State and ElectionStats, /metrics parses
// and agrees too, and the election the node ran shows in both.
func TestStatusServer(t *testing.T) {
	ctx := context.Background()
	opts := func(boot ...ma.Multiaddr) []Option {
		return []Option{
			WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithBootstrapAddrs(boot...),
			WithTarget(dhtselect.Target{Superpeers: 1}), WithElection("bully", false),
			WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(quiet),
		}
	}
	a, err := New(ctx, opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(ctx, opts(a.P2PAddrs()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// b joins a network: it waits for its routing table before its first
	// evaluation, so the server sees its first election.
	srv, err := NewStatusServer(b)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	web := httptest.NewServer(srv)
	defer web.Close()

	want := dhtselect.Assign([]peer.ID{a.ID(), b.ID()}, 0)[0].Superpeer
	waitFor(t, "both nodes to elect "+want.String(), func() bool {
		for _, n := range []*Node{a, b} {
			if s := n.State(); s.Superpeer.ID != want || len(s.Members) != 2 || n.ElectionStats().Leader != want {
				return false
			}
		}
		return true
	})
	waitFor(t, "the server to see the election", func() bool {
		e := srv.Status().Election
		return e != nil && e.Elections >= 1 && e.Last != nil && e.Last.Leader == want.String()
	})

	// /status, /overview and /metrics, each compared with the State
	// and ElectionStats read before them, which must still hold after
	// them. The node runs on: when b took the cluster over from a, its
	// views follow the hand-over a moment after the election (the size
	// estimate's source, its registry, the roles it holds for a, the
	// backbone), and the reads may straddle a change. So all of them are
	// read again until one round agrees, for up to a minute; a mismatch
	// that lasts fails the test with what disagreed.
	var errs []string
	errf := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	check := func() {
		errs = nil
		st, es := b.State(), b.ElectionStats()
		var got Status
		if err := json.Unmarshal(httpGet(t, web.URL+"/status", "application/json"), &got); err != nil {
			t.Fatalf("/status: %v", err)
		}
		members := make([]string, len(st.Members))
		for i, p := range st.Members {
			members[i] = p.String()
		}
		if got.ID != b.ID().String() || got.Network != b.cfg.Network || got.Strategy != StrategyDHT || got.Role != st.Role ||
			got.Superpeer.ID != want.String() || len(got.Superpeer.Addrs) == 0 || !slices.Equal(got.Members, members) ||
			got.Cluster.K != st.K || got.Cluster.Prefix != st.Prefix || got.Cluster.Key != st.ClusterKey.String() ||
			got.Cluster.TargetSuperpeers != st.S || got.SizeEstimate.N != st.Size.N || got.SizeEstimate.Source != st.Size.Source ||
			got.Coord != nil || got.Token != nil || got.Evaluations < 1 || got.Lookups < 1 {
			errf("/status = %+v\nState = %+v", got, st)
		}
		if e := got.Election; e == nil || e.Algorithm != "bully" || e.Leader != want.String() || e.Term != es.Term ||
			e.TimeoutMS <= 0 || e.Elections < 1 || e.Last == nil || e.Last.Leader != want.String() || e.Last.Term != es.Term ||
			e.Last.Time.IsZero() {
			errf("/status election = %+v, ElectionStats = %+v", got.Election, es)
		}
		if r := got.RTTToSuperpeer; r != nil && (st.Role != RoleOrdinary || r.MS <= 0 || r.Source != "peerstore") {
			errf("/status RTT to the superpeer %+v for role %v", got.RTTToSuperpeer, st.Role)
		}
		// The map's peers: both nodes, this one marked, roles as elected.
		if len(got.Peers) != 2 {
			errf("/status peers = %+v, want both nodes", got.Peers)
			return
		}
		for _, p := range got.Peers {
			wantRole := RoleOrdinary
			if p.ID == want.String() {
				wantRole = RoleSuperpeer
			}
			if p.Self != (p.ID == b.ID().String()) || p.Role != wantRole || p.Superpeer != want.String() {
				errf("/status peer %+v: want role %v, superpeer %s", p, wantRole, want)
			}
		}

		// /overview: the node's own cluster in detail, stable, with both
		// nodes, this one marked; the node's status without its peer list; a
		// layout with the cluster and its label; the server's time line.
		var ov Overview
		if err := json.Unmarshal(httpGet(t, web.URL+"/overview", "application/json"), &ov); err != nil {
			t.Fatalf("/overview: %v", err)
		}
		if ov.Source != "node" || ov.Node == nil || ov.Node.ID != b.ID().String() || ov.Node.Peers != nil || len(ov.Clusters) != 1 ||
			len(ov.Layout.Clusters) != 1 || len(ov.Layout.Labels) != 2 ||
			!slices.ContainsFunc(ov.Timeline, func(e TimelineEntry) bool { return e.Kind == "elected" && e.Peer == want.String() }) {
			errf("/overview = %+v", ov)
			return
		}
		if c := ov.Clusters[0]; !c.Own || c.ID != DHTClusterID(st.K, st.ClusterKey) || c.Superpeer != want.String() || c.Size != 2 ||
			len(c.Members) != 2 || c.State != ClusterStable || c.SuperpeerDown || !slices.ContainsFunc(c.Members, func(m MemberView) bool {
			return m.Self && m.ID == b.ID().String()
		}) {
			errf("/overview cluster = %+v", c)
		}

		// /metrics: the text format, the families present, values as State.
		// The node runs on, and its state can change between the State above
		// and the scrape (the size estimate's source did, under load in make
		// test's race step): the scrape is compared with a State that held
		// both before and after it.
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(string(httpGet(t, web.URL+"/metrics", "text/plain"))))
		if err != nil {
			t.Fatalf("/metrics does not parse: %v", err)
		}
		if after, aes := b.State(), b.ElectionStats(); after.Size != st.Size || after.Role != st.Role || after.K != st.K || after.S != st.S ||
			after.Superpeer.ID != st.Superpeer.ID || !slices.Equal(after.Members, st.Members) || aes.Term != es.Term || aes.Leader != es.Leader {
			errf("the node's state changed while it was read: %+v, then %+v", st, after)
			return
		}
		value := func(name string, labels ...string) (float64, bool) {
			f, ok := fams[name]
			if !ok {
				return 0, false
			}
			for _, m := range f.GetMetric() {
				if hasLabels(m, labels...) {
					if f.GetType() == dto.MetricType_COUNTER {
						return m.GetCounter().GetValue(), true
					}
					return m.GetGauge().GetValue(), true
				}
			}
			return 0, false
		}
		for _, tc := range []struct {
			name   string
			labels []string
			want   func(float64) bool
			what   string
		}{
			{"superpeer_info", []string{"id", b.ID().String(), "network", b.cfg.Network, "strategy", "dht", "election", "bully"}, metricEq(1), "1"},
			{"superpeer_role", []string{"role", st.Role.String()}, metricEq(1), "1 for its role"},
			{"superpeer_role", []string{"role", RoleUnknown.String()}, metricEq(0), "0 for unknown"},
			{"superpeer_cluster_members", nil, metricEq(float64(len(st.Members))), "len(Members)"},
			{"superpeer_known_peers", nil, metricEq(2), "2"},
			{"superpeer_network_size_estimate", []string{"source", st.Size.Source}, metricEq(float64(st.Size.N)), "Size.N"},
			{"superpeer_reserved_bits", nil, metricEq(float64(st.K)), "K"},
			{"superpeer_target_superpeers", nil, metricEq(float64(st.S)), "S"},
			{"superpeer_evaluations_total", nil, metricAtLeast(float64(st.Evaluations)), "≥ Evaluations"},
			{"superpeer_lookups_total", nil, metricAtLeast(float64(st.Lookups)), "≥ Lookups"},
			{"superpeer_lookup_queries_total", nil, metricAtLeast(float64(st.Queries)), "≥ Queries"},
			{"superpeer_elections_total", nil, metricAtLeast(1), "≥ 1"},
			{"superpeer_superpeer_losses_total", nil, metricAtLeast(0), "present"},
			{"superpeer_election_term", nil, metricEq(float64(es.Term)), "Term"},
			{"superpeer_election_detection_timeout_seconds", nil, func(v float64) bool { return v > 0 }, "> 0"},
			{"superpeer_election_messages_dropped_total", nil, metricAtLeast(float64(es.Dropped)), "≥ Dropped"},
			{"superpeer_election_messages_throttled_total", nil, metricEq(0), "0 (two honest nodes)"},
			{"superpeer_peers_banned_total", nil, metricEq(0), "0"},
			// The DHT strategy's membership is cluster-scoped: the
			// registrations (b registers with a, or a with b), and the
			// backbone, on which the one superpeer of one cluster holds no
			// other's summary (present, and nothing rejected). When b took
			// the cluster over from a, the founder, a's summaries and its
			// goodbye reach b if b joined the backbone before a heard b's
			// COORDINATOR and stepped down: a hand-over, which the design
			// allows (3 runs in 60 under load, all with b the superpeer);
			// when a is the superpeer, b never served and heard nothing.
			{"superpeer_gossip_messages_total", []string{"topic", "backbone", "decision", "accepted"},
				func(v float64) bool { return v == 0 || want == b.ID() }, "0 unless b took over from a"},
			{"superpeer_gossip_messages_total", []string{"topic", "backbone", "decision", "rejected"}, metricEq(0), "0"},
			{"superpeer_backbone_summaries", nil, metricEq(0), "0 (no other superpeer)"},
			{"go_goroutines", nil, metricAtLeast(1), "the Go collector"},
		} {
			if v, ok := value(tc.name, tc.labels...); !ok || !tc.want(v) {
				errf("metric %s%v = %v (present %v), want %s", tc.name, tc.labels, v, ok, tc.what)
			}
		}
		if _, ok := value("superpeer_gossip_messages_total", "topic", "membership"); ok {
			errf("superpeer_gossip_messages_total{topic=membership} with the DHT strategy, which has no membership topic")
		}
		// The registrations, from the side b is on: as the superpeer it holds
		// both registrations and answered a's; as a member it holds a's
		// roster (a) and a accepted its registrations.
		m := got.Membership
		if m == nil {
			errf("/status without membership")
			return
		}
		accepted := func(by map[string]uint64) uint64 { return by["unchanged"] + by["delta"] + by["snapshot"] }
		if st.Role == RoleSuperpeer {
			if !m.Serving || m.Registry != 2 || accepted(m.Received) < 1 {
				errf("/status membership %+v of the superpeer: want serving, a registry of 2, a registration accepted", m)
			}
			if v, ok := value("superpeer_registry_members"); !ok || v != 2 {
				errf("superpeer_registry_members = %v (present %v), want 2", v, ok)
			}
			if v, ok := value("superpeer_registrations_received_total", "status", "snapshot"); !ok || v < 1 {
				errf("superpeer_registrations_received_total{status=snapshot} = %v (present %v), want ≥ 1", v, ok)
			}
		} else {
			if m.Serving || m.Registrar != want.String() || m.Roster != 1 || accepted(m.Sent) < 1 {
				errf("/status membership %+v of the member: want registered with %s, a roster of 1, a registration accepted", m, want)
			}
			if v, ok := value("superpeer_roster_members"); !ok || v != 1 {
				errf("superpeer_roster_members = %v (present %v), want 1", v, ok)
			}
			if v, ok := value("superpeer_registrations_sent_total", "status", "snapshot"); !ok || v < 1 {
				errf("superpeer_registrations_sent_total{status=snapshot} = %v (present %v), want ≥ 1", v, ok)
			}
		}
		for typ, n := range es.Sent {
			if v, ok := value("superpeer_election_messages_sent_total", "type", typ); !ok || v < float64(n) {
				errf("superpeer_election_messages_sent_total{type=%q} = %v (present %v), want ≥ %d", typ, v, ok, n)
			}
		}
		if _, ok := fams["superpeer_token"]; ok {
			errf("superpeer_token with the DHT strategy")
		}
		if f, ok := fams["superpeer_superpeer_rtt_seconds"]; ok {
			if m := f.GetMetric(); st.Role != RoleOrdinary || len(m) != 1 || m[0].GetGauge().GetValue() <= 0 {
				errf("superpeer_superpeer_rtt_seconds = %v for role %v", m, st.Role)
			}
		}

	}
	deadline := time.Now().Add(time.Minute)
	for check(); len(errs) > 0; check() {
		if time.Now().After(deadline) {
			t.Fatalf("for a minute the status disagreed with the node (a %s, b %s, superpeer %s):\n%s\nb's time line %+v",
				a.ID(), b.ID(), want, strings.Join(errs, "\n"), srv.Overview().Timeline)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The page, and nothing else.
	page := string(httpGet(t, web.URL+"/", "text/html"))
	for _, s := range []string{`id="role"`, "data-peer", `fetch("overview"`} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %s", s)
		}
	}
	if strings.Contains(page, "<script src") || strings.Contains(page, "http://") && !strings.Contains(page, "http://www.w3.org/2000/svg") {
		t.Error("the page loads something from elsewhere")
	}
	if r, err := http.Get(web.URL + "/nothing"); err != nil || r.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing: %v, %v; want 404", r, err)
	} else {
		r.Body.Close()
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// A geometric node's status carries its coordinate and token, and its
// metrics the token; without an election, no election metrics.
func TestStatusGeometric(t *testing.T) {
	n, err := New(context.Background(), WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithLogger(quiet),
		WithStrategy(StrategyGeometric), WithTarget(dhtselect.Target{Superpeers: 1}),
		WithGeometric(geometric.Config{}, 0, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitFor(t, "the node's first token tick", func() bool { return n.State().Coord != nil })
	srv, err := NewStatusServer(n)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	web := httptest.NewServer(srv)
	defer web.Close()
	var got Status
	if err := json.Unmarshal(httpGet(t, web.URL+"/status", "application/json"), &got); err != nil {
		t.Fatalf("/status: %v", err)
	}
	if got.Strategy != StrategyGeometric || got.Coord == nil || len(got.Coord.Vec) == 0 || got.Token == nil || got.Election != nil {
		t.Errorf("/status = %+v, want a coordinate, a token and no election", got)
	}
	if i := slices.IndexFunc(got.Peers, func(p PeerStatus) bool { return p.Self }); i < 0 || got.Peers[i].ID != n.ID().String() || got.Peers[i].Coord == nil {
		t.Errorf("/status peers = %+v, want this node with its coordinate", got.Peers)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(httpGet(t, web.URL+"/metrics", "text/plain"))))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	if _, ok := fams["superpeer_token"]; !ok {
		t.Error("no superpeer_token with the geometric strategy")
	}
	if _, ok := fams["superpeer_elections_total"]; ok {
		t.Error("superpeer_elections_total without an election")
	}
	// The geometric strategy still has the global membership topic (and
	// no registrations): its gossip counts are there, for the node's own
	// topic, and no registration metric is.
	if f, ok := fams["superpeer_gossip_messages_total"]; !ok || !slices.ContainsFunc(f.GetMetric(), func(m *dto.Metric) bool {
		return hasLabels(m, "topic", "membership", "decision", "rejected")
	}) {
		t.Error("no superpeer_gossip_messages_total{topic=membership} with the geometric strategy")
	}
	for _, name := range []string{"superpeer_registrations_sent_total", "superpeer_registry_members", "superpeer_backbone_summaries"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s with the geometric strategy", name)
		}
	}
	if got.Membership != nil {
		t.Errorf("/status membership %+v with the geometric strategy", got.Membership)
	}
}

func httpGet(t *testing.T, url, contentType string) []byte {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), contentType) {
		t.Fatalf("GET %s: %s, %s; want 200 and %s", url, r.Status, r.Header.Get("Content-Type"), contentType)
	}
	return b
}

// hasLabels reports whether m carries the given label pairs.
func hasLabels(m *dto.Metric, pairs ...string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
			return l.GetName() == pairs[i] && l.GetValue() == pairs[i+1]
		}) {
			return false
		}
	}
	return true
}

func metricEq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }

func metricAtLeast(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }
