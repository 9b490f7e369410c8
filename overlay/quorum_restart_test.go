package overlay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
)

// TestQuorumRestartVotesOnce is issue 18's acceptance test: a node that
// restarts in the middle of an election cannot vote twice in a term.
//
// Node x runs bully with Quorum and a data directory, in a cluster of
// three (one superpeer: k = 0) whose other two members, a and b, are
// test hosts that speak the election protocol themselves (see claimant):
// they rank above x and answer its bully elections, so x never wins one
// and never claims a term of its own; the terms are the test's. Two
// claims of one term compete, as when two candidates both saw term 4:
//
//  1. a claims term 5: x grants it (a CLAIM_ACK naming a), and the vote
//     is on disk before the grant leaves. b claims term 5 too: refused.
//  2. x stops and starts again with its identity and data directory. It
//     refuses every claimant for its first lease (the quorum's start
//     guard: its answers name x itself); after that b claims term 5
//     again and is refused, since x read back its term and vote.
//  3. The same restart with an empty data directory: once the guard is
//     over, x grants b term 5, a second vote in the term it gave a.
//
// No wall-clock bound but waitFor's minute against hangs: each claim is
// sent again every 100 ms until x gives an answer that is not the start
// guard's, and answers are matched to claims by their round. The hosts are
// on loopback TCP rather than mocknet, so that x restarts on a host of its
// own with the same key, as a process does. Without the shell's Save
// (carryOut) the test fails twice over: no file after the grant, and the
// grant to b in step 2.
func TestQuorumRestartVotesOnce(t *testing.T) {
	const term = 5
	keys := keysByDistance(t, 3) // the first ranks highest
	a, b := newClaimant(t, keys[0]), newClaimant(t, keys[1])
	start := func(dir string) *Node {
		t.Helper()
		return oneCluster(t, keys[2], WithBootstrapAddrs(append(a.addrs(t), b.addrs(t)...)...),
			WithReachability(ReachabilityPublic), WithElection("bully", true), WithDataDir(dir))
	}
	dir := t.TempDir()
	stored := func(dir string) classic.HardState {
		t.Helper()
		if _, err := os.Stat(filepath.Join(dir, hardStateFile)); err != nil {
			t.Fatalf("no hard-state file: %v", err)
		}
		hs, err := readHardState(filepath.Join(dir, hardStateFile))
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) != 1 {
			t.Fatalf("hard state of %d clusters, want 1: %v", len(hs), hs)
		}
		return hs[dhtselect.KeyOf(a.h.ID()).Cluster(0)]
	}

	// 1. x grants a term 5; the vote is on disk by the time the grant
	// arrives. b's claim of the same term is refused.
	x := start(dir)
	id := x.ID()
	t.Logf("a %s, b %s, x %s", a.h.ID().ShortString(), b.h.ID().ShortString(), id.ShortString())
	if ack := a.ask(t, x, term); ack.Term != term || ack.Leader != a.id() {
		t.Fatalf("x answered a's claim of term %d with %s, want a grant", term, ackString(ack))
	}
	if hs := stored(dir); hs.Term != term || hs.Vote != a.id() {
		t.Fatalf("after the grant the disk holds %s, want term %d, vote a", hardString(hs), term)
	}
	if ack := b.ask(t, x, term); ack.Term != term || ack.Leader == b.id() {
		t.Fatalf("x answered b's claim of term %d with %s, want a refusal of term %d", term, ackString(ack), term)
	}

	// 2. x restarts with its data directory: after its start guard, b's
	// claim of term 5 is refused.
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x = start(dir)
	if x.ID() != id {
		t.Fatalf("restarted as %s, want %s", x.ID(), id)
	}
	ack := b.ask(t, x, term)
	t.Logf("restarted with its data directory: %d answers of the start guard, then %s; the disk holds %s",
		b.guarded, ackString(ack), hardString(stored(dir)))
	if ack.Leader == b.id() {
		t.Fatalf("x, restarted with its data directory, granted b term %d: a second vote in the term it gave a", term)
	}
	if ack.Term != term {
		t.Fatalf("x, restarted with its data directory, answered b with %s, want a refusal of term %d", ackString(ack), term)
	}
	if hs := stored(dir); hs.Term != term || hs.Vote == b.id() {
		t.Fatalf("the disk holds %s, want term %d and no vote for b", hardString(hs), term)
	}

	// 3. The same restart without the stored state: x votes again.
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	fresh := t.TempDir()
	x = start(fresh)
	if ack := b.ask(t, x, term); ack.Term != term || ack.Leader != b.id() {
		t.Fatalf("x, restarted with an empty data directory, answered b's claim of term %d with %s, want a grant", term, ackString(ack))
	}
	if hs := stored(fresh); hs.Term != term || hs.Vote != b.id() {
		t.Fatalf("the empty data directory holds %s after the grant, want term %d, vote b", hardString(hs), term)
	}
}

// claimant is a test host that is a member of the node's cluster without
// running a node: it announces itself on the membership topic, answers a
// bully ELECTION from a lower-ranked member with OK and COORDINATOR (so
// that the node under test never wins an election, and never claims a
// term of its own), sends the CLAIMs the test asks for, and keeps the
// CLAIM_ACKs that come back.
type claimant struct {
	h     host.Host
	proto protocol.ID

	mu      sync.Mutex
	acks    []classic.Message
	seq     uint64 // the last claim round sent
	guarded int    // start-guard refusals seen by the last ask
}

func newClaimant(t *testing.T, key crypto.PrivKey) *claimant {
	t.Helper()
	ctx := context.Background()
	h := plainHost(t, libp2p.Identity(key))
	ps, err := pubsub.NewGossipSub(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gossip.JoinMembership(ps, h.ID(), gossip.MembershipConfig{Network: "default", Interval: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if err := m.SetLocal(ctx, gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(0)}); err != nil {
		t.Fatal(err)
	}
	c := &claimant{h: h, proto: electionProtocol("default")}
	h.SetStreamHandler(c.proto, c.handle)
	return c
}

func (c *claimant) id() classic.ID { return classic.ID(c.h.ID()) }

func (c *claimant) addrs(t *testing.T) []ma.Multiaddr {
	t.Helper()
	addrs, err := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: c.h.ID(), Addrs: c.h.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// handle reads one election message: a CLAIM_ACK is kept, an ELECTION is
// answered, the rest is ignored.
func (c *claimant) handle(s network.Stream) {
	defer s.Close()
	from := s.Conn().RemotePeer()
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	m, err := pb.ReadMsg(s, classic.ID(from))
	if err != nil {
		_ = s.Reset()
		return
	}
	switch m.Type {
	case classic.MsgClaimAck:
		c.mu.Lock()
		c.acks = append(c.acks, m)
		c.mu.Unlock()
	case classic.MsgElection:
		go func() {
			_ = c.send(from, classic.Message{Type: classic.MsgOK, To: classic.ID(from)})
			_ = c.send(from, classic.Message{Type: classic.MsgCoordinator, To: classic.ID(from), Leader: c.id()})
		}()
	}
}

// send writes m to p in a stream of its own, as the node does.
func (c *claimant) send(p peer.ID, m classic.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.h.NewStream(ctx, p, c.proto)
	if err != nil {
		return err
	}
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if err := pb.WriteMsg(s, m); err != nil {
		_ = s.Reset()
		return err
	}
	return s.Close()
}

// ask claims term at x, a new round every 100 ms, until x answers one of
// these rounds with something other than its start guard's refusal (a
// CLAIM_ACK naming x itself), and returns that answer. Claims that x drops
// (before its machine counts this claimant as a member) get no answer.
func (c *claimant) ask(t *testing.T, x *Node, term uint64) classic.Message {
	t.Helper()
	c.mu.Lock()
	first := c.seq + 1
	c.guarded = 0
	c.mu.Unlock()
	var ack classic.Message
	next := time.Now()
	waitFor(t, "an answer to the claim", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, m := range c.acks {
			if m.From != classic.ID(x.ID()) || m.Election.Source != c.id() || m.Election.Seq < first {
				continue // an answer to another life's rounds
			}
			if m.Leader == classic.ID(x.ID()) {
				c.guarded++
				continue
			}
			ack = m
			return true
		}
		c.acks = c.acks[:0]
		if time.Now().After(next) {
			c.seq++
			m := classic.Message{Type: classic.MsgClaim, To: classic.ID(x.ID()), Term: term,
				Election: classic.ElectionID{Source: c.id(), Seq: c.seq}}
			go func() { _ = c.send(x.ID(), m) }()
			next = time.Now().Add(100 * time.Millisecond)
		}
		return false
	})
	c.mu.Lock()
	c.acks = c.acks[:0]
	c.mu.Unlock()
	return ack
}

func ackString(m classic.Message) string {
	who := "none"
	if m.Leader != classic.None {
		who = peer.ID(m.Leader).ShortString()
	}
	return fmt.Sprintf("CLAIM_ACK{term %d, leader %s}", m.Term, who)
}

func hardString(hs classic.HardState) string {
	who := "none"
	if hs.Vote != classic.None {
		who = peer.ID(hs.Vote).ShortString()
	}
	return fmt.Sprintf("{term %d, vote %s}", hs.Term, who)
}
