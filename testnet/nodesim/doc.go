// Package nodesim runs node machines (package overlay/node), the very type
// the live overlay node runs, on a deterministic simulated network in
// virtual time: thousands of them on one core.
//
// What is simulated, and how (the oracles stand where the live node does
// I/O):
//
//   - Time: virtual, starting at 0 (the machines see Epoch plus it). Each
//     node's driver ticks its machine every ElectionTick, from a phase drawn
//     from the seed, and gives it a fresh Routing when the machine says an
//     evaluation is due, as the live loop does.
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
//     goodbye, and leaves them after GossipDelay. Views are delivered to a
//     machine at most once per ViewPeriod (the live loop coalesces the
//     topic's change signals as well), and one view slice is shared by all
//     the machines of a component: memory stays O(N) per view change, not
//     O(N^2).
//   - The routing table (kad-dht): each node knows its RoutingClose nearest
//     peers by XOR distance and RoutingRandom others drawn from the seed,
//     among the nodes alive when it starts; a peer counts as connected while
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
//   - Disk: the hard state and the outages a machine asks to persist are
//     kept per node, and a restarted node gets them back (and knows that
//     it ran before).
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
