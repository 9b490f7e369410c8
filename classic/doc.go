// Package classic holds the election algorithms that choose a cluster's
// superpeer when the current one fails, each as a deterministic state machine
// in the style of etcd-io/raft: input only through Step (a message), Tick (one
// unit of logical time) and Campaign (this process noticed a failure or has
// just recovered); output only through Ready (messages to send and the
// current State). No goroutines, clocks, sockets or global randomness: a
// seeded *rand.Rand comes in through Config.
//
// Algorithms (constructor, messages used):
//
//   - NewBully: Garcia-Molina's bully election (ELECTION, OK, COORDINATOR).
//   - NewRing, NewRingMax: ring election carrying the list of live IDs, or
//     only the highest seen (ELECTION, COORDINATOR); dead successors are
//     skipped when the driver reports MsgUnreachable.
//   - NewNextInLine: the leader publishes an ordered failover list; the first
//     live one takes over directly; bully when none is alive.
//   - NewCandidate: only candidates lead; an ordinary process that notices the
//     failure waits its delay δ, queries the candidates and announces the best;
//     a candidate never follows one it outranks (it takes over).
//   - NewInvitation: Garcia-Molina's invitation algorithm (group merging).
//   - NewEcho: echo election with capacities on any connected graph
//     (Vasudevan, Kurose and Towsley 2004).
//   - NewStable: a stable leader with heartbeats that is never replaced while
//     it is live and reachable; flap counts keep an unstable node from winning.
//
// NewQuorum wraps any of them with terms and majority (CLAIM, CLAIM_ACK): a
// process is Leader only while a majority of the configured members back its
// term, so two leaders never share a term and a minority side has no leader.
// Without it the algorithms behave as in the textbook, split brain included.
//
// Members are strangers (issue 19): each machine takes a message only when
// the algorithm allows it from that sender at that moment, and no member
// can restart another's election at will (see Bully's leaderless). A
// machine that bounds how often an honest member asks it for something
// (Bully: ELECTION) holds itself to that bound and names the members over
// their allowance in Ready.Flooders, for the driver to strike (flood.go).
//
// Ranks are pluggable (Rank): HighestID (the textbook), XORCloseness (closer
// to a cluster key wins, so an election agrees with the DHT lookup) and
// HostQuality (capacity, flaps, uptime, then ID).
//
// The drivers: package testnet/sim runs the machines on a simulated network
// with virtual time; the node machine (overlay/node) runs one per cluster
// for the live overlay (its messages travel over libp2p streams) and for
// the node simulator (testnet/nodesim).
package classic
