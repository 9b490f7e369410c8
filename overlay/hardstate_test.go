package overlay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
)

// testVoter returns a fresh peer ID and its classic.ID.
func testVoter(t *testing.T) (peer.ID, classic.ID) {
	t.Helper()
	_, pk, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := peer.IDFromPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return p, classic.ID(p)
}

func testKey(b byte) dhtselect.Key {
	var k dhtselect.Key
	k[0], k[31] = b, ^b
	return k
}

// What Save stores, openHardStore reads back, in a directory it made
// (mode 0700) with its parents.
func TestHardStoreRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	s, hs, err := openHardStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 0 {
		t.Fatalf("a new directory holds %v", hs)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %v, want a directory of mode 0700", st.Mode())
	}
	_, a := testVoter(t)
	_, b := testVoter(t)
	want := map[dhtselect.Key]classic.HardState{
		testKey(1): {Term: 7, Vote: a},
		testKey(2): {Term: 1<<63 - 1, Vote: b},
		testKey(3): {Term: 4}, // saw term 4, voted for no one in it
	}
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	fst, err := os.Stat(filepath.Join(dir, hardStateFile))
	if err != nil {
		t.Fatal(err)
	}
	if fst.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fst.Mode().Perm())
	}
	_, got, err := openHardStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}
	// Zero states are left out; a state that goes back to zero is dropped.
	delete(want, testKey(3))
	want[testKey(4)] = classic.HardState{}
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	if _, got, err = openHardStore(dir); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[testKey(1)] != want[testKey(1)] || got[testKey(2)] != want[testKey(2)] {
		t.Errorf("read back %v after dropping two, want the first two of %v", got, want)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, hardStateTemp)); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// Save writes only what changed since the last Save or the open.
func TestHardStoreSaveSkipsUnchanged(t *testing.T) {
	dir := t.TempDir()
	s, hs, err := openHardStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(hs); err != nil || s.writes != 0 {
		t.Fatalf("saving the empty state of a new store: err %v, %d writes, want none", err, s.writes)
	}
	_, a := testVoter(t)
	hs[testKey(1)] = classic.HardState{Term: 1, Vote: a}
	for range 3 {
		if err := s.Save(hs); err != nil {
			t.Fatal(err)
		}
	}
	if s.writes != 1 {
		t.Errorf("%d writes for one change saved three times, want 1", s.writes)
	}
	hs[testKey(1)] = classic.HardState{Term: 2, Vote: a} // Save kept a copy
	if err := s.Save(hs); err != nil || s.writes != 2 {
		t.Errorf("a new term: err %v, %d writes, want 2", err, s.writes)
	}
	// A reopened store knows what the file holds.
	s2, hs2, err := openHardStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, hardStateFile)
	before, _ := os.Stat(path)
	if err := s2.Save(hs2); err != nil || s2.writes != 0 {
		t.Errorf("saving what was read: err %v, %d writes, want none", err, s2.writes)
	}
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Error("saving what was read replaced the file")
	}
	var none *hardStore
	if err := none.Save(hs); err != nil {
		t.Errorf("a nil store: %v", err)
	}
}

// Every file the node cannot start from is an error that wraps
// ErrHardState, names the file and says what to do.
func TestHardStoreBadFiles(t *testing.T) {
	p, _ := testVoter(t)
	key := strings.Repeat("ab", 32)
	row := func(term, vote string) string {
		v, _ := json.Marshal(vote)
		return fmt.Sprintf(`{"version":1,"clusters":[{"key":%q,"term":%s,"vote":%s}]}`, key, term, v)
	}
	good := row("3", p.String())
	if _, hs, err := openHardStore(writeHardState(t, good)); err != nil || len(hs) != 1 {
		t.Fatalf("the good file: %v, %v", hs, err)
	}
	many := `{"version":1,"clusters":[` + strings.Repeat(`{"key":"`+key+`","term":1},`, maxHardStateEntries) +
		`{"key":"` + key + `","term":1}]}`
	for _, tc := range []struct{ name, content, want string }{
		{"empty", "", "not JSON"},
		{"truncated", good[:len(good)/2], "not JSON"},
		{"garbage", "\x00\x01\x02", "not JSON"},
		{"no version", `{"clusters":[]}`, "no version"},
		{"wrong version", `{"version":2,"clusters":[]}`, "format version 2"},
		{"trailing data", good + `{}`, "not JSON"},
		{"unknown field", `{"version":1,"clusters":[],"extra":1}`, "unknown field"},
		{"huge", good + strings.Repeat(" ", maxHardStateBytes), "larger than"},
		{"too many", many, "clusters, at most"},
		{"bad vote", row("3", "not-a-peer"), "not a peer ID"},
		{"raw vote", row("3", string(p)), "not a peer ID"},
		{"term over 2^63-1", row("9223372036854775808", p.String()), "above 9223372036854775807"},
		{"term over 2^64-1", row("18446744073709551616", p.String()), "cannot unmarshal"},
		{"negative term", row("-1", p.String()), "cannot unmarshal"},
		{"short key", `{"version":1,"clusters":[{"key":"abcd","term":1}]}`, "not 64 hex digits"},
		{"bad key", `{"version":1,"clusters":[{"key":"` + strings.Repeat("zz", 32) + `","term":1}]}`, "not 64 hex digits"},
		{"duplicate key", `{"version":1,"clusters":[{"key":"` + key + `","term":1},{"key":"` + key + `","term":2}]}`, "appears twice"},
	} {
		dir := writeHardState(t, tc.content)
		path := filepath.Join(dir, hardStateFile)
		s, hs, err := openHardStore(dir)
		if err == nil || !errors.Is(err, ErrHardState) || !strings.Contains(err.Error(), path) ||
			!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line wrapping ErrHardState that names %s and says %q", tc.name, err, path, tc.want)
		}
		if s != nil || hs != nil {
			t.Errorf("%s: a store and %v with the error", tc.name, hs)
		}
		if err != nil && tc.name != "wrong version" && !strings.Contains(err.Error(), "move it aside") {
			t.Errorf("%s: %v does not say what to do", tc.name, err)
		}
	}
}

// writeHardState returns a data directory whose file holds content.
func writeHardState(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, hardStateFile), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A data directory that is a file, or a file that cannot be read, is an
// error; Save refuses to write what could not be read back.
func TestHardStoreBadDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openHardStore(file); !errors.Is(err, ErrHardState) || !strings.Contains(err.Error(), file) {
		t.Errorf("a file as the data directory: %v", err)
	}
	if _, _, err := openHardStore(filepath.Join(file, "sub")); !errors.Is(err, ErrHardState) || !strings.Contains(err.Error(), file) {
		t.Errorf("a directory below a file: %v", err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, hardStateFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openHardStore(dir); !errors.Is(err, ErrHardState) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory as the file: %v", err)
	}

	s, _, err := openHardStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, a := testVoter(t)
	for _, bad := range []classic.HardState{{Term: 1 << 63, Vote: a}, {Term: 1, Vote: "not a peer"}} {
		if err := s.Save(map[dhtselect.Key]classic.HardState{testKey(1): bad}); !errors.Is(err, ErrHardState) || s.writes != 0 {
			t.Errorf("Save(%v): %v, %d writes", bad, err, s.writes)
		}
	}
}

// A data directory left by an interrupted Save (a temporary file beside a
// whole one) opens with the whole file's state, and the leftover goes.
func TestHardStoreInterruptedSave(t *testing.T) {
	p, _ := testVoter(t)
	dir := writeHardState(t, fmt.Sprintf(`{"version":1,"clusters":[{"key":%q,"term":5,"vote":%q}]}`, strings.Repeat("01", 32), p))
	tmp := filepath.Join(dir, ".hardstate-123.tmp")
	if err := os.WriteFile(tmp, []byte(`{"version":1,"clu`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, hs, err := openHardStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	var k dhtselect.Key
	copy(k[:], bytes.Repeat([]byte{1}, 32))
	if hs[k] != (classic.HardState{Term: 5, Vote: classic.ID(p)}) || len(hs) != 1 {
		t.Errorf("read %v", hs)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the leftover temporary file: %v", err)
	}
}

// WithDataDir refuses an empty path; Validate refuses a data directory
// that is a file, and takes one that does not exist yet.
func TestDataDirConfig(t *testing.T) {
	var c Config
	if err := WithDataDir("")(&c); !errors.Is(err, ErrConfig) {
		t.Errorf("WithDataDir(\"\"): %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c = DefaultConfig()
	if err := WithDataDir(file)(&c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), file+" is not a directory") {
		t.Errorf("a file as the data directory: %v", err)
	}
	c.DataDir = filepath.Join(t.TempDir(), "new")
	if err := c.Validate(); err != nil {
		t.Errorf("a data directory to be made: %v", err)
	}
	if _, err := os.Stat(c.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Validate made the data directory: %v", err)
	}
}

// The store a Config asks for: none without Quorum, none and a warning
// with Quorum but no DataDir.
func TestOpenConfigHardStore(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cfg := Config{DataDir: filepath.Join(t.TempDir(), "unused")}
	if s, hs, err := openConfigHardStore(&cfg, log); s != nil || len(hs) != 0 || err != nil {
		t.Errorf("without quorum: %v %v %v", s, hs, err)
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("without quorum the data directory was made: %v", err)
	}
	cfg = Config{Quorum: true}
	if s, hs, err := openConfigHardStore(&cfg, log); s != nil || hs == nil || err != nil {
		t.Errorf("without a data directory: %v %v %v", s, hs, err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "data directory") {
		t.Errorf("no warning: %q", logs.String())
	}
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	if s, _, err := openConfigHardStore(&cfg, log); s == nil || err != nil {
		t.Errorf("with both: %v %v", s, err)
	}
}
