package overlay

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
	"time"

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

// filterRTT follows a lower sample at once and a higher one by an eighth.
func TestFilterRTT(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ old, sample, want time.Duration }{
		{0, 40 * ms, 40 * ms},
		{40 * ms, 30 * ms, 30 * ms},
		{40 * ms, 840 * ms, 140 * ms},
	} {
		if got := filterRTT(c.old, c.sample); got != c.want {
			t.Errorf("filterRTT(%v, %v) = %v, want %v", c.old, c.sample, got, c.want)
		}
	}
}
