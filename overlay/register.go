package overlay

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"golang.org/x/time/rate"

	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// Cluster-scoped membership by registration (issue 20). With the DHT
// strategy an ordinary peer need not hear every peer of the swarm: it
// registers with its superpeer, which keeps its cluster's roster, and
// reads the roster back. What a member sends and keeps then grows with its
// cluster, not with the swarm.
//
// The register protocol "/superpeer/<network>/register/1.0.0" is one
// request frame and one response frame in wire.go's format (the sender is
// the stream's authenticated peer; the guard's ban list, stream rate and
// strikes, the stream deadline and the service's resource scope apply as
// to the other protocols):
//
//   - request, a frameRegister: the roster ID and the roster version the
//     member holds (uvarints; 0 and 0: none), then the member's sealed
//     announcement (gossip.SealAnnouncement) to the end of the frame, or
//     nothing when the superpeer holds it already (a refresh: the stream's
//     peer is authenticated, so its liveness needs no record);
//   - response, a frameRoster: a status byte, then
//   - for regNotSuperpeer: the superpeer this node follows, or without
//     one the peer its lookup ended at (node.Machine.Hint), as a hint
//     (uvarint length and the ID's bytes; length 0: none known);
//   - for every other status: the digest (uvarint k, the 32-byte cluster
//     key, uvarint N of the size estimate, uvarint length and the
//     estimate's source), then for the refusals (regWrongCluster,
//     regFull, regTooSoon, regBadRecord, regCrowded, regNotMember) and
//     for regNeedRecord (a refresh from a member the roster does not
//     hold: send the record) nothing more;
//   - for regUnchanged: the roster ID and version (uvarints): the member
//     holds them already;
//   - for regDelta and regSnapshot: the roster ID and version, a byte 1
//     when the page was cut (ask again at once, with this version), a
//     uvarint count of sealed announcements, each a uvarint length and
//     its bytes, and a uvarint count of peers removed, each a uvarint
//     length and the ID's bytes. A delta holds the entries changed and
//     the peers removed since the member's version; a snapshot (for a
//     member with no version, one from another roster ID, or one older
//     than the oldest removal the superpeer remembers) holds every live
//     entry, and the member replaces its roster with it.
//
// Paging: every entry and removal carries the roster version at which it
// happened; a reply lists them in version order and stops before the
// frame would exceed its bound (registry.page, a little under the 64 KiB
// frame). A cut page's version is its last item's, so the member's next
// request (a delta since that version) takes up exactly where the page
// ended, also when the roster changed in between.
// The member trusts its registrar no more than the registrar trusts it:
// it takes at most maxRoundEntries entries and removals and maxPages
// pages in one registration and strikes a registrar that sends more, and
// an entry whose bytes its view holds already it passes over without a
// signature check (a hostile registrar once cost a member 5 s of CPU a
// round with 256 pages of one valid record repeated). It passes over a
// record older than what it holds of its peer, in its roster, a former
// one or a goodbye (registrar.staleLocked), so that a registrar cannot
// replay a peer's old goodbye or old flags over newer ones.
//
// The registry (the superpeer's end) trusts nothing a member says because
// it joined: the sealed record must open (signature, size, payload) and
// be the stream's peer's (else regBadRecord and a strike), its key must
// share the superpeer's cluster prefix at its k (else regWrongCluster, no
// strike: an honest peer with an old k does this), the roster holds at
// most maxRoster entries (regFull beyond), an address group (the
// stream's connection's, node.AddrGroup) that shows more than MaxPerAddr
// identities counts for nothing (regCrowded, no strike; its members
// leave the roster: registry.crowdedLocked), and a member may send a new
// record at most regBurst+regSlack at once and then one every
// interval/regPerInterval (regTooSoon beyond, no strike). A request
// without a record, or with the record the roster holds byte for byte, is
// a refresh: no signature check and no rate. The roster goes to members
// only: a goodbye (a sealed record with Leaving) from a peer the roster
// does not hold removes nothing and is refused (regNotMember, no
// strike), as is a record the roster does not take (stale: older than
// the peer's goodbye, which the roster's view remembers); before, such a
// "goodbye" read the whole roster without entering it. A member's own
// goodbye takes it out and is answered as its request asks. A member
// may read the roster from scratch (a snapshot, or a delta from a version
// older than the one its last answer left it at) snapBurst times at once
// and then snapPerInterval times every interval: beyond, the record or
// the refresh is taken, but the roster is not sent (regTooSoon, no
// strike), so that a member that asks for a snapshot in every request
// (some 0.5 MB for a roster of 1,024, at the guard's 50 streams a second:
// 25 MB/s) gets one an interval after the first few. Its continuations
// (the steady rounds, the next page) are free. The registrar (the member's
// end) sends its record only when its superpeer does not hold it yet, and
// paces its new records to regBurst at once and the same rate,
// refreshing meanwhile, so that an honest member is never refused for
// its rate. A steady round is then a request of a few bytes and an
// "unchanged" answer of the digest.

// registerProtocol is the register protocol on a network.
func registerProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/register/1.0.0")
}

// The register protocol's frames.
const (
	frameRegister frameType = 7 // register request: roster ID, version, sealed announcement (or none)
	frameRoster   frameType = 8 // register response: status, digest, roster
)

// regStatus is the first byte of a register response.
type regStatus byte

const (
	regUnchanged    regStatus = 1  // the member's roster is current
	regDelta        regStatus = 2  // the changes since the member's version
	regSnapshot     regStatus = 3  // the whole roster: replace yours
	regNotSuperpeer regStatus = 4  // refused: this node serves no cluster (a hint follows)
	regWrongCluster regStatus = 5  // refused: the member's key is not in this cluster at its k
	regFull         regStatus = 6  // refused: the roster is full
	regTooSoon      regStatus = 7  // refused: a new record sooner than the rate allows, or a roster read from scratch beyond the budget
	regBadRecord    regStatus = 8  // refused: the record does not open, or is another peer's (a strike)
	regNeedRecord   regStatus = 9  // a refresh from a member the roster does not hold: send the record
	regCrowded      regStatus = 10 // refused: the member's address group shows more identities than MaxPerAddr
	regNotMember    regStatus = 11 // refused: the roster does not hold the peer and the request did not put it there (a stranger's goodbye)
)

func (s regStatus) String() string {
	switch s {
	case regUnchanged:
		return "unchanged"
	case regDelta:
		return "delta"
	case regSnapshot:
		return "snapshot"
	case regNotSuperpeer:
		return "not a superpeer"
	case regWrongCluster:
		return "wrong cluster"
	case regFull:
		return "roster full"
	case regTooSoon:
		return "too soon"
	case regBadRecord:
		return "bad record"
	case regNeedRecord:
		return "record needed"
	case regCrowded:
		return "address crowded"
	case regNotMember:
		return "not a member"
	}
	return fmt.Sprintf("status %d", byte(s))
}

func (s regStatus) refusal() bool {
	return s >= regNotSuperpeer && s <= regBadRecord || s == regCrowded || s == regNotMember
}

// The registry's and registrar's bounds.
const (
	// maxRoster bounds a roster's entries (the superpeer's own included),
	// on both ends. A sealed announcement is some 400 bytes with an
	// Ed25519 key and a few addresses (at most gossip.MaxSealedSize, 12
	// KiB): a full roster of typical entries is about 0.5 MB, and at
	// most 12 MiB, within the service's share of the default memory
	// budget (an eighth of 256 MiB).
	maxRoster = 1024
	// maxGone bounds the removals the registry remembers for deltas; a
	// member whose version is older than the oldest forgotten one gets a
	// snapshot.
	maxGone = 1024
	// regBurst new records a member may send at once, then one every
	// interval/regPerInterval; the registry allows regSlack more at once,
	// for requests that a network delay brings closer together.
	regBurst       = 3
	regSlack       = 2
	regPerInterval = 2
	// snapBurst roster reads from scratch (a snapshot, or a delta from a
	// version older than the member was last sent) a member may ask for
	// at once, then snapPerInterval every interval: an honest member
	// asks for one when it joins, when its superpeer changes or starts a
	// new roster, and when an answer was lost; its other reads continue
	// from its last answer (the steady rounds, the pages), and are free.
	snapBurst       = 3
	snapPerInterval = 1
	// maxRoundEntries bounds the entries and removals a member takes in
	// one registration, over all its pages. A superpeer's answer lists
	// each peer of its roster (at most maxRoster, the member's own entry
	// left out) or of its removals (at most maxGone) once, and again only
	// when it changed while the member paged; a registrar that sends more
	// is struck and the round ends. Without the bound a registrar could
	// send maxPages pages of valid records (its own, repeated), each one
	// a signature check for the member: 256 pages of some 215 each, 5 s
	// of CPU a round, every announce interval.
	maxRoundEntries = maxRoster + maxGone
	// maxPages bounds the pages of one registration, and a registrar that
	// sends more is struck: maxRoundEntries entries of the largest size
	// (gossip.MaxSealedSize; 5 a page) fill about 410
	// (TestRegisterBoundsAgree).
	maxPages = 512
	// maxSource bounds the digest's size-estimate source.
	maxSource = 32
)

// rosterPage is the default bound on a response's payload: the frame's,
// less its header.
const rosterPage = maxFrame - 16

// clusterDigest is what a superpeer says of its cluster in every answer
// but regNotSuperpeer: its k, its cluster key and its network-size
// estimate.
type clusterDigest struct {
	K          int
	ClusterKey dhtselect.Key
	Size       dhtselect.Estimate
}

func (d clusterDigest) append(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(d.K))
	b = append(b, d.ClusterKey[:]...)
	b = binary.AppendUvarint(b, uint64(max(d.Size.N, 0)))
	src := d.Size.Source[:min(len(d.Size.Source), maxSource)]
	b = binary.AppendUvarint(b, uint64(len(src)))
	return append(b, src...)
}

// check reports what is wrong with a digest: k out of range, or a cluster
// key with bits beyond k.
func (d clusterDigest) check() error {
	if d.K < 0 || d.K > dhtselect.MaxK {
		return fmt.Errorf("k = %d out of [0, %d]", d.K, dhtselect.MaxK)
	}
	if d.Size.N < 1 {
		return fmt.Errorf("size estimate %d", d.Size.N) // the node itself exists
	}
	if d.ClusterKey.Cluster(d.K) != d.ClusterKey {
		return fmt.Errorf("cluster key %s has bits beyond k = %d", d.ClusterKey, d.K)
	}
	return nil
}

// in reports whether p's key is in the digest's cluster.
func (d clusterDigest) in(p peer.ID) bool { return dhtselect.KeyOf(p).Cluster(d.K) == d.ClusterKey }

// regReply is a decoded register response.
type regReply struct {
	status   regStatus
	hint     peer.ID
	digest   clusterDigest
	rid, ver uint64
	more     bool
	entries  [][]byte
	removed  []peer.ID
}

// parser reads a payload; the first error sticks.
type parser struct {
	b   []byte
	err error
}

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: register: "+format, append([]any{errWire}, args...)...)
	}
}

func (p *parser) uvarint(what string) uint64 {
	if p.err != nil {
		return 0
	}
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.fail("%s: bad uvarint", what)
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *parser) bytes(what string, l uint64) []byte {
	if p.err != nil {
		return nil
	}
	if l > uint64(len(p.b)) {
		p.fail("%s: %d bytes, %d left", what, l, len(p.b))
		return nil
	}
	b := p.b[:l]
	p.b = p.b[l:]
	return b
}

func (p *parser) octet(what string) byte {
	b := p.bytes(what, 1)
	if b == nil {
		return 0
	}
	return b[0]
}

// id reads a uvarint length and a peer ID; length 0 is no ID when
// optional.
func (p *parser) id(what string, optional bool) peer.ID {
	l := p.uvarint(what)
	if p.err != nil || (l == 0 && optional) {
		return ""
	}
	if l == 0 || l > pb.MaxIDLen {
		p.fail("%s: ID of %d bytes", what, l)
		return ""
	}
	id, err := peer.IDFromBytes(p.bytes(what, l))
	if err != nil && p.err == nil {
		p.fail("%s: %v", what, err)
	}
	return id
}

func (p *parser) digest() clusterDigest {
	var d clusterDigest
	d.K = int(min(p.uvarint("k"), dhtselect.MaxK+1))
	copy(d.ClusterKey[:], p.bytes("cluster key", uint64(len(d.ClusterKey))))
	n := p.uvarint("size")
	if n == 0 || n > 1<<48 {
		p.fail("size estimate %d", n)
	}
	d.Size.N = int(n)
	l := p.uvarint("source")
	if l > maxSource {
		p.fail("source of %d bytes", l)
	}
	d.Size.Source = string(p.bytes("source", l))
	if p.err == nil {
		if err := d.check(); err != nil {
			p.fail("digest: %v", err)
		}
	}
	return d
}

func (p *parser) end() {
	if p.err == nil && len(p.b) > 0 {
		p.fail("%d bytes after the end", len(p.b))
	}
}

// appendRequest is a register request's payload.
func appendRequest(b []byte, rid, ver uint64, sealed []byte) []byte {
	b = binary.AppendUvarint(b, rid)
	b = binary.AppendUvarint(b, ver)
	return append(b, sealed...)
}

// parseRequest reads a register request's payload.
func parseRequest(b []byte) (rid, ver uint64, sealed []byte, err error) {
	p := parser{b: b}
	rid, ver = p.uvarint("roster ID"), p.uvarint("version")
	return rid, ver, p.b, p.err
}

// appendReply is a register response's payload (see the comment at the
// top of the file).
func appendReply(b []byte, r regReply) []byte {
	b = append(b, byte(r.status))
	if r.status == regNotSuperpeer {
		b = binary.AppendUvarint(b, uint64(len(r.hint)))
		return append(b, r.hint...)
	}
	b = r.digest.append(b)
	if r.status.refusal() || r.status == regNeedRecord {
		return b
	}
	b = binary.AppendUvarint(b, r.rid)
	b = binary.AppendUvarint(b, r.ver)
	if r.status == regUnchanged {
		return b
	}
	more := byte(0)
	if r.more {
		more = 1
	}
	b = append(b, more)
	b = binary.AppendUvarint(b, uint64(len(r.entries)))
	for _, e := range r.entries {
		b = binary.AppendUvarint(b, uint64(len(e)))
		b = append(b, e...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.removed)))
	for _, id := range r.removed {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	return b
}

// parseReply reads a register response's payload.
func parseReply(b []byte) (regReply, error) {
	p := parser{b: b}
	r := regReply{status: regStatus(p.octet("status"))}
	switch {
	case p.err != nil:
	case r.status == regNotSuperpeer:
		r.hint = p.id("hint", true)
	case r.status.refusal(), r.status == regNeedRecord:
		r.digest = p.digest()
	case r.status == regUnchanged:
		r.digest = p.digest()
		r.rid, r.ver = p.uvarint("roster ID"), p.uvarint("version")
	case r.status == regDelta || r.status == regSnapshot:
		r.digest = p.digest()
		r.rid, r.ver = p.uvarint("roster ID"), p.uvarint("version")
		switch m := p.octet("more"); m {
		case 0, 1:
			r.more = m == 1
		default:
			p.fail("more = %d", m)
		}
		n := p.uvarint("entries")
		for i := uint64(0); i < n && p.err == nil; i++ {
			l := p.uvarint("entry")
			if l == 0 || l > gossip.MaxSealedSize {
				p.fail("entry of %d bytes", l)
			}
			r.entries = append(r.entries, p.bytes("entry", l))
		}
		n = p.uvarint("removed")
		for i := uint64(0); i < n && p.err == nil; i++ {
			r.removed = append(r.removed, p.id("removed", false))
		}
	default:
		p.fail("unknown status %d", byte(r.status))
	}
	p.end()
	return r, p.err
}

// rosterEntry is the registry's record of one member: its sealed
// announcement as it sent it, the roster version at which it last
// changed, and when the member last registered.
type rosterEntry struct {
	sealed []byte
	ver    uint64
	seen   time.Time
	group  string // the address group it last registered from
}

// registry is a superpeer's end of the register protocol: its cluster's
// roster. The loop tells it what the node serves (setServing,
// stopServing), installs handle as the protocol's stream handler, and
// reads the members (members, when changed is signalled and at least
// every announce interval: expiry is noticed as the roster is read or
// written). Its methods are safe for concurrent use; it has no goroutine.
type registry struct {
	n        *Node
	ttl      time.Duration
	interval time.Duration
	// local is the node's own sealed announcement (registrar.local), or
	// nil: it is in the roster while the node serves.
	local     func() []byte
	now       func() time.Time
	max, page int // the roster's bound and a response's
	// connected reports whether the host is connected to a peer (the
	// identities of a group that count).
	connected func(peer.ID) bool

	mu      sync.Mutex
	serving bool
	dig     clusterDigest
	hint    peer.ID // the superpeer followed, while not serving
	rid     uint64  // the roster's ID: new each time the node starts serving
	version uint64
	floor   uint64 // removals at or below it are forgotten
	view    *gossip.View
	entries map[peer.ID]*rosterEntry
	gone    map[peer.ID]uint64 // removed peers, and the version of the removal
	// byes are the goodbyes (sealed, Leaving) of the removed peers that
	// said one: a delta carries the goodbye in place of the removal, so
	// that the members know the peer left (Left) rather than expired.
	// Forgotten with the removal.
	byes   map[peer.ID][]byte
	limits map[peer.ID]*memberLimits
	// crowd counts the identities per address group (crowdedLocked),
	// Config.MaxPerAddr of them.
	crowd *node.Crowding
	// refused are the identities of the address groups the node's
	// machine found flooded (node.Machine.Refused, sorted): crowded too.
	refused []peer.ID
	changes chan struct{}
	// goodbye is given the records sent while the node serves nothing
	// (heardGoodbye); nil: ignored.
	goodbye func(from peer.ID, sealed []byte) bool
	// The requests answered, by the answer's status (regUnchanged,
	// regDelta and regSnapshot: accepted), kept across rosters.
	answered map[regStatus]uint64
}

// newRegistry returns the registry of node n, whose announce interval is
// interval (entries live for three of them), with local the node's own
// sealed announcement (registrar.local).
func newRegistry(n *Node, interval time.Duration, local func() []byte) *registry {
	r := &registry{
		n: n, ttl: 3 * interval, interval: interval, local: local, now: time.Now, max: maxRoster, page: rosterPage,
		changes: make(chan struct{}, 1), answered: map[regStatus]uint64{},
		connected: func(p peer.ID) bool { return n.host.Network().Connectedness(p) == network.Connected },
		// Kept across rosters, and counted also while the node serves
		// nothing: a node that starts serving knows a flood at once.
		crowd: node.NewCrowding(n.cfg.MaxPerAddr, 4*maxRoster, 3*interval),
	}
	r.clearLocked()
	return r
}

func (r *registry) clearLocked() {
	if len(r.entries) > 0 {
		notify(r.changes)
	}
	r.view = gossip.NewView(r.ttl)
	r.entries, r.gone, r.limits = map[peer.ID]*rosterEntry{}, map[peer.ID]uint64{}, map[peer.ID]*memberLimits{}
	r.byes = map[peer.ID][]byte{}
	r.floor = r.version
}

// setServing says that the node serves the cluster of key ck at k, with
// the size estimate size (the digest members get), and that its machine
// found the identities refused (sorted) of flooded address groups. A
// change of the cluster removes the members that are not in it any more,
// and the roster loses the refused identities; the first call after
// stopServing (or ever) starts a new roster.
func (r *registry) setServing(k int, ck dhtselect.Key, size dhtselect.Estimate, refused []peer.ID) error {
	d := clusterDigest{K: k, ClusterKey: ck, Size: size}
	if err := d.check(); err != nil {
		return fmt.Errorf("overlay: registry: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.serving {
		r.serving, r.hint = true, ""
		r.rid = rand.Uint64() | 1 // not 0: a member's "none"
	}
	moved := d.K != r.dig.K || d.ClusterKey != r.dig.ClusterKey
	for p := range r.entries {
		if p != r.n.self && (moved && !d.in(p) || node.IsRefused(refused, p)) {
			r.view.Remove(p)
			r.removeLocked(p)
		}
	}
	r.dig, r.refused = d, refused
	return nil
}

// stopServing says that the node serves no cluster now, and follows the
// superpeer hint (empty: none known), which members that still register
// here are told. The roster is forgotten.
func (r *registry) stopServing(hint peer.ID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serving, r.hint = false, hint
	r.clearLocked()
}

// members returns the roster as the node machine takes it (RTT left 0),
// the node itself included, banned peers left out, sorted by ID; none
// while the node serves no cluster.
func (r *registry) members() []node.Member {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.serving {
		return nil
	}
	r.expireLocked(now)
	r.selfLocked(now)
	return toMembers(r.n, r.view.Entries())
}

// toMembers converts roster entries to the machine's members, banned
// peers left out.
func toMembers(n *Node, es []gossip.Entry) []node.Member {
	out := make([]node.Member, 0, len(es))
	for _, e := range es {
		if !n.guard.Banned(e.ID) {
			out = append(out, node.Member{ID: e.ID, Key: dhtselect.KeyOf(e.ID), Superpeer: e.Superpeer, Private: e.Private,
				Flapping: e.Flapping, Beacon: e.Beacon, Election: e.Election})
		}
	}
	return out
}

// changed is signalled (coalesced) when the roster changes: a member
// joins, leaves or says something new. Expiry is noticed when the roster
// is read or written (members, handle).
func (r *registry) changed() <-chan struct{} { return r.changes }

// handle answers one register request (the protocol's stream handler).
// A request that does not parse is refused as a bad frame (a strike, no
// answer); a bad record is answered regBadRecord and struck.
func (r *registry) handle(s network.Stream) {
	defer s.Close()
	n := r.n
	from := s.Conn().RemotePeer()
	if err := n.admit(s); err != nil {
		_ = s.Reset()
		n.guard.refuse(n, "register", from, err)
		return
	}
	_ = s.SetDeadline(time.Now().Add(streamDeadline))
	req, err := readStreamFrame(s, frameRegister)
	var resp []byte
	var strike error
	if err == nil {
		g, _ := connGroup(s.Conn().RemoteMultiaddr())
		resp, strike, err = r.answer(req, from, g)
	}
	if err != nil {
		_ = s.Reset()
		n.guard.refuse(n, "register", from, err)
		return
	}
	r.heardGoodbye(req, from)
	if strike != nil { // before the answer: its sender reads the strike counted
		n.guard.refuse(n, "register", from, strike)
	}
	if err := writeFrame(s, frameRoster, resp); err != nil {
		_ = s.Reset()
	}
}

// heardGoodbye passes a record that a peer sent while the node serves
// nothing to the hook goodbye (a closing superpeer's goodbye to its
// members: registrar.superpeerLeft).
func (r *registry) heardGoodbye(req []byte, from peer.ID) {
	r.mu.Lock()
	serving, hook := r.serving, r.goodbye
	r.mu.Unlock()
	if serving || hook == nil {
		return
	}
	if _, _, sealed, err := parseRequest(req); err == nil && len(sealed) > 0 {
		hook(from, sealed)
	}
}

// answer decides a register request from the peer from, on a connection
// from the address group group (node.AddrGroup; "": unknown, not
// counted): the response's payload, and a strike against from (a bad
// record), or err for a request that does not parse.
func (r *registry) answer(req []byte, from peer.ID, group string) (resp []byte, strike, err error) {
	rid, ver, sealed, err := parseRequest(req)
	if err != nil {
		return nil, nil, err
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	crowded := r.crowdedLocked(from, group, len(sealed) > 0, now)
	if !r.serving {
		r.answered[regNotSuperpeer]++
		return appendReply(nil, regReply{status: regNotSuperpeer, hint: r.hint}), nil, nil
	}
	refuse := func(s regStatus) []byte {
		r.answered[s]++
		return appendReply(nil, regReply{status: s, digest: r.dig})
	}
	r.expireLocked(now)
	r.selfLocked(now)
	if crowded {
		return refuse(regCrowded), nil, nil
	}
	e := r.entries[from] // before the request: a member's goodbye takes it out
	if e != nil && (len(sealed) == 0 || bytes.Equal(e.sealed, sealed)) {
		e.seen = now // a refresh: the record is the one we hold
	} else if len(sealed) == 0 {
		return refuse(regNeedRecord), nil, nil
	} else {
		if !r.allowLocked(from, now) {
			return refuse(regTooSoon), nil, nil
		}
		a, err := gossip.OpenAnnouncement(sealed)
		if err == nil && a.ID != from {
			err = fmt.Errorf("the record of %s, sent by %s", a.ID, from)
		}
		if err != nil {
			return refuse(regBadRecord), fmt.Errorf("%w: register: %w", errWire, err), nil
		}
		if !r.dig.in(from) {
			return refuse(regWrongCluster), nil, nil
		}
		if e == nil && a.Leaving {
			return refuse(regNotMember), nil, nil // a stranger's goodbye: nothing to remove, no roster
		}
		if e == nil && !a.Leaving && len(r.entries) >= r.max {
			return refuse(regFull), nil, nil
		}
		r.applyLocked(a, sealed, now)
		if e := r.entries[from]; e != nil {
			e.group = group
		}
	}
	if e == nil && r.entries[from] == nil {
		// The record was not taken (stale: older than a goodbye the
		// view remembers): the peer is still a stranger.
		return refuse(regNotMember), nil, nil
	}
	rep := r.replyLocked(from, rid, ver)
	if !r.readLocked(from, rid, ver, rep, now) {
		// Asked for the roster from scratch too often: the record or
		// the refresh stands; the roster waits for the budget.
		return refuse(regTooSoon), nil, nil
	}
	r.answered[rep.status]++
	return appendReply(nil, rep), nil, nil
}

// crowdedLocked counts from among the identities of its address group
// (when it sent a record) and reports whether the group is crowded
// (node.Crowding, which says why each part of the rule is there). A
// crowded group counts for nothing, as in the node machine (overlay/node's
// admit.go): its members leave the roster and none is taken in while the
// flood goes on, so that a flood from one address moves neither the
// cluster's size on the backbone nor its electorate, and costs the
// registry at most MaxPerAddr+1 identities per group. Without the rule
// the registry took identities from one address up to maxRoster, each a
// member's roster entry and backbone count (the live TestSybilFlood,
// re-targeted at the register protocol). An honest peer behind the
// flooded address loses its place, as it does in the machine's view, and
// is not struck.
//
// An identity the machine refuses (setServing) is crowded too: the
// machine also counts the superpeers on the backbone, and a flood that
// sent a cluster MaxPerAddr registrations or fewer, and the others
// backbone summaries, passed the registry's count alone; its members,
// who do not hear the backbone, then counted the identities the
// superpeer itself did not (the live TestSybilsScoped, one run in a
// hundred: 4 of 20 sybils in one cluster).
func (r *registry) crowdedLocked(from peer.ID, group string, record bool, now time.Time) bool {
	if from == r.n.self {
		return false
	}
	if node.IsRefused(r.refused, from) {
		if r.entries[from] != nil {
			r.view.Remove(from)
			r.removeLocked(from)
		}
		return true
	}
	if group == "" {
		return false
	}
	var held []peer.ID
	for p, e := range r.entries {
		if p != r.n.self && e.group == group {
			held = append(held, p)
		}
	}
	if !r.crowd.Check(from, group, record, now, held, r.connected) {
		return false
	}
	for _, p := range held {
		r.view.Remove(p)
		r.removeLocked(p)
	}
	return true
}

// left reports whether p left the roster with a goodbye (and is not
// back), as far as the registry remembers (maxGone removals).
func (r *registry) left(p peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.serving && r.byes[p] != nil && r.entries[p] == nil
}

// registryStats is what the registry did: the requests answered by
// status, and the roster's size (0 while the node serves no cluster).
type registryStats struct {
	Answered map[regStatus]uint64
	Roster   int
}

func (r *registry) stats() registryStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := registryStats{Answered: make(map[regStatus]uint64, len(r.answered))}
	for s, v := range r.answered {
		st.Answered[s] = v
	}
	if r.serving {
		st.Roster = len(r.entries)
	}
	return st
}

// memberLimits is what the registry allows one peer, kept across its
// removals from the roster (and forgotten with a new roster, or when it
// is fresh again): its new records (records), its roster reads from
// scratch (reads: a snapshot, or a delta from a version older than the
// last one it was sent), and where its last answer left it (rid, ver):
// a request from there, or from later, is a continuation (a steady
// round, the next page), which is free.
type memberLimits struct {
	records, reads *rate.Limiter
	rid, ver       uint64
}

// fresh reports whether the limits hold nothing back at now: both
// buckets are full.
func (l *memberLimits) fresh(now time.Time) bool {
	return l.records.TokensAt(now) >= regBurst+regSlack && l.reads.TokensAt(now) >= snapBurst
}

// limitsLocked returns from's limits, new ones for a peer not seen
// (or forgotten), or nil when the registry already keeps limits for
// 4*max peers that are not fresh (a flood of identities): refuse.
func (r *registry) limitsLocked(from peer.ID, now time.Time) *memberLimits {
	l, ok := r.limits[from]
	if ok {
		return l
	}
	if len(r.limits) >= 2*r.max { // forget the fresh ones: they start anew as they were
		for p, q := range r.limits {
			if q.fresh(now) {
				delete(r.limits, p)
			}
		}
	}
	if len(r.limits) >= 4*r.max {
		return nil
	}
	l = &memberLimits{records: rate.NewLimiter(rate.Every(r.interval/regPerInterval), regBurst+regSlack),
		reads: rate.NewLimiter(rate.Every(r.interval/snapPerInterval), snapBurst)}
	r.limits[from] = l
	return l
}

// allowLocked takes one of from's new-record tokens, if it has one.
func (r *registry) allowLocked(from peer.ID, now time.Time) bool {
	l := r.limitsLocked(from, now)
	return l != nil && l.records.AllowN(now, 1)
}

// readLocked decides whether from may have the answer rep to its request
// for the changes since version ver of roster rid: a continuation of its
// last answer, or an answer without a roster (unchanged), is free; a
// snapshot or a delta from an older version takes one of its read
// tokens, and without one it may not (regTooSoon). When it may, rep is
// where its next request continues.
func (r *registry) readLocked(from peer.ID, rid, ver uint64, rep regReply, now time.Time) bool {
	l := r.limitsLocked(from, now) // nil: no budget to be had (a flood of identities)
	cont := l != nil && rid == r.rid && l.rid == r.rid && ver >= l.ver
	if rep.status == regSnapshot || rep.status == regDelta && !cont {
		if l == nil || !l.reads.AllowN(now, 1) {
			return false
		}
	}
	if l != nil {
		l.rid, l.ver = rep.rid, rep.ver
	}
	return true
}

// applyLocked puts an opened record, its bytes sealed, into the roster. A
// change of what it says (not a mere refresh) is a new roster version; a
// goodbye removes its peer.
func (r *registry) applyLocked(a gossip.Announcement, sealed []byte, now time.Time) {
	accepted, changed := r.view.Apply(a, now)
	if !accepted {
		if e := r.entries[a.ID]; e != nil {
			e.seen = now // stale, but the member is alive: we hold its newer record
		}
		return
	}
	if a.Leaving {
		if r.entries[a.ID] != nil {
			r.removeLocked(a.ID)
			r.byes[a.ID] = sealed
		}
		return
	}
	e := r.entries[a.ID]
	if e == nil {
		e = &rosterEntry{}
		r.entries[a.ID] = e
	}
	e.sealed, e.seen = sealed, now
	if changed || e.ver == 0 {
		r.version++
		e.ver = r.version
		delete(r.gone, a.ID)
		notify(r.changes)
	}
}

// removeLocked takes p out of the roster at a new version, and remembers
// the removal for deltas (the oldest is forgotten beyond maxGone).
func (r *registry) removeLocked(p peer.ID) {
	notify(r.changes)
	delete(r.entries, p)
	delete(r.byes, p)
	r.version++
	r.gone[p] = r.version
	if len(r.gone) > maxGone {
		oldest, at := peer.ID(""), uint64(0)
		for q, v := range r.gone {
			if oldest == "" || v < at {
				oldest, at = q, v
			}
		}
		delete(r.gone, oldest)
		delete(r.byes, oldest)
		r.floor = max(r.floor, at)
	}
}

// expireLocked removes the members that did not register within the
// TTL. Being connected does not keep a member: one that moved to
// another superpeer (a change of k, an election) may stay connected, and
// would be counted in two clusters' sizes on the backbone.
func (r *registry) expireLocked(now time.Time) {
	keep := func(p peer.ID) bool {
		e := r.entries[p]
		return p == r.n.self || e != nil && now.Sub(e.seen) <= r.ttl
	}
	for _, p := range r.view.Expire(now, keep) {
		if r.entries[p] != nil {
			r.removeLocked(p)
		}
	}
}

// selfLocked puts the node's own announcement into the roster, when it
// has one and it changed.
func (r *registry) selfLocked(now time.Time) {
	b := r.local()
	if b == nil {
		return
	}
	if e := r.entries[r.n.self]; e != nil && bytes.Equal(e.sealed, b) {
		e.seen = now
		return
	}
	a, err := gossip.OpenAnnouncement(b)
	if err != nil || a.ID != r.n.self {
		r.n.log.Warn("registry: the node's own record does not open", "err", err)
		return
	}
	r.applyLocked(a, b, now)
}

// replyLocked is the answer to a member holding version ver of roster
// rid: unchanged, or the changes since (a delta), or the whole roster (a
// snapshot), in pages of at most r.page bytes. The member's own entry is
// left out: it has it.
func (r *registry) replyLocked(member peer.ID, rid, ver uint64) regReply {
	rep := regReply{status: regUnchanged, digest: r.dig, rid: r.rid, ver: r.version}
	if rid == r.rid && ver == r.version {
		return rep
	}
	rep.status = regDelta
	if rid != r.rid || ver < r.floor || ver > r.version {
		rep.status, ver = regSnapshot, 0
	}
	type item struct {
		ver    uint64
		sealed []byte
		gone   peer.ID
	}
	var items []item
	for p, e := range r.entries {
		if p != member && e.ver > ver {
			items = append(items, item{ver: e.ver, sealed: e.sealed})
		}
	}
	if rep.status == regDelta {
		for p, v := range r.gone {
			switch {
			case v <= ver || p == member:
			case r.byes[p] != nil:
				items = append(items, item{ver: v, sealed: r.byes[p]})
			default:
				items = append(items, item{ver: v, gone: p})
			}
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.ver, b.ver) })
	room := r.page - len(appendReply(nil, rep)) - 2*binary.MaxVarintLen64
	for i, it := range items {
		size := len(it.sealed) + len(it.gone) + binary.MaxVarintLen32
		if room -= size; room < 0 && i > 0 {
			rep.more, rep.ver = true, items[i-1].ver
			break
		}
		if it.gone != "" {
			rep.removed = append(rep.removed, it.gone)
		} else {
			rep.entries = append(rep.entries, it.sealed)
		}
	}
	return rep
}

// errRefused is a registration the superpeer refused (registerRefused
// says why).
var errRefused = errors.New("overlay: registration refused")

// registerRefused is a superpeer's refusal: why, and with regNotSuperpeer
// the superpeer it follows (or none).
type registerRefused struct {
	Why  regStatus
	Hint peer.ID
}

func (e *registerRefused) Error() string {
	if e.Hint != "" {
		return fmt.Sprintf("%v: %v, it follows %s", errRefused, e.Why, e.Hint)
	}
	return fmt.Sprintf("%v: %v", errRefused, e.Why)
}

func (e *registerRefused) Unwrap() error { return errRefused }

// registrar is a member's end of the register protocol: it seals the
// node's announcement (setLocal), registers it with a superpeer and keeps
// the roster and digest the superpeer sends back (register), and gives the
// loop the members (members, digest). It is a plain struct with a mutex,
// without a goroutine: the loop calls register from goroutines of its own,
// every announce interval and when the superpeer or the announcement
// changes. Calls of register are serialised.
type registrar struct {
	n     *Node
	proto protocol.ID
	ttl   time.Duration // the roster view's (it expires nothing: the superpeer removes)
	now   func() time.Time
	max   int
	sem   chan struct{} // one registration at a time
	// open opens a roster entry: gossip.OpenAnnouncement, its signature
	// check the cost of an entry (tests count the calls).
	open func([]byte) (gossip.Announcement, error)

	mu      sync.Mutex
	ann     *gossip.Announcement // the node's announcement, as set
	sealed  []byte               // ann, sealed
	lastSeq uint64
	limiter *rate.Limiter // new records sent
	sp      peer.ID       // the superpeer whose roster is held
	sent    []byte        // the record sp last took
	rid     uint64
	ver     uint64
	heard   time.Time // the last answer of sp that was applied
	view    *gossip.View
	// held indexes the records the view holds by their sealed bytes'
	// SHA-256 (heldOf the other way), so that an entry the view holds
	// already, byte for byte, is passed over before its signature is
	// checked: taking it again changes nothing (a stale Apply).
	held   map[[sha256.Size]byte]peer.ID
	heldOf map[peer.ID][sha256.Size]byte
	// former are the entries of the rosters held before (another
	// superpeer's, or removed from this one's), each until the TTL after
	// it was last held: the view is the cluster's peers heard of within
	// the TTL, not only the current roster, so that a superpeer just
	// elected, whose roster is still filling, does not leave its members
	// with views of a few peers each (found by the node simulator: each
	// member of a partial roster elected itself when the new superpeer
	// failed in turn).
	former map[peer.ID]formerEntry
	// byes are the peers whose goodbye the superpeer passed on, when it
	// came and its sequence number: each for the TTL, at most maxRoster
	// (Left).
	byes    map[peer.ID]goodbyeHeard
	dig     clusterDigest
	hasDig  bool
	changes chan struct{}
	// The frames' bytes sent and received, the answers applied, and the
	// last answer's status.
	bytesOut, bytesIn, rounds uint64
	last                      regStatus
	// The requests sent, by the answer's status, and those that got no
	// answer (the stream failed, or the answer did not parse).
	answers map[regStatus]uint64
	failed  uint64
}

// newRegistrar returns the registrar of node n, whose announce interval
// is interval.
func newRegistrar(n *Node, interval time.Duration) *registrar {
	return &registrar{
		n: n, proto: registerProtocol(n.cfg.Network), ttl: 3 * interval, now: time.Now, max: maxRoster, sem: make(chan struct{}, 1),
		open:    gossip.OpenAnnouncement,
		limiter: rate.NewLimiter(rate.Every(interval/regPerInterval), regBurst), view: gossip.NewView(3 * interval),
		changes: make(chan struct{}, 1), answers: map[regStatus]uint64{},
	}
}

// registrarStats is what the registrar did: the requests sent by the
// answer's status, those that got no answer, the superpeer registered
// with and the roster held from it (the former rosters' entries
// included, the node itself not).
type registrarStats struct {
	Answers map[regStatus]uint64
	Failed  uint64
	With    peer.ID
	Roster  int
}

func (r *registrar) stats() registrarStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := registrarStats{Answers: make(map[regStatus]uint64, len(r.answers)), Failed: r.failed, With: r.sp, Roster: len(r.viewLocked())}
	for s, v := range r.answers {
		st.Answers[s] = v
	}
	return st
}

// setLocal seals the node's announcement a (a.ID the node's; its Seq is
// the registrar's) with the host's key. An announcement that says what the
// last one said changes nothing.
func (r *registrar) setLocal(a gossip.Announcement) error {
	if a.ID != r.n.self {
		return fmt.Errorf("%w: announcement for %s, local peer is %s", gossip.ErrBadAnnouncement, a.ID, r.n.self)
	}
	key := r.n.host.Peerstore().PrivKey(r.n.self)
	if key == nil {
		return fmt.Errorf("overlay: registrar: no private key for %s in the peerstore", r.n.self)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ann != nil && sameAnnouncement(*r.ann, a) {
		return nil
	}
	a.Seq = max(uint64(r.now().UnixNano()), r.lastSeq+1)
	b, err := gossip.SealAnnouncement(a, key)
	if err != nil {
		return err
	}
	r.ann, r.sealed, r.lastSeq = &a, b, a.Seq
	return nil
}

// sameAnnouncement reports whether a and b say the same, sequence numbers
// aside.
func sameAnnouncement(a, b gossip.Announcement) bool {
	a.Seq, b.Seq = 0, 0
	ea, err1 := a.Encode()
	eb, err2 := b.Encode()
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

// local is the node's sealed announcement, or nil before setLocal.
func (r *registrar) local() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sealed
}

// errNoAnnouncement: register before setLocal.
var errNoAnnouncement = errors.New("overlay: registrar: no announcement to register yet")

// register registers the node's announcement with sp and applies its
// answer: the roster (all of its pages) and the digest. A superpeer other
// than the last one starts from an empty roster. A refusal is a
// *registerRefused (errors.Is errRefused); a bad answer is struck.
func (r *registrar) register(ctx context.Context, sp peer.ID) error { return r.round(ctx, sp, false) }

// round is register; force sends a new record without waiting for the
// rate (a goodbye: the registry's slack allows it).
func (r *registrar) round(ctx context.Context, sp peer.ID, force bool) error {
	if sp == "" || sp == r.n.self {
		return fmt.Errorf("overlay: registrar: no superpeer to register with (%q)", sp)
	}
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.sem }()
	taken := 0 // the entries and removals of the round's pages
	for range maxPages {
		r.mu.Lock()
		if sp != r.sp {
			r.retireLocked(r.now())
			r.sp, r.sent, r.rid, r.ver, r.hasDig = sp, nil, 0, 0, false
		}
		rec := r.sealed
		if rec == nil {
			r.mu.Unlock()
			return errNoAnnouncement
		}
		switch {
		case bytes.Equal(rec, r.sent):
			rec = nil // sp holds it: a refresh
		case !force && r.sent != nil && !r.limiter.AllowN(r.now(), 1):
			rec = nil // the new record waits for the rate; refresh the old one
		}
		req := appendRequest(nil, r.rid, r.ver, rec)
		r.mu.Unlock()
		resp, err := r.n.request(ctx, sp, r.proto, frameRegister, req, frameRoster)
		var rep regReply
		if err == nil {
			if rep, err = parseReply(resp); err != nil {
				r.n.guard.refuse(r.n, "register", sp, err)
			}
		}
		if err != nil {
			r.mu.Lock()
			r.failed++
			r.mu.Unlock()
			return err
		}
		r.mu.Lock()
		r.answers[rep.status]++
		r.bytesOut += uint64(frameLen(req))
		r.bytesIn += uint64(frameLen(resp))
		var more bool
		var strike error
		if taken += len(rep.entries) + len(rep.removed); taken > maxRoundEntries {
			// Refused before a record is opened: the page is not applied.
			strike = fmt.Errorf("%w: register: %s sent more than %d roster entries and removals in one registration", errWire, sp, maxRoundEntries)
			err = strike
		} else {
			more, strike, err = r.applyLocked(sp, rep, rec)
		}
		r.mu.Unlock()
		if strike != nil {
			r.n.guard.refuse(r.n, "register", sp, strike)
		}
		if err != nil || !more {
			return err
		}
	}
	err := fmt.Errorf("%w: register: %s sent more than %d pages", errWire, sp, maxPages)
	r.n.guard.refuse(r.n, "register", sp, err)
	return err
}

// frameLen is the length on the wire of a frame of payload p.
func frameLen(p []byte) int {
	return len(binary.AppendUvarint(nil, uint64(len(p)+2))) + 2 + len(p)
}

// applyLocked applies sp's answer rep to the request that sent the
// record rec (nil: a refresh): whether another request follows (a page,
// or the record sp asked for), a strike against sp (for entries dropped,
// or an answer that contradicts itself), and err for a refusal or an
// answer that could not be applied.
func (r *registrar) applyLocked(sp peer.ID, rep regReply, rec []byte) (more bool, strike, err error) {
	r.last = rep.status
	if rep.status == regNeedRecord {
		if rec == nil && r.sent != nil {
			r.sent = nil // sp lost it (it expired us, or restarted): send it
			return true, nil, nil
		}
		err := fmt.Errorf("%w: register: %s asked for the record it was sent", errWire, sp)
		return false, err, err
	}
	if rep.status.refusal() {
		if rep.status != regNotSuperpeer {
			r.dig, r.hasDig = rep.digest, true
		}
		if rep.status != regTooSoon {
			// It does not hold our record (any more), and we hear its
			// roster no more: its changes from now on are not sent to
			// us. The entries are former ones, until the TTL after the
			// roster was last heard, as a silent superpeer's would be
			// were it replaced; the next answer is a snapshot. Before,
			// the roster stayed as it was for as long as the refusals
			// went on: a member refused as in the wrong cluster for
			// 6.5 s (its superpeer's k had moved) kept showing the
			// sybils its superpeer had taken in, before it found their
			// address flooded, and removed 100 ms later (the live
			// TestSybilFlood, 1 run in 8 under load).
			r.sent = nil
			if r.rid != 0 {
				r.retireLocked(r.heard)
				r.rid, r.ver = 0, 0
				notify(r.changes)
			}
		}
		return false, nil, &registerRefused{Why: rep.status, Hint: rep.hint}
	}
	bad := func(format string, args ...any) (bool, error, error) {
		err := fmt.Errorf("%w: register: "+format, append([]any{errWire}, args...)...)
		return false, err, err
	}
	if !rep.digest.in(r.n.self) {
		return bad("%s took us into the cluster %s at k = %d, which we are not in", sp, rep.digest.ClusterKey, rep.digest.K)
	}
	switch {
	case rep.status == regUnchanged && (rep.rid != r.rid || rep.ver != r.ver):
		return bad("unchanged, for roster %d version %d; we hold %d version %d", rep.rid, rep.ver, r.rid, r.ver)
	case rep.status == regDelta && rep.rid != r.rid:
		return bad("a delta of roster %d; we hold %d", rep.rid, r.rid)
	case rep.status == regSnapshot:
		if len(rep.entries) > 0 {
			notify(r.changes)
		}
		r.retireLocked(r.now())
	}
	if !r.hasDig || rep.digest != r.dig {
		notify(r.changes)
	}
	r.dig, r.hasDig, r.rid, r.ver = rep.digest, true, rep.rid, rep.ver
	if rec != nil {
		r.sent = rec
	}
	r.rounds++
	now := r.now()
	r.heard = now
	dropped := 0
	for _, b := range rep.entries {
		sum := sha256.Sum256(b)
		if r.holdsLocked(sum) || bytes.Equal(b, r.sealed) {
			continue // the view holds it, or it is ours: nothing to check
		}
		a, err := r.open(b)
		switch {
		case err != nil, a.ID != sp && !rep.digest.in(a.ID):
			dropped++
		case a.ID == r.n.self: // ours: we know it first-hand
		case r.staleLocked(a): // an old record, replayed or lagging: we hold newer
		case a.Leaving: // a removal, which the bound need not hold back
			r.byeLocked(a.ID, a.Seq, now)
			_, was := r.former[a.ID]
			delete(r.former, a.ID)
			if r.removeLocked(a.ID) || was {
				notify(r.changes)
			}
		case r.view.Len() >= r.max && !r.has(a.ID):
			dropped++
		default:
			delete(r.former, a.ID)
			delete(r.byes, a.ID)
			accepted, changed := r.view.Apply(a, now)
			if accepted {
				r.holdLocked(a.ID, sum)
			}
			if changed {
				notify(r.changes)
			}
		}
	}
	for _, p := range rep.removed {
		// The superpeer's own removal (a goodbye, or its TTL) counts at
		// once: only the rosters the node no longer hears are kept.
		_, was := r.former[p]
		delete(r.former, p)
		if r.removeLocked(p) || was {
			notify(r.changes)
		}
	}
	if dropped > 0 {
		return rep.more, fmt.Errorf("%w: register: %d of %d roster entries from %s dropped (forged, altered, outside the cluster or over the bound)",
			errWire, dropped, len(rep.entries), sp), nil
	}
	return rep.more, nil, nil
}

// goodbyeHeard is a goodbye the superpeer passed on: when it came, and
// its sequence number.
type goodbyeHeard struct {
	at  time.Time
	seq uint64
}

// byeLocked notes p's goodbye numbered seq at now, keeping at most
// maxRoster of them (those past the TTL go first, then the oldest).
func (r *registrar) byeLocked(p peer.ID, seq uint64, now time.Time) {
	if r.byes == nil {
		r.byes = map[peer.ID]goodbyeHeard{}
	}
	for q, b := range r.byes {
		if now.Sub(b.at) > r.ttl {
			delete(r.byes, q)
		}
	}
	for len(r.byes) >= r.max {
		var oldest peer.ID
		for q, b := range r.byes {
			if oldest == "" || b.at.Before(r.byes[oldest].at) {
				oldest = q
			}
		}
		delete(r.byes, oldest)
	}
	r.byes[p] = goodbyeHeard{at: now, seq: max(seq, r.byes[p].seq)}
}

// staleLocked reports whether a (opened) is older than what the member
// holds of its peer: its record in the roster or in a former roster
// (a goodbye as old as either, a record older), or its goodbye (a record
// as old, a goodbye older). The roster's view orders the records it
// holds, but a goodbye removes its peer from it, sequence number and
// all, and a new roster (a snapshot, another superpeer) starts a view
// with none: a hostile registrar could so replay a peer's old goodbye
// into the roster that holds its newer record, or its old record (an
// old Private or Flapping) into a new roster. A sequence number the
// member opened is a floor for good, since a peer's only grow; the
// member keeps them as long as it keeps the entries (the former ones
// and the goodbyes for the TTL). Not a strike: an honest registrar can
// lag behind what the member heard from another.
func (r *registrar) staleLocked(a gossip.Announcement) bool {
	var held uint64
	if e, ok := r.view.Get(a.ID); ok {
		held = e.Seq
	}
	if f, ok := r.former[a.ID]; ok {
		held = max(held, f.e.Seq)
	}
	bye, left := r.byes[a.ID]
	if a.Leaving {
		return held != 0 && a.Seq <= held || left && a.Seq < bye.seq
	}
	return a.Seq < held || left && a.Seq <= bye.seq
}

// left reports whether the superpeer passed on p's goodbye within the
// TTL, and p is not back.
func (r *registrar) left(p peer.ID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.byes[p]
	return ok && r.now().Sub(b.at) <= r.ttl && !r.has(p)
}

func (r *registrar) has(p peer.ID) bool {
	_, ok := r.view.Get(p)
	return ok
}

// holdsLocked reports whether the view holds the record whose sealed
// bytes' SHA-256 is sum.
func (r *registrar) holdsLocked(sum [sha256.Size]byte) bool {
	p, ok := r.held[sum]
	return ok && r.heldOf[p] == sum && r.has(p)
}

// holdLocked notes that the view holds p's record, sealed bytes of
// SHA-256 sum, in place of any p had.
func (r *registrar) holdLocked(p peer.ID, sum [sha256.Size]byte) {
	if r.held == nil {
		r.held, r.heldOf = map[[sha256.Size]byte]peer.ID{}, map[peer.ID][sha256.Size]byte{}
	}
	if old, ok := r.heldOf[p]; ok {
		delete(r.held, old)
	}
	r.held[sum], r.heldOf[p] = p, sum
}

// removeLocked takes p out of the view, and reports whether it was
// there.
func (r *registrar) removeLocked(p peer.ID) bool {
	if old, ok := r.heldOf[p]; ok {
		delete(r.held, old)
		delete(r.heldOf, p)
	}
	return r.view.Remove(p)
}

// formerEntry is an entry of a roster held before, and when it leaves
// the view.
type formerEntry struct {
	e     gossip.Entry
	until time.Time
}

// retireLocked moves the roster's entries to the former ones (a new
// superpeer, or a snapshot that replaces the roster), each until the TTL
// after heard (when the roster was last heard of), and starts an empty
// roster.
func (r *registrar) retireLocked(heard time.Time) {
	for _, e := range r.view.Entries() {
		r.keepLocked(e, heard)
	}
	r.view = gossip.NewView(r.ttl)
	r.held, r.heldOf = nil, nil
}

// keepLocked keeps e among the former entries until the TTL after heard,
// at most maxRoster of them (the oldest go first).
func (r *registrar) keepLocked(e gossip.Entry, heard time.Time) {
	if r.former == nil {
		r.former = map[peer.ID]formerEntry{}
	}
	r.former[e.ID] = formerEntry{e: e, until: heard.Add(r.ttl)}
	for len(r.former) > r.max {
		var oldest peer.ID
		for p, f := range r.former {
			if oldest == "" || f.until.Before(r.former[oldest].until) {
				oldest = p
			}
		}
		delete(r.former, oldest)
	}
}

// viewLocked is the roster's entries and the former ones not yet
// expired.
func (r *registrar) viewLocked() []gossip.Entry {
	now := r.now()
	es := r.view.Entries()
	for p, f := range r.former {
		switch {
		case !now.Before(f.until):
			delete(r.former, p)
		case !r.has(p):
			es = append(es, f.e)
		}
	}
	return es
}

// members returns the roster of the cluster as the node machine takes it
// (RTT left 0): the entries the superpeer sent, and the node's own
// announcement, banned peers left out, sorted by ID.
func (r *registrar) members() []node.Member { return toMembers(r.n, r.entries()) }

// changed is signalled (coalesced) when the roster or the digest
// changes.
func (r *registrar) changed() <-chan struct{} { return r.changes }

// digest returns the last digest of the superpeer registered with, and
// whether there is one.
func (r *registrar) digest() (clusterDigest, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dig, r.hasDig
}

// goodbye tells the superpeer last registered with that the node leaves:
// its announcement, sealed once more as a goodbye (Leaving), which takes
// it out of the roster at once; and the peers to, one request each (a
// closing superpeer's members: see superpeerLeft). Nothing is sent
// without an announcement.
func (r *registrar) goodbye(ctx context.Context, to []peer.ID) error {
	r.mu.Lock()
	sp, ann := r.sp, r.ann
	r.mu.Unlock()
	if ann == nil {
		return nil
	}
	a := *ann
	a.Leaving = true
	if err := r.setLocal(a); err != nil {
		return err
	}
	bye := appendRequest(nil, 0, 0, r.local())
	var wg sync.WaitGroup
	sem := make(chan struct{}, goodbyeFanout)
	for _, p := range to {
		if p == r.n.self || p == sp {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// The answer is a refusal (the member serves nothing); it
			// is read only so that the goodbye is known delivered.
			if _, err := r.n.request(ctx, p, r.proto, frameRegister, bye, frameRoster); err != nil && ctx.Err() == nil {
				r.n.log.Debug("goodbye", "to", p, "err", err)
			}
		})
	}
	var err error
	if sp != "" {
		if err = r.round(ctx, sp, true); errors.Is(err, errRefused) {
			err = nil // it does not hold us
		}
	}
	wg.Wait()
	return err
}

// goodbyeFanout is how many goodbyes a closing superpeer has in flight
// at once, to its members.
const goodbyeFanout = 32

// superpeerLeft takes a goodbye (sealed) that the peer from sent to this
// node's registry while the node serves nothing: a closing superpeer
// tells each of its members (clusterMembership.Leave). When from is the
// superpeer the node is registered with and the record is its goodbye,
// the superpeer leaves the roster at once, as having left (left), so
// that the machine elects its successor and the lookups skip it without
// waiting for a dropped connection, a query's timeout or the TTL. Any
// other goodbye changes nothing: a peer can only say that it leaves
// itself, and only its members listen.
func (r *registrar) superpeerLeft(from peer.ID, sealed []byte) bool {
	r.mu.Lock()
	sp := r.sp
	r.mu.Unlock()
	if from == "" || from != sp {
		return false
	}
	a, err := gossip.OpenAnnouncement(sealed)
	if err != nil || a.ID != from || !a.Leaving {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sp != from {
		return false
	}
	r.removeLocked(from)
	delete(r.former, from)
	r.byeLocked(from, a.Seq, r.now())
	notify(r.changes)
	return true
}
