package attack

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/gossip"
)

// ID grinding (issue 19, finding 5): in DHT mode the superpeer of a
// cluster was the member whose Kademlia key is closest to the cluster key,
// so a peer that generates key pairs until its key falls there serves the
// cluster as soon as it joins. It needs no lie on the wire: the overlay's
// own code, run with a ground identity, is the attack (Join). Against the
// defence (overlay.Config.Epoch) it aims at the cluster's salted target
// of the epoch instead, if it knows it; either way its ID is new, and not
// eligible before two epochs have passed (overlay/node's MinAge).

// Ground is a ground identity: its key pair, its peer ID, its Kademlia key,
// and how many key pairs were generated to find it.
type Ground struct {
	Key   crypto.PrivKey
	ID    peer.ID
	KadID dhtselect.Key
	Tries int
}

// Grind generates tries Ed25519 key pairs (fewer if ctx ends first) and
// returns the one whose peer ID's Kademlia key (dhtselect.KeyOf, as kad-dht
// computes it) is closest to target: a cluster key (dhtselect.Key.Cluster),
// or a cluster's salted target (dhtselect.SaltedTarget). Against c honest
// members of a cluster, some c tries find a key closer than all of them;
// the finding's 1.5 million tries (15 s on one core) beat a cluster of a
// million.
func Grind(ctx context.Context, target dhtselect.Key, tries int) (Ground, error) {
	var best Ground
	for i := range max(tries, 1) {
		if i%256 == 0 && ctx.Err() != nil {
			break
		}
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			return best, fmt.Errorf("attack: grind: %w", err)
		}
		id, err := peer.IDFromPrivateKey(k)
		if err != nil {
			return best, fmt.Errorf("attack: grind: %w", err)
		}
		kid := dhtselect.KeyOf(id)
		if best.Key == nil || dhtselect.Closer(kid, best.KadID, target) {
			best = Ground{Key: k, ID: id, KadID: kid}
		}
		best.Tries = i + 1
	}
	if best.Key == nil {
		return best, fmt.Errorf("attack: grind: %w", ctx.Err())
	}
	return best, nil
}

// Listener reads a cluster's roster as an outsider can (Listen).
type Listener struct {
	roster *Roster
	cancel context.CancelFunc
	done   chan struct{}
}

// Listen reads the roster of the cluster of h on network every second,
// as a member: any peer whose key falls in a cluster may register with
// its superpeer, and a superpeer sends its roster, every member's sealed
// announcement, the salts included, to its members (Roster). Connect h
// to the overlay's nodes first (those an outsider knows the addresses
// of): it asks them which serves its cluster, dials a superpeer one of
// them names at the addresses h knows, and registers there an
// announcement of its own at the superpeer's k (from its digest) that
// says it is private, so that the members rank it last in their
// elections: it only listens. After the first snapshot it refreshes
// without a record, and each read is a delta since the roster it holds
// (none of the superpeer's record rate or snapshot budget). Close the
// Listener when done: the superpeer drops h after its TTL.
//
// It once read the roster without joining, by sending a sealed goodbye
// (h leaves, so it never entered the roster), which the superpeer
// answered with the whole roster; now a stranger's goodbye is refused
// (RegNotMember), and the only read left is a member's.
func Listen(ctx context.Context, h host.Host, network string) (*Listener, error) {
	if h.Peerstore().PrivKey(h.ID()) == nil {
		return nil, fmt.Errorf("attack: listen: no private key for %s", h.ID())
	}
	r := newRoster(h, network, nil)
	r.recordAt = func(k int) ([]byte, error) {
		return seal(h, gossip.Announcement{ID: h.ID(), Addrs: h.Addrs(), K: k, ClusterKey: dhtselect.KeyOf(h.ID()).Cluster(k),
			Private: true, Seq: uint64(time.Now().UnixNano())})
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &Listener{roster: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.roster.run(ctx, time.Second)
	}()
	return l, nil
}

// Entries are the members' announcements of the last roster read (the
// superpeer's included), sorted by ID.
func (l *Listener) Entries() []gossip.Entry { return l.roster.Entries() }

// Roster is the listener's registration: its superpeer, digest and
// roster.
func (l *Listener) Roster() *Roster { return l.roster }

// Close stops reading.
func (l *Listener) Close() error {
	l.cancel()
	<-l.done
	return nil
}

// SaltedTarget is the target of the cluster ck (k bits) that its members
// announce for the latest epoch any of them announces a salt for: the salt
// most of them announce (a tie to the smaller, as the members take it),
// and false when none announces one (no defence: aim at ck).
func SaltedTarget(entries []gossip.Entry, ck dhtselect.Key, k int) (dhtselect.Key, bool) {
	var latest uint64
	counts := map[dhtselect.Salt]int{}
	for _, e := range entries {
		b := e.Beacon
		if b.Salt == (dhtselect.Salt{}) || b.K != k || b.Cluster != ck || b.SaltEpoch < latest {
			continue
		}
		if b.SaltEpoch > latest {
			latest, counts = b.SaltEpoch, map[dhtselect.Salt]int{}
		}
		counts[b.Salt]++
	}
	var best dhtselect.Salt
	most := 0
	for s, c := range counts {
		if c > most || c == most && bytes.Compare(s[:], best[:]) < 0 {
			best, most = s, c
		}
	}
	if most == 0 {
		return ck, false
	}
	return dhtselect.SaltedTarget(ck, k, best), true
}
