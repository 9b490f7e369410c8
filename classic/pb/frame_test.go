package pb_test

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
)

// plainReader hides any io.ByteReader and counts the bytes read.
type plainReader struct {
	r    io.Reader
	read int
}

func (p *plainReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.read += n
	return n, err
}

// countingWriter counts Write calls.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(b)
}

func TestFramesRoundTrip(t *testing.T) {
	var w countingWriter
	var sent []classic.Message
	for _, typ := range allTypes() {
		m := full(typ)
		if err := pb.WriteMsg(&w, m); err != nil {
			t.Fatalf("WriteMsg: %v", err)
		}
		sent = append(sent, m)
	}
	if w.writes != len(sent) {
		t.Fatalf("%d Write calls for %d messages, want one each", w.writes, len(sent))
	}
	for name, r := range map[string]io.Reader{
		"ByteReader":   bytes.NewReader(w.Bytes()),
		"plain Reader": &plainReader{r: bytes.NewReader(w.Bytes())},
	} {
		t.Run(name, func(t *testing.T) {
			for i, m := range sent {
				got, err := pb.ReadMsg(r, "alice")
				if err != nil {
					t.Fatalf("ReadMsg %d: %v", i, err)
				}
				if want := withFrom(m, "alice"); !reflect.DeepEqual(got, want) {
					t.Fatalf("frame %d: got %+v, want %+v", i, got, want)
				}
			}
			if _, err := pb.ReadMsg(r, "alice"); err != io.EOF {
				t.Fatalf("after the last frame: error %v, want io.EOF itself", err)
			}
		})
	}
}

func TestReadMsgReadsOneFrameOnly(t *testing.T) {
	var w bytes.Buffer
	for _, typ := range []classic.MsgType{classic.MsgElection, classic.MsgOK} {
		if err := pb.WriteMsg(&w, full(typ)); err != nil {
			t.Fatalf("WriteMsg: %v", err)
		}
	}
	first, _ := pb.Marshal(full(classic.MsgElection))
	r := &plainReader{r: bytes.NewReader(w.Bytes())}
	if _, err := pb.ReadMsg(r, "alice"); err != nil {
		t.Fatalf("ReadMsg: %v", err)
	}
	if want := protowire.SizeVarint(uint64(len(first))) + len(first); r.read != want {
		t.Fatalf("read %d bytes for a %d-byte frame", r.read, want)
	}
}

func TestReadMsgBadFrameKeepsStreamInStep(t *testing.T) {
	// A frame whose body Unmarshal rejects is consumed whole.
	bad := enc(nil).varint(1, 2).varint(2, 1) // version 2
	in := protowire.AppendBytes(nil, bad)
	var w bytes.Buffer
	w.Write(in)
	if err := pb.WriteMsg(&w, full(classic.MsgOK)); err != nil {
		t.Fatalf("WriteMsg: %v", err)
	}
	r := bytes.NewReader(w.Bytes())
	_, err := pb.ReadMsg(r, "alice")
	wantErr(t, "version 2 frame", err, pb.ErrVersion)
	m, err := pb.ReadMsg(r, "alice")
	if err != nil || m.Type != classic.MsgOK {
		t.Fatalf("the frame after a rejected one: %+v, %v", m, err)
	}
}

func TestReadMsgRejects(t *testing.T) {
	valid, _ := pb.Marshal(full(classic.MsgOK))
	for _, tt := range []struct {
		name string
		in   []byte
		want error
		eof  bool // also wraps io.ErrUnexpectedEOF
	}{
		{"length above MaxSize", protowire.AppendVarint(nil, pb.MaxSize+1), pb.ErrTooLarge, false},
		{"length 2^62", protowire.AppendVarint(nil, 1<<62), pb.ErrTooLarge, false},
		{"truncated length", []byte{0x80}, pb.ErrMalformed, true},
		{"length runs past 10 bytes", bytes.Repeat([]byte{0x80}, 11), pb.ErrMalformed, false},
		{"length overflows 64 bits", append(bytes.Repeat([]byte{0x80}, 9), 0x02), pb.ErrMalformed, false},
		{"truncated body", append(protowire.AppendVarint(nil, uint64(len(valid))), valid[:len(valid)-1]...), pb.ErrMalformed, true},
		{"length but no body", protowire.AppendVarint(nil, 5), pb.ErrMalformed, true},
		{"empty frame", []byte{0}, pb.ErrVersion, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range []io.Reader{bytes.NewReader(tt.in), &plainReader{r: bytes.NewReader(tt.in)}} {
				_, err := pb.ReadMsg(r, "alice")
				wantErr(t, tt.name, err, tt.want)
				if tt.eof && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v does not wrap io.ErrUnexpectedEOF", err)
				}
			}
		})
	}
}

func TestReadMsgRefusesLengthBeforeAllocating(t *testing.T) {
	in := append(protowire.AppendVarint(nil, pb.MaxSize+1), make([]byte, pb.MaxSize+1)...)
	r := &plainReader{r: bytes.NewReader(in)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := pb.ReadMsg(r, "alice")
	runtime.ReadMemStats(&after)
	wantErr(t, "oversized frame", err, pb.ErrTooLarge)
	if r.read > 3 {
		t.Fatalf("read %d bytes; only the length prefix should be read", r.read)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<10 {
		t.Fatalf("allocated %d bytes before refusing the frame", alloc)
	}
}

var errStream = errors.New("stream reset")

type failingRW struct{ after []byte }

func (f *failingRW) Read(b []byte) (int, error) {
	if len(f.after) == 0 {
		return 0, errStream
	}
	n := copy(b, f.after)
	f.after = f.after[n:]
	return n, nil
}

func (f *failingRW) Write([]byte) (int, error) { return 0, errStream }

func TestStreamErrorsAreWrapped(t *testing.T) {
	err := pb.WriteMsg(&failingRW{}, full(classic.MsgOK))
	if !errors.Is(err, errStream) {
		t.Fatalf("WriteMsg: error %v, want it to wrap %v", err, errStream)
	}
	for name, in := range map[string][]byte{"in the length": {0x80}, "in the body": {5, 1}, "before a frame": nil} {
		_, err := pb.ReadMsg(&failingRW{after: in}, "alice")
		if !errors.Is(err, errStream) || errors.Is(err, pb.ErrMalformed) {
			t.Fatalf("ReadMsg, error %s: %v, want it to wrap %v only", name, err, errStream)
		}
	}
}
