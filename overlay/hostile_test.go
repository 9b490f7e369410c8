package overlay

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
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

// frame builds a frame of our wire with any version and type.
func frame(version, typ byte, payload []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(payload)+2))
	return append(append(b, version, typ), payload...)
}

// TestHostilePeer: a peer that speaks the overlay's protocols badly crashes
// and stalls no node, and the honest nodes keep the right roles. Node a
// gets bad frames (an unknown version, an unexpected type, an oversized,
// a truncated and a malformed one): it refuses and counts each, bans the
// peer at the fifth strike, disconnects it and closes its next
// connection. Node b gets garbage and forgeries on the membership topic
// (rejected; peer scoring then graylists the sender, so that even its
// valid announcement of itself goes nowhere), election messages that do
// not decode or come from no member (a forged leader, a stale term), and
// streams that open and never write (timed out).
func TestHostilePeer(t *testing.T) {
	ctx := context.Background()
	keys := keysByDistance(t, 3)
	start := func(i int, boot ...ma.Multiaddr) *Node {
		n, err := New(ctx, WithIdentity(keys[i]), WithBootstrapAddrs(boot...), WithReachability(ReachabilityPublic),
			WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithTarget(dhtselect.Target{Superpeers: 1}),
			WithElection("bully", false), WithIntervals(200*time.Millisecond, 200*time.Millisecond), WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a := start(0) // the superpeer: its key is the closest
	b := start(1, a.P2PAddrs()...)
	c := start(2, a.P2PAddrs()...)
	honest := []*Node{a, b, c}
	correct := func() bool {
		for _, n := range honest {
			s := n.State()
			if len(s.Members) != 3 || s.Superpeer.ID != a.ID() || (s.Role == RoleSuperpeer) != (n == a) {
				return false
			}
		}
		return true
	}
	waitFor(t, "the honest nodes to agree on a", correct)

	h := plainHost(t)
	rng := rand.New(rand.NewPCG(1, 2))
	election := protocol.ID("/superpeer/default/election/1.0.0")

	// Bad frames to a, five strikes, one of each kind: a bans h.
	if err := h.Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	var key dhtselect.Key
	for _, data := range [][]byte{
		frame(wireVersion+1, byte(frameCloser), key[:]),    // unknown version
		frame(wireVersion, byte(frameToken), key[:]),       // unexpected type
		binary.AppendUvarint(nil, maxFrame+1),              // oversized
		frame(wireVersion, byte(frameCloser), key[:])[:20], // truncated
		frame(wireVersion, byte(frameCloser), key[:10]),    // a short key
	} {
		send(ctx, h, a.ID(), a.closerProto, data)
	}
	waitFor(t, "a to ban h", func() bool { return a.guard.Banned(h.ID()) })
	waitFor(t, "a to disconnect h", func() bool { return h.Network().Connectedness(a.ID()) != network.Connected })
	st := a.Status()
	for _, why := range []string{"version", "type", "size", "truncated", "malformed"} {
		if st.Refused["closer"][why] != 1 {
			t.Errorf("closer messages refused as %q: %d, want 1 (%v)", why, st.Refused["closer"][why], st.Refused)
		}
	}
	if st.Bans != 1 {
		t.Errorf("bans = %d, want 1", st.Bans)
	}
	// It connects again: a closes the connection.
	_ = h.Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()})
	waitFor(t, "a to close h's new connection", func() bool { return h.Network().Connectedness(a.ID()) != network.Connected })

	// Garbage and forgeries on the membership topic, through b: b's
	// validator rejects all four, which graylists h at b (peer scoring),
	// so that h's valid announcement of itself, after them, goes nowhere.
	ps, err := pubsub.NewGossipSub(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(gossip.MembershipTopic("default"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "h to see b on the membership topic", func() bool { return slices.Contains(topic.ListPeers(), b.ID()) })
	rejected := b.members.Stats().Rejected
	forged, _ := gossip.Announcement{ID: h.ID(), ClusterKey: dhtselect.KeyOf(a.ID()).Cluster(8), K: 8}.Encode()
	for _, msg := range [][]byte{forged, randomBytes(rng, 100), []byte(`{"v":9}`), make([]byte, gossip.MaxAnnouncementSize+1)} {
		if err := topic.Publish(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "b to reject the four", func() bool { return b.members.Stats().Rejected == rejected+4 })
	valid, _ := gossip.Announcement{ID: h.ID(), Seq: uint64(time.Now().UnixNano()), ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(0)}.Encode()
	if err := topic.Publish(ctx, valid); err != nil {
		t.Fatal(err)
	}

	// Streams that open and never write, to b: they must not stall it.
	for _, proto := range []protocol.ID{b.closerProto, election} {
		s, err := h.NewStream(ctx, b.ID(), proto)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		// A read sends the protocol's negotiation (libp2p's is lazy),
		// then waits for an answer that never comes.
		go func() { _, _ = s.Read(make([]byte, 1)) }()
	}

	// Bad election messages to b, four: two that do not decode (strikes:
	// with the silent streams' two, four, not yet a ban), and two
	// well-formed ones from a peer that is no member, one naming h leader
	// with a term from the future, one with a stale term (dropped).
	forgedLeader, _ := pb.Marshal(classic.Message{Type: classic.MsgCoordinator, To: classic.ID(b.ID()), Leader: classic.ID(h.ID()), Term: 1 << 40})
	stale, _ := pb.Marshal(classic.Message{Type: classic.MsgHeartbeat, To: classic.ID(b.ID()), Leader: classic.ID(c.ID())})
	dropped := b.ElectionStats().Dropped
	for _, data := range [][]byte{
		randomBytes(rng, 64),
		binary.AppendUvarint(nil, pb.MaxSize+1),
		append(binary.AppendUvarint(nil, uint64(len(forgedLeader))), forgedLeader...),
		append(binary.AppendUvarint(nil, uint64(len(stale))), stale...),
	} {
		send(ctx, h, b.ID(), election, data)
	}
	if r := b.Status().Refused["election"]; r["size"] != 1 || r["size"]+r["malformed"]+r["truncated"] != 2 {
		t.Errorf("b refused %v election messages, want one oversized and one that does not decode", r)
	}
	if d := b.ElectionStats().Dropped - dropped; d != 4 {
		t.Errorf("b dropped %d election messages, want 4", d)
	}

	// b times the silent streams out (a strike each) and keeps working:
	// the honest nodes still agree, and h is a member nowhere.
	waitFor(t, "b to time out h's silent streams", func() bool {
		r := b.Status().Refused
		return r["closer"]["timeout"] == 1 && r["election"]["timeout"] == 1
	})
	if b.guard.Banned(h.ID()) {
		t.Error("b banned h after four strikes")
	}
	evals := b.State().Evaluations
	waitFor(t, "b to evaluate again", func() bool { return b.State().Evaluations > evals })
	if !correct() {
		for _, n := range honest {
			t.Logf("%s: %+v", n.ID().ShortString(), n.State())
		}
		t.Fatal("the honest nodes' roles changed")
	}
	for _, n := range honest {
		if _, ok := n.members.Get(h.ID()); ok {
			t.Errorf("%s lists the hostile peer in its membership view", n.ID().ShortString())
		}
	}
}

// send opens a stream from h to p on proto, writes data, and closes it.
func send(ctx context.Context, h host.Host, p peer.ID, proto protocol.ID, data []byte) {
	s, err := h.NewStream(ctx, p, proto)
	if err != nil {
		return // banned and disconnected already
	}
	_, _ = s.Write(data)
	_ = s.CloseWrite()
	buf := make([]byte, 1)
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _ = s.Read(buf) // until the node answers or resets
	_ = s.Close()
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestStreamLimit: a peer that opens more streams on the overlay's
// protocols than a peer may hold at once (all silent) gets the excess
// refused at once by the resource manager, and the node goes on serving
// the honest peer's lookups meanwhile.
func TestStreamLimit(t *testing.T) {
	a, b := twoNodes(t, WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithIntervals(200*time.Millisecond, 200*time.Millisecond))
	h := plainHost(t)
	if err := h.Connect(context.Background(), peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	perPeer := limitsFor(ReachabilityAuto).perPeer
	for range perPeer + 16 {
		s, err := h.NewStream(context.Background(), a.ID(), a.closerProto)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		go func() { _, _ = s.Read(make([]byte, 1)) }() // negotiate, then wait
	}
	waitFor(t, "a to refuse the 16 streams over the limit", func() bool { return a.Status().Refused["closer"]["limit"] == 16 })
	lookups := b.State().Lookups
	waitFor(t, "b to look up through a again", func() bool { return b.State().Lookups >= lookups+3 })
	if st := a.Status(); st.Refused["closer"]["limit"] != 16 {
		t.Fatalf("a refused %v; want 16 closer streams over the limit", st.Refused)
	}
	if sp := b.State().Superpeer.ID; sp != a.State().Superpeer.ID {
		t.Fatalf("a and b disagree: %s, %s", a.State().Superpeer.ID, sp)
	}
}
