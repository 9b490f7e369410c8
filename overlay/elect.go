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
	"unsafe"

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
// (from non-members, but ring relays), those that did not decode, and
// those the machine's inbox refused (maxInbox, maxInboxBytes).
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
// messages, which strangers send, are refused once maxInbox inputs wait,
// or once the election messages waiting would hold more than
// maxInboxBytes; the node's own inputs (lookup answers, failed sends,
// connections, join signals) are always taken: they come at the rate of
// their own actions, and a lost LookupDone would leave the machine
// waiting for it for good.
type inbox struct {
	mu     sync.Mutex
	items  []node.Input
	bytes  int // what the election messages in items hold (electionSize)
	signal chan struct{}
}

// maxInbox bounds the inputs waiting for the loop: far more than a
// healthy loop ever has (it takes them all at each turn), and a bound on
// the memory a flood of small messages can take.
const maxInbox = 1 << 14

// maxInboxBytes bounds the memory of the election messages waiting for
// the loop. The count alone did not: a message may be a 64 KiB frame
// (maxElectionFrame), whose resource-manager reservation ends once it is
// decoded, before it waits here, and those of non-members are dropped
// only in the loop, so a stalled loop could hold 16,384 of them, each
// about 120 KB once decoded (1637 peer IDs: measured 119,785 bytes of
// heap), 2 GB outside the node's memory budget (hostile-peer audit). The
// decoded messages are not the resource manager's (they outlive their
// stream's scope, and a host the node does not build may not define a
// service); they are among the memory the budget leaves unaccounted
// (limits.go: 64 MiB, of which an idle node takes about 40), and 8 MiB
// of it is theirs. That is 64 of the largest frame, some 80 of the
// largest honest message (a ring's ID list of 1400 peers, about 100 KB
// decoded), where a healthy loop has at most a few waiting at once; and
// more than maxInbox small messages take (about 300 bytes each, 5 MiB),
// so that for them the count stays the bound.
const maxInboxBytes = 8 << 20

// The refusals of an election message by the inbox.
var (
	errInboxFull  = fmt.Errorf("overlay: the machine's inbox holds %d inputs", maxInbox)
	errInboxBytes = fmt.Errorf("overlay: the election messages in the machine's inbox would hold more than %d bytes", maxInboxBytes)
)

// electionSize is the memory an election message holds while it waits in
// the inbox, near enough and not below: the input (boxed in an
// interface), each string's bytes and 16 more (its allocation's
// rounding), and the ID list's string headers.
func electionSize(m classic.Message) int {
	size := int(unsafe.Sizeof(node.ElectionMessage{})) + 16 + cap(m.IDs)*int(unsafe.Sizeof(classic.ID("")))
	for _, id := range [...]classic.ID{m.From, m.To, m.Leader, m.Election.Source} {
		if id != "" {
			size += len(id) + 16
		}
	}
	for _, id := range m.IDs {
		size += len(id) + 16
	}
	return size
}

// push queues in; an election message over maxInbox or maxInboxBytes is
// refused (the error says which), and is not queued.
func (b *inbox) push(in node.Input) error {
	b.mu.Lock()
	var err error
	if e, wire := in.(node.ElectionMessage); wire {
		size := electionSize(e.Msg)
		switch {
		case len(b.items) >= maxInbox:
			err = errInboxFull
		case b.bytes+size > maxInboxBytes:
			err = errInboxBytes
		default:
			b.bytes += size
		}
	}
	if err == nil {
		b.items = append(b.items, in)
	}
	b.mu.Unlock()
	notify(b.signal)
	return err
}

func (b *inbox) take() []node.Input {
	b.mu.Lock()
	defer b.mu.Unlock()
	items := b.items
	b.items, b.bytes = nil, 0
	return items
}
