package overlay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
)

// RTTs. The election's failure-detection timeout is made of the largest
// RTT to a member of the cluster (node.TimeoutTicks), so the node
// measures it itself: it pings its cluster's members and keeps, per peer,
// the least of its last rttKeep samples (a busy host adds its scheduling
// delays to a ping but never takes any away). A member it has no sample
// of is measured at once with the least of three pings; after that, each
// member is pinged once every rttEvery announce intervals, in the round
// its ID hashes to (rttPhase), so a round pings about a third of the
// cluster, twice each: the minimum filter runs over rounds as well as
// within one. Before, every round pinged every member four times, 1.5
// KB/s of an ordinary peer's 2.6 (peer bench --suite scale --live, 16
// members a cluster: every member pings every other). One ping a turn
// was cheaper still, but it is the first on a new stream (the protocol's
// negotiation rides with it), and the invitation election's failover
// (testnet TestElectionFailover/invitation) then left a member naming
// another leader than its mates in 3 runs of 7, where two pings failed
// 1 in 10 and the code before 1 in 8 (that one at the first
// convergence, a flake of its own). libp2p's own
// estimate (the peerstore's LatencyEWMA) is not used: it is what kad-dht
// records of its queries, a stream's set-up and a request, three to four
// RTTs on mocknet, and it moves with every query. The geometric
// strategy's pings are recorded here too.
const (
	rttKeep     = 3
	rttEvery    = 3  // rounds between two samples of a member
	rttFirst    = 3  // pings of a member's first measurement
	rttAgain    = 2  // pings of each later measurement, on one stream
	rttMaxPeers = 64 // pinged per round: a cluster is a few dozen peers
)

// rttPhase is the round, modulo rttEvery, in which p is pinged: a hash
// of its ID, so that a change of members moves nobody's turn.
func rttPhase(p peer.ID) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(p))
	return int(h.Sum32() % rttEvery)
}

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

// rttLoop pings the cluster's members whose turn it is every announce
// interval (rttPhase), and the members it has no sample of as soon as
// they join the cluster (rttKick: the first machine of a cluster is built
// from its members' RTTs, and a timeout made of libp2p's estimate stood
// until the next round); it hands the machine a fresh view once a round
// has answered.
func (n *Node) rttLoop(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.AnnounceInterval)
	defer t.Stop()
	all := true // this round pings the members whose turn it is, not only the new ones
	round := 0
	for {
		due := rttDue(n.State().Members, n.self, func(p peer.ID) bool { _, ok := n.rtts.get(p); return ok }, all, round)
		var wg sync.WaitGroup
		for p, count := range due {
			wg.Go(func() {
				if d, err := pingN(ctx, n, p, count); err == nil {
					n.rtts.record(p, d)
				}
			})
		}
		wg.Wait()
		if all {
			// A member is sampled every rttEvery rounds: one not
			// sampled for rttKeep turns has left the cluster (or
			// answers no ping).
			n.rtts.forget(time.Now().Add(-rttKeep * rttEvery * n.cfg.AnnounceInterval))
		}
		if len(due) > 0 {
			notify(n.rttFresh)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			all = true
			round++
		case <-n.rttKick:
			all = false
		}
	}
}

// rttDue returns the members to ping in this round, each with its number
// of pings: rttFirst for a member without a sample (known says which have
// one), 1 for a member whose turn it is (rttPhase) in a round of the
// ticker (all), none else; rttMaxPeers at most, self never.
func rttDue(members []peer.ID, self peer.ID, known func(peer.ID) bool, all bool, round int) map[peer.ID]int {
	due := map[peer.ID]int{}
	for _, p := range members {
		if p == self || len(due) == rttMaxPeers {
			continue
		}
		switch {
		case !known(p):
			due[p] = rttFirst
		case all && rttPhase(p) == round%rttEvery:
			due[p] = rttAgain
		}
	}
	return due
}

// The geometric strategy's ping carries the answerer's coordinate, as
// Serf's and Consul's do: every peer a node pings is a sample of its
// Vivaldi coordinate, and no coordinate needs gossip. Protocol
// "/superpeer/<network>/ping/2.0.0": the asker writes up to
// maxCoordPings pings of coordPingSize random bytes, one at a time, and
// the answerer echoes each; its first echo is followed by its coordinate,
// appendCoord's encoding (geo.go), or a uvarint 0 when it has none yet.
// The coordinate is the node's state's (the machine's last report, at most
// a token interval old): the handler answers without stepping the machine,
// so the echo is not held up behind the node's loop.
func coordPingProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/ping/2.0.0")
}

// coordPingSize is the size of a coordinate ping. Eight random bytes are
// enough to tell an echo from a stale or forged one on an authenticated
// stream. Version 1.0.0 used libp2p's ping.PingSize (32): three pings of
// 32 bytes each way a sample, once a second, when pings were half of an
// ordinary geometric peer's traffic (issue 20; BENCHMARKS.md, "Cheaper
// pings and attach answers").
const coordPingSize = 8

// maxCoordPings bounds the pings an answerer echoes on one stream.
const maxCoordPings = rttFirst

// pingCoord measures the RTT to p as pingN does, the least of count pings
// on one stream of the coordinate ping, and returns the coordinate p's
// answer carried (nil: none). A coordinate that is not a valid one is a
// malformed answer: an error, and a strike.
func pingCoord(ctx context.Context, n *Node, p peer.ID, count int) (time.Duration, *coordinate.Coordinate, error) {
	ctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	proto := coordPingProtocol(n.cfg.Network)
	s, err := n.host.NewStream(network.WithAllowLimitedConn(ctx, "ping"), p, proto)
	if err != nil {
		return 0, nil, err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	if err := inService(s); err != nil {
		_ = s.Reset()
		return 0, nil, err
	}
	r := bufio.NewReaderSize(s, 128)
	buf, echo := make([]byte, coordPingSize), make([]byte, coordPingSize)
	var c *coordinate.Coordinate
	best := time.Duration(0)
	for i := range min(max(count, 1), maxCoordPings) {
		_, _ = rand.Read(buf)
		start := time.Now()
		_, err := s.Write(buf)
		if err == nil {
			_, err = io.ReadFull(r, echo)
		}
		d := time.Since(start)
		if err == nil && !bytes.Equal(buf, echo) {
			err = fmt.Errorf("%w: ping echo differs", errWire)
		}
		if err == nil && i == 0 {
			if c, err = readPingCoord(r); err != nil {
				err = fmt.Errorf("%w: ping answer's coordinate: %w", errWire, err)
			}
		}
		if err != nil {
			_ = s.Reset()
			if errors.Is(err, errWire) {
				n.guard.refuse(n, protoName(proto), p, err)
				return 0, nil, err
			}
			if best > 0 {
				break
			}
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return 0, nil, err
		}
		n.host.Peerstore().RecordLatency(p, d)
		if best == 0 || d < best {
			best = d
		}
	}
	return best, c, nil
}

// readPingCoord reads the coordinate of a ping's answer: a uvarint 0
// (none), or appendCoord's encoding of a valid coordinate.
func readPingCoord(r *bufio.Reader) (*coordinate.Coordinate, error) {
	k, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if k == 0 {
		return nil, nil
	}
	return readCoordBody(r, k)
}

// handleCoordPing answers the coordinate ping: it echoes up to
// maxCoordPings pings, the first with the node's coordinate after it, and
// resets the stream at one more.
func (n *Node) handleCoordPing(s network.Stream) {
	defer s.Close()
	from := s.Conn().RemotePeer()
	if err := n.admit(s); err != nil {
		_ = s.Reset()
		n.guard.refuse(n, "ping", from, err)
		return
	}
	_ = s.SetDeadline(time.Now().Add(streamDeadline))
	buf := make([]byte, coordPingSize)
	for i := 0; ; i++ {
		// Until the asker closes: a stream closed at once after the
		// last echo could hand it over sooner than its RTT (mocknet
		// does).
		if _, err := io.ReadFull(s, buf); err != nil || i == maxCoordPings {
			if err == nil || !errors.Is(err, io.EOF) {
				_ = s.Reset() // a ping too many, or a broken one
			}
			return
		}
		out := buf
		if i == 0 {
			out = append(slices.Clone(buf), appendPingCoord(nil, n.State().Coord)...)
		}
		if _, err := s.Write(out); err != nil {
			_ = s.Reset()
			return
		}
	}
}

// appendPingCoord is readPingCoord's writer.
func appendPingCoord(b []byte, c *coordinate.Coordinate) []byte {
	if c == nil {
		return binary.AppendUvarint(b, 0)
	}
	return appendCoord(b, c)
}

// pingN measures the RTT to p: the least of count pings (at least one)
// on one stream of libp2p's ping protocol, each PingSize random bytes
// that p echoes. Exactly count: ping.Ping, which this used, pings again
// as soon as it has handed over a result, so a caller that wanted three
// sent four, and one that wanted one would send two. Each RTT goes to the
// peerstore as ping.Ping's do (the status's RTT to the superpeer reads
// it).
func pingN(ctx context.Context, n *Node, p peer.ID, count int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	s, err := n.host.NewStream(network.WithAllowLimitedConn(ctx, "ping"), p, ping.ID)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() }) // the deadline aborts a ping under way
	defer stop()
	if err := s.Scope().SetService(ping.ServiceName); err != nil {
		_ = s.Reset()
		return 0, err
	}
	buf, echo := make([]byte, ping.PingSize), make([]byte, ping.PingSize)
	best := time.Duration(0)
	for range max(count, 1) {
		_, _ = rand.Read(buf)
		start := time.Now()
		_, err := s.Write(buf)
		if err == nil {
			_, err = io.ReadFull(s, echo)
		}
		if err == nil && !bytes.Equal(buf, echo) {
			err = errors.New("overlay: ping echo differs")
		}
		if err != nil {
			_ = s.Reset()
			if best > 0 {
				break
			}
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return 0, err
		}
		d := time.Since(start)
		n.host.Peerstore().RecordLatency(p, d)
		if best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}
