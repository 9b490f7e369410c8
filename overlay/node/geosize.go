package node

import (
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
)

// The network's size under the geometric strategy (GeoState.Size). The
// strategy places a fixed number of tokens and decides nothing by the
// size; the estimate is what a node reports (status, metrics), as the DHT
// strategy's nodes do.
//
//   - A superpeer, which hears every holder's report on the backbone,
//     sums its superpeers' clusters: each superpeer and the ordinary peers
//     it reports serving (its load, at most Capacity: a report's load is
//     its author's claim), its own cluster by its own count
//     (SourceBackbone). A holder in transit is an ordinary peer attached
//     to some superpeer, and counted in that superpeer's load; a peer
//     attached to none is not counted.
//   - A member takes its superpeer's sum from the superpeer's last yes
//     (GeoAnswer.Size, AttachDone.Size: SourceDigest, as a member of the
//     DHT strategy takes its superpeer's digest), no less than its
//     cluster and no more than the tokens' clusters can hold, Tokens × (1
//     + Capacity): a superpeer is a stranger, and its sum its claim.
//   - A node attached to no superpeer has no estimate (N 0).

// backboneSize is a superpeer's sum of the clusters it hears of (above).
func (g *geoMachine) backboneSize() int {
	n := 1 + g.load()
	for _, tp := range g.feed.Tokens {
		if tp.Superpeer && tp.Holder != g.self() {
			n += g.reportedCluster(tp)
		}
	}
	return n
}

// sizeHeard keeps the size estimate in superpeer sp's yes, with the
// cluster it named (mates, this node among them).
func (g *geoMachine) sizeHeard(sp peer.ID, n int, mates []peer.ID) {
	g.sizeOf = sp
	g.sizeN = min(max(n, len(mates)), g.tc.Tokens*(1+g.tc.Capacity))
}

// size is the node's estimate of the network's size now (above).
func (g *geoMachine) size() dhtselect.Estimate {
	switch {
	case g.holder.Superpeer():
		return dhtselect.Estimate{N: g.backboneSize(), Source: dhtselect.SourceBackbone}
	case g.attached != "" && g.attached == g.sizeOf && g.sizeN > 0:
		return dhtselect.Estimate{N: g.sizeN, Source: SourceDigest}
	}
	return dhtselect.Estimate{}
}
