package overlay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOutageStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, ran, got, err := openOutageStore(dir)
	if err != nil || ran || len(got) != 0 {
		t.Fatalf("first open: ran %v, outages %v, err %v; want a fresh store", ran, got, err)
	}
	at := []time.Time{time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 11, 0, 30, 0, time.UTC)}
	if err := s.Save(at); err != nil {
		t.Fatal(err)
	}
	_, ran, got, err = openOutageStore(dir)
	if err != nil || !ran || len(got) != 2 || !got[0].Equal(at[0]) || !got[1].Equal(at[1]) {
		t.Fatalf("reopen: ran %v, outages %v, err %v; want ran and %v", ran, got, err, at)
	}
	for name, body := range map[string]string{
		"not json":      "{",
		"wrong version": `{"version": 2, "outages": []}`,
		"unknown field": `{"version": 1, "outages": [], "x": 1}`,
		"too many":      `{"version": 1, "outages": [` + strings.Repeat(`"2026-12-01T11:00:00Z",`, maxOutages) + `"2026-12-01T11:00:00Z"]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, outageFile), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, _, err := openOutageStore(dir)
		if !errors.Is(err, ErrHardState) || !strings.Contains(err.Error(), outageFile) || !strings.Contains(err.Error(), "move it aside") {
			t.Errorf("%s: err = %v, want ErrHardState naming the file and what to do", name, err)
		}
	}
	var none *outageStore
	if err := none.Save(at); err != nil {
		t.Errorf("nil store: %v", err)
	}
}
