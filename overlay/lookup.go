package overlay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	kb "github.com/libp2p/go-libp2p-kbucket"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

// The closer protocol answers "which peers of your routing table are closest
// to this raw key?". It exists because kad-dht's FIND_NODE hashes the key it
// is asked for, so it cannot find the peers closest to a cluster key (see
// dhtselect.Lookup). Request: a frameCloser of the 32 key bytes. Response:
// a framePeers of a count, then per peer its ID and addresses, each
// length-prefixed with a uvarint (see wire.go for the frames).
const closerVersion = "2.0.0"

func closerProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/closer/" + closerVersion)
}

// Wire limits of the closer protocol. An answer carries closerAnswer
// peers, fewer than the maxCloserPeers a reader accepts: a lookup ends
// when the dhtselect.Resiliency closest live peers it heard of have
// answered, so an answer needs those and as many again in case some are
// dead, not Kademlia's k = 20. Twenty peers with their addresses were
// about 1.2 KB an answer, and an ordinary peer's cluster-key lookups
// (one every ReevaluateInterval, about 2.7 queries each) were 1 KB/s of
// its 2.6 (peer bench --suite scale --live).
const (
	maxCloserPeers = dhtselect.BucketSize
	closerAnswer   = 2 * dhtselect.Resiliency
	maxPeerAddrs   = 16
	maxFieldLen    = 1024
	streamDeadline = 10 * time.Second
	lookupAlpha    = 3 // queries in flight, as in Kademlia
)

var errWire = errors.New("overlay: malformed message")

func (n *Node) handleCloser(s network.Stream) {
	n.serve(s, "closer", frameCloser, func(req []byte, from peer.ID) (frameType, []byte, error) {
		if len(req) != len(dhtselect.Key{}) {
			return 0, nil, fmt.Errorf("%w: key of %d bytes, want %d", errWire, len(req), len(dhtselect.Key{}))
		}
		infos := n.closest(req, from)
		var b bytes.Buffer
		_ = writeInfos(&b, infos)
		return framePeers, b.Bytes(), nil
	})
}

// closest returns the closerAnswer peers of the routing table closest to
// key, with their addresses, less the asker: it knows itself (the lookup
// drops it from an answer), and a member looking up its cluster's key is
// among the closest to it.
func (n *Node) closest(key []byte, asker peer.ID) []peer.AddrInfo {
	select {
	case <-n.dhtUp:
	default:
		return nil // the DHT is starting: its table is empty
	}
	return closestIn(n.dht.RoutingTable(), n.host.Peerstore(), key, asker)
}

func closestIn(rt *kb.RoutingTable, ps peerstore.Peerstore, key []byte, asker peer.ID) []peer.AddrInfo {
	ids := rt.NearestPeers(kb.ID(key), closerAnswer+1)
	infos := make([]peer.AddrInfo, 0, closerAnswer)
	for _, id := range ids {
		if id != asker && len(infos) < closerAnswer {
			infos = append(infos, ps.PeerInfo(id))
		}
	}
	return infos
}

func writeInfos(w io.Writer, infos []peer.AddrInfo) error {
	var buf []byte
	buf = binary.AppendUvarint(buf, uint64(len(infos)))
	for _, ai := range infos {
		buf = appendField(buf, []byte(ai.ID))
		addrs := ai.Addrs[:min(len(ai.Addrs), maxPeerAddrs)]
		buf = binary.AppendUvarint(buf, uint64(len(addrs)))
		for _, a := range addrs {
			buf = appendField(buf, a.Bytes())
		}
	}
	_, err := w.Write(buf)
	return err
}

func appendField(buf, f []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(f)))
	return append(buf, f...)
}

func readInfos(r *bufio.Reader) ([]peer.AddrInfo, error) {
	count, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if count > maxCloserPeers {
		return nil, fmt.Errorf("%w: %d peers, limit %d", errWire, count, maxCloserPeers)
	}
	infos := make([]peer.AddrInfo, 0, count)
	for range count {
		idb, err := readField(r)
		if err != nil {
			return nil, err
		}
		id, err := peer.IDFromBytes(idb)
		if err != nil {
			return nil, fmt.Errorf("%w: peer ID: %v", errWire, err)
		}
		na, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if na > maxPeerAddrs {
			return nil, fmt.Errorf("%w: %d addresses, limit %d", errWire, na, maxPeerAddrs)
		}
		ai := peer.AddrInfo{ID: id}
		for range na {
			ab, err := readField(r)
			if err != nil {
				return nil, err
			}
			a, err := ma.NewMultiaddrBytes(ab)
			if err != nil {
				return nil, fmt.Errorf("%w: address: %v", errWire, err)
			}
			ai.Addrs = append(ai.Addrs, a)
		}
		infos = append(infos, ai)
	}
	return infos, nil
}

func readField(r *bufio.Reader) ([]byte, error) {
	l, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if l > maxFieldLen {
		return nil, fmt.Errorf("%w: field of %d bytes, limit %d", errWire, l, maxFieldLen)
	}
	b := make([]byte, l)
	_, err = io.ReadFull(r, b)
	return b, err
}

// queryCloser asks p for the peers closest to target. It waits
// QueryTimeout at most, and with an election no longer than its
// failure-detection timeout: a peer that does not answer in that time
// counts as dead to the election too. (A crashed peer over QUIC keeps its
// connection open until QUIC's idle timeout, so the query to it waits out
// its bound: with 5 s, the failover after a crash took 5 s where the
// election detects it in 2.)
func (n *Node) queryCloser(ctx context.Context, p peer.ID, target dhtselect.Key) ([]peer.AddrInfo, error) {
	timeout := n.cfg.QueryTimeout
	if d := n.electionDetection(); d > 0 {
		timeout = min(timeout, d)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := n.request(ctx, p, n.closerProto, frameCloser, target[:], framePeers)
	if err != nil {
		return nil, err
	}
	infos, err := decodeAll(resp, readInfos)
	if err != nil {
		n.guard.refuse(n, protoName(n.closerProto), p, err)
	}
	return infos, err
}

type queryResult struct {
	p     peer.ID
	infos []peer.AddrInfo
	err   error
}

// lookup finds the live peer closest to the request's key by an iterative
// lookup over the routing tables of the overlay's DHT (dhtselect.Lookup
// drives it). It returns that peer (possibly this node, unless SkipSelf:
// it is private) and the number of queries sent.
// A peer that said goodbye on the membership topic, or is banned, counts
// as failed without a query; so does one the machine's request may not ask
// (node.LookupRequest.MayAsk: one of a flooded address, or one that
// neither is a member nor speaks the closer protocol, such as a host that
// speaks only the overlay's DHT prefix).
func (n *Node) lookup(ctx context.Context, req node.LookupRequest) (peer.ID, int, error) {
	target, skipSelf := req.Key, req.SkipSelf
	self := n.host.ID()
	seeds := n.dht.RoutingTable().NearestPeers(kb.ID(target[:]), dhtselect.BucketSize)
	l := dhtselect.NewLookup(target, self, seeds, dhtselect.Resiliency, lookupAlpha)
	results := make(chan queryResult)
	inflight, queries := 0, 0
	for !l.Done() {
		skipped := false
		for _, p := range l.Next() {
			if n.members.Left(p) || n.guard.Banned(p) || !req.MayAsk(p, n.speaksCloser(p)) {
				// It said goodbye: it is gone, and a query to it
				// would only wait for QueryTimeout. Or it is banned
				// (wire.go): it may be no superpeer. Or the machine
				// may not ask it.
				l.Failed(p)
				skipped = true
				continue
			}
			inflight++
			queries++
			go func() {
				infos, err := n.queryCloser(ctx, p, target)
				results <- queryResult{p, infos, err}
			}()
		}
		if inflight == 0 && skipped {
			continue // ask Next again, without the peers that left
		}
		if inflight == 0 {
			break // nothing in flight and nothing to ask: Done must hold
		}
		r := <-results
		inflight--
		if r.err != nil {
			l.Failed(r.p)
			n.log.Debug("lookup: query failed", "peer", r.p, "err", r.err)
			continue
		}
		ids := make([]peer.ID, 0, len(r.infos))
		for _, ai := range r.infos {
			if ai.ID == self {
				continue
			}
			n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
			ids = append(ids, ai.ID)
		}
		l.Answered(r.p, ids)
	}
	for ; inflight > 0; inflight-- {
		<-results
	}
	if err := ctx.Err(); err != nil {
		return "", queries, err
	}
	for _, p := range l.Result() {
		if p != self || !skipSelf {
			return p, queries, nil
		}
	}
	return "", queries, errNoReachable
}

// errNoReachable: a private node (see nat.go) found no other peer.
var errNoReachable = errors.New("overlay: no reachable peer found (this node is private, and may not be a superpeer)")
