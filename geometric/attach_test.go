package geometric

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

func TestAttach(t *testing.T) {
	self := at(0, 0)
	sps := []Superpeer{
		{ID: "far", Coord: at(50, 0)},
		{ID: "near", Coord: at(10, 0)},
		{ID: "mid", Coord: at(20, 0)},
	}
	attach := func(sps []Superpeer, capacity int) (ID, error) { return Attach(self, sps, capacity) }
	if got, err := attach(sps, 2); err != nil || got != "near" {
		t.Fatalf("Attach = %q, %v; want near", got, err)
	}
	// Full: the next nearest.
	sps[1].Load = 2
	if got, _ := attach(sps, 2); got != "mid" {
		t.Errorf("near full: Attach = %q, want mid", got)
	}
	// A measured RTT overrides the estimate.
	sps[0].RTT = 5 * time.Millisecond
	if got, _ := attach(sps, 2); got != "far" {
		t.Errorf("far measured at 5 ms: Attach = %q, want far", got)
	}
	// Everyone full.
	for i := range sps {
		sps[i].Load = 2
	}
	if _, err := attach(sps, 2); !errors.Is(err, ErrNoRoom) {
		t.Errorf("all full: err = %v, want ErrNoRoom", err)
	}
	if _, err := attach(nil, 2); !errors.Is(err, ErrNoRoom) {
		t.Errorf("no superpeers: err = %v, want ErrNoRoom", err)
	}
	if _, err := attach(sps, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("capacity 0: err = %v, want ErrConfig", err)
	}
	// Superpeers without coordinate or measurement, or of another
	// dimensionality, are skipped.
	odd := []Superpeer{{ID: "nocoord"}, {ID: "2d", Coord: &coordinate.Coordinate{Vec: []float64{0, 0}}}, {ID: "ok", Coord: at(90, 0)}}
	if got, err := attach(odd, 1); err != nil || got != "ok" {
		t.Errorf("Attach = %q, %v; want ok", got, err)
	}
	// Ties go to the smaller ID.
	tie := []Superpeer{{ID: "b", Coord: at(10, 0)}, {ID: "a", Coord: at(-10, 0)}}
	if got, _ := attach(tie, 1); got != "a" {
		t.Errorf("tie: Attach = %q, want a", got)
	}
}

func TestAttachAll(t *testing.T) {
	// Superpeers 0 (x=0) and 5 (x=100); peers 1..4 at 10, 20, 30, 90.
	coords := []*coordinate.Coordinate{at(0, 0), at(10, 0), at(20, 0), at(30, 0), at(90, 0), at(100, 0)}
	got, err := AttachAll(coords, []int{0, 5}, 3)
	if want := []int{0, 0, 0, 0, 5, 5}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("AttachAll = %v, %v; want %v", got, err, want)
	}
	// Capacity 2: the farthest of 1..3 from 0 (peer 3) goes to 5.
	got, err = AttachAll(coords, []int{0, 5}, 2)
	if want := []int{0, 0, 0, 5, 5, 5}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("capacity 2: AttachAll = %v, %v; want %v", got, err, want)
	}
	// Capacity 1: no room for one of them.
	got, err = AttachAll(coords, []int{0, 5}, 1)
	if !errors.Is(err, ErrNoRoom) || slices.Index(got, -1) < 0 {
		t.Fatalf("capacity 1: AttachAll = %v, %v; want ErrNoRoom and a -1", got, err)
	}
	for _, bad := range [][]int{{0, 6}, {-1}, {0, 0}} {
		if _, err := AttachAll(coords, bad, 3); !errors.Is(err, ErrConfig) {
			t.Errorf("superpeers %v: err = %v, want ErrConfig", bad, err)
		}
	}
	if _, err := AttachAll(coords, []int{0}, 0); !errors.Is(err, ErrConfig) {
		t.Errorf("capacity 0: err = %v, want ErrConfig", err)
	}
	// Everyone a superpeer, and no peer at all.
	if got, err := AttachAll(coords[:2], []int{1, 0}, 1); err != nil || !slices.Equal(got, []int{0, 1}) {
		t.Errorf("all superpeers: %v, %v", got, err)
	}
	if got, err := AttachAll(nil, nil, 1); err != nil || len(got) != 0 {
		t.Errorf("no peers: %v, %v", got, err)
	}
}

func TestAttachmentRTT(t *testing.T) {
	rtt := func(i, j int) time.Duration {
		if i == 3 || j == 3 {
			return 0 // not measured
		}
		return time.Duration(10*(i+j)) * time.Millisecond
	}
	// 0 is the superpeer of 1, 2, 3; 4 is unattached.
	mean, p95 := AttachmentRTT([]int{0, 0, 0, 0, -1}, rtt)
	if mean != 15*time.Millisecond || p95 != 20*time.Millisecond {
		t.Errorf("AttachmentRTT = %v, %v; want 15ms, 20ms", mean, p95)
	}
	if mean, p95 := AttachmentRTT([]int{0}, rtt); mean != 0 || p95 != 0 {
		t.Errorf("no ordinary peer: %v, %v", mean, p95)
	}
}
