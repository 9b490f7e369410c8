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
// key that speak the closer protocol, with their addresses, less the
// asker: it knows itself (the lookup drops it from an answer), and a
// member looking up its cluster's key is among the closest to it.
func (n *Node) closest(key []byte, asker peer.ID) []peer.AddrInfo {
	select {
	case <-n.dhtUp:
	default:
		return nil // the DHT is starting: its table is empty
	}
	return closestIn(n.dht.RoutingTable(), n.host.Peerstore(), n.closerProto, key, asker)
}

// closestIn is closest over table rt and peerstore ps, for the closer
// protocol proto. The table takes only peers that speak it (table.go),
// but a peer is asked what it knows: an answer that named a peer that
// cannot answer in turn (a host that speaks only the overlay's DHT
// prefix) cost the asker a place among the lookup's closest, and an
// answer of such peers alone ended its lookup (the interoperability
// audit). So the answer is of peers that speak it, and still full when
// the table holds others.
func closestIn(rt *kb.RoutingTable, ps peerstore.Peerstore, proto protocol.ID, key []byte, asker peer.ID) []peer.AddrInfo {
	ids := nearestWhere(rt, key, closerAnswer, func(p peer.ID) bool {
		return p != asker && supports(ps, p, proto)
	})
	infos := make([]peer.AddrInfo, len(ids))
	for i, id := range ids {
		infos[i] = ps.PeerInfo(id)
	}
	return infos
}

// nearestWhere returns the count peers of rt nearest to key for which ok
// holds (fewer if the table holds fewer), nearest first. It asks the
// table for count peers, and for twice as many each time some of those
// fail ok, until it has count or has seen the whole table: in the common
// case, where they all pass, one ask of count.
func nearestWhere(rt *kb.RoutingTable, key []byte, count int, ok func(peer.ID) bool) []peer.ID {
	out := make([]peer.ID, 0, count)
	for want := count; ; want *= 2 {
		ids := rt.NearestPeers(kb.ID(key), want)
		out = out[:0]
		for _, p := range ids {
			if ok(p) {
				if out = append(out, p); len(out) == count {
					return out
				}
			}
		}
		if len(ids) < want {
			return out // the whole table
		}
	}
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
			// An address of a protocol go-multiaddr does not know (another
			// implementation's transport) is skipped, not the answer, as
			// an announcement's is (gossip.DecodeAnnouncement): refusing
			// the answer struck its sender.
			if a, err := ma.NewMultiaddrBytes(ab); err == nil {
				ai.Addrs = append(ai.Addrs, a)
			}
		}
		infos = append(infos, ai)
	}
	return infos, nil
}

func readField(r *bufio.Reader) ([]byte, error) { return readBytes(r, maxFieldLen) }

// readBytes reads a uvarint length, at most limit, and as many bytes.
func readBytes(r *bufio.Reader, limit uint64) ([]byte, error) {
	l, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if l > limit {
		return nil, fmt.Errorf("%w: field of %d bytes, limit %d", errWire, l, limit)
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

// lookup finds the live peer closest to the request's key by an iterative
// lookup over the routing tables of the overlay's DHT (dhtselect.Lookup
// drives it). It returns that peer (possibly this node, unless SkipSelf:
// it is private) and the number of queries sent.
// A peer that said goodbye on the membership topic, or is banned, counts
// as failed without a query; so does one the machine's request may not ask
// (node.LookupRequest.MayAsk: one of a flooded address, or one that
// neither is a member nor speaks the closer protocol, such as a host that
// speaks only the overlay's DHT prefix). The seeds are the BucketSize
// peers of the routing table nearest to the key that it may ask: seeds
// taken as the nearest peers whatever they were, then skipped, were
// replaced by none, and with BucketSize hosts that speak only the DHT
// prefix nearer to the key than the cluster's superpeer every seed was
// skipped and the lookup ended at the node itself (the interoperability
// audit). The table takes no such host any more (table.go), but a peer
// of it may still be one to skip: one that left, is banned, or shares a
// flooded address.
func (n *Node) lookup(ctx context.Context, req node.LookupRequest) (peer.ID, int, error) {
	target, skipSelf := req.Key, req.SkipSelf
	self := n.host.ID()
	mayAsk := func(p peer.ID) bool {
		// It said goodbye: it is gone, and a query to it would only wait
		// for QueryTimeout. Or it is banned (wire.go): it may be no
		// superpeer. Or the machine may not ask it.
		return !n.members.Left(p) && !n.guard.Banned(p) && req.MayAsk(p, n.speaksCloser(p))
	}
	seeds := nearestWhere(n.dht.RoutingTable(), target[:], dhtselect.BucketSize, mayAsk)
	l := dhtselect.NewLookup(target, self, seeds, dhtselect.Resiliency, lookupAlpha)
	queries := walk(ctx, l, mayAsk, func(ctx context.Context, p peer.ID) ([]peer.ID, error) {
		infos, err := n.queryCloser(ctx, p, target)
		if err != nil {
			n.log.Debug("lookup: query failed", "peer", p, "err", err)
			return nil, err
		}
		ids := make([]peer.ID, 0, len(infos))
		for _, ai := range infos {
			if ai.ID == self {
				continue
			}
			n.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, peerstore.TempAddrTTL)
			ids = append(ids, ai.ID)
		}
		return ids, nil
	})
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

type queryResult struct {
	p   peer.ID
	ids []peer.ID
	err error
}

// walk runs lookup l to its end: it queries (query, in a goroutine of
// its own each, lookupAlpha at most in flight as l allows) the peers
// l.Next names that mayAsk allows, and counts the others as failed
// without a query: one that l handed out and that is neither answered
// nor failed keeps one of its places in flight for good, and the lookup
// ends early (TestWalkSkips). It returns the number of queries sent, and
// returns once none is in flight.
func walk(ctx context.Context, l *dhtselect.Lookup, mayAsk func(peer.ID) bool, query func(context.Context, peer.ID) ([]peer.ID, error)) int {
	results := make(chan queryResult)
	inflight, queries := 0, 0
	for !l.Done() {
		skipped := false
		for _, p := range l.Next() {
			if !mayAsk(p) {
				l.Failed(p)
				skipped = true
				continue
			}
			inflight++
			queries++
			go func() {
				ids, err := query(ctx, p)
				results <- queryResult{p, ids, err}
			}()
		}
		if inflight == 0 && skipped {
			continue // ask Next again, without the peers skipped
		}
		if inflight == 0 {
			break // nothing in flight and nothing to ask: Done must hold
		}
		r := <-results
		inflight--
		if r.err != nil {
			l.Failed(r.p)
			continue
		}
		l.Answered(r.p, r.ids)
	}
	for ; inflight > 0; inflight-- {
		<-results
	}
	return queries
}

// errNoReachable: a private node (see nat.go) found no other peer.
var errNoReachable = errors.New("overlay: no reachable peer found (this node is private, and may not be a superpeer)")
