package testnet

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
)

// Node 0, everyone's bootstrap peer, closes its connections to the other
// fifteen three times, as its connection manager does to the nodes beyond
// its high watermark (192). A superpeer dials it again (node.Machine's
// links.go), later each time (its redialPacer): at its next retry the
// first time (BootstrapRetry, 5 s), not within 5 s of the loss the second
// time, not within 10 s the third. An ordinary peer attached to its
// superpeer does not dial it at all. Every trimmed node dialled within
// 5 s each time before, and the 512-node testnet's node 0 held 481 to 511
// connections over its high watermark.
//
// And a redial does not refresh the routing table of a node whose table
// was refreshed and is not empty: it re-evaluates only. With a refresh
// on each reconnection (a lookup of its own ID, a ping of the table's
// peers not queried lately) an ordinary peer of the 512-node testnet
// spent 141 to 1,722 B/s on the DHT after convergence. The DHT traffic
// the fifteen send from the first loss to the end stays within what they
// send as long with no connection lost, plus one DHT message each per
// loss (kad-dht's check of a peer it adds to its table again).
//
// In virtual time (a testing/synctest bubble): the bounds are the
// pacer's, not this machine's load.
func TestBootstrapRedialBacksOff(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes")
	}
	synctest.Test(t, func(t *testing.T) {
		dials := newLogCounts("connected to bootstrap peers") // overlay's dialBootstrap
		// 16 nodes: with 10 or fewer peers in its table kad-dht refreshes
		// it whenever it drops one (fixLowPeers), and at 8 nodes the
		// traffic check below failed one run in thirty on that alone.
		tn := startConverged(t, Config{N: 16, Target: dhtselect.Target{Superpeers: 2}, Seed: 3, Logger: slog.New(dials)})
		retry := overlay.DefaultConfig().BootstrapRetry // the testnet keeps the default
		nodes := tn.Members()
		h0 := nodes[0].(*overlay.Node).Host()
		kadSent := func() (sum uint64) {
			per := tn.Traffic().Nodes()
			for _, m := range nodes[1:] {
				for p, b := range per[m.ID()].Sent {
					if strings.Contains(string(p), "/kad/") {
						sum += b
					}
				}
			}
			return sum
		}
		// The three losses: no superpeer redials within quietFor of it,
		// and every one is connected to node 0 again within backFor.
		losses := []struct{ quietFor, backFor time.Duration }{
			{0, retry + time.Second},
			{retry, 2*retry + time.Second},
			{2 * retry, 3*retry + time.Second},
		}
		var span time.Duration
		for _, l := range losses {
			span += l.backFor
		}
		// Past the joins' refreshes, and half a retry off the nodes'
		// retries, which the bubble starts in step: a loss is seen half a
		// retry after it, and a redial due a wait after that never falls
		// on the instant the test looks.
		time.Sleep(2*retry + retry/2)
		quiet := kadSent()
		time.Sleep(span)
		quiet = kadSent() - quiet
		before := kadSent()
		// Node 0 is a superpeer or attached to one; the others' roles do
		// not change (no node stops).
		var superpeers, attached []int
		for i, m := range nodes[1:] {
			if st := m.State(); st.Role == overlay.RoleSuperpeer {
				superpeers = append(superpeers, i+1)
			} else if st.Superpeer.ID != "" {
				attached = append(attached, i+1)
			}
		}
		if len(superpeers) == 0 || len(attached) == 0 {
			t.Fatalf("superpeers %v and attached peers %v besides node 0: the seed tests neither one side or the other", superpeers, attached)
		}
		first := dials.count()
		for round, l := range losses {
			for _, m := range nodes[1:] {
				_ = h0.Network().ClosePeer(m.ID())
			}
			start := dials.count()
			if l.quietFor > 0 {
				time.Sleep(l.quietFor)
				now := dials.count()
				for _, i := range superpeers {
					if now[i] != start[i] {
						t.Errorf("loss %d: superpeer %d dialled node 0 again within %v of it", round+1, i, l.quietFor)
					}
				}
			}
			time.Sleep(l.backFor - l.quietFor)
			for _, i := range superpeers {
				if h0.Network().Connectedness(nodes[i].ID()) != network.Connected {
					t.Errorf("loss %d: superpeer %d is not connected to node 0 again %v after it", round+1, i, l.backFor)
				}
			}
		}
		last := dials.count()
		for _, i := range attached {
			if last[i] != first[i] {
				t.Errorf("node %d, an ordinary peer attached to its superpeer, dialled node 0 again %d times", i, last[i]-first[i])
			}
		}
		lost := kadSent() - before
		// A FIND_NODE request for a peer ID and its framing: under 64 bytes.
		slack := uint64(len(losses) * (len(nodes) - 1) * 64)
		t.Logf("superpeers %v, attached %v; DHT bytes sent by the others: %d over %v with node 0 lost %d times, %d over as long without (slack %d)",
			superpeers, attached, lost, span, len(losses), quiet, slack)
		if lost > quiet+slack {
			t.Errorf("the others sent %d DHT bytes while they lost and dialled node 0 again %d times, against %d without losing it (slack %d): a routing-table refresh on each reconnection?",
				lost, len(losses), quiet, slack)
		}
	})
}

// A superpeer taken off the network for longer than a retry, and back:
// it was alone (no connection), and once it has peers again it refreshes
// its routing table, once (node.Machine's RefreshAll). Its table kept
// the peers it held, but they count towards its size estimate only while connected
// or announcing, and nobody but its members and the bootstrap peer dialled
// it back: in the flap scenario (64 nodes, real time) such a superpeer
// counted its members alone, heard no other superpeer's summary, took its
// own summary at k = 0 for the whole backbone and kept k = 0 and its
// members for good. Back, it is connected to most of the others again
// (without the refresh, here to 7 of 15; with it, to 15). The nodes that
// were never alone do not refresh.
func TestAloneNodeRefreshesWhenBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes")
	}
	synctest.Test(t, func(t *testing.T) {
		refreshes := newLogCounts("alone before: refreshing the routing table") // node.Machine's note (links.go)
		tn := startConverged(t, Config{N: 16, Target: dhtselect.Target{Superpeers: 2}, Seed: 1, Logger: slog.New(refreshes)})
		retry := overlay.DefaultConfig().BootstrapRetry
		x := -1
		for i, m := range tn.Members() {
			if i > 0 && m.State().Role == overlay.RoleSuperpeer {
				x = i
				break
			}
		}
		if x < 0 {
			t.Fatal("no superpeer but node 0")
		}
		id := tn.Members()[x].ID()
		if got := refreshes.count(); len(got) != 0 {
			t.Fatalf("refreshes before any node was alone: %v", got)
		}
		if err := tn.Down(id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(retry + retry/2)
		if err := tn.Up(id); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * retry)
		// Connected to most of the others again: without the refresh, to
		// the 7 of 15 that dialled it (its members, node 0), with it to 15.
		if got, others := len(tn.Members()[x].(*overlay.Node).Host().Network().Peers()), len(tn.Members())-1; 4*got < 3*others {
			t.Errorf("superpeer %d, back, is connected to %d of the %d others", x, got, others)
		}
		if got := refreshes.count(); got[x] != 1 || len(got) != 1 {
			t.Errorf("refreshes by node %v after superpeer %d was alone for %v: want one, by it", got, x, retry+retry/2)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if _, err := tn.WaitConverged(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
	})
}

// logCounts is a slog handler that counts each node's records of one
// message, by the node attribute the testnet gives each node's logger.
type logCounts struct {
	msg  string
	mu   *sync.Mutex
	node int64
	by   map[int]int
}

func newLogCounts(msg string) *logCounts {
	return &logCounts{msg: msg, mu: new(sync.Mutex), node: -1, by: map[int]int{}}
}

func (d *logCounts) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (d *logCounts) WithGroup(string) slog.Handler                { return d }
func (d *logCounts) WithAttrs(as []slog.Attr) slog.Handler {
	c := *d
	for _, a := range as {
		if a.Key == "node" {
			c.node = a.Value.Int64()
		}
	}
	return &c
}
func (d *logCounts) Handle(_ context.Context, r slog.Record) error {
	if r.Message == d.msg && d.node >= 0 {
		d.mu.Lock()
		d.by[int(d.node)]++
		d.mu.Unlock()
	}
	return nil
}
func (d *logCounts) count() map[int]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.by)
}

// A partition heals, and the backbone with it: every superpeer hears
// every cluster's summary again, and its size estimate is the network's.
// Superpeers are connected to each other only by chance (the DHT's
// queries); those of the cut side dial their bootstrap peer in vain
// while the cut lasts, and the dial that gets through asks for a refresh
// of every bucket (node.Machine's links.go), which connects them across
// the key space again. Without it, 64 nodes with 21 cut off for 30 s had
// two superpeers alone on the backbone 90 s after the heal, and every
// superpeer's estimate partial (20 to 47 of 64).
func TestPartitionHealsTheBackbone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 64 libp2p nodes")
	}
	synctest.Test(t, func(t *testing.T) {
		const n = 64
		tn := startConverged(t, Config{N: n, Target: dhtselect.Target{Superpeers: 8}, Election: "bully", Seed: 1})
		var cut []peer.ID
		for i, m := range tn.Members() {
			if i%3 == 1 {
				cut = append(cut, m.ID())
			}
		}
		if err := tn.Partition(cut); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		if err := tn.Heal(); err != nil {
			t.Fatal(err)
		}
		whole := func() (bad []string) {
			for i, m := range tn.Members() {
				if st := m.State(); st.Role == overlay.RoleSuperpeer && (st.Size.Source != dhtselect.SourceBackbone || st.Size.N != n) {
					bad = append(bad, fmt.Sprintf("%d: %d (%s)", i, st.Size.N, st.Size.Source))
				}
			}
			return bad
		}
		const bound = 30 * time.Second
		for start := time.Now(); ; time.Sleep(time.Second) {
			bad := whole()
			if len(bad) == 0 {
				t.Logf("every superpeer's estimate %d from the whole backbone %v after the heal (virtual)", n, time.Since(start))
				break
			}
			if time.Since(start) > bound {
				t.Fatalf("%v after the heal, superpeers without the whole backbone: %v", bound, bad)
			}
		}
	})
}
