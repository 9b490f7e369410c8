package gossip

import (
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

func fakeID(t *testing.T, i byte) peer.ID {
	t.Helper()
	h := sha256.Sum256([]byte{i})
	id, err := peer.IDFromBytes(append([]byte{0x00, 0x20}, h[:]...))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func announcement(t *testing.T, id peer.ID, k int, seq uint64) Announcement {
	return Announcement{
		ID: id, K: k, ClusterKey: dhtselect.KeyOf(id).Cluster(k), Seq: seq,
		Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/4001")},
	}
}

func TestAnnouncementRoundTrip(t *testing.T) {
	id := fakeID(t, 1)
	a := announcement(t, id, 3, 42)
	a.Superpeer, a.Private = true, true
	data, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeAnnouncement(id, data)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != id || b.K != 3 || b.Seq != 42 || !b.Superpeer || !b.Private || b.ClusterKey != a.ClusterKey || !sameAddrs(a, b) {
		t.Fatalf("round trip changed the announcement: %+v -> %+v", a, b)
	}
}

func TestDecodeRejects(t *testing.T) {
	id, other := fakeID(t, 1), fakeID(t, 2)
	good := announcement(t, id, 3, 1)
	forged := announcement(t, other, 3, 1) // another peer's cluster key
	forgedData, _ := forged.Encode()
	cases := map[string][]byte{
		"not json":        []byte("garbage"),
		"wrong version":   []byte(`{"v":1,"k":3,"cluster":"` + good.ClusterKey.String() + `"}`),
		"negative k":      []byte(`{"v":2,"k":-1,"cluster":"` + good.ClusterKey.String() + `"}`),
		"huge k":          []byte(`{"v":2,"k":300,"cluster":"` + good.ClusterKey.String() + `"}`),
		"bad cluster hex": []byte(`{"v":2,"k":3,"cluster":"zz"}`),
		"forged cluster":  forgedData,
		"oversized":       make([]byte, MaxAnnouncementSize+1),
	}
	for name, data := range cases {
		if _, err := DecodeAnnouncement(id, data); !errors.Is(err, ErrBadAnnouncement) {
			t.Errorf("%s: err = %v, want ErrBadAnnouncement", name, err)
		}
	}
}

func TestViewApplyStaleAndExpire(t *testing.T) {
	t0 := time.Unix(1000, 0)
	v := NewView(3 * time.Second)
	a, b := fakeID(t, 1), fakeID(t, 2)
	if ok, ch := v.Apply(announcement(t, a, 2, 5), t0); !ok || !ch {
		t.Fatal("first announcement must be accepted as a change")
	}
	if ok, ch := v.Apply(announcement(t, a, 2, 6), t0.Add(time.Second)); !ok || ch {
		t.Fatalf("a refresh is accepted but no change: ok=%v changed=%v", ok, ch)
	}
	if ok, _ := v.Apply(announcement(t, a, 2, 6), t0.Add(time.Second)); ok {
		t.Fatal("a repeated sequence number must be stale")
	}
	if ok, _ := v.Apply(announcement(t, a, 2, 4), t0.Add(time.Second)); ok {
		t.Fatal("an older sequence number must be stale")
	}
	if _, ch := v.Apply(announcement(t, a, 3, 7), t0.Add(time.Second)); !ch {
		t.Fatal("a new k must count as a change")
	}
	private := announcement(t, a, 3, 8)
	private.Private = true
	if _, ch := v.Apply(private, t0.Add(time.Second)); !ch {
		t.Fatal("a peer that becomes private must count as a change")
	}
	v.Apply(announcement(t, b, 3, 1), t0.Add(2*time.Second))
	if v.Len() != 2 {
		t.Fatalf("Len = %d, want 2", v.Len())
	}
	// a was last seen at t0+1s, b at t0+2s; at t0+4.5s only a is older than 3s.
	if gone := v.Expire(t0.Add(4500*time.Millisecond), func(id peer.ID) bool { return id == a }); len(gone) != 0 {
		t.Fatalf("Expire removed %v, but a is kept (connected) and b is fresh", gone)
	}
	if gone := v.Expire(t0.Add(4500*time.Millisecond), nil); len(gone) != 1 || gone[0] != a {
		t.Fatalf("Expire removed %v, want only %s", gone, a)
	}
	if _, ok := v.Get(b); !ok {
		t.Fatal("b must still be live")
	}
	if !v.Remove(b) || v.Len() != 0 {
		t.Fatal("Remove failed")
	}
}

// A goodbye takes its peer out of the view at once; a late, older
// announcement does not bring it back, a newer one (a restart) does, and
// the goodbye itself expires with the TTL, whatever keep says.
func TestViewGoodbye(t *testing.T) {
	v := NewView(time.Minute)
	t0 := time.Unix(1000, 0)
	id := fakeID(t, 1)
	if _, changed := v.Apply(announcement(t, id, 2, 10), t0); !changed || v.Len() != 1 {
		t.Fatal("first announcement not applied")
	}
	bye := announcement(t, id, 2, 11)
	bye.Leaving = true
	if ok, changed := v.Apply(bye, t0.Add(time.Second)); !ok || !changed {
		t.Errorf("goodbye: applied %v, changed %v; want both", ok, changed)
	}
	if _, ok := v.Get(id); ok || v.Len() != 0 || len(v.Entries()) != 0 || !v.Left(id) {
		t.Errorf("after the goodbye: in the view %v, len %d, left %v", ok, v.Len(), v.Left(id))
	}
	if ok, _ := v.Apply(announcement(t, id, 2, 9), t0.Add(2*time.Second)); ok || v.Len() != 0 {
		t.Error("an older announcement brought the peer back")
	}
	if ok, changed := v.Apply(bye, t0.Add(2*time.Second)); ok || changed {
		t.Error("the goodbye applied twice")
	}
	if gone := v.Expire(t0.Add(2*time.Minute), func(peer.ID) bool { return true }); len(gone) != 0 || v.Left(id) {
		t.Errorf("expiry of the goodbye: gone %v, left %v; want the goodbye dropped silently", gone, v.Left(id))
	}
	v.Apply(bye, t0) // and again, for the restart
	if ok, changed := v.Apply(announcement(t, id, 2, 12), t0.Add(3*time.Second)); !ok || !changed || v.Len() != 1 {
		t.Errorf("a restart's newer announcement: applied %v, changed %v, len %d", ok, changed, v.Len())
	}
	if v.Remove(fakeID(t, 2)) {
		t.Error("removed a peer the view never had")
	}
}

func TestAnnouncementGoodbyeRoundTrip(t *testing.T) {
	id := fakeID(t, 1)
	a := announcement(t, id, 3, 42)
	a.Leaving = true
	data, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeAnnouncement(id, data)
	if err != nil || !b.Leaving {
		t.Errorf("decoded %+v, %v; want a goodbye", b, err)
	}
}

// Len keeps a count of the live records rather than walking the table:
// after every one of many random changes, through each path that changes
// the table (Apply, goodbyes, Remove, Expire with and without keep, and
// the feed's own put and remove), it equals a walk of the table.
func TestViewLenCountsLive(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 26))
	v := NewView(10 * time.Second)
	ids := make([]peer.ID, 12)
	for i := range ids {
		ids[i] = fakeID(t, byte(i))
	}
	t0 := time.Unix(1000, 0)
	now := t0
	for step := range 5000 {
		id := ids[rng.IntN(len(ids))]
		a := announcement(t, id, 2, uint64(rng.IntN(40)))
		switch op := rng.IntN(8); op {
		case 0, 1, 2:
			v.Apply(a, now)
		case 3:
			a.Leaving = true
			v.Apply(a, now)
		case 4:
			v.Remove(id)
		case 5:
			keep := func(p peer.ID) bool { return p[len(p)-1]%2 == 0 }
			if rng.IntN(2) == 0 {
				keep = nil
			}
			v.Expire(now, keep)
		case 6:
			a.Leaving = rng.IntN(3) == 0
			v.t.put(id, a, now)
		case 7:
			v.t.remove(id)
		}
		now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		walked := 0
		v.t.records(anyTime, func(peer.ID, record[Announcement]) { walked++ })
		if v.Len() != walked || len(v.Entries()) != walked {
			t.Fatalf("step %d: Len %d, a walk of the table %d, Entries %d", step, v.Len(), walked, len(v.Entries()))
		}
	}
}
