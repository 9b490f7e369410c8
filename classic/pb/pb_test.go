package pb_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
)

// allTypes returns every classic.MsgType that has a name.
func allTypes() []classic.MsgType {
	var out []classic.MsgType
	for t := range classic.MsgType(math.MaxUint8) {
		if t.String() != "UNKNOWN" {
			out = append(out, t)
		}
	}
	return out
}

// full returns a message of type t with every field set, From included.
func full(t classic.MsgType) classic.Message {
	return classic.Message{
		Type:     t,
		From:     "forged-sender",
		To:       "bob",
		Term:     math.MaxUint64,
		Leader:   "carol",
		IDs:      []classic.ID{"a", "b\x00\xff", "c"},
		Election: classic.ElectionID{Source: "dave", Seq: 1<<63 + 7},
		Capacity: 42,
	}
}

// withFrom returns m with From replaced.
func withFrom(m classic.Message, from classic.ID) classic.Message {
	m.From = from
	return m
}

// wantErr fails unless err wraps want and says something beyond the sentinel.
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
	if err.Error() == want.Error() {
		t.Fatalf("%s: error %q does not say what is wrong", what, err)
	}
}

// enc builds raw wire input field by field.
type enc []byte

// Every method returns a new slice: e is never appended to in place.

func (e enc) varint(num protowire.Number, v uint64) enc {
	e = protowire.AppendTag(e.raw(), num, protowire.VarintType)
	return protowire.AppendVarint(e, v)
}

func (e enc) bytes(num protowire.Number, v string) enc {
	e = protowire.AppendTag(e.raw(), num, protowire.BytesType)
	return protowire.AppendString(e, v)
}

// raw returns a copy of e with b appended.
func (e enc) raw(b ...byte) enc { return append(append(enc(nil), e...), b...) }

// header is a valid version and type.
func header(t classic.MsgType) enc { return enc(nil).varint(1, pb.Version).varint(2, uint64(t)) }

func TestEveryTypeHasAName(t *testing.T) {
	// The wire accepts exactly the named kinds; if this count changes, a
	// kind was added: add it to election.proto too (TestProtoFileMatchesCode
	// checks the numbers).
	if got := len(allTypes()); got != 15 {
		t.Fatalf("%d named message types, want 15; update election.proto and this test", got)
	}
}

func TestRoundTripEveryType(t *testing.T) {
	for _, typ := range allTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			m := full(typ)
			b, err := pb.Marshal(m)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got, err := pb.Unmarshal(b, "alice")
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if want := withFrom(m, "alice"); !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestRoundTripZeroFields(t *testing.T) {
	// Only version and type go on the wire; everything else decodes as
	// zero, IDs as nil.
	m := classic.Message{Type: classic.MsgOK}
	b, err := pb.Marshal(m)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if want := []byte(header(classic.MsgOK)); !bytes.Equal(b, want) {
		t.Fatalf("encoding % x, want % x", b, want)
	}
	got, err := pb.Unmarshal(b, "alice")
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if want := withFrom(m, "alice"); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// An empty, non-nil list encodes like nil.
	b2, _ := pb.Marshal(classic.Message{Type: classic.MsgOK, IDs: []classic.ID{}})
	if !bytes.Equal(b, b2) {
		t.Fatalf("empty IDs encode as % x, nil IDs as % x", b2, b)
	}
}

func TestFromIsNeverOnTheWire(t *testing.T) {
	m := full(classic.MsgCoordinator)
	m.From = "mallory-pretends-to-be-the-leader"
	b, err := pb.Marshal(m)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if bytes.Contains(b, []byte(m.From)) {
		t.Fatalf("the encoding carries From %q: % x", m.From, b)
	}
	b2, err := pb.Marshal(withFrom(m, ""))
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("messages that differ only in From encode differently:\n% x\n% x", b, b2)
	}
	for _, sender := range []classic.ID{"alice", "bob"} {
		got, err := pb.Unmarshal(b, sender)
		if err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		if got.From != sender {
			t.Fatalf("From = %q, want the stream's sender %q", got.From, sender)
		}
	}
	// A sender is required.
	_, err = pb.Unmarshal(b, classic.None)
	wantErr(t, "Unmarshal without sender", err, pb.ErrSender)
	_, err = pb.ReadMsg(bytes.NewReader(nil), classic.None)
	wantErr(t, "ReadMsg without sender", err, pb.ErrSender)
}

func TestUnmarshalRejects(t *testing.T) {
	ok := header(classic.MsgElection)
	long := strings.Repeat("x", pb.MaxIDLen+1)
	many := ok
	for range pb.MaxIDs + 1 {
		many = many.bytes(6, "i")
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty input", nil, pb.ErrVersion},
		{"no version", enc(nil).varint(2, 1), pb.ErrVersion},
		{"version 0", enc(nil).varint(1, 0).varint(2, 1), pb.ErrVersion},
		{"version 2", enc(nil).varint(1, 2).varint(2, 1), pb.ErrVersion},
		{"version 2^32+1", enc(nil).varint(1, 1<<32+1).varint(2, 1), pb.ErrVersion},
		{"no type", enc(nil).varint(1, 1), pb.ErrType},
		{"type 0", enc(nil).varint(1, 1).varint(2, 0), pb.ErrType},
		{"type 16", enc(nil).varint(1, 1).varint(2, 16), pb.ErrType},
		{"type 255", enc(nil).varint(1, 1).varint(2, 255), pb.ErrType},
		{"type 257", enc(nil).varint(1, 1).varint(2, 257), pb.ErrType},
		{"type 2^40+1", enc(nil).varint(1, 1).varint(2, 1<<40+1), pb.ErrType},
		{"truncated tag", ok.raw(0x80), pb.ErrMalformed},
		{"truncated varint", ok.raw(0x20, 0x80), pb.ErrMalformed},
		{"truncated bytes", ok.raw(0x1a, 5, 'b', 'o'), pb.ErrMalformed},
		{"truncated length", ok.raw(0x1a), pb.ErrMalformed},
		{"varint overflow", ok.raw(0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), pb.ErrMalformed},
		{"field number 0", ok.raw(0x00, 0x01), pb.ErrMalformed},
		{"field number above 2^29-1", ok.raw(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3)...), pb.ErrMalformed},
		{"reserved wire type 6", ok.raw(0x56), pb.ErrMalformed},
		{"stray end group", ok.raw(protowire.AppendTag(nil, 20, protowire.EndGroupType)...), pb.ErrMalformed},
		{"unclosed group", ok.raw(protowire.AppendTag(nil, 20, protowire.StartGroupType)...), pb.ErrMalformed},
		{"groups nested too deep", ok.raw(bytes.Repeat(protowire.AppendTag(nil, 20, protowire.StartGroupType), protowire.DefaultRecursionLimit+2)...), pb.ErrMalformed},
		{"empty ID in the list", ok.bytes(6, "a").bytes(6, "").bytes(6, "b"), pb.ErrMalformed},
		{"too many IDs", many, pb.ErrTooLarge},
		{"long to", ok.bytes(3, long), pb.ErrTooLarge},
		{"long leader", ok.bytes(5, long), pb.ErrTooLarge},
		{"long ID in the list", ok.bytes(6, long), pb.ErrTooLarge},
		{"long election source", ok.bytes(7, long), pb.ErrTooLarge},
		{"above MaxSize", ok.bytes(100, strings.Repeat("z", pb.MaxSize)), pb.ErrTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := pb.Unmarshal(tt.in, "alice")
			if err == nil {
				t.Fatalf("accepted % x as %+v", tt.in, m)
			}
			wantErr(t, tt.name, err, tt.want)
		})
	}
}

func TestUnmarshalRejectsWrongWireTypes(t *testing.T) {
	fields := map[protowire.Number]protowire.Type{
		1: protowire.VarintType, 2: protowire.VarintType, 3: protowire.BytesType,
		4: protowire.VarintType, 5: protowire.BytesType, 6: protowire.BytesType,
		7: protowire.BytesType, 8: protowire.VarintType, 9: protowire.VarintType,
	}
	values := map[protowire.Type][]byte{
		protowire.VarintType:     {1},
		protowire.Fixed32Type:    {1, 0, 0, 0},
		protowire.Fixed64Type:    {1, 0, 0, 0, 0, 0, 0, 0},
		protowire.BytesType:      {1, 'x'},
		protowire.StartGroupType: nil, // closed below
	}
	for num, right := range fields {
		for wt, v := range values {
			if wt == right {
				continue
			}
			in := protowire.AppendTag([]byte(header(classic.MsgElection)), num, wt)
			in = append(in, v...)
			if wt == protowire.StartGroupType {
				in = protowire.AppendTag(in, num, protowire.EndGroupType)
			}
			_, err := pb.Unmarshal(in, "alice")
			wantErr(t, fmt.Sprintf("field %d with wire type %d", num, wt), err, pb.ErrMalformed)
		}
	}
}

func TestUnmarshalTruncatedAnywhere(t *testing.T) {
	// Every prefix of a valid encoding either fails or, cut at a field
	// boundary, decodes to a message with fewer fields; it never panics.
	b, err := pb.Marshal(full(classic.MsgReady))
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	boundaries := 0
	for n := range len(b) {
		if _, err := pb.Unmarshal(b[:n], "alice"); err == nil {
			boundaries++
		} else if !errors.Is(err, pb.ErrMalformed) && !errors.Is(err, pb.ErrVersion) && !errors.Is(err, pb.ErrType) {
			t.Fatalf("prefix of %d bytes: unexpected error %v", n, err)
		}
	}
	// Boundaries after type, to, term, leader, the 3 IDs, source, seq.
	if boundaries != 9 {
		t.Fatalf("%d prefixes decode, want the 9 that end at a field boundary", boundaries)
	}
}

func TestUnknownFieldsAreSkipped(t *testing.T) {
	m := full(classic.MsgEcho)
	b, err := pb.Marshal(m)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	unknown := enc(nil).varint(10, 99).bytes(11, "future")
	unknown = protowire.AppendTag(unknown, 12, protowire.Fixed32Type)
	unknown = protowire.AppendFixed32(unknown, 7)
	unknown = protowire.AppendTag(unknown, 13, protowire.Fixed64Type)
	unknown = protowire.AppendFixed64(unknown, 7)
	unknown = protowire.AppendTag(unknown, 14, protowire.StartGroupType)
	unknown = enc(unknown).varint(1, 5).bytes(3, "nested fields are not ours")
	unknown = protowire.AppendTag(unknown, 14, protowire.EndGroupType)
	for _, in := range [][]byte{
		append(slicesClone(unknown), b...),
		append(slicesClone(b), unknown...),
		append(append(slicesClone(b[:4]), unknown...), b[4:]...),
	} {
		got, err := pb.Unmarshal(in, "alice")
		if err != nil {
			t.Fatalf("Unmarshal with unknown fields: %v", err)
		}
		if want := withFrom(m, "alice"); !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

func TestRepeatedScalarLastWins(t *testing.T) {
	// As in every protobuf decoder: the last of a repeated non-list field
	// wins, list entries are concatenated.
	in := header(classic.MsgElection).varint(4, 1).bytes(5, "x").bytes(6, "a").varint(4, 2).bytes(5, "y").bytes(6, "b").varint(2, uint64(classic.MsgOK))
	got, err := pb.Unmarshal(in, "alice")
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	want := classic.Message{Type: classic.MsgOK, From: "alice", Term: 2, Leader: "y", IDs: []classic.ID{"a", "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestMarshalRejects(t *testing.T) {
	long := classic.ID(strings.Repeat("x", pb.MaxIDLen+1))
	maxLen := classic.ID(strings.Repeat("x", pb.MaxIDLen))
	with := func(f func(*classic.Message)) classic.Message {
		m := full(classic.MsgElection)
		f(&m)
		return m
	}
	for _, tt := range []struct {
		name string
		m    classic.Message
		want error
	}{
		{"type 0", with(func(m *classic.Message) { m.Type = 0 }), pb.ErrType},
		{"type 200", with(func(m *classic.Message) { m.Type = 200 }), pb.ErrType},
		{"too many IDs", with(func(m *classic.Message) { m.IDs = make([]classic.ID, pb.MaxIDs+1) }), pb.ErrTooLarge},
		{"empty ID in the list", with(func(m *classic.Message) { m.IDs = []classic.ID{"a", ""} }), pb.ErrMalformed},
		{"long to", with(func(m *classic.Message) { m.To = long }), pb.ErrTooLarge},
		{"long leader", with(func(m *classic.Message) { m.Leader = long }), pb.ErrTooLarge},
		{"long election source", with(func(m *classic.Message) { m.Election.Source = long }), pb.ErrTooLarge},
		{"long ID in the list", with(func(m *classic.Message) { m.IDs = []classic.ID{long} }), pb.ErrTooLarge},
		{"above MaxSize", with(func(m *classic.Message) {
			m.IDs = make([]classic.ID, pb.MaxIDs)
			for i := range m.IDs {
				m.IDs[i] = maxLen
			}
		}), pb.ErrTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := pb.Marshal(tt.m)
			if err == nil {
				t.Fatalf("Marshal accepted it (%d bytes)", len(b))
			}
			wantErr(t, "Marshal", err, tt.want)
			var w bytes.Buffer
			wantErr(t, "WriteMsg", pb.WriteMsg(&w, tt.m), tt.want)
			if w.Len() != 0 {
				t.Fatalf("WriteMsg wrote %d bytes of a message it refused", w.Len())
			}
		})
	}
}

// TestMaxSizeFitsARing checks the arithmetic of MaxSize's comment: a message
// with MaxIDs peer IDs of the longest kind (44 bytes) and every other field
// at its largest takes 188591 bytes.
func TestMaxSizeFitsARing(t *testing.T) {
	id := func(i int) classic.ID { return classic.ID(strings.Repeat("p", 40) + string(rune('A'+i%26)) + "xyz") }
	m := classic.Message{
		Type: classic.MsgElection, To: id(1), Leader: id(2), Term: math.MaxUint64,
		Election: classic.ElectionID{Source: id(3), Seq: math.MaxUint64}, Capacity: math.MaxUint64,
	}
	for i := range pb.MaxIDs {
		m.IDs = append(m.IDs, id(i))
	}
	if len(m.To) != 44 {
		t.Fatalf("test IDs are %d bytes, want 44", len(m.To))
	}
	b, err := pb.Marshal(m)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if len(b) != 188591 || len(b) > pb.MaxSize {
		t.Fatalf("%d bytes, want the 188591 MaxSize's comment computes (MaxSize %d)", len(b), pb.MaxSize)
	}
	got, err := pb.Unmarshal(b, "alice")
	if err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(got, withFrom(m, "alice")) {
		t.Fatal("round trip of the largest ring message differs")
	}
}
