package node

import (
	"slices"
	"testing"
	"time"
)

// linksDriver steps m as a driver does: Links when due, from what the
// host has (links, with Superpeer true while sp names the connected
// superpeer), then Tick; it returns the Ready.
type linksDriver struct {
	t       *testing.T
	m       *Machine
	now     time.Time
	host    Links // Superpeer: the host is connected to the superpeer, whoever it is
	dials   int
	refresh []Refresh
	probes  int
}

// bootJoiner is machine b, with a bootstrap peer.
func bootJoiner(t *testing.T) *Machine {
	cfg := testConfig("b")
	cfg.Bootstrap = true
	return mustNew(t, cfg)
}

// ticks makes n ticks 100 ms apart.
func (d *linksDriver) ticks(n int) {
	d.t.Helper()
	for range n {
		d.tick(100 * time.Millisecond)
	}
}

func (d *linksDriver) tick(dt time.Duration) Ready {
	d.t.Helper()
	d.now = d.now.Add(dt)
	if sp, ok := d.m.LinksDue(d.now); ok {
		in := d.host
		in.Superpeer = in.Superpeer && sp != ""
		d.m.Step(d.now, in)
		d.probes++
	}
	d.m.Tick(d.now)
	rd := d.m.Ready()
	if rd.Dial {
		d.dials++
	}
	if rd.Refresh != RefreshNone {
		d.refresh = append(d.refresh, rd.Refresh)
	}
	return rd
}

// TestJoinDialsAndRefreshes: a joiner with no peer dials its bootstrap
// peers at its first tick, and again each BootstrapRetry while its dials
// fail, never two at once; the dial that connects asks for kad-dht's
// refresh and an evaluation; once refreshed, a dial that reaches a
// bootstrap peer again asks for no refresh.
func TestJoinDialsAndRefreshes(t *testing.T) {
	m := bootJoiner(t)
	d := &linksDriver{t: t, m: m, now: t0}
	m.Step(t0, view("b"))
	if rd := d.tick(0); !rd.Dial {
		t.Fatal("no dial at the first tick")
	}
	// The dial hangs: no other one meanwhile.
	d.ticks(100)
	if d.dials != 1 {
		t.Fatalf("%d dials while the first was not answered, want 1", d.dials)
	}
	m.Step(d.now, Dialled{Reached: 0}) // it failed
	d.ticks(50)
	if d.dials != 2 || len(d.refresh) != 0 {
		t.Fatalf("after a failed dial, 5 s later: %d dials (want 2), refreshes %v (want none)", d.dials, d.refresh)
	}
	d.host = Links{Table: 1, Connected: 1, Bootstrap: true}
	m.Step(d.now, Dialled{Reached: 1})
	rd := m.Ready()
	if rd.Refresh != RefreshTable || !m.Due(d.now) {
		t.Fatalf("a dial that connected: refresh %v (want %v), evaluation due %v (want true)", rd.Refresh, RefreshTable, m.Due(d.now))
	}
	m.Step(d.now, Refreshed{})
	// Trimmed by its bootstrap peer while it has other peers, not
	// attached: it dials at once (no wait at the first trim); reached,
	// its refreshed table is not refreshed again.
	d.host = Links{Table: 20, Connected: 5}
	d.ticks(50)
	if d.dials != 3 {
		t.Fatalf("%d dials after the first trim, want 3", d.dials)
	}
	d.host.Bootstrap = true
	m.Step(d.now, Dialled{Reached: 1})
	if rd := m.Ready(); rd.Refresh != RefreshNone || !m.Due(d.now) {
		t.Fatalf("reached again: refresh %v (want none), evaluation due %v (want true)", rd.Refresh, m.Due(d.now))
	}
	// Trimmed again: now it waits a retry before it dials.
	d.host.Bootstrap = false
	d.tick(5 * time.Second)
	if d.dials != 3 {
		t.Fatalf("dialled at once after the second trim (%d dials)", d.dials)
	}
	d.tick(5 * time.Second)
	if d.dials != 4 {
		t.Fatalf("%d dials a retry after the second trim, want 4", d.dials)
	}
}

// TestConnectedAtStartRefreshes: a joiner whose host came connected to
// its bootstrap peer (the testnet's) does not dial, but asks for the
// first refresh at its first Links all the same, and once only.
func TestConnectedAtStartRefreshes(t *testing.T) {
	m := bootJoiner(t)
	d := &linksDriver{t: t, m: m, now: t0, host: Links{Table: 15, Connected: 15, Bootstrap: true}}
	m.Step(t0, view("b"))
	d.ticks(100)
	if d.dials != 0 || len(d.refresh) != 1 || d.refresh[0] != RefreshTable {
		t.Fatalf("connected at start: %d dials (want 0), refreshes %v (want [%v])", d.dials, d.refresh, RefreshTable)
	}
}

// TestNoBootstrapNoDial: a node with no bootstrap peer but itself never
// dials, alone or not.
func TestNoBootstrapNoDial(t *testing.T) {
	m := mustNew(t, testConfig("a"))
	d := &linksDriver{t: t, m: m, now: t0}
	m.Step(t0, view("a"))
	d.ticks(200)
	if d.dials != 0 || d.probes != 4 {
		t.Fatalf("%d dials (want 0), %d Links in 20 s (want 4: one every retry)", d.dials, d.probes)
	}
}

// TestAttachedPeerIsQuiet: an ordinary peer connected to its superpeer
// asks for no Links and never dials, however long its bootstrap peer
// is gone; it asks again when it loses a connection or its superpeer
// changes, and a peer that names no superpeer dials.
func TestAttachedPeerIsQuiet(t *testing.T) {
	m := bootJoiner(t)
	m.state.Role, m.state.Superpeer = RoleOrdinary, "a" // white-box: attached to a
	m.refreshed = true
	d := &linksDriver{t: t, m: m, now: t0, host: Links{Table: 20, Connected: 5, Superpeer: true}}
	d.ticks(3000) // 5 minutes
	if d.dials != 0 || d.probes != 1 {
		t.Fatalf("attached for 5 minutes: %d dials (want 0), %d Links (want 1)", d.dials, d.probes)
	}
	if next := m.linksNext(); next != never {
		t.Fatalf("Links next due in %v: an attached peer needs none", next.Sub(d.now))
	}
	m.Step(d.now, Conn{Peer: "x", Connected: 4})
	d.tick(100 * time.Millisecond)
	if d.probes != 2 || d.dials != 0 {
		t.Fatalf("after a lost connection: %d Links (want 2), %d dials (want 0)", d.probes, d.dials)
	}
	m.state.Superpeer = "" // white-box: it names none any more
	if !m.NextTick().IsZero() {
		t.Fatal("NextTick: a change of superpeer makes Links due at the next tick")
	}
	d.tick(100 * time.Millisecond)
	if d.probes != 3 || d.dials != 1 {
		t.Fatalf("naming no superpeer: %d Links (want 3), %d dials (want 1)", d.probes, d.dials)
	}
}

// TestRefreshAfterAlone: a node whose table was refreshed, alone for a
// while (its own outage: no connection), asks for a refresh of every
// bucket once, when it has peers again, and re-evaluates; a node never
// alone, or alone before its first refresh, does not.
func TestRefreshAfterAlone(t *testing.T) {
	m := bootJoiner(t)
	d := &linksDriver{t: t, m: m, now: t0, host: Links{Table: 20, Connected: 5, Bootstrap: true}}
	m.Step(t0, view("b"))
	d.ticks(100)
	d.host = Links{Table: 20} // alone before the refresh
	d.ticks(100)
	if d.dials > 0 {
		m.Step(d.now, Dialled{Reached: 0})
	}
	d.host = Links{Table: 20, Connected: 5, Bootstrap: true}
	d.ticks(100)
	if slices.Contains(d.refresh, RefreshAll) {
		t.Fatalf("refreshes %v before the first refresh completed, want no %v", d.refresh, RefreshAll)
	}
	m.Step(d.now, Refreshed{})
	d.ticks(100)
	d.host = Links{Table: 20} // its outage
	d.ticks(100)
	m.Step(d.now, Dialled{Reached: 0})
	d.refresh = nil
	d.host = Links{Table: 20, Connected: 3}
	d.now = d.now.Add(5 * time.Second)
	m.Step(d.now, d.host)
	if rd := m.Ready(); rd.Refresh != RefreshAll || !m.Due(d.now) {
		t.Fatalf("back from its outage: refresh %v (want %v), evaluation due %v", rd.Refresh, RefreshAll, m.Due(d.now))
	}
	d.ticks(100)
	if len(d.refresh) != 0 {
		t.Fatalf("refreshes %v: more than one after one outage", d.refresh)
	}
}

// TestRendezvousRefreshes: a rendezvous search that found overlay peers
// asks for kad-dht's refresh, as a dial that connects does.
func TestRendezvousRefreshes(t *testing.T) {
	cfg := testConfig("b")
	cfg.Rendezvous = true
	m := mustNew(t, cfg)
	m.Step(t0, Rendezvous{Found: true})
	if rd := m.Ready(); rd.Refresh != RefreshTable || rd.Dial {
		t.Fatalf("rendezvous found peers: refresh %v (want %v), dial %v (want false: no bootstrap peers)", rd.Refresh, RefreshTable, rd.Dial)
	}
}

// TestRefreshAfterCut: a refreshed node whose dials failed (cut off from
// its bootstrap peer, not alone) asks for a refresh of every bucket when
// a dial gets through, once; a dial that gets through after a trim (the
// dial before it got through) asks for none.
func TestRefreshAfterCut(t *testing.T) {
	m := bootJoiner(t)
	m.state.Role, m.state.Superpeer = RoleSuperpeer, "b" // white-box: a superpeer
	m.refreshed = true
	d := &linksDriver{t: t, m: m, now: t0, host: Links{Table: 20, Connected: 5}}
	d.tick(0)
	m.Step(d.now, Dialled{Reached: 1}) // trimmed, and back
	if rd := m.Ready(); rd.Refresh != RefreshNone {
		t.Fatalf("back after a trim: refresh %v, want none", rd.Refresh)
	}
	for range 3 { // cut off: every dial fails
		d.tick(5 * time.Second)
		m.Step(d.now, Dialled{Reached: 0})
	}
	d.tick(5 * time.Second)
	if d.dials != 5 {
		t.Fatalf("%d dials, want 5", d.dials)
	}
	m.Step(d.now, Dialled{Reached: 1})
	if rd := m.Ready(); rd.Refresh != RefreshAll || !m.Due(d.now) {
		t.Fatalf("through after failed dials: refresh %v (want %v), evaluation due %v", rd.Refresh, RefreshAll, m.Due(d.now))
	}
	d.host.Bootstrap = true
	d.ticks(100)
	if len(d.refresh) != 0 {
		t.Fatalf("refreshes %v after the one, want none", d.refresh)
	}
}

// TestRefreshAllBudget: a bootstrap peer that refuses every other dial
// (a hostile one, or a flapping link) makes the node cut off and back
// every two retries; it refreshes every bucket at the first, and then
// once per refreshAllGap, not at each: the refreshes it owes are asked
// for when the gap has passed.
func TestRefreshAllBudget(t *testing.T) {
	m := bootJoiner(t)
	m.state.Role, m.state.Superpeer = RoleSuperpeer, "b" // white-box: a superpeer
	m.refreshed = true
	d := &linksDriver{t: t, m: m, now: t0, host: Links{Table: 20, Connected: 5}}
	var at []time.Duration
	refuse := true
	for d.now.Sub(t0) < 5*time.Minute {
		n := len(d.refresh)
		if rd := d.tick(100 * time.Millisecond); rd.Dial {
			reached := 1
			if refuse {
				reached = 0
			}
			refuse = !refuse
			m.Step(d.now, Dialled{Reached: reached})
			if rd := m.Ready(); rd.Refresh != RefreshNone {
				d.refresh = append(d.refresh, rd.Refresh)
			}
		}
		for _, r := range d.refresh[n:] {
			if r != RefreshAll {
				t.Fatalf("refresh %v, want only %v", r, RefreshAll)
			}
			at = append(at, d.now.Sub(t0))
		}
	}
	if d.dials < 30 {
		t.Fatalf("%d dials in 5 minutes, want one every retry or so", d.dials)
	}
	// Without the gap: one refresh per two dials.
	if len(at) < 4 || len(at) > 6 {
		t.Fatalf("%d full refreshes in 5 minutes (at %v), want one a minute", len(at), at)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap < refreshAllGap || gap > refreshAllGap+DefaultBootstrapRetry+time.Second {
			t.Fatalf("full refreshes at %v: %v apart, want %v to a retry more", at, gap, refreshAllGap)
		}
	}
}
