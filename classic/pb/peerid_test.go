package pb_test

import (
	"math/rand/v2"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic/pb"
)

// seededReader is a deterministic io.Reader for key generation.
type seededReader struct{ r *rand.ChaCha8 }

func (s seededReader) Read(b []byte) (int, error) { return s.r.Read(b) }

// TestPeerIDLengths backs MaxIDLen's and MaxSize's comments: a libp2p peer
// ID of every key type is at most 44 bytes.
func TestPeerIDLengths(t *testing.T) {
	for _, tt := range []struct {
		name string
		typ  int
		bits int
		want int
	}{
		{"Ed25519", crypto.Ed25519, 0, 38},
		{"secp256k1", crypto.Secp256k1, 0, 39},
		{"ECDSA", crypto.ECDSA, 0, 34},
		{"RSA-2048", crypto.RSA, 2048, 34},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seed [32]byte
			_, pub, err := crypto.GenerateKeyPairWithReader(tt.typ, tt.bits, seededReader{rand.NewChaCha8(seed)})
			if err != nil {
				t.Fatalf("key: %v", err)
			}
			id, err := peer.IDFromPublicKey(pub)
			if err != nil {
				t.Fatalf("peer ID: %v", err)
			}
			if len(id) != tt.want || len(id) > 44 || len(id) > pb.MaxIDLen {
				t.Fatalf("%s peer ID is %d bytes, want %d (at most 44, MaxIDLen %d)", tt.name, len(id), tt.want, pb.MaxIDLen)
			}
		})
	}
}
