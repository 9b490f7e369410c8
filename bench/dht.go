package bench

import (
	"github.com/superpeer/superpeer/dhtselect"
)

// DHTStrategy is the selection by ID-space reservation, run in the
// simulator of package dhtselect: host i is peer i, whose ID the seed
// derives; every peer looks its cluster key up in ideal Kademlia routing
// tables and attaches to the peer the lookup ends at. The strategy knows
// no RTT and has no capacity: for a target S it makes 2^⌈log₂ S⌉ cluster
// keys, so up to that many superpeers, and a cluster holds whoever's key
// shares its prefix. Rounds is the longest chain of dependent lookup
// queries, and MessagesPerPeer the mean FIND_NODE queries per peer
// (replies not counted).
var DHTStrategy = Strategy{Name: "dht", Run: func(nw *Network, s, _ int, seed uint64) (StrategyResult, error) {
	r, err := dhtselect.Simulate(dhtselect.SimConfig{N: nw.N(), Target: dhtselect.Target{Superpeers: s}, Seed: seed})
	if err != nil {
		return StrategyResult{}, err
	}
	return StrategyResult{Superpeers: r.Superpeers, Attach: r.Attach, Rounds: r.Rounds.Max, MessagesPerPeer: r.Messages.Mean}, nil
}}
