// Package pb is the one wire format of the election messages of package
// classic: a protobuf encoding of classic.Message (schema in election.proto)
// written by hand with google.golang.org/protobuf/encoding/protowire, and a
// length-prefixed framing for streams.
//
// The sender is not on the wire. The receiver knows it from the
// authenticated stream and passes it to Unmarshal or ReadMsg, which put it in
// Message.From; Marshal and WriteMsg ignore Message.From. So a peer can only
// ever speak for itself.
//
// A driver sends a machine's output with
//
//	for _, m := range rd.Messages {
//		err := pb.WriteMsg(streamTo(m.To), m)
//		...
//	}
//
// and feeds what arrives on a stream from peer p back with
//
//	m, err := pb.ReadMsg(stream, classic.ID(p))
//	if err == nil && m.To == self && m.Type != classic.MsgUnreachable {
//		machine.Step(m)
//	}
//
// Every decoding error wraps one of ErrTooLarge, ErrVersion, ErrType,
// ErrMalformed or ErrSender, so a driver can tell a broken or hostile peer
// (reset the stream) from a clean end of stream (io.EOF from ReadMsg).
//
// Forward compatibility: Unmarshal skips field numbers it does not know, so a
// newer peer may add fields under new numbers at the same Version and older
// peers still understand the rest. A change of meaning bumps Version, and a
// receiver rejects every version but its own. Where a field appears more than
// once, the last one wins, and repeated ids entries are concatenated, as in
// every protobuf decoder.
//
// MsgUnreachable is a valid type on the wire (it has a name), but it is
// driver-local: a machine never emits it, and a driver should drop one that
// arrives from a peer rather than let a peer report its own unreachability.
package pb
