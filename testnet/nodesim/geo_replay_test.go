package nodesim

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// TestGeoHundredReplays: the setting of the crash tests (100 geometric
// machines on PlanetLab, S = 10, bully) replays a seed exactly through a
// superpeer's crash and the minute after it: the same state changes and,
// bit for bit, the same coordinates. The 40-node replay of
// TestGeoSeedReplays did not catch that serf's gravity step could draw a
// direction from the global random source when a node's Vivaldi step landed
// on the origin (geometric.Client now keeps it off that path): on seed 0
// that happens after the crash, and the runs of
// TestGeoCrashTakeoverOutlivedConnection differed from one run to the next.
func TestGeoHundredReplays(t *testing.T) {
	skipShort(t)
	m := loadPlanetLab(t)
	run := func() (uint64, int, []*coordinate.Coordinate) {
		s := geoCrashSim(t, m, 0, 30*time.Second)
		s.Record = true
		victim, _ := largestGeoCluster(t, s)
		s.Crash(victim)
		s.RunFor(time.Minute)
		coords := make([]*coordinate.Coordinate, s.N())
		for i := range coords {
			if st := s.GeoState(i); st != nil {
				coords[i] = st.Coord
			}
		}
		return s.Trace(), len(s.Changes), coords
	}
	a, na, ca := run()
	b, nb, cb := run()
	if a != b || na != nb {
		t.Errorf("twice: traces %x (%d changes) and %x (%d changes)", a, na, b, nb)
	}
	for i := range ca {
		if !reflect.DeepEqual(ca[i], cb[i]) {
			t.Errorf("twice: n%d's coordinate differs a minute after the crash:\n%+v\n%+v", i, ca[i], cb[i])
		}
	}
	if na < 10 {
		t.Errorf("%d state changes in the minute after a crash: the run did not run", na)
	}
}
