package overlay

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
)

// An attach request's report: the RTTs round-trip; an empty report, too
// many RTTs, a zero or an RTT above geometric.MaxRTT, and trailing bytes
// are refused.
func TestAttachRTTs(t *testing.T) {
	in := []time.Duration{12 * time.Millisecond, time.Nanosecond, geometric.MaxRTT}
	out, err := decodeAll(appendRTTs(nil, in), readRTTs)
	if err != nil || !slices.Equal(in, out) {
		t.Fatalf("round trip: %v, %v; want %v", out, err, in)
	}
	count := func(n int, v uint64) []byte {
		b := binary.AppendUvarint(nil, uint64(n))
		for range n {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	for name, b := range map[string][]byte{
		"empty":       count(0, 1),
		"too many":    count(maxAttachRTTs+1, 1),
		"zero":        count(1, 0),
		"too long":    count(1, uint64(geometric.MaxRTT)+1),
		"trailing":    append(count(1, 1), 0),
		"truncated":   count(2, 1)[:2],
		"no count at": nil,
	} {
		if _, err := decodeAll(b, readRTTs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// An attach request's report with the member's next superpeer: it
// round-trips after the RTTs, is optional, and a zero or too long RTT,
// an empty or too long ID, a truncated one and trailing bytes after it
// are refused.
func TestAttachSecond(t *testing.T) {
	client, err := geometric.NewClient(geometric.DefaultCoordConfig())
	if err != nil {
		t.Fatal(err)
	}
	ids := testIDs(t, 2)
	head := appendRTTs(appendCoord([]byte{attachFlags(false, false)}, client.Coordinate()), []time.Duration{time.Millisecond})
	want := node.PeerRTT{Peer: ids[1], RTT: 7 * time.Millisecond}
	in, err := readAttachRequest(ids[0], appendSecond(slices.Clone(head), want))
	if err != nil || in.Second != want || len(in.RTTs) != 1 {
		t.Fatalf("round trip: %+v, %v; want the second %+v", in, err, want)
	}
	if in, err := readAttachRequest(ids[0], head); err != nil || in.Second != (node.PeerRTT{}) {
		t.Fatalf("without a next superpeer: %+v, %v", in, err)
	}
	second := func(id []byte, rtt uint64) []byte {
		b := binary.AppendUvarint(slices.Clone(head), uint64(len(id)))
		return binary.AppendUvarint(append(b, id...), rtt)
	}
	for name, b := range map[string][]byte{
		"zero RTT":     second([]byte(ids[1]), 0),
		"RTT too long": second([]byte(ids[1]), uint64(geometric.MaxRTT)+1),
		"empty ID":     second(nil, 1),
		"ID too long":  second(make([]byte, pb.MaxIDLen+1), 1),
		"truncated":    second([]byte(ids[1]), 1)[:len(head)+3],
		"trailing":     append(second([]byte(ids[1]), 1), 0),
	} {
		if _, err := readAttachRequest(ids[0], b); !errors.Is(err, errWire) {
			t.Errorf("%s: %v, want a wire error", name, err)
		}
	}
}
