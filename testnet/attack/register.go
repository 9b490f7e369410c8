package attack

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// The register protocol of the cluster-scoped membership (overlay's
// register.go), written here by hand as Frame does: with the DHT strategy
// a member is in its cluster's views once its superpeer's registry holds
// its record, not by announcing itself on a topic.
const (
	FrameRegister = 7 // register request: roster ID, version, sealed announcement
	FrameRoster   = 8 // register response: status, then the hint or the digest

	// RegNotSuperpeer is the answer of a node that serves no cluster; the
	// superpeer it follows comes with it. Answers below it (1 unchanged,
	// 2 delta, 3 snapshot) take the registration.
	RegNotSuperpeer = 4
)

// RegisterProtocol is the register protocol of the overlay on a network.
func RegisterProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/register/1.0.0")
}

// RegisterAnswer is what Register read of an answer: its status, and
// for RegNotSuperpeer the superpeer the node follows (empty: none), else
// the superpeer's k from the digest.
type RegisterAnswer struct {
	Status byte
	Hint   peer.ID
	K      int
}

// Accepted reports whether the registration was taken.
func (a RegisterAnswer) Accepted() bool { return a.Status >= 1 && a.Status < RegNotSuperpeer }

// Register sends p one register request from h, holding no roster, with
// the sealed announcement rec (gossip.SealAnnouncement with h's key), and
// reads the answer's status and its hint or k.
func Register(ctx context.Context, h host.Host, network string, p peer.ID, rec []byte) (RegisterAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := h.NewStream(ctx, p, RegisterProtocol(network))
	if err != nil {
		return RegisterAnswer{}, err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	payload := append(binary.AppendUvarint(binary.AppendUvarint(nil, 0), 0), rec...)
	if _, err := s.Write(Frame(WireVersion, FrameRegister, payload)); err != nil {
		return RegisterAnswer{}, err
	}
	r := bufio.NewReader(s)
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return RegisterAnswer{}, err
	}
	if n < 3 || n > 1<<16 {
		return RegisterAnswer{}, fmt.Errorf("attack: register answer of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return RegisterAnswer{}, err
	}
	if b[0] != WireVersion || b[1] != FrameRoster {
		return RegisterAnswer{}, fmt.Errorf("attack: register answer of version %d, type %d", b[0], b[1])
	}
	a := RegisterAnswer{Status: b[2]}
	rest := b[3:]
	v, l := binary.Uvarint(rest)
	if l <= 0 {
		return a, fmt.Errorf("attack: register answer %d: bad uvarint", a.Status)
	}
	rest = rest[l:]
	if a.Status == RegNotSuperpeer {
		if v > 0 && v <= uint64(len(rest)) {
			a.Hint, err = peer.IDFromBytes(rest[:v])
		}
		return a, err
	}
	a.K = int(v)
	return a, nil
}

// registerAnywhere registers rec with the superpeer sp if known, else
// with each connected peer in turn, following a node's hint to the
// superpeer it follows, and returns the superpeer that took it (empty:
// none did).
func registerAnywhere(ctx context.Context, h host.Host, network string, sp peer.ID, rec []byte) peer.ID {
	try := func(p peer.ID) bool {
		a, err := Register(ctx, h, network, p, rec)
		return err == nil && a.Accepted()
	}
	if sp != "" && try(sp) {
		return sp
	}
	for _, p := range h.Network().Peers() {
		a, err := Register(ctx, h, network, p, rec)
		switch {
		case err != nil:
		case a.Accepted():
			return p
		case a.Status == RegNotSuperpeer && a.Hint != "" && a.Hint != h.ID() && try(a.Hint):
			return a.Hint
		}
	}
	return ""
}
