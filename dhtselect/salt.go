package dhtselect

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Salt is a network-wide value, fixed for one epoch, mixed into every key of
// the superpeer selection (SaltedKey) so that peer IDs cannot be ground in
// advance to land next to a cluster key.
//
// The attack it answers: a peer that wants to serve a cluster generates
// key pairs until the SHA-256 of its ID falls just after that cluster's key,
// where it is closer than every honest member. With keys fixed by the ID
// alone, a liar needs some G tries to beat a network of about G peers, and
// the IDs it grinds stay good for ever. With a salt that changes every
// epoch and cannot be predicted before the epoch starts (EpochSalt with
// fresh randomness), an ID ground before the epoch is placed at random; the
// defence holds only if an ID first seen during an epoch may not become a
// superpeer before the next one (whose salt it could not know), otherwise a
// liar grinds again within the epoch.
//
// SaltedKey and AssignSalted salt every peer's key: the simulator's
// defence (bench's DHTAttack). The live DHT routes on the unsalted keys,
// so the live node salts only the target inside each cluster (epoch.go).
type Salt [32]byte

// String returns the salt in hex.
func (s Salt) String() string { return hex.EncodeToString(s[:]) }

// EpochSalt derives the salt of an epoch: SHA-256 over a domain tag, the
// network's name (its private DHT prefix, say), the epoch number and the
// epoch's randomness, each length-prefixed so that no two inputs collide.
// The randomness must be unknown before the epoch starts (a public
// randomness beacon's round, or a value the previous epoch's superpeers
// committed to and revealed); with nil randomness the salt of every future
// epoch is known in advance and salting stops no one who grinds for a later
// epoch.
func EpochSalt(network []byte, epoch uint64, randomness []byte) Salt {
	h := sha256.New()
	field := func(b []byte) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	field([]byte("superpeer/dhtselect/salt/v1"))
	field(network)
	h.Write(binary.BigEndian.AppendUint64(nil, epoch))
	field(randomness)
	var s Salt
	h.Sum(s[:0])
	return s
}

// SaltedKey returns the selection key of a peer under salt s: SHA-256 of
// the salt followed by the peer ID bytes. It is not the peer's Kademlia key
// (KeyOf, which the DHT's routing keeps): it places the peer for superpeer
// selection only, and moves every peer to a fresh random point when the
// salt changes.
func SaltedKey(id peer.ID, s Salt) Key {
	h := sha256.New()
	h.Write(s[:])
	h.Write([]byte(id))
	var k Key
	h.Sum(k[:0])
	return k
}

// AssignSalted is Assign with every key salted: each peer's key is
// SaltedKey(id, s), its cluster key that key masked to k bits, and its
// superpeer the peer whose salted key is closest to the cluster key. The
// Key and ClusterKey of the result are the salted ones. (Clusters sorts
// members by their unsalted keys, so with a salted assignment its
// superpeer need not come first.)
func AssignSalted(ids []peer.ID, k int, s Salt) []Assignment {
	keys := make([]Key, len(ids))
	for i, id := range ids {
		keys[i] = SaltedKey(id, s)
	}
	return assign(ids, keys, k)
}
