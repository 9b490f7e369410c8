package overlay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// ErrIdentity reports a key file that cannot be used.
var ErrIdentity = errors.New("overlay: identity")

// SaveIdentity writes k to a new file at path in libp2p's own key encoding
// (crypto.MarshalPrivateKey), readable by its owner only (mode 0600). It
// refuses to overwrite an existing file: a peer ID lost that way is lost
// for good.
func SaveIdentity(path string, k crypto.PrivKey) error {
	b, err := crypto.MarshalPrivateKey(k)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrIdentity, path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	return nil
}

// LoadIdentity reads a key written by SaveIdentity. It refuses a missing
// file, one that others may read or write (its mode must not go beyond
// 0600), and one that does not hold a libp2p private key, each with an
// error that says which.
func LoadIdentity(path string) (crypto.PrivKey, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: key file %s does not exist (create one with 'peer id init --out %s')", ErrIdentity, path, path)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrIdentity, err)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: key file %s is not a regular file", ErrIdentity, path)
	case st.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%w: key file %s has mode %04o: others may read it; run 'chmod 600 %s'", ErrIdentity, path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIdentity, err)
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: key file %s does not hold a libp2p private key: %w", ErrIdentity, path, err)
	}
	return k, nil
}
