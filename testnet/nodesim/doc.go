// Package nodesim runs node machines (package overlay/node), the very type
// the live overlay node runs, on a deterministic simulated network in
// virtual time: thousands of them on one core.
//
// What is simulated, and how (the oracles stand where the live node does
// I/O):
//
//   - Time: virtual, starting at 0 (the machines see Epoch plus it). Each
//     node's driver ticks its machine on a grid of ElectionTick, from a
//     phase drawn from the seed, and gives it a fresh Routing when the
//     machine says an evaluation is due, as the live loop does. With the
//     DHT strategy it ticks a node only when the tick is due (the
//     machine's NextTick, a registration or a view to give, a backbone
//     to hear) and has the machine make up the skipped ticks before
//     each input (node.Machine.Skip): the decisions are those of a tick
//     every ElectionTick (sim.go's "ticks when due"). A tick whose only
//     work is a superpeer's hearing of the backbone, which changes no
//     decision then (node.Machine.BackboneQuiet), is not made either: the
//     backbone is given at the next input or tick, at the time it was
//     heard (scoped.go's bbPending).
//   - Election messages travel for half the RTT between the two nodes'
//     hosts in a latency.Matrix (plus a uniform jitter), and are lost with
//     probability Loss. One to a crashed node, or across a partition, comes
//     back to the sender as SendFailed one RTT later (a failed stream).
//   - Membership (GossipSub in the live node): a node enters the views of
//     the peers of its partition component GossipDelay after its first
//     announcement; a joining node sees the component's view one
//     AnnounceInterval after it starts (every peer has re-announced once by
//     then), and only itself before. A crashed node, and a node on the other
//     side of a new partition, leaves the views three announce intervals
//     (the topic's TTL) after it was last heard; a graceful Stop says
//     goodbye, and leaves them after GossipDelay. No machine is given a
//     component's whole view any more: a DHT machine's view is its
//     registrations or rosters (scoped.go), a geometric machine's its
//     cluster (below), each at most once per ViewPeriod; the component
//     views still say who has heard whom.
//   - The routing table (kad-dht): each node knows, for each common-prefix
//     length with its key, up to a bucket's worth (dhtselect.BucketSize)
//     of the nodes that share that prefix exactly, drawn from the seed (a
//     bucket is full wherever there are more), among the nodes alive when
//     it starts (every node, in the index); a peer counts as connected while
//     it is alive and reachable. A joining node's routing-table refresh
//     completes (Refreshed) two RTTs after it starts, if any peer is
//     reachable.
//   - Lookups (the closer protocol driven by dhtselect.Lookup): the answer
//     is the live node closest to the key among those reachable from the
//     asker (and not the asker when it asks to be skipped), after
//     LookupRTTs round trips to it. When the closest node of the whole
//     network is crashed or unreachable but not yet forgotten (within the
//     membership TTL), the lookup first waits for the query to it to time
//     out: the asker's failure-detection timeout, or QueryTimeout.
//   - Connections: a node is connected to the peers it exchanged an
//     election message with in the last ContactWindow, and to its
//     superpeer. When a node crashes, or a partition separates them, each
//     such peer gets Conn (down) ConnLoss later; the node itself, on an
//     isolation, sees all of its connections go (its own outage).
//   - Bootstrap peers (node.Links, Ready.Dial and Ready.Refresh: the
//     machine decides when to dial and refresh, as in the live node): a
//     node's bootstrap peer is node 0 (node 0's is node 1). A dial is
//     answered at once (Dialled): reached when that peer is up and on the
//     node's side, and the connection then lasts while the incarnation
//     dialled is up and on its side (a connection outlives a cut that
//     heals within QUIC's idle timeout), or until the bootstrap peer's
//     connection manager trims it: over Config.ConnHigh connections of
//     dials (192, the live public node's), every 10 s, it closes the
//     oldest past their grace (a minute), but its superpeer's and its
//     members', down to ConnLow (160), and the peer sees Conn. Only the
//     dials' connections count towards the watermarks: a hub's routing
//     and election connections are not modelled as such.
//     Links are the table routingOf gives, the routing peers alive and on
//     the node's side, that connection, and the superpeer alive and on
//     its side. The join's refresh completes two RTTs after the start, as
//     above; a RefreshTable asked for later completes two RTTs after it;
//     a RefreshAll changes nothing (the oracle's table is what it would
//     find), and is counted (Stats.FullRefreshes), as dials are.
//   - Addresses (Config.Addr, with Node.MaxPerAddr): every node is seen on
//     its address by every other, connected or not, also across a
//     partition; Ready.Connect is not carried out. The live node counts a
//     member only while connected to it, so what follows a heal there (a
//     member counts again once reconnected) is not simulated: the live
//     testnet tests it (TestPartitionHealReconnects).
//   - Disk: the hard state and the outages a machine asks to persist are
//     kept per node, and a restarted node gets them back (and knows that
//     it ran before).
//
// The geometric strategy (Config.Node.Geometric; geo.go), where the live
// node's overlay/geo.go does I/O:
//
//   - Settings left zero take the live node's: token rounds and pings every
//     second, Dwell five token intervals, node.LiveMargin, MinHold
//     node.SnapshotTicks token intervals, cooling after four passes.
//   - Ticks: every ElectionTick, and at the machine's GeoNext (as the live
//     loop resets its timer after every Ready); a tick gives a fresh
//     GeoFeed first when GeoDue says so.
//   - Pings: the answer (PingDone) is the matrix RTT plus the least of
//     three jitters, three RTTs later (the live node keeps the least of
//     three pings); a ping to a node that is down or on the other side of
//     a partition fails after GeoTimeout.
//   - Gossip of token positions (gossip.Geo): a token report is published
//     as the live feed publishes it, and the peers hear it GossipDelay
//     later: a first report, a new token, a promotion or demotion and a
//     release at once; a change of load, coordinate or summary no sooner
//     than an announce interval (the live MinGap) after the last
//     publication, or at the feed's next republication tick (every
//     announce interval from the node's start) if that comes first; an
//     unchanged report not at all (TestTokenFeedMinGap). Reports go on
//     the token topics the machine says it hears (GeoReady.Topics: the
//     backbone, and its cluster's topic; the backbone alone before it
//     says; topics.go): a node publishes its reports, and republishes
//     them every announce interval (events), on its topics, and hears a
//     report only on its own topics, once it was (re)published there
//     GossipDelay or more after it joined the topic (GossipSub keeps no
//     history); leaving a topic drops what was heard only there, and a
//     report no longer published on a topic stays there one TTL after its
//     last publication. Each publication counts one delivery per other
//     subscriber of the topic (Stats.TokenDeliveries, by the receiver's
//     role). Not modelled: the live superpeer publishes on its own
//     cluster's topic only a new token, a promotion and a release
//     (gossip.Geo.SetQuiet), and its members have its report from each
//     yes to their attach requests (overlay/geotopics.go); here it
//     republishes there every announce interval, which gives a member the
//     same report, about as fresh, and counts deliveries the live member
//     no longer receives. A node's GeoFeed has the last heard token report, on its
//     topics, of every node alive on its side, or still in its membership
//     view (a crashed or cut-off node's entries go with it, one
//     membership TTL after it was last heard), and its own token report
//     at once; forged claims (ForgeTokens) go on the forger's topics;
//     Tokens
//     is one position per token, as gossip.Geo.Tokens: the highest pass
//     counter, then the smaller holder ID. A report of no token leaves the
//     last one to expire one TTL after its last republication, a release
//     takes it out at once. Gossip is modelled per side but not per
//     message: what a node on the other side of a new partition publishes
//     before it leaves the views still reaches them. Connected is the
//     node's live, reachable routing peers and contacts (the peers it
//     exchanged a message, ping, pass or attach request with in the last
//     ContactWindow, and its superpeer), and those that crashed less than
//     ConnLoss ago (a live connection outlives a crashed peer: QUIC's
//     idle timeout is 30 s).
//   - The view (the live node's overlay/geomembership.go): no topic of
//     the swarm; a machine's view is its cluster as its GeoState lists it
//     (itself and its superpeer, or a superpeer's members), given when
//     that changes (geoView), the superpeer flagged, its own entry with
//     its own flapping flag, and with an election the matrix RTTs. Its
//     mates' flags come with the attach answers (GeoAnswer.Demoted). The
//     component views above still decide which token reports a node
//     hears (and when a gone node's expire).
//   - Token passes and attach requests reach the receiving machine half an
//     RTT (plus jitter) later; its machine decides, as the live stream
//     handlers do (TokenOffered, or a fresh GeoFeed and AttachAsked, with
//     the member's report for the search on measured RTTs; then
//     GeoAnswer, with the superpeer's candidates), and the answer
//     (PassDone, AttachDone) is back half an RTT later. To a node that is down or cut off, or when the answer
//     cannot come back (the asker crashed or was cut off meanwhile, or the
//     answer is lost, with probability Loss: the receiver took the token
//     or listed the member, the asker times out), the pass fails (PassDone
//     not OK) and the request has no answer (AttachDone with an error)
//     GeoTimeout after it was sent. A member that moved tells the
//     superpeer it left (GeoReady.Detach) by an attach request that says
//     so, which reaches it as the others do; nothing comes back.
//   - Stop (graceful) steps GeoLeave first and, as the live node's leave
//     does, carries out the pings and passes the machine then asks for,
//     one by one, until it asks for none: answered at once (a ping with
//     the matrix RTT, a pass by the recipient's machine).
//   - The node's State is its GeoState's role, superpeer and members (k
//     and cluster key zero): Covered and Take apply as they are, a split
//     brain being two live superpeers of one token. GeoConverged asks for
//     every live node covered and S superpeers with distinct tokens;
//     GeoQuality is the mean matrix RTT from the ordinary nodes to their
//     superpeer against random placement of as many superpeers (each
//     ordinary node attached to the nearest with room by the matrix, the
//     mean of many draws from a source of its own: measuring does not
//     change the run).
//
// Faults: Crash, Restart, Stop (graceful), Add (a new node joins),
// Partition and Heal, Isolate (a flap). A seed replays a run exactly: all
// randomness comes from it, and events run in (time, sequence) order.
//
// Measures (Sample, Observer): coverage (the live, joined nodes whose
// superpeer is alive, claims the role and is in the same cluster), orphans,
// split brain (two live claimers of one cluster), and per superpeer crash
// the failover time.
package nodesim
