package pb

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/superpeer/superpeer/classic"
)

// protoWireType maps the field types election.proto uses to wire types.
var protoWireType = map[string]protowire.Type{
	"uint32": protowire.VarintType, "uint64": protowire.VarintType,
	"MsgType": protowire.VarintType, "bytes": protowire.BytesType,
}

// protoBlock returns the body of the named enum or message of election.proto.
func protoBlock(t *testing.T, src, kind, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)\n` + kind + ` ` + name + ` \{(.*?)\n\}`).FindStringSubmatch(src)
	if m == nil {
		t.Fatalf("election.proto has no %s %s", kind, name)
	}
	return m[1]
}

// TestProtoFileMatchesCode checks election.proto against the code: every
// field's number and wire type, the list field, the enum values against
// classic.MsgType's names, and the limits quoted in its comments.
func TestProtoFileMatchesCode(t *testing.T) {
	b, err := os.ReadFile("election.proto")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)

	fieldRE := regexp.MustCompile(`(?m)^\s*(repeated\s+)?(\w+)\s+(\w+)\s*=\s*(\d+);`)
	seen := map[protowire.Number]bool{}
	for _, f := range fieldRE.FindAllStringSubmatch(protoBlock(t, src, "message", "ElectionMessage"), -1) {
		repeated, typ, name := f[1] != "", f[2], f[3]
		n, _ := strconv.Atoi(f[4])
		num := protowire.Number(n)
		if fieldNames[num] != name {
			t.Errorf("election.proto: field %s = %d, but the code calls field %d %q", name, num, num, fieldNames[num])
		}
		if wt, ok := protoWireType[typ]; !ok || wt != fieldWireType[num] {
			t.Errorf("election.proto: field %s has type %s, but the code decodes wire type %d", name, typ, fieldWireType[num])
		}
		if repeated != (num == fieldIDs) {
			t.Errorf("election.proto: field %s repeated=%v, the code disagrees", name, repeated)
		}
		seen[num] = true
	}
	for num, name := range fieldNames {
		if !seen[num] {
			t.Errorf("the code knows field %d (%s), election.proto does not", num, name)
		}
	}

	enumRE := regexp.MustCompile(`(?m)^\s*MSG_TYPE_(\w+)\s*=\s*(\d+);`)
	values := map[classic.MsgType]string{}
	for _, e := range enumRE.FindAllStringSubmatch(protoBlock(t, src, "enum", "MsgType"), -1) {
		n, _ := strconv.Atoi(e[2])
		values[classic.MsgType(n)] = e[1]
	}
	if values[0] != "UNSPECIFIED" {
		t.Errorf("election.proto: MsgType 0 is %q, want UNSPECIFIED", values[0])
	}
	for n := range math.MaxUint8 + 1 {
		typ := classic.MsgType(n)
		if n == 0 {
			continue
		}
		want := typ.String()
		if want == "UNKNOWN" {
			want = ""
		}
		if values[typ] != want {
			t.Errorf("MsgType %d: election.proto says %q, classic says %q", n, values[typ], want)
		}
	}

	for _, limit := range []string{
		fmt.Sprintf("at most %d bytes (MaxSize)", MaxSize),
		fmt.Sprintf("at most %d entries (MaxIDs)", MaxIDs),
		fmt.Sprintf("at most %d bytes (MaxIDLen)", MaxIDLen),
		fmt.Sprintf("above MaxSize (%d bytes)", MaxSize),
		fmt.Sprintf("at most %d entries, none of them empty", MaxIDs),
	} {
		if !strings.Contains(strings.Join(strings.Fields(strings.ReplaceAll(src, "//", "")), " "), limit) {
			t.Errorf("election.proto does not say %q", limit)
		}
	}
}

// referenceDescriptor is ElectionMessage of election.proto as a descriptor,
// for the reference protobuf implementation.
func referenceDescriptor(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	field := func(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, repeated bool) *descriptorpb.FieldDescriptorProto {
		label := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
		if repeated {
			label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
		}
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ.Enum(), Label: label.Enum(), JsonName: proto.String(name)}
		if typ == descriptorpb.FieldDescriptorProto_TYPE_ENUM {
			f.TypeName = proto.String(".superpeer.classic.MsgType")
		}
		return f
	}
	const (
		u32  = descriptorpb.FieldDescriptorProto_TYPE_UINT32
		u64  = descriptorpb.FieldDescriptorProto_TYPE_UINT64
		byt  = descriptorpb.FieldDescriptorProto_TYPE_BYTES
		enum = descriptorpb.FieldDescriptorProto_TYPE_ENUM
	)
	var values []*descriptorpb.EnumValueDescriptorProto
	for n := range int32(math.MaxUint8 + 1) {
		name := classic.MsgType(n).String()
		if n == 0 {
			name = "UNSPECIFIED"
		} else if name == "UNKNOWN" {
			continue
		}
		values = append(values, &descriptorpb.EnumValueDescriptorProto{Name: proto.String("MSG_TYPE_" + name), Number: proto.Int32(n)})
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:     proto.String("election.proto"),
		Package:  proto.String("superpeer.classic"),
		Syntax:   proto.String("proto3"),
		EnumType: []*descriptorpb.EnumDescriptorProto{{Name: proto.String("MsgType"), Value: values}},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("ElectionMessage"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("version", 1, u32, false), field("type", 2, enum, false),
				field("to", 3, byt, false), field("term", 4, u64, false),
				field("leader", 5, byt, false), field("ids", 6, byt, true),
				field("election_source", 7, byt, false), field("election_seq", 8, u64, false),
				field("capacity", 9, u64, false),
			},
		}},
	}
	file, err := protodesc.NewFile(fd, nil)
	if err != nil {
		t.Fatalf("descriptor: %v", err)
	}
	return file.Messages().ByName("ElectionMessage")
}

// TestReferenceImplementationAgrees encodes with this package and decodes
// with google.golang.org/protobuf (and back), so that a peer built with
// protoc from election.proto, in any language, speaks the same format.
func TestReferenceImplementationAgrees(t *testing.T) {
	md := referenceDescriptor(t)
	fd := md.Fields()
	set := func(msg *dynamicpb.Message, name string, v protoreflect.Value) {
		msg.Set(fd.ByName(protoreflect.Name(name)), v)
	}
	for n := range classic.MsgType(math.MaxUint8) {
		if n.String() == "UNKNOWN" {
			continue
		}
		m := classic.Message{
			Type: n, To: "bob", Term: 1<<40 + 3, Leader: "carol\xff", IDs: []classic.ID{"a", "b"},
			Election: classic.ElectionID{Source: "dave", Seq: 9}, Capacity: uint64(n) * 1000,
		}

		// Ours -> reference.
		b, err := Marshal(m)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		ref := dynamicpb.NewMessage(md)
		if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, ref); err != nil {
			t.Fatalf("%s: the reference decoder rejects our encoding: %v", n, err)
		}
		if len(ref.GetUnknown()) != 0 {
			t.Fatalf("%s: the reference decoder found unknown fields % x", n, ref.GetUnknown())
		}
		get := func(name string) protoreflect.Value { return ref.Get(fd.ByName(protoreflect.Name(name))) }
		ids := get("ids").List()
		if get("version").Uint() != Version || classic.MsgType(get("type").Enum()) != n ||
			string(get("to").Bytes()) != "bob" || get("term").Uint() != m.Term ||
			string(get("leader").Bytes()) != string(m.Leader) || ids.Len() != 2 ||
			string(ids.Get(0).Bytes()) != "a" || string(ids.Get(1).Bytes()) != "b" ||
			string(get("election_source").Bytes()) != "dave" || get("election_seq").Uint() != 9 ||
			get("capacity").Uint() != m.Capacity {
			t.Fatalf("%s: the reference decoder reads %v from our %+v", n, ref, m)
		}

		// Reference -> ours, and the same bytes.
		ref = dynamicpb.NewMessage(md)
		set(ref, "version", protoreflect.ValueOfUint32(Version))
		set(ref, "type", protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)))
		set(ref, "to", protoreflect.ValueOfBytes([]byte("bob")))
		set(ref, "term", protoreflect.ValueOfUint64(m.Term))
		set(ref, "leader", protoreflect.ValueOfBytes([]byte(m.Leader)))
		list := ref.Mutable(fd.ByName("ids")).List()
		list.Append(protoreflect.ValueOfBytes([]byte("a")))
		list.Append(protoreflect.ValueOfBytes([]byte("b")))
		set(ref, "election_source", protoreflect.ValueOfBytes([]byte("dave")))
		set(ref, "election_seq", protoreflect.ValueOfUint64(9))
		set(ref, "capacity", protoreflect.ValueOfUint64(m.Capacity))
		rb, err := proto.MarshalOptions{Deterministic: true}.Marshal(ref)
		if err != nil {
			t.Fatalf("reference Marshal: %v", err)
		}
		got, err := Unmarshal(rb, "alice")
		if err != nil {
			t.Fatalf("%s: we reject the reference encoding: %v", n, err)
		}
		m.From = "alice"
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: from the reference encoding we read %+v, want %+v", n, got, m)
		}
		if string(rb) != string(b) {
			t.Fatalf("%s: encodings differ\n ours % x\n  ref % x", n, b, rb)
		}
	}
}
