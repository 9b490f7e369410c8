package overlay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// A node's own outages (host quality: see overlay/node's elect.go) must
// survive its restarts: a node that crashed and came back twice within a
// minute is ranked last by the peers that saw its connections go, and must
// rank itself last too, or it claims its cluster against their leader. The
// data directory keeps them in outageFile, as JSON:
//
//	{"version": 1, "outages": ["2026-12-01T11:03:13.123456789Z", ...]}
//
// The file's existence says that the node ran before with this data
// directory (so its start is a restart, itself an outage). It is written
// at start and whenever the machine reports a new outage, atomically as
// the hard state is (writeAtomic).

const (
	outageFile    = "outages.json"
	outageVersion = 1
	// maxOutages bounds what is read: the machine keeps those of the
	// last minute, at most one per five seconds.
	maxOutages    = 64
	maxOutageSize = 16 << 10
)

type outageDoc struct {
	Version int         `json:"version"`
	Outages []time.Time `json:"outages"`
}

// outageStore keeps a node's outages in its data directory; a nil store
// keeps nothing.
type outageStore struct {
	dir, path string
	last      []time.Time
}

// openOutageStore opens the store in dir (which openHardStore's rules
// create), reports whether the node ran before (the file exists), returns
// the outages it holds, and writes the file, so that the next start knows
// that this one happened. A damaged file is an error that names it and
// says what to do.
func openOutageStore(dir string) (*outageStore, bool, []time.Time, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, nil, fmt.Errorf("%w: data directory %s: %w (give a directory this user may create and write, with --data-dir)", ErrHardState, dir, err)
	}
	removeTemps(dir)
	s := &outageStore{dir: dir, path: filepath.Join(dir, outageFile)}
	outages, ran, err := readOutages(s.path)
	if err != nil {
		return nil, false, nil, err
	}
	s.last = slices.Clone(outages)
	if err := s.write(outages); err != nil {
		return nil, false, nil, err
	}
	return s, ran, outages, nil
}

func readOutages(path string) ([]time.Time, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrHardState, path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxOutageSize+1))
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrHardState, path, err)
	}
	bad := func(what string) error {
		return fmt.Errorf("%w: %s: %s (move it aside: the node then forgets its recent outages)", ErrHardState, path, what)
	}
	if len(b) > maxOutageSize {
		return nil, false, bad(fmt.Sprintf("larger than %d bytes", maxOutageSize))
	}
	var doc outageDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, false, bad(fmt.Sprintf("not an outage file: %v", err))
	}
	switch {
	case doc.Version != outageVersion:
		return nil, false, bad(fmt.Sprintf("version %d, want %d", doc.Version, outageVersion))
	case len(doc.Outages) > maxOutages:
		return nil, false, bad(fmt.Sprintf("%d outages, at most %d", len(doc.Outages), maxOutages))
	}
	return doc.Outages, true, nil
}

// Save writes outages when they differ from what the file holds. On a nil
// store it does nothing.
func (s *outageStore) Save(outages []time.Time) error {
	if s == nil || slices.EqualFunc(outages, s.last, time.Time.Equal) {
		return nil
	}
	if err := s.write(outages); err != nil {
		return err
	}
	s.last = slices.Clone(outages)
	return nil
}

func (s *outageStore) write(outages []time.Time) error {
	b, err := json.Marshal(outageDoc{Version: outageVersion, Outages: append([]time.Time{}, outages...)})
	if err == nil {
		err = writeAtomic(s.dir, s.path, b)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrHardState, s.path, err)
	}
	return nil
}
