package overlay

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	ma "github.com/multiformats/go-multiaddr"
)

// A private swarm: a pre-shared key (libp2p's private networks, pnet) that
// every connection must prove, and an optional allowlist of peer IDs.

// ErrPSK reports a pre-shared key file that cannot be used.
var ErrPSK = errors.New("overlay: pre-shared key")

// NewPSK returns a fresh random 32-byte pre-shared key.
func NewPSK() (pnet.PSK, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPSK, err)
	}
	return k, nil
}

// EncodePSK returns k in the swarm.key format that IPFS and every libp2p
// implementation read: "/key/swarm/psk/1.0.0/", "/base16/", then the key
// in hex, one per line.
func EncodePSK(k pnet.PSK) []byte {
	return fmt.Appendf(nil, "/key/swarm/psk/1.0.0/\n/base16/\n%s\n", hex.EncodeToString(k))
}

// SavePSK writes k to a new file at path in the swarm.key format, readable
// by its owner only (mode 0600); it never overwrites a file.
func SavePSK(path string, k pnet.PSK) error {
	if len(k) != 32 {
		return fmt.Errorf("%w: %d bytes, want 32", ErrPSK, len(k))
	}
	return writeKeyFile(path, EncodePSK(k), ErrPSK)
}

// LoadPSK reads a pre-shared key in the swarm.key format (base16, base64
// or binary). It refuses a missing file, one that others may read (mode
// beyond 0600: whoever reads it may join the swarm), and one that does not
// hold a 32-byte key, each with an error that says which.
func LoadPSK(path string) (pnet.PSK, error) {
	b, err := readKeyFile(path, "peer psk init", ErrPSK)
	if err != nil {
		return nil, err
	}
	k, err := pnet.DecodeV1PSK(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: key file %s is not a swarm key (/key/swarm/psk/1.0.0/, an encoding, 32 bytes): %w", ErrPSK, path, err)
	}
	return k, nil
}

// privateTransport reports whether a listen address uses a transport that
// can carry a private network: go-libp2p's QUIC, WebTransport and WebRTC
// cannot (they bring their own encryption, which the pre-shared key cannot
// wrap).
func privateTransport(a ma.Multiaddr) bool {
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_QUIC, ma.P_QUIC_V1, ma.P_WEBTRANSPORT, ma.P_WEBRTC, ma.P_WEBRTC_DIRECT:
			return false
		}
	}
	return true
}

// privateListen drops from the default listen addresses those whose
// transports cannot carry the pre-shared key (QUIC), when there is one:
// a private node listens on TCP by default. Addresses given by the user
// stay, for Validate to judge.
func (c *Config) privateListen() {
	if len(c.PSK) > 0 && slices.EqualFunc(c.ListenAddrs, DefaultConfig().ListenAddrs, ma.Multiaddr.Equal) {
		c.ListenAddrs = slices.DeleteFunc(slices.Clone(c.ListenAddrs), func(a ma.Multiaddr) bool { return !privateTransport(a) })
	}
}

// allowlist is a connection gater that lets through only the listed peers
// (and this node itself): a connection from anyone else is closed once its
// handshake names the peer, and no dial to anyone else starts.
type allowlist struct {
	peers []peer.ID
}

var _ connmgr.ConnectionGater = allowlist{}

func (a allowlist) allowed(p peer.ID) bool { return slices.Contains(a.peers, p) }

func (a allowlist) InterceptPeerDial(p peer.ID) bool                 { return a.allowed(p) }
func (a allowlist) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return a.allowed(p) }
func (a allowlist) InterceptAccept(network.ConnMultiaddrs) bool      { return true }
func (a allowlist) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return a.allowed(p)
}
func (a allowlist) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }

// banGate is the connection gater of a host the node builds: banned peers
// are refused before they cost the node anything more (finding 8 of issue
// 19: a banned client that redialled at once was let through a full
// security handshake, then disconnected, 90 times a second). A dial to a
// banned peer never starts; an inbound connection from one is refused as
// soon as the handshake names it (InterceptSecured); and since the
// handshake is the cost, an IP address that hosts a banned peer gets a
// penalty: for a while no inbound connection from it is accepted at all
// (InterceptAccept, before the handshake, at most one refusal per
// refusalPace), a while that doubles with each handshake the banned peer
// completes from it (from penaltyMin to penaltyMax; see guard.accept). Honest peers from the same address keep
// their connections and the node still dials them; only their new inbound
// connections wait out the penalty, loopback's included (a testnet's).
// The user's gater or allowlist (next), if any, vets what banGate lets
// through.
type banGate struct {
	g    *guard
	next connmgr.ConnectionGater
}

var _ connmgr.ConnectionGater = banGate{}

func (b banGate) InterceptPeerDial(p peer.ID) bool {
	return !b.g.Banned(p) && (b.next == nil || b.next.InterceptPeerDial(p))
}

func (b banGate) InterceptAddrDial(p peer.ID, a ma.Multiaddr) bool {
	return !b.g.Banned(p) && (b.next == nil || b.next.InterceptAddrDial(p, a))
}

// InterceptAccept refuses a connection from a penalised address, and
// takes refusalPace to do it: libp2p accepts connections one at a time,
// so a client that redials the moment it is refused is held to one
// attempt per refusalPace (its next connection waits in the kernel's
// queue meanwhile), and the refusals cost the node next to nothing. The
// other connections arriving meanwhile wait as long; so that many
// connections at once from penalised addresses cannot hold up the others
// for long, the refusals take their time for at most 90 % of each second
// (paceBurst of them), and the rest are refused at once.
func (b banGate) InterceptAccept(c network.ConnMultiaddrs) bool {
	if !b.g.accept(c.RemoteMultiaddr()) {
		if b.g.paced() {
			time.Sleep(refusalPace)
		}
		return false
	}
	return b.next == nil || b.next.InterceptAccept(c)
}

// refusalPace is the time a refusal before the handshake takes, while
// the pace allows (paceBurst a second).
const (
	refusalPace = 100 * time.Millisecond
	paceBurst   = 9
)

// InterceptSecured asks the user's gater first: the handshake has been
// made, and a gater that counts handshakes sees every one.
func (b banGate) InterceptSecured(d network.Direction, p peer.ID, c network.ConnMultiaddrs) bool {
	ok := b.next == nil || b.next.InterceptSecured(d, p, c)
	return b.g.secured(d, p, c.RemoteMultiaddr()) && ok
}

func (b banGate) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	if b.next == nil {
		return true, 0
	}
	return b.next.InterceptUpgraded(c)
}
