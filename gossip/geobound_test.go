package gossip

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
)

// ghostID is the i-th of a flood's throwaway peer IDs.
func ghostID(t *testing.T, i int) peer.ID {
	t.Helper()
	h := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("ghost"), uint64(i)))
	id, err := peer.IDFromBytes(append([]byte{0x00, 0x20}, h[:]...))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// holds reports whether p's report is among g's.
func holds(g *Geo, p peer.ID) bool {
	for _, r := range g.Reports() {
		if r.Holder == p {
			return true
		}
	}
	return false
}

// The token topic's reports are bounded (hostile-peer audit, finding B:
// anyone may publish on it under throwaway keys, and the table kept every
// report for the TTL and handed all of them to the node machine with
// every feed). 10,000 placements of token 0 under fresh keys leave
// DefaultPerToken reports of it, the holder's among them; the rest are
// ignored (not relayed) as crowded. Once they expire, the room is free
// again. On the code before, all 10,001 were kept.
func TestGeoReportsBounded(t *testing.T) {
	self, a := fakeID(t, 1), fakeID(t, 2)
	g, clk := offlineGeo(t, self, -1)
	if r := offer(g.tokens, a, tokenMsg(t, 1, 0, 1, false)); r != pubsub.ValidationAccept {
		t.Fatalf("the holder's report: %v", r)
	}
	const flood = 10_000
	accepted := 0
	for i := range flood {
		if offer(g.tokens, ghostID(t, i), tokenMsg(t, 1, 0, 2, false)) == pubsub.ValidationAccept {
			accepted++
		}
	}
	reports := g.Reports()
	t.Logf("%d reports of token 0 under fresh keys: %d accepted, %d kept", flood, accepted, len(reports))
	if len(reports) != DefaultPerToken || len(g.tokens.tab.recs) != DefaultPerToken {
		t.Errorf("%d reports shown, %d records kept; want %d", len(reports), len(g.tokens.tab.recs), DefaultPerToken)
	}
	if !holds(g, a) {
		t.Error("the flood evicted the holder's report")
	}
	if s := g.Stats(); s.Crowded != flood-DefaultPerToken+1 || s.Accepted != DefaultPerToken {
		t.Errorf("stats %+v, want %d crowded out", s, flood-DefaultPerToken+1)
	}
	// The holder's refreshes are taken.
	if r := offer(g.tokens, a, tokenMsg(t, 2, 0, 1, false)); r != pubsub.ValidationAccept {
		t.Errorf("the holder's refresh: %v", r)
	}
	// A ghost that releases its report makes room for another.
	if r := offer(g.tokens, ghostID(t, 0), tokenMsg(t, 2, 0, 2, true)); r != pubsub.ValidationAccept {
		t.Errorf("a ghost's release: %v", r)
	}
	if r := offer(g.tokens, ghostID(t, flood+1), tokenMsg(t, 1, 0, 2, false)); r != pubsub.ValidationAccept || len(g.Reports()) != DefaultPerToken {
		t.Errorf("a report once a ghost released its own: %v, %d reports shown", r, len(g.Reports()))
	}
	// Past the TTL the ghosts' room is free for others.
	clk.advance(g.cfg.TTL + time.Second)
	if r := offer(g.tokens, ghostID(t, flood), tokenMsg(t, 1, 0, 2, false)); r != pubsub.ValidationAccept {
		t.Errorf("a report once the flood expired: %v", r)
	}
	if len(g.tokens.tab.recs) > DefaultPerToken {
		t.Errorf("%d records kept, want at most %d", len(g.tokens.tab.recs), DefaultPerToken)
	}
}

// With the token count and Protect (the holders the node believes), a
// report of a token out of range is ignored; a flood under fresh keys
// fills token 0's room and evicts nothing; the pass the believed holder a
// signed to k gets in all the same, in place of the newest ghost; and the
// report of one whose giver no one believes does not.
func TestGeoProtectedReports(t *testing.T) {
	key := func(i byte) (crypto.PrivKey, peer.ID) { return seededKey(t, i) }
	self := fakeID(t, 1)
	aKey, a := key(1)
	zKey, _ := key(3)
	_, k := key(2)
	believed := map[peer.ID]bool{a: true}
	clk := &clock{t: time.Unix(1_000_000, 0)}
	g, fc, err := newGeo(self, GeoConfig{Network: "test", Interval: time.Second, MinGap: -1, Now: clk.now,
		Tokens: 2, PerToken: 4, Protect: func(holder, giver peer.ID) bool { return believed[holder] || believed[giver] }})
	if err != nil {
		t.Fatal(err)
	}
	g.tokens = newFeed(fc, &tokenSpec, g.lim)
	if r := offer(g.tokens, fakeID(t, 9), tokenMsg(t, 1, 2, 1, false)); r != pubsub.ValidationIgnore {
		t.Errorf("a report of token 2 of 2: %v, want Ignore", r)
	}
	tok := geometric.Token{Num: 0, Seq: 1 << 32}
	if r := offer(g.tokens, a, tokenMsg(t, 1, 0, 1, false)); r != pubsub.ValidationAccept {
		t.Fatalf("a's report: %v", r)
	}
	for i := range 1000 {
		clk.advance(time.Millisecond)
		offer(g.tokens, ghostID(t, i), tokenMsg(t, 1, 0, 2, false))
	}
	if !holds(g, a) || len(g.Reports()) != 4 {
		t.Fatalf("%d reports after the flood, a's among them: %v; want 4, a's among them", len(g.Reports()), holds(g, a))
	}
	passed := func(giver crypto.PrivKey, to peer.ID) []byte {
		next := geometric.Token{Num: 0, Seq: tok.Seq + 1}
		link, err := SignLink(giver, next, to)
		if err != nil {
			t.Fatal(err)
		}
		data, err := TokenPos{Seq: 1, Token: next, Coord: coordAt(0), Capacity: 2, Link: link}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if r := offer(g.tokens, ghostID(t, 5000), passed(zKey, ghostID(t, 5000))); r != pubsub.ValidationIgnore {
		t.Errorf("a pass no believed holder signed, into a full room: %v, want Ignore", r)
	}
	if r := offer(g.tokens, k, passed(aKey, k)); r != pubsub.ValidationAccept {
		t.Fatalf("a's pass to k: %v, want Accept", r)
	}
	if !holds(g, a) || !holds(g, k) || len(g.Reports()) != 4 {
		t.Errorf("%d reports, a's %v, k's %v; want 4 with both", len(g.Reports()), holds(g, a), holds(g, k))
	}
	// The ghost that made room was the newest in: the first two remain.
	for i := range 2 {
		if !holds(g, ghostID(t, i)) {
			t.Errorf("ghost %d, among the first in, was evicted", i)
		}
	}
}
