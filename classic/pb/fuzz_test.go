package pb_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
)

// sentinels are the errors every decoding failure must wrap.
var sentinels = []error{pb.ErrTooLarge, pb.ErrVersion, pb.ErrType, pb.ErrMalformed}

func wrapsSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func fuzzSeeds(f *testing.F) {
	for _, typ := range allTypes() {
		b, err := pb.Marshal(full(typ))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	min, _ := pb.Marshal(classic.Message{Type: classic.MsgHeartbeat})
	f.Add(min)
	f.Add([]byte{})
	f.Add([]byte(header(classic.MsgOK).varint(1, 2)))                            // version 2 last
	f.Add([]byte(header(classic.MsgOK).bytes(6, "")))                            // empty ID
	f.Add([]byte(header(classic.MsgOK).varint(4, 1).varint(4, 2)))               // repeated scalar
	f.Add([]byte(header(classic.MsgOK).bytes(11, "x").varint(2, 300)))           // unknown field, big type
	f.Add([]byte(header(classic.MsgOK).raw(0xa3, 0x01, 0x08, 0x01, 0xa4, 0x01))) // group 20
}

// FuzzUnmarshal: Unmarshal never panics; every error wraps a sentinel; what
// decodes carries the given sender, re-encodes to at most as many bytes
// (so never above MaxSize), and decodes again to the same message, whose
// encoding is a fixed point.
func FuzzUnmarshal(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := pb.Unmarshal(b, "sender")
		if err != nil {
			if !wrapsSentinel(err) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		if m.From != "sender" {
			t.Fatalf("From = %q, want the given sender", m.From)
		}
		b2, err := pb.Marshal(m)
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", m, err)
		}
		if len(b2) > len(b) {
			t.Fatalf("re-encoding grew from %d to %d bytes", len(b), len(b2))
		}
		m2, err := pb.Unmarshal(b2, "sender")
		if err != nil {
			t.Fatalf("re-encoding % x does not decode: %v", b2, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the message\nfirst  %+v\nsecond %+v", m, m2)
		}
		if b3, _ := pb.Marshal(m2); !bytes.Equal(b2, b3) {
			t.Fatalf("the encoding is not canonical:\n% x\n% x", b2, b3)
		}
	})
}

// FuzzReadMsg: reading frames from arbitrary bytes never panics, and every
// error is io.EOF at a frame boundary or wraps a sentinel.
func FuzzReadMsg(f *testing.F) {
	var w bytes.Buffer
	for _, typ := range allTypes()[:3] {
		if err := pb.WriteMsg(&w, full(typ)); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(w.Bytes())
	f.Add(protowire.AppendVarint(nil, pb.MaxSize+1))
	f.Add([]byte{0x80, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for {
			before := r.Len()
			_, err := pb.ReadMsg(r, "sender")
			if err == io.EOF {
				if before != 0 {
					t.Fatalf("io.EOF with %d bytes left", before)
				}
				return
			}
			if err != nil {
				if !wrapsSentinel(err) {
					t.Fatalf("error %v wraps no sentinel", err)
				}
				return
			}
		}
	})
}
