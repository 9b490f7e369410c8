package overlay

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
)

// The QUIC side of banGate's penalty. TCP's refusals are paced in the
// accept loop (banGate.InterceptAccept); QUIC has no such place. quic-go
// asks the resource manager (penaltyRM) before the handshake, but then
// answers every refused attempt with CONNECTION_REFUSED at once (after a
// Retry when many come), so a banned client that redials the moment it
// is refused made about 1,800 attempts a second on loopback, and the node
// spent 0.7 cores refusing them (the live attack suite's banned-redial,
// 27 times idle). penaltyConn, the node's UDP socket, drops the packets
// that open a connection from a penalised address before quic-go reads
// them: the node answers nothing, and the client waits out its handshake
// timeout (5 s in go-libp2p) before its next attempt.

// penaltyConn is a UDP socket of the node's QUIC transport that drops the
// first packets of a new connection from an address under a penalty.
// Everything else from that address passes: the packets of connections
// already open, and the answers to the node's own dials.
type penaltyConn struct {
	*net.UDPConn
	batch *ipv4.PacketConn // quic-go reads in batches where it can
	g     *guard
}

// listenUDP is quicreuse's constructor of the node's UDP sockets.
func (g *guard) listenUDP(network string, laddr *net.UDPAddr) (net.PacketConn, error) {
	c, err := net.ListenUDP(network, laddr)
	if err != nil {
		return nil, err
	}
	return &penaltyConn{UDPConn: c, batch: ipv4.NewPacketConn(c), g: g}, nil
}

// opensConn reports whether a datagram starts with the packet that opens
// a connection to a server: a long header (RFC 9000 17.2: Initial, 0-RTT,
// or a version the server must negotiate) whose destination connection ID
// the client chose, which is at least 8 bytes (RFC 9000 7.2). The
// connection IDs this node issues are quic-go's 4 bytes, so no packet of a
// connection that is open or that the node dialled matches.
func opensConn(b []byte) bool {
	return len(b) > 5 && b[0]&0x80 != 0 && b[5] >= 8
}

// dropped reports whether a datagram from addr opens a connection from a
// penalised address.
func (c *penaltyConn) dropped(b []byte, addr net.Addr) bool {
	if !opensConn(b) {
		return false
	}
	u, ok := addr.(*net.UDPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(u.IP)
	return ok && c.g.penalised(ip.Unmap())
}

// ReadBatch reads as ipv4.PacketConn does, without the dropped datagrams.
// quic-go pairs each message with the buffer at its index, so a kept
// datagram is copied into the place of a dropped one, not moved.
func (c *penaltyConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	for {
		n, err := c.batch.ReadBatch(ms, flags)
		if err != nil || n == 0 {
			return n, err
		}
		kept := 0
		for i := range n {
			m := &ms[i]
			if c.dropped(m.Buffers[0][:m.N], m.Addr) {
				continue
			}
			if kept != i {
				k := &ms[kept]
				k.N = copy(k.Buffers[0], m.Buffers[0][:m.N])
				k.NN = copy(k.OOB, m.OOB[:m.NN])
				k.Addr, k.Flags = m.Addr, m.Flags
			}
			kept++
		}
		if kept > 0 {
			return kept, nil
		}
	}
}

// ReadFrom and ReadMsgUDP are the reads of quic-go's other paths (a socket
// without batches or without its options).
func (c *penaltyConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, addr, err := c.UDPConn.ReadFrom(b)
		if err != nil || !c.dropped(b[:n], addr) {
			return n, addr, err
		}
	}
}

func (c *penaltyConn) ReadMsgUDP(b, oob []byte) (n, oobn, flags int, addr *net.UDPAddr, err error) {
	for {
		n, oobn, flags, addr, err = c.UDPConn.ReadMsgUDP(b, oob)
		if err != nil || !c.dropped(b[:n], addr) {
			return n, oobn, flags, addr, err
		}
	}
}
