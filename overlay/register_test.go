package overlay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/metrics"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// The register protocol's tests run its two ends on real hosts (loopback
// TCP) inside a shell of a Node: the host, the guard and a logger, all
// that the protocol uses.

const regInterval = 5 * time.Second

// perAddr is MaxPerAddr in the tests of the identities per address group.
const perAddr = 2

// regPeer is one peer of the register tests: both ends, and the host's
// bandwidth counter.
type regPeer struct {
	n   *Node
	reg *registry
	rar *registrar
	bw  *streamBytes
}

// streamBytes counts the bytes of the register protocol's streams as the
// swarm reports them, at once (a BandwidthCounter's totals lag by up to a
// second).
type streamBytes struct {
	*metrics.BandwidthCounter
	n atomic.Int64
}

func (c *streamBytes) LogSentMessageStream(n int64, p protocol.ID, id peer.ID) {
	c.count(n, p)
	c.BandwidthCounter.LogSentMessageStream(n, p, id)
}

func (c *streamBytes) LogRecvMessageStream(n int64, p protocol.ID, id peer.ID) {
	c.count(n, p)
	c.BandwidthCounter.LogRecvMessageStream(n, p, id)
}

func (c *streamBytes) count(n int64, p protocol.ID) {
	if p == registerProtocol("test") {
		c.n.Add(n)
	}
}

func newRegPeer(t *testing.T, key crypto.PrivKey) *regPeer {
	t.Helper()
	bw := &streamBytes{BandwidthCounter: metrics.NewBandwidthCounter()}
	h := plainHost(t, libp2p.Identity(key), libp2p.BandwidthReporter(bw))
	n := &Node{cfg: Config{Network: "test"}, host: h, self: h.ID(), log: quiet}
	p := &regPeer{n: n, rar: newRegistrar(n, regInterval), bw: bw}
	p.reg = newRegistry(n, regInterval, p.rar.local)
	p.reg.goodbye = p.rar.superpeerLeft // as newClusterMembership
	h.SetStreamHandler(registerProtocol("test"), p.reg.handle)
	return p
}

// announce seals the peer's announcement at k.
func (p *regPeer) announce(t *testing.T, k int, superpeer bool) {
	t.Helper()
	a := gossip.Announcement{ID: p.n.self, Addrs: p.n.host.Addrs(), K: k, ClusterKey: dhtselect.KeyOf(p.n.self).Cluster(k), Superpeer: superpeer}
	if err := p.rar.setLocal(a); err != nil {
		t.Fatal(err)
	}
}

// serve makes p the superpeer of its cluster at k.
func (p *regPeer) serve(t *testing.T, k int) {
	t.Helper()
	p.announce(t, k, true)
	p.serveRefusing(t, k, nil)
}

// serveRefusing makes p the superpeer of its cluster at k, its machine
// refusing the identities refused (sorted).
func (p *regPeer) serveRefusing(t *testing.T, k int, refused []peer.ID) {
	t.Helper()
	if err := p.reg.setServing(k, dhtselect.KeyOf(p.n.self).Cluster(k), dhtselect.Estimate{N: 42, Source: dhtselect.SourceRouting}, refused); err != nil {
		t.Fatal(err)
	}
}

// register registers p with sp, and returns p's last status.
func (p *regPeer) register(t *testing.T, sp *regPeer) (regStatus, error) {
	t.Helper()
	p.n.host.Peerstore().AddAddrs(sp.n.self, sp.n.host.Addrs(), time.Hour)
	err := p.rar.register(context.Background(), sp.n.self)
	var ref *registerRefused
	if errors.As(err, &ref) {
		return ref.Why, err
	}
	p.rar.mu.Lock()
	defer p.rar.mu.Unlock()
	return p.rar.last, err
}

// signalled reports whether c was signalled, and clears it.
func signalled(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func ids(ms []node.Member) []peer.ID {
	var out []peer.ID
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func sorted(ps ...*regPeer) []peer.ID {
	var out []peer.ID
	for _, p := range ps {
		out = append(out, p.n.self)
	}
	slices.Sort(out)
	return out
}

func regPeers(t *testing.T, n int) []*regPeer {
	var out []*regPeer
	for _, k := range keysByDistance(t, n) {
		out = append(out, newRegPeer(t, k))
	}
	return out
}

// strikes is the strikes g holds against p.
func (g *guard) strikesOf(p peer.ID) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.strikes[p])
}

// A member registers and gets the roster (the superpeer and itself) and
// the digest; a second member appears in the first's roster by a delta;
// a round with nothing new is "unchanged"; a member that says goodbye
// leaves the superpeer's roster at once and the other's by a delta.
func TestRegisterRoster(t *testing.T) {
	ps := regPeers(t, 3)
	s, a, b := ps[0], ps[1], ps[2]
	s.serve(t, 0)
	a.announce(t, 0, false)
	b.announce(t, 0, false)
	if st, err := a.register(t, s); err != nil || st != regSnapshot {
		t.Fatalf("a's first registration: %v, %v; want a snapshot", st, err)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a)) {
		t.Errorf("a's roster %v, want %v", got, sorted(s, a))
	}
	d, ok := a.rar.digest()
	if !ok || d.K != 0 || d.Size.N != 42 || d.Size.Source != dhtselect.SourceRouting {
		t.Errorf("a's digest %+v, %v", d, ok)
	}
	signalled(s.reg.changed())
	signalled(a.rar.changed())
	if st, err := b.register(t, s); err != nil || st != regSnapshot {
		t.Fatalf("b's first registration: %v, %v", st, err)
	}
	if !signalled(s.reg.changed()) {
		t.Error("the registry did not signal b's arrival")
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, a, b)) {
		t.Errorf("the superpeer's roster %v, want %v", got, sorted(s, a, b))
	}
	if st, err := a.register(t, s); err != nil || st != regDelta {
		t.Fatalf("a's second registration: %v, %v; want a delta", st, err)
	}
	if !signalled(a.rar.changed()) {
		t.Error("a's registrar did not signal b's arrival")
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a, b)) {
		t.Errorf("a's roster after the delta %v, want %v", got, sorted(s, a, b))
	}
	for _, m := range a.rar.members() {
		if m.ID == s.n.self && !m.Superpeer || m.ID != s.n.self && m.Superpeer || m.Key != dhtselect.KeyOf(m.ID) {
			t.Errorf("member %+v", m)
		}
	}
	if st, err := a.register(t, s); err != nil || st != regUnchanged {
		t.Fatalf("a's third registration: %v, %v; want unchanged", st, err)
	}
	if signalled(a.rar.changed()) || signalled(s.reg.changed()) {
		t.Error("a change signalled for an unchanged round")
	}
	// A changed announcement is a delta for the others.
	if err := b.rar.setLocal(gossip.Announcement{ID: b.n.self, K: 0, Flapping: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := b.register(t, s); err != nil || st != regDelta || len(b.rar.members()) != 3 {
		t.Fatalf("b's registration of a change: %v, %v; want an empty delta (its own change is no news to it)", st, err)
	}
	if st, err := a.register(t, s); err != nil || st != regDelta {
		t.Fatalf("a after b's change: %v, %v; want a delta", st, err)
	}
	if i := slices.IndexFunc(a.rar.members(), func(m node.Member) bool { return m.ID == b.n.self }); i < 0 || !a.rar.members()[i].Flapping {
		t.Errorf("a's roster does not say b flaps: %+v", a.rar.members())
	}
	if err := b.rar.goodbye(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, a)) {
		t.Errorf("the superpeer's roster after b's goodbye %v, want %v", got, sorted(s, a))
	}
	if st, err := a.register(t, s); err != nil || st != regDelta {
		t.Fatalf("a after b's goodbye: %v, %v; want a delta", st, err)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a)) {
		t.Errorf("a's roster after b's goodbye %v, want %v", got, sorted(s, a))
	}
	// A node that serves no cluster refuses, and names its superpeer.
	s.reg.stopServing(b.n.self)
	_, err := a.register(t, s)
	var ref *registerRefused
	if !errors.As(err, &ref) || ref.Why != regNotSuperpeer || ref.Hint != b.n.self {
		t.Errorf("registration with a node that serves no cluster: %v, want a refusal naming %s", err, b.n.self)
	}
	// It serves again, with a new roster that does not hold a: a's
	// refresh is answered "record needed", and a sends its record.
	s.serve(t, 0)
	if st, err := a.register(t, s); err != nil || st != regSnapshot {
		t.Errorf("a's refresh with a roster that lost it: %v, %v; want its record sent and a snapshot", st, err)
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, a)) {
		t.Errorf("the new roster %v, want %v", got, sorted(s, a))
	}
	if n := s.n.guard.strikesOf(a.n.self) + a.n.guard.strikesOf(s.n.self); n != 0 {
		t.Errorf("%d strikes between honest peers", n)
	}
}

// A member that stops registering leaves the roster after the TTL (three
// intervals), connected or not: a connected member that stopped
// registering has moved to another superpeer, and kept in this roster it
// would count in two clusters' sizes on the backbone. The other members
// learn of it by a delta.
func TestRegisterExpiry(t *testing.T) {
	ps := regPeers(t, 4)
	s, a, b, c := ps[0], ps[1], ps[2], ps[3]
	var mu sync.Mutex
	now := time.Now()
	s.reg.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s.serve(t, 0)
	for _, p := range []*regPeer{a, b, c} {
		p.announce(t, 0, false)
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a, b, c)) {
		t.Fatalf("a's roster %v, want %v", got, sorted(s, a, b, c))
	}
	// b goes away; c stays connected but silent (it registers elsewhere).
	if err := b.n.host.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "s to see b's connection close", func() bool { return s.n.host.Network().Connectedness(b.n.self) != network.Connected })
	mu.Lock()
	now = now.Add(3 * regInterval)
	mu.Unlock()
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, a, b, c)) {
		t.Errorf("the roster at the TTL %v, want all still", got)
	}
	if _, err := a.register(t, s); err != nil { // a keeps registering
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Millisecond)
	mu.Unlock()
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, a)) {
		t.Errorf("the roster past the TTL %v, want %v (b and c expired, connected or not)", got, sorted(s, a))
	}
	if st, err := a.register(t, s); err != nil || st != regDelta {
		t.Fatalf("a after b and c expired: %v, %v; want a delta", st, err)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a)) {
		t.Errorf("a's roster %v, want %v", got, sorted(s, a))
	}
}

// Strangers: a record of another peer (sealed with its key, sent by this
// one) is refused and struck; a record outside the cluster is refused
// without a strike (an honest peer with an old k sends one), and its
// sender learns the superpeer's k from the digest; a roster at its bound
// refuses newcomers ("full"), without a strike, and still takes its
// members' registrations; new records faster than the rate are refused
// ("too soon"), without a strike, and the registrar's own pacing never
// meets that refusal.
func TestRegisterStrangers(t *testing.T) {
	keys := keysByDistance(t, 8)
	s := newRegPeer(t, keys[0]) // the key closest to zero: its first bit is 0
	// Keys whose first bit is 1 are in the other cluster at k = 1.
	var in, out []*regPeer
	for _, k := range keys[1:] {
		p := newRegPeer(t, k)
		if dhtselect.KeyOf(p.n.self).Cluster(1) == dhtselect.KeyOf(s.n.self).Cluster(1) {
			in = append(in, p)
		} else {
			out = append(out, p)
		}
	}
	for len(out) == 0 || len(in) < 4 {
		k, _, _ := crypto.GenerateEd25519Key(nil)
		p := newRegPeer(t, k)
		if dhtselect.KeyOf(p.n.self).Cluster(1) == dhtselect.KeyOf(s.n.self).Cluster(1) {
			in = append(in, p)
		} else {
			out = append(out, p)
		}
	}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now } // frozen: no token comes back
	s.reg.now = clock
	s.serve(t, 1)

	// Forged: in[0] sends in[1]'s sealed record.
	in[1].announce(t, 1, false)
	forger := in[0]
	forger.rar.sealed = in[1].rar.local()
	if st, err := forger.register(t, s); st != regBadRecord || !errors.Is(err, errRefused) {
		t.Errorf("a forged record: %v, %v; want refused as a bad record", st, err)
	}
	if n := s.n.guard.strikesOf(forger.n.self); n != 1 {
		t.Errorf("%d strikes against the forger, want 1", n)
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s)) {
		t.Errorf("the roster after the forgery %v, want the superpeer alone", got)
	}

	// Wrong cluster: out[0], an honest peer with k = 0.
	w := out[0]
	w.announce(t, 0, false)
	if st, err := w.register(t, s); st != regWrongCluster || !errors.Is(err, errRefused) {
		t.Errorf("a record outside the cluster: %v, %v; want refused", st, err)
	}
	if n := s.n.guard.strikesOf(w.n.self); n != 0 {
		t.Errorf("%d strikes against a peer outside the cluster, want 0", n)
	}
	if d, ok := w.rar.digest(); !ok || d.K != 1 {
		t.Errorf("the refused peer's digest %+v, %v; want k = 1", d, ok)
	}

	// Full: room for the superpeer and one member.
	s.reg.max = 2
	a, b := in[1], in[2]
	b.announce(t, 1, false)
	if st, err := a.register(t, s); err != nil || st != regSnapshot {
		t.Fatalf("a: %v, %v", st, err)
	}
	if st, err := b.register(t, s); st != regFull || !errors.Is(err, errRefused) {
		t.Errorf("b to a full roster: %v, %v; want refused", st, err)
	}
	if st, err := a.register(t, s); err != nil || st != regUnchanged {
		t.Errorf("a, a member of the full roster: %v, %v; want unchanged", st, err)
	}
	if n := s.n.guard.strikesOf(b.n.self); n != 0 {
		t.Errorf("%d strikes for a full roster, want 0", n)
	}
	s.reg.max = maxRoster

	// Too soon: new records back to back, sent by hand (no pacing).
	var soon int
	for i := range regBurst + regSlack + 2 {
		b.rar.mu.Lock()
		b.rar.sent = nil // defeat the registrar's pacing
		b.rar.mu.Unlock()
		if err := b.rar.setLocal(gossip.Announcement{ID: b.n.self, K: 1, ClusterKey: dhtselect.KeyOf(b.n.self).Cluster(1), Flapping: i%2 == 0}); err != nil {
			t.Fatal(err)
		}
		if st, _ := b.register(t, s); st == regTooSoon {
			soon++
		}
	}
	// b's refusal as "full" took one of its tokens.
	if want := regBurst + regSlack + 2 - (regBurst + regSlack - 1); soon != want {
		t.Errorf("%d of %d new records refused as too soon, want %d", soon, regBurst+regSlack+2, want)
	}
	// The registrar's own pacing: new records as fast as it likes, never
	// refused; the ones over its rate wait, and the old record refreshes.
	c := in[3]
	c.rar.now = clock
	for i := range 10 {
		if err := c.rar.setLocal(gossip.Announcement{ID: c.n.self, K: 1, ClusterKey: dhtselect.KeyOf(c.n.self).Cluster(1), Flapping: i%2 == 0}); err != nil {
			t.Fatal(err)
		}
		if st, err := c.register(t, s); err != nil {
			t.Fatalf("registration %d of a paced registrar: %v, %v", i, st, err)
		}
	}
	if n := s.n.guard.strikesOf(b.n.self) + s.n.guard.strikesOf(c.n.self); n != 0 {
		t.Errorf("%d strikes for the rate, want 0", n)
	}
}

// A hostile superpeer's roster: an altered record and one from outside
// the cluster are dropped, and struck once; the genuine entries stay.
func TestRegisterHostileSuperpeer(t *testing.T) {
	keys := keysByDistance(t, 6)
	h := newRegPeer(t, keys[0])
	var in, out []*regPeer
	for len(in) < 3 || len(out) < 1 {
		k, _, _ := crypto.GenerateEd25519Key(nil)
		p := newRegPeer(t, k)
		if dhtselect.KeyOf(p.n.self).Cluster(1) == dhtselect.KeyOf(h.n.self).Cluster(1) {
			in = append(in, p)
		} else {
			out = append(out, p)
		}
	}
	a, x, y, z := in[0], in[1], in[2], out[0]
	for _, p := range []*regPeer{h, a, x, y} {
		p.announce(t, 1, p == h)
	}
	z.announce(t, 0, false)
	altered := append([]byte(nil), y.rar.local()...)
	altered[len(altered)/2] ^= 1
	dig := clusterDigest{K: 1, ClusterKey: dhtselect.KeyOf(h.n.self).Cluster(1), Size: dhtselect.Estimate{N: 9, Source: "lies"}}
	h.n.host.SetStreamHandler(registerProtocol("test"), func(s network.Stream) {
		defer s.Close()
		if _, err := readStreamFrame(s, frameRegister); err != nil {
			return
		}
		rep := regReply{status: regSnapshot, digest: dig, rid: 7, ver: 4,
			entries: [][]byte{h.rar.local(), x.rar.local(), altered, z.rar.local()}}
		_ = writeFrame(s, frameRoster, appendReply(nil, rep))
	})
	if st, err := a.register(t, h); err != nil || st != regSnapshot {
		t.Fatalf("a: %v, %v", st, err)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(h, a, x)) {
		t.Errorf("a's roster %v, want %v (altered and outside dropped)", got, sorted(h, a, x))
	}
	if n := a.n.guard.strikesOf(h.n.self); n != 1 {
		t.Errorf("%d strikes against the hostile superpeer, want 1", n)
	}
}

// hostilePages is a hostile registrar's answer to one registration,
// page by page: a snapshot page, then pages of the ghosts' records
// (sealed by throwaway keys, in the cluster at k = 0), then pages of
// rep repeated, maxPages in all, each page cut ("more"). It serves them
// in order whatever the requests say, and counts the requests and the
// entries it sent.
type hostilePages struct {
	pages             [][]byte
	perPage           int // rep's copies in each of its pages
	requests, entries atomic.Int64
	counts            []int // the entries of each page
}

func newHostilePages(t *testing.T, dig clusterDigest, ghosts int, rep []byte) *hostilePages {
	t.Helper()
	hp := &hostilePages{}
	page := func(es [][]byte) []byte {
		return appendReply(nil, regReply{status: regDelta, digest: dig, rid: 7, ver: uint64(len(hp.pages) + 1), more: true, entries: es})
	}
	add := func(es [][]byte) {
		hp.pages = append(hp.pages, page(es))
		hp.counts = append(hp.counts, len(es))
	}
	hp.pages = append(hp.pages, appendReply(nil, regReply{status: regSnapshot, digest: dig, rid: 7, ver: 1, more: true}))
	hp.counts = append(hp.counts, 0)
	var cur [][]byte
	for range ghosts {
		sk, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := peer.IDFromPrivateKey(sk)
		g, err := gossip.SealAnnouncement(gossip.Announcement{ID: id, K: 0, ClusterKey: dhtselect.KeyOf(id).Cluster(0), Seq: 1}, sk)
		if err != nil {
			t.Fatal(err)
		}
		if len(page(append(cur, g))) > rosterPage {
			add(cur)
			cur = nil
		}
		cur = append(cur, g)
	}
	add(cur)
	cur = nil
	for len(page(append(cur, rep))) <= rosterPage {
		cur = append(cur, rep)
	}
	hp.perPage = len(cur)
	for len(hp.pages) < maxPages {
		add(cur)
	}
	return hp
}

func (hp *hostilePages) handle(s network.Stream) {
	defer s.Close()
	if _, err := readStreamFrame(s, frameRegister); err != nil {
		return
	}
	i := int(hp.requests.Add(1)) - 1
	if i >= len(hp.pages) {
		_ = s.Reset()
		return
	}
	hp.entries.Add(int64(hp.counts[i]))
	_ = writeFrame(s, frameRoster, hp.pages[i])
}

// A hostile registrar answers one registration with maxPages pages:
// after a first fill of ghost identities of the cluster (a full view),
// pages full of one valid record (its own) repeated. The member used to
// take all of them: 256 requests and 54,773 signature checks (and, per
// entry, a count of its view that walked the table), about 5 s of CPU a
// round, a round every announce interval, without a strike. Now a record
// the view holds already is not opened again, a round takes at most
// maxRoundEntries entries, and the registrar that sends more is struck.
func TestRegisterHostilePages(t *testing.T) {
	keys := keysByDistance(t, 2)
	h, a := newRegPeer(t, keys[0]), newRegPeer(t, keys[1])
	h.announce(t, 0, true)
	a.announce(t, 0, false)
	dig := clusterDigest{K: 0, ClusterKey: dhtselect.KeyOf(h.n.self).Cluster(0), Size: dhtselect.Estimate{N: 9, Source: "lies"}}
	hp := newHostilePages(t, dig, maxRoster-1, h.rar.local())
	h.n.host.SetStreamHandler(registerProtocol("test"), hp.handle)
	opens := 0
	a.rar.open = func(b []byte) (gossip.Announcement, error) {
		opens++ // under a.rar.mu, in register's goroutine
		return gossip.OpenAnnouncement(b)
	}
	_, err := a.register(t, h)
	requests, sent, strikes := hp.requests.Load(), hp.entries.Load(), a.n.guard.strikesOf(h.n.self)
	t.Logf("one registration: %d requests, %d entries sent (%d a page of the repeated record), %d opened; %d strikes; err %v",
		requests, sent, hp.perPage, opens, strikes, err)
	if !errors.Is(err, errWire) {
		t.Errorf("register: %v, want errWire (too many entries)", err)
	}
	if opens > maxRoster {
		t.Errorf("%d records opened, want at most %d: each ghost and the repeated record once", opens, maxRoster)
	}
	if limit := int64(maxRoster + maxGone + hp.perPage); sent > limit {
		t.Errorf("the member asked for %d entries, want at most %d (a round's bound and one page)", sent, limit)
	}
	if strikes != 1 {
		t.Errorf("%d strikes against the hostile registrar, want 1", strikes)
	}
	if got := len(a.rar.members()); got != maxRoster+1 {
		t.Errorf("a's roster holds %d, want %d (the ghosts, the registrar and a)", got, maxRoster+1)
	}
}

// A registrar that keeps cutting its pages, with nothing in them, is
// struck when the registration passes maxPages (it used to end the
// round without a strike, every announce interval).
func TestRegisterEndlessPages(t *testing.T) {
	keys := keysByDistance(t, 2)
	h, a := newRegPeer(t, keys[0]), newRegPeer(t, keys[1])
	h.announce(t, 0, true)
	a.announce(t, 0, false)
	dig := clusterDigest{K: 0, ClusterKey: dhtselect.KeyOf(h.n.self).Cluster(0), Size: dhtselect.Estimate{N: 9, Source: "lies"}}
	var requests atomic.Int64
	h.n.host.SetStreamHandler(registerProtocol("test"), func(s network.Stream) {
		defer s.Close()
		if _, err := readStreamFrame(s, frameRegister); err != nil {
			return
		}
		i := requests.Add(1)
		_ = writeFrame(s, frameRoster, appendReply(nil, regReply{status: regSnapshot, digest: dig, rid: 7, ver: uint64(i), more: true}))
	})
	_, err := a.register(t, h)
	if !errors.Is(err, errWire) {
		t.Errorf("register: %v, want errWire (too many pages)", err)
	}
	if n := requests.Load(); n != maxPages {
		t.Errorf("%d requests, want maxPages (%d)", n, maxPages)
	}
	if n := a.n.guard.strikesOf(h.n.self); n != 1 {
		t.Errorf("%d strikes against the registrar, want 1", n)
	}
}

// The bounds of a registration agree: an honest superpeer's answer of
// maxRoundEntries entries of the largest size (its roster and its
// removals' goodbyes) fits in maxPages pages, so that a member strikes
// no honest superpeer for its pages.
func TestRegisterBoundsAgree(t *testing.T) {
	ps := regPeers(t, 1)
	s := ps[0]
	s.serve(t, 0)
	big := make([]byte, gossip.MaxSealedSize)
	s.reg.mu.Lock()
	for i := range maxRoundEntries {
		p := peer.ID(fmt.Sprintf("peer %d", i))
		s.reg.entries[p] = &rosterEntry{sealed: big, ver: uint64(i + 1)}
	}
	s.reg.version = maxRoundEntries
	pages := 0
	for ver := uint64(0); ; pages++ {
		rep := s.reg.replyLocked("member", s.reg.rid, ver)
		if len(appendReply(nil, rep)) > rosterPage {
			t.Fatalf("page %d: %d bytes, more than a page", pages, len(appendReply(nil, rep)))
		}
		if !rep.more {
			pages++
			break
		}
		ver = rep.ver
	}
	s.reg.mu.Unlock()
	t.Logf("%d entries of %d bytes: %d pages", maxRoundEntries, len(big), pages)
	if pages > maxPages {
		t.Errorf("%d entries of the largest size take %d pages, more than maxPages (%d)", maxRoundEntries, pages, maxPages)
	}
}

// A hostile registrar replays an honest peer's old signed records: a
// goodbye it said before it restarted, and its record from before that,
// which said Private. A member takes neither over what it holds newer:
// in the roster it holds (the goodbye used to take the peer out, and
// make it count as left), nor in a new roster after a snapshot (a new
// view has no sequence numbers of its own; the member's former roster
// has, and the old Private record used to replace the new one there).
// An honest registrar can lag behind what a member heard elsewhere, so
// a stale record is passed over, not struck.
func TestRegisterReplayedRecords(t *testing.T) {
	keys := keysByDistance(t, 2)
	h, a := newRegPeer(t, keys[0]), newRegPeer(t, keys[1])
	h.announce(t, 0, true)
	a.announce(t, 0, false)
	pk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := peer.IDFromPrivateKey(pk)
	seal := func(seq uint64, private, leaving bool) []byte {
		b, err := gossip.SealAnnouncement(gossip.Announcement{ID: p, K: 0, ClusterKey: dhtselect.KeyOf(p).Cluster(0), Seq: seq,
			Private: private, Leaving: leaving}, pk)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	private, bye, fresh := seal(10, true, false), seal(11, false, true), seal(12, false, false)
	dig := clusterDigest{K: 0, ClusterKey: dhtselect.KeyOf(h.n.self).Cluster(0), Size: dhtselect.Estimate{N: 9, Source: "lies"}}
	var next atomic.Pointer[regReply]
	h.n.host.SetStreamHandler(registerProtocol("test"), func(s network.Stream) {
		defer s.Close()
		if _, err := readStreamFrame(s, frameRegister); err != nil {
			return
		}
		_ = writeFrame(s, frameRoster, appendReply(nil, *next.Load()))
	})
	round := func(rep regReply) {
		t.Helper()
		next.Store(&rep)
		if _, err := a.register(t, h); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		i := slices.IndexFunc(a.rar.members(), func(m node.Member) bool { return m.ID == p })
		if i < 0 || a.rar.members()[i].Private || a.rar.left(p) {
			t.Errorf("%s: p in a's roster %v, private %v, left %v; want it there, not private, not left",
				when, i >= 0, i >= 0 && a.rar.members()[i].Private, a.rar.left(p))
		}
	}
	own := h.rar.local()
	round(regReply{status: regSnapshot, digest: dig, rid: 7, ver: 1, entries: [][]byte{own, fresh}})
	check("the fresh record")
	round(regReply{status: regDelta, digest: dig, rid: 7, ver: 2, entries: [][]byte{bye}})
	check("the old goodbye replayed into the roster")
	round(regReply{status: regSnapshot, digest: dig, rid: 8, ver: 1, entries: [][]byte{own, private}})
	check("the old private record in a new roster")
	round(regReply{status: regDelta, digest: dig, rid: 8, ver: 2, entries: [][]byte{bye}})
	check("the old goodbye in the new roster")
	if n := a.n.guard.strikesOf(h.n.self); n != 0 {
		t.Errorf("%d strikes for stale records, want 0", n)
	}
}

// Pages: with pages of a few entries, a member gets the whole roster
// across several pages (snapshot, then deltas), and later changes, again
// across pages, also when the roster changes between two pages.
func TestRegisterPages(t *testing.T) {
	ps := regPeers(t, 14)
	s, members := ps[0], ps[1:]
	s.reg.page = 1500 // three or so entries
	s.serve(t, 0)
	for _, p := range members {
		p.announce(t, 0, false)
	}
	for _, p := range members[:10] {
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	a := members[0]
	check := func(when string) {
		t.Helper()
		if got, want := ids(a.rar.members()), ids(s.reg.members()); !slices.Equal(got, want) {
			t.Errorf("%s: a's roster %v, the superpeer's %v", when, got, want)
		}
	}
	a.rar.mu.Lock()
	a.rar.sp = "" // start over: a snapshot
	a.rar.mu.Unlock()
	before := a.rar.rounds
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	if pages := a.rar.rounds - before; pages < 3 {
		t.Errorf("the snapshot of 10 entries took %d pages, want several", pages)
	}
	check("after the snapshot")
	// Changes: three leave, three join, one changes.
	for _, p := range members[1:4] {
		if err := p.rar.goodbye(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range members[10:] {
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := members[5].rar.setLocal(gossip.Announcement{ID: members[5].n.self, Flapping: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := members[5].register(t, s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	check("after the changes")
	// A change between two pages: a's first page comes (by hand), then a
	// member joins, then a asks for the rest.
	late := members[2] // said goodbye; comes back
	late.announce(t, 0, true)
	a.rar.mu.Lock()
	a.rar.sp, a.rar.rid, a.rar.ver, a.rar.view = s.n.self, 0, 0, gossip.NewView(a.rar.ttl)
	rec := a.rar.sealed
	a.rar.mu.Unlock()
	resp, strike, err := s.reg.answer(appendRequest(nil, 0, 0, rec), a.n.self, "")
	if err != nil || strike != nil {
		t.Fatal(err, strike)
	}
	rep, err := parseReply(resp)
	if err != nil || rep.status != regSnapshot || !rep.more {
		t.Fatalf("first page: %+v, %v; want a snapshot with more", rep, err)
	}
	a.rar.mu.Lock()
	_, _, err = a.rar.applyLocked(s.n.self, rep, rec)
	a.rar.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.register(t, s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	check("after a change between pages")
}

// The bytes of registration: a steady round (the request and an
// "unchanged" answer), and the snapshot of a cluster of 16 (the
// superpeer and 15 members) for one of its members that holds nothing.
// Frames as written, and the streams' bytes as the hosts count them
// (multistream-select included; yamux, Noise and TCP headers not).
func TestRegisterBytes(t *testing.T) {
	ps := regPeers(t, 16)
	s, members := ps[0], ps[1:]
	// One cluster (k = 0 takes every key); the announcements say k = 4,
	// as in a swarm of some 256 peers, which their size does not depend
	// on.
	s.serve(t, 0)
	for _, p := range members {
		p.announce(t, 4, false)
	}
	for _, p := range members {
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	a := members[0]
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	round := func() (frames, streams int64) {
		a.rar.mu.Lock()
		f0 := a.rar.bytesOut + a.rar.bytesIn
		a.rar.mu.Unlock()
		b0 := a.bw.n.Load()
		if _, err := a.register(t, s); err != nil {
			t.Fatal(err)
		}
		a.rar.mu.Lock()
		defer a.rar.mu.Unlock()
		return int64(a.rar.bytesOut + a.rar.bytesIn - f0), a.bw.n.Load() - b0
	}
	f, b := round()
	if a.rar.last != regUnchanged {
		t.Fatalf("steady round: %v, want unchanged", a.rar.last)
	}
	t.Logf("a steady registration round (request and unchanged): %d bytes of frames, %d bytes on the stream; per %v interval: %.1f B/s",
		f, b, regInterval, float64(b)/regInterval.Seconds())
	a.rar.mu.Lock()
	a.rar.sp = ""
	a.rar.mu.Unlock()
	f, b = round()
	if a.rar.last != regSnapshot || len(a.rar.members()) != 16 {
		t.Fatalf("snapshot: %v, %d members", a.rar.last, len(a.rar.members()))
	}
	t.Logf("a snapshot of a cluster of 16 (15 entries): %d bytes of frames, %d bytes on the stream", f, b)
	if f > 16*1024 {
		t.Errorf("a snapshot of 16 takes %d bytes", f)
	}
}

// Request and reply payloads read back as written, and what does not
// parse is refused (errWire: a strike) without a panic.
func TestRegisterWire(t *testing.T) {
	ids := testIDs(t, 2)
	rep := regReply{status: regDelta, digest: clusterDigest{K: 2, ClusterKey: dhtselect.KeyOf(ids[0]).Cluster(2), Size: dhtselect.Estimate{N: 7, Source: "x"}},
		rid: 3, ver: 9, more: true, entries: [][]byte{{1, 2, 3}}, removed: ids}
	got, err := parseReply(appendReply(nil, rep))
	if err != nil || got.status != rep.status || got.digest != rep.digest || got.rid != 3 || got.ver != 9 || !got.more ||
		len(got.entries) != 1 || !slices.Equal(got.removed, ids) {
		t.Fatalf("reply read back as %+v, %v", got, err)
	}
	for _, r := range []regReply{{status: regNotSuperpeer, hint: ids[1]}, {status: regNotSuperpeer}, {status: regFull, digest: rep.digest},
		{status: regNeedRecord, digest: rep.digest},
		{status: regUnchanged, digest: rep.digest, rid: 1, ver: 2}} {
		if got, err := parseReply(appendReply(nil, r)); err != nil || got.status != r.status || got.hint != r.hint || got.rid != r.rid {
			t.Errorf("%v read back as %+v, %v", r.status, got, err)
		}
	}
	full := appendReply(nil, rep)
	badKey := appendReply(nil, regReply{status: regFull, digest: clusterDigest{K: 1, ClusterKey: dhtselect.Key{0xff}, Size: dhtselect.Estimate{N: 1}}})
	for name, b := range map[string][]byte{
		"empty": nil, "status": {99}, "truncated": full[:len(full)-1], "trailing": append(slices.Clone(full), 0),
		"cluster key beyond k": badKey,
	} {
		if _, err := parseReply(b); !errors.Is(err, errWire) {
			t.Errorf("%s: %v, want errWire", name, err)
		}
	}
	if rid, ver, rec, err := parseRequest(appendRequest(nil, 1, 2, nil)); err != nil || rid != 1 || ver != 2 || len(rec) != 0 {
		t.Errorf("a refresh read back as %d, %d, %v, %v", rid, ver, rec, err)
	}
	if _, _, _, err := parseRequest([]byte{0x80}); !errors.Is(err, errWire) {
		t.Errorf("a request of a bad uvarint: %v", err)
	}
	if rid, ver, rec, err := parseRequest(appendRequest(nil, 1, 2, []byte{5})); err != nil || rid != 1 || ver != 2 || len(rec) != 1 {
		t.Errorf("request read back as %d, %d, %v, %v", rid, ver, rec, err)
	}
}

// A member that moves to another superpeer (a failover, a hand-over)
// keeps the peers of the rosters it held before until the TTL after it
// last held them, so that its view is its cluster's peers while the new
// superpeer's roster fills, not the few that have registered with it yet;
// then they leave. The peers of the new roster are there at once.
func TestRegisterFormerRoster(t *testing.T) {
	ps := regPeers(t, 4)
	s, s2, a, b := ps[0], ps[1], ps[2], ps[3]
	var mu sync.Mutex
	now := time.Now()
	a.rar.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s.serve(t, 0)
	for _, p := range []*regPeer{a, b} {
		p.announce(t, 0, false)
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a, b)) {
		t.Fatalf("a's roster %v, want %v", got, sorted(s, a, b))
	}
	// s fails; s2 serves the cluster, and a is the first to register.
	s2.serve(t, 0)
	if st, err := a.register(t, s2); err != nil || st != regSnapshot {
		t.Fatalf("a with the new superpeer: %v, %v; want a snapshot", st, err)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, s2, a, b)) {
		t.Errorf("a's view while the new roster fills %v, want %v", got, sorted(s, s2, a, b))
	}
	mu.Lock()
	now = now.Add(3 * regInterval)
	mu.Unlock()
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s2, a)) {
		t.Errorf("a's view at the TTL %v, want %v (the former roster's peers gone)", got, sorted(s2, a))
	}
}

// A member whose superpeer refuses it (here: the superpeer's k moved, and
// the member is not in its cluster at the new k) hears its roster no
// more: the roster's entries stay as former ones until the TTL after the
// superpeer's last answer, and then leave the member's view, whatever
// the refusals that follow; the next answer taken is a snapshot. Before,
// the member kept the roster as it was for as long as it was refused,
// with the peers the superpeer had removed since (the live
// TestSybilFlood: sybils taken in before their address was found
// flooded, and removed 100 ms later, stayed in a refused member's view
// for 6.5 s).
func TestRegisterRefusedRosterAges(t *testing.T) {
	ps := regPeers(t, 3)
	s, a, b := ps[0], ps[1], ps[2]
	var mu sync.Mutex
	now := time.Now()
	a.rar.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s.serve(t, 0)
	for _, p := range []*regPeer{a, b, a} {
		p.announce(t, 0, false)
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a, b)) {
		t.Fatalf("a's roster %v, want %v", got, sorted(s, a, b))
	}
	// s removes b (as it does the identities of a group it finds
	// crowded), and its k moves to one at which a is not in its cluster.
	s.reg.mu.Lock()
	s.reg.view.Remove(b.n.self)
	s.reg.removeLocked(b.n.self)
	s.reg.mu.Unlock()
	k := 1
	for sk, ak := dhtselect.KeyOf(s.n.self), dhtselect.KeyOf(a.n.self); sk.Cluster(k) == ak.Cluster(k); k++ {
	}
	s.serve(t, k)
	advance(regInterval)
	for i := range 2 { // at 1 and 2 intervals after s's last answer
		if st, err := a.register(t, s); st != regWrongCluster {
			t.Fatalf("round %d of a with s at k = %d: %v, %v; want %v", i, k, st, err, regWrongCluster)
		}
		if i == 0 && !signalled(a.rar.changed()) {
			t.Error("the first refusal did not signal a change of the roster")
		}
		// The roster was last heard one interval before the first
		// refusal: its entries are former ones until the TTL after.
		if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a, b)) {
			t.Fatalf("a's view %v at %v after s's last answer, want %v", got, time.Duration(i+1)*regInterval, sorted(s, a, b))
		}
		advance(regInterval)
	}
	if st, err := a.register(t, s); st != regWrongCluster {
		t.Fatalf("a's last round with s at k = %d: %v, %v; want %v", k, st, err, regWrongCluster)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(a)) {
		t.Errorf("a's view %v at the TTL after s's last answer, refused since, want %v (a alone)", got, sorted(a))
	}
	s.serve(t, 0)
	if st, err := a.register(t, s); err != nil || st != regSnapshot {
		t.Errorf("a with s serving its cluster again: %v, %v; want a snapshot", st, err)
	}
	if got := ids(a.rar.members()); !slices.Equal(got, sorted(s, a)) {
		t.Errorf("a's roster %v, want %v", got, sorted(s, a))
	}
}

// The identities per address group (MaxPerAddr, here 2): a third
// identity from one group makes the group crowded, its two members leave
// the roster and every identity of it is refused (regCrowded, no strike)
// while records keep coming from it; the registry remembers at most
// MaxPerAddr+1 of its identities; another group is not touched; once the
// group has been quiet for the TTL, its identities are taken again.
func TestRegisterCrowded(t *testing.T) {
	ps := regPeers(t, 8)
	s, ms := ps[0], ps[1:]
	var mu sync.Mutex
	now := time.Now()
	s.reg.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s.reg.crowd = node.NewCrowding(perAddr, 4*maxRoster, s.reg.ttl)
	s.reg.connected = func(peer.ID) bool { return true } // answer is called by hand: no connections
	s.serve(t, 0)
	const flood, other = "192.0.2.1", "192.0.2.2"
	ask := func(p *regPeer, group string) regStatus {
		t.Helper()
		return s.askFrom(t, p, group)
	}
	for i, g := range []string{flood, flood, other} {
		if st := ask(ms[i], g); st != regSnapshot {
			t.Fatalf("member %d from %s: %v, want a snapshot", i, g, st)
		}
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, ms[0], ms[1], ms[2])) {
		t.Fatalf("roster %v, want s and the three members", got)
	}
	for _, p := range ms[3:] {
		if st := ask(p, flood); st != regCrowded {
			t.Fatalf("another identity of %s: %v, want %v", flood, st, regCrowded)
		}
	}
	if st := ask(ms[0], flood); st != regCrowded {
		t.Errorf("a member of the crowded group registering again: %v, want %v", st, regCrowded)
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, ms[2])) {
		t.Errorf("roster %v under the flood, want %v", got, sorted(s, ms[2]))
	}
	if st := ask(ms[2], other); st == regCrowded || st.refusal() {
		t.Errorf("the member of the other group: %v", st)
	}
	s.reg.mu.Lock()
	remembered := s.reg.crowd.Remembered(flood)
	s.reg.mu.Unlock()
	if remembered > perAddr+1 {
		t.Errorf("the registry remembers %d identities of %s, want at most %d", remembered, flood, perAddr+1)
	}
	if st := s.reg.stats(); st.Answered[regCrowded] != 5 || st.Roster != 2 {
		t.Errorf("stats %+v, want 5 crowded answers and a roster of 2", st)
	}
	for _, p := range ms {
		if s.n.guard.strikesOf(p.n.self) > 0 {
			t.Errorf("%s struck", p.n.self)
		}
	}
	// The flood stops: after the TTL the group is one identity again.
	mu.Lock()
	now = now.Add(s.reg.ttl + time.Millisecond)
	mu.Unlock()
	if st := ask(ms[0], flood); st != regSnapshot && st != regDelta {
		t.Errorf("an identity of %s after the flood: %v, want it taken", flood, st)
	}
	// Members count while they are in the roster, also when they refresh
	// without a record for longer than the TTL: a second member of the
	// group, then (1.5 TTL later, both refreshing) a third identity, which
	// makes three.
	if st := ask(ms[1], flood); st != regSnapshot && st != regDelta {
		t.Fatalf("a second identity of %s: %v, want it taken", flood, st)
	}
	for range 3 {
		mu.Lock()
		now = now.Add(s.reg.ttl / 2)
		mu.Unlock()
		for _, p := range ms[:2] {
			resp, _, err := s.reg.answer(appendRequest(nil, 0, 0, nil), p.n.self, flood)
			if rep, perr := parseReply(resp); err != nil || perr != nil || rep.status.refusal() || rep.status == regNeedRecord {
				t.Fatalf("a refresh of a member of %s: %+v, %v, %v", flood, rep, err, perr)
			}
		}
	}
	if st := ask(ms[3], flood); st != regCrowded {
		t.Errorf("a third identity of %s beside two members refreshing: %v, want %v", flood, st, regCrowded)
	}
}

// The identities that the superpeer's machine refuses (it saw their
// address flooded, e.g. on the backbone) are crowded at the registry
// too, whatever the registry counted itself: they leave the roster its
// members get, and are refused while the machine refuses them; taken
// again once it does not. Two identities of one group are within perAddr:
// the registry alone would take them (as it did in the live
// TestSybilsScoped when a flood sent one cluster no more than
// MaxPerAddr registrations and the rest backbone summaries).
func TestRegisterRefusedByTheMachine(t *testing.T) {
	ps := regPeers(t, 4)
	s, ms := ps[0], ps[1:]
	s.reg.crowd = node.NewCrowding(perAddr, 4*maxRoster, s.reg.ttl)
	s.reg.connected = func(peer.ID) bool { return true } // answer is called by hand: no connections
	s.serve(t, 0)
	const flood, other = "192.0.2.1", "192.0.2.2"
	for i, g := range []string{flood, flood, other} {
		if st := s.askFrom(t, ms[i], g); st != regSnapshot {
			t.Fatalf("member %d from %s: %v, want a snapshot", i, g, st)
		}
	}
	refused := sorted(ms[0], ms[1])
	s.serveRefusing(t, 0, refused)
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, ms[2])) {
		t.Fatalf("roster %v once the machine refuses %v, want %v", got, refused, sorted(s, ms[2]))
	}
	for _, p := range ms[:2] {
		if st := s.askFrom(t, p, flood); st != regCrowded {
			t.Errorf("an identity the machine refuses: %v, want %v", st, regCrowded)
		}
	}
	if st := s.askFrom(t, ms[2], other); st.refusal() {
		t.Errorf("the member of the other group: %v", st)
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s, ms[2])) {
		t.Errorf("roster %v while the machine refuses %v, want %v", got, refused, sorted(s, ms[2]))
	}
	s.serveRefusing(t, 0, nil)
	if st := s.askFrom(t, ms[0], flood); st.refusal() {
		t.Errorf("an identity the machine no longer refuses: %v, want it taken", st)
	}
}

// A member's goodbye: the superpeer's registry drops it and knows it
// left (Left); another member's next round gets the goodbye in the delta
// in place of a bare removal, and knows it too; a member that comes back
// has not left.
func TestRegisterGoodbyeLeft(t *testing.T) {
	ps := regPeers(t, 3)
	s, a, b := ps[0], ps[1], ps[2]
	s.serve(t, 0)
	for _, p := range []*regPeer{a, b} {
		p.announce(t, 0, false)
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	if a.rar.left(b.n.self) || s.reg.left(b.n.self) {
		t.Fatal("b left before its goodbye")
	}
	if err := b.rar.goodbye(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if !s.reg.left(b.n.self) || slices.Contains(ids(s.reg.members()), b.n.self) {
		t.Errorf("after b's goodbye the registry holds %v, left %v", ids(s.reg.members()), s.reg.left(b.n.self))
	}
	if st, err := a.register(t, s); err != nil || st != regDelta {
		t.Fatalf("a after b's goodbye: %v, %v; want a delta", st, err)
	}
	if !a.rar.left(b.n.self) || slices.Contains(ids(a.rar.members()), b.n.self) {
		t.Errorf("a's roster %v after b's goodbye, left %v", ids(a.rar.members()), a.rar.left(b.n.self))
	}
	b.announce(t, 0, false)
	if _, err := b.register(t, s); err != nil {
		t.Fatal(err)
	}
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	if s.reg.left(b.n.self) || a.rar.left(b.n.self) {
		t.Errorf("b came back and still counts as left: registry %v, a %v", s.reg.left(b.n.self), a.rar.left(b.n.self))
	}
}

// A closing superpeer says goodbye to each member (clusterMembership.Leave):
// its members drop it from their rosters at once, as having left, which
// the machine and the lookups read. A goodbye from a peer that is not a
// member's superpeer (another member, a stranger) changes nothing there.
func TestRegisterSuperpeerGoodbye(t *testing.T) {
	ps := regPeers(t, 4)
	s, a, b, c := ps[0], ps[1], ps[2], ps[3]
	s.serve(t, 0)
	for _, p := range []*regPeer{a, b, c} {
		p.announce(t, 0, false)
		p.n.host.Peerstore().AddAddrs(a.n.self, a.n.host.Addrs(), time.Hour)
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.register(t, s); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids(a.rar.members()), s.n.self) {
		t.Fatalf("a's roster %v lacks its superpeer", ids(a.rar.members()))
	}
	// b, a member, says goodbye to s and (as if it were a superpeer) to a.
	if err := b.rar.goodbye(context.Background(), []peer.ID{a.n.self}); err != nil {
		t.Fatal(err)
	}
	if a.rar.left(b.n.self) {
		t.Error("a took the goodbye of b, which is not its superpeer, from b itself")
	}
	// c, registered with s, sends a the goodbye of ... itself: not a's
	// superpeer either.
	bye := c.rar.local()
	c.n.host.Peerstore().AddAddrs(a.n.self, a.n.host.Addrs(), time.Hour)
	if _, err := c.n.request(context.Background(), a.n.self, registerProtocol("test"), frameRegister, appendRequest(nil, 0, 0, bye), frameRoster); err != nil {
		t.Fatal(err)
	}
	if a.rar.left(c.n.self) || !slices.Contains(ids(a.rar.members()), s.n.self) {
		t.Errorf("a's roster %v after a stranger's goodbye, want its superpeer still there", ids(a.rar.members()))
	}
	// s closes: it stops serving and tells its members.
	var members []peer.ID
	for _, m := range s.reg.members() {
		members = append(members, m.ID)
	}
	s.reg.stopServing("")
	for _, p := range []*regPeer{a, c} {
		s.n.host.Peerstore().AddAddrs(p.n.self, p.n.host.Addrs(), time.Hour)
	}
	signalled(a.rar.changed())
	if err := s.rar.goodbye(context.Background(), members); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*regPeer{a, c} {
		if !p.rar.left(s.n.self) || slices.Contains(ids(p.rar.members()), s.n.self) {
			t.Errorf("after its superpeer's goodbye a member's roster is %v, left %v", ids(p.rar.members()), p.rar.left(s.n.self))
		}
	}
	if !signalled(a.rar.changed()) {
		t.Error("a's registrar did not signal its superpeer's goodbye")
	}
	if _, err := a.register(t, s); !errors.Is(err, errRefused) {
		t.Errorf("a registered with its closing superpeer: %v, want a refusal", err)
	}
	for _, p := range ps {
		for _, q := range ps {
			if n := p.n.guard.strikesOf(q.n.self); n != 0 {
				t.Errorf("%d strikes against an honest peer", n)
			}
		}
	}
}

// ask sends s one register request from p over the protocol (rid, ver
// and the record rec, nil: a refresh) and returns the answer.
func (p *regPeer) ask(t *testing.T, s *regPeer, rid, ver uint64, rec []byte) regReply {
	t.Helper()
	p.n.host.Peerstore().AddAddrs(s.n.self, s.n.host.Addrs(), time.Hour)
	resp, err := p.n.request(context.Background(), s.n.self, registerProtocol("test"), frameRegister, appendRequest(nil, rid, ver, rec), frameRoster)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := parseReply(resp)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A goodbye from a peer the roster does not hold removes nothing and
// reads nothing: it is refused as not a member (no strike), without a
// roster, and the roster's version does not move. Before, it was
// answered with the whole roster, every member's sealed announcement:
// any peer of the cluster's key range read the roster by "leaving" it.
// The same for a record the roster does not take (stale: older than the
// peer's own goodbye, which the view remembers). An honest member whose
// superpeer no longer holds it still says goodbye without an error.
func TestRegisterStrangerGoodbye(t *testing.T) {
	ps := regPeers(t, 5)
	s, a, x, y, z := ps[0], ps[1], ps[2], ps[3], ps[4]
	s.serve(t, 0)
	for _, p := range []*regPeer{a, x, y, z} {
		p.announce(t, 0, false)
	}
	for _, p := range []*regPeer{a, y, z} {
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	version := func() uint64 { s.reg.mu.Lock(); defer s.reg.mu.Unlock(); return s.reg.version }
	roster := sorted(s, a, y, z)
	before := version()

	// x, a stranger (its key is in the cluster: k = 0), says goodbye.
	bye := gossip.Announcement{ID: x.n.self, ClusterKey: dhtselect.KeyOf(x.n.self).Cluster(0), Seq: uint64(time.Now().UnixNano()), Leaving: true}
	sealed, err := gossip.SealAnnouncement(bye, x.n.host.Peerstore().PrivKey(x.n.self))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		rep := x.ask(t, s, 0, 0, sealed)
		if rep.status != regNotMember || len(rep.entries) != 0 || len(rep.removed) != 0 || rep.rid != 0 {
			t.Errorf("a stranger's goodbye %d: %v with %d entries, roster ID %d; want refused as not a member, no roster", i, rep.status, len(rep.entries), rep.rid)
		}
	}
	if got := ids(s.reg.members()); !slices.Equal(got, roster) || version() != before || s.reg.left(x.n.self) {
		t.Errorf("after a stranger's goodbye the roster is %v at version %d (was %d), left %v", got, version(), before, s.reg.left(x.n.self))
	}

	// y says goodbye as a member, then sends its record from before it.
	old := y.rar.local()
	if err := y.rar.goodbye(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	roster = sorted(s, a, z)
	if got := ids(s.reg.members()); !slices.Equal(got, roster) || !s.reg.left(y.n.self) {
		t.Fatalf("after y's goodbye the roster is %v, left %v", got, s.reg.left(y.n.self))
	}
	before = version()
	if rep := y.ask(t, s, 0, 0, old); rep.status != regNotMember || len(rep.entries) != 0 {
		t.Errorf("a stale record of a peer that left: %v with %d entries; want refused as not a member, no roster", rep.status, len(rep.entries))
	}
	if got := ids(s.reg.members()); !slices.Equal(got, roster) || version() != before {
		t.Errorf("after a stale record the roster is %v at version %d (was %d)", got, version(), before)
	}

	// s serves a new roster, which does not hold z: z's goodbye is
	// refused, and its registrar takes that as said.
	s.reg.stopServing("")
	s.serve(t, 0)
	if err := z.rar.goodbye(context.Background(), nil); err != nil {
		t.Errorf("the goodbye of a member its superpeer does not hold: %v", err)
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s)) {
		t.Errorf("the new roster after z's goodbye %v, want the superpeer alone", got)
	}
	if st := s.reg.stats(); st.Answered[regNotMember] != 4 {
		t.Errorf("%d answers 'not a member', want 4", st.Answered[regNotMember])
	}
	for _, p := range ps {
		if n := s.n.guard.strikesOf(p.n.self) + p.n.guard.strikesOf(s.n.self); n != 0 {
			t.Errorf("%d strikes between s and %s", n, p.n.self)
		}
	}
}

// A member's roster reads from scratch are budgeted: snapBurst at once,
// then snapPerInterval every interval; beyond, its refresh is taken but
// the roster is not sent (regTooSoon, no strike). Before, a member that
// asked for a snapshot in every request (roster ID 0), or for a delta
// from version 0 of the current roster (the same roster, without the
// snapshot's status), got the whole roster each time, at the guard's 50
// streams a second. Its continuations (a request from where its last
// answer left it) are free, so that an honest member keeps its steady
// rounds while over the budget, and a roster of many pages costs one
// read: the registrar's snapshots, each of several pages, come whole
// until the budget is spent, and the next one an interval later.
func TestRegisterSnapshotBudget(t *testing.T) {
	ps := regPeers(t, 12)
	s, a, c, others := ps[0], ps[1], ps[2], ps[3:]
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s.reg.now = clock // frozen until moved: no token comes back
	s.reg.page = 1500 // three or so entries
	s.serve(t, 0)
	for _, p := range ps[1:] {
		p.announce(t, 0, false)
		if _, err := p.register(t, s); err != nil {
			t.Fatal(err)
		}
	}
	roster := ids(s.reg.members())

	// a, registered (one read: its first snapshot), asks again and again
	// for the roster from scratch, a refresh each time.
	var rid uint64
	read := 0
	for i := range 20 {
		var rep regReply
		if i%2 == 0 {
			rep = a.ask(t, s, 0, 0, nil) // a snapshot
		} else {
			rep = a.ask(t, s, rid, 0, nil) // a delta from version 0
		}
		switch rep.status {
		case regSnapshot, regDelta:
			read++
			rid = rep.rid
		case regTooSoon:
		default:
			t.Fatalf("request %d: %v, want a roster or too soon", i, rep.status)
		}
	}
	if read != snapBurst-1 {
		t.Errorf("%d of 20 reads from scratch answered with a roster, want %d (the budget less a's first registration)", read, snapBurst-1)
	}
	if !slices.Equal(ids(s.reg.members()), roster) {
		t.Errorf("the roster %v after a's reads, want %v (a's refreshes taken)", ids(s.reg.members()), roster)
	}
	// Its continuation is free: from the version of its last answer.
	s.reg.mu.Lock()
	ver := s.reg.version
	s.reg.mu.Unlock()
	if rep := a.ask(t, s, rid, ver, nil); rep.status != regUnchanged {
		t.Errorf("a's steady round over the budget: %v, want unchanged", rep.status)
	}
	if err := others[0].rar.setLocal(gossip.Announcement{ID: others[0].n.self, Flapping: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := others[0].register(t, s); err != nil {
		t.Fatal(err)
	}
	if rep := a.ask(t, s, rid, ver, nil); rep.status != regDelta || len(rep.entries) != 1 {
		t.Errorf("a's round after a change, over the budget: %v with %d entries, want a delta of 1", rep.status, len(rep.entries))
	}
	// An interval later, one read more.
	mu.Lock()
	now = now.Add(regInterval)
	mu.Unlock()
	if rep := a.ask(t, s, 0, 0, nil); rep.status != regSnapshot || len(rep.entries) == 0 {
		t.Errorf("a's snapshot an interval later: %v, want a snapshot", rep.status)
	}
	if rep := a.ask(t, s, 0, 0, nil); rep.status != regTooSoon {
		t.Errorf("a's next snapshot: %v, want too soon", rep.status)
	}

	// c's registrar starts over (a new superpeer, a lost roster) as often
	// as the budget allows (full again: c's first read was an interval
	// ago): each snapshot of several pages comes whole.
	want := ids(s.reg.members())
	for i := range snapBurst {
		c.rar.mu.Lock()
		c.rar.sp = "" // start over: a snapshot
		before := c.rar.rounds
		c.rar.mu.Unlock()
		if st, err := c.register(t, s); err != nil || st != regDelta {
			t.Fatalf("c's snapshot %d: %v, %v; want its last page, a delta", i, st, err)
		}
		if pages := c.rar.rounds - before; pages < 3 {
			t.Errorf("c's snapshot %d took %d pages, want several", i, pages)
		}
		if got := ids(c.rar.members()); !slices.Equal(got, want) {
			t.Errorf("c's roster after snapshot %d: %v, want %v", i, got, want)
		}
	}
	c.rar.mu.Lock()
	c.rar.sp = ""
	c.rar.mu.Unlock()
	if st, err := c.register(t, s); st != regTooSoon || !errors.Is(err, errRefused) {
		t.Errorf("c's snapshot over the budget: %v, %v; want refused as too soon", st, err)
	}
	if !slices.Contains(ids(s.reg.members()), c.n.self) {
		t.Error("c left the roster when its snapshot was refused")
	}
	mu.Lock()
	now = now.Add(regInterval)
	mu.Unlock()
	if _, err := c.register(t, s); err != nil {
		t.Errorf("c's snapshot an interval later: %v", err)
	}
	if got := ids(c.rar.members()); !slices.Equal(got, want) {
		t.Errorf("c's roster an interval later: %v, want %v", got, want)
	}
	for _, p := range ps {
		if n := s.n.guard.strikesOf(p.n.self) + p.n.guard.strikesOf(s.n.self); n != 0 {
			t.Errorf("%d strikes between s and %s", n, p.n.self)
		}
	}
}

// TestRefusalKeepsItsHint: a member whose registrar has stopped serving
// is refused with a hint (the superpeer the registrar follows), and the
// round gives the machine that hint and nothing after it. It used to
// feed, after the refusal, the digest the member held from the
// registrar's serving days, which the machine took as an answer with no
// hint: the hint was gone at once, and the member kept registering with
// a peer that no longer served (a member refused 578 times in testnet's
// TestInvitationKillSuperpeerScenario, its superpeer never hearing of it).
func TestRefusalKeepsItsHint(t *testing.T) {
	ps := regPeers(t, 3)
	s, m, h := ps[0], ps[1], ps[2]
	s.serve(t, 0)
	m.announce(t, 0, false)
	if st, err := m.register(t, s); err != nil || st != regSnapshot {
		t.Fatalf("first registration: %v, %v; want a snapshot", st, err)
	}
	s.reg.stopServing(h.n.self) // it follows h now
	c := &clusterMembership{n: m.n, reg: m.reg, rs: m.rar, changes: make(chan struct{}, 1), kick: make(chan struct{}, 1), to: s.n.self}
	m.n.inbox.signal = make(chan struct{}, 1)
	m.n.state.Role = RoleOrdinary // a member (a joiner's round would give the machine its view first)
	c.round(context.Background())
	var digests []node.Digest
	for _, in := range m.n.inbox.take() {
		if d, ok := in.(node.Digest); ok {
			digests = append(digests, d)
		}
	}
	if len(digests) == 0 || digests[len(digests)-1] != (node.Digest{From: s.n.self, Superpeer: h.n.self}) {
		t.Errorf("digests fed %+v; want the refusal's hint %s last (and no stale digest after it)", digests, h.n.self)
	}
}

// A crowded group stays crowded while records keep coming from it, even
// when identities it showed lose their connection (MaxPerAddr, here 2):
// a flood of hundreds of identities is trimmed by the connection
// manager, and on the old rule one disconnected identity among the
// perAddr+1 remembered let the next one in, to the roster and the
// members' views (the live TestSybilFlood, one run in four). Once the
// group has sent nothing for the TTL, it is taken again.
func TestRegisterCrowdedThroughDisconnections(t *testing.T) {
	ps := regPeers(t, 8)
	s, ms := ps[0], ps[1:]
	var mu sync.Mutex
	now := time.Now()
	gone := map[peer.ID]bool{}
	s.reg.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s.reg.crowd = node.NewCrowding(perAddr, 4*maxRoster, s.reg.ttl)
	s.reg.connected = func(p peer.ID) bool { mu.Lock(); defer mu.Unlock(); return !gone[p] }
	s.serve(t, 0)
	const flood = "192.0.2.1"
	ask := func(p *regPeer) regStatus {
		t.Helper()
		return s.askFrom(t, p, flood)
	}
	for _, p := range ms[:2] {
		if st := ask(p); st != regSnapshot {
			t.Fatalf("an identity of %s below the limit: %v, want a snapshot", flood, st)
		}
	}
	if st := ask(ms[2]); st != regCrowded {
		t.Fatalf("a third identity of %s: %v, want %v", flood, st, regCrowded)
	}
	// Every identity it showed but the last loses its connection; the
	// flood goes on with new identities.
	for i, p := range ms[3:] {
		mu.Lock()
		for _, q := range ms[:2+i] {
			gone[q.n.self] = true
		}
		now = now.Add(s.reg.ttl / 4)
		mu.Unlock()
		if st := ask(p); st != regCrowded {
			t.Errorf("identity %d of %s after the others' connections closed: %v, want %v", 4+i, flood, st, regCrowded)
		}
	}
	if got := ids(s.reg.members()); !slices.Equal(got, sorted(s)) {
		t.Errorf("roster %v under the flood, want %v", got, sorted(s))
	}
	// Quiet for the TTL: taken again.
	mu.Lock()
	now = now.Add(s.reg.ttl + time.Millisecond)
	mu.Unlock()
	if st := ask(ms[0]); st != regSnapshot && st != regDelta {
		t.Errorf("an identity of %s after the flood: %v, want it taken", flood, st)
	}
}

// askFrom has p announce itself and register with s's registry by hand,
// on a connection from the address group group (no stream: the
// registry's answer is called directly), and returns the answer's
// status; an error or a strike fails the test.
func (s *regPeer) askFrom(t *testing.T, p *regPeer, group string) regStatus {
	t.Helper()
	p.announce(t, 0, false)
	resp, strike, err := s.reg.answer(appendRequest(nil, 0, 0, p.rar.local()), p.n.self, group)
	if err != nil || strike != nil {
		t.Fatal(err, strike)
	}
	rep, err := parseReply(resp)
	if err != nil {
		t.Fatal(err)
	}
	return rep.status
}
