package overlay

import (
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/gossip"
)

// GossipSub peer scoring on the overlay's topics (for the router the node
// builds; an application's router, WithPubSub, keeps its own). Two
// parts of v1.1's score count, and nothing else:
//
//   - P4, invalid messages: every message our validators reject (malformed,
//     forged, of another peer's cluster; see package gossip) costs its
//     sender invalidWeight times the square of its count, decaying by
//     invalidDecay a second. GossipSub validates before it forwards, so an
//     honest peer never sends one. Four rejects take a peer below the
//     graylist threshold, where the router ignores everything it sends.
//   - The application's score: a peer banned on the stream protocols
//     (wire.go) is graylisted while the ban lasts.
//
// The other components stay off: all peers of a testnet share one IP
// address (P6 would punish them), and the mesh-delivery rates (P3) need
// tuning to each topic's rate. With the gossip factor at 0 (see
// gossipSubParams) IHAVE gossip goes to Dlazy peers that are above the
// gossip threshold: scoring keeps graylisted peers out of it, which is
// part of what the factor's v1.1 default defends against; the rest (many
// Sybils that behave) it does not.
const (
	invalidWeight     = -200
	invalidDecay      = 0.99
	bannedScore       = -10000
	gossipThreshold   = -500
	publishThreshold  = -1000
	graylistThreshold = -2500
)

// peerScore returns the scoring option for the node's GossipSub.
func (n *Node) peerScore() pubsub.Option {
	topic := &pubsub.TopicScoreParams{
		SkipAtomicValidation:           true,
		TopicWeight:                    1,
		TimeInMeshQuantum:              time.Second, // unused (weight 0), but pubsub divides by it
		InvalidMessageDeliveriesWeight: invalidWeight,
		InvalidMessageDeliveriesDecay:  invalidDecay,
	}
	params := &pubsub.PeerScoreParams{
		SkipAtomicValidation: true,
		Topics:               map[string]*pubsub.TopicScoreParams{},
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
	for _, name := range []string{gossip.MembershipTopic(n.cfg.Network), gossip.CoordTopic(n.cfg.Network), gossip.TokenTopic(n.cfg.Network)} {
		params.Topics[name] = topic
	}
	return pubsub.WithPeerScore(params, &pubsub.PeerScoreThresholds{
		SkipAtomicValidation: true,
		GossipThreshold:      gossipThreshold,
		PublishThreshold:     publishThreshold,
		GraylistThreshold:    graylistThreshold,
	})
}
