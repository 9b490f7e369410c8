package overlay

import (
	"fmt"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Bad gossip and GossipSub peer scoring (for the router the node builds;
// an application's router, WithPubSub, keeps its own scoring).
//
// A message our validators reject (malformed, forged, of another peer's
// cluster; see package gossip) is a strike against the peer that sent it
// to us, on the same ban list as the stream protocols (wire.go):
// GossipSub validates before it forwards, so an honest peer sends none,
// and five within a minute ban the sender. A banned peer's application
// score graylists it, so that the router ignores everything it sends while
// the ban lasts, and its announcements are ignored whoever relays them.
//
// GossipSub's own penalty for invalid messages (P4) stays off: it also
// counts messages that claim to come from the receiver itself, and a node
// restarted with the same identity receives its previous life's messages
// from every peer that still relays them; with P4 on it graylisted them
// all and was not heard for minutes (TestRestartRejoins failed 1 time in
// 16). The other components stay off too: all peers of a testnet share
// one IP address (P6 would punish them), and the mesh-delivery rates (P3)
// need tuning to each topic's rate. With the gossip factor at 0 (see
// gossipSubParams) IHAVE gossip goes to Dlazy peers above the gossip
// threshold: scoring keeps banned peers out of it, which is part of what
// the factor's v1.1 default defends against; the rest (many Sybils that
// behave) it does not.
const (
	bannedScore       = -10000
	gossipThreshold   = -500
	publishThreshold  = -1000
	graylistThreshold = -2500
)

// peerScore returns the scoring option for the node's GossipSub.
func (n *Node) peerScore() pubsub.Option {
	params := &pubsub.PeerScoreParams{
		SkipAtomicValidation: true,
		AppSpecificScore: func(p peer.ID) float64 {
			if n.guard.Banned(p) {
				return bannedScore
			}
			return 0
		},
		AppSpecificWeight: 1,
		DecayInterval:     time.Second,
		DecayToZero:       0.01,
	}
	return pubsub.WithPeerScore(params, &pubsub.PeerScoreThresholds{
		SkipAtomicValidation: true,
		GossipThreshold:      gossipThreshold,
		PublishThreshold:     publishThreshold,
		GraylistThreshold:    graylistThreshold,
	})
}

// gossipRejected counts a rejected message on topic against the peer that
// sent it (see above).
func (n *Node) gossipRejected(topic string) func(peer.ID, error) {
	return func(from peer.ID, err error) {
		n.guard.refuse(n, topic, from, fmt.Errorf("%w: %w", errWire, err))
	}
}
