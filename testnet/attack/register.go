package attack

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
)

// The register protocol of the DHT strategy's cluster-scoped membership
// (overlay/register.go), written out here as an independent client would
// write it: a member sends its superpeer one request frame, a sealed
// announcement of its own (gossip.SealAnnouncement: the overlay's own
// encoder, which defines the record), and reads the cluster's roster back
// from one response frame. The frames are Frame's:
//
//   - request, FrameRegister: the roster ID and the roster version the
//     member holds (uvarints; 0 and 0: none), then the sealed announcement
//     to the end of the frame, or nothing (a refresh: the superpeer holds
//     the record already);
//   - response, FrameRoster: a status byte, then for RegNotSuperpeer a
//     hint (uvarint length and the ID's bytes of the superpeer the node
//     follows; length 0: none); for every other status the digest
//     (uvarint k, the 32-byte cluster key, uvarint N of the size
//     estimate, uvarint length and the estimate's source), then nothing
//     more for the refusals (RegNotMember among them: a goodbye, or a
//     record not taken, from a peer the roster does not hold, which
//     gets no roster) and RegNeedRecord; for RegUnchanged the
//     roster ID and version; for RegDelta and RegSnapshot the roster ID
//     and version, a byte 1 when the page was cut (ask again at once with
//     this version), a uvarint count of sealed announcements, each a
//     uvarint length and its bytes, and a uvarint count of removed peers,
//     each a uvarint length and the ID's bytes.

// Frame types of the register protocol (overlay/register.go).
const (
	FrameRegister = 7 // register request: roster ID, version, sealed announcement (or none)
	FrameRoster   = 8 // register response: status, digest, roster
)

// RegStatus is the first byte of a register response.
type RegStatus byte

// The register response's statuses.
const (
	RegUnchanged    RegStatus = 1  // the member's roster is current
	RegDelta        RegStatus = 2  // the changes since the member's version
	RegSnapshot     RegStatus = 3  // the whole roster
	RegNotSuperpeer RegStatus = 4  // refused: the node serves no cluster (a hint follows)
	RegWrongCluster RegStatus = 5  // refused: the member's key is not in the cluster
	RegFull         RegStatus = 6  // refused: the roster is full
	RegTooSoon      RegStatus = 7  // refused: a new record sooner than the rate allows, or a roster read from scratch beyond the budget
	RegBadRecord    RegStatus = 8  // refused: the record does not open, or is another peer's (a strike)
	RegNeedRecord   RegStatus = 9  // a refresh from a peer the roster does not hold: send the record
	RegCrowded      RegStatus = 10 // refused: the member's address group shows more identities than MaxPerAddr
	RegNotMember    RegStatus = 11 // refused: the roster does not hold the peer and the request did not put it there (a stranger's goodbye)
)

func (s RegStatus) String() string {
	names := map[RegStatus]string{RegUnchanged: "unchanged", RegDelta: "delta", RegSnapshot: "snapshot",
		RegNotSuperpeer: "not a superpeer", RegWrongCluster: "wrong cluster", RegFull: "roster full", RegTooSoon: "too soon",
		RegBadRecord: "bad record", RegNeedRecord: "record needed", RegCrowded: "address crowded", RegNotMember: "not a member"}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("status %d", byte(s))
}

func (s RegStatus) refusal() bool {
	return s >= RegNotSuperpeer && s <= RegBadRecord || s == RegCrowded || s == RegNotMember
}

// Bounds of the register protocol (overlay/register.go and wire.go).
const (
	maxFrameLen = 64 << 10 // a frame's length: version, type and payload
	maxSource   = 32       // the digest's source
	maxPages    = 512      // pages of one registration
)

// RegisterProtocol is the register protocol of the overlay on a network.
func RegisterProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/register/1.0.0")
}

// Digest is what a superpeer says of its cluster in every register answer
// but RegNotSuperpeer: its k, its cluster key and its network-size
// estimate (N, and the estimate's source).
type Digest struct {
	K          int
	ClusterKey dhtselect.Key
	N          int
	Source     string
}

// In reports whether p's key is in the digest's cluster.
func (d Digest) In(p peer.ID) bool { return dhtselect.KeyOf(p).Cluster(d.K) == d.ClusterKey }

// RegisterReply is a decoded register response.
type RegisterReply struct {
	Status            RegStatus
	Hint              peer.ID // RegNotSuperpeer: the superpeer the node follows, or none
	Digest            Digest
	RosterID, Version uint64
	More              bool     // the page was cut: ask again with Version
	Entries           [][]byte // sealed announcements
	Removed           []peer.ID
}

// RegisterRequest is a register request's payload: the roster ID and
// version held, and the sealed announcement (nil: a refresh).
func RegisterRequest(rid, ver uint64, sealed []byte) []byte {
	b := binary.AppendUvarint(nil, rid)
	b = binary.AppendUvarint(b, ver)
	return append(b, sealed...)
}

// errReply is a register response that does not parse.
var errReply = errors.New("attack: bad register response")

// reader reads a payload; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{errReply}, args...)...)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("%s: bad uvarint", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(what string, l uint64) []byte {
	if r.err != nil {
		return nil
	}
	if l > uint64(len(r.b)) {
		r.fail("%s: %d bytes, %d left", what, l, len(r.b))
		return nil
	}
	b := r.b[:l]
	r.b = r.b[l:]
	return b
}

func (r *reader) id(what string, optional bool) peer.ID {
	l := r.uvarint(what)
	if r.err != nil || l == 0 && optional {
		return ""
	}
	if l == 0 || l > pb.MaxIDLen {
		r.fail("%s: ID of %d bytes", what, l)
		return ""
	}
	id, err := peer.IDFromBytes(r.bytes(what, l))
	if err != nil {
		r.fail("%s: %v", what, err)
	}
	return id
}

func (r *reader) digest() Digest {
	var d Digest
	d.K = int(min(r.uvarint("k"), dhtselect.MaxK+1))
	copy(d.ClusterKey[:], r.bytes("cluster key", uint64(len(d.ClusterKey))))
	n := r.uvarint("size")
	if n == 0 || n > 1<<48 {
		r.fail("size estimate %d", n)
	}
	d.N = int(n)
	l := r.uvarint("source")
	if l > maxSource {
		r.fail("source of %d bytes", l)
	}
	d.Source = string(r.bytes("source", l))
	if r.err == nil && (d.K > dhtselect.MaxK || d.ClusterKey.Cluster(d.K) != d.ClusterKey) {
		r.fail("digest: k = %d, cluster key %s", d.K, d.ClusterKey)
	}
	return d
}

// ParseRegisterReply reads a register response's payload.
func ParseRegisterReply(b []byte) (RegisterReply, error) {
	r := reader{b: b}
	rep := RegisterReply{Status: RegStatus(r.uvarintByte())}
	switch s := rep.Status; {
	case r.err != nil:
	case s == RegNotSuperpeer:
		rep.Hint = r.id("hint", true)
	case s.refusal(), s == RegNeedRecord:
		rep.Digest = r.digest()
	case s == RegUnchanged:
		rep.Digest = r.digest()
		rep.RosterID, rep.Version = r.uvarint("roster ID"), r.uvarint("version")
	case s == RegDelta, s == RegSnapshot:
		rep.Digest = r.digest()
		rep.RosterID, rep.Version = r.uvarint("roster ID"), r.uvarint("version")
		switch m := r.uvarintByte(); m {
		case 0, 1:
			rep.More = m == 1
		default:
			r.fail("more = %d", m)
		}
		n := r.uvarint("entries")
		for i := uint64(0); i < n && r.err == nil; i++ {
			l := r.uvarint("entry")
			if l == 0 || l > gossip.MaxSealedSize {
				r.fail("entry of %d bytes", l)
			}
			rep.Entries = append(rep.Entries, r.bytes("entry", l))
		}
		n = r.uvarint("removed")
		for i := uint64(0); i < n && r.err == nil; i++ {
			rep.Removed = append(rep.Removed, r.id("removed", false))
		}
	default:
		r.fail("unknown status %d", byte(s))
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("%d bytes after the end", len(r.b))
	}
	return rep, r.err
}

// uvarintByte reads one byte (a status, a "more" flag).
func (r *reader) uvarintByte() byte {
	b := r.bytes("byte", 1)
	if b == nil {
		return 0
	}
	return b[0]
}

// Register sends p one register request (payload: RegisterRequest) from
// h on network's register protocol and reads the response, within 5 s.
func Register(ctx context.Context, h host.Host, p peer.ID, network string, payload []byte) (RegisterReply, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := h.NewStream(ctx, p, RegisterProtocol(network))
	if err != nil {
		return RegisterReply{}, err
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	if _, err := s.Write(Frame(WireVersion, FrameRegister, payload)); err != nil {
		_ = s.Reset()
		return RegisterReply{}, err
	}
	_ = s.CloseWrite()
	resp, err := readFrame(s, FrameRoster)
	if err != nil {
		_ = s.Reset()
		return RegisterReply{}, err
	}
	return ParseRegisterReply(resp)
}

// byteReader reads a stream byte by byte for binary.ReadUvarint.
type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var c [1]byte
	_, err := io.ReadFull(b.r, c[:])
	return c[0], err
}

// readFrame reads one frame of type want (wire version WireVersion, at
// most 64 KiB) and returns its payload.
func readFrame(r io.Reader, want byte) ([]byte, error) {
	l, err := binary.ReadUvarint(byteReader{r})
	if err != nil {
		return nil, fmt.Errorf("%w: frame length: %w", errReply, err)
	}
	if l < 2 || l > maxFrameLen {
		return nil, fmt.Errorf("%w: frame of %d bytes", errReply, l)
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: frame of %d bytes: %w", errReply, l, err)
	}
	if b[0] != WireVersion || b[1] != want {
		return nil, fmt.Errorf("%w: frame of version %d, type %d; want %d, %d", errReply, b[0], b[1], WireVersion, want)
	}
	return b[2:], nil
}
