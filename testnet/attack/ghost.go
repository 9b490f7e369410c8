package attack

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
)

// Ghost superpeers (a hostile-peer audit): anyone may publish backbone
// summaries (gossip.Summary) under keys no host holds. A summary's
// superpeer is the message's signed origin and its cluster that origin's
// key masked to the summary's k, so a key ground into a cluster at k
// (about 2^k key pairs; none at k = 0) speaks for that cluster, and every
// other key for some cluster at any k. The audit found 3,474 of them held
// at once from one publisher, in the electorate of the cluster they
// claimed, where they took a lone quorum superpeer's role for as long as
// they were published. What stands against them now: a backbone holds at
// most 8 live summaries of new origins per cluster and 65,536 origins
// (gossip/backbone.go), and a claimer counts in a cluster's electorate,
// and before an unseen one as the registrar, only once seen on a
// connection (overlay/node: electorate, registrar). What is left is
// known: the summaries' sizes enter the network-size estimate
// (dhtselect.EstimateFromClusters), from which k follows under a
// fraction target.
//
// GhostBackbone is the attack of the live suite; GhostsAgainst chooses
// the ghosts and StartGhosts publishes their summaries. One host
// publishes for all of them: go-libp2p-pubsub signs a message with any
// key it is given (pubsub.WithSecretKeyAndPeerId), so a ghost costs a key
// pair and no host or connection.

// GhostsPerCluster is how many live summaries of new origins a backbone
// holds per cluster (gossip's maxClaimers): the most ghosts of one
// cluster that a node keeps, and the most worth publishing.
const GhostsPerCluster = 8

// GhostSize is the cluster size a ghost claims by default: the most a
// summary may give (gossip.MaxClusterSize).
const GhostSize = gossip.MaxClusterSize

// MaxSpreadK bounds the k SpreadOver covers: 2^MaxSpreadK clusters of
// GhostsPerCluster ghosts are 131,072 key pairs, a few seconds of one
// core, and more ghosts than a backbone holds (65,536 origins).
const MaxSpreadK = 14

// Ghost is one ghost superpeer: a key pair that no host holds, and the
// k of the summaries published under it (which claim the cluster of its
// Kademlia key masked to K).
type Ghost struct {
	Key   crypto.PrivKey
	ID    peer.ID
	KadID dhtselect.Key
	K     int
}

// Cluster is the cluster the ghost's summaries claim: its key masked to K.
func (g Ghost) Cluster() dhtselect.Key { return g.KadID.Cluster(g.K) }

// Summary encodes the ghost's summary numbered seq, of a cluster of size
// members at the ghost's k, as a superpeer would publish it (the origin,
// and so the cluster, is the signer's: the ghost's key).
func (g Ghost) Summary(seq uint64, size int) ([]byte, error) {
	return gossip.Summary{K: g.K, Size: size, Seq: seq}.Encode()
}

// newGhost draws one Ed25519 key pair from r, a ghost at k.
func newGhost(r io.Reader, k int) (Ghost, error) {
	priv, _, err := crypto.GenerateEd25519Key(r)
	if err != nil {
		return Ghost{}, fmt.Errorf("attack: ghost key: %w", err)
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		return Ghost{}, fmt.Errorf("attack: ghost key: %w", err)
	}
	return Ghost{Key: priv, ID: id, KadID: dhtselect.KeyOf(id), K: k}, nil
}

// GhostRand is the randomness of an attack seeded with seed: the same
// seed draws the same ghosts (crypto.GenerateEd25519Key reads its seed
// from it).
func GhostRand(seed uint64) io.Reader {
	var s [32]byte
	copy(s[:], "superpeer/attack/ghost-backbone")
	binary.LittleEndian.PutUint64(s[24:], seed)
	return rand.NewChaCha8(s)
}

// GrindInto draws key pairs from r until n of them fall in the cluster ck
// at k (their Kademlia keys masked to k are ck), and returns them as
// ghosts at k: about n·2^k draws. It fails for a k out of [0, MaxK], a ck
// with bits beyond k, or when ctx ends first.
func GrindInto(ctx context.Context, r io.Reader, k int, ck dhtselect.Key, n int) ([]Ghost, error) {
	if k < 0 || k > dhtselect.MaxK || ck.Cluster(k) != ck {
		return nil, fmt.Errorf("attack: grind into %s at k = %d: want k in [0, %d] and a cluster key with no bits beyond k", ck, k, dhtselect.MaxK)
	}
	out := make([]Ghost, 0, n)
	for draws := 0; len(out) < n; draws++ {
		if draws%256 == 0 && ctx.Err() != nil {
			return out, fmt.Errorf("attack: grind into %s at k = %d: %d of %d after %d draws: %w", ck, k, len(out), n, draws, ctx.Err())
		}
		g, err := newGhost(r, k)
		if err != nil {
			return out, err
		}
		if g.Cluster() == ck {
			out = append(out, g)
		}
	}
	return out, nil
}

// SpreadOver draws key pairs from r until each of the 2^k clusters at k
// holds per of them (a key that falls in a full cluster is dropped), and
// returns them as ghosts at k, by cluster: per·2^k ghosts, from about
// 2^k·(per + ln 2^k) draws and more for the last clusters to fill. It
// fails for a k out of [0, MaxSpreadK], or when ctx ends first.
func SpreadOver(ctx context.Context, r io.Reader, k, per int) ([]Ghost, error) {
	if k < 0 || k > MaxSpreadK || per < 0 {
		return nil, fmt.Errorf("attack: spread %d ghosts per cluster at k = %d: want k in [0, %d]", per, k, MaxSpreadK)
	}
	clusters := 1 << k
	by := make([][]Ghost, clusters)
	for left, draws := clusters*per, 0; left > 0; draws++ {
		if draws%256 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("attack: spread over k = %d: %d ghosts missing after %d draws: %w", k, left, draws, ctx.Err())
		}
		g, err := newGhost(r, k)
		if err != nil {
			return nil, err
		}
		i := clusterIndex(g.KadID, k)
		if len(by[i]) < per {
			by[i] = append(by[i], g)
			left--
		}
	}
	return slices.Concat(by...), nil
}

// clusterIndex is the number of key's cluster at k: its first k bits.
func clusterIndex(key dhtselect.Key, k int) int {
	if k == 0 {
		return 0
	}
	return int(binary.BigEndian.Uint32(key[:4]) >> (32 - k))
}

// GhostsAgainst draws, from r, the ghosts of an attack on the victim of a
// swarm at k: own ghosts ground into the victim's cluster at k (its
// electorate's and its registrar's; GhostsPerCluster-1 fill what the
// victim's backbone holds of the cluster beside the victim's own
// summary), and per ghosts in every cluster at k+1 (the estimate's: 16·2^k
// summaries at k+1 outnumber the swarm's 2^k at k, take the estimate's
// working k, and so set the median under which each summary's size is
// capped; honest clusters of k+1 ≤ MaxSpreadK only).
func GhostsAgainst(ctx context.Context, r io.Reader, victim peer.ID, k, own, per int) ([]Ghost, error) {
	if k < 0 || k >= MaxSpreadK {
		return nil, fmt.Errorf("attack: ghosts against k = %d: want k in [0, %d)", k, MaxSpreadK)
	}
	mine, err := GrindInto(ctx, r, k, dhtselect.KeyOf(victim).Cluster(k), own)
	if err != nil {
		return nil, err
	}
	spread, err := SpreadOver(ctx, r, k+1, per)
	if err != nil {
		return nil, err
	}
	return append(mine, spread...), nil
}

// GhostConfig configures StartGhosts.
type GhostConfig struct {
	// Network is the overlay's network name (the backbone topic's).
	Network string
	// Peers are the overlay peers the publisher connects to, the victim
	// first; it needs one of them on the backbone (a superpeer).
	Peers []peer.AddrInfo
	// Size is the cluster size every summary claims; zero means
	// GhostSize. Every other round claims one less, so that each summary
	// a node takes changes its backbone (a change, not a refresh: the
	// node derives its estimate again).
	Size int
	// MaxRate bounds the summaries published a second; zero: as fast as
	// the backbone's peers take them (the publisher's queues to them stay
	// at most Window RPCs deep each; past that, it waits for their
	// streams to drain).
	MaxRate float64
	// Window is how many RPCs may wait in the queue to any backbone peer;
	// zero means 24 (go-libp2p-pubsub's queues are 32 deep, and drop what
	// does not fit).
	Window int
	// Options are the publisher host's (NewHost's) options.
	Options []libp2p.Option
}

// GhostStats counts what a GhostPublisher did: summaries Published, the
// RPCs to backbone peers Sent (queued) and Dropped (the queue was full),
// the Rounds over all ghosts, and the Stalls (waits for a queue that did
// not drain within 100 ms, after which it publishes regardless).
type GhostStats struct {
	Published, Sent, Dropped, Rounds, Stalls uint64
}

// GhostPublisher publishes ghosts' summaries on a backbone (StartGhosts).
type GhostPublisher struct {
	host   host.Host
	topic  *pubsub.Topic
	flow   *flowTracer
	ghosts []Ghost
	cfg    GhostConfig

	published, rounds, stalls atomic.Uint64

	cancel context.CancelFunc
	done   sync.WaitGroup
}

// StartGhosts starts a publisher host with GossipSub (the router's
// defaults: it signs strictly, here with each ghost's key), joins the
// backbone topic of cfg.Network, connects to cfg.Peers (each tried for at
// most 10 s; it fails if it reaches none) and publishes the ghosts'
// summaries in rounds, each ghost once a round, until ctx ends or Close.
// It needs no subscription: a message goes to every peer subscribed to
// the topic (GossipSub's flood publishing), and a peer that took it
// forwards it to its mesh, the other superpeers.
func StartGhosts(ctx context.Context, cfg GhostConfig, ghosts []Ghost) (*GhostPublisher, error) {
	switch {
	case cfg.Network == "" || len(cfg.Peers) == 0 || len(ghosts) == 0:
		return nil, fmt.Errorf("attack: ghosts need a network, peers and ghosts (got %q, %d, %d)", cfg.Network, len(cfg.Peers), len(ghosts))
	case cfg.MaxRate < 0 || cfg.Window < 0 || cfg.Size < 0 || cfg.Size > gossip.MaxClusterSize:
		return nil, fmt.Errorf("attack: ghosts at rate %v, window %d, size %d: want no negative, a size up to %d", cfg.MaxRate, cfg.Window, cfg.Size, gossip.MaxClusterSize)
	}
	if cfg.Size == 0 {
		cfg.Size = GhostSize
	}
	if cfg.Window == 0 {
		cfg.Window = 24
	}
	h, err := NewHost(cfg.Options...)
	if err != nil {
		return nil, fmt.Errorf("attack: ghost publisher: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p := &GhostPublisher{host: h, flow: &flowTracer{}, ghosts: ghosts, cfg: cfg, cancel: cancel}
	ps, err := pubsub.NewGossipSub(runCtx, h, pubsub.WithRawTracer(p.flow))
	if err == nil {
		p.topic, err = ps.Join(gossip.BackboneTopic(cfg.Network))
	}
	if err != nil {
		cancel()
		_ = h.Close()
		return nil, fmt.Errorf("attack: ghost publisher: %w", err)
	}
	reached := 0
	for _, ai := range cfg.Peers {
		cctx, stop := context.WithTimeout(ctx, 10*time.Second)
		if connectAll(cctx, h, []peer.AddrInfo{ai}) == nil {
			reached++
		}
		stop()
	}
	if reached == 0 {
		_ = p.Close()
		return nil, fmt.Errorf("attack: ghost publisher reached none of %d peers: %w", len(cfg.Peers), errors.Join(ctx.Err(), errNoPeer))
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		p.run(runCtx, ctx)
	}()
	return p, nil
}

var errNoPeer = errors.New("no connection")

// run publishes until either context ends.
func (p *GhostPublisher) run(ctx, outer context.Context) {
	go func() {
		select {
		case <-outer.Done():
			p.cancel()
		case <-ctx.Done():
		}
	}()
	seq := uint64(time.Now().UnixNano())
	var bucket tokenBucket
	for round := uint64(0); ctx.Err() == nil; round++ {
		size := p.cfg.Size - int(round&1)
		if size < 1 {
			size = p.cfg.Size
		}
		for _, g := range p.ghosts {
			for len(p.topic.ListPeers()) == 0 && ctx.Err() == nil {
				sleepCtx(ctx, 100*time.Millisecond) // the superpeers' subscriptions are not known yet
			}
			if !p.flow.wait(ctx, p.cfg.Window, 100*time.Millisecond) {
				p.stalls.Add(1)
			}
			if p.cfg.MaxRate > 0 {
				sleepCtx(ctx, bucket.take(time.Now(), p.cfg.MaxRate))
			}
			if ctx.Err() != nil {
				return
			}
			seq++
			data, err := g.Summary(seq, size)
			if err != nil {
				continue // not with a size checked at the start
			}
			if p.topic.Publish(ctx, data, pubsub.WithSecretKeyAndPeerId(g.Key, g.ID)) == nil {
				p.published.Add(1)
			}
		}
		p.rounds.Add(1)
	}
}

// Host is the publisher's host.
func (p *GhostPublisher) Host() host.Host { return p.host }

// BackbonePeers are the peers the publisher knows on the backbone topic:
// the superpeers its summaries go to.
func (p *GhostPublisher) BackbonePeers() []peer.ID { return p.topic.ListPeers() }

// Ghosts are the ghosts it publishes for.
func (p *GhostPublisher) Ghosts() []Ghost { return slices.Clone(p.ghosts) }

// Stats counts what it did so far.
func (p *GhostPublisher) Stats() GhostStats {
	return GhostStats{Published: p.published.Load(), Sent: p.flow.sent.Load(), Dropped: p.flow.dropped.Load(),
		Rounds: p.rounds.Load(), Stalls: p.stalls.Load()}
}

// Close stops publishing and closes the host.
func (p *GhostPublisher) Close() error {
	p.cancel()
	p.done.Wait()
	return p.host.Close()
}

// GhostBackbone is the ghost-backbone attack of the live suite
// (Attack.Run). It reads the victim's k as any peer can (its
// superpeer's digest; victimK), or, when no digest comes within 15 s,
// attacks every k from 0 to 4; draws its ghosts from t.Seed
// (GhostsAgainst: GhostsPerCluster-1 in the victim's cluster at k, and
// GhostsPerCluster in every cluster at k+1, all claiming clusters of
// GhostSize) and publishes their summaries from one host connected to the
// victim and the swarm's nodes, as fast as they take them, until ctx
// ends.
func GhostBackbone(ctx context.Context, t Target) error { return ghostBackbone(ctx, t, nil) }

// ghostBackbone is GhostBackbone; started, when set, is given the
// publisher once it publishes (a test reads its Stats).
func ghostBackbone(ctx context.Context, t Target, started func(*GhostPublisher)) error {
	ks := []int{0, 1, 2, 3, 4}
	kctx, stop := context.WithTimeout(ctx, 15*time.Second)
	k, err := victimK(kctx, t)
	stop()
	switch {
	case err == nil:
		ks = []int{k}
	case ctx.Err() != nil:
		return nil
	}
	r := GhostRand(t.Seed)
	var ghosts []Ghost
	for _, k := range ks {
		gs, err := GhostsAgainst(ctx, r, t.Victim.ID, min(k, MaxSpreadK-1), GhostsPerCluster-1, GhostsPerCluster)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		ghosts = append(ghosts, gs...)
	}
	peers := []peer.AddrInfo{t.Victim}
	for _, n := range t.Nodes {
		if n.ID != t.Victim.ID {
			peers = append(peers, n)
		}
	}
	p, err := StartGhosts(ctx, GhostConfig{Network: t.Network, Peers: peers}, ghosts)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if started != nil {
		started(p)
	}
	<-ctx.Done()
	return p.Close()
}

// tokenBucket paces a rate without bursts: take returns how long to wait
// before the next event at rate a second.
type tokenBucket struct{ next time.Time }

func (b *tokenBucket) take(now time.Time, rate float64) time.Duration {
	gap := time.Duration(float64(time.Second) / rate)
	if b.next.Before(now) {
		b.next = now
	}
	wait := b.next.Sub(now)
	b.next = b.next.Add(gap)
	return wait
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// flowTracer is a pubsub.RawTracer that counts, per peer, the RPCs
// queued to it (SendRPC) and not written yet (SendRPCCompleted), and in
// all the RPCs queued and those dropped for a full queue (DropRPC).
type flowTracer struct {
	sent, dropped atomic.Uint64

	mu    sync.Mutex
	queue map[peer.ID]int
}

// deepest is the longest queue, in RPCs.
func (f *flowTracer) deepest() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, q := range f.queue {
		n = max(n, q)
	}
	return n
}

// wait blocks until every peer's queue is shorter than limit, and
// reports true; or, when none of them got shorter for stall (a stream
// that went away without the peer leaving), writes the queues off and
// reports false.
func (f *flowTracer) wait(ctx context.Context, limit int, stall time.Duration) bool {
	last, since := f.deepest(), time.Now()
	for d := last; d >= max(limit, 1); d = f.deepest() {
		if ctx.Err() != nil {
			return true
		}
		if d < last {
			last, since = d, time.Now()
		} else if time.Since(since) > stall {
			f.mu.Lock()
			clear(f.queue)
			f.mu.Unlock()
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func (f *flowTracer) add(p peer.ID, d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queue == nil {
		f.queue = map[peer.ID]int{}
	}
	if f.queue[p] += d; f.queue[p] <= 0 {
		delete(f.queue, p)
	}
}

var _ pubsub.RawTracer = (*flowTracer)(nil)

func (f *flowTracer) SendRPC(_ *pubsub.RPC, p peer.ID) {
	f.sent.Add(1)
	f.add(p, 1)
}
func (f *flowTracer) SendRPCCompleted(_ *pubsub.RPC, p peer.ID, _ time.Duration) { f.add(p, -1) }
func (f *flowTracer) DropRPC(*pubsub.RPC, peer.ID)                               { f.dropped.Add(1) }
func (f *flowTracer) OnNewOutboundStream(peer.ID, protocol.ID)                   {}
func (f *flowTracer) OnClosedOutboundStream(peer.ID)                             {}
func (f *flowTracer) AddPeer(peer.ID, protocol.ID)                               {}
func (f *flowTracer) RemovePeer(p peer.ID) {
	f.mu.Lock()
	delete(f.queue, p)
	f.mu.Unlock()
}
func (f *flowTracer) Join(string)                           {}
func (f *flowTracer) Leave(string)                          {}
func (f *flowTracer) Graft(peer.ID, string)                 {}
func (f *flowTracer) Prune(peer.ID, string)                 {}
func (f *flowTracer) ValidateMessage(*pubsub.Message)       {}
func (f *flowTracer) DeliverMessage(*pubsub.Message)        {}
func (f *flowTracer) RejectMessage(*pubsub.Message, string) {}
func (f *flowTracer) DuplicateMessage(*pubsub.Message)      {}
func (f *flowTracer) ThrottlePeer(peer.ID)                  {}
func (f *flowTracer) RecvRPC(*pubsub.RPC)                   {}
func (f *flowTracer) UndeliverableMessage(*pubsub.Message)  {}
