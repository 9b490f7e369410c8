package overlay

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/overlay/node"
)

// Elections (Config.Election): the node machine runs them (see
// overlay/node's elect.go for the rules: who votes, when to campaign, how
// the election and the lookup hand over). Here is their wire: the machines
// talk over "/superpeer/<network>/election/1.0.0", one classic/pb frame per
// stream, whose sender is the stream's authenticated remote peer. A send
// that fails is reported to the machine (node.SendFailed), which gives it
// to the election as classic.MsgUnreachable.

// errFlood is the refusal of a member's election message that its
// machine caught over what the algorithm allows an honest member
// (node.Ready.Flooders): a strike, counted with the refusals over the
// per-peer rate, as it is one, the algorithm's.
var errFlood = fmt.Errorf("%w: election messages over what the algorithm allows", errRate)

// electionProtocol is the election's stream protocol on a network.
func electionProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/election/1.0.0")
}

// sendElection delivers o in the background; a failure comes back to the
// machine as SendFailed. Each message lives at most its deadline, so the
// goroutines in flight are bounded by the message rate.
func (n *Node) sendElection(ctx context.Context, o node.Outgoing) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		to := peer.ID(o.Msg.To)
		err := n.writeElection(ctx, to, o.Msg, o.Deadline)
		if err == nil || ctx.Err() != nil {
			return
		}
		n.log.Debug("election: send", "to", to, "type", o.Msg.Type, "err", err)
		n.feed(node.SendFailed{To: to, Gen: o.Gen})
	}()
}

func (n *Node) writeElection(ctx context.Context, to peer.ID, m classic.Message, deadline time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	s, err := n.host.NewStream(ctx, to, n.electProto)
	if err != nil {
		return err
	}
	if err := inService(s); err != nil {
		_ = s.Reset()
		return err
	}
	_ = s.SetDeadline(time.Now().Add(deadline))
	if err := pb.WriteMsg(s, m); err != nil {
		_ = s.Reset()
		return err
	}
	return s.Close()
}

// handleElection reads one election message and gives it to the machine,
// which drops it unless it comes from a member of the cluster (or relays
// a member's ring election: overlay/node's relayer). The sender
// is the stream's remote peer; a message that does not decode is refused.
func (n *Node) handleElection(s network.Stream) {
	defer s.Close()
	from := s.Conn().RemotePeer()
	if err := n.admit(s); err != nil {
		_ = s.Reset()
		n.guard.refuse(n, "election", from, err)
		return
	}
	n.mu.RLock()
	deadline := n.deadline
	n.mu.RUnlock()
	_ = s.SetDeadline(time.Now().Add(max(deadline, time.Second)))
	m, err := readElection(s, from)
	if errors.Is(err, io.EOF) {
		// Nothing sent: the sender closed the stream without a message.
		err = fmt.Errorf("%w: no message", errTruncated)
	}
	if err != nil {
		_ = s.Reset()
		n.guard.refuse(n, "election", from, err)
		n.electDropped.Add(1)
		return
	}
	n.feed(node.ElectionMessage{Msg: m})
}

// maxElectionFrame is the largest election message a node reads: a
// frame of the overlay's size (maxFrame), well below classic/pb's MaxSize
// (256 KiB, for rings of 4096): a ring's ID list of 1400 peers fits, and
// cost follows the cluster. An election stream is read one at a time per
// stream, so strangers' streams each hold 64 KiB at most, reserved in the
// service's memory (limits.go).
const maxElectionFrame = maxFrame

// readElection reads one election message from s: a length above
// maxElectionFrame is refused before anything is allocated (a strike, as
// any oversized frame), and the message's buffer is reserved in the
// stream's scope first (a refusal there is "limit", no strike).
func readElection(s network.Stream, from peer.ID) (classic.Message, error) {
	r := bufio.NewReaderSize(s, 64)
	var l uint64
	for i := 1; i <= binary.MaxVarintLen64; i++ {
		b, err := r.Peek(i)
		if err != nil {
			if len(b) == 0 && errors.Is(err, io.EOF) {
				return classic.Message{}, io.EOF
			}
			break // pb.ReadMsg reports it
		}
		if b[i-1] < 0x80 {
			l, _ = binary.Uvarint(b)
			break
		}
		if i == binary.MaxVarintLen64 {
			l = math.MaxUint64
		}
	}
	if l > maxElectionFrame {
		return classic.Message{}, fmt.Errorf("%w: election message of %d bytes, limit %d", errFrameSize, l, maxElectionFrame)
	}
	if err := s.Scope().ReserveMemory(int(l), network.ReservationPriorityAlways); err != nil {
		return classic.Message{}, fmt.Errorf("%w: %w", errLimit, err)
	}
	defer s.Scope().ReleaseMemory(int(l))
	return pb.ReadMsg(r, classic.ID(from))
}

// ElectionStats are a node's election state and counters.
type ElectionStats = node.ElectionStatus

// ElectionStats returns the node's election state and counters (zero when
// it runs no election). Dropped counts the messages the machine dropped
// (from non-members, but ring relays) and those that did not decode.
func (n *Node) ElectionStats() ElectionStats {
	n.mu.RLock()
	st := n.election
	n.mu.RUnlock()
	if st.Algorithm == "" {
		return ElectionStats{}
	}
	st.Sent = maps.Clone(st.Sent)
	st.Dropped += n.electDropped.Load()
	return st
}

// electionDetection is the election's failure-detection timeout (0
// without an election, or before its first cluster).
func (n *Node) electionDetection() time.Duration {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.detection
}

// inbox is the machine's queue of inputs: push never blocks (a stream
// handler or a connection notifee must not wait for the loop). Election
// messages, which strangers send, are refused once maxInbox inputs wait;
// the node's own inputs (lookup answers, failed sends, connections, join
// signals) are always taken: they come at the rate of its own actions,
// and a lost LookupDone would leave the machine waiting for it for good.
type inbox struct {
	mu     sync.Mutex
	items  []node.Input
	signal chan struct{}
}

// maxInbox bounds the inputs waiting for the loop: far more than a
// healthy loop ever has (it takes them all at each turn), and a bound on
// the memory a flood of messages can take.
const maxInbox = 1 << 14

func (b *inbox) push(in node.Input) bool {
	b.mu.Lock()
	_, wire := in.(node.ElectionMessage)
	ok := !wire || len(b.items) < maxInbox
	if ok {
		b.items = append(b.items, in)
	}
	b.mu.Unlock()
	notify(b.signal)
	return ok
}

func (b *inbox) take() []node.Input {
	b.mu.Lock()
	defer b.mu.Unlock()
	items := b.items
	b.items = nil
	return items
}
