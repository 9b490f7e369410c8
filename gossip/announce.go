package gossip

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

// AnnouncementVersion is the version of the membership payload; payloads of
// other versions are rejected. Version 2 added the beacon of the defence
// against ID grinding (Announcement.Beacon): a node of version 1 names
// other superpeers, so the two do not share a topic.
const AnnouncementVersion = 2

// MaxAnnouncementSize bounds an encoded announcement, in bytes.
const MaxAnnouncementSize = 8 << 10

// maxAddrs bounds the addresses one announcement may carry.
const maxAddrs = 32

// ErrBadAnnouncement reports a malformed or inconsistent announcement.
var ErrBadAnnouncement = errors.New("gossip: bad announcement")

// Announcement is what a peer says of itself on the membership topic.
type Announcement struct {
	// ID is the announcing peer. It is not encoded: receivers take it from
	// the message's signed origin.
	ID         peer.ID
	Addrs      []ma.Multiaddr
	Superpeer  bool
	K          int
	ClusterKey dhtselect.Key
	// Seq orders one peer's announcements; a receiver ignores any that is
	// not newer than the last it accepted from that peer.
	Seq uint64
	// Leaving is a goodbye: the peer is shutting down, and receivers drop
	// it from their views at once rather than after the TTL.
	Leaving bool
	// Private says the peer is not reachable from outside (behind a NAT,
	// by AutoNAT's verdict or its configuration): it may not be a
	// superpeer, and the others rank it last in elections.
	Private bool
	// Flapping says the peer lost all its connections, or restarted, twice
	// within a minute, and ranks itself last in its cluster's elections
	// (host quality): the others then do too. Trusted as said, since it
	// can only lower the sender's own rank.
	Flapping bool
	// Beacon is what the peer says for the defence against ID grinding
	// (dhtselect/epoch.go): the epoch it started in, its hash chain's
	// value for the next epoch, and the salt it uses for its cluster.
	// Beacon.Cluster is not encoded: it is the peer's key masked to
	// Beacon.K, as ClusterKey is.
	Beacon dhtselect.Beacon
	// Election names the cluster election the peer runs: the algorithm
	// ("bully", ...), with "+quorum" when it runs with term and majority,
	// or "none"; empty from a peer that does not say (an older build).
	// Peers that run another election than a node's own are no electors
	// of its cluster (node.Member.Election).
	Election string
}

// maxElectionTag bounds Announcement.Election.
const maxElectionTag = 32

type wireAnnouncement struct {
	V         int      `json:"v"`
	Seq       uint64   `json:"seq"`
	Addrs     []string `json:"addrs"`
	Superpeer bool     `json:"superpeer"`
	K         int      `json:"k"`
	Cluster   string   `json:"cluster"`
	Leaving   bool     `json:"leaving,omitempty"`
	Private   bool     `json:"private,omitempty"`
	Flapping  bool     `json:"flapping,omitempty"`
	Since     uint64   `json:"since,omitempty"`
	Next      uint64   `json:"next,omitempty"`
	Reveal    string   `json:"reveal,omitempty"`
	SaltEpoch uint64   `json:"salt_epoch,omitempty"`
	SaltK     int      `json:"salt_k,omitempty"`
	Salt      string   `json:"salt,omitempty"`
	Election  string   `json:"election,omitempty"`
}

// Encode serialises a for the wire.
func (a Announcement) Encode() ([]byte, error) {
	w := wireAnnouncement{V: AnnouncementVersion, Seq: a.Seq, Superpeer: a.Superpeer, K: a.K, Cluster: a.ClusterKey.String(), Leaving: a.Leaving, Private: a.Private,
		Flapping: a.Flapping, Election: a.Election}
	if b := a.Beacon; b != (dhtselect.Beacon{}) {
		w.Since, w.Next, w.SaltEpoch, w.SaltK = b.Since, b.Next, b.SaltEpoch, b.K
		if b.Reveal != (dhtselect.Salt{}) {
			w.Reveal = b.Reveal.String()
		}
		if b.Salt != (dhtselect.Salt{}) {
			w.Salt = b.Salt.String()
		}
	}
	for _, addr := range a.Addrs[:min(len(a.Addrs), maxAddrs)] {
		w.Addrs = append(w.Addrs, addr.String())
	}
	return json.Marshal(w)
}

// DecodeAnnouncement parses and checks an announcement sent by from: the
// version, the addresses, k, and that the cluster key is from's key masked
// to k bits (a peer cannot claim another peer's cluster).
func DecodeAnnouncement(from peer.ID, data []byte) (Announcement, error) {
	var w wireAnnouncement
	if len(data) > MaxAnnouncementSize {
		return Announcement{}, fmt.Errorf("%w: %d bytes, limit %d", ErrBadAnnouncement, len(data), MaxAnnouncementSize)
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return Announcement{}, fmt.Errorf("%w: %v", ErrBadAnnouncement, err)
	}
	if w.V != AnnouncementVersion {
		return Announcement{}, fmt.Errorf("%w: version %d, want %d", ErrBadAnnouncement, w.V, AnnouncementVersion)
	}
	if w.K < 0 || w.K > dhtselect.MaxK {
		return Announcement{}, fmt.Errorf("%w: k = %d out of [0, %d]", ErrBadAnnouncement, w.K, dhtselect.MaxK)
	}
	if len(w.Addrs) > maxAddrs {
		return Announcement{}, fmt.Errorf("%w: %d addresses, limit %d", ErrBadAnnouncement, len(w.Addrs), maxAddrs)
	}
	ck, err := dhtselect.ParseKey(w.Cluster)
	if err != nil {
		return Announcement{}, fmt.Errorf("%w: %v", ErrBadAnnouncement, err)
	}
	if want := dhtselect.KeyOf(from).Cluster(w.K); ck != want {
		return Announcement{}, fmt.Errorf("%w: cluster key %s does not belong to %s at k = %d", ErrBadAnnouncement, ck, from, w.K)
	}
	if !validElectionTag(w.Election) {
		return Announcement{}, fmt.Errorf("%w: election %q: want at most %d of a-z, 0-9, '-' and '+'", ErrBadAnnouncement, w.Election, maxElectionTag)
	}
	a := Announcement{ID: from, Seq: w.Seq, Superpeer: w.Superpeer, K: w.K, ClusterKey: ck, Leaving: w.Leaving, Private: w.Private,
		Flapping: w.Flapping, Election: w.Election}
	if a.Beacon, err = decodeBeacon(from, w); err != nil {
		return Announcement{}, err
	}
	for _, s := range w.Addrs {
		// An address this side cannot parse is skipped, not the whole
		// announcement: other implementations list transports that
		// go-multiaddr does not know (rust-libp2p's /x-parity-ws,
		// js-libp2p's /p2p-websocket-star), and refusing their
		// announcements struck and then banned them (an
		// interoperability audit). kad-dht skips them too.
		if addr, err := ma.NewMultiaddr(s); err == nil {
			a.Addrs = append(a.Addrs, addr)
		}
	}
	return a, nil
}

// validElectionTag reports whether s may be an Announcement.Election.
func validElectionTag(s string) bool {
	return len(s) <= maxElectionTag && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '+')
	}) < 0
}

// decodeBeacon checks and returns the beacon of w, sent by from: the
// salt's k in range, the values 32 bytes of hex. Its cluster is from's key
// masked to that k. The epochs are the node machine's to judge.
func decodeBeacon(from peer.ID, w wireAnnouncement) (dhtselect.Beacon, error) {
	b := dhtselect.Beacon{Since: w.Since, Next: w.Next, SaltEpoch: w.SaltEpoch, K: w.SaltK}
	if w.SaltK < 0 || w.SaltK > dhtselect.MaxK {
		return b, fmt.Errorf("%w: salt_k = %d out of [0, %d]", ErrBadAnnouncement, w.SaltK, dhtselect.MaxK)
	}
	for _, f := range []struct {
		s   string
		out *dhtselect.Salt
	}{{w.Reveal, &b.Reveal}, {w.Salt, &b.Salt}} {
		if f.s == "" {
			continue
		}
		k, err := dhtselect.ParseKey(f.s)
		if err != nil {
			return b, fmt.Errorf("%w: beacon: %v", ErrBadAnnouncement, err)
		}
		*f.out = dhtselect.Salt(k)
	}
	if b.Salt != (dhtselect.Salt{}) {
		b.Cluster = dhtselect.KeyOf(from).Cluster(b.K)
	}
	return b, nil
}
