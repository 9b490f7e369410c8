package gossip

import (
	"strconv"
	"testing"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestBackboneBounded: summaries under fresh keys, which anyone may
// publish, are held up to maxClaimers live ones of new origins per
// cluster and maxSummaries origins in all; past them a new origin is
// ignored (not rejected: no strike), an origin already held keeps
// updating, and a slot frees when its summaries go. A hostile-peer audit
// found 3,474 ghost summaries held at once from one publisher, without
// bound.
func TestBackboneBounded(t *testing.T) {
	bb, clk := offlineBackbone(t, fakeID(t, 0), BackboneConfig{MinGap: -1})
	ids := make([]peer.ID, 0, maxClaimers+1)
	for i := range maxClaimers + 1 {
		ids = append(ids, fakeID(t, byte(i+1)))
	}
	for i, p := range ids {
		want := pubsub.ValidationAccept
		if i == maxClaimers {
			want = pubsub.ValidationIgnore
		}
		if r := offer(bb.feed, p, summaryMsg(t, Summary{K: 0, Size: 1, Seq: 1})); r != want {
			t.Fatalf("claimer %d of cluster k = 0: %v, want %v", i+1, r, want)
		}
	}
	if n := len(bb.Summaries()); n != maxClaimers {
		t.Fatalf("%d summaries held, want %d", n, maxClaimers)
	}
	// A held origin updates; the ninth gets in at another k.
	if r := offer(bb.feed, ids[0], summaryMsg(t, Summary{K: 0, Size: 5, Seq: 2})); r != pubsub.ValidationAccept {
		t.Fatalf("a held claimer's update: %v", r)
	}
	if r := offer(bb.feed, ids[maxClaimers], summaryMsg(t, Summary{K: 8, Size: 1, Seq: 1})); r != pubsub.ValidationAccept {
		t.Fatalf("another cluster's claimer: %v", r)
	}
	// One goodbye frees a place at k = 0.
	if r := offer(bb.feed, ids[1], summaryMsg(t, Summary{K: 0, Size: 1, Seq: 3, Leaving: true})); r != pubsub.ValidationAccept {
		t.Fatalf("a goodbye: %v", r)
	}
	late := fakeID(t, 200)
	if r := offer(bb.feed, late, summaryMsg(t, Summary{K: 0, Size: 1, Seq: 1})); r != pubsub.ValidationAccept {
		t.Fatalf("a claimer after a goodbye: %v", r)
	}
	if st := bb.Stats(); st.Rejected != 0 {
		t.Errorf("%d rejected: a full table must ignore, not reject", st.Rejected)
	}
	// The bound on origins: a table holding maxSummaries ignores a new one.
	bb.mu.Lock()
	for i := range maxSummaries {
		bb.tab.recs[peer.ID("filler-"+strconv.Itoa(i))] = record[Summary]{seen: clk.now()}
	}
	bb.mu.Unlock()
	if r := offer(bb.feed, fakeID(t, 201), summaryMsg(t, Summary{K: 9, Size: 1, Seq: 1})); r != pubsub.ValidationIgnore {
		t.Errorf("a new origin past maxSummaries: %v, want ignored", r)
	}
}

// TestBackboneBoundedMoves: an origin held elsewhere that moves its
// summary into a full cluster is ignored as a new one would be, or a
// fresh key that first claimed another cluster took a full one's place
// with its next summary (review); one already in the cluster updates.
func TestBackboneBoundedMoves(t *testing.T) {
	bb, _ := offlineBackbone(t, fakeID(t, 0), BackboneConfig{MinGap: -1})
	for i := range maxClaimers {
		if r := offer(bb.feed, fakeID(t, byte(i+1)), summaryMsg(t, Summary{K: 0, Size: 1, Seq: 1})); r != pubsub.ValidationAccept {
			t.Fatalf("claimer %d: %v", i+1, r)
		}
	}
	mover := fakeID(t, 100)
	if r := offer(bb.feed, mover, summaryMsg(t, Summary{K: 7, Size: 1, Seq: 1})); r != pubsub.ValidationAccept {
		t.Fatalf("a claimer elsewhere: %v", r)
	}
	if r := offer(bb.feed, mover, summaryMsg(t, Summary{K: 0, Size: 1, Seq: 2})); r != pubsub.ValidationIgnore {
		t.Errorf("a move into the full cluster: %v, want ignored", r)
	}
	if r := offer(bb.feed, fakeID(t, 1), summaryMsg(t, Summary{K: 0, Size: 3, Seq: 2})); r != pubsub.ValidationAccept {
		t.Errorf("an update in the full cluster: %v, want accepted", r)
	}
}
