package gossip

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	lprecord "github.com/libp2p/go-libp2p/core/record"
)

// Sealed announcements: a peer's Announcement signed by the peer's own key
// in a libp2p record envelope (core/record), so that another peer (its
// superpeer, which keeps its cluster's roster) can relay it and no one can
// forge or alter it on the way. The envelope carries the signer's public
// key, so any libp2p identity (Ed25519, RSA, ...) works; the announcement's
// peer is the key's, never a field of the payload, and the payload is the
// membership topic's encoding (Encode, DecodeAnnouncement), checked as the
// topic's validator checks it.

// AnnouncementDomain is the signature domain of sealed announcements: a
// signature made for them verifies for nothing else, and the reverse.
const AnnouncementDomain = "superpeer-announcement"

// announcementCodec is the envelope's payload type of a sealed
// announcement.
var announcementCodec = []byte("/superpeer/announcement")

// MaxSealedSize bounds a sealed announcement, in bytes: the announcement
// (MaxAnnouncementSize) and the envelope's public key, signature and
// framing, room enough for an RSA key of 8192 bits (about 1 KiB of key and
// 1 KiB of signature). An Ed25519 envelope adds about 110 bytes.
const MaxSealedSize = MaxAnnouncementSize + 4<<10

// sealedRecord is the record type of sealed announcements: its payload is
// the encoded announcement, decoded only once the signer is known (the
// decoder checks the cluster key against the signer's ID).
type sealedRecord struct{ payload []byte }

func init() { lprecord.RegisterType(&sealedRecord{}) }

func (*sealedRecord) Domain() string                   { return AnnouncementDomain }
func (*sealedRecord) Codec() []byte                    { return announcementCodec }
func (r *sealedRecord) MarshalRecord() ([]byte, error) { return r.payload, nil }

func (r *sealedRecord) UnmarshalRecord(b []byte) error {
	if len(b) > MaxAnnouncementSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrBadAnnouncement, len(b), MaxAnnouncementSize)
	}
	r.payload = slices.Clone(b)
	return nil
}

// SealAnnouncement signs a with key, whose peer a.ID must be, and returns
// the envelope's bytes. It refuses an announcement that OpenAnnouncement
// would reject (a cluster key that is not a.ID's, k out of range, ...).
func SealAnnouncement(a Announcement, key crypto.PrivKey) ([]byte, error) {
	if key == nil {
		return nil, fmt.Errorf("%w: no key to seal with", ErrBadAnnouncement)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: key: %v", ErrBadAnnouncement, err)
	}
	if a.ID != id {
		return nil, fmt.Errorf("%w: announcement of %s sealed with the key of %s", ErrBadAnnouncement, a.ID, id)
	}
	payload, err := a.Encode()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadAnnouncement, err)
	}
	if _, err := DecodeAnnouncement(id, payload); err != nil {
		return nil, err
	}
	env, err := lprecord.Seal(&sealedRecord{payload: payload}, key)
	if err != nil {
		return nil, fmt.Errorf("%w: seal: %v", ErrBadAnnouncement, err)
	}
	b, err := env.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%w: seal: %v", ErrBadAnnouncement, err)
	}
	if len(b) > MaxSealedSize {
		return nil, fmt.Errorf("%w: sealed, %d bytes, limit %d", ErrBadAnnouncement, len(b), MaxSealedSize)
	}
	return b, nil
}

// OpenAnnouncement checks a sealed announcement and returns it, its ID the
// signer's: the size (at most MaxSealedSize), the envelope's signature in
// AnnouncementDomain, its payload type, and the payload as
// DecodeAnnouncement checks it for that signer. Every failure wraps
// ErrBadAnnouncement.
func OpenAnnouncement(b []byte) (Announcement, error) {
	if len(b) > MaxSealedSize {
		return Announcement{}, fmt.Errorf("%w: sealed, %d bytes, limit %d", ErrBadAnnouncement, len(b), MaxSealedSize)
	}
	var rec sealedRecord
	env, err := lprecord.ConsumeTypedEnvelope(b, &rec)
	if err != nil {
		return Announcement{}, fmt.Errorf("%w: envelope: %v", ErrBadAnnouncement, err)
	}
	if !bytes.Equal(env.PayloadType, announcementCodec) {
		return Announcement{}, fmt.Errorf("%w: envelope of payload type %q, want %q", ErrBadAnnouncement, env.PayloadType, announcementCodec)
	}
	id, err := peer.IDFromPublicKey(env.PublicKey)
	if err != nil {
		return Announcement{}, fmt.Errorf("%w: envelope key: %v", ErrBadAnnouncement, err)
	}
	return DecodeAnnouncement(id, rec.payload)
}
