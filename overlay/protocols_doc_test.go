package overlay

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	recordpb "github.com/libp2p/go-libp2p/core/record/pb"
	ma "github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/proto"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// The test vectors of docs/PROTOCOLS.md, checked against the code that
// writes and reads the wire, so that the specification cannot drift from
// it silently. Every fenced block of the document whose info string is
// "hex NAME", "json NAME" or "text NAME" is a vector: a hex block's
// bytes (whitespace and "#" comments to the end of a line ignored) must
// be what the project's encoder writes for NAME's fixed inputs, and its
// decoder must read them back; a json or text block must be the encoder's
// text exactly. Every vector the test builds must be in the document and
// every vector of the document must be one the test builds.
//
// The inputs are fixed: Ed25519 keys from the seeds 32 × 0x01 (peer A),
// 32 × 0x02 (B) and 32 × 0x03 (C), fixed times, addresses and numbers.
// Ed25519 signatures are deterministic (RFC 8032), so the sealed
// announcement and the token link are byte for byte too.
//
// go test ./overlay -run TestProtocolsDoc -args -protocols.print prints
// every vector as the code encodes it now, to update the document after
// a deliberate change of the wire (which should also bump the protocol's
// version: see the document's "Compatibility rules").

var printVectors = flag.Bool("protocols.print", false, "print docs/PROTOCOLS.md's vectors as the code encodes them")

// docVectorRE finds a vector block: its kind, its name and its body.
var docVectorRE = regexp.MustCompile("(?ms)^```(hex|json|text) ([a-z0-9-]+)\\n(.*?)^```$")

type docVector struct{ kind, body string }

// readDocVectors reads the vector blocks of docs/PROTOCOLS.md.
func readDocVectors(t *testing.T) map[string]docVector {
	t.Helper()
	b, err := os.ReadFile("../docs/PROTOCOLS.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]docVector{}
	for _, m := range docVectorRE.FindAllStringSubmatch(string(b), -1) {
		if _, dup := out[m[2]]; dup {
			t.Errorf("PROTOCOLS.md: vector %q appears twice", m[2])
		}
		out[m[2]] = docVector{kind: m[1], body: m[3]}
	}
	return out
}

// hexBytes decodes a hex block: whitespace and comments ("#" to the end
// of the line) are ignored.
func hexBytes(body string) ([]byte, error) {
	var sb strings.Builder
	for _, line := range strings.Split(body, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		sb.WriteString(strings.Join(strings.Fields(line), ""))
	}
	return hex.DecodeString(sb.String())
}

// docKey is the fixed Ed25519 key whose 32-byte seed is 32 × seed.
func docKey(t *testing.T, seed byte) (crypto.PrivKey, peer.ID) {
	t.Helper()
	sk, _, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return sk, id
}

// wireVector is one vector as the code encodes it: bytes (hex) or text
// (json, text), and a check that the code's decoder reads the bytes the
// document gives back to the inputs (nil: nothing to decode).
type wireVector struct {
	name, kind string
	data       []byte
	decode     func(doc []byte) error
}

// docFrame is writeFrame's output.
func docFrame(t *testing.T, ft frameType, payload []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeFrame(&b, ft, payload); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// docUnframe reads one frame of type want with the real reader, and
// checks that nothing follows it.
func docUnframe(doc []byte, want frameType) ([]byte, error) {
	r := bufio.NewReader(bytes.NewReader(doc))
	p, err := readFrame(r, want)
	if err == nil && r.Buffered() > 0 {
		err = fmt.Errorf("%d bytes after the frame", r.Buffered())
	}
	return p, err
}

// docSame reports an error unless got deeply equals want.
func docSame(what string, got, want any) error {
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s decodes to %+v, want %+v", what, got, want)
	}
	return nil
}

func protocolsVectors(t *testing.T) []wireVector {
	skA, a := docKey(t, 1)
	skB, b := docKey(t, 2)
	_, c := docKey(t, 3)
	addr := func(s string) ma.Multiaddr { return ma.StringCast(s) }
	var vs []wireVector
	add := func(name, kind string, data []byte, decode func([]byte) error) {
		vs = append(vs, wireVector{name: name, kind: kind, data: data, decode: decode})
	}

	// Peer IDs: their bytes, as every binary message carries them.
	add("peer-id-a", "hex", []byte(a), func(doc []byte) error {
		id, err := peer.IDFromBytes(doc)
		if err == nil && id != a {
			err = fmt.Errorf("peer ID %s, want %s", id, a)
		}
		return err
	})
	add("peer-ids", "text", []byte(fmt.Sprintf("A %s\nB %s\nC %s\n", a, b, c)), nil)

	// closer: a lookup of A's cluster key at k = 3, answered with B (two
	// addresses) and C (none).
	ck := dhtselect.KeyOf(a).Cluster(3)
	add("closer-request", "hex", docFrame(t, frameCloser, ck[:]), func(doc []byte) error {
		p, err := docUnframe(doc, frameCloser)
		if err == nil && !bytes.Equal(p, ck[:]) {
			err = fmt.Errorf("key %x, want %x", p, ck)
		}
		return err
	})
	infos := []peer.AddrInfo{
		{ID: b, Addrs: []ma.Multiaddr{addr("/ip4/192.0.2.2/tcp/4001"), addr("/ip4/192.0.2.2/udp/4001/quic-v1")}},
		{ID: c},
	}
	var ib bytes.Buffer
	if err := writeInfos(&ib, infos); err != nil {
		t.Fatal(err)
	}
	add("closer-response", "hex", docFrame(t, framePeers, ib.Bytes()), func(doc []byte) error {
		p, err := docUnframe(doc, framePeers)
		if err != nil {
			return err
		}
		got, err := decodeAll(p, readInfos)
		if err != nil {
			return err
		}
		return docSame("closer response", got, infos)
	})

	// A's announcement, and its sealed envelope.
	ann := gossip.Announcement{
		ID: a, Addrs: []ma.Multiaddr{addr("/ip4/192.0.2.1/tcp/4001")}, K: 3, ClusterKey: ck,
		Seq: 1767225600000000000, Flapping: true,
		Beacon: dhtselect.Beacon{Since: 490896, Next: 490897, Reveal: dhtselect.Salt(bytes.Repeat([]byte{0xaa}, 32)),
			SaltEpoch: 490896, K: 3, Cluster: ck, Salt: dhtselect.Salt(bytes.Repeat([]byte{0xbb}, 32))},
	}
	annJSON, err := ann.Encode()
	if err != nil {
		t.Fatal(err)
	}
	add("announcement", "json", annJSON, func(doc []byte) error {
		got, err := gossip.DecodeAnnouncement(a, doc)
		if err != nil {
			return err
		}
		return docSame("announcement", got, ann)
	})
	sealed, err := gossip.SealAnnouncement(ann, skA)
	if err != nil {
		t.Fatal(err)
	}
	add("sealed-announcement", "hex", sealed, func(doc []byte) error {
		got, err := gossip.OpenAnnouncement(doc)
		if err != nil {
			return err
		}
		return docSame("sealed announcement", got, ann)
	})
	// What the envelope's signature covers (core/record's makeUnsigned),
	// checked by the signature itself.
	var signed []byte
	for _, f := range [][]byte{[]byte(gossip.AnnouncementDomain), []byte("/superpeer/announcement"), annJSON} {
		signed = binary.AppendUvarint(signed, uint64(len(f)))
		signed = append(signed, f...)
	}
	add("sealed-announcement-signed", "hex", signed, func(doc []byte) error {
		var env recordpb.Envelope
		if err := proto.Unmarshal(sealed, &env); err != nil {
			return err
		}
		if ok, err := skA.GetPublic().Verify(doc, env.Signature); err != nil || !ok {
			return fmt.Errorf("the envelope's signature does not verify over these bytes (%v)", err)
		}
		return nil
	})

	// register: a request with A's record, a refresh, and the answers.
	regRecord := appendRequest(nil, 0, 0, sealed)
	add("register-request-record", "hex", docFrame(t, frameRegister, regRecord), func(doc []byte) error {
		p, err := docUnframe(doc, frameRegister)
		if err != nil {
			return err
		}
		rid, ver, rec, err := parseRequest(p)
		if err == nil && (rid != 0 || ver != 0 || !bytes.Equal(rec, sealed)) {
			err = fmt.Errorf("request %d %d %x", rid, ver, rec)
		}
		return err
	})
	const rid, ver = 0x0123456789abcdef, 300
	add("register-request-refresh", "hex", docFrame(t, frameRegister, appendRequest(nil, rid, ver, nil)), func(doc []byte) error {
		p, err := docUnframe(doc, frameRegister)
		if err != nil {
			return err
		}
		r, v, rec, err := parseRequest(p)
		if err == nil && (r != rid || v != ver || len(rec) != 0) {
			err = fmt.Errorf("request %d %d %x", r, v, rec)
		}
		return err
	})
	dig := clusterDigest{K: 3, ClusterKey: ck, Size: dhtselect.Estimate{N: 40, Source: dhtselect.SourceBackbone}}
	replies := []struct {
		name string
		rep  regReply
	}{
		{"register-response-not-superpeer", regReply{status: regNotSuperpeer, hint: c}},
		{"register-response-too-soon", regReply{status: regTooSoon, digest: dig}},
		{"register-response-unchanged", regReply{status: regUnchanged, digest: dig, rid: rid, ver: ver}},
		{"register-response-delta", regReply{status: regDelta, digest: dig, rid: rid, ver: ver + 2, more: true,
			entries: [][]byte{sealed}, removed: []peer.ID{c}}},
	}
	for _, r := range replies {
		add(r.name, "hex", docFrame(t, frameRoster, appendReply(nil, r.rep)), func(doc []byte) error {
			p, err := docUnframe(doc, frameRoster)
			if err != nil {
				return err
			}
			got, err := parseReply(p)
			if err != nil {
				return err
			}
			return docSame(r.name, got, r.rep)
		})
	}

	// election: a heartbeat, and a message with every field.
	hb := classic.Message{Type: classic.MsgHeartbeat, To: classic.ID(b), Term: 3, Leader: classic.ID(a)}
	full := classic.Message{Type: classic.MsgCoordinator, To: classic.ID(b), Term: 7, Leader: classic.ID(a),
		IDs: []classic.ID{classic.ID(a), classic.ID(c)}, Election: classic.ElectionID{Source: classic.ID(a), Seq: 3}, Capacity: 64}
	for _, e := range []struct {
		name string
		m    classic.Message
	}{{"election-heartbeat", hb}, {"election-coordinator", full}} {
		var eb bytes.Buffer
		if err := pb.WriteMsg(&eb, e.m); err != nil {
			t.Fatal(err)
		}
		add(e.name, "hex", eb.Bytes(), func(doc []byte) error {
			got, err := pb.ReadMsg(bytes.NewReader(doc), classic.ID(a))
			if err != nil {
				return err
			}
			want := e.m
			want.From = classic.ID(a)
			return docSame(e.name, got, want)
		})
	}

	// token: B passes token 1 (placed once, passed twice since) to A.
	tok := geometric.Token{Num: 1, Seq: 1<<32 | 2}
	link, err := gossip.SignLink(skB, tok, a)
	if err != nil {
		t.Fatal(err)
	}
	var linkSigned []byte
	linkSigned = append(linkSigned, "/superpeer/token-link/1\x00"...)
	linkSigned = binary.BigEndian.AppendUint64(linkSigned, uint64(tok.Num))
	linkSigned = binary.BigEndian.AppendUint64(linkSigned, tok.Seq)
	linkSigned = append(linkSigned, a...)
	add("token-link-signed", "hex", linkSigned, func(doc []byte) error {
		if ok, err := skB.GetPublic().Verify(doc, link.Sig); err != nil || !ok {
			return fmt.Errorf("the link's signature does not verify over these bytes (%v)", err)
		}
		return nil
	})
	// The request as geo.pass builds it: the token's number and sequence,
	// big-endian, then the link's stream encoding.
	passReq := binary.BigEndian.AppendUint64(nil, uint64(tok.Num))
	passReq = binary.BigEndian.AppendUint64(passReq, tok.Seq)
	passReq = append(passReq, link.Marshal()...)
	add("token-request", "hex", docFrame(t, frameToken, passReq), func(doc []byte) error {
		p, err := docUnframe(doc, frameToken)
		if err != nil {
			return err
		}
		if len(p) <= 16 || binary.BigEndian.Uint64(p) != uint64(tok.Num) || binary.BigEndian.Uint64(p[8:]) != tok.Seq {
			return fmt.Errorf("token pass %x", p)
		}
		l, err := gossip.UnmarshalLink(p[16:])
		if err != nil {
			return err
		}
		giver, err := l.Verify(tok, a)
		if err == nil && giver != b {
			err = fmt.Errorf("link signed by %s, want %s", giver, b)
		}
		return err
	})
	add("token-response-yes", "hex", docFrame(t, frameAnswer, respYes), func(doc []byte) error {
		p, err := docUnframe(doc, frameAnswer)
		if err == nil && !bytes.Equal(p, respYes) {
			err = fmt.Errorf("answer %x", p)
		}
		return err
	})

	// attach: A asks B, private, with its coordinate, a report of three
	// RTTs and its next superpeer C; B says yes.
	// Its components are float32s (2^-6, -2^-5, 2^-8, 2^-11, 2^-2, -2^-13,
	// 2^-16), as every coordinate on the wire is.
	coord := &coordinate.Coordinate{Vec: []float64{0.015625, -0.03125, 0.00390625, 0, 0, 0, 0, 0.00048828125}, Error: 0.25, Adjustment: -0.0001220703125, Height: 0.0000152587890625}
	rtts := []time.Duration{12 * time.Millisecond, 30 * time.Millisecond, 1500 * time.Microsecond}
	second := node.PeerRTT{Peer: c, RTT: 20 * time.Millisecond}
	// attachRequest adds the vector of an attach request from A, req as
	// geo.requestAttach builds it, which must read as want.
	attachRequest := func(name string, req []byte, want node.AttachAsked, known []byte) {
		add(name, "hex", docFrame(t, frameAttach, req), func(doc []byte) error {
			p, err := docUnframe(doc, frameAttach)
			if err != nil {
				return err
			}
			got, err := readAttachRequest(a, p)
			if err != nil {
				return err
			}
			if !bytes.Equal(got.Known, known) {
				return fmt.Errorf("attach request: roster digest %x, want %x", got.Known, known)
			}
			return docSame("attach request", got.AttachAsked, want)
		})
	}
	attachRequest("attach-request", appendSecond(appendRTTs(appendCoord([]byte{attachFlags(true, false)}, coord), rtts), second),
		node.AttachAsked{From: a, RTTs: rtts, Second: second, Coord: coord, Private: true}, nil)
	attachRequest("attach-request-bare", appendCoord([]byte{0}, coord), node.AttachAsked{From: a, Coord: coord}, nil)
	// A tells B it attached to another superpeer (node.GeoReady.Detach).
	attachRequest("attach-request-leaving", appendCoord([]byte{attachFlags(false, false) | attachLeaving}, coord),
		node.AttachAsked{From: a, Coord: coord, Leaving: true}, nil)
	// B relays its own position and C's, orders A to take token 2, which
	// C held last, and gives its own report and a network of 300 peers.
	yes := node.GeoAnswer{Cluster: []peer.ID{b, a}, Candidates: []peer.ID{a}, Coords: []node.PeerCoord{{ID: a, Coord: coord}}, Demoted: []peer.ID{a},
		Nearby: []node.TokenPos{
			{Holder: b, Token: geometric.Token{Num: 1, Seq: 1 << 32}, Coord: coord, Superpeer: true, Load: 3},
			{Holder: c, Token: geometric.Token{Num: 0, Seq: 1 << 32}, Coord: coord, Superpeer: true, Load: 5},
		},
		Rehome: &node.RehomeOrder{Token: geometric.Token{Num: 2, Seq: 2 << 32}, Replaced: c}, Size: 300}
	report := gossip.TokenPos{Holder: b, Seq: 1767225600000000003, Token: geometric.Token{Num: 1, Seq: 1 << 32}, Coord: coord, Superpeer: true, Load: 3, Capacity: 64}
	reportJSON, err := report.Encode()
	if err != nil {
		t.Fatal(err)
	}
	add("attach-response-yes", "hex", docFrame(t, frameAnswer, appendAttachYes(slices.Clone(respYes), yes, reportJSON, nil)), func(doc []byte) error {
		p, err := docUnframe(doc, frameAnswer)
		if err != nil {
			return err
		}
		if len(p) == 0 || p[0] != 1 {
			return fmt.Errorf("answer %x", p)
		}
		got, gotReport, err := readAttachYes(b, p[1:], nil, 0)
		if err != nil {
			return err
		}
		want := yes
		want.Yes = true
		if err := docSame("attach answer", got, want); err != nil {
			return err
		}
		if gotReport == nil {
			return fmt.Errorf("attach answer: no report")
		}
		return docSame("attach answer's report", *gotReport, report)
	})
	// A renews its attachment, holding that roster: its request names it
	// by its digest, and B, whose roster has not changed, leaves the
	// cluster and the demoted peers out (no candidates, coordinates,
	// superpeers nearby, order or report either, in this vector).
	known := rosterDigest(yes.Cluster, yes.Demoted)
	attachRequest("attach-request-known", appendCoord(append([]byte{attachKnown}, known...), coord), node.AttachAsked{From: a, Coord: coord}, known)
	same := node.GeoAnswer{Cluster: yes.Cluster, Demoted: yes.Demoted, Size: yes.Size}
	add("attach-response-yes-unchanged", "hex", docFrame(t, frameAnswer, appendAttachYes(slices.Clone(respYes), same, nil, known)), func(doc []byte) error {
		p, err := docUnframe(doc, frameAnswer)
		if err != nil {
			return err
		}
		if len(p) < 3 || p[0] != 1 || p[1] != 0 {
			return fmt.Errorf("answer %x: want yes and an empty cluster", p)
		}
		held := &heldRoster{from: b, digest: known, cluster: yes.Cluster, demoted: yes.Demoted}
		got, _, err := readAttachYes(b, p[1:], held, 0)
		if err != nil {
			return err
		}
		if !got.Yes || !slices.Equal(got.Cluster, yes.Cluster) || !slices.Equal(got.Demoted, yes.Demoted) ||
			len(got.Candidates)+len(got.Coords)+len(got.Nearby) > 0 || got.Rehome != nil {
			return fmt.Errorf("attach answer decodes to %+v, want yes and the roster held", got)
		}
		return nil
	})
	add("attach-response-no", "hex", docFrame(t, frameAnswer, respNo), func(doc []byte) error {
		p, err := docUnframe(doc, frameAnswer)
		if err == nil && !bytes.Equal(p, respNo) {
			err = fmt.Errorf("answer %x", p)
		}
		return err
	})

	// vouch: A asks B for its RTT to C; B answers 25 ms.
	add("vouch-request", "hex", docFrame(t, frameVouch, []byte(c)), func(doc []byte) error {
		p, err := docUnframe(doc, frameVouch)
		if err == nil && peer.ID(p) != c {
			err = fmt.Errorf("vouch for %x", p)
		}
		return err
	})
	add("vouch-response", "hex", docFrame(t, frameAnswer, binary.BigEndian.AppendUint64(nil, uint64(25*time.Millisecond))), func(doc []byte) error {
		p, err := docUnframe(doc, frameAnswer)
		if err == nil && (len(p) != 8 || time.Duration(binary.BigEndian.Uint64(p)) != 25*time.Millisecond) {
			err = fmt.Errorf("answer %x", p)
		}
		return err
	})

	// The coordinate ping: the first echo and B's coordinate; and none.
	echo := make([]byte, coordPingSize)
	for i := range echo {
		echo[i] = byte(i)
	}
	add("ping-answer", "hex", appendPingCoord(slices.Clone(echo), coord), func(doc []byte) error {
		r := bufio.NewReader(bytes.NewReader(doc[len(echo):]))
		got, err := readPingCoord(r)
		if err != nil {
			return err
		}
		return docSame("ping coordinate", got, coord)
	})
	add("ping-answer-none", "hex", appendPingCoord(slices.Clone(echo), nil), func(doc []byte) error {
		got, err := readPingCoord(bufio.NewReader(bytes.NewReader(doc[len(echo):])))
		if err == nil && got != nil {
			err = fmt.Errorf("coordinate %v, want none", got)
		}
		return err
	})

	// Gossip: B's backbone summary, its goodbye, and A's token report.
	for _, v := range []struct {
		name string
		s    gossip.Summary
	}{
		{"summary", gossip.Summary{K: 3, Size: 17, Estimate: 40, Term: 5, Seq: 1767225600000000001}},
		{"goodbye", gossip.Summary{K: 3, Size: 17, Seq: 1767225605000000000, Leaving: true}},
	} {
		data, err := v.s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		add("backbone-"+v.name, "json", data, func(doc []byte) error {
			got, err := gossip.DecodeSummary(b, doc)
			if err != nil {
				return err
			}
			want := v.s
			want.Superpeer, want.ClusterKey = b, dhtselect.KeyOf(b).Cluster(3)
			return docSame(v.name, got, want)
		})
	}
	tp := gossip.TokenPos{Seq: 1767225600000000002, Token: tok, Coord: coord, Superpeer: true, Load: 3, Capacity: 64, Link: link}
	tpJSON, err := tp.Encode()
	if err != nil {
		t.Fatal(err)
	}
	add("token-report", "json", tpJSON, func(doc []byte) error {
		got, err := gossip.DecodeTokenPos(a, doc)
		if err != nil {
			return err
		}
		want := tp
		want.Holder, want.Giver = a, b
		return docSame("token report", got, want)
	})

	// The protocol IDs and topics, and the limits the text quotes.
	const nw = "<network>"
	var ids strings.Builder
	for _, p := range protocolsOf(nw) {
		fmt.Fprintln(&ids, p)
	}
	fmt.Fprintln(&ids, coordPingProtocol(nw))
	fmt.Fprintln(&ids, dhtProtocol(nw))
	fmt.Fprintln(&ids, gossip.BackboneTopic(nw))
	fmt.Fprintln(&ids, gossip.TokenTopic(nw))
	fmt.Fprintln(&ids, strings.TrimSuffix(gossip.ClusterTopic(nw, 0), "0")+"<token>")
	fmt.Fprintln(&ids, gossip.MembershipTopic(nw))
	fmt.Fprintln(&ids, RendezvousNamespace(nw))
	add("protocol-ids", "text", []byte(ids.String()), nil)
	var consts strings.Builder
	for _, kv := range []struct {
		name string
		v    any
	}{
		{"wireVersion", wireVersion}, {"maxFrame", maxFrame}, {"streamDeadline", streamDeadline},
		{"banStrikes", banStrikes}, {"banWindow", banWindow}, {"banFor", banFor},
		{"rateLimit", rateLimit}, {"rateBurst", rateBurst},
		{"maxCloserPeers", maxCloserPeers}, {"closerAnswer", closerAnswer}, {"maxPeerAddrs", maxPeerAddrs}, {"maxFieldLen", maxFieldLen},
		{"maxRoster", maxRoster}, {"maxGone", maxGone}, {"regBurst", regBurst}, {"regSlack", regSlack}, {"regPerInterval", regPerInterval},
		{"snapBurst", snapBurst}, {"snapPerInterval", snapPerInterval}, {"maxPages", maxPages}, {"maxSource", maxSource}, {"rosterPage", rosterPage},
		{"maxElectionFrame", maxElectionFrame}, {"pb.Version", pb.Version}, {"pb.MaxSize", pb.MaxSize}, {"pb.MaxIDs", pb.MaxIDs}, {"pb.MaxIDLen", pb.MaxIDLen},
		{"maxCoordPings", maxCoordPings}, {"maxAttachCoords", maxAttachCoords}, {"maxAttachRTTs", maxAttachRTTs},
		{"geometric.Dimensions", geometric.Dimensions}, {"geometric.MaxComponent", geometric.MaxComponent}, {"geometric.MaxRTT", geometric.MaxRTT},
		{"dhtselect.MaxK", dhtselect.MaxK},
		{"gossip.AnnouncementVersion", gossip.AnnouncementVersion}, {"gossip.MaxAnnouncementSize", gossip.MaxAnnouncementSize},
		{"gossip.MaxSealedSize", gossip.MaxSealedSize}, {"gossip.BackboneVersion", gossip.BackboneVersion},
		{"gossip.MaxSummarySize", gossip.MaxSummarySize}, {"gossip.MaxClusterSize", gossip.MaxClusterSize},
		{"gossip.MaxNetworkEstimate", gossip.MaxNetworkEstimate}, {"gossip.GeoVersion", gossip.GeoVersion},
		{"gossip.MaxGeoSize", gossip.MaxGeoSize}, {"gossip.MaxTokens", gossip.MaxTokens},
		{"gossip.MaxLinkKey", gossip.MaxLinkKey}, {"gossip.MaxLinkSig", gossip.MaxLinkSig},
		{"maxDHTMessage", maxDHTMessage}, {"maxPubSubMessage", maxPubSubMessage}, {"maxSubscriptions", maxSubscriptions},
		{"frameDeadline", frameDeadline},
	} {
		fmt.Fprintf(&consts, "%s = %v\n", kv.name, kv.v)
	}
	add("constants", "text", []byte(consts.String()), nil)
	return vs
}

// TestProtocolsDoc checks every vector of docs/PROTOCOLS.md against the
// code: see the comment at the top of this file.
func TestProtocolsDoc(t *testing.T) {
	doc := readDocVectors(t)
	vs := protocolsVectors(t)
	if *printVectors {
		for _, v := range vs {
			body := string(v.data)
			if v.kind == "hex" {
				body = wrapHex(v.data)
			}
			fmt.Printf("```%s %s\n%s\n```\n\n", v.kind, v.name, strings.TrimSuffix(body, "\n"))
		}
	}
	built := map[string]bool{}
	for _, v := range vs {
		built[v.name] = true
		t.Run(v.name, func(t *testing.T) {
			d, ok := doc[v.name]
			switch {
			case !ok:
				t.Fatalf("PROTOCOLS.md has no vector %q (a fenced block \"```%s %s\")", v.name, v.kind, v.name)
			case d.kind != v.kind:
				t.Fatalf("PROTOCOLS.md: vector %q is %s, want %s", v.name, d.kind, v.kind)
			}
			var got []byte
			if v.kind != "hex" {
				got = []byte(strings.TrimSuffix(d.body, "\n"))
				if want := strings.TrimSuffix(string(v.data), "\n"); string(got) != want {
					t.Fatalf("PROTOCOLS.md: vector %q says\n%s\nthe code writes\n%s", v.name, got, want)
				}
			} else {
				var err error
				if got, err = hexBytes(d.body); err != nil {
					t.Fatalf("PROTOCOLS.md: vector %q: %v", v.name, err)
				}
				if !bytes.Equal(got, v.data) {
					t.Fatalf("PROTOCOLS.md: vector %q says\n%s\nthe code writes\n%s", v.name, wrapHex(got), wrapHex(v.data))
				}
			}
			if v.decode != nil {
				if err := v.decode(got); err != nil {
					t.Fatalf("the code does not read vector %q back: %v", v.name, err)
				}
			}
		})
	}
	for name := range doc {
		if !built[name] {
			t.Errorf("PROTOCOLS.md: vector %q is checked by nothing (TestProtocolsDoc builds no such vector)", name)
		}
	}
}

// wrapHex is b in hex, 32 bytes a line.
func wrapHex(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i += 32 {
		fmt.Fprintln(&sb, hex.EncodeToString(b[i:min(i+32, len(b))]))
	}
	return strings.TrimSuffix(sb.String(), "\n")
}
