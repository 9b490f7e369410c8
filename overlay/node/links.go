package node

import (
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The node's links to the overlay: when it dials its bootstrap peers, and
// when it refreshes its routing table. The driver gives the host's
// connections (Links) when LinksDue says so, carries out Ready.Dial and
// Ready.Refresh, and answers a dial with Dialled.
//
//   - A node dials its bootstrap peers (Config.Bootstrap) when
//     redialPacer says so: at once while it has no overlay peer at all,
//     never while it is an ordinary peer connected to its superpeer, and
//     otherwise after a wait that doubles with each trim.
//   - A node that reached overlay peers (a dial that connected, or the
//     rendezvous search: Rendezvous{Found: true}) re-evaluates at once;
//     it asks for kad-dht's refresh (RefreshTable) unless its table was
//     refreshed before and is not empty (see Refresh).
//   - A node that was alone (no connection, or an empty table) after
//     its table was refreshed asks for a refresh of every bucket
//     (RefreshAll) once it has peers again, and re-evaluates; so does a
//     node whose dial gets through after dials that failed (it was cut
//     off: see dialled). Such refreshes are at least refreshAllGap
//     apart: one asked for sooner is owed, and asked for when the gap
//     has passed.
//
// The driver's live node dialled and refreshed on its own loop before
// (overlay/bootstrap.go), where neither the node simulator nor a pure test
// ran the rules.

// DefaultBootstrapRetry is Config.BootstrapRetry when zero.
const DefaultBootstrapRetry = 5 * time.Second

// maxRedialWait is the longest redialPacer waits.
const maxRedialWait = 5 * time.Minute

// failGrace is how long a node that is not alone dials at every retry
// while its dials fail, and maxFailWait the longest it then waits between
// two (see redialPacer).
const (
	failGrace   = time.Minute
	maxFailWait = time.Minute
)

// refreshAllGap is the least time between two RefreshAlls. A refresh of
// every bucket is a lookup per bucket (17 at 100,000 peers), and its
// triggers are the node's links, which a peer can move: a hostile
// bootstrap peer that refuses a dial and accepts the next would otherwise
// have the node refresh every bucket every two retries (10 s). A minute
// bounds that to about a lookup every 4 s at 100,000 peers, the order of
// the node's own re-evaluations (one every ReevaluateInterval), while a
// node back from an outage or a cut still refreshes at once the first
// time.
const refreshAllGap = time.Minute

// Links is what the host's connections are, given when the machine asks
// (LinksDue) before Tick: the peers in the routing table, the peers the
// host is connected to, whether a bootstrap peer other than the node is
// connected (true when the node has no other), and whether the host is
// connected to the peer LinksDue named (the node's superpeer; false when
// it named none).
type Links struct {
	Table, Connected int
	Bootstrap        bool
	Superpeer        bool
}

// Dialled answers Ready.Dial: how many bootstrap peers are connected
// after the dial (those connected before it count).
type Dialled struct{ Reached int }

func (Links) input()   {}
func (Dialled) input() {}

// Refresh is a routing-table refresh the machine asks for (Ready.Refresh).
type Refresh uint8

const (
	RefreshNone Refresh = iota
	// RefreshTable: kad-dht's refresh (RefreshRoutingTable), on reaching
	// overlay peers with a table not refreshed before, or empty. The
	// driver answers with Refreshed once a refresh has completed with
	// peers in the table; the machine takes the first and ignores the
	// rest.
	RefreshTable
	// RefreshAll: every bucket, stale or not (kad-dht's ForceRefresh), on
	// coming back from being alone. The table kept the peers it held, but
	// they count towards the size estimate only while they announce
	// themselves or are connected (countsForSize), and a node that no
	// one dials back connects to none of them: a superpeer back from a
	// flap (the flap scenario, 64 live nodes) counted its members alone,
	// heard no other superpeer's summary, took its own summary, k = 0 and
	// the whole key space, for the backbone, estimated the network at 11,
	// and kept k = 0 and its members for good (kad-dht refreshes the
	// table every 10 minutes). A refresh's lookups connect it to the
	// peers closest to its own ID and to each bucket's.
	RefreshAll
)

// links is the machine's part that decides them.
type links struct {
	at      time.Time // the next Links is due; zero: at once
	quiet   bool      // attached at the last Links: the next is due when that changes (see LinksDue)
	quietSP peer.ID   // the superpeer it was attached to
	// Ready's part.
	dial    bool
	refresh Refresh

	retry     time.Duration
	pace      redialPacer
	dialling  bool      // a Dial was asked for, and not answered
	joinAsked bool      // the first refresh was asked for
	lonely    bool      // alone since the table's last refresh
	cutOff    bool      // the last dial failed, after the table's first refresh
	table     int       // the routing table's size at the last Links
	allAt     time.Time // the last RefreshAll was asked for then
	allOwed   bool      // a RefreshAll is owed (asked for within refreshAllGap of the last)
}

func newLinks(retry time.Duration) links {
	if retry <= 0 {
		retry = DefaultBootstrapRetry
	}
	return links{retry: retry, pace: redialPacer{base: retry, most: maxRedialWait}}
}

// attachedTo is the superpeer of an ordinary peer ("" for a superpeer, or
// a peer that names none).
func (m *Machine) attachedTo() peer.ID {
	role, sp := m.state.Role, m.state.Superpeer
	if g := m.geo; g != nil { // GeoState's, without building it
		role, sp = RoleOrdinary, g.attached
		if g.holder.Superpeer() {
			role = RoleSuperpeer
		}
	}
	if role == RoleSuperpeer || sp == m.cfg.Self {
		return ""
	}
	return sp
}

// LinksDue reports whether the driver gives Links before the next Tick,
// with Superpeer its host's connection to sp. It is due every
// Config.BootstrapRetry, except for an ordinary peer that at the last
// Links was connected to its superpeer and not alone: such a peer neither
// dials nor needs a refresh, and it is due again when it loses a
// connection (Conn) or its superpeer changes.
func (m *Machine) LinksDue(now time.Time) (sp peer.ID, due bool) {
	l := &m.links
	sp = m.attachedTo()
	if l.quiet {
		return sp, sp != l.quietSP
	}
	return sp, !now.Before(l.at)
}

// linksNext is when LinksDue is next true if no input comes (never while
// quiet: a change of superpeer comes with an input, after which the
// driver asks NextTick again).
func (m *Machine) linksNext() time.Time {
	l := &m.links
	if l.quiet {
		if m.attachedTo() != l.quietSP {
			return time.Time{}
		}
		return never
	}
	return l.at
}

// takeLinks decides on the host's links: a dial, a refresh after being
// alone.
func (m *Machine) takeLinks(now time.Time, in Links) {
	l := &m.links
	alone := in.Table == 0 || in.Connected == 0
	sp := m.attachedTo()
	attached := sp != "" && in.Superpeer
	l.table = in.Table
	if !l.dialling && l.pace.due(now, alone, attached, in.Bootstrap) && m.cfg.Bootstrap {
		l.dial, l.dialling = true, true
	}
	if !l.dial && !l.joinAsked && !m.refreshed && in.Bootstrap && !alone && m.cfg.Bootstrap {
		// Connected to a bootstrap peer before it dialled one (a host
		// that came with connections, the testnet's): reached all the same.
		m.reach()
	}
	l.lonely = l.lonely || alone && m.refreshed
	if l.lonely && !alone {
		l.lonely = false
		m.refreshAll(now, "alone before: refreshing the routing table")
	} else if l.allOwed && !alone && !now.Before(l.allAt.Add(refreshAllGap)) {
		m.refreshAll(now, "refreshing the routing table, owed since the last refresh")
	}
	l.at = now.Add(l.retry)
	if l.allOwed {
		l.at = earliest(l.at, l.allAt.Add(refreshAllGap))
	}
	l.quiet = attached && !alone && !l.dialling && !l.allOwed
	l.quietSP = sp
}

// refreshAll asks for a RefreshAll and an evaluation, or owes the refresh
// while the last one is less than refreshAllGap old.
func (m *Machine) refreshAll(now time.Time, why string) {
	l := &m.links
	m.kick = true
	if !l.allAt.IsZero() && now.Sub(l.allAt) < refreshAllGap {
		l.allOwed = true
		l.at = earliest(l.at, l.allAt.Add(refreshAllGap))
		return
	}
	l.allAt, l.allOwed, l.refresh = now, false, RefreshAll
	m.note(slog.LevelInfo, why, "table", l.table)
}

// reach is the node reaching overlay peers: it re-evaluates at once, and
// refreshes its table unless it was refreshed before and is not empty
// (the node was trimmed by its bootstrap peer, and dialled it again: a
// refresh each time, kad-dht's lookup of the node's own ID and a ping of
// every table peer not queried lately, cost the in-process testnet's 512
// nodes, all bootstrapped from node 0, 141 to 1,722 B/s per ordinary peer
// on the DHT after convergence, 0 to 10 B/s without). The re-evaluation's
// lookup goes through the peer just reached, which is what a side of a
// healed partition needs to find the other's superpeers.
func (m *Machine) reach() {
	if !m.refreshed || m.links.table == 0 {
		m.links.refresh = max(m.links.refresh, RefreshTable)
		m.links.joinAsked = true
	}
	m.kick = true
}

// dialled takes a dial's answer.
func (m *Machine) dialled(now time.Time, in Dialled) {
	l := &m.links
	l.dialling = false
	l.pace.dialled(now, in.Reached)
	switch {
	case in.Reached == 0:
		l.cutOff = m.refreshed
	case l.cutOff:
		// Through after dials that failed: the node was cut off from the
		// rest, not trimmed (partitioned: no dial got through). Its
		// connections are all on its side of the cut, and so are the
		// superpeers it hears on the backbone: a superpeer is connected
		// to the others only by chance (the DHT's queries), and nothing
		// else reconnects them. In a 64-node testnet (bully, 21 cut off
		// for 30 s) two superpeers of the cut side stayed alone on the
		// backbone 90 s after the heal, and every superpeer's estimate
		// stayed partial (20 to 47 of 64). A refresh of every bucket
		// connects it across the key space, once per cut.
		l.cutOff = false
		m.refreshAll(now, "reached a bootstrap peer after failed dials: refreshing the routing table")
	default:
		m.reach()
	}
}

// lostConn is the host's last connection to a peer closing: a quiet
// peer's Links are due again.
func (m *Machine) lostConn(now time.Time) {
	if m.links.quiet {
		m.links.quiet, m.links.at = false, now
	}
}

// redialPacer decides when a node connected to none of its bootstrap
// peers dials them again. The bootstrap peers of a swarm are few and
// every node knows them, so a rule that has every node keep a connection
// to them puts the whole swarm on them: the in-process testnet's node 0,
// every node's bootstrap peer, held 481 to 511 connections at 512 nodes,
// over its connection manager's high watermark of 192, because every
// node it trimmed dialled it again within BootstrapRetry. So:
//
//   - A node with no overlay peer at all (alone: an empty routing table,
//     or no connection) dials at every retry: it is joining, or its own
//     link came back.
//   - An ordinary peer attached to its superpeer does not dial: what it
//     sends and keeps follows its cluster, and after a partition heals
//     its superpeer's connection brings the cluster along.
//   - A superpeer, and a peer that names no superpeer, dial at every
//     retry while their dials fail (cut off: the dial that gets through
//     heals the partition); but one that reached a bootstrap peer and
//     was disconnected from it again while it kept other peers was most
//     likely trimmed, and waits twice as long as the last time before it
//     dials again, from no wait at the first loss up to maxRedialWait.
//     A loss while alone (its own outage) is no trim, and a connection
//     that lasted maxRedialWait ends the wait.
//   - Failed dials of a node that is not alone: at every retry for
//     failGrace, then twice as long apart each time up to maxFailWait.
//     A bootstrap peer that died would otherwise be dialled by every
//     superpeer every retry for good (the node simulator's churn crashed
//     node 0: 28 failed dials a second at 1,000 nodes, S/5 in general,
//     and all of them at once when it comes back); a cut shorter than
//     failGrace is found as soon as before, a longer one within
//     maxFailWait of its heal.
//
// Its state is the node's own: no peer can make it wait longer but by
// taking its connections, or by refusing its dials for more than
// failGrace, which spaces them by maxFailWait at most; a failed dial
// undoes the wait after trims. It sees the connections at each Links: an
// ordinary peer's only while it is not attached (LinksDue).
type redialPacer struct {
	base, most time.Duration
	wait       time.Duration // from the disconnection to the next dial; 0 at first
	lost       time.Time     // when the node was first seen connected to none; zero while connected
	trimmed    bool          // since lost, the node has kept other peers
	since      time.Time     // connected since; zero while not
	reached    bool          // it has been connected to one before
	// Failed dials in a row: since the first, the last, and the wait
	// after it.
	failedSince, failedAt time.Time
	failWait              time.Duration
}

// due reports whether the node dials its bootstrap peers now. A node that
// is alone and connected to one dials all the same: the dial's answer
// then refreshes its routing table through it (reach).
func (p *redialPacer) due(now time.Time, alone, attached, connected bool) bool {
	if connected {
		p.failedSince, p.failedAt, p.failWait = time.Time{}, time.Time{}, 0
		p.lost, p.reached = time.Time{}, true
		if p.since.IsZero() {
			p.since = now
		}
		if now.Sub(p.since) >= p.most {
			p.wait = 0 // a lasting connection: the trims are over
		}
		return alone
	}
	p.since = time.Time{}
	if p.lost.IsZero() {
		p.lost, p.trimmed = now, true
	}
	p.trimmed = p.trimmed && !alone
	switch {
	case alone:
		return true
	case attached:
		return false
	case !p.failedAt.IsZero():
		return now.Sub(p.failedAt) >= p.failWait
	}
	return now.Sub(p.lost) >= p.wait
}

// dialled records the dial that due asked for, at now, which left
// reached bootstrap peers connected (those connected already count).
func (p *redialPacer) dialled(now time.Time, reached int) {
	if reached == 0 {
		if p.failedSince.IsZero() {
			p.failedSince = now
		}
		if now.Sub(p.failedSince) >= failGrace {
			p.failWait = min(max(2*p.failWait, p.base), maxFailWait)
		}
		p.failedAt = now
	} else {
		p.failedSince, p.failedAt, p.failWait = time.Time{}, time.Time{}, 0
	}
	switch {
	case reached == 0:
		p.wait = 0
	case !p.lost.IsZero():
		p.lost = time.Time{}
		if p.reached && p.trimmed { // connected again after a trim
			p.wait = min(max(2*p.wait, p.base), p.most)
		}
		p.reached = true
	}
}
