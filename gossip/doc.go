// Package gossip holds the overlay's GossipSub topics and their validators.
//
// The membership topic carries each peer's announcement of itself: its
// addresses, whether it is a superpeer, and its cluster (k and cluster key).
// Peers announce periodically and whenever their role or cluster changes, so
// superpeers learn their members and members learn their superpeer's
// addresses. An announcement's sender is the message's signed origin, never a
// field of the payload; the validator rejects payloads that are malformed or
// whose cluster key does not follow from the sender's ID, and ignores stale
// ones. Entries expire when their peer stops announcing, or at once when it
// says goodbye (Membership.Leave, which a closing node calls).
//
// View is the pure membership table (explicit time, no I/O); Membership
// drives it from a GossipSub topic.
//
// The geometric strategy adds the tokens topic (Geo, JoinGeo), on which a
// token holder publishes the token it holds (its number and pass counter),
// its coordinate, whether it is a superpeer yet, and its load and capacity.
// Only holders publish; no other coordinate is gossiped (a member sends its
// own to its superpeer: overlay/node's geocoords.go). The validator rejects
// malformed payloads, unknown versions and coordinates that fail
// geometric.Valid (NaN, infinite or absurd components, the wrong
// dimension), and ignores stale ones; the sender is the signed origin.
// Only holders should publish, but anyone can: the reports kept are
// bounded, a few per token of the network's S (GeoConfig.Tokens,
// PerToken), and a flood under fresh keys evicts none that count
// (GeoConfig.Protect names the ones kept first). The tokens topic is the
// backbone of the token reports; each cluster has a topic of its own too
// (ClusterTopic, JoinGeoCluster), with the same payloads and checks, on
// which its superpeer and the holders attached to it publish as well: the
// cluster's ordinary members read that one instead of the backbone, so
// that what they hear follows their cluster, not the swarm (overlay/node's
// geobackbone.go says who reads which).
//
// The backbone topic (Backbone, JoinBackbone) is the superpeers' own: only
// superpeers join it, and each publishes a summary of its cluster (k, size,
// its estimate of the network's size, its election term), from which
// dhtselect.EstimateFromClusters sums the network's size (ClusterSizes
// converts). The cluster key is not on the wire: it is the origin's key
// masked to k, so a superpeer speaks only for its own cluster. A superpeer
// that steps down closes its Backbone, which says goodbye (Summary.Leaving).
//
// All these topics share one generic driver (feed.go): topic, validator,
// per-origin sequence numbers and tombstones, receive loop, periodic
// republishing and expiry. View is its table of announcements, and a
// goodbye is a feed's last word (published on every interval after Leave).
package gossip
