package overlay

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

// TestPenaltyConn: the node's UDP socket drops the datagrams that would
// open a QUIC connection from a penalised address, and only those; a
// batch keeps the others, each in its own buffer.
func TestPenaltyConn(t *testing.T) {
	g := &guard{}
	pc, err := g.listenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c := pc.(*penaltyConn)
	bad, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	defer bad.Close()
	good, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	g.mu.Lock()
	g.penaliseLocked(netip.MustParseAddr("127.0.0.2"), time.Now(), false)
	g.mu.Unlock()

	// A long header with an 8-byte destination ID opens a connection; a
	// 4-byte one (the node's own IDs) or a short header does not.
	open := func(tag byte) []byte { return append([]byte{0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8}, tag) }
	ours := func(tag byte) []byte { return []byte{0xc0, 0, 0, 0, 1, 4, 1, 2, 3, 4, tag} }
	short := func(tag byte) []byte { return []byte{0x40, 1, 2, 3, 4, tag} }
	sends := []struct {
		from *net.UDPConn
		b    []byte
		keep bool
	}{
		{bad, open(1), false}, {good, open(2), true}, {bad, ours(3), true}, {bad, open(4), false},
		{bad, short(5), true}, {good, short(6), true}, {bad, open(7), false},
	}
	var want []byte
	for _, s := range sends {
		if _, err := s.from.WriteTo(s.b, c.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		if s.keep {
			want = append(want, s.b[len(s.b)-1])
		}
	}
	var got []byte
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < len(want) {
		ms := make([]ipv4.Message, 8)
		for i := range ms {
			ms[i].Buffers = [][]byte{make([]byte, 1500)}
			ms[i].OOB = make([]byte, 64)
		}
		n, err := c.ReadBatch(ms, 0)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		for _, m := range ms[:n] {
			got = append(got, m.Buffers[0][m.N-1])
		}
	}
	if string(got) != string(want) {
		t.Errorf("read %v, want %v", got, want)
	}
	if r := g.refused[[2]string{"accept", "banned"}]; r != 3 {
		t.Errorf("%d datagrams counted as refused, want 3", r)
	}
}
