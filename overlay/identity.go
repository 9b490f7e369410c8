package overlay

import (
	"errors"
	"fmt"

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
	return writeKeyFile(path, b, ErrIdentity)
}

// LoadIdentity reads a key written by SaveIdentity. It refuses a missing
// file, one that others may read or write (its mode must not go beyond
// 0600), and one that does not hold a libp2p private key, each with an
// error that says which.
func LoadIdentity(path string) (crypto.PrivKey, error) {
	b, err := readKeyFile(path, "peer id init", ErrIdentity)
	if err != nil {
		return nil, err
	}
	k, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: key file %s does not hold a libp2p private key: %w", ErrIdentity, path, err)
	}
	return k, nil
}
