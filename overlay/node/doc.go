// Package node is the node machine: every decision a superpeer-overlay
// node makes, as one deterministic state machine in the style of
// etcd-io/raft's RawNode.
//
// The driver (package overlay for a libp2p node, testnet/nodesim for the
// simulator) turns what happens into inputs and carries out the outputs:
//
//	m, err := node.New(cfg)
//	for {
//		// an input arrived: m.Step(now, input)
//		// or the clock moved: if m.Due(now) { m.Step(now, routing) }; m.Tick(now)
//		rd := m.Ready()
//		// 1. persist rd.HardState (written and synced) when not nil
//		// 2. send rd.Messages, run rd.Lookups (each answers with LookupDone),
//		//    publish rd.Announce, report rd.State and rd.Elections
//	}
//
// Inputs (Step): the membership view (View), the routing table (Routing),
// the join signals (Refreshed, Rendezvous), connections (Conn), lookup
// answers (LookupDone), election messages and failed sends
// (ElectionMessage, SendFailed), reachability, a forced re-evaluation, and
// the geometric strategy's cluster (GeoCluster). Tick(now) moves the
// clock: election ticks, the periodic re-evaluation, and the settled
// evaluation after a change of the membership view.
//
// What it decides: when a joining node may take a role (mayJoin), which
// peers count for the size estimate and the quorum's electorate, when to
// look the cluster key up again, the superpeer (the lookup's answer or the
// election's leader: see elect.go for how they hand over), when to
// campaign, the leader carried across a rebuild of the election machine,
// host quality (private and flapping members ranked last), and the quorum
// state to persist.
//
// It has no goroutines, no sockets, no wall clock and no unseeded
// randomness: the same inputs at the same times give the same outputs.
// The geometric strategy's token placement and attachment rules are still
// in package overlay (geo.go); only their cluster's election runs here.
package node
