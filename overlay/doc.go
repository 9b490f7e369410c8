// Package overlay is the superpeer node: a libp2p host with a private
// kad-dht, GossipSub, the membership topic and a superpeer selector, whose
// role (superpeer or ordinary), cluster, superpeer and cluster members are
// kept current as peers join and leave.
//
// Create a node with New and functional options, read its view with State,
// and follow changes with Subscribe (typed events, also on the host's event
// bus):
//
//	n, err := overlay.New(ctx,
//		overlay.WithListenAddrs(ma.StringCast("/ip4/0.0.0.0/tcp/4001")),
//		overlay.WithBootstrap(bootstrapInfo),
//		overlay.WithTarget(dhtselect.Target{Superpeers: 8}),
//	)
//	...
//	defer n.Close()
//
// Selection by ID-space reservation (package dhtselect): the node estimates
// the network size, derives k, and looks up its own cluster key over the
// routing tables of the private DHT; it is the superpeer when the lookup ends
// at itself. It re-evaluates periodically, when the membership view changes,
// and when the connection to its superpeer drops.
//
// Geometric selection (WithStrategy(StrategyGeometric), package geometric):
// the node fits a network coordinate from libp2p pings, S tokens move by
// gossip and a token protocol towards the peers, a holder that keeps its
// token for the dwell time becomes a superpeer, and ordinary peers attach to
// the nearest superpeer with room over an attach protocol (see geo.go).
package overlay
