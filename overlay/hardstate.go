package overlay

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
)

// ErrHardState reports a store of hard state (Config.DataDir) that cannot
// be read or written.
var ErrHardState = errors.New("overlay: hard state")

// The hard state of a node is what classic.Quorum must remember across
// restarts, for each cluster the node has voted in: the highest term it has
// seen and whom it voted for in that term. Without it a node that restarts
// in the middle of an election can grant a second claimant the term it
// granted before it stopped, and two superpeers hold one term.
//
// It lives in one file, hardStateFile in the data directory, as JSON:
//
//	{"version": 1, "clusters": [
//	  {"key": "<64 hex digits>", "term": 7, "vote": "12D3KooW..."}]}
//
// A vote is a peer ID in its text form, or absent for none. The file is
// replaced whole on every change (a temporary file in the same directory,
// synced, renamed over the old one, then the directory synced), so it holds
// either the old state or the new one, never a mix, even after a crash or a
// power cut.

const (
	// hardStateFile is the name of the file in the data directory.
	hardStateFile = "hardstate.json"
	// hardStateVersion is the version of its format.
	hardStateVersion = 1
	// maxHardStateBytes bounds the file that is read: a damaged disk must
	// not make the node read gigabytes. At most maxHardStateEntries entries
	// of about 170 bytes take well under it.
	maxHardStateBytes = 1 << 20
	// maxHardStateEntries bounds the clusters in the file. A node's cluster
	// key is its own key masked to k bits, so it is in at most 257
	// clusters over its life (k = 0 … 256).
	maxHardStateEntries = 4096
	// maxHardTerm is the highest term classic.Quorum takes (it drops
	// claims above it, so that one above a term never wraps round).
	maxHardTerm = math.MaxInt64
	// hardStateTemp is the pattern of the temporary files Save writes.
	hardStateTemp = ".hardstate-*.tmp"
)

// hardStateDoc is the file's content.
type hardStateDoc struct {
	Version  int            `json:"version"`
	Clusters []hardStateRow `json:"clusters"`
}

type hardStateRow struct {
	Key  string `json:"key"`
	Term uint64 `json:"term"`
	Vote string `json:"vote,omitempty"`
}

// hardStore keeps a node's hard states in a file of its data directory. A
// nil *hardStore keeps nothing: its Save does nothing (no Quorum, or no
// data directory).
type hardStore struct {
	dir, path string
	// last is what the file holds: loaded at open, then saved.
	last map[dhtselect.Key]classic.HardState
	// writes counts the files written, for tests.
	writes int
}

// openHardStore opens the store in the data directory dir, which it
// creates (mode 0700, with its parents) when it is missing, and returns
// the hard states the file holds: none when there is no file yet. A
// directory that cannot be made or read, and a file that is unreadable,
// too large, not the JSON of a known version, or that holds a bad key,
// term or vote, is an error that wraps ErrHardState, names the path and
// says what to do. Temporary files that an interrupted Save left behind
// are removed.
func openHardStore(dir string) (*hardStore, map[dhtselect.Key]classic.HardState, error) {
	if dir == "" {
		return nil, nil, fmt.Errorf("%w: no data directory", ErrHardState)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("%w: data directory %s: %w (give a directory this user may create and write, with --data-dir)", ErrHardState, dir, err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: data directory %s: %w", ErrHardState, dir, err)
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("%w: data directory %s is not a directory (give a directory with --data-dir)", ErrHardState, dir)
	}
	removeTemps(dir)
	s := &hardStore{dir: dir, path: filepath.Join(dir, hardStateFile)}
	hs, err := readHardState(s.path)
	if err != nil {
		return nil, nil, err
	}
	s.last = hs
	return s, maps.Clone(hs), nil
}

// corruptHint says what to do about a hard-state file that cannot be used.
const corruptHint = "restore it from a backup, or move it aside to start with no votes " +
	"(the node may then vote a second time in a term it voted in before it stopped)"

// readHardState reads and checks the file at path; a missing file is an
// empty state.
func readHardState(path string) (map[dhtselect.Key]classic.HardState, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[dhtselect.Key]classic.HardState{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w (the node needs to read and write its data directory)", ErrHardState, path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file; move it aside", ErrHardState, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxHardStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w (the node needs to read and write its data directory)", ErrHardState, path, err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s is damaged: %s; %s", ErrHardState, path, fmt.Sprintf(format, a...), corruptHint)
	}
	if len(b) > maxHardStateBytes {
		return nil, bad("larger than %d bytes", maxHardStateBytes)
	}
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, bad("not JSON (%v)", err)
	}
	switch {
	case v.Version == nil:
		return nil, bad("no version")
	case *v.Version != hardStateVersion:
		return nil, fmt.Errorf("%w: %s has format version %d, this program reads version %d; run the program that wrote it, or %s",
			ErrHardState, path, *v.Version, hardStateVersion, corruptHint)
	}
	var doc hardStateDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, bad("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("data after the JSON object")
	}
	if len(doc.Clusters) > maxHardStateEntries {
		return nil, bad("%d clusters, at most %d", len(doc.Clusters), maxHardStateEntries)
	}
	out := make(map[dhtselect.Key]classic.HardState, len(doc.Clusters))
	for i, r := range doc.Clusters {
		k, hs, err := r.decode()
		if err != nil {
			return nil, bad("cluster %d: %v", i+1, err)
		}
		if _, dup := out[k]; dup {
			return nil, bad("cluster %d: key %s appears twice", i+1, r.Key)
		}
		if hs != (classic.HardState{}) {
			out[k] = hs
		}
	}
	return out, nil
}

func (r hardStateRow) decode() (dhtselect.Key, classic.HardState, error) {
	var k dhtselect.Key
	b, err := hex.DecodeString(r.Key)
	if err != nil || len(b) != len(k) {
		return k, classic.HardState{}, fmt.Errorf("key %.80q is not %d hex digits", r.Key, 2*len(k))
	}
	copy(k[:], b)
	if r.Term > maxHardTerm {
		return k, classic.HardState{}, fmt.Errorf("term %d is above %d", r.Term, uint64(maxHardTerm))
	}
	hs := classic.HardState{Term: r.Term}
	if r.Vote != "" {
		p, err := peer.Decode(r.Vote)
		if err != nil {
			return k, classic.HardState{}, fmt.Errorf("vote %.80q is not a peer ID: %v", r.Vote, err)
		}
		hs.Vote = classic.ID(p)
	}
	return k, hs, nil
}

// encodeHardState is the file's content for hs: entries sorted by key,
// zero states left out. It refuses what readHardState would refuse, so
// that Save never writes a file the node cannot start from.
func encodeHardState(hs map[dhtselect.Key]classic.HardState) ([]byte, error) {
	keys := slices.SortedFunc(maps.Keys(hs), func(a, b dhtselect.Key) int { return bytes.Compare(a[:], b[:]) })
	doc := hardStateDoc{Version: hardStateVersion, Clusters: make([]hardStateRow, 0, len(keys))}
	for _, k := range keys {
		s := hs[k]
		if s == (classic.HardState{}) {
			continue
		}
		if s.Term > maxHardTerm {
			return nil, fmt.Errorf("cluster %x: term %d is above %d", k, s.Term, uint64(maxHardTerm))
		}
		r := hardStateRow{Key: hex.EncodeToString(k[:]), Term: s.Term}
		if s.Vote != classic.None {
			p, err := peer.IDFromBytes([]byte(s.Vote))
			if err != nil {
				return nil, fmt.Errorf("cluster %x: vote %q is not a peer ID: %v", k, s.Vote, err)
			}
			r.Vote = p.String()
		}
		doc.Clusters = append(doc.Clusters, r)
	}
	if len(doc.Clusters) > maxHardStateEntries {
		return nil, fmt.Errorf("%d clusters, at most %d", len(doc.Clusters), maxHardStateEntries)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Save stores hs, the hard state of every cluster the node has voted in,
// and returns once it is on disk: call it after each Ready, before sending
// that Ready's messages. It writes nothing when hs is what the file holds
// already (zero states count as absent), so calling it after every Ready
// costs a map comparison. After an error the file holds the state of the
// last successful Save, and the next Save writes again. The caller keeps
// hs; Save keeps a copy. On a nil store it does nothing.
func (s *hardStore) Save(hs map[dhtselect.Key]classic.HardState) error {
	if s == nil {
		return nil
	}
	hs = maps.Clone(hs)
	maps.DeleteFunc(hs, func(_ dhtselect.Key, v classic.HardState) bool { return v == classic.HardState{} })
	if maps.Equal(hs, s.last) {
		return nil
	}
	b, err := encodeHardState(hs)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrHardState, s.path, err)
	}
	if err := writeAtomic(s.dir, s.path, b); err != nil {
		return fmt.Errorf("%w: %s: %w (the node cannot keep its votes: check the disk and the data directory)", ErrHardState, s.path, err)
	}
	s.last = hs
	s.writes++
	return nil
}

// removeTemps removes the temporary files an interrupted writeAtomic left
// in dir (the files they were to replace are whole).
func removeTemps(dir string) {
	if stale, err := filepath.Glob(filepath.Join(dir, hardStateTemp)); err == nil {
		for _, p := range stale {
			_ = os.Remove(p)
		}
	}
}

// writeAtomic replaces the file at path, in dir, with b: a temporary file
// written and synced, renamed over path, then dir synced, so that path
// holds either its old content or b after a crash.
func writeAtomic(dir, path string, b []byte) (err error) {
	f, err := os.CreateTemp(dir, hardStateTemp) // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// openConfigHardStore opens the store that cfg asks for: none (a nil
// store and no states) without Quorum, and none with a warning on log when
// Quorum has no DataDir, since the node's votes are then forgotten when it
// stops.
func openConfigHardStore(cfg *Config, log *slog.Logger) (*hardStore, map[dhtselect.Key]classic.HardState, error) {
	switch {
	case !cfg.Quorum:
		return nil, map[dhtselect.Key]classic.HardState{}, nil
	case cfg.DataDir == "":
		log.Warn("quorum without a data directory: this node forgets its terms and votes when it stops, so after a restart it may vote twice in one term; set one with --data-dir (overlay.WithDataDir)")
		return nil, map[dhtselect.Key]classic.HardState{}, nil
	}
	return openHardStore(cfg.DataDir)
}
