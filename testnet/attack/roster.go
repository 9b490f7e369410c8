package attack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"

	"github.com/superpeer/superpeer/gossip"
)

// Roster is an attacker's end of the register protocol (register.go): it
// finds the superpeer of its host's cluster, sends it a sealed
// announcement of its own, and keeps the roster the superpeer answers
// with, as the overlay's registrar does (overlay/register.go): the host
// is a member of the cluster, refreshing without the record once the
// superpeer holds it. (A superpeer sends its roster to its members only:
// a goodbye from a stranger, which once read the roster without entering
// it, is refused, RegNotMember.)
type Roster struct {
	h       host.Host
	network string
	record  []byte // the sealed announcement sent
	// recordAt, when set, seals the record at the superpeer's k, once
	// the superpeer is found (Listen: the digest says k).
	recordAt func(k int) ([]byte, error)
	k        int // the k record was sealed at by recordAt

	mu       sync.Mutex
	sp       peer.ID // the superpeer registered with, or none yet
	hint     peer.ID // a superpeer named by a node that serves none
	held     bool    // sp holds our record
	rid, ver uint64
	view     map[peer.ID]gossip.Entry
	dig      Digest
	hasDig   bool
	last     RegStatus
	err      error // the last round's
}

// errNoSuperpeer: none of the host's peers serves its cluster (yet).
var errNoSuperpeer = errors.New("attack: register: no superpeer of the host's cluster found among its peers")

// newRoster returns the roster of h on network, registering the sealed
// announcement record.
func newRoster(h host.Host, network string, record []byte) *Roster {
	return &Roster{h: h, network: network, record: record, view: map[peer.ID]gossip.Entry{}}
}

// seal seals a with h's key.
func seal(h host.Host, a gossip.Announcement) ([]byte, error) {
	key := h.Peerstore().PrivKey(h.ID())
	if key == nil {
		return nil, fmt.Errorf("attack: no private key for %s", h.ID())
	}
	return gossip.SealAnnouncement(a, key)
}

// Superpeer is the superpeer registered with, or none.
func (r *Roster) Superpeer() peer.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sp
}

// Digest is the last digest heard, and whether there is one.
func (r *Roster) Digest() (Digest, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dig, r.hasDig
}

// Last is the last answer's status.
func (r *Roster) Last() RegStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Err is the last round's error (nil: the superpeer took it).
func (r *Roster) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Entries are the roster's entries (the superpeer's included, the host's
// own left out), sorted by ID.
func (r *Roster) Entries() []gossip.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]gossip.Entry, 0, len(r.view))
	for _, e := range r.view {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b gossip.Entry) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Round is one registration: it finds the superpeer if it has none, and
// sends its record (or, a member the superpeer holds, a refresh),
// reading every page of the answer.
func (r *Roster) Round(ctx context.Context) error {
	r.mu.Lock()
	sp := r.sp
	r.mu.Unlock()
	if sp == "" {
		var d Digest
		if sp, d = r.find(ctx); sp == "" {
			return errNoSuperpeer
		}
		r.mu.Lock()
		r.sp, r.held, r.rid, r.ver = sp, false, 0, 0
		if r.recordAt != nil && (r.record == nil || r.k != d.K) {
			rec, err := r.recordAt(d.K)
			if err != nil {
				r.sp = ""
				r.mu.Unlock()
				return err
			}
			r.record, r.k = rec, d.K
		}
		r.mu.Unlock()
	}
	for range maxPages {
		r.mu.Lock()
		rec := r.record
		if r.held {
			rec = nil // a refresh
		}
		req := RegisterRequest(r.rid, r.ver, rec)
		r.mu.Unlock()
		rep, err := Register(ctx, r.h, sp, r.network, req)
		if err != nil {
			return err
		}
		more, err := r.apply(sp, rep, rec != nil)
		if err != nil || !more {
			return err
		}
	}
	return fmt.Errorf("%w: more than %d pages", errReply, maxPages)
}

// find asks the host's peers (a hint first) which of them serves the
// host's cluster: a request with no record and no roster, which a
// superpeer answers with its digest (RegNeedRecord) and any other node
// with the superpeer it follows (RegNotSuperpeer); and the superpeer's
// digest.
func (r *Roster) find(ctx context.Context) (peer.ID, Digest) {
	r.mu.Lock()
	queue := []peer.ID{}
	if r.hint != "" {
		queue = append(queue, r.hint)
	}
	r.hint = ""
	r.mu.Unlock()
	queue = append(queue, r.h.Network().Peers()...)
	asked := map[peer.ID]bool{r.h.ID(): true}
	for len(queue) > 0 && len(asked) <= 64 && ctx.Err() == nil {
		p := queue[0]
		queue = queue[1:]
		if asked[p] {
			continue
		}
		asked[p] = true
		rep, err := Register(ctx, r.h, p, r.network, RegisterRequest(0, 0, nil))
		switch {
		case err != nil:
		case rep.Status == RegNotSuperpeer:
			if rep.Hint != "" && !asked[rep.Hint] {
				queue = append([]peer.ID{rep.Hint}, queue...)
			}
		case rep.Digest.In(r.h.ID()):
			return p, rep.Digest
		}
	}
	return "", Digest{}
}

// apply applies sp's answer rep to a request that sent the record or
// not: whether another request follows (a page, or the record sp asked
// for), or an error for a refusal or an answer that contradicts itself.
func (r *Roster) apply(sp peer.ID, rep RegisterReply, sent bool) (more bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = rep.Status
	switch s := rep.Status; {
	case s == RegNeedRecord && !sent:
		r.held = false // sp lost our record (expired us, or restarted): send it
		return true, nil
	case s == RegNeedRecord:
		return false, fmt.Errorf("%w: %s asked for the record it was sent", errReply, sp)
	case s == RegNotSuperpeer, s == RegWrongCluster:
		r.sp, r.held, r.rid, r.ver, r.hint = "", false, 0, 0, rep.Hint
		return false, fmt.Errorf("attack: register: refused by %s: %v", sp, s)
	case s.refusal():
		r.dig, r.hasDig = rep.Digest, true
		if s != RegTooSoon {
			r.held = false
		}
		return false, fmt.Errorf("attack: register: refused by %s: %v", sp, s)
	}
	if !rep.Digest.In(r.h.ID()) {
		return false, fmt.Errorf("%w: %s took us into the cluster %s at k = %d", errReply, sp, rep.Digest.ClusterKey, rep.Digest.K)
	}
	switch {
	case rep.Status == RegUnchanged && (rep.RosterID != r.rid || rep.Version != r.ver):
		return false, fmt.Errorf("%w: unchanged, for roster %d version %d; we hold %d version %d", errReply, rep.RosterID, rep.Version, r.rid, r.ver)
	case rep.Status == RegDelta && rep.RosterID != r.rid:
		return false, fmt.Errorf("%w: a delta of roster %d; we hold %d", errReply, rep.RosterID, r.rid)
	case rep.Status == RegSnapshot:
		r.view = map[peer.ID]gossip.Entry{}
	}
	r.dig, r.hasDig, r.rid, r.ver = rep.Digest, true, rep.RosterID, rep.Version
	if sent {
		r.held = true
	}
	now := time.Now()
	for _, b := range rep.Entries {
		a, err := gossip.OpenAnnouncement(b)
		switch {
		case err != nil, a.ID != sp && !rep.Digest.In(a.ID), a.ID == r.h.ID():
		case a.Leaving:
			delete(r.view, a.ID)
		default:
			if old, ok := r.view[a.ID]; !ok || a.Seq >= old.Seq {
				r.view[a.ID] = gossip.Entry{Announcement: a, Seen: now}
			}
			r.h.Peerstore().AddAddrs(a.ID, a.Addrs, peerstore.RecentlyConnectedAddrTTL)
		}
	}
	for _, p := range rep.Removed {
		delete(r.view, p)
	}
	return rep.More, nil
}

// run calls Round at once and then every interval until ctx ends.
func (r *Roster) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := r.Round(ctx)
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
