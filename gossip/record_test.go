package gossip

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	lprecord "github.com/libp2p/go-libp2p/core/record"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

func sealKey(t testing.TB, typ int) (crypto.PrivKey, peer.ID) {
	t.Helper()
	bits := -1
	if typ == crypto.RSA {
		bits = 2048
	}
	k, _, err := crypto.GenerateKeyPairWithReader(typ, bits, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

func sealable(id peer.ID) Announcement {
	return Announcement{ID: id, Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/4001")}, K: 3,
		ClusterKey: dhtselect.KeyOf(id).Cluster(3), Seq: 7, Private: true,
		Beacon: dhtselect.Beacon{Since: 4, Next: 5, K: 3, Salt: dhtselect.Salt{1}}}
}

// A sealed announcement opens to the same announcement, its ID the
// signer's, with Ed25519 and RSA identities alike.
func TestSealOpen(t *testing.T) {
	for _, typ := range []int{crypto.Ed25519, crypto.RSA} {
		key, id := sealKey(t, typ)
		a := sealable(id)
		b, err := SealAnnouncement(a, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := OpenAnnouncement(b)
		if err != nil {
			t.Fatalf("%s: %v", keyName(typ), err)
		}
		a.Beacon.Cluster = dhtselect.KeyOf(id).Cluster(3) // derived, not sent
		if got.ID != id || !sameSaying(got, a) || got.Seq != a.Seq {
			t.Errorf("%s: opened %+v, sealed %+v", keyName(typ), got, a)
		}
		t.Logf("%s: a sealed announcement of one address: %d bytes", keyName(typ), len(b))
	}
}

// What must not open: another peer's announcement sealed with one's key
// (refused at Seal; by hand, at Open), an altered payload, an envelope of
// another domain or payload type, a cluster key that is not the signer's,
// and anything over MaxSealedSize.
func TestOpenRefuses(t *testing.T) {
	key, id := sealKey(t, crypto.Ed25519)
	// Another peer outside our cluster at k = 3: the payload names no ID,
	// so one whose cluster key is ours would be a valid announcement of
	// ours (the test failed in about 1 run of 8 with any other key).
	_, other := sealKey(t, crypto.Ed25519)
	for dhtselect.KeyOf(other).Cluster(3) == dhtselect.KeyOf(id).Cluster(3) {
		_, other = sealKey(t, crypto.Ed25519)
	}
	if _, err := SealAnnouncement(sealable(other), key); !errors.Is(err, ErrBadAnnouncement) {
		t.Errorf("sealing another peer's announcement: %v, want ErrBadAnnouncement", err)
	}
	// Another peer's announcement, sealed by hand with our key: its
	// cluster key is not ours, so the signer's check refuses it.
	payload, _ := sealable(other).Encode()
	forged := sealRaw(t, &sealedRecord{payload: payload}, key)
	good, err := SealAnnouncement(sealable(id), key)
	if err != nil {
		t.Fatal(err)
	}
	altered := append([]byte(nil), good...)
	i := len(altered) / 2 // inside the payload, before the signature
	altered[i] ^= 1
	pr := peer.PeerRecordFromAddrInfo(peer.AddrInfo{ID: id, Addrs: []ma.Multiaddr{ma.StringCast("/ip4/1.2.3.4/tcp/1")}})
	for name, b := range map[string][]byte{
		"another peer's":    forged,
		"altered":           altered,
		"peer record":       sealRaw(t, pr, key),
		"other domain":      sealRaw(t, &otherDomain{sealedRecord{payload: payload}}, key),
		"oversized":         make([]byte, MaxSealedSize+1),
		"empty":             nil,
		"truncated":         good[:len(good)-1],
		"oversized payload": sealRaw(t, &sealedRecord{payload: make([]byte, MaxAnnouncementSize+1)}, key),
	} {
		if a, err := OpenAnnouncement(b); !errors.Is(err, ErrBadAnnouncement) {
			t.Errorf("%s: opened %+v, %v; want ErrBadAnnouncement", name, a, err)
		}
	}
}

// otherDomain is a record with the sealed announcement's payload type
// but another signature domain.
type otherDomain struct{ sealedRecord }

func (*otherDomain) Domain() string { return "another-domain" }

func sealRaw(t testing.TB, r lprecord.Record, key crypto.PrivKey) []byte {
	t.Helper()
	env, err := lprecord.Seal(r, key)
	if err != nil {
		t.Fatal(err)
	}
	b, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Random bytes never panic OpenAnnouncement, and what it opens is within
// the bounds and encodes to what decodes the same for its signer.
func FuzzOpenAnnouncement(f *testing.F) {
	key, id := sealKey(f, crypto.Ed25519)
	good, err := SealAnnouncement(sealable(id), key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := OpenAnnouncement(b)
		if err != nil {
			if !errors.Is(err, ErrBadAnnouncement) {
				t.Fatalf("error %v does not wrap ErrBadAnnouncement", err)
			}
			return
		}
		if len(b) > MaxSealedSize {
			t.Fatalf("opened %d bytes, limit %d", len(b), MaxSealedSize)
		}
		data, err := a.Encode()
		if err != nil {
			t.Fatalf("opened %+v, which does not encode: %v", a, err)
		}
		again, err := DecodeAnnouncement(a.ID, data)
		if err != nil || !sameSaying(a, again) || again.Seq != a.Seq {
			t.Fatalf("opened %+v; encoded and decoded again: %+v, %v", a, again, err)
		}
	})
}

func keyName(typ int) string {
	if typ == crypto.RSA {
		return "RSA"
	}
	return "Ed25519"
}
