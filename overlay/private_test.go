package overlay

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
)

func TestPSKFile(t *testing.T) {
	dir := t.TempDir()
	k, err := NewPSK()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "swarm.key")
	if err := SavePSK(path, k); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	got, err := LoadPSK(path)
	if err != nil || !bytes.Equal(got, k) {
		t.Fatalf("LoadPSK = %x, %v; want %x", got, err, k)
	}
	// The format is the standard one: pnet reads it.
	if d, err := pnet.DecodeV1PSK(bytes.NewReader(EncodePSK(k))); err != nil || !bytes.Equal(d, k) {
		t.Errorf("pnet.DecodeV1PSK(EncodePSK) = %x, %v", d, err)
	}
	if err := SavePSK(path, k); !errors.Is(err, ErrPSK) || !strings.Contains(err.Error(), "exists") {
		t.Errorf("SavePSK over an existing file: %v, want ErrPSK saying it exists", err)
	}
	if err := SavePSK(filepath.Join(dir, "short"), k[:16]); !errors.Is(err, ErrPSK) {
		t.Errorf("SavePSK of 16 bytes: %v, want ErrPSK", err)
	}

	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "does not exist"},
		{write("open", string(EncodePSK(k)), 0o644), "mode 0644"},
		{write("garbage", "hello\n", 0o600), "not a swarm key"},
		{write("short", "/key/swarm/psk/1.0.0/\n/base16/\n0123\n", 0o600), "not a swarm key"},
		{write("encoding", "/key/swarm/psk/1.0.0/\n/base32/\nAAAA\n", 0o600), "not a swarm key"},
		{dir, "not a regular file"},
	} {
		if _, err := LoadPSK(tc.path); !errors.Is(err, ErrPSK) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadPSK(%s): %v, want ErrPSK saying %q", filepath.Base(tc.path), err, tc.want)
		}
	}
}

// With a pre-shared key the default listen addresses are TCP only; given
// ones stay, for Validate to judge.
func TestPrivateListen(t *testing.T) {
	c := DefaultConfig()
	c.privateListen()
	if len(c.ListenAddrs) != 2 {
		t.Fatalf("no key: %v, want the two defaults", c.ListenAddrs)
	}
	c.PSK = make([]byte, 32)
	c.privateListen()
	if len(c.ListenAddrs) != 1 || !c.ListenAddrs[0].Equal(ma.StringCast("/ip4/0.0.0.0/tcp/0")) {
		t.Errorf("with a key: %v, want TCP only", c.ListenAddrs)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	quic := ma.StringCast("/ip4/127.0.0.1/udp/0/quic-v1")
	c.ListenAddrs = []ma.Multiaddr{quic}
	c.privateListen()
	if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "QUIC") {
		t.Errorf("QUIC with a key: %v, want ErrConfig naming QUIC", err)
	}
}

// A private node on loopback TCP: a node with the same key joins it; a
// host without the key, or with another, cannot even connect.
func TestPrivateSwarm(t *testing.T) {
	ctx := context.Background()
	k, _ := NewPSK()
	other, _ := NewPSK()
	a, _ := twoNodes(t, WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithPSK(k), WithIntervals(200*time.Millisecond, 200*time.Millisecond))
	for name, o := range map[string][]libp2p.Option{"no key": nil, "another key": {libp2p.PrivateNetwork(other)}} {
		h := plainHost(t, o...)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := h.Connect(cctx, peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()})
		cancel()
		if err == nil || a.Host().Network().Connectedness(h.ID()) == network.Connected {
			t.Errorf("%s: connected to the private node (err %v)", name, err)
		}
	}
}

// An allowlist lets the listed peer in and keeps another out.
func TestAllowlist(t *testing.T) {
	ctx := context.Background()
	kb, _, _ := crypto.GenerateEd25519Key(nil)
	idb, _ := peer.IDFromPrivateKey(kb)
	a, err := New(ctx, WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithAllowlist(idb), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	info := peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()}
	b := plainHost(t, libp2p.Identity(kb))
	if err := b.Connect(ctx, info); err != nil {
		t.Errorf("allowed peer: %v", err)
	}
	c := plainHost(t)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Connect(cctx, info); err == nil {
		// The handshake may complete before a closes the connection.
		waitFor(t, "the node to close the stranger's connection", func() bool {
			return a.Host().Network().Connectedness(c.ID()) != network.Connected
		})
	}
	if _, err := a.Host().Network().DialPeer(ctx, c.ID()); err == nil {
		t.Error("the node dialled a peer off its allowlist")
	}
}

// twoNodes starts node a, then node b bootstrapped from a, both with opts
// (after a target of one superpeer and a quiet logger), closed with the
// test, and returns them once each counts both as its cluster's members.
func twoNodes(t *testing.T, opts ...Option) (a, b *Node) {
	t.Helper()
	opts = append([]Option{WithTarget(dhtselect.Target{Superpeers: 1}), WithLogger(quiet)}, opts...)
	a, err := New(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = New(context.Background(), append(opts, WithBootstrapAddrs(a.P2PAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	waitFor(t, "the two nodes to know each other", func() bool {
		return len(a.State().Members) == 2 && len(b.State().Members) == 2
	})
	return a, b
}

// plainHost is a libp2p host on loopback TCP, closed with the test.
func plainHost(t *testing.T, opts ...libp2p.Option) host.Host {
	t.Helper()
	h, err := libp2p.New(append([]libp2p.Option{libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// waitFor polls cond until it holds; the minute is a bound against hangs,
// not a performance limit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
