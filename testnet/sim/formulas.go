package sim

// The textbook message counts of one loss-free election on n processes, for
// the scenarios that TestMessageCounts and the election suite of package
// bench run. Each is exact for its scenario, not a bound: every message a
// machine sends from the start of the election until the live processes
// agree is counted, heartbeats (HEARTBEAT, HEARTBEAT_ACK) and the
// simulator's MsgUnreachable notices excepted, and a message to a crashed
// process counts, since it is sent. Processes are 0..n-1, ranked by ID
// (n-1 highest); n counts the crashed leader where the scenario has one.

// BullyMessages is Garcia-Molina's bully election after the highest process
// n-1 crashed, started by initiator alone (the others' failure detectors are
// slow, so only it notices): every live process j >= initiator campaigns
// once and sends ELECTION to the n-1-j processes above it, each ELECTION to
// a live process is answered by one OK, and the winner n-2 sends COORDINATOR
// to the n-1 others, the dead n-1 included. With m = n-1-initiator
// campaigners:
//
//	ELECTION    = m(m+1)/2
//	OK          = m(m-1)/2
//	COORDINATOR = n-1
//	total       = m² + n - 1
//
// That is n(n-1), Θ(n²), when the lowest process initiates, and n when the
// second highest does.
func BullyMessages(n, initiator int) int {
	m := n - 1 - initiator
	return m*m + n - 1
}

// RingMessages is the ID-list ring election with one initiator and nobody
// down: the ELECTION goes once round (n hops, the last back to the
// initiator) and the COORDINATOR once round (n hops, the last dropped by the
// initiator): 2n, whoever initiates.
func RingMessages(n int) int { return 2 * n }

// RingMaxMessages is the max-only (Chang-Roberts) ring election with one
// initiator and nobody down, d hops before the highest process along the
// ring: the ELECTION travels d hops to the highest, then a full turn of n
// hops back to it, and its COORDINATOR n hops: 2n + d. That is 2n when the
// highest initiates and 3n-1 when its successor does (IDs increasing along
// the ring, the lowest initiating).
func RingMaxMessages(n, d int) int { return 2*n + d }

// RingMaxAllMessages is the max-only ring election with every process
// initiating at once and a constant latency (so that messages of higher IDs
// reach each process later), plus the n COORDINATOR. With IDs increasing
// along the ring every message but the highest dies at the next hop (n
// initial sends, then the highest's n-1 further hops): 2n-1 ELECTION, 3n-1
// in all. With IDs decreasing the message of the k-th lowest (k = 0..n-2)
// travels k+1 hops before a higher process swallows it and the highest's
// goes n hops: n(n+1)/2 ELECTION, n(n+1)/2 + n in all, Θ(n²).
func RingMaxAllMessages(n int, decreasing bool) int {
	if decreasing {
		return n*(n+1)/2 + n
	}
	return 3*n - 1
}

// EchoMessages is the echo election on a connected graph of n processes and
// edges edges, one source: every edge carries exactly two messages (ELECTION
// then ECHO on a spanning-tree edge, an ELECTION each way on the others),
// and the winner's COORDINATOR goes down the n-1 tree edges: 2·edges + n-1.
// On a full mesh that is n²-1, Θ(n²).
func EchoMessages(n, edges int) int { return 2*edges + n - 1 }

// NextInLineMessages is next-in-line failover after the leader n-1 crashed:
// the first live process of its failover list (n-2) notices the missing
// heartbeats and takes over directly with one COORDINATOR to each of the n-1
// others (the dead leader included); the COORDINATOR reaches the later ones
// of the list before their turn: n-1.
func NextInLineMessages(n int) int { return n - 1 }

// CandidateMessages is the candidate/ordinary election after the leader n-1,
// one of the c candidates, crashed, started by one process that notices and
// is a candidate itself: it sends QUERY to the c-1 other candidates, the c-2
// live ones answer QUERY_REPLY, and once the query time is up it announces
// the best live candidate with COORDINATOR to the n-1 others:
// (c-1) + (c-2) + (n-1), 3n-4 when every process is a candidate.
func CandidateMessages(n, c int) int { return (c - 1) + (c - 2) + (n - 1) }

// InvitationMessages is Garcia-Molina's invitation election from n singleton
// groups (a cold start, or every member after its leader's failure), the
// highest-ranked leader running the only invitation round: INVITE to the
// n-1 others, each yields with one ACCEPT carrying its group, and the winner
// sends READY to each yielded member: 3(n-1).
func InvitationMessages(n int) int { return 3 * (n - 1) }

// StableMessages is the stable-leader election on n processes none of which
// knows a live leader, started by one process: ELECTION to the n-1 others,
// n-1 VOTE back, and COORDINATOR to the n-1 others: 3(n-1).
func StableMessages(n int) int { return 3 * (n - 1) }
