package overlay

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/superpeer/superpeer/overlay/node"
)

// bootstrapLoop dials the bootstrap peers until at least one is connected,
// then refreshes the routing table. Every BootstrapRetry it dials them
// again when it is alone, or needs them and is connected to none
// (redialPacer): after a partition heals, or a node's own link comes
// back, the bootstrap peers are the ones it knows how to reach, and one
// connection is enough for gossip and the DHT to find the rest. An
// unreachable bootstrap peer is a warning, never a failure.
func (n *Node) bootstrapLoop(ctx context.Context) {
	defer n.wg.Done()
	if len(n.cfg.Bootstrap) == 0 {
		return
	}
	t := time.NewTicker(n.cfg.BootstrapRetry)
	defer t.Stop()
	pace := redialPacer{base: n.cfg.BootstrapRetry, most: maxRedialWait}
	lonely := false // alone since the table's last refresh
	for {
		alone := n.dht.RoutingTable().Size() == 0 || len(n.host.Network().Peers()) == 0
		n.mu.RLock()
		sp := n.state.Superpeer.ID
		attached := n.state.Role != RoleSuperpeer && sp != ""
		n.mu.RUnlock()
		// Attached while connected to its superpeer: a state that names
		// one the node lost (its lookups or its election have not
		// committed a new state yet) does not hold its redials back.
		attached = attached && n.host.Network().Connectedness(sp) == network.Connected
		if now := time.Now(); pace.due(now, alone, attached, n.bootstrapConnected()) {
			pace.dialled(n.dialBootstrap(ctx))
		}
		// A node that was alone, its table refreshed before, refreshes it
		// again once it has peers: see rejoined.
		lonely = lonely || alone && n.refreshed.Load()
		if lonely && !alone {
			lonely = false
			n.rejoined()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// maxRedialWait is the longest redialPacer waits.
const maxRedialWait = 5 * time.Minute

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
//
// Its state is the node's own: no peer can make it wait longer but by
// taking its connections, and a failed dial undoes the wait.
type redialPacer struct {
	base, most time.Duration
	wait       time.Duration // from the disconnection to the next dial; 0 at first
	lost       time.Time     // when the node was first seen connected to none; zero while connected
	trimmed    bool          // since lost, the node has kept other peers
	since      time.Time     // connected since; zero while not
	reached    bool          // it has been connected to one before
}

// due reports whether the node dials its bootstrap peers now. A node that
// is alone and connected to one dials all the same: dialBootstrap then
// refreshes its routing table through it.
func (p *redialPacer) due(now time.Time, alone, attached, connected bool) bool {
	if connected {
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
	}
	return now.Sub(p.lost) >= p.wait
}

// dialled records the dial that due asked for, which left reached
// bootstrap peers connected (those connected already count).
func (p *redialPacer) dialled(reached int) {
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

// dialBootstrap dials the bootstrap peers not connected, and returns how
// many are connected.
func (n *Node) dialBootstrap(ctx context.Context) int {
	ok := 0
	for _, b := range n.cfg.Bootstrap {
		if b.ID == n.self {
			continue
		}
		if n.host.Network().Connectedness(b.ID) == network.Connected {
			ok++
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, n.cfg.QueryTimeout)
		err := n.host.Connect(dctx, b)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("bootstrap peer unreachable, will retry", "bootstrap", b.ID, "addrs", b.Addrs, "retry_in", n.cfg.BootstrapRetry, "err", err)
			}
			continue
		}
		ok++
	}
	if ok > 0 {
		n.log.Info("connected to bootstrap peers", "count", ok)
		n.reached(ctx)
	}
	return ok
}

// reached refreshes the routing table once the node has reached overlay
// peers (its bootstrap peers, or peers found by rendezvous), and
// re-evaluates; the first such refresh lets it take a role (see mayJoin).
//
// A node whose table was refreshed and is not empty only re-evaluates: it
// dialled a bootstrap peer again because it was connected to none, as
// happens to nodes that a bootstrap peer over its connection manager's
// high watermark (192 connections) trims. With a refresh each time
// (kad-dht's lookup of the node's own ID, and a ping of every table peer
// not queried lately), the in-process testnet's 512 nodes, all
// bootstrapped from node 0, spent 141 to 1,722 B/s per ordinary peer on
// the DHT after convergence, 0 at 256 nodes and below; without, 0 to
// 10 B/s, while node 0 held 481 to 511 connections and up to 30 nodes at
// a time were not connected to it. The re-evaluation's lookup goes
// through the peer just reached, which is what a side of a healed
// partition needs to find the other's superpeers; kad-dht refreshes the
// table on its own schedule (every 10 minutes).
func (n *Node) reached(ctx context.Context) {
	if n.refreshed.Load() && n.dht.RoutingTable().Size() > 0 {
		n.Reevaluate()
		return
	}
	done := n.dht.RefreshRoutingTable()
	n.Reevaluate()
	if !n.refreshed.Load() {
		n.wg.Add(1)
		go n.awaitRefresh(ctx, done)
	}
}

// rejoined refreshes the routing table of a node that was alone (no
// connection, or an empty table) and has peers again, and re-evaluates.
// The table kept the peers it held, but they count towards the size
// estimate only while they announce themselves or are connected
// (node.Machine's countsForSize), and a node that no one dials back
// connects to none of them: a superpeer that came back from a flap
// (the flap scenario, 64 nodes) counted its members alone, heard no
// other superpeer's summary (it was connected to none), took its own
// summary, k = 0 and the whole key space, for the backbone, estimated
// the network at 11, and kept k = 0 and its members for good (kad-dht
// refreshes the table every 10 minutes). A refresh's lookups connect it
// to the peers closest to its own ID and to each bucket's.
func (n *Node) rejoined() {
	n.log.Info("alone before: refreshing the routing table", "table", n.dht.RoutingTable().Size())
	_ = n.dht.ForceRefresh() // every bucket, not only the stale ones; its outcome is the table's
	n.Reevaluate()
}

// bootstrapConnected reports whether a bootstrap peer other than this node
// is connected (true when the node is the only bootstrap peer).
func (n *Node) bootstrapConnected() bool {
	others := false
	for _, b := range n.cfg.Bootstrap {
		if b.ID == n.self {
			continue
		}
		if n.host.Network().Connectedness(b.ID) == network.Connected {
			return true
		}
		others = true
	}
	return !others
}

// awaitRefresh sets refreshed once a routing-table refresh has completed
// with a table that is not empty: from then on the size estimate is worth
// a role (see mayJoin). A refresh that starts before kad-dht has added the
// bootstrap peer (it waits for identify) finds nothing and ends at once;
// it is repeated every refreshRetry until ctx ends.
func (n *Node) awaitRefresh(ctx context.Context, done <-chan error) {
	defer n.wg.Done()
	for {
		select {
		case <-done: // an error too: the table holds what it found
		case <-ctx.Done():
			return
		}
		if n.dht.RoutingTable().Size() > 0 {
			if n.refreshed.CompareAndSwap(false, true) {
				n.feed(node.Refreshed{})
			}
			return
		}
		select {
		case <-time.After(refreshRetry):
		case <-ctx.Done():
			return
		}
		done = n.dht.RefreshRoutingTable()
	}
}

// refreshRetry is the pause before a routing-table refresh that found an
// empty table is repeated.
const refreshRetry = 250 * time.Millisecond
