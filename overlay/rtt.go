package overlay

import (
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// RTTs. The election's failure-detection timeout is made of the largest
// RTT to a member of the cluster (node.TimeoutTicks), so the node
// measures it itself: it pings its cluster's members every announce
// interval and keeps, per peer, the least of its last rttKeep samples (a
// busy host adds its scheduling delays to a ping but never takes any
// away). libp2p's own estimate (the peerstore's LatencyEWMA) is not
// used: it is what kad-dht records of its queries, a stream's set-up and
// a request, three to four RTTs on mocknet, and it moves with every
// query. The geometric strategy's pings are recorded here too.
const (
	rttKeep     = 3
	rttMaxPeers = 64 // pinged per round: a cluster is a few dozen peers
)

// rttTable holds the node's own RTT samples.
type rttTable struct {
	mu      sync.Mutex
	samples map[peer.ID][]time.Duration // the last rttKeep, oldest first
	last    map[peer.ID]time.Time       // of the last sample
}

func (t *rttTable) record(p peer.ID, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.samples == nil {
		t.samples, t.last = map[peer.ID][]time.Duration{}, map[peer.ID]time.Time{}
	}
	s := append(t.samples[p], d)
	if len(s) > rttKeep {
		s = s[len(s)-rttKeep:]
	}
	t.samples[p], t.last[p] = s, time.Now()
}

// get returns the least of p's last samples.
func (t *rttTable) get(p peer.ID) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.samples[p]
	if len(s) == 0 {
		return 0, false
	}
	best := s[0]
	for _, d := range s[1:] {
		best = min(best, d)
	}
	return best, true
}

// forget drops the peers last sampled before cutoff: the table holds
// only the peers the node pings (its cluster's, and the geometric
// strategy's), not every peer it ever measured.
func (t *rttTable) forget(cutoff time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, at := range t.last {
		if at.Before(cutoff) {
			delete(t.samples, p)
			delete(t.last, p)
		}
	}
}

// rtt is the RTT to p for the machine: the node's own, else 0 (unknown:
// the timeout is then three heartbeats, until the member's first pings
// answer, which the change of members asks for at once). Not libp2p's
// estimate: kad-dht moves it with every query, and a timeout made of it
// changed by more than a tenth between evaluations, so the machine was
// rebuilt at each (retune) and its leader, re-announcing itself every
// time, never sent a heartbeat (TestKillSuperpeerScenario: 24
// COORDINATORs, no HEARTBEAT).
func (n *Node) rtt(p peer.ID) time.Duration {
	d, _ := n.rtts.get(p)
	return d
}

// rttLoop pings the cluster's members every announce interval, and the
// members it has no sample of as soon as they join the cluster (rttKick:
// the first machine of a cluster is built from its members' RTTs, and a
// timeout made of libp2p's estimate stood until the next round); it hands
// the machine a fresh view once a round has answered.
func (n *Node) rttLoop(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.AnnounceInterval)
	defer t.Stop()
	all := true // this round pings every member, not only the new ones
	for {
		st := n.State()
		asked := 0
		var wg sync.WaitGroup
		for _, p := range st.Members {
			if p == n.self || asked == rttMaxPeers {
				continue
			}
			if _, ok := n.rtts.get(p); ok && !all {
				continue
			}
			asked++
			wg.Go(func() {
				if d, err := pingLeast(ctx, n, p); err == nil {
					n.rtts.record(p, d)
				}
			})
		}
		wg.Wait()
		if all {
			n.rtts.forget(time.Now().Add(-rttKeep * n.cfg.AnnounceInterval))
		}
		if asked > 0 {
			notify(n.rttFresh)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			all = true
		case <-n.rttKick:
			all = false
		}
	}
}

// pingLeast measures the RTT to p: the least of three pings.
func pingLeast(ctx context.Context, n *Node, p peer.ID) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	results := ping.Ping(ctx, n.host, p)
	best := time.Duration(0)
	for range 3 {
		res, ok := <-results
		if !ok { // the deadline passed: the channel closes without a result
			res.Error = ctx.Err()
		}
		if res.Error != nil {
			if best > 0 {
				break
			}
			return 0, res.Error
		}
		if best == 0 || res.RTT < best {
			best = res.RTT
		}
	}
	return best, nil
}
