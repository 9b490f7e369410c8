package overlay

import (
	"bufio"
	"bytes"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// FuzzReadInfos: readInfos, which decodes a peer's answer to our closer
// query, never panics on arbitrary bytes; what it accepts stays within the
// limits (maxCloserPeers peers, maxPeerAddrs addresses each) and survives
// a round trip through writeInfos.
func FuzzReadInfos(f *testing.F) {
	ids := testIDs(f, 2)
	var w bytes.Buffer
	infos := []peer.AddrInfo{
		{ID: ids[0], Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/4001"), ma.StringCast("/ip6/::1/udp/4001/quic-v1")}},
		{ID: ids[1]},
	}
	if err := writeInfos(&w, infos); err != nil {
		f.Fatal(err)
	}
	f.Add(w.Bytes())
	f.Add([]byte{0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{1, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := readInfos(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		if len(got) > maxCloserPeers {
			t.Fatalf("accepted %d peers", len(got))
		}
		for _, ai := range got {
			if len(ai.Addrs) > maxPeerAddrs {
				t.Fatalf("accepted %d addresses of %s", len(ai.Addrs), ai.ID)
			}
		}
		var w bytes.Buffer
		if err := writeInfos(&w, got); err != nil {
			t.Fatal(err)
		}
		again, err := readInfos(bufio.NewReader(&w))
		if err != nil {
			t.Fatalf("the encoding of %v does not decode: %v", got, err)
		}
		if !slices.EqualFunc(got, again, func(a, b peer.AddrInfo) bool {
			return a.ID == b.ID && slices.EqualFunc(a.Addrs, b.Addrs, ma.Multiaddr.Equal)
		}) {
			t.Fatalf("round trip changed %v to %v", got, again)
		}
	})
}
