package overlay

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A roster by digest (issue 20: what an ordinary peer sends and keeps
// follows its cluster). A geometric member renews its attachment once per
// announce interval, and its superpeer's yes carried the whole roster
// every time: 39 bytes a member, 0.66 KB an answer for a cluster of 16,
// that had changed in few of them. Now a member that holds a roster from
// the superpeer it asks sends that roster's digest (attachKnown: the first
// rosterDigestSize bytes of the SHA-256 of the cluster and the demoted
// peers, as appendIDs writes them), and a superpeer whose roster has that
// digest answers with an empty cluster and an empty demoted list: the
// member's own. The superpeer keeps nothing per member, and an answer
// lost on the way costs nothing: the next request names the roster the
// member holds. It is the wire's business only: the machine's answer
// (node.GeoAnswer) and the member's AttachDone carry the whole roster as
// before.

// rosterDigestSize is the size of a roster's digest in an attach request.
// A collision needs a superpeer's cooperation to matter, and a superpeer
// lies about its roster at will anyway.
const rosterDigestSize = 8

// rosterDigest is the digest of a roster as an attach answer carries it:
// its cluster and its demoted peers.
func rosterDigest(cluster, demoted []peer.ID) []byte {
	sum := sha256.Sum256(appendIDs(appendIDs(nil, cluster), demoted))
	return sum[:rosterDigestSize]
}

// heldRoster is the roster a member holds from superpeer from: that of
// its last yes, and the roster's digest.
type heldRoster struct {
	from             peer.ID
	digest           []byte
	cluster, demoted []peer.ID
}

// of is the roster that superpeer p's answer of an empty cluster stands
// for: h's, if p is h's superpeer (h nil: none held).
func (h *heldRoster) of(p peer.ID) (cluster, demoted []peer.ID, ok bool) {
	if h == nil || h.from != p {
		return nil, nil, false
	}
	return slices.Clone(h.cluster), slices.Clone(h.demoted), true
}

// rosters is the member's held roster, for the attach requests that run
// at once (geo.requestAttach).
type rosters struct {
	mu   sync.Mutex
	held *heldRoster
}

// get returns the roster held from p, nil if none.
func (r *rosters) get(p peer.ID) *heldRoster {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil || r.held.from != p {
		return nil
	}
	return r.held
}

// keep holds the roster of p's last yes (sent in full, or named by the
// digest and read from what was held).
func (r *rosters) keep(p peer.ID, cluster, demoted []peer.ID) {
	h := &heldRoster{from: p, digest: rosterDigest(cluster, demoted), cluster: slices.Clone(cluster), demoted: slices.Clone(demoted)}
	r.mu.Lock()
	r.held = h
	r.mu.Unlock()
}

// sameRoster reports whether a roster's digest is known, the digest an
// attach request carried (nil: none).
func sameRoster(known []byte, cluster, demoted []peer.ID) bool {
	return known != nil && bytes.Equal(known, rosterDigest(cluster, demoted))
}
