package overlay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"golang.org/x/time/rate"

	"github.com/superpeer/superpeer/classic/pb"
)

// Wire hygiene of the overlay's request/response protocols (closer, token,
// attach; the election has its own format, classic/pb, with the same
// rules). Every request and response is one frame:
//
//	uvarint length | version (1 byte) | type (1 byte) | payload
//
// with the length (of version, type and payload) at most maxFrame. A frame
// of another version or an unexpected type is refused. The sender is
// always the stream's authenticated remote peer, never a field. Every
// stream has a deadline (streamDeadline), so one that opens and never
// writes costs a goroutine for that long at most.
//
// A refused message is logged, counted by protocol and reason (Status,
// /metrics), and is a strike against its sender: a peer with banStrikes
// strikes within banWindow is banned for banFor. A banned peer is
// disconnected at once; on a host the node builds, its connections are
// refused by the connection gater, before the handshake while its
// address's penalty lasts (banGate, private.go), otherwise each is closed
// as it opens; its streams are refused, and GossipSub scores it down (see
// peerScore). A frame is reserved in its stream's resource scope before
// it is allocated: one over the memory budget's limits is refused
// ("limit", no strike; see limits.go). Each peer may
// also open at most rateLimit streams a second (burst rateBurst) on the
// overlay's protocols; a stream over that is refused, and a second's worth
// of such refusals (rateLimit within banWindow) is a strike (overRate).
const (
	wireVersion = 1
	maxFrame    = 64 << 10
	banStrikes  = 5
	banWindow   = time.Minute
	banFor      = 10 * time.Minute
	rateLimit   = 50
	rateBurst   = 100
)

// frameType is a frame's type.
type frameType byte

const (
	frameCloser frameType = 1 // closer request: a 32-byte key
	framePeers  frameType = 2 // closer response: peers (writeInfos)
	frameToken  frameType = 3 // token pass: number and sequence, 8 bytes each, and the giver's link
	frameAttach frameType = 4 // attach request: the member's coordinate, then its report (geo.go)
	frameAnswer frameType = 5 // token and attach response: 1 (yes) or 0 (no), then an attach's cluster (appendIDs); a vouch's RTT
	frameVouch  frameType = 6 // vouch request: a peer ID
)

// Reasons a message is refused, as counted.
var (
	errFrameSize    = fmt.Errorf("%w: frame too large", errWire)
	errFrameVersion = fmt.Errorf("%w: unknown version", errWire)
	errFrameType    = fmt.Errorf("%w: unexpected type", errWire)
	errTruncated    = fmt.Errorf("%w: truncated", errWire)
	errRate         = errors.New("overlay: over the per-peer rate")
	errLimit        = errors.New("overlay: over the resource limit")
	errBanned       = errors.New("overlay: peer banned")
)

// reason names the class of a refusal, for the counters. An error that is
// none of the wire's own is the stream's (a reset, a closed connection):
// "io".
func reason(err error) string {
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, errFrameSize), errors.Is(err, pb.ErrTooLarge):
		return "size"
	case errors.Is(err, errFrameVersion), errors.Is(err, pb.ErrVersion):
		return "version"
	case errors.Is(err, errFrameType), errors.Is(err, pb.ErrType):
		return "type"
	case errors.Is(err, errTruncated), errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), errors.As(err, &timeout) && timeout.Timeout():
		return "timeout"
	case errors.Is(err, errRate):
		return "rate"
	case errors.Is(err, errLimit):
		return "limit"
	case errors.Is(err, errBanned):
		return "banned"
	case errors.Is(err, errWire), errors.Is(err, pb.ErrMalformed), errors.Is(err, pb.ErrSender):
		return "malformed"
	}
	return "io"
}

// writeFrame writes one frame in a single Write.
func writeFrame(w io.Writer, t frameType, payload []byte) error {
	if len(payload)+2 > maxFrame {
		return fmt.Errorf("%w: %d bytes, limit %d", errFrameSize, len(payload)+2, maxFrame)
	}
	b := binary.AppendUvarint(make([]byte, 0, len(payload)+binary.MaxVarintLen32+2), uint64(len(payload)+2))
	b = append(b, wireVersion, byte(t))
	_, err := w.Write(append(b, payload...))
	return err
}

// readFrame reads one frame of type want and returns its payload.
func readFrame(r *bufio.Reader, want frameType) ([]byte, error) {
	return readFrameIn(nil, r, want)
}

// readStreamFrame reads one frame of type want from s, whose buffer is
// reserved in s's resource scope before it is allocated (see limits.go):
// a frame over the scope's memory limits is refused (errLimit).
func readStreamFrame(s network.Stream, want frameType) ([]byte, error) {
	return readFrameIn(s.Scope(), bufio.NewReader(s), want)
}

// readFrameIn reads one frame of type want, reserving its length in
// scope (when not nil) before it allocates it.
func readFrameIn(scope network.ResourceScope, r *bufio.Reader, want frameType) ([]byte, error) {
	l, err := binary.ReadUvarint(r)
	switch {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%w: no frame", errTruncated)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%w: inside the length", errTruncated)
	case err != nil && err.Error() == "binary: varint overflows a 64-bit integer":
		return nil, fmt.Errorf("%w: length: %w", errWire, err)
	case err != nil:
		return nil, err // the stream's own: reset, closed, deadline
	case l < 2:
		return nil, fmt.Errorf("%w: frame of %d bytes", errTruncated, l)
	case l > maxFrame:
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errFrameSize, l, maxFrame)
	}
	if scope != nil {
		if err := scope.ReserveMemory(int(l), network.ReservationPriorityAlways); err != nil {
			return nil, fmt.Errorf("%w: %w", errLimit, err)
		}
		defer scope.ReleaseMemory(int(l))
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: stream ended inside a frame of %d bytes", errTruncated, l)
		}
		return nil, err
	}
	switch {
	case b[0] != wireVersion:
		return nil, fmt.Errorf("%w: %d, want %d", errFrameVersion, b[0], wireVersion)
	case frameType(b[1]) != want:
		return nil, fmt.Errorf("%w: %d, want %d", errFrameType, b[1], want)
	}
	return b[2:], nil
}

// request sends one request frame to p over proto and reads the response
// frame of type want, within streamDeadline.
func (n *Node) request(ctx context.Context, p peer.ID, proto protocol.ID, t frameType, payload []byte, want frameType) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, streamDeadline)
	defer cancel()
	s, err := n.host.NewStream(ctx, p, proto)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if err := inService(s); err != nil {
		_ = s.Reset()
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	if err := writeFrame(s, t, payload); err != nil {
		_ = s.Reset()
		return nil, err
	}
	_ = s.CloseWrite()
	resp, err := readStreamFrame(s, want)
	if err != nil {
		_ = s.Reset()
		if errors.Is(err, errWire) { // not a timeout: a slow or dead peer is not hostile
			n.guard.refuse(n, protoName(proto), p, err)
		}
	}
	return resp, err
}

// protoName is the name of one of the overlay's protocols, for the
// counters: "closer" of /superpeer/<network>/closer/<version>.
func protoName(p protocol.ID) string {
	parts := strings.Split(string(p), "/")
	if len(parts) < 2 {
		return string(p)
	}
	return parts[len(parts)-2]
}

// serve answers one request stream on proto: the sender is checked
// against the ban list and its rate, the request frame must be of type
// want, and decide's error (a malformed payload) refuses it like a bad
// frame; otherwise the response frame is decide's.
func (n *Node) serve(s network.Stream, proto string, want frameType, decide func(payload []byte, from peer.ID) (frameType, []byte, error)) {
	defer s.Close()
	from := s.Conn().RemotePeer()
	if err := n.admit(s); err != nil {
		_ = s.Reset()
		n.guard.refuse(n, proto, from, err)
		return
	}
	_ = s.SetDeadline(time.Now().Add(streamDeadline))
	req, err := readStreamFrame(s, want)
	var t frameType
	var resp []byte
	if err == nil {
		t, resp, err = decide(req, from)
	}
	if err != nil {
		_ = s.Reset()
		n.guard.refuse(n, proto, from, err)
		return
	}
	if err := writeFrame(s, t, resp); err != nil {
		_ = s.Reset()
	}
}

// admit checks an inbound stream of the overlay's protocols: its sender
// is not banned and within its rate, and the stream fits the service's
// resource limits.
func (n *Node) admit(s network.Stream) error {
	if err := n.guard.admit(s.Conn().RemotePeer()); err != nil {
		return err
	}
	return inService(s)
}

// guard is the ban list, the strike counts and the per-peer rates, the
// penalties of the addresses of banned peers (see banGate), and the
// counters of refused messages.
type guard struct {
	mu        sync.Mutex
	strikes   map[peer.ID][]time.Time
	banned    map[peer.ID]time.Time // until when
	rates     map[peer.ID]*peerRate
	penalties map[netip.Addr]*penalty
	pace      *rate.Limiter        // the refusals that take refusalPace (banGate)
	refused   map[[2]string]uint64 // {protocol, reason} -> count
	bans      uint64
	// The sizes of strikes and banned after their last prune.
	strikesKept, bansKept int
	// now is the clock of the strikes, bans and penalties: time.Now when
	// nil; tests set it (under mu) to move time by hand. The per-peer
	// rates (rate.Limiter) keep the real clock.
	now func() time.Time
}

// clock is the guard's time now; g.mu is held.
func (g *guard) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

// An address's penalty: no inbound connection from it is accepted until
// until; wait is the penalty's current length.
type penalty struct {
	until time.Time
	wait  time.Duration
}

// The lengths of a penalty, and the most addresses penalised at once.
const (
	penaltyMin   = time.Second
	penaltyMax   = 10 * time.Second
	maxPenalties = 4096
)

// ipOf is a multiaddr's IP address, if it has one.
func ipOf(a ma.Multiaddr) (netip.Addr, bool) {
	if a == nil {
		return netip.Addr{}, false
	}
	ip, err := manet.ToIP(a)
	if err != nil {
		return netip.Addr{}, false
	}
	addr, ok := netip.AddrFromSlice(ip)
	return addr.Unmap(), ok
}

// penaliseLocked starts the penalty of ip, or doubles it (again is set:
// a banned peer's handshake from it); g.mu is held.
func (g *guard) penaliseLocked(ip netip.Addr, now time.Time, again bool) {
	if g.penalties == nil {
		g.penalties = map[netip.Addr]*penalty{}
	}
	p, ok := g.penalties[ip]
	if !ok {
		if len(g.penalties) >= maxPenalties {
			for q, old := range g.penalties {
				if now.After(old.until.Add(banFor)) {
					delete(g.penalties, q)
				}
			}
			if len(g.penalties) >= maxPenalties {
				return
			}
		}
		p = &penalty{}
		g.penalties[ip] = p
	}
	if now.After(p.until.Add(penaltyMax)) {
		p.wait = 0 // quiet for a while: it starts over
	}
	if again || p.wait == 0 {
		p.wait = min(max(2*p.wait, penaltyMin), penaltyMax)
	}
	p.until = now.Add(p.wait)
}

// accept reports whether an inbound connection from a may go on to its
// handshake: not while a's address is penalised.
func (g *guard) accept(a ma.Multiaddr) bool {
	ip, ok := ipOf(a)
	return !ok || !g.penalised(ip)
}

// penalised reports whether ip is under a penalty, and counts the refusal: a
// connection's (accept), or a QUIC packet's that would open one
// (penaltyConn).
func (g *guard) penalised(ip netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.penalties[ip]
	if !ok || g.clock().After(p.until) {
		return false
	}
	g.countLocked("accept", "banned")
	return true
}

// secured reports whether a connection whose handshake named p may be
// upgraded: not if p is banned, which penalises (again) the address an
// inbound one came from.
func (g *guard) secured(d network.Direction, p peer.ID, a ma.Multiaddr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock()
	if !g.bannedLocked(p, now) {
		return true
	}
	g.countLocked("handshake", "banned")
	if ip, ok := ipOf(a); ok && d == network.DirInbound {
		g.penaliseLocked(ip, now, true)
	}
	return false
}

// paced reports whether a refusal before the handshake may take
// refusalPace now (at most paceBurst a second).
func (g *guard) paced() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pace == nil {
		g.pace = rate.NewLimiter(paceBurst, paceBurst)
	}
	return g.pace.Allow()
}

func (g *guard) countLocked(proto, why string) {
	if g.refused == nil {
		g.refused = map[[2]string]uint64{}
	}
	g.refused[[2]string{proto, why}]++
}

// admit reports whether p may open a stream now: not banned, and within
// its rate.
func (g *guard) admit(p peer.ID) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bannedLocked(p, g.clock()) {
		return errBanned
	}
	if g.rates == nil {
		g.rates = map[peer.ID]*peerRate{}
	}
	l, ok := g.rates[p]
	if !ok {
		if len(g.rates) > 4096 { // forget the idle ones: they are full again
			for q, r := range g.rates {
				if r.Tokens() >= rateBurst {
					delete(g.rates, q)
				}
			}
		}
		l = &peerRate{Limiter: rate.NewLimiter(rateLimit, rateBurst)}
		g.rates[p] = l
	}
	if !l.Allow() {
		return errRate
	}
	return nil
}

// peerRate is a peer's stream rate, and its refusals over it.
type peerRate struct {
	*rate.Limiter
	over  int       // refused over the rate since
	since time.Time // the first of them, within banWindow
}

// overRate counts a stream of p's refused over its rate at now, and
// reports whether it is a strike: every rateLimit-th within banWindow, a
// second's worth. A flood of streams is struck many times a second and
// banned within seconds; but an honest peer's ordinary streams can arrive
// in a burst when the receiving node's goroutines were starved of the CPU
// (the admission is timed when the handler runs), and a strike for each
// one refused banned honest members within seconds of a 64-node
// testnet's start on two loaded cores: its superpeers each refused a few
// dozen of a member's registrations and lookups, struck it five times,
// and banned it for banFor, and its cluster never converged (peer testnet
// -n 64 --election bully --scenario flap, real time: 12 to 45 bans in a
// run, in each of three runs logged).
func (g *guard) overRateLocked(p peer.ID, now time.Time) bool {
	r, ok := g.rates[p]
	if !ok {
		return false // not refused by admit: it keeps the peers it refuses
	}
	if now.Sub(r.since) > banWindow {
		r.over, r.since = 0, now
	}
	r.over++
	return r.over%rateLimit == 0
}

func (g *guard) bannedLocked(p peer.ID, now time.Time) bool {
	until, ok := g.banned[p]
	if ok && now.After(until) {
		delete(g.banned, p)
		return false
	}
	return ok
}

// Banned reports whether p is banned now.
func (g *guard) Banned(p peer.ID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.bannedLocked(p, g.clock())
}

// refuse counts and logs a refused message from p, and strikes p (a
// stream over its rate, every rateLimit-th refusal: overRateLocked; an
// election flood, each); the strike that reaches banStrikes bans p and
// disconnects it. A refusal
// because p is banned is counted, not logged, and is no new strike; one
// because the service is at its resource limit is counted and logged, and
// is no strike either (the limit may be others' doing), nor is a stream
// the sender reset: a peer that shuts down resets the streams it has open,
// and its peers must not ban it for that (they did, and a restarted peer
// could not rejoin for the ban's ten minutes).
func (g *guard) refuse(n *Node, proto string, p peer.ID, err error) {
	why := reason(err)
	g.mu.Lock()
	now := g.clock()
	if g.strikes == nil {
		g.strikes, g.banned = map[peer.ID][]time.Time{}, map[peer.ID]time.Time{}
	}
	g.countLocked(proto, why)
	// Streams over the rate strike by the second's worth; an election
	// flood (errFlood, which the algorithm caught and no honest member
	// sends) strikes each time.
	streamRate := why == "rate" && !errors.Is(err, errFlood)
	if why == "banned" || why == "limit" || why == "io" || streamRate && !g.overRateLocked(p, now) {
		g.mu.Unlock()
		if streamRate {
			n.log.Debug("refused a message", "protocol", proto, "peer", p, "reason", why, "err", err)
		}
		return
	}
	if _, ok := g.strikes[p]; !ok {
		g.strikes = prune(g.strikes, &g.strikesKept, func(s []time.Time) bool { return now.Sub(s[len(s)-1]) > banWindow })
	}
	s := append(g.strikes[p], now)
	for len(s) > 0 && now.Sub(s[0]) > banWindow {
		s = s[1:]
	}
	g.strikes[p] = s
	ban := len(s) >= banStrikes && !g.bannedLocked(p, now)
	if ban {
		g.banned = prune(g.banned, &g.bansKept, now.After)
		g.banned[p] = now.Add(banFor)
		g.bans++
		delete(g.strikes, p)
	}
	g.mu.Unlock()
	n.log.Info("refused a message", "protocol", proto, "peer", p, "reason", why, "err", err)
	if ban {
		// The addresses it came from are penalised at once: its next
		// connection waits out a penalty before its handshake (banGate).
		for _, c := range n.host.Network().ConnsToPeer(p) {
			if ip, ok := ipOf(c.RemoteMultiaddr()); ok && c.Stat().Direction == network.DirInbound {
				g.mu.Lock()
				g.penaliseLocked(ip, now, false)
				g.mu.Unlock()
			}
		}
		n.log.Warn("banned a peer that kept sending bad messages", "peer", p, "strikes", banStrikes, "for", banFor)
		_ = n.host.Network().ClosePeer(p)
	}
}

// pruneMin is the size below which the guard's strike and ban maps are
// not pruned.
const pruneMin = 1024

// prune returns m without the entries that no longer count (stale), once
// m, about to take a new identity, has grown to twice its size after the
// last prune (*kept, which it updates) and to pruneMin at least; else m.
// Each prune visits at most twice the entries added since the one before,
// so its cost per new identity is constant; and m holds at most twice the
// identities that still count (struck within banWindow, banned until
// later) or pruneMin, not every identity ever struck or banned: before,
// an identity's strikes were trimmed only when it struck again and a ban
// cleared only when its peer was checked again, and 200,000 identities
// struck once each were all kept, 134 bytes each (hostile-peer audit).
// The survivors go to a new map: Go's maps do not shrink.
func prune[V any](m map[peer.ID]V, kept *int, stale func(V) bool) map[peer.ID]V {
	if len(m) < max(2**kept, pruneMin) {
		return m
	}
	out := make(map[peer.ID]V, len(m)/2)
	for p, v := range m {
		if !stale(v) {
			out[p] = v
		}
	}
	*kept = len(out)
	return out
}

// Refused returns the counts of refused messages by protocol and reason,
// and the number of bans so far.
func (g *guard) Refused() (map[[2]string]uint64, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[[2]string]uint64, len(g.refused))
	for k, v := range g.refused {
		out[k] = v
	}
	return out, g.bans
}

// connected closes a new connection from a banned peer.
func (n *Node) connected(_ network.Network, c network.Conn) {
	n.route.gen.Add(1)
	if p := c.RemotePeer(); n.guard.Banned(p) {
		go func() { _ = n.host.Network().ClosePeer(p) }()
	}
}

// decodeAll checks that a payload parser consumed the whole payload.
func decodeAll[T any](payload []byte, parse func(*bufio.Reader) (T, error)) (T, error) {
	r := bufio.NewReader(bytes.NewReader(payload))
	v, err := parse(r)
	if err == nil {
		if _, more := r.ReadByte(); more == nil {
			err = fmt.Errorf("%w: trailing bytes", errWire)
		}
	}
	return v, err
}

// notify signals c without blocking: the shell's coalesced wake-ups (the
// machine's inbox, the RTT loop, the register protocol's changes).
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
