package testnet

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// liveStreams holds the streams a node opened and has not closed, and
// resets them: those to one peer when the fabric cuts its link, all of
// them when the node stops, and, once stopped, every later one at once.
// The other end sees the reset (a real transport's end of a connection).
func TestLiveStreams(t *testing.T) {
	mn := mocknet.New()
	defer mn.Close()
	a, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	b, err := mn.GenPeer()
	if err != nil {
		t.Fatal(err)
	}
	if err := mn.LinkAll(); err != nil {
		t.Fatal(err)
	}
	started, ended := make(chan struct{}, 4), make(chan error, 4)
	b.SetStreamHandler("/test", func(s network.Stream) {
		started <- struct{}{}
		_, err := io.ReadAll(s)
		ended <- err
	})
	live := &liveStreams{}
	h := countingHost{a, newTraffic().node(a.ID()), live}
	held := func() (n int) {
		live.mu.Lock()
		defer live.mu.Unlock()
		for _, m := range live.by {
			n += len(m)
		}
		return n
	}
	open := func() network.Stream {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := h.NewStream(ctx, b.ID(), "/test")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	await := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("the other end did not %s", what)
		}
	}
	wait := func() error {
		t.Helper()
		select {
		case err := <-ended:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the other end did not end")
			return nil
		}
	}

	s := open()
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	await("start", started)
	if held() != 1 {
		t.Fatalf("%d streams held after one opened, want 1", held())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("closed stream: the other end read %v, want EOF", err)
	}
	if held() != 0 {
		t.Fatalf("%d streams held after Close, want 0", held())
	}

	s = open()
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	await("start", started)
	live.reset(a.ID()) // another peer: nothing to reset
	if held() != 1 {
		t.Fatalf("%d streams held after a reset of another peer's, want 1", held())
	}
	live.reset(b.ID())
	if err := wait(); err == nil {
		t.Fatal("after the reset of the streams to b, b's end read to EOF, want an error")
	}
	if held() != 0 {
		t.Fatalf("%d streams held after their reset, want 0", held())
	}

	live.reset("") // the node stopped
	s = open()
	if _, err := s.Write([]byte("x")); err == nil {
		t.Error("a stream opened after the node stopped takes writes, want it reset")
	}
	if held() != 0 {
		t.Fatalf("%d streams held after the node stopped, want 0", held())
	}
}
