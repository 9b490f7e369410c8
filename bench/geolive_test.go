package bench

import (
	"strings"
	"testing"
	"time"
)

// geoSettle tells the last change of the placement from the last change
// of its superpeers: a node that moves to another superpeer changes the
// first only; and a run is settled only with a minute of quiet, every
// node named a superpeer and S of them.
func TestGeoSettle(t *testing.T) {
	var s geoSettle
	s.see(time.Second, []int{0, 0, 0, 3})   // superpeers 0 and 3
	s.see(2*time.Second, []int{0, 0, 3, 3}) // node 2 moves to 3
	s.see(3*time.Second, []int{0, 0, 3, 3}) // nothing changes
	if s.changed != 2*time.Second || s.roles != time.Second {
		t.Fatalf("placement last changed at %v, superpeers at %v; want 2s and 1s", s.changed, s.roles)
	}
	s.see(4*time.Second, []int{1, 1, 3, 3}) // 1 takes over from 0
	if s.changed != 4*time.Second || s.roles != 4*time.Second {
		t.Fatalf("placement last changed at %v, superpeers at %v; want 4s and 4s", s.changed, s.roles)
	}
	s.early = GeoLiveSide{MeanMs: 7, CoordError: 0.5}
	for _, c := range []struct {
		d          time.Duration
		side       GeoLiveSide
		wantSettle bool
	}{
		{4*time.Second + time.Minute, GeoLiveSide{Superpeers: 2}, true},
		{4*time.Second + time.Minute - time.Second, GeoLiveSide{Superpeers: 2}, false},
		{4*time.Second + time.Minute, GeoLiveSide{Superpeers: 2, Unattached: 1}, false},
		{4*time.Second + time.Minute, GeoLiveSide{Superpeers: 1}, false},
	} {
		side := c.side
		s.finish(&side, c.d, 2)
		if side.Settled != c.wantSettle || side.SettleS != 4 || side.RolesS != 4 || side.EarlyMs != 7 || side.EarlyCoordError != 0.5 {
			t.Errorf("run of %v, %+v: got %+v, want settled %v at 4 s with the early figures", c.d, c.side, side, c.wantSettle)
		}
	}
}

// The table has the simulator's spread over its seeds, least to most.
func TestGeoLiveTableSpread(t *testing.T) {
	row := GeoLiveRow{N: 4, S: 2, RandomMs: 40, OfflineMs: 20,
		Sim:      GeoLiveSide{MeanMs: 30, SettleS: 100, Settled: true},
		Live:     GeoLiveSide{MeanMs: 33, SettleS: 120, Settled: true},
		SimSeeds: []GeoLiveSide{{MeanMs: 26, SettleS: 300}, {MeanMs: 34, SettleS: 90, Settled: true}}}
	var b strings.Builder
	if err := WriteGeoLiveTable(&b, []GeoLiveRow{row}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"simulator, 3 seeds (least–most) | 26.0–34.0 |", "| 0.65–0.85 |", "90–300 (2 of 3 settled)", "| 1.10 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
