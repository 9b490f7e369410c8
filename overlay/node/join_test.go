package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// joinPeers returns a joiner j, the superpeer sp and a member mate of one
// cluster at k = 1, j the closest of them to the cluster key and sp the
// next, and a peer other of the other cluster.
func joinPeers() (j, sp, mate, other peer.ID) {
	var in []peer.ID
	for i := 0; len(in) < 3 || other == ""; i++ {
		p := peer.ID(fmt.Sprintf("q%d", i))
		switch {
		case len(in) == 0 || dhtselect.KeyOf(p).Cluster(1) == dhtselect.KeyOf(in[0]).Cluster(1):
			in = append(in, p)
		case other == "":
			other = p
		}
	}
	in = in[:3]
	dhtselect.SortByKey(in) // by key: the first is the closest to the cluster key
	return in[0], in[1], in[2], other
}

// joinRouting is the joiner's routing table: peers, connected, speaking
// the overlay's closer protocol.
func joinRouting(peers ...peer.ID) Routing {
	r := Routing{Connected: len(peers)}
	for _, p := range peers {
		r.Peers = append(r.Peers, RoutingPeer{ID: p, Connected: true, Closer: true})
	}
	return r
}

// joiner is a machine for j with bully, a target of 2 superpeers (k = 1),
// that has its refreshed routing table rt and a digest from other, a
// peer of the other cluster (its bootstrap peer's superpeer).
func joiner(t *testing.T, j, other peer.ID, rt Routing) *Machine {
	cfg := testConfig(string(j))
	cfg.Election, cfg.Bootstrap, cfg.Target = "bully", true, dhtselect.Target{Superpeers: 2}
	m := mustNew(t, cfg)
	m.Step(t0, View{Members: []Member{{ID: j}}})
	m.Step(t0, rt)
	m.Step(t0, Refreshed{})
	m.Step(t0, Digest{From: other, K: 1, Size: dhtselect.Estimate{N: 8, Source: dhtselect.SourceBackbone}})
	return m
}

// TestJoinerRegistersWithItsClusterFirst (joinVia): a joiner closer to
// its cluster's key than the cluster's superpeer registers with the
// mate its routing table holds in its cluster, then with the superpeer
// the mate names, and takes its role once the superpeer's roster is in
// its view: it does not claim the cluster (the cluster has not elected
// it), and follows the superpeer meanwhile. On the old rule it joined on
// the digest from the other cluster, alone in its view, found itself at
// the end of its lookup and claimed the cluster at once: a split brain
// with the superpeer, every split episode of the node simulator's churn
// at 1,000 nodes but one.
func TestJoinerRegistersWithItsClusterFirst(t *testing.T) {
	j, sp, mate, other := joinPeers()
	m := joiner(t, j, other, joinRouting(other, mate))
	if got := m.Registrar(); got != mate {
		t.Fatalf("after the digest: registrar %q, want the mate %q", got, mate)
	}
	m.Step(t0, Digest{From: mate, Superpeer: sp}) // the mate's refusal names its superpeer
	if got := m.Registrar(); got != sp {
		t.Fatalf("after the mate's hint: registrar %q, want the superpeer %q", got, sp)
	}
	now, rds := tick(m, t0, time.Second, joinRouting(other, mate), j)
	if i, st := firstRole(rds); i >= 0 || len(m.State().Members) > 0 {
		t.Fatalf("took a role before the superpeer's roster came: %+v", st)
	}
	// The superpeer's answer: its digest and roster.
	m.Step(now, View{Members: []Member{{ID: j}, {ID: mate}, {ID: sp, Superpeer: true}}})
	m.Step(now, Digest{From: sp, K: 1, Size: dhtselect.Estimate{N: 8, Source: dhtselect.SourceBackbone}})
	_, rds = tick(m, now, 500*time.Millisecond, joinRouting(other, mate, sp), j)
	if _, st := firstRole(rds); st.Role != RoleOrdinary || st.Superpeer != sp {
		t.Fatalf("first role %v, superpeer %q; want ordinary, following %q until the cluster elects it", st.Role, st.Superpeer, sp)
	}
	for _, rd := range rds {
		if rd.State.Role == RoleSuperpeer {
			t.Fatalf("claimed the cluster: %+v", rd.State)
		}
	}
	if got := m.Registrar(); got != sp {
		t.Errorf("registrar %q, want its superpeer %q", got, sp)
	}
}

// TestJoinerWaitsNoLongerThanATimeout (joinVia): a joiner whose mate
// names no superpeer joins at once, and one whose superpeer never
// answers (it may be dead) joins a failure-detection timeout after the
// digest (1.5 s at the default tick), as it did without the rule
// (alone, it claims its cluster).
func TestJoinerWaitsNoLongerThanATimeout(t *testing.T) {
	j, sp, mate, other := joinPeers()
	m := joiner(t, j, other, joinRouting(other, mate))
	m.Step(t0, Digest{From: mate}) // a refusal that names no superpeer
	if _, rds := tick(m, t0, 300*time.Millisecond, joinRouting(other, mate), j); len(rds) == 0 || m.State().Role == RoleUnknown {
		t.Errorf("300 ms after the mate named no superpeer: role %v, want one", m.State().Role)
	}
	m = joiner(t, j, other, joinRouting(other, mate))
	m.Step(t0, Digest{From: mate, Superpeer: sp})
	now, _ := tick(m, t0, 1400*time.Millisecond, joinRouting(other, mate), j)
	if st := m.State(); st.Role != RoleUnknown {
		t.Fatalf("1.4 s after the digest, the superpeer silent: role %v, want none yet", st.Role)
	}
	_, rds := tick(m, now, 300*time.Millisecond, joinRouting(other, mate), j)
	if _, st := firstRole(rds); st.Role == RoleUnknown {
		t.Errorf("1.7 s after the digest: no role, want one (the timeout is 1.5 s)")
	}
}

// TestJoinerWithoutElectionJoinsAtOnce: without an election the lookup
// alone names the superpeer, and a joiner takes its role on the digest,
// as before joinVia.
func TestJoinerWithoutElectionJoinsAtOnce(t *testing.T) {
	j, _, mate, other := joinPeers()
	cfg := testConfig(string(j))
	cfg.Bootstrap, cfg.Target = true, dhtselect.Target{Superpeers: 2}
	m := mustNew(t, cfg)
	m.Step(t0, View{Members: []Member{{ID: j}}})
	m.Step(t0, joinRouting(other, mate))
	m.Step(t0, Refreshed{})
	m.Step(t0, Digest{From: other, K: 1, Size: dhtselect.Estimate{N: 8, Source: dhtselect.SourceBackbone}})
	if got := m.Registrar(); got != "" {
		t.Errorf("registrar %q before joining, want none", got)
	}
	if _, rds := tick(m, t0, 200*time.Millisecond, joinRouting(other, mate), j); len(rds) == 0 || m.State().Role != RoleSuperpeer {
		t.Errorf("200 ms after the digest: %+v, want the superpeer role (its lookup ends at itself)", m.State())
	}
}

// TestJoinerAskedNoSuperpeerWaitsForNoDigest (mayJoin, digestWait): a
// joiner connected to a peer that speaks the overlay waits two joinWaits
// (3 s) for a digest, unless that peer, asked, names the joiner its
// superpeer (its lookup ends there: a network starting): then it joins by
// the timing rule, a refreshed announce interval (200 ms) after
// its first contact, as no digest is coming. A joiner that waited saw
// its bootstrap peer campaign against it after two timeouts without a
// leader, win a timeout later and claim the cluster just after the
// joiner took it: two superpeers for a round trip (overlay's
// TestStatusServer, 2 runs in 20). A peer that names none may be between
// superpeers of a running cluster: the joiner waits.
func TestJoinerAskedNoSuperpeerWaitsForNoDigest(t *testing.T) {
	j, _, boot, other := joinPeers()
	for _, c := range []struct {
		name    string
		refusal *Digest
		early   time.Duration // how long before the contact the refusal came
		joins   bool          // within 500 ms of the contact
	}{
		{"no answer", nil, 0, false},
		{"names another superpeer", &Digest{From: boot, Superpeer: other}, 0, false},
		{"names the joiner", &Digest{From: boot, Superpeer: j}, 0, true},
		{"names none", &Digest{From: boot}, 0, false}, // it may be between superpeers
		// A naming older than a membership TTL (600 ms here) at the
		// decision no longer tells that nobody serves.
		{"named the joiner long ago", &Digest{From: boot, Superpeer: j}, time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(string(j))
			cfg.Election, cfg.Bootstrap = "bully", true
			cfg.AnnounceInterval, cfg.ReevaluateInterval = 200*time.Millisecond, 200*time.Millisecond
			m := mustNew(t, cfg)
			if c.refusal != nil {
				m.Step(t0.Add(-c.early), *c.refusal)
			}
			m.Step(t0, View{Members: []Member{{ID: j}}})
			m.Step(t0, joinRouting(boot))
			m.Step(t0, Refreshed{})
			now, _ := tick(m, t0, 500*time.Millisecond, joinRouting(boot), j)
			if joined := m.State().Role != RoleUnknown; joined != c.joins {
				t.Fatalf("500 ms after the contact: joined %v, want %v", joined, c.joins)
			}
			if !c.joins {
				tick(m, now, 3*time.Second, joinRouting(boot), j)
				if m.State().Role == RoleUnknown {
					t.Errorf("3.5 s after the contact: no role, want one (digestWait is 3 s)")
				}
			}
		})
	}
}

// TestFloodHoldsNoJoinerBack (speaksOverlay): identities of a flooded
// address group (admit.go) that speak the overlay are no reason to wait
// for a digest: a joiner connected only to such a flood joins by the
// timing rule, a refreshed announce interval after its first contact,
// not digestWait later.
func TestFloodHoldsNoJoinerBack(t *testing.T) {
	cfg := testConfig("j")
	cfg.Election, cfg.Bootstrap, cfg.MaxPerAddr = "bully", true, DefaultMaxPerAddr
	cfg.AnnounceInterval, cfg.ReevaluateInterval = 200*time.Millisecond, 200*time.Millisecond
	m := mustNew(t, cfg)
	r := Routing{Addrs: map[peer.ID]string{}}
	for i := range DefaultMaxPerAddr + 1 {
		p := peer.ID(fmt.Sprintf("sybil-%d", i))
		r.Peers = append(r.Peers, RoutingPeer{ID: p, Connected: true, Closer: true})
		r.Addrs[p] = "10.6.6.6"
	}
	r.Connected = len(r.Peers)
	m.Step(t0, View{Members: []Member{{ID: "j"}}})
	m.Step(t0, r)
	m.Step(t0, Refreshed{})
	if tick(m, t0, 500*time.Millisecond, r, "j"); m.State().Role == RoleUnknown {
		t.Errorf("500 ms after its first contact, with only a flood connected: no role, want one")
	}
}
