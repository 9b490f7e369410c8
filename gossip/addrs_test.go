package gossip

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeSkipsUnknownAddrs: an address go-multiaddr cannot parse (a
// transport of another implementation, or garbage) is skipped, and the
// announcement stands with the others. Refusing the whole announcement
// over one, as the decoder did, struck and then banned peers of other
// implementations whose addresses list transports Go does not know (an
// interoperability audit); kad-dht skips them too. TestDecodeRejects
// asserted the refusal until then.
func TestDecodeSkipsUnknownAddrs(t *testing.T) {
	id := fakeID(t, 1)
	good := announcement(t, id, 3, 1)
	data := []byte(`{"v":2,"k":3,"cluster":"` + good.ClusterKey.String() + `","addrs":["/nope","/ip4/1.2.3.4/tcp/4001/x-parity-ws/%2Fp2p","/ip4/1.2.3.4/tcp/4001","/p2p-websocket-star"]}`)
	a, err := DecodeAnnouncement(id, data)
	if err != nil {
		t.Fatalf("DecodeAnnouncement: %v", err)
	}
	if len(a.Addrs) != 1 || a.Addrs[0].String() != "/ip4/1.2.3.4/tcp/4001" {
		t.Errorf("addresses %v, want the one that parses", a.Addrs)
	}
}

// TestElectionTag: an announcement carries the election its peer runs,
// and a tag that is too long or not of a-z, 0-9, '-' and '+' is refused.
func TestElectionTag(t *testing.T) {
	id := fakeID(t, 1)
	a := announcement(t, id, 3, 1)
	a.Election = "bully+quorum"
	data, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeAnnouncement(id, data)
	if err != nil || b.Election != "bully+quorum" {
		t.Fatalf("round trip: %q, %v; want bully+quorum", b.Election, err)
	}
	for _, bad := range []string{"Bully", "bully quorum", strings.Repeat("x", maxElectionTag+1), "ring\n"} {
		a.Election = bad
		data, _ := a.Encode()
		if _, err := DecodeAnnouncement(id, data); !errors.Is(err, ErrBadAnnouncement) {
			t.Errorf("election %q: err = %v, want ErrBadAnnouncement", bad, err)
		}
	}
}
