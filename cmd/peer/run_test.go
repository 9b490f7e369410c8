package main

import (
	"path/filepath"
	"testing"
)

// The default data directory lies beside the identity file, named as it
// with the extension .data, and never is the identity file itself.
func TestDefaultDataDir(t *testing.T) {
	for identity, want := range map[string]string{
		"node1.key":          "node1.data",
		"/etc/peer/node.key": "/etc/peer/node.data",
		"keys/peer":          "keys/peer.data",
		"keys/a.b.key":       "keys/a.b.data",
		"keys/peer.data":     "keys/peer.data.data",
		"keys/.key":          "keys/.data",
	} {
		if got := defaultDataDir(filepath.FromSlash(identity)); got != filepath.FromSlash(want) {
			t.Errorf("defaultDataDir(%q) = %q, want %q", identity, got, want)
		}
	}
}
