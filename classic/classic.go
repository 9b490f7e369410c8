package classic

import (
	"bytes"
	"math/rand/v2"
)

// ID identifies a process of a cluster. In the overlay it is a libp2p peer ID
// (string(peer.ID)); in the simulator and in tests any distinct strings do.
type ID string

// None is the zero ID: no leader known.
const None ID = ""

// MsgType is the kind of an election message. The numbering is part of the
// wire format (classic/pb), so new kinds are only ever appended.
type MsgType uint8

// Message kinds shared by all algorithms. Each algorithm documents which it uses.
const (
	MsgElection     MsgType = iota + 1 // start or carry an election
	MsgOK                              // bully: "I outrank you, stand down"
	MsgCoordinator                     // the winner announces itself
	MsgHeartbeat                       // leader liveness
	MsgHeartbeatAck                    // stable leader: a follower's answer
	MsgInvite                          // invitation: a leader invites another group
	MsgAccept                          // invitation: accept, or a non-leader names its leader
	MsgReady                           // invitation: the new group's membership
	MsgEcho                            // echo election: a subtree's answer to its parent
	MsgQuery                           // candidate/ordinary: "are you alive, what rank"
	MsgQueryReply                      // candidate/ordinary: the answer
	MsgUnreachable                     // injected by the driver: To could not reach From
	MsgVote                            // stable leader: a vote reply
	MsgClaim                           // Quorum: a claim of a term, one round of it
	MsgClaimAck                        // Quorum: a grant of a claim, or a refusal naming the current term
)

var msgNames = [...]string{
	MsgElection: "ELECTION", MsgOK: "OK", MsgCoordinator: "COORDINATOR",
	MsgHeartbeat: "HEARTBEAT", MsgHeartbeatAck: "HEARTBEAT_ACK", MsgInvite: "INVITE",
	MsgAccept: "ACCEPT", MsgReady: "READY", MsgEcho: "ECHO", MsgQuery: "QUERY",
	MsgQueryReply: "QUERY_REPLY", MsgUnreachable: "UNREACHABLE", MsgVote: "VOTE",
	MsgClaim: "CLAIM", MsgClaimAck: "CLAIM_ACK",
}

func (t MsgType) String() string {
	if int(t) < len(msgNames) && msgNames[t] != "" {
		return msgNames[t]
	}
	return "UNKNOWN"
}

// Message is the one message format of every election algorithm, in the style
// of raftpb.Message: a flat union whose fields each algorithm uses as it
// documents. From is always set by the transport (the authenticated sender),
// never trusted from the wire.
type Message struct {
	Type MsgType
	From ID
	To   ID
	// Term is the election term (majority mode) or an algorithm's round number.
	Term uint64
	// Leader names a leader: the COORDINATOR's winner, the leader a non-leader
	// reports, the best candidate found so far.
	Leader ID
	// IDs carries a list: the ring's live IDs, a failover list, a group's members.
	IDs []ID
	// Election identifies one of several concurrent elections (echo: source ID
	// plus sequence number, compared as (Seq, Source)).
	Election ElectionID
	// Capacity is the best capacity found (echo election) or the sender's own.
	Capacity uint64
}

// ElectionID names one election so that concurrent ones can be told apart and
// ordered: a higher Seq wins, then a higher Source.
type ElectionID struct {
	Source ID
	Seq    uint64
}

// Less orders election IDs: by Seq, then by Source.
func (e ElectionID) Less(o ElectionID) bool {
	if e.Seq != o.Seq {
		return e.Seq < o.Seq
	}
	return e.Source < o.Source
}

// Rank orders candidates. Compare returns a negative number when a ranks
// below b, zero when they rank equal (only for a == b), positive when a ranks
// above b. The winner of an election is the live candidate of highest rank.
type Rank interface {
	Compare(a, b ID) int
}

// HighestID is the textbook rank: the larger ID (compared as bytes) wins.
type HighestID struct{}

// Compare implements Rank.
func (HighestID) Compare(a, b ID) int { return bytes.Compare([]byte(a), []byte(b)) }

// Role is what a process currently is in its cluster.
type Role uint8

// Roles.
const (
	Follower  Role = iota // knows (or waits for) a leader
	Candidate             // running an election
	Leader                // believes itself leader
)

func (r Role) String() string {
	switch r {
	case Follower:
		return "follower"
	case Candidate:
		return "candidate"
	case Leader:
		return "leader"
	}
	return "unknown"
}

// State is the externally visible state of a machine.
type State struct {
	Role   Role
	Leader ID     // None while unknown
	Term   uint64 // 0 unless the algorithm or majority mode uses terms
}

// Config is shared by all machines. Each algorithm's constructor documents
// which fields it uses and its defaults.
type Config struct {
	// ID is this process.
	ID ID
	// Peers are the cluster's configured members, this process included, in
	// ring order for ring algorithms.
	Peers []ID
	// Rank orders candidates; nil means HighestID.
	Rank Rank
	// Rand is the only source of randomness; nil means a fixed seed.
	Rand *rand.Rand
	// HeartbeatTicks is the leader's heartbeat interval, in ticks.
	HeartbeatTicks int
	// TimeoutTicks is how long a process waits for an answer (OK,
	// COORDINATOR, heartbeat) before it acts, in ticks. It must exceed a
	// round trip.
	TimeoutTicks int
}

// Machine is an election algorithm as a deterministic state machine: input
// only through Step, Tick and Campaign; output only through Ready.
type Machine interface {
	// Step delivers one message addressed to this process.
	Step(m Message)
	// Tick advances this process's logical clock by one tick.
	Tick()
	// Campaign makes this process start an election now (it noticed the
	// leader's failure, or it has just recovered).
	Campaign()
	// Ready returns and clears the messages to send, and the current state.
	Ready() Ready
}

// Reconfigurer is implemented by the machines that can take a new Config
// for the same process (Peers, Rank or ticks changed) and keep their state,
// where a new machine would start an election over. A driver whose view of
// the cluster changes uses it when it can, and builds a new machine when
// the machine does not implement it. Of the algorithms, Invitation does:
// a new invitation machine leads {self}, so that rebuilding it on every
// change of members would split its group into singletons each time.
type Reconfigurer interface {
	// Reconfigure replaces the configuration, or returns an error and
	// leaves the machine unchanged. Messages it causes come out of Ready.
	Reconfigure(cfg Config) error
}

// Relayer is implemented by the machines whose messages are passed on
// from process to process (Ring, both variants): Relays reports whether
// m, from a process that is not a member of this one's configuration,
// passes on an election of a member, which the machine takes (Step) as it
// would from a member. A driver that drops the messages of non-members
// lets these through.
type Relayer interface {
	Relays(m Message) bool
}

// Ready is a machine's output since the previous call.
type Ready struct {
	Messages []Message
	State    State
	// Flooders are the members caught sending more requests than an
	// honest process of the algorithm can (see Bully), each named once
	// per Ready in which one of their requests was over its allowance and
	// dropped. The driver may count that against them: the overlay
	// strikes them, as it does a peer whose message its guard refuses.
	Flooders []ID
}
