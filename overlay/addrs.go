package overlay

import (
	"context"
	"net"
	"net/netip"

	"github.com/libp2p/go-libp2p"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/quicreuse"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	webrtc "github.com/libp2p/go-libp2p/p2p/transport/webrtc"
	"github.com/libp2p/go-libp2p/p2p/transport/websocket"
	webtransport "github.com/libp2p/go-libp2p/p2p/transport/webtransport"
	netroute "github.com/libp2p/go-netroute"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/superpeer/superpeer/overlay/node"
)

// What the host sees of its peers for the node machine's identities per
// address (overlay/node's admit.go): the address group of each connected
// peer, from the remote address of its connection (observed, never
// claimed), and whether a peer speaks the closer protocol.

// connAddrs returns the address group (node.AddrGroup) of every peer the
// host is connected to. A direct connection's remote IP names the group;
// a peer reached only through a relay is in the group "relayed/" and the
// relay's group: as many private peers as the limit count per relay.
func (n *Node) connAddrs() map[peer.ID]string {
	direct, relayed := map[peer.ID]string{}, map[peer.ID]string{}
	for _, c := range n.host.Network().Conns() {
		p := c.RemotePeer()
		g, viaRelay := connGroup(c.RemoteMultiaddr())
		into := direct
		if viaRelay {
			into = relayed
		}
		// Of two connections from two addresses (a TCP and a QUIC one,
		// say), the smaller group, so that the choice is stable.
		if prev, ok := into[p]; g != "" && (!ok || g < prev) {
			into[p] = g
		}
	}
	for p, g := range relayed {
		if _, ok := direct[p]; !ok {
			direct[p] = g
		}
	}
	return direct
}

// connGroup is the address group of a connection's remote address, and
// whether it is relayed.
func connGroup(a ma.Multiaddr) (string, bool) {
	relayed := false
	for i, c := range a {
		if c.Protocol().Code == ma.P_CIRCUIT {
			a, relayed = a[:i], true
			break
		}
	}
	ip, err := manet.ToIP(a)
	if err != nil {
		return "", relayed
	}
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return "", relayed
	}
	g := node.AddrGroup(addr)
	if relayed && g != "" {
		g = "relayed/" + g
	}
	return g, relayed
}

// connect dials the cluster-mates the machine asks for (Ready.Connect),
// each in its own goroutine and for QueryTimeout at most, at the
// addresses they announced: a connection is what makes them count. A
// failure is no error (the peer may be gone); the machine asks again
// after a period while the peer stays in the view.
func (n *Node) connect(ctx context.Context, peers []peer.ID) {
	for _, p := range peers {
		if n.guard.Banned(p) || n.host.Network().Connectedness(p) == network.Connected {
			continue
		}
		ai := n.addrInfo(p)
		n.wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, n.cfg.QueryTimeout)
			defer cancel()
			if err := n.host.Connect(dctx, ai); err != nil && ctx.Err() == nil {
				n.log.Debug("cluster-mate unreachable", "peer", p, "err", err)
			}
		})
	}
}

// speaksCloser reports whether p's protocols, as identify put them in the
// peerstore, include the overlay's closer protocol.
func (n *Node) speaksCloser(p peer.ID) bool { return supports(n.host.Peerstore(), p, n.closerProto) }

// supports reports whether p's protocols in ps include proto.
func supports(ps peerstore.Peerstore, p peer.ID, proto protocol.ID) bool {
	sp, err := ps.SupportsProtocols(p, proto)
	return err == nil && len(sp) > 0
}

// quicOptions build the QUIC transport's sockets: each one a
// penaltyConn of g (quicgate.go). And they make a host that listens on
// one loopback address other than 127.0.0.1 dial its loopback peers over
// QUIC from that address, as TCP does (reuseport, and transportOptions
// for a host on loopback alone). Without that,
// QUIC dials from 127.0.0.1, the kernel's choice, and node processes on
// one machine, each on its own loopback address (testnet --procs), would
// all show one address to each other: more identities than MaxPerAddr.
func quicOptions(listen []ma.Multiaddr, g *guard) libp2p.Option {
	opts := []quicreuse.Option{quicreuse.OverrideListenUDP(g.listenUDP)}
	if src := loopbackSourceIP(listen); src != nil {
		opts = append(opts, quicreuse.OverrideSourceIPSelector(
			func() (quicreuse.SourceIPSelector, error) {
				r, err := netroute.New()
				if err != nil {
					return nil, err
				}
				return loopbackSource{ip: src, routes: r}, nil
			}))
	}
	return libp2p.QUICReuse(quicreuse.NewConnManager, opts...)
}

// transportOptions are go-libp2p's default transports (TCP, QUIC,
// WebSocket, WebTransport, WebRTC; TCP and WebSocket in a private
// network) with one change for a host that listens on loopback only, on
// one address other than 127.0.0.1 (loopbackSourceIP): TCP dials from
// that address, with an ephemeral port. The default TCP dialer binds the
// listen address and port (reuseport), and when that bind fails it dials
// again from the kernel's choice, 127.0.0.1 for a loopback destination.
// The bind fails whenever the 4-tuple is taken: when two nodes dial each
// other at once, each from its listen port to the other's, or a second
// connection between them is dialed. Node processes on one machine
// (testnet --procs) would then show 127.0.0.1 to each other, one group
// for all their identities, and a registrar refuses a member as crowded
// beyond MaxPerAddr (TestLoopbackRedialKeepsSource). A host that also
// listens elsewhere keeps go-libp2p's dialer, and with it the listen
// port as the source of its TCP dials to the world, which what its peers
// observe of its address and hole punching through a NAT rely on. Nil,
// and so go-libp2p's defaults, for every host but the loopback-only one.
func transportOptions(listen []ma.Multiaddr, private bool) []libp2p.Option {
	src := loopbackSourceIP(listen)
	if src == nil || !allLoopback(listen) {
		return nil
	}
	pinned := func(raddr ma.Multiaddr) (tcp.ContextDialer, error) {
		if ip, err := manet.ToIP(raddr); err == nil && ip.IsLoopback() && ip.To4() != nil {
			return &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}, nil
		}
		return &net.Dialer{}, nil // not reachable from loopback anyway
	}
	tcpt := libp2p.Transport(tcp.NewTCPTransport, tcp.WithDialerForAddr(pinned))
	if private {
		return []libp2p.Option{tcpt, libp2p.Transport(websocket.New)}
	}
	return []libp2p.Option{tcpt,
		libp2p.Transport(quic.NewTransport),
		libp2p.Transport(websocket.New),
		libp2p.Transport(webtransport.New),
		libp2p.Transport(webrtc.New)}
}

// allLoopback reports whether every address of listen is a loopback
// address.
func allLoopback(listen []ma.Multiaddr) bool {
	for _, a := range listen {
		if ip, err := manet.ToIP(a); err != nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// loopbackSourceIP is the one IPv4 loopback address other than 127.0.0.1
// among listen, if there is exactly one.
func loopbackSourceIP(listen []ma.Multiaddr) net.IP {
	var src net.IP
	for _, a := range listen {
		ip, err := manet.ToIP(a)
		if err != nil || !ip.IsLoopback() || ip.To4() == nil || ip.Equal(net.IPv4(127, 0, 0, 1)) {
			continue
		}
		if src != nil && !src.Equal(ip) {
			return nil // more than one: leave the choice to the kernel
		}
		src = ip
	}
	return src
}

// loopbackSource picks ip as the source of loopback destinations, and the
// routing table's preferred source of the others.
type loopbackSource struct {
	ip     net.IP
	routes interface {
		Route(dst net.IP) (iface *net.Interface, gateway, preferredSrc net.IP, err error)
	}
}

func (s loopbackSource) PreferredSourceIPForDestination(dst *net.UDPAddr) (net.IP, error) {
	if dst.IP.IsLoopback() && dst.IP.To4() != nil {
		return s.ip, nil
	}
	_, _, src, err := s.routes.Route(dst.IP)
	return src, err
}
