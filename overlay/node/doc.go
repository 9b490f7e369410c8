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
//		// or the clock moved: if m.Due(now) { m.Step(now, routing) };
//		// if sp, ok := m.LinksDue(now); ok { m.Step(now, links) }; m.Tick(now)
//		rd := m.Ready()
//		// 1. persist rd.HardState (written and synced) when not nil
//		// 2. send rd.Messages, run rd.Lookups (each answers with LookupDone),
//		//    connect to rd.Connect, dial the bootstrap peers on rd.Dial
//		//    (answered with Dialled), refresh the routing table on
//		//    rd.Refresh, publish rd.Announce, report rd.State and
//		//    rd.Elections
//	}
//
// Inputs (Step): the membership view (View), the routing table (Routing),
// the join signals (Refreshed, Rendezvous), connections (Conn, and
// Links: the host's connections when the machine asks), dials of the
// bootstrap peers (Dialled), lookup
// answers (LookupDone), election messages and failed sends
// (ElectionMessage, SendFailed), reachability, a forced re-evaluation, and
// with the geometric strategy the gossip feed (GeoFeed), pings
// (PingDone), token passes (TokenOffered, PassDone), attach requests
// (AttachAsked, AttachDone; they carry the search on measured RTTs of
// geoswap.go: a member's report, a superpeer's candidates), the liar
// check's vantage points (VouchAsked,
// VouchDone) and leaving (GeoLeave). Tick(now) moves the
// clock: election ticks, the periodic re-evaluation, the settled
// evaluation after a change of the membership view, and the geometric
// strategy's samples, token rounds and attachment rounds (GeoDue says when
// the driver gives a fresh GeoFeed first, GeoNext when to tick for them).
//
// What it decides: when to dial the bootstrap peers and to refresh the
// routing table (links.go), when a joining node may take a role (mayJoin), which
// peers count for the size estimate and the quorum's electorate (admit.go:
// only identities seen on a connection, at most MaxPerAddr per address,
// and routing-table peers that are members or speak the closer protocol;
// and which cluster-mates announced but not seen the driver should
// connect to, Ready.Connect),
// whom a lookup may ask (LookupRequest.MayAsk), when to
// look the cluster key up again, the superpeer (the lookup's answer or the
// election's leader: see elect.go for how they hand over), when to
// campaign, the leader carried across a rebuild of the election machine,
// host quality (private and flapping members ranked last), the quorum
// state to persist, and with Config.Epoch the defence against ID grinding
// (epoch.go: the cluster's salted target of the epoch, whose salt comes
// from the last superpeer's hash chain, and which members are old enough
// to serve). With the geometric strategy (geo.go, geoplace.go,
// geoattach.go): which peer to ping and the coordinate, the token rounds
// (snapshot epochs, neighbours, placement and re-homing), the liar check,
// the attachment to a superpeer, the answers to token passes and attach
// requests (GeoAnswer, read right after the Step), and the takeover of a
// lost holder's token by the cluster's elected successor.
//
// It has no goroutines, no sockets, no wall clock and no unseeded
// randomness (the random sources are seeded from the peer ID, and the
// network name for the geometric strategy; the hash chain from
// Config.Epoch.Secret and the peer ID): the same inputs at the same times
// give the same outputs.
package node
