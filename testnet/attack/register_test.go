package attack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// TestRegisterWire: the register protocol's payloads as overlay/register.go
// documents them, written out byte by byte: a request, and a response of
// each kind, parsed; and responses that must not parse.
func TestRegisterWire(t *testing.T) {
	if got, want := RegisterRequest(300, 2, []byte("rec")), []byte{0xac, 0x02, 0x02, 'r', 'e', 'c'}; !bytes.Equal(got, want) {
		t.Errorf("request %x, want %x", got, want)
	}
	sk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(sk)
	ck := dhtselect.KeyOf(id).Cluster(3)
	digest := binary.AppendUvarint(nil, 3)
	digest = append(digest, ck[:]...)
	digest = binary.AppendUvarint(digest, 1000)
	digest = append(binary.AppendUvarint(digest, 3), "dht"...)
	want := Digest{K: 3, ClusterKey: ck, N: 1000, Source: "dht"}
	idb := []byte(id)

	hint := append(append([]byte{byte(RegNotSuperpeer)}, byte(len(idb))), idb...)
	if rep, err := ParseRegisterReply(hint); err != nil || rep.Status != RegNotSuperpeer || rep.Hint != id {
		t.Errorf("hint: %+v, %v", rep, err)
	}
	if rep, err := ParseRegisterReply([]byte{byte(RegNotSuperpeer), 0}); err != nil || rep.Hint != "" {
		t.Errorf("no hint: %+v, %v", rep, err)
	}
	for _, s := range []RegStatus{RegWrongCluster, RegFull, RegTooSoon, RegBadRecord, RegNeedRecord, RegCrowded, RegNotMember} {
		if rep, err := ParseRegisterReply(append([]byte{byte(s)}, digest...)); err != nil || rep.Status != s || rep.Digest != want {
			t.Errorf("%v: %+v, %v", s, rep, err)
		}
	}
	unchanged := append(append([]byte{byte(RegUnchanged)}, digest...), 7, 9)
	if rep, err := ParseRegisterReply(unchanged); err != nil || rep.RosterID != 7 || rep.Version != 9 || rep.Digest != want {
		t.Errorf("unchanged: %+v, %v", rep, err)
	}
	delta := append(append([]byte{byte(RegDelta)}, digest...), 7, 12, 1)
	delta = append(append(append(delta, 1, 3), "abc"...), 1, byte(len(idb)))
	delta = append(delta, idb...)
	rep, err := ParseRegisterReply(delta)
	if err != nil || !rep.More || rep.Version != 12 || len(rep.Entries) != 1 || string(rep.Entries[0]) != "abc" || len(rep.Removed) != 1 || rep.Removed[0] != id {
		t.Errorf("delta: %+v, %v", rep, err)
	}
	for name, b := range map[string][]byte{
		"empty":          nil,
		"unknown status": append([]byte{12}, digest...),
		"trailing bytes": append(unchanged, 0),
		"more = 2":       append(append([]byte{byte(RegSnapshot)}, digest...), 7, 12, 2, 0, 0),
		"empty entry":    append(append([]byte{byte(RegSnapshot)}, digest...), 7, 12, 0, 1, 0, 0),
		"size 0":         append(append([]byte{byte(RegNeedRecord)}, digest[:33]...), 0, 0),
		"bits beyond k":  append(append([]byte{byte(RegNeedRecord), 0}, 0xff), append(make([]byte, 31), 1, 0)...),
		"truncated":      append([]byte{byte(RegUnchanged)}, digest[:20]...),
		"removed, no ID": append(append([]byte{byte(RegDelta)}, digest...), 7, 12, 0, 0, 1, 0),
	} {
		if _, err := ParseRegisterReply(b); !errors.Is(err, errReply) {
			t.Errorf("%s: %v, want errReply", name, err)
		}
	}
}
