package overlay

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/superpeer/superpeer/geometric"
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
