package overlay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestIdentityRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := SaveIdentity(path, k); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	got, err := LoadIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := peer.IDFromPrivateKey(k)
	if id, _ := peer.IDFromPrivateKey(got); id != want {
		t.Errorf("loaded key is peer %s, saved %s", id, want)
	}
	if err := SaveIdentity(path, k); err == nil {
		t.Error("SaveIdentity overwrote an existing key file")
	}
}

func TestIdentityBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	k, _, _ := crypto.GenerateEd25519Key(nil)
	good, _ := crypto.MarshalPrivateKey(k)
	cases := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "does not exist"},
		{"open to others", write("open", good, 0o644), "chmod 600"},
		{"corrupt", write("corrupt", []byte("not a key"), 0o600), "does not hold a libp2p private key"},
		{"truncated", write("short", good[:len(good)/2], 0o600), "does not hold a libp2p private key"},
		{"directory", dir, "not a regular file"},
	}
	for _, c := range cases {
		_, err := LoadIdentity(c.path)
		if !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrIdentity saying %q", c.name, err, c.want)
		}
	}
}
