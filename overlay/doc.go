// Package overlay is the superpeer node: a libp2p host with a private
// kad-dht, GossipSub, the membership topic and a superpeer selector, whose
// role (superpeer or ordinary), cluster, superpeer and cluster members are
// kept current as peers join and leave.
//
// The whole life of a node: create it with New and functional options,
// follow its role with Subscribe (typed events, also on the host's event
// bus), read its view with State, and Close it:
//
//	n, err := overlay.New(ctx,
//		overlay.WithListenAddrs(ma.StringCast("/ip4/0.0.0.0/tcp/4001")),
//		overlay.WithBootstrapAddrs(ma.StringCast("/ip4/192.0.2.1/tcp/4001/p2p/12D3KooW...")),
//		overlay.WithTarget(dhtselect.Target{Fraction: 0.1}),
//		overlay.WithElection("next-in-line", false),
//	)
//	if err != nil {
//		return err
//	}
//	defer n.Close() // leaves the overlay
//	sub, _ := n.Subscribe()
//	defer sub.Close()
//	for e := range sub.Out() {
//		if r, ok := e.(overlay.EvtRoleChanged); ok && r.New == overlay.RoleSuperpeer {
//			serve(n.State().Members) // this peer now serves its cluster
//		}
//	}
//
// An application that already runs a libp2p host attaches a node to it
// with Attach (and shares its GossipSub router with WithPubSub); Close then
// leaves the host open. WithPSK and WithAllowlist make the swarm private;
// WithNetwork keeps overlays apart. See the examples.
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
// the nearest superpeer with room over an attach protocol. The rules are the
// node machine's (overlay/node's geo.go); geo.go here is their I/O.
package overlay
