// Package bench measures the overlay against baselines computed in the same
// run, and is the engine of `peer bench`.
//
// Run runs the suites and returns Results (the JSON file of every figure);
// DrawPlots draws their PNG charts (gonum/plot); WriteTables and
// WriteMarkdown print them for a terminal and for BENCHMARKS.md.
// WriteMarkdown writes every part of the report between marker lines, and
// MergeMarkdown puts a new report into an old one: it replaces the old
// report's generated blocks and keeps the text written by hand between them.
// The suites:
//
//   - selection: both strategies (GeometricStrategy, DHTStrategy) on the
//     PlanetLab matrix and on Synthetic networks, judged by SelectionCase
//     against random placement and an offline placement that knows every
//     RTT (KMedian, KMedoids);
//   - election: one election per algorithm and cluster size in the
//     simulator, against the textbook message count (Election);
//   - repair: failover and churn per algorithm, on node machines (package
//     overlay/node) in the node simulator of testnet/nodesim (Repair), on
//     live testnets (LiveRepair), and one scenario on both side by side
//     (SimLive);
//   - scale: time, memory and messages as n grows: the selection
//     simulators up to 100,000 peers (SimScale), node machines in the node
//     simulator up to 10,000 (NodeScale: convergence, and churn with an
//     election), and live testnets (LiveScale), with the steady-state
//     traffic per peer counted by protocol;
//   - attack: lying peers in the simulator, a fraction f of them grinding
//     their IDs (DHTAttack) or publishing false coordinates
//     (GeometricAttack), before and after the defences (keys salted per
//     epoch; coordinates checked against measured RTTs): the share of the
//     superpeer roles the liars take and the honest peers' RTT to their
//     superpeer.
package bench
