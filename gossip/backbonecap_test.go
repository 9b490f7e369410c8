package gossip

import (
	"strconv"
	"testing"
	"time"

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

// TestBackboneVouchedDisplacesGhosts: a cluster full of summaries under
// fresh keys (ghosts, refreshed so that they never expire) still takes the
// summary of a superpeer the node can vouch for (BackboneConfig.Vouch), in
// place of the latest refreshed ghost; a newcomer it cannot vouch for is
// still ignored, and a vouched-for summary never displaces another: with
// the cluster full of them a ninth is ignored too. Before Vouch, the
// ghosts kept a superpeer the node was connected to off its backbone for
// as long as they were republished (hostile-peer audit's open item).
func TestBackboneVouchedDisplacesGhosts(t *testing.T) {
	vouched := map[peer.ID]bool{}
	bb, clk := offlineBackbone(t, fakeID(t, 0), BackboneConfig{MinGap: -1, Vouch: func(p peer.ID) bool { return vouched[p] }})
	ghosts := make([]peer.ID, maxClaimers)
	for i := range ghosts {
		ghosts[i] = fakeID(t, byte(i+1))
		clk.advance(time.Millisecond)
		if r := offer(bb.feed, ghosts[i], summaryMsg(t, Summary{K: 0, Size: 1 << 20, Seq: 1})); r != pubsub.ValidationAccept {
			t.Fatalf("ghost %d: %v", i+1, r)
		}
	}
	stranger := fakeID(t, 100)
	if r := offer(bb.feed, stranger, summaryMsg(t, Summary{K: 0, Size: 3, Seq: 1})); r != pubsub.ValidationIgnore {
		t.Fatalf("a stranger in the full cluster: %v, want ignored", r)
	}
	// Ghost 3 refreshed last: it makes room.
	clk.advance(time.Millisecond)
	if r := offer(bb.feed, ghosts[2], summaryMsg(t, Summary{K: 0, Size: 1 << 20, Seq: 2})); r != pubsub.ValidationAccept {
		t.Fatalf("a ghost's refresh: %v", r)
	}
	real := fakeID(t, 101)
	vouched[real] = true
	clk.advance(time.Millisecond)
	if r := offer(bb.feed, real, summaryMsg(t, Summary{K: 0, Size: 12, Seq: 1})); r != pubsub.ValidationAccept {
		t.Fatalf("a vouched-for superpeer in the full cluster: %v, want accepted", r)
	}
	if _, ok := bb.Get(real); !ok {
		t.Fatal("the vouched-for superpeer's summary is not held")
	}
	if _, ok := bb.Get(ghosts[2]); ok {
		t.Error("the latest refreshed ghost is still held")
	}
	if n := len(bb.Summaries()); n != maxClaimers {
		t.Errorf("%d summaries held, want %d", n, maxClaimers)
	}
	// Vouched-for summaries fill the cluster: then a ninth is ignored.
	for i := range maxClaimers - 1 {
		p := fakeID(t, byte(110+i))
		vouched[p] = true
		clk.advance(time.Millisecond)
		if r := offer(bb.feed, p, summaryMsg(t, Summary{K: 0, Size: 12, Seq: 1})); r != pubsub.ValidationAccept {
			t.Fatalf("vouched-for superpeer %d: %v", i+2, r)
		}
	}
	for _, g := range ghosts {
		if _, ok := bb.Get(g); ok {
			t.Errorf("ghost %s still held with %d vouched-for summaries in its cluster", g, maxClaimers)
		}
	}
	ninth := fakeID(t, 120)
	vouched[ninth] = true
	if r := offer(bb.feed, ninth, summaryMsg(t, Summary{K: 0, Size: 12, Seq: 1})); r != pubsub.ValidationIgnore {
		t.Errorf("a ninth vouched-for superpeer in a cluster full of them: %v, want ignored", r)
	}
	if st := bb.Stats(); st.Rejected != 0 {
		t.Errorf("%d rejected: a full cluster must ignore, not reject", st.Rejected)
	}
}
