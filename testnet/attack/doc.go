// Package attack holds hostile peers: libp2p clients that speak the
// overlay's protocols and topics the way an attacker would (floods,
// forgeries, stalled streams, sybils, ground IDs). The tests of the
// defences run them against real overlay nodes, and `peer bench --suite
// attack --live` runs each against a live swarm and measures what it did.
//
// An attacker is deliberately an independent client: it writes the wire
// format itself (Frame) and names the protocols by their strings
// (Protocol), as a client that no one here wrote would, so that it can
// also write what the overlay never would.
package attack
