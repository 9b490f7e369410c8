// Package geometric chooses superpeers where the peers are: Vivaldi network
// coordinates, S tokens that move through coordinate space until they
// settle, and attachment of ordinary peers to the nearest superpeer with
// room. Everything here is pure and deterministic, in the style of
// etcd-io/raft: no goroutines, clocks, sockets or global randomness. The
// overlay drives it with real pings and gossip; Simulate drives it in
// process over an RTT matrix.
//
// # Coordinates
//
// Client wraps hashicorp/serf's coordinate.Client (8 dimensions plus height,
// serf's defaults). Client.Sample rejects, without folding it in, an RTT
// outside (0, MaxRTT] and a remote coordinate that fails Valid (nil, wrong
// dimensionality, NaN or infinite components, components above MaxComponent
// seconds, negative height or error); gossip validators call Valid too.
// Client also keeps serf from drawing on the global math/rand source, so
// runs repeat exactly. On the 490-host PlanetLab matrix, 200 rounds of one
// sample per host give a median relative error of 7.9 % and a 90th
// percentile of 33.5 % (coord_test.go).
//
// # Tokens
//
// The S tokens start, without a coordinator, on the S peers with the
// smallest Score(roundSeed, id) (InitialHolders). Each holder runs a Holder
// state machine: it hears the positions of the other tokens by gossip
// (Observe), knows the coordinates of some peers (SetPeers, or SetPeerSpace
// for a list indexed once and shared by many holders, as in Simulate) and
// has a list of neighbours it may pass its token to (SetNeighbours).
//
// The force law. Let d(x, y) be the RTT estimated from coordinates
// (Distance: Euclidean distance of the Vec parts plus both heights, plus the
// adjustments; 0 from a peer to itself), r(x, y) the Euclidean distance of
// the Vec parts alone, T the holders of the other tokens that x hears (S−1
// of them once it hears every token), P the N known peers. The potential
// energy of the token when peer x holds it is
//
//	U(x) = (ρ²/|T|)·Σ_{t∈T} 1/(r(x,t)+ε)  +  A·(S/N)·Σ_{p∈P} min(d(x,p), min_{t∈T} d(p,t))
//
// and the force on it is F = −∇U, taken with respect to x's Vec:
//
//	F = (ρ²/|T|)·Σ_{t∈T} 1/(r(x,t)+ε)² · û(x−t)  +  A·(S/N)·Σ_{p∈cell(x)} û(p−x)
//
// where û is a unit vector and cell(x) are the peers nearer to x than to any
// other token. The attraction measures with the heights, because a host
// behind a slow access link is a worse superpeer whatever its direction:
// every peer it serves pays its height. The repulsion measures without
// them, and directions use Vec only, because height has no direction: a
// height h at x adds h to its distance from every token at once, which
// would lower the repulsion by about h times the sum of the magnitudes of
// the repulsive forces, forces that cancel in direction but not in
// magnitude. With heights in the repulsion, a host behind a slow link
// looked far from every token, and tokens settled on such hosts.
//
// Why this law. The first term is repulsion between like charges,
// inverse-square in the estimated distance as in Coulomb's law (the law of
// the Thomson problem, whose equilibria spread charges evenly), softened by
// ε so that it stays bounded on co-located hosts; Range ρ makes it a
// short-range push that keeps tokens off one another. It is the mean over
// the other tokens, not their sum: on a network of a given extent, the
// tokens near x, which make most of the sum, grow in number with S, while
// the pull on a token stays about A (its cell holds about N/S peers).
// Summed, the repulsion outgrew the attraction as S grew: it spread the
// tokens evenly over the space instead of with the peers, the superpeers of
// the dense regions filled up, and their peers attached far away. Repulsion
// alone is not enough either: nothing then holds the tokens among the
// peers, and they drift to the rim of the point cloud. Measured on
// PlanetLab with S = 10, pure repulsion (ρ = 20 ms) gives a mean RTT to the
// superpeer 2.3 times that of random placement (TestPureRepulsionIsWorse).
// The second term is that missing opposite charge, spread over the peers
// like the neutralising background of a plasma: every peer pulls the token
// nearest to it with the same force A·S/N. Its potential is the sum over
// the peers of the RTT to their nearest token, that is the k-median cost,
// so the dynamics lowers exactly the quantity attachment cares about;
// repulsion merely breaks ties between nearby spots.
//
// Measured on the synthetic networks of sim_scale_test.go (seed 1, S =
// N/100, C = 200, the default CoordRounds), against random placement
// attached the same way (20 draws; TestPlacementDiagnostics): with the repulsion summed over the
// tokens and measured with the heights, the mean RTT to the superpeer was
// 7.90 ms against 8.12 ms at N = 10,000, 13.9 against 6.5 at 30,000 and
// 19.9 against 5.6 at 100,000. At the median the repulsive forces on a
// token added up, in magnitude, to 0.42, 0.83 and 2.2, against a pull of
// 0.79, 0.14 and 0.08 (A·S/N times the peers nearest to it); capacity
// turned 7 %, 43 % and 69 % of the ordinary peers away from their nearest
// superpeer (3.5-6 % with random placement); and at 100,000 the median
// superpeer had a height of 1.95 ms against 0.17 ms for all hosts. With
// the law above: 6.75, 5.92 and 5.29 ms, with 0 %, 0 % and 3 % turned away
// and the median superpeer's height 0.06 ms at 100,000 (an offline
// k-medoids on the true RTTs, attached the same way, reaches 6.43 and 5.89
// ms at 10,000 and 30,000). The mean does nearly all of it: leaving the
// heights out alone gives 13.2 ms at 30,000, though it takes the median
// superpeer's height there from 0.71 to 0.06 ms. On PlanetLab (bench's
// judging, seeds 1-10) the mean RTT to the superpeer changed by −2 %, +1 %
// and −2 % for S = 10, 25 and 50, within the spread between seeds (single
// seeds from −32 % to +25 %, −7 % to +10 % and −14 % to +13 %).
//
// The scale. U is a sum of RTTs and of ρ²/(r+ε), and F is dimensionless,
// so the law is the same on a network whose RTTs are all f times
// another's once ρ, ε and the margins are f times theirs too
// (Config.Scaled, Holder.SetScale; TestScaleInvariance). The defaults are
// stated for a network of PlanetLab's scale (ScaleReference); taken as
// they are on a data centre's, whose RTTs are a hundredth of PlanetLab's,
// the repulsion dominates the pull and a pass must gain more than a
// cluster's whole cost: the node placed its superpeers at 2.2 times
// random placement's mean RTT there. Simulate scales them by ScaleFor of
// the median RTT of its network, a live node by that of the RTTs it keeps
// (overlay/node).
//
// The move rule. At a Tick, a holder considers its neighbours that hold no
// token and keeps only those that would lower U by at least Margin. When the
// net force exceeds Threshold, the token goes (Pass) to the one of them
// whose direction from the holder has the largest positive cosine with F:
// the step along the force. When the force is below Threshold, or no
// improving neighbour lies in its half-space, the token jumps to the
// neighbour with the lowest U, if any: the force is only the local slope,
// and a long link can reach a spot that is better although it lies behind
// (two tokens in one group of peers and none in the next: the force pushes
// the second token around its group, the jump takes it to the empty one;
// TestSimulateClusters). With neither, the token stays.
//
// Why it stops. U(y) − U(x) is exactly the change in the total energy of
// the system (every pair repulsion, ρ²/((S−1)(r+ε)) once the holders hear
// every token, plus the k-median term) when this one token moves, so every
// pass lowers the total by at least Margin: tokens that move one at a time
// cannot oscillate and stop after finitely many passes. Tokens that move
// at the same moment on stale positions can undo each other's gain; the
// drivers tick holders at different moments. On live nodes the
// coordinates never stand still: every fresh snapshot moves the optimum a
// little, and the argument no longer holds. Cooling (Config.Cooling) makes
// it hold again: after Cooling passes since its placement, every further
// pass of a token doubles the margin its next pass must buy, so that each
// token makes a bounded number of passes whatever the coordinates do. In
// the simulator on PlanetLab (seed 1, S = 10, 22 and 50) the placements are
// the same with Cooling = 4 or 8 as without cooling; with 1 or 2 the mean
// RTT to the superpeer moves by 2.5 % at most, either way. (With the
// repulsion summed over the tokens, Cooling = 1 or 2 left the S = 10
// placement stuck 30 % worse.)
//
// Roles. A holder that has held its token without interruption for Dwell
// promotes itself to superpeer (Promote); one that passes or loses its token
// is demoted (Demote). A superpeer that leaves passes its token to its
// nearest free neighbour, or outputs Release when it has none, and the
// driver re-homes the token with Rehome, so that the count stays S.
//
// # Attachment
//
// An ordinary peer attaches to the nearest superpeer with room (Attach),
// nearness being a measured RTT where the caller has one and the coordinate
// estimate otherwise; each superpeer serves at most Capacity ordinary peers.
// AttachAll does the same offline for every peer at once, greedily in order
// of distance.
//
// # Lying peers
//
// A peer may publish a false coordinate, say at the spot where a token
// settles and with no height, so that tokens pass to it and ordinary peers
// attach to it. It cannot make the RTTs others measure to it shorter than
// the network makes them, so Plausible compares the RTT a claimed
// coordinate predicts with the one measured, within a Tolerance, and
// VetClaim trusts a claim that a majority of checks find plausible. In
// bench.GeometricAttack, which measures the attack and the defence, a
// distrusted peer holds no token and serves as no superpeer; the live
// driver (package overlay) does not apply the check yet.
//
// # Placement by measured RTTs
//
// Coordinates find the neighbourhood of a good superpeer; the last step
// uses what the peers measure (swap.go). A superpeer asks its members for
// their RTTs to a few candidates of its cluster and hands its role to the
// one that lowers the cluster's mean RTT by more than a margin (Swap,
// Candidates); and the superpeers exchange summaries of their clusters
// (Summarize) from which a token moves from a cluster that would lose
// little without its superpeer to a member of another that would gain
// much from a second one (Relocate, OutlyingCandidates). Every claim of a
// member is clamped by the triangle inequality to the RTT the superpeer
// measures itself, so one member's lie moves a decision by a bounded
// amount. A member may also report its next superpeer, and Swap then
// counts its loss from a candidate only up to what it loses by going
// there; and the members of neighbouring clusters whose next superpeer
// it is report what a candidate would gain them (SwapReport.Outside). On
// PlanetLab the placement then comes within 0.77, 1.02 and 1.05 times the
// offline k-median at S = 10, 25 and 49 (seed 1; 0.77 to 0.81, 1.00 to
// 1.03 and 1.04 to 1.07 over seeds 1 to 10), and 1.01 on the synthetic
// 10,000 hosts at S = 100 (1.12, 1.29, 1.62 and 1.07 for the coordinates
// alone; bench's selection suite, TestPlacementWithinOffline). At S = 10
// it beats the offline k-median, which ignores capacity. Those figures
// take Simulate's margin (SimSwapConfig: 0.05 ms plus 0.1 %, the
// simulator's RTTs being exact); with the live node's (DefaultSwapConfig,
// 0.5 ms plus 2 %) S = 49 comes to 1.06 to 1.12. The node machine
// (overlay/node's geoswap.go) runs Swap, with DefaultSwapConfig, its
// members' reports naming their next superpeers but without outsiders;
// and Summarize and Relocate (georelocate.go), each superpeer publishing
// its summary with its token report and deciding for its own token.
//
// # Simulation
//
// Simulate fits coordinates, runs the token dynamics round by round with
// Holders, runs the search on measured RTTs and attaches everyone, for n peers and any RTT function; see its
// documentation for the model and sim_test.go for figures on PlanetLab. It
// handles 100,000 peers (sim_scale_test.go): the attraction term, the
// nearest neighbours and the attachment use indexes over the coordinates
// (PeerSpace, pivotIndex, ballTree, tokenIndex) whose answers are those of
// the plain scans, so that results on small networks are the same to the
// bit as without them.
package geometric
