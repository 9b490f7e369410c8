package overlay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Key files (an identity, a pre-shared key) are secrets: written once,
// readable by their owner only, and refused when others may read them.

// writeKeyFile writes b to a new file at path, mode 0600; it never
// overwrites a file. Errors wrap sentinel.
func writeKeyFile(path string, b []byte, sentinel error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return nil
}

// readKeyFile reads the key file at path. It refuses a missing file
// (saying that create, a command, makes one), one that is not a regular
// file, and one that others may read or write (mode beyond 0600). Errors
// wrap sentinel.
func readKeyFile(path, create string, sentinel error) ([]byte, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: key file %s does not exist (create one with '%s --out %s')", sentinel, path, create, path)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", sentinel, err)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: key file %s is not a regular file", sentinel, path)
	case st.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%w: key file %s has mode %04o: others may read it; run 'chmod 600 %s'", sentinel, path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sentinel, err)
	}
	return b, nil
}
