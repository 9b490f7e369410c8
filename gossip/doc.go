// Package gossip holds the overlay's GossipSub topics and their validators.
//
// The membership topic carries each peer's announcement of itself: its
// addresses, whether it is a superpeer, and its cluster (k and cluster key).
// Peers announce periodically and whenever their role or cluster changes, so
// superpeers learn their members and members learn their superpeer's
// addresses. An announcement's sender is the message's signed origin, never a
// field of the payload; the validator rejects payloads that are malformed or
// whose cluster key does not follow from the sender's ID, and ignores stale
// ones. Entries expire when their peer stops announcing.
//
// View is the pure membership table (explicit time, no I/O); Membership
// drives it from a GossipSub topic.
package gossip
