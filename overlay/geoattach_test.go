package overlay

import (
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/gossip"
	"github.com/superpeer/superpeer/overlay/node"
)

// What a member says of itself in an attach request (private, flapping,
// leaving) and the demoted members in the superpeer's yes round-trip; a request
// with an unknown flag bit, and a yes that demotes a peer outside its
// cluster, are refused as malformed.
func TestAttachFlags(t *testing.T) {
	co, ids := attachFixture(t)
	sp, from := ids[0], ids[1]
	for _, c := range []struct{ private, flapping, leaving bool }{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, false}, {false, false, true}, {true, true, true}} {
		flags := attachFlags(c.private, c.flapping)
		if c.leaving {
			flags |= attachLeaving
		}
		req := appendRTTs(appendCoord([]byte{flags}, co), []time.Duration{time.Millisecond})
		in, err := readAttachRequest(from, req)
		if err != nil || in.From != from || in.Private != c.private || in.Flapping != c.flapping || in.Leaving != c.leaving || !sameCoordinate(in.Coord, onWire(co)) || len(in.RTTs) != 1 {
			t.Errorf("%+v: read %+v, %v", c, in, err)
		}
	}
	if _, err := readAttachRequest(from, appendCoord([]byte{attachFlags(true, true) | attachLeaving | attachKnown | attachNear | 1<<5}, co)); !errors.Is(err, errWire) {
		t.Errorf("an unknown flag bit: %v, want a wire error", err)
	}
	if _, err := readAttachRequest(from, appendCoord(nil, co)); err == nil {
		t.Error("a request without its flags byte accepted")
	}

	yes := node.GeoAnswer{Cluster: ids[:3], Candidates: ids[2:3], Coords: []node.PeerCoord{{ID: ids[2], Coord: co}}, Demoted: []peer.ID{ids[2]}}
	a, _, err := readAttachYes(sp, appendAttachYes(nil, yes, nil, nil), nil, 0)
	if err != nil || !a.Yes || !slices.Equal(a.Cluster, yes.Cluster) || !slices.Equal(a.Candidates, yes.Candidates) || len(a.Coords) != 1 ||
		!slices.Equal(a.Demoted, yes.Demoted) {
		t.Fatalf("round trip of a yes: %+v, %v", a, err)
	}
	yes.Demoted = []peer.ID{ids[3]}
	if _, _, err := readAttachYes(sp, appendAttachYes(nil, yes, nil, nil), nil, 0); !errors.Is(err, errWire) {
		t.Errorf("a yes demoting a peer outside its cluster: %v, want a wire error", err)
	}
	yes.Demoted = nil
	if _, _, err := readAttachYes(from, appendAttachYes(nil, yes, nil, nil), nil, 0); !errors.Is(err, errWire) {
		t.Errorf("a yes whose cluster starts with another: %v, want a wire error", err)
	}
}

// An attach yes with what the superpeer relays: the superpeers nearby
// (its own position first, then those in turn apart, or its own alone
// when the nearest are those the request named by their digest) and an
// order to take a missing token, with and without the holder it
// replaces, and the network's size, round-trip; so does a yes with
// neither. Nearby not starting with the superpeer, a superpeer byte, a
// held byte, a rehome byte or a survey byte other than 0 or 1, more than
// maxNearest nearest or maxRotated in turn, the nearest held for a
// request that named none or with more than the superpeer's own, a token
// number at gossip.MaxTokens, a load above maxNearbyLoad, a coordinate
// geometric.Valid refuses, a size above maxAttachSize, a truncated answer
// and trailing bytes are refused.
func TestAttachYesNearby(t *testing.T) {
	client, err := geometric.NewClient(geometric.DefaultCoordConfig())
	if err != nil {
		t.Fatal(err)
	}
	co := onWire(client.Coordinate()) // as the wire carries it: the test is of the other fields
	ids := testIDs(t, 4)
	sp := ids[0]
	near := []node.TokenPos{
		{Holder: sp, Token: geometric.Token{Num: 2, Seq: 3<<32 | 1}, Coord: co, Superpeer: true, Load: 3},
		{Holder: ids[2], Token: geometric.Token{Num: 0, Seq: 1 << 32}, Coord: co, Superpeer: true, Load: 0},
		{Holder: ids[3], Token: geometric.Token{Num: 4095, Seq: 7}, Coord: co, Load: maxNearbyLoad},
	}
	base := node.GeoAnswer{Yes: true, Cluster: []peer.ID{sp, ids[1]}}
	const digest = 77
	for name, c := range map[string]struct {
		nearby, rotated []node.TokenPos
		held            bool
		rehome          *node.RehomeOrder
		size            int
	}{
		"neither":                       {},
		"nearby":                        {nearby: near, size: 300},
		"nearby and in turn":            {nearby: near[:2], rotated: near[2:], size: 300},
		"nearest held, in turn":         {nearby: near[:1], held: true, rotated: near[1:], size: 300},
		"rehome":                        {nearby: near[:1], rehome: &node.RehomeOrder{Token: geometric.Token{Num: 1, Seq: 2 << 32}, Replaced: ids[3]}, size: 1},
		"rehome, none replaced, survey": {nearby: near, rehome: &node.RehomeOrder{Token: geometric.Token{Num: 3, Seq: 1 << 32}, Survey: true}, size: maxAttachSize},
	} {
		yes := base
		yes.Nearby, yes.NearbyHeld, yes.Rotated, yes.Rehome, yes.Size = c.nearby, c.held, c.rotated, c.rehome, c.size
		got, _, err := readAttachYes(sp, appendAttachYes(nil, yes, nil, nil), nil, digest)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(got.Nearby) != len(yes.Nearby) || len(yes.Nearby) > 0 && !reflect.DeepEqual(got.Nearby, yes.Nearby) ||
			len(got.Rotated) != len(yes.Rotated) || len(yes.Rotated) > 0 && !reflect.DeepEqual(got.Rotated, yes.Rotated) || got.NearbyHeld != yes.NearbyHeld ||
			!reflect.DeepEqual(got.Rehome, yes.Rehome) || !slices.Equal(got.Cluster, yes.Cluster) || got.Size != yes.Size {
			t.Errorf("%s: round trip read nearby %+v (held %v), in turn %+v, rehome %+v, size %d; want %+v (%v), %+v, %+v, %d", name,
				got.Nearby, got.NearbyHeld, got.Rotated, got.Rehome, got.Size, yes.Nearby, yes.NearbyHeld, yes.Rotated, yes.Rehome, yes.Size)
		}
	}

	head := appendIDs(appendCoords(appendIDs(appendIDs(nil, base.Cluster), nil), nil), nil)
	// nearbyOf is the positions' part of a yes: the nearest, not held,
	// none in turn.
	nearbyOf := func(nearby []node.TokenPos) []byte {
		return appendPositions(appendFlag(appendNearby(slices.Clone(head), nearby), false), nil, maxRotated)
	}
	rehomeWith := func(nearby []node.TokenPos, rehome *node.RehomeOrder) []byte {
		return appendRehome(nearbyOf(nearby), rehome)
	}
	yesWith := func(nearby []node.TokenPos, rehome *node.RehomeOrder) []byte {
		return append(rehomeWith(nearby, rehome), 0, 0) // no report, a size of 0
	}
	// entry is a nearby entry of sp with the given superpeer byte and load.
	entry := func(super byte, load uint64) []byte {
		b := binary.AppendUvarint(nil, uint64(len(sp)))
		b = appendCoord(appendToken(append(b, sp...), near[0].Token), co)
		return binary.AppendUvarint(append(b, super), load)
	}
	// nearestThen is the nearest of count entries (superpeer byte 1, load
	// 0), then tail.
	nearestThen := func(count int, tail ...byte) []byte {
		return append(append(binary.AppendUvarint(slices.Clone(head), uint64(count)), slices.Repeat(entry(1, 0), count)...), tail...)
	}
	rehome := rehomeWith(nil, &node.RehomeOrder{Token: geometric.Token{Num: 1, Seq: 2 << 32}, Replaced: ids[3], Survey: true})
	bad := co.Clone()
	bad.Vec[0] = 1e9
	tooMany := slices.Repeat(near[:1], maxNearest+1)
	for name, b := range map[string][]byte{
		"nearby not starting with the superpeer": yesWith(near[1:], nil),
		"too many nearest":                       nearestThen(maxNearest+1, 0, 0, 0, 0, 0),
		"too many in turn":                       append(append(nearestThen(1, 0), byte(maxRotated+1)), append(slices.Repeat(entry(1, 0), maxRotated+1), 0, 0, 0)...),
		"superpeer byte 2":                       append(append(binary.AppendUvarint(slices.Clone(head), 1), entry(2, 0)...), 0, 0, 0, 0, 0),
		"held byte 2":                            nearestThen(1, 2, 0, 0, 0, 0),
		"held with more than its own":            nearestThen(2, 1, 0, 0, 0, 0),
		"load above the bound":                   append(append(binary.AppendUvarint(slices.Clone(head), 1), entry(1, maxNearbyLoad+1)...), 0, 0, 0, 0, 0),
		"token number at MaxTokens":              yesWith([]node.TokenPos{{Holder: sp, Token: geometric.Token{Num: gossip.MaxTokens}, Coord: co}}, nil),
		"invalid coordinate":                     yesWith([]node.TokenPos{{Holder: sp, Coord: bad}}, nil),
		"no held byte":                           appendNearby(slices.Clone(head), nil),
		"no rehome byte":                         nearbyOf(nil),
		"rehome byte 2":                          append(nearbyOf(nil), 2, 0, 0),
		"survey byte 2":                          append(rehome[:len(rehome)-1:len(rehome)-1], 2, 0, 0),
		"rehome truncated":                       rehome[:len(rehome)-1],
		"no report length":                       rehome,
		"no size":                                append(slices.Clone(rehome), 0),
		"size above the bound":                   binary.AppendUvarint(append(slices.Clone(rehome), 0), maxAttachSize+1),
		"rehome of token MaxTokens":              yesWith(nil, &node.RehomeOrder{Token: geometric.Token{Num: gossip.MaxTokens}}),
		"trailing":                               append(yesWith(near, nil), 0),
	} {
		if _, _, err := readAttachYes(sp, b, nil, digest); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	heldYes := base
	heldYes.Nearby, heldYes.NearbyHeld = near[:1], true
	if _, _, err := readAttachYes(sp, appendAttachYes(nil, heldYes, nil, nil), nil, 0); !errors.Is(err, errWire) {
		t.Errorf("the nearest held for a request that named none: %v, want a wire error", err)
	}
	// appendNearby never writes more than maxNearest, appendPositions
	// more than it is given.
	if a, _, err := readAttachYes(sp, yesWith(tooMany, nil), nil, 0); err != nil || len(a.Nearby) != maxNearest {
		t.Errorf("a yes written with %d nearby: %d read, %v; want %d", len(tooMany), len(a.Nearby), err, maxNearest)
	}
	manyTurns := base
	manyTurns.Nearby, manyTurns.Rotated = near[:1], slices.Repeat(near[1:2], maxRotated+3)
	if a, _, err := readAttachYes(sp, appendAttachYes(nil, manyTurns, nil, nil), nil, 0); err != nil || len(a.Rotated) != maxRotated {
		t.Errorf("a yes written with %d in turn: %d read, %v; want %d", len(manyTurns.Rotated), len(a.Rotated), err, maxRotated)
	}
	// An entry without a coordinate is not written; without the
	// superpeer's own, none is.
	for _, c := range []struct {
		nearby []node.TokenPos
		want   int
	}{{[]node.TokenPos{near[0], {Holder: ids[2]}, near[2]}, 2}, {[]node.TokenPos{{Holder: sp}, near[1]}, 0}} {
		if a, _, err := readAttachYes(sp, yesWith(c.nearby, nil), nil, 0); err != nil || len(a.Nearby) != c.want {
			t.Errorf("nearby %+v written and read as %+v, %v; want %d entries", c.nearby, a.Nearby, err, c.want)
		}
	}
	// The value refusals are malformed (struck), as the list's first entry.
	for name, b := range map[string][]byte{
		"nearby not starting with the superpeer": yesWith(near[1:], nil),
		"superpeer byte 2":                       append(append(binary.AppendUvarint(slices.Clone(head), 1), entry(2, 0)...), 0),
		"held byte 2":                            nearestThen(1, 2, 0, 0, 0, 0),
		"held with more than its own":            nearestThen(2, 1, 0, 0, 0, 0),
		"rehome byte 2":                          append(nearbyOf(nil), 2, 0),
		"size above the bound":                   binary.AppendUvarint(append(slices.Clone(rehome), 0), maxAttachSize+1),
	} {
		if _, _, err := readAttachYes(sp, b, nil, digest); !errors.Is(err, errWire) {
			t.Errorf("%s: %v, want a wire error", name, err)
		}
	}
}

// A roster by digest (georoster.go): a request names the roster the
// member holds; the superpeer whose roster has that digest leaves its
// cluster and demoted peers out, and the member reads the roster it
// holds. A changed roster goes in full. An empty cluster is refused when
// the member holds no roster of that superpeer's, and with demoted peers.
func TestAttachRosterDigest(t *testing.T) {
	co, ids := attachFixture(t)
	sp, from := ids[0], ids[1]
	yes := node.GeoAnswer{Cluster: ids[:3], Demoted: ids[2:3], Candidates: ids[1:2]}
	var rs rosters
	if rs.get(sp) != nil {
		t.Fatal("a roster held before any answer")
	}
	rs.keep(sp, yes.Cluster, yes.Demoted)
	held := rs.get(sp)
	if held == nil || rs.get(from) != nil {
		t.Fatalf("held %+v from %s, want one from %s only", held, sp, sp)
	}

	req := appendCoord(append([]byte{attachKnown}, held.digest...), co)
	in, err := readAttachRequest(from, req)
	if err != nil || !slices.Equal(in.Known, held.digest) {
		t.Fatalf("a request naming its roster: %+v, %v", in, err)
	}
	short := appendAttachYes(nil, yes, nil, in.Known)
	full := appendAttachYes(nil, yes, nil, nil)
	if want := len(full) - len(appendIDs(appendIDs(nil, yes.Cluster), yes.Demoted)) + 2; len(short) != want {
		t.Errorf("the unchanged roster's answer is %d bytes, want %d (%d in full)", len(short), want, len(full))
	}
	a, _, err := readAttachYes(sp, short, held, 0)
	if err != nil || !slices.Equal(a.Cluster, yes.Cluster) || !slices.Equal(a.Demoted, yes.Demoted) || !slices.Equal(a.Candidates, yes.Candidates) {
		t.Fatalf("the unchanged roster read %+v, %v; want %v, %v", a, err, yes.Cluster, yes.Demoted)
	}

	changed := yes
	changed.Cluster = append(slices.Clone(yes.Cluster), ids[3])
	b := appendAttachYes(nil, changed, nil, in.Known)
	if a, _, err := readAttachYes(sp, b, held, 0); err != nil || !slices.Equal(a.Cluster, changed.Cluster) {
		t.Errorf("a changed roster read %+v, %v; want %v", a, err, changed.Cluster)
	}

	for name, c := range map[string]struct {
		p    peer.ID
		held *heldRoster
		b    []byte
	}{
		"none held":           {sp, nil, short},
		"held from another":   {ids[3], held, short},
		"demoted, no cluster": {sp, held, appendAttachYes(nil, node.GeoAnswer{Demoted: ids[2:3]}, nil, nil)},
	} {
		if _, _, err := readAttachYes(c.p, c.b, c.held, 0); !errors.Is(err, errWire) {
			t.Errorf("%s: %v, want a wire error", name, err)
		}
	}
	if _, err := readAttachRequest(from, append([]byte{attachKnown}, held.digest[:5]...)); !errors.Is(err, errWire) {
		t.Errorf("a truncated digest: %v, want a wire error", err)
	}

	// The nearest superpeers by their digest (node.AttachAsked.Near),
	// after the roster's: read, and refused when 0 or truncated.
	const near = 0x0102030405060708
	req = appendCoord(binary.BigEndian.AppendUint64(append([]byte{attachKnown | attachNear}, held.digest...), near), co)
	if in, err := readAttachRequest(from, req); err != nil || in.Near != near || !slices.Equal(in.Known, held.digest) {
		t.Errorf("a request naming its roster and its nearest: %+v, %v", in, err)
	}
	for name, b := range map[string][]byte{
		"a digest of the nearest of 0":      appendCoord(binary.BigEndian.AppendUint64([]byte{attachNear}, 0), co),
		"a truncated digest of the nearest": append([]byte{attachNear}, 1, 2, 3),
	} {
		if _, err := readAttachRequest(from, b); !errors.Is(err, errWire) {
			t.Errorf("%s: %v, want a wire error", name, err)
		}
	}
}

// attachFixture is a fresh coordinate and four peer IDs, for the attach
// protocol's round trips.
func attachFixture(t *testing.T) (*coordinate.Coordinate, []peer.ID) {
	t.Helper()
	client, err := geometric.NewClient(geometric.DefaultCoordConfig())
	if err != nil {
		t.Fatal(err)
	}
	return client.Coordinate(), testIDs(t, 4)
}
