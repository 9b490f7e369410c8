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
	xID, err := peer.IDFromPrivateKey(keys[2])
	if err != nil {
		t.Fatal(err)
	}
	a, b := newClaimant(t, keys[0], xID), newClaimant(t, keys[1], xID)
	a.setRoster(a.sealed, b.sealed)
	b.setRoster(a.sealed, b.sealed)
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
// running a node: it takes part in the cluster-scoped membership as the
// DHT strategy does it (the test used the global membership topic, which
// that strategy no longer has), answers a bully ELECTION from a
// lower-ranked member with OK and COORDINATOR (so that the node under
// test never wins an election, and never claims a term of its own),
// sends the CLAIMs the test asks for, and keeps the CLAIM_ACKs that come
// back. The membership, both ways:
//
//   - it registers its sealed announcement with x every 100 ms: while x
//     has no superpeer (its lookup ends at itself, the only DHT node) x
//     serves the cluster, and its registry makes the claimants members;
//   - it answers x's registrations, once x follows a claimant as its
//     superpeer, as a superpeer's registry would: the digest of the one
//     cluster (k = 0) of three, and the roster of both claimants (one
//     snapshot, then "unchanged").
type claimant struct {
	h      host.Host
	proto  protocol.ID
	sealed []byte // its announcement, sealed

	mu      sync.Mutex
	acks    []classic.Message
	seq     uint64   // the last claim round sent
	guarded int      // start-guard refusals seen by the last ask
	roster  [][]byte // the sealed announcements it answers registrations with
}

func newClaimant(t *testing.T, key crypto.PrivKey, x peer.ID) *claimant {
	t.Helper()
	h := plainHost(t, libp2p.Identity(key))
	sealed, err := gossip.SealAnnouncement(gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), Seq: 1,
		ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(0)}, key)
	if err != nil {
		t.Fatal(err)
	}
	c := &claimant{h: h, proto: electionProtocol("default"), sealed: sealed}
	h.SetStreamHandler(c.proto, c.handle)
	h.SetStreamHandler(registerProtocol("default"), c.registry)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if h.Network().Connectedness(x) == network.Connected {
				_, _ = rawRegister(ctx, h, x, sealed)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return c
}

// setRoster sets the sealed announcements the claimant's registrations
// answer with.
func (c *claimant) setRoster(sealed ...[]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.roster = sealed
}

// registry answers one register request as the superpeer of the one
// cluster (k = 0, three peers): a snapshot of the roster (roster 1,
// version 1), or "unchanged" for a member that holds it.
func (c *claimant) registry(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	req, err := readStreamFrame(s, frameRegister)
	if err != nil {
		_ = s.Reset()
		return
	}
	rid, ver, _, err := parseRequest(req)
	if err != nil {
		_ = s.Reset()
		return
	}
	c.mu.Lock()
	rep := regReply{status: regSnapshot, rid: 1, ver: 1, entries: c.roster,
		digest: clusterDigest{K: 0, Size: dhtselect.Estimate{N: 3, Source: "claimant"}}}
	c.mu.Unlock()
	if rid == 1 && ver == 1 {
		rep.status, rep.entries = regUnchanged, nil
	}
	_ = writeFrame(s, frameRoster, appendReply(nil, rep))
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
