package pb

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/superpeer/superpeer/classic"
)

// Version is the format version this package writes and the only one it
// reads.
const Version = 1

// Limits of one encoded message.
const (
	// MaxIDs is the most entries Message.IDs may hold: a ring's ID list of
	// a cluster of 4096 processes.
	MaxIDs = 4096
	// MaxIDLen is the longest process ID, in bytes, in any field. A libp2p
	// peer ID is at most 44 bytes: the identity multihash (2 header bytes)
	// of a serialized public key of at most 42 bytes (38 bytes in all for
	// Ed25519, 39 for secp256k1), or else the 34-byte SHA-256 multihash of
	// the key (RSA, ECDSA); TestPeerIDLengths checks this.
	MaxIDLen = 128
	// MaxSize is the largest encoded message, in bytes, without the stream
	// framing's length prefix. A message with MaxIDs peer IDs of the longest
	// kind takes 4096 × (1 tag + 1 length + 44) = 188416 bytes for IDs,
	// plus at most 3 × (2 + 44) bytes for To, Leader and Election.Source
	// and 2 + 2 + 3 × 11 bytes for version, type, term, seq and capacity:
	// 188591 bytes. MaxSize leaves room above that (for IDs longer than
	// today's and for fields a later version may add) at 256 KiB, which a
	// receiver can afford to buffer per stream.
	MaxSize = 256 << 10
)

// Errors returned by Marshal, Unmarshal, WriteMsg and ReadMsg, each wrapped
// with %w together with a message naming what is wrong; test with errors.Is.
var (
	// ErrTooLarge reports a message above MaxSize, more than MaxIDs IDs, or
	// an ID longer than MaxIDLen.
	ErrTooLarge = errors.New("classic/pb: message too large")
	// ErrVersion reports a missing version or one other than Version.
	ErrVersion = errors.New("classic/pb: unsupported format version")
	// ErrType reports a missing (zero) or unknown message type.
	ErrType = errors.New("classic/pb: bad message type")
	// ErrMalformed reports input that is not a valid encoding: truncated,
	// a bad varint or tag, a known field with the wrong wire type, or an
	// empty entry in the ID list.
	ErrMalformed = errors.New("classic/pb: malformed message")
	// ErrSender reports an empty sender passed to Unmarshal or ReadMsg: the
	// driver must name the authenticated peer the bytes came from.
	ErrSender = errors.New("classic/pb: no sender")
)

// Field numbers of ElectionMessage in election.proto.
const (
	fieldVersion        protowire.Number = 1
	fieldType           protowire.Number = 2
	fieldTo             protowire.Number = 3
	fieldTerm           protowire.Number = 4
	fieldLeader         protowire.Number = 5
	fieldIDs            protowire.Number = 6
	fieldElectionSource protowire.Number = 7
	fieldElectionSeq    protowire.Number = 8
	fieldCapacity       protowire.Number = 9
)

// fieldNames names the known fields for error messages, as election.proto
// spells them.
var fieldNames = map[protowire.Number]string{
	fieldVersion: "version", fieldType: "type", fieldTo: "to", fieldTerm: "term",
	fieldLeader: "leader", fieldIDs: "ids", fieldElectionSource: "election_source",
	fieldElectionSeq: "election_seq", fieldCapacity: "capacity",
}

// fieldWireType is the wire type of every known field.
var fieldWireType = map[protowire.Number]protowire.Type{
	fieldVersion: protowire.VarintType, fieldType: protowire.VarintType,
	fieldTo: protowire.BytesType, fieldTerm: protowire.VarintType,
	fieldLeader: protowire.BytesType, fieldIDs: protowire.BytesType,
	fieldElectionSource: protowire.BytesType, fieldElectionSeq: protowire.VarintType,
	fieldCapacity: protowire.VarintType,
}

// validType reports whether t is a message type of package classic.
func validType(t classic.MsgType) bool { return t.String() != "UNKNOWN" }

// checkID checks an ID of the named field: at most MaxIDLen bytes, and not
// empty if it is entry index of the ID list (inList).
func checkID[S ~string | ~[]byte](field string, id S, inList bool, index int) error {
	if len(id) != 0 && len(id) <= MaxIDLen {
		return nil
	}
	where := field
	if inList {
		where = fmt.Sprintf("%s[%d]", field, index)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%w: %s is %d bytes long, above MaxIDLen = %d", ErrTooLarge, where, len(id), MaxIDLen)
	}
	if inList {
		return fmt.Errorf("%w: %s is empty; an ID list holds only real process IDs", ErrMalformed, where)
	}
	return nil
}

// check validates m for encoding: what Unmarshal would reject, Marshal
// refuses to write.
func check(m classic.Message) error {
	if !validType(m.Type) {
		return fmt.Errorf("%w: type %d is not a classic.MsgType with a name", ErrType, m.Type)
	}
	if len(m.IDs) > MaxIDs {
		return fmt.Errorf("%w: %d IDs, above MaxIDs = %d", ErrTooLarge, len(m.IDs), MaxIDs)
	}
	for _, f := range []struct {
		name string
		id   classic.ID
	}{{"to", m.To}, {"leader", m.Leader}, {"election_source", m.Election.Source}} {
		if err := checkID(f.name, f.id, false, 0); err != nil {
			return err
		}
	}
	for i, id := range m.IDs {
		if err := checkID("ids", id, true, i); err != nil {
			return err
		}
	}
	return nil
}

// size returns the encoded size of m (fields at zero are omitted).
func size(m classic.Message) int {
	n := protowire.SizeTag(fieldVersion) + protowire.SizeVarint(Version)
	n += protowire.SizeTag(fieldType) + protowire.SizeVarint(uint64(m.Type))
	sizeVarint := func(num protowire.Number, v uint64) {
		if v != 0 {
			n += protowire.SizeTag(num) + protowire.SizeVarint(v)
		}
	}
	sizeBytes := func(num protowire.Number, s classic.ID) {
		if s != classic.None {
			n += protowire.SizeTag(num) + protowire.SizeBytes(len(s))
		}
	}
	sizeBytes(fieldTo, m.To)
	sizeVarint(fieldTerm, m.Term)
	sizeBytes(fieldLeader, m.Leader)
	for _, id := range m.IDs {
		n += protowire.SizeTag(fieldIDs) + protowire.SizeBytes(len(id))
	}
	sizeBytes(fieldElectionSource, m.Election.Source)
	sizeVarint(fieldElectionSeq, m.Election.Seq)
	sizeVarint(fieldCapacity, m.Capacity)
	return n
}

// appendMsg appends the encoding of m (checked) to b, fields in number order.
func appendMsg(b []byte, m classic.Message) []byte {
	b = protowire.AppendTag(b, fieldVersion, protowire.VarintType)
	b = protowire.AppendVarint(b, Version)
	b = protowire.AppendTag(b, fieldType, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(m.Type))
	appendVarint := func(num protowire.Number, v uint64) {
		if v != 0 {
			b = protowire.AppendTag(b, num, protowire.VarintType)
			b = protowire.AppendVarint(b, v)
		}
	}
	appendBytes := func(num protowire.Number, s classic.ID) {
		if s != classic.None {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendString(b, string(s))
		}
	}
	appendBytes(fieldTo, m.To)
	appendVarint(fieldTerm, m.Term)
	appendBytes(fieldLeader, m.Leader)
	for _, id := range m.IDs {
		b = protowire.AppendTag(b, fieldIDs, protowire.BytesType)
		b = protowire.AppendString(b, string(id))
	}
	appendBytes(fieldElectionSource, m.Election.Source)
	appendVarint(fieldElectionSeq, m.Election.Seq)
	appendVarint(fieldCapacity, m.Capacity)
	return b
}

// Marshal encodes m as an ElectionMessage of the current Version. m.From is
// not encoded: the receiver learns the sender from the stream. It refuses
// what Unmarshal would reject: a type without a name (ErrType), more than
// MaxIDs IDs, an ID longer than MaxIDLen or an encoding above MaxSize
// (ErrTooLarge), an empty entry in m.IDs (ErrMalformed).
//
// The encoding is canonical: fields in number order, each at most once, zero
// values omitted, so equal messages encode to equal bytes.
func Marshal(m classic.Message) ([]byte, error) {
	n, err := checkedSize(m)
	if err != nil {
		return nil, err
	}
	return appendMsg(make([]byte, 0, n), m), nil
}

// checkedSize checks m for encoding and returns its encoded size.
func checkedSize(m classic.Message) (int, error) {
	if err := check(m); err != nil {
		return 0, err
	}
	n := size(m)
	if n > MaxSize {
		return 0, fmt.Errorf("%w: %s message encodes to %d bytes, above MaxSize = %d", ErrTooLarge, m.Type, n, MaxSize)
	}
	return n, nil
}

// Unmarshal decodes one ElectionMessage received from the authenticated
// peer from, which becomes the message's From (the wire has no sender).
//
// It rejects an empty from (ErrSender), input above MaxSize, more than MaxIDs
// IDs or an ID longer than MaxIDLen (ErrTooLarge), a version other than
// Version, absent included (ErrVersion), a type that is zero or not one of
// classic's (ErrType), and truncated input, bad varints or tags, a known field
// with the wrong wire type, or an empty entry in ids (ErrMalformed). Fields
// with unknown numbers are skipped. The result shares no memory with b.
func Unmarshal(b []byte, from classic.ID) (classic.Message, error) {
	if from == classic.None {
		return classic.Message{}, fmt.Errorf("%w: Unmarshal needs the authenticated peer the message came from", ErrSender)
	}
	if len(b) > MaxSize {
		return classic.Message{}, fmt.Errorf("%w: %d bytes, above MaxSize = %d", ErrTooLarge, len(b), MaxSize)
	}
	var (
		m       classic.Message
		version uint64
		typ     uint64
		ids     int
	)
	for off := 0; off < len(b); {
		num, wt, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return classic.Message{}, fmt.Errorf("%w: bad field tag at byte %d: %w", ErrMalformed, off, protowire.ParseError(n))
		}
		if !num.IsValid() {
			return classic.Message{}, fmt.Errorf("%w: field number %d at byte %d is out of range", ErrMalformed, num, off)
		}
		tagOff := off
		off += n
		want, known := fieldWireType[num]
		if !known {
			// Forward compatibility: skip a field a later version added.
			n = protowire.ConsumeFieldValue(num, wt, b[off:])
			if n < 0 {
				return classic.Message{}, fmt.Errorf("%w: unknown field %d (wire type %d) at byte %d: %w",
					ErrMalformed, num, wt, tagOff, protowire.ParseError(n))
			}
			off += n
			continue
		}
		name := fieldNames[num]
		if wt != want {
			return classic.Message{}, fmt.Errorf("%w: field %s (%d) at byte %d has wire type %d, want %d",
				ErrMalformed, name, num, tagOff, wt, want)
		}
		if wt == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b[off:])
			if n < 0 {
				return classic.Message{}, fmt.Errorf("%w: field %s at byte %d: %w", ErrMalformed, name, tagOff, protowire.ParseError(n))
			}
			off += n
			switch num {
			case fieldVersion:
				version = v
			case fieldType:
				typ = v
			case fieldTerm:
				m.Term = v
			case fieldElectionSeq:
				m.Election.Seq = v
			case fieldCapacity:
				m.Capacity = v
			}
			continue
		}
		v, n := protowire.ConsumeBytes(b[off:])
		if n < 0 {
			return classic.Message{}, fmt.Errorf("%w: field %s at byte %d: %w", ErrMalformed, name, tagOff, protowire.ParseError(n))
		}
		off += n
		if num == fieldIDs {
			if ids == MaxIDs {
				return classic.Message{}, fmt.Errorf("%w: more than MaxIDs = %d entries in ids", ErrTooLarge, MaxIDs)
			}
			if err := checkID(name, v, true, ids); err != nil {
				return classic.Message{}, err
			}
			m.IDs = append(m.IDs, classic.ID(v))
			ids++
			continue
		}
		if err := checkID(name, v, false, 0); err != nil {
			return classic.Message{}, err
		}
		switch num {
		case fieldTo:
			m.To = classic.ID(v)
		case fieldLeader:
			m.Leader = classic.ID(v)
		case fieldElectionSource:
			m.Election.Source = classic.ID(v)
		}
	}
	if version != Version {
		if version == 0 {
			return classic.Message{}, fmt.Errorf("%w: no version field; this peer speaks version %d", ErrVersion, Version)
		}
		return classic.Message{}, fmt.Errorf("%w: version %d, this peer speaks version %d", ErrVersion, version, Version)
	}
	if typ == 0 {
		return classic.Message{}, fmt.Errorf("%w: no type field", ErrType)
	}
	if typ > 255 || !validType(classic.MsgType(typ)) {
		return classic.Message{}, fmt.Errorf("%w: type %d is not a known classic.MsgType (a newer peer?)", ErrType, typ)
	}
	m.Type = classic.MsgType(typ)
	m.From = from
	return m, nil
}
