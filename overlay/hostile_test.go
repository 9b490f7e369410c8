package overlay

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
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

// frame builds a frame of our wire with any version and type.
func frame(version, typ byte, payload []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(payload)+2))
	return append(append(b, version, typ), payload...)
}

// TestHostilePeer: peers that speak the overlay's protocols badly crash
// and stall no node, and the honest nodes keep the right roles. Node a
// gets bad frames (an unknown version, an unexpected type, an oversized,
// a truncated and a malformed one): it refuses and counts each, bans the
// sender at the fifth strike, disconnects it and closes its next
// connection. Node a, the superpeer, also gets garbage and forgeries
// where the cluster-scoped membership lives, from another peer: summaries
// that do not decode on the backbone, and on the register protocol a
// record of another identity and a record that does not open: rejected,
// each a strike, and the ban that follows keeps even that peer's valid
// registration out of the roster. (The test sent them to b on the global
// membership topic, which the DHT strategy no longer has: an ordinary
// member reads neither the backbone nor registrations, which only a
// serving node takes; the geometric strategy's membership topic is
// covered by gossip's validator tests.) Node c gets election
// messages that do not decode or come from no member (a forged leader, a
// stale term), and streams that open and never write (timed out).
func TestHostilePeer(t *testing.T) {
	ctx := context.Background()
	keys := keysByDistance(t, 3)
	start := func(i int, boot ...ma.Multiaddr) *Node {
		return oneCluster(t, keys[i], WithBootstrapAddrs(boot...), WithReachability(ReachabilityPublic), WithElection("bully", false))
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

	// Garbage and forgeries where the membership lives, from g (a second
	// hostile host, that speaks GossipSub) to the superpeer a: three
	// summaries that do not decode on the backbone, then on the register
	// protocol a record sealed for another identity and one that does not
	// open. a rejects each, a strike against g, and bans g at the fifth;
	// g's valid registration of itself, after them, is refused (banned
	// peers are disconnected and their streams refused).
	// g is on an address of its own: a penalises h's (banGate).
	g, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.2/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ps, err := pubsub.NewGossipSub(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	topic, err := ps.Join(gossip.BackboneTopic("default"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "g to see a on the backbone", func() bool { return slices.Contains(topic.ListPeers(), a.ID()) })
	for _, msg := range [][]byte{randomBytes(rng, 100), []byte(`{"v":9}`), []byte(`{"v":1,"k":-1,"size":1}`)} {
		if err := topic.Publish(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a to reject g's three summaries", func() bool { return a.Status().Refused["backbone"]["malformed"] == 3 })
	otherKey, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	otherID, _ := peer.IDFromPrivateKey(otherKey)
	forged, err := gossip.SealAnnouncement(gossip.Announcement{ID: otherID, Seq: 1, ClusterKey: dhtselect.KeyOf(otherID).Cluster(0)}, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := rawRegister(ctx, g, a.ID(), forged); err != nil || st != regBadRecord {
		t.Errorf("a answered a record of another identity with %v, %v; want %v", st, err, regBadRecord)
	}
	// The fifth strike: a bans g and closes its connection before it
	// answers, so g may read the answer or a reset.
	if st, err := rawRegister(ctx, g, a.ID(), randomBytes(rng, 100)); err == nil && st != regBadRecord {
		t.Errorf("a answered a record that does not open with %v; want %v or a reset", st, regBadRecord)
	}
	waitFor(t, "a to ban g", func() bool { return a.guard.Banned(g.ID()) })
	if r := a.Status().Refused; r["backbone"]["malformed"] != 3 || r["register"]["malformed"] != 2 {
		t.Errorf("a refused %v backbone and %v register messages, want 3 and 2 malformed", r["backbone"], r["register"])
	}
	gKey := g.Peerstore().PrivKey(g.ID())
	valid, err := gossip.SealAnnouncement(gossip.Announcement{ID: g.ID(), Seq: uint64(time.Now().UnixNano()), ClusterKey: dhtselect.KeyOf(g.ID()).Cluster(0)}, gKey)
	if err != nil {
		t.Fatal(err)
	}
	_ = g.Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()}) // may fail: a penalises g's address
	if st, err := rawRegister(ctx, g, a.ID(), valid); err == nil {
		t.Errorf("a answered the banned g's registration with %v", st)
	}

	// Streams that open and never write, from h to c: they must not
	// stall it.
	if err := h.Connect(ctx, peer.AddrInfo{ID: c.ID(), Addrs: c.Host().Addrs()}); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []protocol.ID{c.closerProto, election} {
		s, err := h.NewStream(ctx, c.ID(), proto)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Reset()
		// A read sends the protocol's negotiation (libp2p's is lazy),
		// then waits for an answer that never comes.
		go func() { _, _ = s.Read(make([]byte, 1)) }()
	}

	// c times the silent streams out, a strike each. (The silent election
	// stream is a dropped message too: the count of the four below starts
	// after it.)
	waitFor(t, "c to time out h's silent streams", func() bool {
		r := c.Status().Refused
		return r["closer"]["timeout"] == 1 && r["election"]["timeout"] == 1
	})

	// Bad election messages to c, four: two that do not decode (strikes:
	// with the silent streams' two, four, not yet a ban), and two
	// well-formed ones from a peer that is no member, one naming h leader
	// with a term from the future, one with a stale term (dropped).
	forgedLeader, _ := pb.Marshal(classic.Message{Type: classic.MsgCoordinator, To: classic.ID(c.ID()), Leader: classic.ID(h.ID()), Term: 1 << 40})
	stale, _ := pb.Marshal(classic.Message{Type: classic.MsgHeartbeat, To: classic.ID(c.ID()), Leader: classic.ID(b.ID())})
	dropped := c.ElectionStats().Dropped
	for _, data := range [][]byte{
		randomBytes(rng, 64),
		binary.AppendUvarint(nil, pb.MaxSize+1),
		append(binary.AppendUvarint(nil, uint64(len(forgedLeader))), forgedLeader...),
		append(binary.AppendUvarint(nil, uint64(len(stale))), stale...),
	} {
		send(ctx, h, c.ID(), election, data)
	}
	// c resets a bad stream before it counts it: wait for the counts.
	waitFor(t, "c to drop the four", func() bool { return c.ElectionStats().Dropped-dropped >= 4 })
	if r := c.Status().Refused["election"]; r["size"] != 1 || r["size"]+r["malformed"]+r["truncated"] != 2 {
		t.Errorf("c refused %v election messages, want one oversized and one that does not decode", r)
	}
	if d := c.ElectionStats().Dropped - dropped; d != 4 {
		t.Errorf("c dropped %d election messages, want 4", d)
	}

	// c keeps working: the honest nodes still agree, and neither h nor g
	// is a member.
	if c.guard.Banned(h.ID()) {
		t.Error("c banned h after four strikes")
	}
	evals := c.State().Evaluations
	waitFor(t, "c to evaluate again", func() bool { return c.State().Evaluations > evals })
	if !correct() {
		for _, n := range honest {
			t.Logf("%s: %+v", n.ID().ShortString(), n.State())
		}
		t.Fatal("the honest nodes' roles changed")
	}
	for _, n := range honest {
		for _, p := range []peer.ID{h.ID(), g.ID()} {
			if _, ok := n.members.Get(p); ok {
				t.Errorf("%s lists the hostile peer %s in its membership view", n.ID().ShortString(), p.ShortString())
			}
		}
	}
}

// rawRegister sends one register request from h to p with the sealed
// record rec (holding no roster), and returns the answer's status.
func rawRegister(ctx context.Context, h host.Host, p peer.ID, rec []byte) (regStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := h.NewStream(ctx, p, registerProtocol("default"))
	if err != nil {
		return 0, err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if err := writeFrame(s, frameRegister, appendRequest(nil, 0, 0, rec)); err != nil {
		return 0, err
	}
	resp, err := readStreamFrame(s, frameRoster)
	if err != nil {
		return 0, err
	}
	rep, err := parseReply(resp)
	return rep.status, err
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
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("a refused %v", a.Status().Refused)
		}
	})
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
