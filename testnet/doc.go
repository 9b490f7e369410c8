// Package testnet runs networks of overlay nodes for tests, the `peer
// testnet` command and benchmarks.
//
// Net starts N real overlay nodes (real libp2p hosts, the real kad-dht and
// GossipSub), either in this process on mocknet, libp2p's in-process
// network, with one link per pair of peers (optionally delayed by an RTT
// matrix), or each in its own OS process (Config.Exec: `peer run
// --control` on loopback TCP and QUIC, driven over its standard input and
// output by the protocol in control.go). Peer keys come from a seed, so a
// run's peer IDs, and hence its clusters, can be recomputed by anyone. Net
// checks the overlay against the brute-force answer of package dhtselect,
// runs fault scenarios (RunScenario: crashes, churn, partitions, a
// flapping host) while an observer samples every node's view, and reports
// the result as a table or JSON. It prints nothing: Config.Progress hears
// how a long wait or scenario goes, for a display (peer testnet draws it),
// and Overview gives every cluster of the running overlay, with a time line
// of the clusters' changes and the Net's faults, for the overlay's page
// (peer testnet --http).
//
// Subpackages: sim is a deterministic discrete-event simulator for the pure
// election machines; nodesim runs node machines (overlay/node), the type
// the live node runs, by the thousand in virtual time; latency loads RTT
// matrices.
package testnet
