package overlay

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic/pb"
)

func testIDs(t testing.TB, n int) []peer.ID {
	t.Helper()
	var ids []peer.ID
	for range n {
		_, pub, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// The attach answer's cluster list: what appendIDs writes readIDs reads
// back, and readIDs refuses a count or a length beyond the election wire's
// limits, a truncated list and bytes that are no peer ID.
func TestClusterList(t *testing.T) {
	ids := testIDs(t, 3)
	got, err := readIDs(bufio.NewReader(bytes.NewReader(appendIDs(nil, ids))))
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("round trip = %v, %v; want %v", got, err, ids)
	}
	full := appendIDs(nil, ids)
	bad := map[string][]byte{
		"count":     binary.AppendUvarint(nil, pb.MaxIDs+1),
		"length":    binary.AppendUvarint(binary.AppendUvarint(nil, 1), pb.MaxIDLen+1),
		"zero":      binary.AppendUvarint(binary.AppendUvarint(nil, 1), 0),
		"truncated": full[:len(full)-1],
		"not an ID": append(binary.AppendUvarint(binary.AppendUvarint(nil, 1), 3), 1, 2, 3),
		"empty":     nil,
	}
	for name, b := range bad {
		if got, err := readIDs(bufio.NewReader(bytes.NewReader(b))); err == nil {
			t.Errorf("%s: read %v, want an error", name, got)
		}
	}
}

// Random bytes never panic readIDs, and whatever it accepts is within the
// limits and reads back the same after appendIDs writes it. (Not the same
// bytes: a uvarint may come in a longer form than appendIDs writes, such as
// 0x80 0x00 for 0, which the fuzzer found; readIDs accepts it, as
// encoding/binary does.)
func FuzzReadIDs(f *testing.F) {
	f.Add(appendIDs(nil, testIDs(f, 2)))
	f.Add([]byte{0})
	f.Add([]byte{1, 3, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids, err := readIDs(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		if len(ids) > pb.MaxIDs {
			t.Fatalf("%d IDs, more than %d", len(ids), pb.MaxIDs)
		}
		again, err := readIDs(bufio.NewReader(bytes.NewReader(appendIDs(nil, ids))))
		if err != nil || !slices.Equal(again, ids) {
			t.Fatalf("read %v from %x; written and read again: %v, %v", ids, b, again, err)
		}
	})
}

// The frames of the stream protocols: what writeFrame writes readFrame
// reads back, and readFrame refuses each kind of bad frame with its
// reason.
func TestFrames(t *testing.T) {
	var b bytes.Buffer
	if err := writeFrame(&b, frameToken, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	good := slices.Clone(b.Bytes())
	if p, err := readFrame(bufio.NewReader(&b), frameToken); err != nil || !bytes.Equal(p, []byte{1, 2, 3}) {
		t.Fatalf("round trip = %v, %v", p, err)
	}
	if err := writeFrame(&b, frameToken, make([]byte, maxFrame)); !errors.Is(err, errFrameSize) {
		t.Errorf("writing an oversized frame: %v", err)
	}
	for _, c := range []struct {
		name, reason string
		data         []byte
	}{
		{"oversized", "size", binary.AppendUvarint(nil, maxFrame+1)},
		{"unknown version", "version", frame(wireVersion+1, byte(frameToken), nil)},
		{"unexpected type", "type", frame(wireVersion, byte(frameAttach), nil)},
		{"truncated", "truncated", good[:len(good)-1]},
		{"empty", "truncated", nil},
		{"no version and type", "truncated", []byte{1, wireVersion}},
		{"bad length", "malformed", bytes.Repeat([]byte{0xff}, 11)},
	} {
		_, err := readFrame(bufio.NewReader(bytes.NewReader(c.data)), frameToken)
		if err == nil || reason(err) != c.reason {
			t.Errorf("%s: err %v, reason %q; want %q", c.name, err, reason(err), c.reason)
		}
	}
}

// Random bytes never panic readFrame, and a payload it accepts is within
// the limit and reads back the same after writeFrame writes it.
func FuzzReadFrame(f *testing.F) {
	f.Add(frame(wireVersion, byte(frameCloser), make([]byte, 32)))
	f.Add(frame(wireVersion+1, byte(frameCloser), nil))
	f.Add(binary.AppendUvarint(nil, maxFrame+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := readFrame(bufio.NewReader(bytes.NewReader(b)), frameCloser)
		if err != nil {
			if reason(err) == "" {
				t.Fatalf("an error without a reason: %v", err)
			}
			return
		}
		if len(p)+2 > maxFrame {
			t.Fatalf("payload of %d bytes accepted", len(p))
		}
		var w bytes.Buffer
		if err := writeFrame(&w, frameCloser, p); err != nil {
			t.Fatal(err)
		}
		again, err := readFrame(bufio.NewReader(&w), frameCloser)
		if err != nil || !bytes.Equal(again, p) {
			t.Fatalf("read %x from %x; written and read again: %x, %v", p, b, again, err)
		}
	})
}
