package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"
)

var (
	geoliveOut   = flag.String("geolive.out", "", "TestGeoLiveVirtual: run it, and write its row as JSON to this file (make bench: peer bench --geolive)")
	geoliveDur   = flag.Duration("geolive.duration", 5*time.Minute, "TestGeoLiveVirtual: the virtual time each side runs")
	geoliveN     = flag.Int("geolive.n", 100, "TestGeoLiveVirtual: nodes, on the first N PlanetLab hosts (490 at most)")
	geoliveS     = flag.Int("geolive.s", 10, "TestGeoLiveVirtual: superpeers (tokens)")
	geoliveSim   = flag.Int("geolive.simseeds", 8, "TestGeoLiveVirtual: seeds of the simulator's side")
	geoliveSeed  = flag.Uint64("geolive.seed", 1, "TestGeoLiveVirtual: the seed of the live side's keys, and the simulator's first")
	geoliveLog   = flag.String("geolive.log", "", "TestGeoLiveVirtual: write the live nodes' notes, debug level up, as JSON lines to this file")
	geoliveScale = flag.Float64("geolive.scale", 1, "TestGeoLiveVirtual: multiply every RTT of the PlanetLab matrix by this (latency.Matrix.Scale): the same network at another scale")
	geoliveReloc = flag.Bool("geolive.relocate", false, "TestGeoLiveVirtual: turn on the relocation between clusters on both sides")
)

// TestGeoLiveVirtual: geometric placement on 100 PlanetLab hosts with
// S = 10 (-geolive.n, -geolive.s), live (in-process testnet in a testing/synctest bubble, virtual
// time) and in the node simulator, side by side with random placement
// and the offline k-median on the same hosts (GeoLive). It takes tens of
// minutes of wall time: it runs only with -geolive.out (make bench).
// Both sides must cover every node with S superpeers; the figures are for
// the table, not asserted.
func TestGeoLiveVirtual(t *testing.T) {
	if *geoliveOut == "" {
		t.Skip("100 live nodes for minutes of virtual time: run with -geolive.out FILE")
	}
	cfg := GeoLiveConfig{N: *geoliveN, S: *geoliveS, SimSeeds: *geoliveSim, Seed: *geoliveSeed, Duration: *geoliveDur, Relocate: *geoliveReloc,
		InBubble: inBubble(t),
		Progress: func(s string) { fmt.Fprintln(os.Stderr, s) }}
	if *geoliveScale != 1 {
		if !(*geoliveScale > 0) {
			t.Fatalf("-geolive.scale %v: want a positive factor", *geoliveScale)
		}
		cfg.Matrix = planetLabMatrix(t).Scale(*geoliveScale)
	}
	if *geoliveLog != "" {
		f, err := os.Create(*geoliveLog)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cfg.Logger = slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	row, err := GeoLive(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sim  %+v", row.Sim)
	t.Logf("live %+v", row.Live)
	t.Logf("random %.1f ms, offline %.1f ms", row.RandomMs, row.OfflineMs)
	for _, s := range []GeoLiveSide{row.Sim, row.Live} {
		if s.Error != "" || s.Superpeers != row.S || s.Unattached > 0 {
			t.Errorf("a side failed: %+v", s)
		}
	}
	b, err := json.MarshalIndent([]GeoLiveRow{row}, "", "  ")
	if err == nil {
		err = os.WriteFile(*geoliveOut, append(b, '\n'), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteGeoLiveTable(os.Stdout, []GeoLiveRow{row}); err != nil {
		t.Fatal(err)
	}
}
