package bench

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/superpeer/superpeer/testnet"
)

var (
	livegeoSizes = flag.String("livegeo.sizes", "", "TestLiveScaleGeometric: run the scale suite's live part with the geometric strategy at these sizes (comma-separated)")
	livegeoOut   = flag.String("livegeo.out", "", "TestLiveScaleGeometric: write the rows as JSON to this file")
)

// TestLiveScaleGeometric measures the geometric strategy's rows of the
// scale suite's live part (LiveScale, S = n/16, the testnet's announce
// interval for the strategy), which peer bench runs with the DHT strategy
// only: go test ./bench -run TestLiveScaleGeometric -timeout 30m -args
// -livegeo.sizes 32,64 [-livegeo.out FILE]. It is a measurement, not a
// check: without -livegeo.sizes it is skipped.
func TestLiveScaleGeometric(t *testing.T) {
	if *livegeoSizes == "" {
		t.Skip("a measurement: give -livegeo.sizes")
	}
	var sizes []int
	for _, f := range strings.Split(*livegeoSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("-livegeo.sizes %q: %v", *livegeoSizes, err)
		}
		sizes = append(sizes, n)
	}
	rows, err := LiveScale(context.Background(), LiveScaleConfig{Sizes: sizes, Strategy: testnet.StrategyGeometric, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteLiveScaleTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if *livegeoOut != "" {
		data, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*livegeoOut, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
