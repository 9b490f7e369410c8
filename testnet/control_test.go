package testnet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/internal/cputime"
	"github.com/superpeer/superpeer/overlay"
)

// A report survives its trip through JSON, empty peer IDs included.
func TestReportRoundTrip(t *testing.T) {
	a, b := peer.ID("\x00\x24\x08\x01\x12\x20aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), peer.ID("\x00\x24\x08\x01\x12\x20bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	cases := []struct {
		s overlay.State
		e overlay.ElectionStats
	}{
		{overlay.State{Self: a}, overlay.ElectionStats{}},
		{
			overlay.State{Self: a, Role: overlay.RoleSuperpeer, S: 4, K: 2, ClusterKey: dhtselect.KeyOf(a), Prefix: "01",
				Superpeer: peer.AddrInfo{ID: a}, Members: []peer.ID{a, b}, Size: dhtselect.Estimate{N: 9, Source: "membership"},
				Evaluations: 5, Lookups: 3, Queries: 7, Coord: coordinate.NewCoordinate(coordinate.DefaultConfig()), Token: -1},
			overlay.ElectionStats{Algorithm: "bully", Lookup: a, First: b, Leader: b, Role: "leader", Term: 2, Demoted: []peer.ID{a, b},
				Timeout: 1500 * time.Millisecond, Sent: map[string]uint64{"OK": 3}, Dropped: 1, Throttled: 4, Flooded: 6},
		},
	}
	// The second case sets every field, so that one added to either type
	// and not carried fails the round trip rather than read as zero.
	for _, v := range []any{cases[1].s, cases[1].e} {
		rv := reflect.ValueOf(v)
		for i := range rv.NumField() {
			if rv.Field(i).IsZero() {
				t.Errorf("%T.%s is not set in the full case", v, rv.Type().Field(i).Name)
			}
		}
	}
	for _, c := range cases {
		ws, we := toWire(c.s, c.e)
		line, err := json.Marshal(controlReport{Addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/1")}, State: ws, Election: we})
		if err != nil {
			t.Fatal(err)
		}
		var r controlReport
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		s, e, err := r.decode()
		if err != nil {
			t.Fatal(err)
		}
		c.s.Superpeer.Addrs = nil // not carried
		if !reflect.DeepEqual(s, c.s) || !reflect.DeepEqual(e, c.e) {
			t.Errorf("round trip:\n got %+v %+v\nwant %+v %+v", s, e, c.s, c.e)
		}
	}
	bad := `{"state":{"Self":"not-a-peer-id"}}`
	var r controlReport
	if err := json.Unmarshal([]byte(bad), &r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.decode(); err == nil {
		t.Error("a report with a malformed peer ID decoded")
	}
}

func TestParseCommand(t *testing.T) {
	a := peer.ID("\x00\x24\x08\x01\x12\x20aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	verb, ids, err := parseCommand(strings.TrimSpace(command("block", a, a)))
	if err != nil || verb != "block" || len(ids) != 2 || ids[0] != a {
		t.Errorf("parse(command(block a a)) = %q %v %v", verb, ids, err)
	}
	for _, line := range []string{"", "drop " + a.String(), "block nonsense"} {
		if _, _, err := parseCommand(line); err == nil {
			t.Errorf("parseCommand(%q) accepted", line)
		}
	}
}

// Two real nodes on loopback, one of them driven by Control over pipes, as
// a node process is: it reports its state, "block" cuts the other node off
// (the open connection closes, and neither side can dial again), "unblock"
// lets it back, and the end of the input stops Control.
func TestControlDrivesANode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two libp2p nodes on loopback")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	loop := ma.StringCast("/ip4/127.0.0.1/tcp/0")
	quiet := overlay.WithLogger(slog.New(slog.DiscardHandler))
	gate := NewBlocker()
	a, err := overlay.New(ctx, overlay.WithListenAddrs(loop), overlay.WithConnectionGater(gate), quiet,
		overlay.WithIntervals(time.Second, 200*time.Millisecond), overlay.WithTarget(dhtselect.Target{Superpeers: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := overlay.New(ctx, overlay.WithListenAddrs(loop), overlay.WithBootstrap(peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()}), quiet,
		overlay.WithIntervals(time.Second, 200*time.Millisecond), overlay.WithTarget(dhtselect.Target{Superpeers: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Control(ctx, a, gate, inR, outW) }()
	reports := make(chan controlReport, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r controlReport
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Errorf("bad report %q: %v", sc.Text(), err)
				return
			}
			if _, _, err := r.decode(); err != nil {
				t.Errorf("bad report %q: %v", sc.Text(), err)
				return
			}
			reports <- r
		}
	}()
	// The reports follow the node's state until both name the same
	// superpeer, and carry the process's CPU time.
	var cpu int64
	for agreed := false; !agreed; {
		select {
		case r := <-reports:
			s, _, _ := r.decode()
			agreed = len(s.Members) == 2 && s.Superpeer.ID != "" && s.Superpeer.ID == b.State().Superpeer.ID
			if r.CPUMicros < cpu {
				t.Errorf("a report's CPU time went back from %d to %d µs", cpu, r.CPUMicros)
			}
			cpu = r.CPUMicros
		case <-ctx.Done():
			t.Fatalf("no report of a two-node cluster; last state %+v", a.State())
		}
	}
	if _, ok := cputime.Self(); ok && cpu <= 0 {
		t.Errorf("reports' CPU time %d µs, want it read", cpu)
	}
	// This process (the node's) spends 20 ms more CPU time, and a report
	// says so (TestReportDue: even when nothing else changed).
	spin := cpu + 20_000
	for burnt := cpu <= 0; !burnt; {
		c, _ := cputime.Self()
		burnt = c.Microseconds() >= spin
	}
	for seen := cpu <= 0; !seen; {
		select {
		case r := <-reports:
			seen = r.CPUMicros >= spin
		case <-ctx.Done():
			t.Fatalf("no report of the CPU time spent (%d µs, want at least %d)", cpu, spin)
		}
	}
	connected := func() bool { return a.Host().Network().Connectedness(b.ID()) == network.Connected }
	if _, err := io.WriteString(inW, command("block", b.ID())); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, func() error {
		if connected() {
			return errors.New("still connected after block")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Host().Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: a.Host().Addrs()}); err == nil && connected() {
		t.Error("the blocked node connected again")
	}
	if err := a.Host().Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()}); err == nil {
		t.Error("the node dialled a peer it blocks")
	}
	if _, err := io.WriteString(inW, command("unblock", b.ID())); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(ctx, func() error {
		return a.Host().Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Host().Addrs()})
	}); err != nil {
		t.Fatalf("no connection after unblock: %v", err)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Control returned %v at the end of its input, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("Control did not return at the end of its input")
	}
	outR.Close()
}

// A report is due when something in it changed, or when the process's CPU
// time grew by reportCPUStep; a little CPU time alone is not news.
func TestReportDue(t *testing.T) {
	last := controlReport{State: wireState{Self: "a"}, Goroutines: 10, CPUMicros: 5000}
	if !reportDue(last, nil) {
		t.Error("the first report is not due")
	}
	for _, c := range []struct {
		what string
		edit func(*controlReport)
		due  bool
	}{
		{"nothing changed", func(*controlReport) {}, false},
		{"a little CPU time", func(r *controlReport) { r.CPUMicros += reportCPUStep.Microseconds() - 1 }, false},
		{"reportCPUStep of CPU time", func(r *controlReport) { r.CPUMicros += reportCPUStep.Microseconds() }, true},
		{"the goroutines", func(r *controlReport) { r.Goroutines++ }, true},
		{"a ban, and a little CPU time", func(r *controlReport) { r.Banned = []string{"b"}; r.CPUMicros++ }, true},
	} {
		rep := last
		c.edit(&rep)
		if got := reportDue(rep, &last); got != c.due {
			t.Errorf("%s: due %v, want %v", c.what, got, c.due)
		}
	}
}
