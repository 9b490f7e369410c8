package gossip

import (
	"errors"
	"testing"

	"github.com/superpeer/superpeer/dhtselect"
)

// TestBeaconRoundTrip: the defence's beacon survives the wire; its
// cluster is the sender's key masked to the salt's k, whatever the sender
// would like it to be; a bad salt_k or value is rejected; and a change of
// beacon is a change worth publishing at once.
func TestBeaconRoundTrip(t *testing.T) {
	id := fakeID(t, 1)
	a := announcement(t, id, 3, 1)
	a.Beacon = dhtselect.Beacon{Since: 7, Next: 9, Reveal: dhtselect.EpochSalt(nil, 1, nil), SaltEpoch: 8, K: 3,
		Cluster: dhtselect.KeyOf(fakeID(t, 2)), Salt: dhtselect.EpochSalt(nil, 2, nil)}
	data, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeAnnouncement(id, data)
	if err != nil {
		t.Fatal(err)
	}
	want := a.Beacon
	want.Cluster = dhtselect.KeyOf(id).Cluster(3)
	if got.Beacon != want {
		t.Fatalf("beacon %+v, want %+v", got.Beacon, want)
	}
	if sameSaying(a, got) {
		t.Fatal("a different beacon is the same saying")
	}
	for name, msg := range map[string]string{
		"salt_k": `{"v":2,"k":3,"cluster":"` + a.ClusterKey.String() + `","salt_k":31}`,
		"reveal": `{"v":2,"k":3,"cluster":"` + a.ClusterKey.String() + `","reveal":"00"}`,
		"salt":   `{"v":2,"k":3,"cluster":"` + a.ClusterKey.String() + `","salt":"zz"}`,
	} {
		if _, err := DecodeAnnouncement(id, []byte(msg)); !errors.Is(err, ErrBadAnnouncement) {
			t.Errorf("bad %s: err = %v, want ErrBadAnnouncement", name, err)
		}
	}
}
