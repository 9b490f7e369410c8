// Package dhtselect chooses superpeers by reserving the leading bits of the
// Kademlia ID space.
//
// Every peer has a 256-bit key, the SHA-256 of its peer ID bytes, exactly as
// go-libp2p-kad-dht computes it. For a target of S superpeers the leading
// k = ⌈log₂ S⌉ bits are reserved: the mask is k ones followed by zeros, and the
// cluster key of a key p is p AND mask. The superpeer for p is the DHT peer
// whose key is closest (XOR metric) to p's cluster key. Because a cluster key
// has zeros after its prefix, that peer is the member of the cluster whose key
// is numerically smallest, and a cluster with at least one member is always
// served by one of its own members. A peer knows it is a superpeer when the
// lookup of its own cluster key ends at itself.
//
// The package is pure: key arithmetic (Key, Mask, Key.Cluster, BitsFor),
// the choice of S (Target), the network-size estimate (EstimateSize, and
// from the superpeers' summaries of their clusters EstimateFromClusters), an
// iterative Kademlia lookup as a state machine (Lookup) and the brute-force
// answer that tests and the testnet check against (Assign), and a
// simulator of the whole selection on ideal routing tables that runs the
// same Lookup for every peer of networks of 100,000 (Simulate), and the
// defence against ID grinding: selection keys salted per epoch (Salt,
// EpochSalt, SaltedKey, AssignSalted: the simulator's, which moves every
// peer's cluster each epoch), and the live one (epoch.go: clusters by
// unsalted prefix, the superpeer the eligible member closest to a target
// salted per cluster and epoch, SaltedTarget, ClusterSalt, the hash chains
// whose values give the salt, Chain, and what a peer announces for it,
// Beacon). It does no I/O;
// package overlay drives the lookup over libp2p streams and the kad-dht
// routing table.
package dhtselect
