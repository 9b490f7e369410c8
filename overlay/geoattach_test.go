package overlay

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/overlay/node"
)

// What a member says of itself in an attach request (private, flapping,
// leaving) and the demoted members in the superpeer's yes round-trip; a request
// with an unknown flag bit, and a yes that demotes a peer outside its
// cluster, are refused as malformed.
func TestAttachFlags(t *testing.T) {
	client, err := geometric.NewClient(geometric.DefaultCoordConfig())
	if err != nil {
		t.Fatal(err)
	}
	co := client.Coordinate()
	ids := testIDs(t, 4)
	sp, from := ids[0], ids[1]
	for _, c := range []struct{ private, flapping, leaving bool }{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, false}, {false, false, true}, {true, true, true}} {
		flags := attachFlags(c.private, c.flapping)
		if c.leaving {
			flags |= attachLeaving
		}
		req := appendRTTs(appendCoord([]byte{flags}, co), []time.Duration{time.Millisecond})
		in, err := readAttachRequest(from, req)
		if err != nil || in.From != from || in.Private != c.private || in.Flapping != c.flapping || in.Leaving != c.leaving || !sameCoordinate(in.Coord, co) || len(in.RTTs) != 1 {
			t.Errorf("%+v: read %+v, %v", c, in, err)
		}
	}
	if _, err := readAttachRequest(from, appendCoord([]byte{attachFlags(true, true) | attachLeaving | 1<<3}, co)); !errors.Is(err, errWire) {
		t.Errorf("an unknown flag bit: %v, want a wire error", err)
	}
	if _, err := readAttachRequest(from, appendCoord(nil, co)); err == nil {
		t.Error("a request without its flags byte accepted")
	}

	yes := node.GeoAnswer{Cluster: ids[:3], Candidates: ids[2:3], Coords: []node.PeerCoord{{ID: ids[2], Coord: co}}, Demoted: []peer.ID{ids[2]}}
	a, err := readAttachYes(sp, appendAttachYes(nil, yes))
	if err != nil || !a.Yes || !slices.Equal(a.Cluster, yes.Cluster) || !slices.Equal(a.Candidates, yes.Candidates) || len(a.Coords) != 1 ||
		!slices.Equal(a.Demoted, yes.Demoted) {
		t.Fatalf("round trip of a yes: %+v, %v", a, err)
	}
	yes.Demoted = []peer.ID{ids[3]}
	if _, err := readAttachYes(sp, appendAttachYes(nil, yes)); !errors.Is(err, errWire) {
		t.Errorf("a yes demoting a peer outside its cluster: %v, want a wire error", err)
	}
	yes.Demoted = nil
	if _, err := readAttachYes(from, appendAttachYes(nil, yes)); !errors.Is(err, errWire) {
		t.Errorf("a yes whose cluster starts with another: %v, want a wire error", err)
	}
}

// An attach yes with a survey: the flag and the placement (an empty ID
// for a token none was named for) round-trip; a flag byte other than 0
// or 1, a placement of more than maxPlacement entries, a truncated one
// and trailing bytes are refused.
func TestAttachYesSurvey(t *testing.T) {
	ids := testIDs(t, 3)
	yes := node.GeoAnswer{Yes: true, Cluster: []peer.ID{ids[0], ids[1]}, Surveying: true, Placement: []peer.ID{ids[0], "", ids[2]}}
	got, err := readAttachYes(ids[0], appendAttachYes(nil, yes))
	if err != nil || !got.Surveying || !slices.Equal(got.Placement, yes.Placement) {
		t.Fatalf("round trip: %+v, %v; want surveying, placement %v", got, err, yes.Placement)
	}
	head := appendIDs(appendCoords(appendIDs(appendIDs(nil, yes.Cluster), nil), nil), nil)
	for name, b := range map[string][]byte{
		"flag 2":            appendPlacement(append(slices.Clone(head), 2), nil),
		"no flag":           head,
		"placement too big": binary.AppendUvarint(append(slices.Clone(head), 0), maxPlacement+1),
		"truncated":         appendPlacement(append(slices.Clone(head), 0), []peer.ID{ids[1]})[:len(head)+4],
		"trailing":          append(appendPlacement(append(slices.Clone(head), 0), nil), 0),
	} {
		if _, err := readAttachYes(ids[0], b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
